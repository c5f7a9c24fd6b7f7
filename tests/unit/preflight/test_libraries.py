"""The preflight rule of the control host's Python libraries
(``plugins/module_utils/preflight/libraries.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import libraries as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

from tests.unit.plugin_imports import ROOT, third_party_of

pytestmark = pytest.mark.unit

PYTHON = "/opt/ansible/bin/python3"
ALL_FOUND = dict.fromkeys(pl.import_names(), True)
HOSTS = {"gpu-1": {"groups": ["k8s_cluster", "kube_node", "gpu_nodes"], "variables": {}}}


def tasks(node: Any) -> Iterator[dict[str, Any]]:
    """Every task of a tasks file, those inside blocks, rescues and always too."""
    for task in node or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from tasks(task.get(key))


def control_host_modules() -> set[str]:
    """The collection's modules that the roles run with ``delegate_to: localhost``."""
    out = set()
    for path in (ROOT / "roles").glob("*/tasks/*.yml"):
        for task in tasks(yaml.safe_load(path.read_text(encoding="utf-8"))):
            if task.get("delegate_to") == "localhost":
                out |= {
                    k.removeprefix("gpufleet.cluster.")
                    for k in task
                    if k.startswith("gpufleet.cluster.")
                }
    return out


def test_every_library_found_is_no_problem() -> None:
    assert pl.library_problems(ALL_FOUND, PYTHON) == []


def test_a_missing_library_is_an_error_with_the_install_command_of_its_range() -> None:
    (found,) = pl.library_problems({**ALL_FOUND, "kubernetes": False}, PYTHON)
    assert (found.rule, found.severity, found.variable, found.value) == (
        "controller-library",
        pp.ERROR,
        "ansible_playbook_python",
        PYTHON,
    )
    assert "cannot import kubernetes (package kubernetes)" in found.message
    assert found.fix == "/opt/ansible/bin/python3 -m pip install 'kubernetes>=30,<38'"


def test_names_of_one_package_make_one_problem() -> None:
    (found,) = pl.library_problems({**ALL_FOUND, "celpy": False, "lark": False}, PYTHON)
    assert "cannot import celpy, lark (package cel-python)" in found.message
    assert found.fix == "/opt/ansible/bin/python3 -m pip install 'cel-python>=0.4,<0.6'"


def test_requirement_lines_are_read_by_distribution_name() -> None:
    text = "# comment\n\nPyYAML>=6 # inline\nKube_Lib==1.0\n"
    assert pl.requirements(text) == {"pyyaml": "PyYAML>=6", "kube-lib": "Kube_Lib==1.0"}
    (found,) = pl.library_problems({"yaml": False}, PYTHON, requirements_text=text)
    assert found.fix == "/opt/ansible/bin/python3 -m pip install 'PyYAML>=6'"


def test_check_inventory_reports_the_control_host_libraries() -> None:
    controller = {"python": PYTHON, "importable": {**ALL_FOUND, "yaml": False}}
    problems = pf.check_inventory(HOSTS, controller=controller)
    assert [(p.rule, p.value, p.hosts) for p in problems if p.rule == "controller-library"] == [
        ("controller-library", PYTHON, ())
    ]
    assert not [p for p in pf.check_inventory(HOSTS) if p.rule == "controller-library"]


def test_every_package_of_the_requirements_file_has_its_import_names() -> None:
    listed = pl.requirements(pl.REQUIREMENTS_FILE.read_text(encoding="utf-8"))
    assert set(listed) == set(pl.IMPORTS)


def test_the_rule_asks_for_every_library_the_control_host_modules_import() -> None:
    modules = control_host_modules()
    assert {"gpu_node_labels", "upgrade_node_state", "upgrade_uncordon"} <= modules
    imported = {
        name: module
        for module in sorted(modules)
        for name in third_party_of(f"modules/{module}.py")
    }
    assert set(imported) - set(pl.import_names()) == set(), imported


def test_a_missing_recommended_library_is_a_warning_that_says_what_runs_instead() -> None:
    (found,) = pl.library_problems({**ALL_FOUND, "msgspec": False}, PYTHON)
    assert (found.rule, found.severity) == ("controller-library", pp.WARNING)
    assert "cannot import msgspec (package msgspec)" in found.message
    assert "standard library's json" in found.message
    assert found.fix == "/opt/ansible/bin/python3 -m pip install 'msgspec>=0.18,<0.24'"
