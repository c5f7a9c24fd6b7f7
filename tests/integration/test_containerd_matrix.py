"""The NVIDIA runtime drop-in, judged by the real containerd of every release fleets run.

For containerd 1.7, 2.0, 2.1, 2.3 and the pinned 2.x (``tools.containerd`` and its
``matrix`` in gpufleet/build/releases.yaml) and NVIDIA's real ``nvidia-ctk``
(``tools.nvidia-container-toolkit``), every case of ``tests/harness/containerd_matrix.py``
(an earlier drop-in with site settings, an nvidia entry with options of its own, CDI
switched off in the main file, a main file without imports; each in every configuration
version the release reads) is written by

* the ``containerd_runtime_config`` module with its own writer,
* the module with ``writer: auto`` (nvidia-ctk where the rule says it is right),
* NVIDIA's ``nvidia-ctk runtime configure --config-source=file`` on the files themselves,

and ``containerd config dump`` of that release says whether it loads, has the runtime and
CDI in effect, gives the runtime runc's ``SystemdCgroup`` and keeps every setting that
was in effect before. The module's two ways must be right everywhere; nvidia-ctk alone
must be wrong exactly where :func:`containerd_config.choose_writer` refuses it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd as cc
from ansible_collections.gpufleet.cluster.plugins.modules import containerd_runtime_config

from gpufleet.build import binaries, release_pins
from tests.harness import containerd_matrix as matrix
from tests.harness.ansible_module import run_module

pytestmark = pytest.mark.integration

CONTAINERD = release_pins.load_releases().tool("containerd")
VERSIONS = list(CONTAINERD.versions)


def _binary(name: str, version: str | None = None) -> Path:
    path = binaries.binary_path(name, version)
    if not path.is_file():
        tool = "containerd" if name == "containerd" else "nvidia-container-toolkit"
        pytest.skip(
            f"{name} {version or ''} is not built: run lab/build-binaries --profile ci "
            f"(or --tools {tool})"
        )
    return path


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch):
    """Put one containerd release and the built nvidia-ctk first on PATH."""

    def use(version: str) -> tuple[Path, Path]:
        containerd, ctk = _binary("containerd", version), _binary("nvidia-ctk")
        monkeypatch.setenv("PATH", f"{containerd.parent}:{ctk.parent}:{os.environ['PATH']}")
        return containerd, ctk

    return use


def _module(version: str, writer: str, seen: list[dict]):
    def write(main: Path, dropin: Path) -> None:
        args = {
            "config": str(main),
            "dropin": str(dropin),
            "containerd_version": version,
            "writer": writer,
            "backup": False,
        }
        result = run_module(containerd_runtime_config, args)
        assert not result.get("failed"), result.get("msg")
        again = run_module(containerd_runtime_config, args)
        assert not again.get("failed") and not again["changed"], f"not idempotent: {again}"
        seen.append(result)

    return write


def _cases(version: str) -> list[matrix.Case]:
    return matrix.cases(cc.parse_containerd_version(version))


@pytest.mark.parametrize("writer", ["gpufleet", "auto"])
@pytest.mark.parametrize("version", VERSIONS)
def test_the_module_is_right_on_every_case(version, writer, on_path, tmp_path, capsys) -> None:
    containerd, _ = on_path(version)
    failures, writers = {}, []
    for case in _cases(version):
        seen: list[dict] = []
        problems = matrix.judge(
            containerd, tmp_path / case.name, case, _module(version, writer, seen)
        )
        writers += [r["writer"] for r in seen]
        if problems:
            failures[case.name] = problems
    expected = cc.choose_writer(writer, version, "1.20.2")[0]
    with capsys.disabled():
        print(
            f"\ncontainerd {version} writer={writer}: {len(_cases(version))} cases, "
            f"{len(failures)} wrong, drop-ins by {sorted(set(writers))}"
        )
    assert not failures, failures
    assert set(writers) == {expected}


@pytest.mark.parametrize("version", VERSIONS)
def test_nvidia_ctk_alone_is_wrong_where_the_rule_refuses_it(version, on_path, tmp_path) -> None:
    containerd, ctk = on_path(version)
    wrong = {
        case.name: problems
        for case in _cases(version)
        if (
            problems := matrix.judge(
                containerd, tmp_path / case.name, case, matrix.nvidia_ctk_in_place(ctk)
            )
        )
    }
    refused = cc.choose_writer("auto", version, "1.20.2")[0] == "gpufleet"
    if refused:
        assert wrong, (
            f"nvidia-ctk is right on every case of containerd {version}; the rule "
            "(containerd_config.choose_writer) can let auto use it there"
        )
        assert all(p.startswith("lost ") for problems in wrong.values() for p in problems), wrong
    else:
        assert not wrong, wrong


@pytest.mark.parametrize("version", VERSIONS)
def test_a_later_dropin_that_would_undo_the_runtime_is_refused(version, on_path, tmp_path) -> None:
    containerd, _ = on_path(version)
    release = cc.parse_containerd_version(version)
    config_version = matrix.config_versions(release)[0]
    plugin = cc.cri_plugin(config_version)
    case = next(c for c in _cases(version) if c.name.endswith("site-dropin"))
    main = case.write(tmp_path)
    later = tmp_path / "conf.d" / "zz-late.toml"
    later.write_text(
        f'version = {config_version}\n[plugins."{plugin}".containerd.runtimes.nvidia.options]\n'
        '  BinaryName = "/opt/other/runtime"\n',
        encoding="utf-8",
    )
    before = sorted((p.name, p.read_text()) for p in tmp_path.rglob("*.toml"))
    result = run_module(
        containerd_runtime_config,
        {
            "config": str(main),
            "dropin": str(tmp_path / matrix.DROPIN),
            "containerd_version": version,
        },
    )
    assert result.get("failed"), result
    assert "zz-late.toml" in result["msg"] and "fix:" in result["msg"], result["msg"]
    assert sorted((p.name, p.read_text()) for p in tmp_path.rglob("*.toml")) == before
    assert matrix.dump(containerd, main)[0] is not None


def test_a_write_that_would_lose_a_setting_is_put_back(on_path, tmp_path, monkeypatch) -> None:
    """The module's last guard: whatever wrote the drop-in, containerd's own dump after
    the write must keep every setting; here a drop-in that switches a site setting off
    (standing in for a writer that got it wrong) is written, found out, and undone."""
    version = CONTAINERD.version
    on_path(version)
    case = next(c for c in _cases(version) if c.name == "v3-site-dropin")
    main = case.write(tmp_path)
    plugin = cc.cri_plugin(3)
    real_plan = cc.plan_dropin

    def wrong_plan(**kw):
        plan = real_plan(**kw)
        data = cc.loads(plan.dropin_text)
        data["plugins"][plugin]["device_ownership_from_security_context"] = False
        plan.dropin_text = cc.dump_toml(data)
        return plan

    monkeypatch.setattr(containerd_runtime_config, "plan_dropin", wrong_plan)
    before = {p: p.read_text() for p in tmp_path.rglob("*.toml")}
    result = run_module(
        containerd_runtime_config,
        {
            "config": str(main),
            "dropin": str(tmp_path / matrix.DROPIN),
            "containerd_version": version,
            "writer": "gpufleet",
            "backup": False,
        },
    )
    assert result.get("failed"), result
    assert "device_ownership_from_security_context: True -> False" in result["msg"]
    assert "put back" in result["msg"] and "fix:" in result["msg"]
    assert {p: p.read_text() for p in tmp_path.rglob("*.toml")} == before


def test_a_write_containerd_cannot_read_is_put_back(on_path, tmp_path, monkeypatch) -> None:
    version = CONTAINERD.version
    on_path(version)
    case = next(c for c in _cases(version) if c.name == "v3-site-dropin")
    main = case.write(tmp_path)
    real_plan = cc.plan_dropin

    def broken_plan(**kw):
        plan = real_plan(**kw)
        plan.dropin_text += '\n[plugins."io.containerd.cri.v1.runtime"]\n  x = 1\n'
        return plan

    monkeypatch.setattr(containerd_runtime_config, "plan_dropin", broken_plan)
    before = {p: p.read_text() for p in tmp_path.rglob("*.toml")}
    args = {"config": str(main), "dropin": str(tmp_path / matrix.DROPIN), "writer": "gpufleet"}
    result = run_module(containerd_runtime_config, {**args, "containerd_version": version})
    assert result.get("failed"), result
    assert "containerd config dump fails" in result["msg"] and "already exists" in result["msg"]
    assert "fix: correct the file containerd names" in result["msg"]
    assert {p: p.read_text() for p in tmp_path.rglob("*.toml")} == before
