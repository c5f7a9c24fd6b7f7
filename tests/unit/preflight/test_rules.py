"""Preflight rules: each rule with small inputs, the merge across hosts, and the tables the
rules rely on (role defaults, removed variables) against the roles themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.filter.preflight import preflight_check
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    chart as dra_driver_chart,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
GPU = ["k8s_cluster", "kube_node", "gpu_nodes", "gpu_h200"]
CP = ["k8s_cluster", "kube_control_plane"]
GOOD = {"kubeadm_kubernetes_version": "1.37.2"}


def _host(
    variables: dict[str, Any], groups: list[str] | None = None, **kw: Any
) -> list[pp.Problem]:
    return pf.check_host("gpu-1", groups or GPU, {**GOOD, **variables}, **kw)


def _rules(problems: list[pp.Problem]) -> dict[str, pp.Problem]:
    return {p.rule: p for p in problems}


# --- release -----------------------------------------------------------------------------


def test_a_supported_release_with_defaults_has_no_problem() -> None:
    assert _host({}) == []


@pytest.mark.parametrize(("release", "word"), [("1.31.4", "older"), ("1.39.0", "newer")])
def test_release_outside_the_provision_range_names_the_variable(release: str, word: str) -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": release}))["release-range"]
    assert p.severity == pp.ERROR
    assert p.variable == "kubeadm_kubernetes_version" and p.value == release
    assert word in p.message and "1.32 to 1.38" in p.message
    assert "1.32" in p.fix and "1.38" in p.fix


def test_malformed_release_is_refused() -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": "v1.thirty"}))["release-format"]
    assert (p.variable, p.value) == ("kubeadm_kubernetes_version", "v1.thirty")


def test_release_variables_of_two_roles_must_agree() -> None:
    p = _rules(_host({"dra_feature_gates_kubernetes_version": "1.36.1"}))["release-mismatch"]
    assert p.variable == "dra_feature_gates_kubernetes_version" and p.value == "1.36.1"
    assert "kubeadm_kubernetes_version=1.37.2" in p.message


def test_bootstrap_without_a_release_is_refused() -> None:
    problems = pf.check_host("cp-1", CP, {"site_bootstrap": True})
    p = _rules(problems)["release-missing"]
    assert p.variable == "kubeadm_kubernetes_version"
    assert p.fix.startswith(
        'set the cluster\'s release once, gpufleet_kubernetes_version: "1.37.2"'
    )
    # the cluster-wide release reaches the kubeadm role through its default
    assert "release-missing" not in _rules(
        pf.check_host("cp-1", CP, {"site_bootstrap": True, "gpufleet_kubernetes_version": "1.37.2"})
    )


def test_hosts_planning_for_different_releases_are_refused() -> None:
    hosts = {
        "cp-1": {"groups": CP, "variables": {"kubeadm_kubernetes_version": "1.37.2"}},
        "gpu-1": {"groups": GPU, "variables": {"kubeadm_kubernetes_version": "1.36.3"}},
    }
    p = _rules(pf.check_inventory(hosts))["release-hosts-differ"]
    assert p.severity == pp.ERROR and p.value == ["1.36.3", "1.37.2"]
    assert "1.36.3 on gpu-1" in p.message and "1.37.2 on cp-1" in p.message


# --- gates -------------------------------------------------------------------------------


def test_a_gate_the_release_removed_is_refused_with_the_model_reason() -> None:
    p = _rules(_host({"dra_feature_gates_extra": {"DRAControlPlaneController": True}}))[
        "gates-release"
    ]
    assert p.variable == "dra_feature_gates_extra"
    assert "DRAControlPlaneController" in p.message


def test_kubeadm_and_dra_feature_gates_asking_for_different_gates_is_a_warning() -> None:
    p = _rules(_host({"site_bootstrap": True, "dra_feature_gates_features": ["prioritized-list"]}))[
        "gates-differ"
    ]
    assert p.severity == pp.WARNING and p.variable == "kubeadm_dra_features"
    assert "dra_feature_gates_features" in p.message


def test_cgroup_v1_before_1_31_is_a_noop_warning() -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": "1.30.4", "kubeadm_allow_cgroup_v1": True}))[
        "cgroup-v1-noop"
    ]
    assert p.severity == pp.WARNING and p.variable == "kubeadm_allow_cgroup_v1"
    assert "1.31" in p.message
    assert "cgroup-v1-noop" not in _rules(_host({"kubeadm_allow_cgroup_v1": True}))


def test_a_non_boolean_switch_names_the_variable() -> None:
    p = _rules(_host({"kubeadm_allow_cgroup_v1": "sometimes"}))["value-type"]
    assert (p.variable, p.value) == ("kubeadm_allow_cgroup_v1", "sometimes")


# --- host stack --------------------------------------------------------------------------


def test_driver_branch_below_565_is_refused_on_gpu_nodes_only() -> None:
    bad = {"nvidia_driver_branch": "550", "nvidia_driver_version": "550.144.03"}
    p = _rules(_host(bad))["driver-pin"]
    assert p.severity == pp.ERROR and p.variable == "nvidia_driver_branch" and p.value == "550"
    assert "565" in p.message and "580" in p.fix
    assert pf.check_host("cp-1", CP, {**GOOD, **bad}) == []
    assert "driver-pin" not in _rules(_host({**bad, "site_install_gpu_stack": False}))


def test_driver_release_outside_its_branch_is_refused() -> None:
    p = _rules(_host({"nvidia_driver_branch": "570"}))["driver-pin"]
    assert p.variable == "nvidia_driver_version" and p.value == "580.159.04"


def test_installed_driver_below_565_is_refused_when_the_stack_is_not_installed() -> None:
    problems = _host({"site_install_gpu_stack": False}, driver_version="550.144.03")
    p = _rules(problems)["driver-installed-branch"]
    assert p.value == "550.144.03" and "565" in p.message


def test_toolkit_older_than_1_17_4_on_containerd_2_is_refused() -> None:
    p = _rules(
        _host(
            {
                "nvidia_container_toolkit_version": "1.17.3",
                "nvidia_container_toolkit_containerd_version": "2.1.4",
            }
        )
    )["toolkit-containerd"]
    assert (p.variable, p.value) == ("nvidia_container_toolkit_version", "1.17.3")
    assert "1.17.4" in p.fix and "2.1.4" in p.message
    ok = _host(
        {
            "nvidia_container_toolkit_version": "1.17.3",
            "nvidia_container_toolkit_containerd_version": "1.7.27",
        }
    )
    assert "toolkit-containerd" not in _rules(ok)


def test_cdi_on_containerd_1_6_is_refused() -> None:
    p = _rules(_host({"nvidia_container_toolkit_containerd_version": "1.6.20"}))[
        "toolkit-containerd"
    ]
    assert p.variable == "nvidia_container_toolkit_enable_cdi"


def test_gpu_operator_and_host_stack_together_are_refused() -> None:
    p = _rules(_host({"dra_driver_gpu_operator": True}))["gpu-operator-and-host-stack"]
    assert p.variable == "site_install_gpu_stack"
    assert "gpu-operator-and-host-stack" not in _rules(
        _host({"dra_driver_gpu_operator": True, "site_install_gpu_stack": False})
    )


# --- DRA driver chart and its gates --------------------------------------------------------


def test_chart_below_its_kubeversion_is_an_error() -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": "1.31.4"}))["chart-kubernetes"]
    assert ">=1.32.0" in p.message and p.variable == "kubeadm_kubernetes_version"


def test_release_below_the_documented_minimum_is_an_error_unless_accepted() -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": "1.34.1"}))["chart-kubernetes-docs"]
    assert p.severity == pp.ERROR and "1.34.2" in p.message
    assert "dra_driver_accept_below_documented_minimum" in p.fix
    accepted = _host(
        {"kubeadm_kubernetes_version": "1.33.5", "dra_driver_accept_below_documented_minimum": True}
    )
    assert _rules(accepted)["chart-kubernetes-docs"].severity == pp.WARNING


def test_unreadable_chart_version_is_refused() -> None:
    p = _rules(_host({"dra_driver_chart_version": "latest"}))["chart-version-format"]
    assert p.value == "latest"


def test_mps_sharing_with_dynamic_mig_is_refused_as_the_driver_role_refuses_it() -> None:
    p = _rules(_host({"dra_driver_sharing": ["mps"], "dra_driver_dynamic_mig": True}))[
        "driver-gates"
    ]
    assert p.severity == pp.ERROR and p.variable == "dra_driver_dynamic_mig" and p.value is True
    assert "refuses DynamicMIG together with MPSSupport" in p.message
    assert (
        p.fix == "turn one of them off (dra_driver_dynamic_mig=true or dra_driver_sharing item mps)"
    )


def test_passthrough_with_health_checks_is_refused() -> None:
    gates = {"PassthroughSupport": True, "NVMLDeviceHealthCheck": True}
    p = _rules(_host({"dra_driver_feature_gates": gates}))["driver-gates"]
    assert p.variable == "dra_driver_feature_gates" and p.value == gates
    assert "PassthroughSupport together with NVMLDeviceHealthCheck" in p.message


def test_unknown_sharing_strategy_is_refused_naming_the_choices() -> None:
    p = _rules(_host({"dra_driver_sharing": ["vgpu"]}))["driver-gates"]
    assert p.variable == "dra_driver_sharing" and p.value == ["vgpu"]
    assert "'vgpu' is not a sharing strategy" in p.message
    assert p.fix == "use items from ['time-slicing', 'mps']"


def test_a_sharing_strategy_the_role_refuses_is_refused_by_preflight_too() -> None:
    # the role's spelling is time-slicing; another spelling would pass preflight and then
    # stop the dra_driver role
    p = _rules(_host({"dra_driver_sharing": ["timeslicing"]}))["driver-gates"]
    assert "'timeslicing' is not a sharing strategy" in p.message
    assert "driver-gates" not in _rules(_host({"dra_driver_sharing": ["time-slicing"]}))


def test_dynamic_mig_needs_a_chart_that_has_it() -> None:
    p = _rules(_host({"dra_driver_dynamic_mig": True, "dra_driver_chart_version": "25.8.1"}))[
        "driver-gates"
    ]
    assert p.variable == "dra_driver_chart_version" and p.value == "25.8.1"
    assert "does not know the feature gate DynamicMIG" in p.message
    assert p.fix.startswith("use chart 25.12.0 or later")
    ok = _host({"dra_driver_dynamic_mig": True, "dra_driver_chart_version": "25.12.0"})
    assert "driver-gates" not in _rules(ok)


def test_dynamic_mig_needs_partitionable_devices_before_1_36() -> None:
    base = {"kubeadm_kubernetes_version": "1.35.4", "dra_driver_dynamic_mig": True}
    p = _rules(_host(base))["dynamic-mig-gate"]
    assert "DRAPartitionableDevices" in p.message and "partitionable-devices" in p.fix
    fixed = _host({**base, "dra_feature_gates_features": ["partitionable-devices"]})
    assert "dynamic-mig-gate" not in _rules(fixed)
    assert "dynamic-mig-gate" not in _rules(_host({"dra_driver_dynamic_mig": True}))


# --- MIG ---------------------------------------------------------------------------------


def test_mig_layout_that_does_not_fit_the_gpu_model_names_the_fix() -> None:
    p = _rules(_host({"gpu_model": "NVIDIA H200", "mig_layout": {"3g.71gb": 3}}))["mig-layout-fit"]
    assert p.variable == "mig_layout" and p.value == {"3g.71gb": 3}
    assert "does not fit on NVIDIA H200" in p.message
    assert "at most 2 x 3g.71gb" in p.fix


def test_mig_layout_with_a_profile_of_another_model_is_refused() -> None:
    p = _rules(_host({"gpu_model": "NVIDIA H200", "mig_layout": {"1g.10gb": 7}}))["mig-layout-fit"]
    assert "1g.18gb" in p.message  # the valid H200 profiles are listed


def test_mig_layout_uses_the_gathered_gpu_model_when_no_gpu_model_is_set() -> None:
    gpus = [{"name": "NVIDIA A100-SXM4-40GB"}]
    p = _rules(_host({"mig_layout": {"1g.18gb": 1}}, gpus=gpus))["mig-layout-fit"]
    assert "A100-SXM4-40GB" in p.message
    assert "mig-layout-fit" not in _rules(_host({"mig_layout": {"1g.5gb": 7}}, gpus=gpus))


def test_mig_layout_without_a_gpu_model_is_a_warning() -> None:
    p = _rules(_host({"mig_layout": {"1g.18gb": 7}}))["mig-gpu-model-unknown"]
    assert p.severity == pp.WARNING and "gpu_model" in p.fix


def test_unknown_gpu_model_is_refused_with_the_known_ones() -> None:
    p = _rules(_host({"gpu_model": "NVIDIA L4", "mig_layout": {"1g.18gb": 7}}))["mig-gpu-model"]
    assert p.variable == "gpu_model" and "NVIDIA H200" in p.message


MIG_CONFIG = {
    "version": "v1",
    "mig-configs": {
        "h200-big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.71gb": 2}}],
        "h200-ok": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}],
        "a100-only": [
            {
                "device-filter": "0x20B010DE",
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.5gb": 9},
            }
        ],
    },
}


def test_selected_mig_parted_config_is_checked_against_the_node_group_model() -> None:
    v = {
        "gpu_model": "NVIDIA H200",
        "mig_config": MIG_CONFIG,
        "mig_dra_plugin_namespace": "nvidia-dra-driver-gpu",
    }
    p = _rules(_host({**v, "mig_config_name": "h200-big"}))["mig-layout-fit"]
    assert p.variable == "mig_config.mig-configs.h200-big[0].mig-devices"
    assert p.value == {"4g.71gb": 2} and "mig_config_name=h200-big" in p.message
    # the A100 config does not fit an A100 either, but it is not the one this group selects
    assert _host({**v, "mig_config_name": "h200-ok"}) == []


def test_unknown_mig_config_name_lists_the_names() -> None:
    v = {"gpu_model": "h200", "mig_config": MIG_CONFIG, "mig_config_name": "nope"}
    p = _rules(_host(v))["mig-config-name"]
    assert p.value == "nope" and "h200-ok" in p.fix


def test_malformed_mig_config_names_the_key() -> None:
    bad = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig_enabled": True}]}}
    p = _rules(_host({"mig_config": bad, "mig_config_name": "x"}))["mig-config-format"]
    assert p.variable == "mig_config.mig-configs.x[0].mig_enabled"
    assert "mig-enabled" in p.fix


def test_mig_config_file_read_on_the_control_host_is_checked() -> None:
    text = yaml.safe_dump(MIG_CONFIG)
    v = {"gpu_model": "h200", "mig_config_file": "/srv/mig.yaml", "mig_config_name": "h200-big"}
    p = _rules(_host(v, mig_config_file_text=text))["mig-layout-fit"]
    assert p.value == {"4g.71gb": 2}
    missing = _rules(_host(v))["mig-config-file"]
    assert missing.value == "/srv/mig.yaml"


def test_mig_layout_and_mig_config_name_together_are_refused() -> None:
    v = {"gpu_model": "h200", "mig_layout": {"1g.18gb": 7}, "mig_config_name": "x"}
    p = _rules(_host(v))["mig-layout-and-config"]
    assert p.variable == "mig_layout" and "mig_config_name" in p.message


def test_mig_layout_with_mig_disabled_is_refused() -> None:
    p = _rules(_host({"mig_layout": {"1g.18gb": 7}, "mig_enabled": False}))["mig-layout-disabled"]
    assert p.value == {"1g.18gb": 7}


def test_mig_role_restarting_the_plugin_in_another_namespace_is_refused() -> None:
    v = {"gpu_model": "h200", "mig_layout": {"1g.18gb": 7}}
    p = _rules(_host({**v, "mig_dra_plugin_namespace": "elsewhere"}))["mig-plugin-namespace"]
    assert p.value == "elsewhere" and p.fix == "set mig_dra_plugin_namespace: nvidia-dra-driver-gpu"
    # the mig role's default follows dra_driver_namespace: a site that moves the driver
    # and leaves the mig role's variable unset is right
    moved = {k: x for k, x in v.items() if k != "mig_dra_plugin_namespace"}
    assert "mig-plugin-namespace" not in _rules(_host({**moved, "dra_driver_namespace": "gpu"}))
    assert "mig-plugin-namespace" not in _rules(_host(moved))
    same = {**v, "mig_dra_plugin_namespace": "gpu", "dra_driver_namespace": "gpu"}
    assert _host(same) == []


def test_static_mig_layout_with_dynamic_mig_is_refused() -> None:
    v = {"gpu_model": "h200", "mig_layout": {"1g.18gb": 7}, "dra_driver_dynamic_mig": True}
    p = _rules(_host(v))["mig-with-dynamic-mig"]
    assert p.variable == "mig_layout" and "DestroyUnknownMIGDevices" in p.message


# --- removed and unknown variables, merging ---------------------------------------------------


def test_removed_variable_names_its_replacement() -> None:
    removed = {"dra_feature_gates_extra_gates": {"new": "dra_feature_gates_extra", "fix": "same"}}
    p = _rules(_host({"dra_feature_gates_extra_gates": {"X": True}}, removed=removed))[
        "removed-variable"
    ]
    assert p.variable == "dra_feature_gates_extra_gates" and p.value == {"X": True}
    assert p.fix == "rename it to dra_feature_gates_extra (same)"


def test_misspelt_role_variable_is_a_warning_with_a_suggestion() -> None:
    problems = _host({"nvidia_driver_brnach": "580"}, known_variables=["nvidia_driver_branch"])
    p = _rules(problems)["unknown-variable"]
    assert p.severity == pp.WARNING and p.fix == "did you mean nvidia_driver_branch?"


def test_a_typo_inside_the_role_prefix_itself_gets_the_suggestion_too() -> None:
    known = ["nvidia_driver_branch"]
    problems = _host({"nvidia_drvier_branch": "580"}, known_variables=known)
    assert _rules(problems)["unknown-variable"].fix == "did you mean nvidia_driver_branch?"
    # a site variable with a family prefix and nothing close to it is the site's own
    assert "unknown-variable" not in _rules(_host({"nvidia_site_note": "x"}, known_variables=known))


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


# --- every gate judged against the release's full table --------------------------------


def test_a_removed_non_dra_gate_in_the_gate_variable_is_refused_naming_it() -> None:
    p = _rules(_host({"dra_feature_gates_extra": {"CSIMigrationPortworx": True}}))
    problem = p["gates-release"]
    assert problem.severity == pp.ERROR and problem.variable == "dra_feature_gates_extra"
    assert "CSIMigrationPortworx" in problem.message and "removed in 1.36" in problem.message
    assert "gpufleet gates plan --to" in problem.fix


def test_a_gate_no_release_registers_is_refused_with_the_close_name() -> None:
    p = _rules(_host({"dra_feature_gates_extra": {"CSIMigration": True}}))["gates-release"]
    assert "CSIMigration" in p.message and "did you mean CSIMigrationPortworx" in p.message


def test_a_non_dra_gate_the_release_registers_is_accepted() -> None:
    assert "gates-release" not in _rules(
        _host({"dra_feature_gates_extra": {"PodLevelResources": True}})
    )


def test_kubelet_extra_feature_gates_are_judged_for_the_kubelet() -> None:
    bad = {
        "site_bootstrap": True,
        "kubeadm_kubelet_extra": {
            "featureGates": {
                "CSIMigration": True,
                "ControllerManagerReleaseLeaderElectionLockOnExit": True,
                "ContextualLogging": True,
            }
        },
    }
    found = [p for p in _host(bad) if p.rule == "gates-release"]
    assert sorted(p.value for p in found) == [
        "CSIMigration=true",
        "ControllerManagerReleaseLeaderElectionLockOnExit=true",
    ]
    assert all(p.variable == "kubeadm_kubelet_extra" for p in found)
    cm_only = next(p for p in found if p.value.startswith("Controller"))
    assert "only kube-controller-manager registers" in cm_only.message
    shape = _rules(_host({**bad, "kubeadm_kubelet_extra": {"featureGates": ["x"]}}))
    assert shape["gates-shape"].variable == "kubeadm_kubelet_extra"


def test_containerd_17_is_refused_for_a_138_kubelet() -> None:
    p = _rules(
        _host(
            {
                "kubeadm_kubernetes_version": "1.38.0",
                "nvidia_container_toolkit_containerd_version": "1.7.28",
            }
        )
    )["containerd-release"]
    assert p.variable == "nvidia_container_toolkit_containerd_version" and p.value == "1.7.28"
    assert "containerd 2.0 or later" in p.message
    assert "containerd-release" not in _rules(
        _host({"nvidia_container_toolkit_containerd_version": "1.7.28"})
    )


def test_dynamic_mig_below_1_34_is_refused_by_preflight_as_the_driver_role_refuses_it() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

    v = {
        "kubeadm_kubernetes_version": "1.33.5",
        "dra_driver_dynamic_mig": True,
        "dra_driver_chart_version": "25.12.0",
        "dra_driver_accept_below_documented_minimum": True,
    }
    p = _rules(_host(v))["dynamic-mig-kubernetes"]
    assert p.variable == "dra_driver_dynamic_mig" and p.value is True
    assert p.message == (
        "DynamicMIG publishes partitionable devices, which the driver supports from "
        "Kubernetes 1.34 (the cluster is 1.33)"
    )
    with pytest.raises(dra_driver_chart.DraDriverError) as err:
        ddv.plan(
            {
                "chart_version": "25.12.0",
                "kubernetes_version": "1.33.5",
                "accept_below_documented_minimum": True,
                "dynamic_mig": True,
                "namespace": "nvidia-dra-driver-gpu",
            }
        )
    assert (err.value.variable, err.value.reason, err.value.fix) == (p.variable, p.message, p.fix)
