"""How containerd combines its main file and drop-ins, and which settings a change would lose
(``plugins/module_utils/nvidia/containerd_merge.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd_merge as cm

pytestmark = pytest.mark.unit

CRI = "io.containerd.grpc.v1.cri"
MAIN = "/etc/containerd/config.toml"
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
RUNC = {"plugins": {CRI: {"a": 1, "containerd": {"runtimes": {"runc": {"x": 1}}}}}}
NVIDIA = {"plugins": {CRI: {"containerd": {"runtimes": {"nvidia": {"y": 2}}}}}}


@pytest.mark.parametrize(("release", "replaces"), [((1, 7, 20), True), ((2, 0, 0), False)])
def test_containerd_1_replaces_a_plugin_section_on_import(release, replaces: bool) -> None:
    assert cm.replaces_sections(release) is replaces


def test_plugin_section_as_each_release_combines_the_files() -> None:
    assert cm.plugin_section([RUNC, NVIDIA], CRI, (1, 7, 20)) == {
        "containerd": {"runtimes": {"nvidia": {"y": 2}}}
    }
    assert cm.plugin_section([RUNC, NVIDIA], CRI, (2, 1, 0)) == {
        "a": 1,
        "containerd": {"runtimes": {"runc": {"x": 1}, "nvidia": {"y": 2}}},
    }


def test_load_order_puts_the_dropin_among_the_files_the_glob_finds() -> None:
    existing = ["/etc/containerd/conf.d/10-a.toml", "/etc/containerd/conf.d/zz.toml"]
    order = cm.load_order(["/etc/containerd/conf.d/*.toml"], MAIN, DROPIN, glob=lambda p: existing)
    assert order == [existing[0], DROPIN, existing[1]]
    added = cm.load_order(
        [], MAIN, DROPIN, glob=lambda p: [], added_entry="/etc/containerd/conf.d/*.toml"
    )
    assert added == [DROPIN]


def test_leaves_by_key_path() -> None:
    assert cm.leaves({"a": {"b": 1, "c": [1]}, "d": 2}) == {
        ("a", "b"): 1,
        ("a", "c"): [1],
        ("d",): 2,
    }


def test_a_runtime_change_owns_its_runtime_cdi_and_with_default_the_default_runtime() -> None:
    owned = cm.owned_by_runtime_change(CRI, "nvidia", set_as_default=True)
    assert owned(("plugins", CRI, "containerd", "runtimes", "nvidia", "options"))
    assert owned(("plugins", CRI, "enable_cdi"))
    assert owned(("plugins", CRI, "containerd", "default_runtime_name"))
    assert not owned(("plugins", CRI, "containerd", "runtimes", "runc", "options"))
    not_default = cm.owned_by_runtime_change(CRI, "nvidia", set_as_default=False)
    assert not not_default(("plugins", CRI, "containerd", "default_runtime_name"))


def test_lost_settings_outside_the_change_are_named_and_imports_are_not_settings() -> None:
    owned = cm.owned_by_runtime_change(CRI, "nvidia", set_as_default=True)
    before = {"plugins": {CRI: {"a": 1, "enable_cdi": False}}, "imports": ["x"]}
    after = {"plugins": {CRI: {"enable_cdi": True}}, "imports": ["y"]}
    assert cm.lost_settings(before, after, owned) == [f"plugins.{CRI}.a: 1 -> '<absent>'"]
    assert cm.lost_settings(before, before, owned) == []
