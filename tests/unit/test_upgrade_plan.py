"""The rolling-upgrade planner (plugins/module_utils/upgrade_plan.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils import upgrade_plan as up

from tests.unit.cluster_snapshot import node as api_node

pytestmark = pytest.mark.unit


def node(host, cp=False, kubelet="1.36.3", apiserver=None, kubeadm="1.36.3", gpus=0, **kw):
    if cp and apiserver is None:
        apiserver = kubelet
    return up.NodeState(host, host, cp, kubelet, apiserver, kubeadm, gpus, **kw)


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
    with pytest.raises(up.UpgradePlanError) as err:
        up.build_plan("1.37.2", nodes)
    assert "skipping minor 1.36" in err.value.reason
    assert "--via 1.36" in err.value.fix
    plan = up.build_plan("1.37.2", nodes, via=["1.36.3"])
    assert plan.to_dict()["path"] == ["1.36.3", "1.37.2"]
    assert [s.source for s in plan.steps] == ["1.35.4", "1.36.3"]
    assert plan.steps[0].repo_url.endswith("/v1.36/deb/")


def test_via_outside_the_path_is_refused():
    with pytest.raises(up.UpgradePlanError, match=r"--via 1\.37\.0 is not between"):
        up.build_plan("1.37.2", fleet(1, version="1.35.4"), via=["1.36.3", "1.37.0"])


def test_downgrade_is_refused_naming_the_host_and_component():
    nodes = fleet(1)
    nodes[1] = node("w1", kubelet="1.36.3", kubeadm="1.37.2")
    with pytest.raises(up.UpgradePlanError) as err:
        up.build_plan("1.37.1", nodes)
    assert "kubeadm on w1 runs 1.37.2" in err.value.reason
    assert "downgrades" in err.value.reason


@pytest.mark.parametrize("target", ["1.39.0", "1.31.0", "1.25.3"])
def test_target_outside_the_model_is_refused(target):
    with pytest.raises(up.UpgradePlanError, match="outside the releases"):
        up.build_plan(target, fleet(1))


def test_target_must_be_an_exact_release():
    with pytest.raises(up.UpgradePlanError, match="names a minor"):
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
    assert by_host["w2"].reason == up.RESUME_REASON
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
    assert cp.resume and cp.role == up.CONTROL_PLANE and step.apply_host is None
    assert not any(a.startswith("kubeadm upgrade") for a in cp.actions)


def test_second_control_plane_runs_upgrade_node_once_apply_is_done():
    nodes = [
        node("cp1", True, "1.37.2", kubeadm="1.37.2"),
        node("cp2", True, "1.36.3", kubeadm="1.36.3"),
        node("w1", kubelet="1.36.3"),
    ]
    step = up.build_plan("1.37.2", nodes).steps[0]
    cp2 = next(n for n in step.nodes if n.host == "cp2")
    assert cp2.role == up.CONTROL_PLANE
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


@pytest.mark.parametrize(
    ("value", "workers", "expected"),
    [(2, 10, 2), ("3", 10, 3), ("20%", 10, 2), ("25%", 3, 1), ("100%", 7, 7), ("1%", 5, 1)],
)
def test_batch_size_number_or_percentage(value, workers, expected):
    assert up.parse_batch_size(value, workers) == expected


@pytest.mark.parametrize("value", [0, "0", "-1", "abc", "0%", "150%", "x%", True])
def test_bad_batch_size_names_the_variable(value):
    with pytest.raises(up.UpgradePlanError, match="upgrade_batch_size="):
        up.parse_batch_size(value, 10)


@pytest.mark.parametrize("value", [-1, 101, "half", True])
def test_bad_gpu_floor_names_the_variable(value):
    with pytest.raises(up.UpgradePlanError, match="upgrade_min_gpu_available_percent="):
        up.parse_min_gpu_percent(value)


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
    with pytest.raises(up.UpgradePlanError) as err:
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
    current = up.settings_from_configmaps(
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


def test_v1beta3_extra_args_map_is_read_too():
    current = up.settings_from_configmaps(
        {"scheduler": {"extraArgs": {"feature-gates": "DynamicResourceAllocation=true"}}}, None
    )
    assert current["kube-scheduler"]["feature_gates"] == {"DynamicResourceAllocation": True}
    assert current["kubelet"]["feature_gates"] == {}


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


def test_upgrade_configuration_document():
    doc = up.upgrade_configuration(
        "1.37.2", ignore_preflight_errors=["Swap"], image_pull_policy="Never"
    )
    assert doc["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert doc["kind"] == "UpgradeConfiguration"
    assert doc["apply"]["kubernetesVersion"] == "v1.37.2"
    assert doc["apply"]["imagePullPolicy"] == "Never"
    assert doc["node"]["ignorePreflightErrors"] == ["Swap"]
    assert "kubernetesVersion" not in doc["node"]
    assert up.upgrade_configuration("1.30.14") is None


def test_repo_url_template_needs_the_minor():
    assert up.repo_url("1.37.2", "file:/var/lib/gpufleet/pkgs/v{minor}/") == (
        "file:/var/lib/gpufleet/pkgs/v1.37/"
    )
    with pytest.raises(up.UpgradePlanError, match="upgrade_repo_url="):
        up.repo_url("1.37.2", "https://mirror/kubernetes/")


# ------------------------------------------------------------------ reading the API


def test_nodes_from_objects_reads_versions_devices_and_cordon():
    hosts = [
        {"host": "cp", "name": "lab-cp", "control_plane": True},
        {"host": "gpu1", "name": "lab-gpu-1", "control_plane": False},
    ]
    nodes = [api_node("lab-cp", "1.36.3"), api_node("lab-gpu-1", "1.36.3", True, "False")]
    pods = [
        {
            "metadata": {"labels": {"component": "kube-apiserver"}},
            "spec": {
                "nodeName": "lab-cp",
                "containers": [
                    {"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.36.3"}
                ],
            },
        }
    ]
    slices = [
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "lab-gpu-1", "devices": [{}, {}]}},
        {"spec": {"driver": "other.example.com", "nodeName": "lab-gpu-1", "devices": [{}]}},
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "lab-gpu-1", "devices": [{}]}},
    ]
    states = up.nodes_from_objects(hosts, nodes, pods, slices, {"cp": "v1.36.3", "gpu1": None})
    assert states[0] == up.NodeState("cp", "lab-cp", True, "1.36.3", "1.36.3", "1.36.3", 0)
    assert states[1].gpu_devices == 3
    assert states[1].unschedulable and not states[1].ready
    assert states[1].kubeadm is None and states[1].apiserver is None


def test_host_without_a_node_object_is_refused():
    with pytest.raises(up.UpgradePlanError, match="kubernetes_node_name"):
        up.nodes_from_objects([{"host": "x", "name": "x", "control_plane": True}], [], [])


def test_control_plane_without_apiserver_version_is_refused():
    with pytest.raises(up.UpgradePlanError, match="no kube-apiserver version"):
        up.build_plan("1.37.2", [up.NodeState("cp", "cp", True, "1.36.3", None, "1.36.3")])


def test_current_skew_violation_is_reported():
    nodes = [node("cp1", True, "1.36.3"), node("w1", kubelet="1.37.2", kubeadm="1.37.2")]
    plan = up.build_plan("1.37.2", nodes)
    assert any("must not be newer" in w for w in plan.warnings)


@pytest.mark.parametrize(
    "target", ["1.37.2+abc", "1.38.0-beta.0+abc", "1.38.0-gamma.1", "1.38.0-rc"]
)
def test_build_metadata_and_other_pre_release_forms_are_refused_not_compared(target):
    with pytest.raises(up.UpgradePlanError) as err:
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
    doc = up.upgrade_configuration("1.38.0-beta.0")
    assert doc["apply"]["allowExperimentalUpgrades"] is True
    assert doc["plan"]["allowExperimentalUpgrades"] is True
    assert "allowExperimentalUpgrades" not in up.upgrade_configuration("1.37.2")["apply"]
    assert up.package_version("1.38.0-rc.1", "2.1") == "1.38.0~rc.1-2.1"


def test_a_pre_release_to_pass_through_is_a_step_of_its_own():
    plan = up.build_plan("1.37.2", fleet(1, version="1.35.4"), via=["1.36.0-rc.1"])
    assert [s.version for s in plan.steps] == ["1.36.0-rc.1", "1.37.2"]


def test_two_releases_of_one_minor_to_pass_through_are_refused():
    with pytest.raises(up.UpgradePlanError, match=r"two releases of 1\.36: 1\.36\.3 and 1\.36\.1"):
        up.build_plan("1.37.2", fleet(1, version="1.35.4"), via=["1.36.3", "1.36.1"])


def test_a_malformed_release_is_told_to_give_major_minor_patch():
    with pytest.raises(up.dv.VersionParseError) as err:
        up.parse_release("1.x", "upgrade_via")
    assert "upgrade_via='1.x'" in err.value.reason
    assert err.value.fix.startswith("give MAJOR.MINOR.PATCH ")


def test_messages_name_the_inputs_as_given():
    nodes = fleet(2)
    names = {"min_gpu_available_percent": "--min-gpu-available-percent"}
    with pytest.raises(up.UpgradePlanError) as err:
        up.build_plan("1.37.2", nodes, min_gpu_available_percent=90, input_names=names)
    assert err.value.reason.startswith("--min-gpu-available-percent=90: draining")
    assert "lower --min-gpu-available-percent" in err.value.fix
