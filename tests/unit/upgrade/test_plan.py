"""The rolling-upgrade planner (plugins/module_utils/upgrade/plan.py): the path, the
steps, their waves and batches, the DRA settings per step."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import input as upgrade_input
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import kubeadm_config as ukc
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import (
    kubeadm_config as upgrade_kubeadm,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import nodes as un
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import plan as up
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import waves as uw

pytestmark = pytest.mark.unit


def node(host, cp=False, kubelet="1.36.3", apiserver=None, kubeadm="1.36.3", gpus=0, **kw):
    if cp and apiserver is None:
        apiserver = kubelet
    return un.NodeState(host, host, cp, kubelet, apiserver, kubeadm, gpus, **kw)


def fleet(workers=4, gpus=8, version="1.36.3"):
    return [node("cp1", True, version, kubeadm=version)] + [
        node(f"w{i}", kubelet=version, kubeadm=version, gpus=gpus) for i in range(1, workers + 1)
    ]


# ------------------------------------------------------------------ path and refusals


def test_one_minor_step_has_packages_repo_and_upgrade_configuration():
    plan = up.build_plan("1.37.2", fleet(2))
    assert [s.version for s in plan.steps] == ["1.37.2"]
    step = plan.steps[0]
    assert step.source == "1.36.3"
    assert step.packages == {
        "kubeadm": "1.37.2-1.1",
        "kubelet": "1.37.2-1.1",
        "kubectl": "1.37.2-1.1",
    }
    assert step.repo_url == "https://pkgs.k8s.io/core:/stable:/v1.37/deb/"
    assert step.upgrade_configuration is True
    assert step.apply_host == "cp1"
    assert step.apply_command[:4] == ["kubeadm", "upgrade", "apply", "v1.37.2"]
    assert "--config" in step.apply_command and "--yes" in step.apply_command


def test_two_minors_need_a_release_for_the_minor_in_between():
    nodes = fleet(1, version="1.35.4")
    with pytest.raises(upgrade_input.UpgradePlanError) as err:
        up.build_plan("1.37.2", nodes)
    assert "skipping minor 1.36" in err.value.reason
    assert "--via 1.36" in err.value.fix
    plan = up.build_plan("1.37.2", nodes, via=["1.36.3"])
    assert plan.to_dict()["path"] == ["1.36.3", "1.37.2"]
    assert [s.source for s in plan.steps] == ["1.35.4", "1.36.3"]
    assert plan.steps[0].repo_url.endswith("/v1.36/deb/")


def test_via_outside_the_path_is_refused():
    with pytest.raises(upgrade_input.UpgradePlanError, match=r"--via 1\.37\.0 is not between"):
        up.build_plan("1.37.2", fleet(1, version="1.35.4"), via=["1.36.3", "1.37.0"])


def test_downgrade_is_refused_naming_the_host_and_component():
    nodes = fleet(1)
    nodes[1] = node("w1", kubelet="1.36.3", kubeadm="1.37.2")
    with pytest.raises(upgrade_input.UpgradePlanError) as err:
        up.build_plan("1.37.1", nodes)
    assert "kubeadm on w1 runs 1.37.2" in err.value.reason
    assert "downgrades" in err.value.reason


@pytest.mark.parametrize("target", ["1.39.0", "1.31.0", "1.25.3"])
def test_target_outside_the_model_is_refused(target):
    with pytest.raises(upgrade_input.UpgradePlanError, match="outside the releases"):
        up.build_plan(target, fleet(1))


def test_target_must_be_an_exact_release():
    with pytest.raises(upgrade_input.UpgradePlanError, match="names a minor"):
        up.build_plan("1.37", fleet(1))


def test_up_to_date_cluster_has_no_steps():
    plan = up.build_plan("1.37.2", fleet(2, version="1.37.2"))
    assert plan.up_to_date and plan.to_dict()["path"] == []


def test_patch_upgrade_within_a_minor_is_one_step():
    plan = up.build_plan("1.37.2", fleet(1, version="1.37.0"))
    assert [s.version for s in plan.steps] == ["1.37.2"]
    assert plan.steps[0].transition["from"] == "1.37.0"


# ------------------------------------------------------------------ resume


def test_resume_skips_nodes_already_at_the_target_and_does_not_apply_twice():
    nodes = [
        node("cp1", True, "1.37.2", kubeadm="1.37.2"),
        node("w1", kubelet="1.37.2", kubeadm="1.37.2", gpus=8),
        node("w2", kubelet="1.36.3", kubeadm="1.37.2", gpus=8),
    ]
    step = up.build_plan("1.37.2", nodes).steps[0]
    by_host = {n.host: n for n in step.nodes}
    assert by_host["cp1"].skip and by_host["w1"].skip
    assert not by_host["w2"].skip
    assert step.apply_host is None
    assert [w.hosts for w in step.waves] == [["w2"]]


def test_node_left_cordoned_at_the_target_is_resumed_not_skipped():
    nodes = [
        node("cp1", True, "1.37.2", kubeadm="1.37.2"),
        node("w1", kubelet="1.37.2", kubeadm="1.37.2", gpus=8),
        node("w2", kubelet="1.37.2", kubeadm="1.37.2", gpus=8, unschedulable=True),
    ]
    assert up.build_plan("1.37.2", nodes).up_to_date
    plan = up.build_plan("1.37.2", nodes, resume_hosts=["w2", "not-in-inventory"])
    assert not plan.up_to_date and plan.to_dict()["path"] == ["1.37.2"]
    step = plan.steps[0]
    by_host = {n.host: n for n in step.nodes}
    assert by_host["cp1"].skip and by_host["w1"].skip and not by_host["w1"].resume
    assert by_host["w2"].resume and not by_host["w2"].skip
    assert by_host["w2"].reason == uw.RESUME_REASON
    assert "uncordon" in by_host["w2"].actions
    assert step.apply_host is None
    assert not any("kubeadm upgrade apply" in w for w in step.warnings)
    # already cordoned: resuming it drains nothing more
    assert [(w.hosts, w.gpu_devices_drained) for w in step.waves] == [(["w2"], 0)]
    assert step.serial == [1]
    assert step.to_dict()["nodes"][2]["resume"] is True


def test_resume_host_behind_the_target_is_upgraded_as_usual():
    nodes = [
        node("cp1", True, "1.37.2", kubeadm="1.37.2"),
        node("w1", kubelet="1.36.3", kubeadm="1.37.2", gpus=8, unschedulable=True),
    ]
    step = up.build_plan("1.37.2", nodes, resume_hosts=["w1"]).steps[0]
    w1 = next(n for n in step.nodes if n.host == "w1")
    assert not w1.skip and not w1.resume and w1.reason == ""


def test_control_plane_left_cordoned_is_resumed_without_kubeadm_upgrade():
    nodes = [node("cp1", True, "1.37.2", kubeadm="1.37.2", unschedulable=True)]
    step = up.build_plan("1.37.2", nodes, resume_hosts=["cp1"]).steps[0]
    (cp,) = step.nodes
    assert cp.resume and cp.role == uw.CONTROL_PLANE and step.apply_host is None
    assert not any(a.startswith("kubeadm upgrade") for a in cp.actions)


def test_second_control_plane_runs_upgrade_node_once_apply_is_done():
    nodes = [
        node("cp1", True, "1.37.2", kubeadm="1.37.2"),
        node("cp2", True, "1.36.3", kubeadm="1.36.3"),
        node("w1", kubelet="1.36.3"),
    ]
    step = up.build_plan("1.37.2", nodes).steps[0]
    cp2 = next(n for n in step.nodes if n.host == "cp2")
    assert cp2.role == uw.CONTROL_PLANE
    assert "kubeadm upgrade node" in cp2.actions
    assert step.apply_host is None


def test_control_planes_come_first_one_per_wave_then_workers():
    nodes = [node("cp1", True), node("cp2", True), node("cp3", True), *fleet(3)[1:]]
    step = up.build_plan("1.37.2", nodes, batch_size=3).steps[0]
    assert [(w.kind, w.hosts) for w in step.waves] == [
        ("first-control-plane", ["cp1"]),
        ("control-plane", ["cp2"]),
        ("control-plane", ["cp3"]),
        ("worker", ["w1", "w2", "w3"]),
    ]
    assert step.serial == [3]


# ------------------------------------------------------------------ batches and GPU floor


def test_gpu_floor_cuts_batches_short():
    # 4 workers x 8 GPUs = 32; floor 50% -> at most 16 drained at once -> 2 nodes per batch
    step = up.build_plan("1.37.2", fleet(4), batch_size=4, min_gpu_available_percent=50).steps[0]
    assert step.serial == [2, 2]
    assert [w.gpu_available_percent for w in step.waves if w.kind == "worker"] == [50.0, 50.0]


def test_gpu_floor_counts_nodes_cordoned_before_the_upgrade():
    nodes = fleet(4)
    nodes[4] = node("w4", gpus=8, unschedulable=True)
    # 32 total, 8 already unschedulable; floor 50% leaves room for one more 8-GPU node
    step = up.build_plan("1.37.2", nodes, batch_size=4, min_gpu_available_percent=50).steps[0]
    # w4 costs nothing more (already cordoned), so it joins the last batch
    assert step.serial == [1, 1, 2]
    assert step.waves[-1].hosts == ["w3", "w4"]


def test_a_node_that_alone_breaks_the_floor_is_refused():
    nodes = [node("cp1", True), node("w1", gpus=8), node("w2", gpus=2)]
    with pytest.raises(upgrade_input.UpgradePlanError) as err:
        up.build_plan("1.37.2", nodes, min_gpu_available_percent=50)
    assert "draining w1 alone" in err.value.reason
    assert "upgrade_min_gpu_available_percent=50" in err.value.reason


def test_no_gpus_means_no_floor():
    nodes = [node("cp1", True), node("w1"), node("w2")]
    step = up.build_plan("1.37.2", nodes, batch_size="100%", min_gpu_available_percent=90).steps[0]
    assert step.serial == [2]


# ------------------------------------------------------------------ DRA settings


def test_removed_gate_and_unserved_api_found_in_the_configmap_are_marked_for_removal():
    # Field cases: a gate the target removed (kubernetes#100988 kind) and a runtime-config
    # entry for a group/version the target does not serve (kubernetes#56800 kind).
    current = ukc.settings_from_configmaps(
        {
            "apiServer": {
                "extraArgs": [
                    {
                        "name": "feature-gates",
                        "value": "DRAControlPlaneController=true,MyGate=true",
                    },
                    {"name": "runtime-config", "value": "resource.k8s.io/v1alpha2=true"},
                ]
            }
        },
        {"featureGates": {"DynamicResourceAllocation": False}},
    )
    step = up.build_plan("1.37.2", fleet(1), current_settings=current).steps[0]
    api = step.sanitize["kube-apiserver"]
    assert [f["entry"] for f in api["remove"]] == [
        "DRAControlPlaneController=true",
        "MyGate=true",
        "resource.k8s.io/v1alpha2=true",
    ]
    assert "registers no feature gate MyGate" in api["remove"][1]["reason"]
    assert api["not_checked"] == []
    kubelet = step.sanitize["kubelet"]["remove"]
    assert [f["entry"] for f in kubelet] == ["DynamicResourceAllocation=false"]
    assert "locked" in kubelet[0]["reason"]


def test_beta_gates_dropped_on_the_step_to_ga():
    # 1.33 -> 1.34: DynamicResourceAllocation goes GA and on by default; the plan drops the
    # =true entry and the runtime-config entries on every component that had them.
    nodes = fleet(1, version="1.33.13")
    step = up.build_plan("1.34.4", nodes).steps[0]
    removed = {
        (c["component"], c["gate"])
        for c in step.transition["gate_changes"]
        if c["action"] == "remove"
    }
    assert ("kube-apiserver", "DynamicResourceAllocation") in removed
    assert ("kubelet", "DynamicResourceAllocation") in removed
    drops = [c["entry"] for c in step.transition["runtime_config_changes"] if c["action"] == "drop"]
    assert "resource.k8s.io/v1beta1=true" in drops


def test_second_step_judges_what_the_first_step_left():
    current = {"kube-apiserver": {"feature_gates": {"DRAAdminAccess": True}, "runtime_config": []}}
    plan = up.build_plan(
        "1.37.2", fleet(1, version="1.35.4"), via=["1.36.3"], current_settings=current
    )
    # DRAAdminAccess=true is fine on 1.35 (beta) and locked to true on 1.36: advice, not removal
    assert plan.steps[0].sanitize["kube-apiserver"]["remove"] == []
    assert [f["entry"] for f in plan.steps[0].sanitize["kube-apiserver"]["advice"]] == [
        "DRAAdminAccess=true"
    ]


# ------------------------------------------------------------------ refusals of the API's view


def test_control_plane_without_apiserver_version_is_refused():
    with pytest.raises(upgrade_input.UpgradePlanError, match="no kube-apiserver version"):
        up.build_plan("1.37.2", [un.NodeState("cp", "cp", True, "1.36.3", None, "1.36.3")])


def test_current_skew_violation_is_reported():
    nodes = [node("cp1", True, "1.36.3"), node("w1", kubelet="1.37.2", kubeadm="1.37.2")]
    plan = up.build_plan("1.37.2", nodes)
    assert any("must not be newer" in w for w in plan.warnings)


@pytest.mark.parametrize(
    "target", ["1.37.2+abc", "1.38.0-beta.0+abc", "1.38.0-gamma.1", "1.38.0-rc"]
)
def test_build_metadata_and_other_pre_release_forms_are_refused_not_compared(target):
    with pytest.raises(upgrade_input.UpgradePlanError) as err:
        up.build_plan(target, fleet(1, version="1.37.2"))
    assert repr(target) in err.value.reason
    assert "exist only for releases and their alpha, beta and rc pre-releases" in err.value.reason
    assert "MAJOR.MINOR.PATCH" in err.value.fix


def test_a_pre_release_target_is_packaged_below_its_release_and_allowed_to_kubeadm():
    plan = up.build_plan("1.38.0-beta.0", fleet(1, version="1.37.2"))
    step = plan.steps[0]
    assert step.version == "1.38.0-beta.0" and step.source == "1.37.2"
    assert step.packages == dict.fromkeys(("kubeadm", "kubelet", "kubectl"), "1.38.0~beta.0-1.1")
    assert step.repo_url == "https://pkgs.k8s.io/core:/stable:/v1.38/deb/"
    assert step.apply_command[:4] == ["kubeadm", "upgrade", "apply", "v1.38.0-beta.0"]
    doc = upgrade_kubeadm.upgrade_configuration("1.38.0-beta.0")
    assert doc["apply"]["allowExperimentalUpgrades"] is True
    assert doc["plan"]["allowExperimentalUpgrades"] is True
    assert (
        "allowExperimentalUpgrades" not in upgrade_kubeadm.upgrade_configuration("1.37.2")["apply"]
    )
    assert upgrade_input.package_version("1.38.0-rc.1", "2.1") == "1.38.0~rc.1-2.1"


def test_a_pre_release_to_pass_through_is_a_step_of_its_own():
    plan = up.build_plan("1.37.2", fleet(1, version="1.35.4"), via=["1.36.0-rc.1"])
    assert [s.version for s in plan.steps] == ["1.36.0-rc.1", "1.37.2"]


def test_two_releases_of_one_minor_to_pass_through_are_refused():
    with pytest.raises(
        upgrade_input.UpgradePlanError, match=r"two releases of 1\.36: 1\.36\.3 and 1\.36\.1"
    ):
        up.build_plan("1.37.2", fleet(1, version="1.35.4"), via=["1.36.3", "1.36.1"])


def test_messages_name_the_inputs_as_given():
    nodes = fleet(2)
    names = {"min_gpu_available_percent": "--min-gpu-available-percent"}
    with pytest.raises(upgrade_input.UpgradePlanError) as err:
        up.build_plan("1.37.2", nodes, min_gpu_available_percent=90, input_names=names)
    assert err.value.reason.startswith("--min-gpu-available-percent=90: draining")
    assert "lower --min-gpu-available-percent" in err.value.fix


# ------------------------------------------------------------------ metric series


def test_the_step_to_1_37_names_each_renamed_series_and_its_successor():
    step = up.build_plan("1.37.2", fleet(1)).steps[0]
    renamed = [w for w in step.warnings if "no longer serves the metric" in w]
    assert renamed == [
        "kube-controller-manager of 1.37 no longer serves the metric "
        "resourceclaim_controller_creates_total: dashboards and alerts that read "
        "resourceclaim_controller_creates_total see nothing after the upgrade; read "
        "dynamic_resource_allocation_resourceclaim_creates_total",
        "kube-controller-manager of 1.37 no longer serves the metric "
        "resourceclaim_controller_resource_claims: dashboards and alerts that read "
        "resourceclaim_controller_resource_claims see nothing after the upgrade; read "
        "dynamic_resource_allocation_resource_claims",
        "kube-scheduler of 1.37 no longer serves the metric "
        "scheduler_resourceclaim_creates_total: dashboards and alerts that read "
        "scheduler_resourceclaim_creates_total see nothing after the upgrade; read "
        "dynamic_resource_allocation_resourceclaim_creates_total",
    ]
    assert renamed[0] in step.to_dict()["warnings"]


def test_each_step_of_a_longer_path_warns_for_its_own_renames():
    plan = up.build_plan("1.37.2", fleet(1, version="1.35.4"), via=["1.36.3"])
    first, second = ([w for w in s.warnings if "metric" in w] for s in plan.steps)
    assert first == []  # 1.36 keeps every name 1.35 serves
    assert len(second) == 3 and all("of 1.37 no longer serves" in w for w in second)


def test_the_part_of_the_new_series_is_named_where_the_old_counted_less():
    warnings = up.metric_series_warnings(33, 34)
    assert (
        "kube-controller-manager of 1.34 no longer serves the metric "
        "resourceclaim_controller_create_failures_total: dashboards and alerts that read "
        "resourceclaim_controller_create_failures_total see nothing after the upgrade; read "
        'resourceclaim_controller_creates_total{status="failure"}'
    ) in warnings
    assert any(
        'read resourceclaim_controller_resource_claims{allocated="true"}' in w for w in warnings
    )
    assert not any("dra_resource_claims_in_use" in w for w in warnings)  # gained, not lost


@pytest.mark.parametrize(("a", "b"), [(37, 37), (37, 38), (30, 31), (38, 39)])
def test_no_metric_warning_without_a_rename_or_outside_the_table(a, b):
    assert up.metric_series_warnings(a, b) == []


def test_a_patch_step_warns_about_no_metric():
    plan = up.build_plan("1.37.2", fleet(1, version="1.37.0"))
    assert [w for s in plan.steps for w in s.warnings if "metric" in w] == []
