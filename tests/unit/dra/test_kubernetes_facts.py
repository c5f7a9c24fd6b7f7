"""Kubernetes version facts live in ``dra/``: a release from which a behaviour exists
(``*_SINCE``), a range of minors (``*_MIN_MINOR``/``*_MAX_MINOR``) and the CEL environment
per release (``*INTRODUCED``) are assigned a number only in a module of ``dra/``, which
names the Kubernetes source of each."""

from __future__ import annotations

import ast
import re

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import cel_env
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import kubernetes_facts as kf

from tests.unit.source_literals import ROOT, product_files

pytestmark = pytest.mark.unit

#: Names of a Kubernetes version fact.
FACT_NAME = re.compile(r"(?:_SINCE|_MIN_MINOR|_MAX_MINOR|INTRODUCED)$")
OWNER_PACKAGE = "plugins/module_utils/dra/"


def numeric(node: ast.AST) -> bool:
    """A literal made of numbers only: ``31``, ``(1, 34)``, ``{("semver", 2): 34}``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.Tuple):
        return all(numeric(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.values) and all(numeric(v) for v in node.values)
    return False


def fact_assignments(tree: ast.Module) -> list[tuple[int, str]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and FACT_NAME.search(t.id) and numeric(node.value):
                    out.append((node.lineno, t.id))
    return out


def test_the_scan_finds_a_restated_fact() -> None:
    tree = ast.parse('FAIL_CGROUP_V1_SINCE = 31\n_OVERLOAD_INTRODUCED = {("semver", 2): 34}\n')
    assert fact_assignments(tree) == [(1, "FAIL_CGROUP_V1_SINCE"), (2, "_OVERLOAD_INTRODUCED")]
    assert fact_assignments(ast.parse("X_SINCE = other.X_SINCE\n")) == []


def test_kubernetes_version_facts_are_assigned_only_in_dra() -> None:
    found = [
        f"{rel}:{line}: {name}"
        for p in product_files()
        if not (rel := p.relative_to(ROOT).as_posix()).startswith(OWNER_PACKAGE)
        for line, name in fact_assignments(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert found == []


def test_the_facts() -> None:
    assert kf.FAIL_CGROUP_V1_SINCE == 31
    assert kf.UPGRADE_CONFIGURATION_SINCE == 31
    assert dra_core.MIN_MINOR <= kf.UPGRADE_MIN_MINOR < dra_core.PROVISION_MAX_MINOR
    assert cel_env.OVERLOAD_INTRODUCED == {("semver", 2): 34, ("isSemver", 2): 34}
    assert all(m >= cel_env.OLDEST_MINOR for m in cel_env.OVERLOAD_INTRODUCED.values())
