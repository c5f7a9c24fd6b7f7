"""``dra.api`` is the one owner of the ``resource.k8s.io`` version lists: the versions the
collection reads and writes DRA objects in, the beta ones, and those whose requests hold
``exactly``. No other module of ``plugins/`` or ``gpufleet/`` writes two of them out.

Sources: the generated release data (``dra/releases``: the API lifecycle of each
release), k8s.io/api ``resource/{v1,v1beta2,v1beta1}/types.go``."""

from __future__ import annotations

import ast
import re

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import resource_versions

from tests.unit.source_literals import ROOT, literals, product_files

pytestmark = pytest.mark.unit

#: The owners: ``dra/resource_versions.py`` the versions the collection reads and writes
#: DRA objects in (no imports: the per-node modules ship it), ``dra/api.py`` what each
#: release before the generated data served.
OWNERS = {"plugins/module_utils/dra/api.py", "plugins/module_utils/dra/resource_versions.py"}
#: A resource.k8s.io version, bare or with its group.
VERSION = re.compile(r"^(?:resource\.k8s\.io/)?v1(?:alpha\d|beta\d)?$")
#: Two versions listed in one text (``"v1, v1beta2 or v1beta1"``).
LISTED_IN_TEXT = re.compile(r"\bv1(?:beta\d|alpha\d)?\b(?:,| or| and)\s+v1(?:beta|alpha)\d")


def version_lists(tree: ast.AST) -> list[tuple[int, list[str]]]:
    """(line, versions) of each tuple, list, set or dict-keys literal naming two or more."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            elts = node.elts
        elif isinstance(node, ast.Dict):
            elts = [k for k in node.keys if k is not None]
        else:
            continue
        found = [
            e.value
            for e in elts
            if isinstance(e, ast.Constant) and isinstance(e.value, str) and VERSION.match(e.value)
        ]
        if len(found) >= 2:
            out.append((node.lineno, found))
    return out


def test_the_lists() -> None:
    assert resource_versions.OBJECT_RESOURCE_VERSIONS == ("v1", "v1beta2", "v1beta1")
    assert resource_versions.BETA_RESOURCE_VERSIONS == ("v1beta2", "v1beta1")
    assert {"v1", "v1beta2"} == resource_versions.EXACTLY_REQUEST_VERSIONS
    assert (
        set(resource_versions.OBJECT_RESOURCE_VERSIONS)
        >= resource_versions.EXACTLY_REQUEST_VERSIONS
    )
    assert set(resource_versions.OBJECT_RESOURCE_VERSIONS) <= set(dra_api.ALL_RESOURCE_VERSIONS)


def test_the_scan_finds_a_written_out_list() -> None:
    tree = ast.parse('A = ("v1", "v1beta2")\nB = {"resource.k8s.io/v1beta1": 1, "v1alpha3": 2}')
    assert version_lists(tree) == [
        (1, ["v1", "v1beta2"]),
        (2, ["resource.k8s.io/v1beta1", "v1alpha3"]),
    ]
    assert LISTED_IN_TEXT.search("picks resource.k8s.io v1, v1beta2 or v1beta1")
    assert not LISTED_IN_TEXT.search("resource.k8s.io/v1 is served and on by default")


def test_resource_versions_are_listed_only_in_dra_api() -> None:
    lists = [
        f"{rel}:{line}: {found}"
        for p in product_files()
        if (rel := p.relative_to(ROOT).as_posix()) not in OWNERS and "/dra/releases/" not in rel
        for line, found in version_lists(ast.parse(p.read_text(encoding="utf-8")))
    ]
    texts = [
        str(lit)
        for lit in literals()
        if lit.path not in OWNERS
        and not lit.path.startswith("plugins/module_utils/dra/releases/")
        and LISTED_IN_TEXT.search(lit.text)
    ]
    assert lists == [] and texts == []


def _served(minor: int) -> dict[str, bool]:
    return {a.version: a.enabled_by_default for a in dra_api.served_api_versions(f"1.{minor}")}


@pytest.mark.parametrize(
    ("minor", "expected"),
    [
        (30, {"v1alpha2": False}),
        (31, {"v1alpha3": False}),
        (32, {"v1alpha3": False, "v1beta1": False}),
        (33, {"v1alpha3": False, "v1beta1": False, "v1beta2": False}),
        (34, {"v1": True, "v1alpha3": False, "v1beta1": False, "v1beta2": False}),
        (37, {"v1": True, "v1alpha3": False, "v1beta1": False, "v1beta2": False}),
        (38, {"v1": True, "v1alpha3": False, "v1beta2": False}),
    ],
)
def test_served_resource_api_versions(minor: int, expected: dict[str, bool]) -> None:
    assert _served(minor) == expected


def test_device_taint_rule_moves_from_alpha_to_v1() -> None:
    def versions_with(minor: int) -> list[str]:
        return [
            a.version
            for a in dra_api.served_api_versions(f"1.{minor}")
            if "DeviceTaintRule" in a.kinds
        ]

    assert versions_with(33) == ["v1alpha3"]
    assert versions_with(36) == ["v1beta2", "v1alpha3"]
    assert versions_with(37) == ["v1", "v1beta2", "v1alpha3"]


@pytest.mark.parametrize(
    ("minor", "preferred", "shape", "v1beta3_accepted"),
    [
        (30, "kubeadm.k8s.io/v1beta3", "map", True),
        (31, "kubeadm.k8s.io/v1beta4", "list", True),
        (36, "kubeadm.k8s.io/v1beta4", "list", True),
        (37, "kubeadm.k8s.io/v1beta4", "list", False),
    ],
)
def test_kubeadm_config_api(minor: int, preferred: str, shape: str, v1beta3_accepted: bool) -> None:
    api = dra_api.kubeadm_config_api(f"1.{minor}.0")
    assert api.preferred == preferred
    assert api.extra_args_shape == shape
    assert ("kubeadm.k8s.io/v1beta3" in api.accepted) is v1beta3_accepted


def test_kubeadm_v1_is_experimental_in_137() -> None:
    api = dra_api.kubeadm_config_api("1.37.2")
    assert api.experimental == ("kubeadm.k8s.io/v1",)
    assert api.registered == ("kubeadm.k8s.io/v1", "kubeadm.k8s.io/v1beta4")
