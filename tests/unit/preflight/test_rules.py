"""Running the preflight rules (``plugins/module_utils/preflight/rules.py``): a host with good
defaults, the merge across hosts, the filter, and the tables the rules rely on (role
defaults, removed variables) against the roles themselves. Each rule's own tests are in the
file of its module (``test_release.py``, ``test_stack.py``, ``test_mig.py``, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.filter.preflight import preflight_check
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

from tests.unit.preflight.hosts import CP, GOOD, GPU, _host, _rules

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]

# --- release -----------------------------------------------------------------------------


def test_a_supported_release_with_defaults_has_no_problem() -> None:
    assert _host({}) == []


def test_hosts_planning_for_different_releases_are_refused() -> None:
    hosts = {
        "cp-1": {"groups": CP, "variables": {"kubeadm_kubernetes_version": "1.37.2"}},
        "gpu-1": {"groups": GPU, "variables": {"kubeadm_kubernetes_version": "1.36.3"}},
    }
    p = _rules(pf.check_inventory(hosts))["release-hosts-differ"]
    assert p.severity == pp.ERROR and p.value == ["1.36.3", "1.37.2"]
    assert "1.36.3 on gpu-1" in p.message and "1.37.2 on cp-1" in p.message


# --- removed and unknown variables, merging ---------------------------------------------------


def test_inventory_problems_are_merged_across_hosts_and_errors_come_first() -> None:
    bad = {"kubeadm_kubernetes_version": "1.37.2", "nvidia_driver_branch": "550"}
    hosts = {
        f"gpu-{i}": {"groups": GPU, "variables": {**bad, "nvidia_driver_brnach": "1"}}
        for i in range(8)
    }
    hosts["cp-1"] = {"groups": CP, "variables": {"kubeadm_kubernetes_version": "1.37.2"}}
    problems = pf.check_inventory(hosts, known_variables=["nvidia_driver_branch"])
    assert [p.severity for p in problems] == [pp.ERROR, pp.WARNING]
    assert problems[0].hosts == tuple(f"gpu-{i}" for i in range(8))
    report = pf.format_report(problems, hosts)
    assert report.splitlines()[0] == "preflight: 1 error(s), 1 warning(s)"
    assert "(on group gpu_h200 (8 hosts))" in report


def test_an_inventory_without_gpu_nodes_is_refused() -> None:
    p = _rules(pf.check_inventory({"cp-1": {"groups": CP, "variables": GOOD}}))["gpu-group-empty"]
    assert p.value == "gpu_nodes"


def test_filter_returns_errors_warnings_and_one_report() -> None:
    hosts = {"gpu-1": {"groups": GPU, "variables": {**GOOD, "kube_version": "1.30"}}}
    out = preflight_check(hosts, {"kube_version": "kubeadm_kubernetes_version"})
    assert out["ok"] is False
    assert [e["variable"] for e in out["errors"]] == ["kube_version"]
    assert "ERROR [removed-variable] kube_version=" in out["report"]


# --- the tables against the roles ------------------------------------------------------------


def _role_options() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for spec in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        doc = yaml.safe_load(spec.read_text())
        for entry in doc["argument_specs"].values():
            out.update(entry.get("options") or {})
    return out


def test_settings_take_the_roles_own_defaults_and_render_their_templates() -> None:
    settings = pp.settings_for({})
    assert settings["dra_driver_namespace"] == "nvidia-dra-driver-gpu"
    assert settings["mig_dra_plugin_namespace"] == "nvidia-dra-driver-gpu"
    assert settings["dra_driver_chart_version"] == "0.4.0"
    assert settings["site_install_gpu_stack"] is True
    moved = pp.settings_for({"dra_driver_namespace": "gpu-ops"})
    assert moved["mig_dra_plugin_namespace"] == "gpu-ops"
    assert pp.settings_for({"mig_dra_plugin_namespace": "x"})["mig_dra_plugin_namespace"] == "x"


def test_a_changed_role_default_changes_the_verdict(tmp_path: Path) -> None:
    role = tmp_path / "dra_driver" / "defaults"
    role.mkdir(parents=True)
    (role / "main.yml").write_text(
        "dra_driver_chart_version: '25.8.1'\ndra_driver_lookup: \"{{ lookup('env', 'HOME') }}\"\n"
    )
    settings = pp.settings_for({"dra_driver_dynamic_mig": True}, tmp_path)
    assert settings["dra_driver_chart_version"] == "25.8.1"
    assert "dra_driver_lookup" not in settings  # needs Ansible to render: left unset


def test_role_defaults_equal_the_argument_specs_of_the_roles_present() -> None:
    options = _role_options()
    compared = 0
    for name, default in pp.role_defaults().items():
        if name in options and "default" in options[name] and "{{" not in str(default):
            assert options[name]["default"] == default, name
            compared += 1
    assert compared >= 40


def test_removed_variables_point_to_variables_a_role_declares() -> None:
    table = yaml.safe_load((ROOT / "roles/preflight/defaults/main.yml").read_text())[
        "preflight_removed_variables"
    ]
    options = set(_role_options()) | set(pp.SITE_DEFAULTS) | set(pp.role_defaults())
    assert "dra_feature_gates_extra_gates" in table
    for old, entry in table.items():
        assert old not in options, f"{old} is still declared by a role"
        assert not entry.get("new") or entry["new"] in options, (old, entry["new"])
