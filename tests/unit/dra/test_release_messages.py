"""Messages that name a Kubernetes release take it from the version model.

The scan reads the string literals of ``plugins/module_utils``, ``plugins/modules`` and the
CLI's commands that are neither docstrings nor module documentation, and fails on a release
number written out (``1.32``, ``1.37.2``) outside the version model's own package
(``plugins/module_utils/dra/``: the generated ``releases/v1_*`` data and the hand-kept
parts, which hold the facts). The queries the messages ask are checked against
``served_api_versions``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    release_data as k8s_releases,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("plugins/module_utils", "plugins/modules", "plugins/filter", "gpufleet/commands")
RELEASE = re.compile(r"(?<![\d.])1\.(2\d|3\d)(\.\d+)?(?!\d)")
#: Files that state facts older than the model's range (1.26): not release decisions.
HISTORY = {
    "plugins/module_utils/kubeadm/bootstrap.py": "systemd is kubeadm's default since 1.22",
    "plugins/module_utils/kube/scheduler_config.py": "scheduler config APIs removed in 1.29",
}
_DOC_NAMES = {"DOCUMENTATION", "EXAMPLES", "RETURN"}


def _model_file(rel: str) -> bool:
    return rel.startswith("plugins/module_utils/dra/")


def _message_literals(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in _DOC_NAMES for t in node.targets
        ):
            skip.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def test_no_message_writes_a_release_out() -> None:
    found = []
    scanned = 0
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if _model_file(rel) or rel in HISTORY:
                continue
            scanned += rel.startswith("plugins/module_utils/")
            for line, text in _message_literals(path):
                if RELEASE.search(text):
                    found.append(f"{rel}:{line}: {text[:80]!r}")
    assert scanned > 50, f"only {scanned} module_utils files scanned: the scan misses packages"
    assert found == [], "releases written out in messages (ask the version model):\n" + "\n".join(
        found
    )


def test_the_scan_finds_a_release_written_out(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""Doc 1.33."""\nMSG = "needs Kubernetes 1.34 or newer"\n', encoding="utf-8")
    assert [t for _, t in _message_literals(probe) if RELEASE.search(t)] == [
        "needs Kubernetes 1.34 or newer"
    ]


def _first_by_listing(kind: str, versions, by_default: bool):
    for minor in range(dra_core.MIN_MINOR, dra_core.MAX_MINOR + 1):
        for state in dra_api.served_api_versions(f"1.{minor}"):
            wanted = versions is None or state.version in versions
            if kind in state.kinds and wanted and (state.enabled_by_default or not by_default):
                return minor, state.version
    return None


@pytest.mark.parametrize(
    ("kind", "versions", "by_default"),
    [
        ("ResourceClaimTemplate", ("v1", "v1beta2", "v1beta1"), False),
        ("ResourceClaim", ("v1",), False),
        ("ResourceClaim", ("v1",), True),
        ("ResourceSlice", ("v1beta2", "v1beta1"), False),
        ("DeviceClass", None, False),
        ("NoSuchKind", None, False),
    ],
)
def test_first_minor_serving_agrees_with_the_listing(kind, versions, by_default) -> None:
    assert dra_api.first_minor_serving(kind, versions, by_default=by_default) == _first_by_listing(
        kind, versions, by_default
    )


def test_first_release_serving_refuses_what_no_release_serves() -> None:
    with pytest.raises(dra_core.VersionModelError, match="NoSuchKind"):
        dra_api.first_release_serving("NoSuchKind")


def test_example_release_is_the_newest_final_generated_release() -> None:
    final = [r for r in k8s_releases.releases().values() if not r.prerelease]
    newest = max(final, key=lambda r: r.minor)
    assert dra_core.example_release() == newest.release.removeprefix("v")
    assert not RELEASE.sub("", dra_core.example_release())  # a bare MAJOR.MINOR.PATCH
    assert dra_core.parse_version(dra_core.example_release()).patch is not None
