"""The DRA gate audit (``plugins/module_utils/gate_audit/audit.py`` and its ``gate_*`` parts) on
inputs built from what the real kubeadm 1.37.2 writes (``tests/unit/data/kubeadm/1.37.2``,
see regenerate.sh there) and from ``kubernetes_feature_enabled`` captured from real 1.37.2
components (``tests/unit/data/metrics/1.37.2``).

Process command lines are the manifests' ``command`` lists as ``/proc/<pid>/cmdline`` holds
them (NUL-separated); the kubelet's is what systemd runs from kubeadm's drop-in and the
``kubeadm-flags.env`` kubeadm wrote. Variants: ``defaults`` (kubeadm's own defaults) and
``dra`` (a cluster carried over from older releases: DRAControlPlaneController everywhere,
``resource.k8s.io/v1alpha3`` in runtime-config, repeated feature-gates).
"""

from __future__ import annotations

import json

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import audit as ga
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import report as gr
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import terms as gt
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce

from tests.unit.gate_audit.hosts import (
    CONTROL_PLANE,
    VERSION,
    configmaps,
    control_plane,
    control_plane_host,
    fixture,
    host,
    kubelet,
    manifest_text,
    metric,
    run,
)

pytestmark = pytest.mark.unit

# ------------------------------------------------------------------ inputs


def edited_manifest(variant: str, component: str, **edit: object) -> str:
    """A manifest changed with the collection's own editor (``FlagEdit`` keywords)."""
    return kce.edit_static_pod_manifest(
        manifest_text(variant, component), component, kfl.FlagEdit(**edit)
    ).text


def absent(component: str) -> gf.ComponentFacts:
    return gf.ComponentFacts(
        component, file=gf.FileSource(f"/etc/kubernetes/manifests/{component}.yaml", False)
    )


def worker(name: str = "worker-1", **kubelet_args: object) -> gf.HostFacts:
    return host(name, *(absent(c) for c in CONTROL_PLANE), kubelet(**kubelet_args))


def found(result: gr.AuditResult, fid: str) -> list[gr.Finding]:
    return [f for f in result.findings if f.id == fid]


def keyed(result: gr.AuditResult, fid: str) -> dict[tuple, str]:
    """(host, component, name) -> severity of every finding ``fid``."""
    return {(f.host, f.component, f.name): f.severity for f in found(result, fid)}


# ------------------------------------------------------------------ node-side parsing


def test_configmap_facts_are_read_through_the_api_and_fall_back_to_the_old_kubelet_name() -> None:
    kubeadm = yaml.safe_load((fixture("dra") / "configmap-kubeadm-config.yaml").read_text())
    kubelet_cm = yaml.safe_load((fixture("dra") / "configmap-kubelet-config.yaml").read_text())
    base = "/api/v1/namespaces/kube-system/configmaps/"

    class Kube:
        def __init__(self, objects: dict[str, object]) -> None:
            self.objects = objects

        def get(self, path: str) -> object:
            if path not in self.objects:
                raise vk.KubeError(404, f"{path} not found")
            return self.objects[path]

    want = configmaps("dra")
    got = ga.read_configmap_facts(
        Kube({base + "kubeadm-config": kubeadm, base + "kubelet-config": kubelet_cm}), VERSION
    )
    assert got == gf.ConfigMapFacts(
        want.cluster_configuration, want.kubelet, "kube-system/kubelet-config"
    )
    old = {**kubelet_cm, "metadata": {**kubelet_cm["metadata"], "name": "kubelet-config-1.37"}}
    got = ga.read_configmap_facts(
        Kube({base + "kubeadm-config": kubeadm, base + "kubelet-config-1.37": old}), VERSION
    )
    assert (got.kubelet, got.kubelet_name) == (want.kubelet, "kube-system/kubelet-config-1.37")
    assert ga.read_configmap_facts(Kube({}), VERSION) == gf.ConfigMapFacts(
        None, None, "kube-system/kubelet-config"
    )


# ------------------------------------------------------------------ the audit


def test_clean_kubeadm_cluster_has_no_findings() -> None:
    cp = control_plane_host()
    for c in CONTROL_PLANE:
        cp.components[c].metrics = control_plane(c, metrics=metric(c)).metrics
    result = run(cp, worker(), cms=configmaps("defaults"), expected_hosts=["cp-1", "worker-1"])
    assert result.findings == []
    assert result.ok
    cells = result.summary["cells"]
    assert cells["kube-apiserver"]["cp-1"]["state"] == "running"
    assert cells["kube-apiserver"]["cp-1"]["metrics"] == "read"
    assert "worker-1" not in cells["kube-apiserver"]
    assert cells["kubelet"]["worker-1"]["feature_gates"] == {}


def test_gate_added_to_the_manifest_only_is_configmap_drift() -> None:
    # Field case: --feature-gates added by hand to the static pod manifest, not to
    # kube-system/kubeadm-config; kubeadm upgrade regenerates the manifest and drops it.
    cp = host("cp-1", control_plane("kube-apiserver", variant="dra"), kubelet())
    result = run(cp, cms=configmaps("defaults"), components=["kube-apiserver", "kubelet"])
    drift = keyed(result, "gates.configmap-drift")
    assert drift == {
        ("cp-1", "kube-apiserver", "DRAAdminAccess"): "warn",  # GA, locked on: same in force
        ("cp-1", "kube-apiserver", "DRAControlPlaneController"): "fail",
        ("cp-1", "kube-apiserver", "DRADeviceTaints"): "warn",  # GA, on by default
        ("cp-1", "kube-apiserver", "api/alpha"): "fail",
        ("cp-1", "kube-apiserver", "resource.k8s.io/v1alpha3"): "fail",  # off by default
    }
    drift = {f.name: f for f in found(result, "gates.configmap-drift")}
    assert drift["DRADeviceTaints"].values == {"file": "true", "configmap": None}
    assert "drops it" in drift["DRADeviceTaints"].message
    # an entry the model has no objection to belongs in the ConfigMap ...
    assert "put api/alpha=false into ClusterConfiguration.apiServer.extraArgs" in (
        drift["api/alpha"].fix
    )
    # ... one it forbids or advises against must not be copied there
    assert "do not copy it into the ConfigMap" in drift["DRAControlPlaneController"].fix
    assert "no use at 1.37.2" in drift["DRADeviceTaints"].fix
    assert not result.ok


def test_configmap_ahead_of_the_files_says_the_file_is_behind() -> None:
    cp = control_plane_host("cp-1", "defaults")
    result = run(cp, cms=configmaps("dra"))
    drift = found(result, "gates.configmap-drift")
    by_key = {(f.component, f.name): f for f in drift}
    api = by_key[("kube-apiserver", "api/alpha")]
    assert api.values == {"file": None, "configmap": "false"}
    assert "behind" in api.message
    assert "kubeadm init phase control-plane apiserver" in api.fix
    # a ConfigMap entry the model advises against is to be removed, not regenerated
    sched = by_key[("kube-scheduler", "DRAPrioritizedList")]
    assert sched.values == {"file": None, "configmap": "true"}
    assert sched.fix.startswith("remove DRAPrioritizedList from ClusterConfiguration.scheduler")
    kubelet_drift = {f.name for f in drift if f.component == "kubelet"}
    assert kubelet_drift == {"DRAControlPlaneController", "DRAResourceClaimDeviceStatus"}


def test_kubelet_gates_only_in_the_node_file_are_configmap_drift() -> None:
    # Field case: kubeadm upgrade rewrote /var/lib/kubelet/config.yaml from the ConfigMap and
    # dropped featureGates; here the node file has gates the ConfigMap lacks.
    result = run(worker(variant="dra"), cms=configmaps("defaults"), components=["kubelet"])
    assert keyed(result, "gates.configmap-drift") == {
        ("worker-1", "kubelet", "DRAControlPlaneController"): "fail",
        ("worker-1", "kubelet", "DRAResourceClaimDeviceStatus"): "warn",  # GA, locked on
    }
    assert "kube-system/kubelet-config" in found(result, "gates.configmap-drift")[0].message


def test_removed_gate_is_forbidden_on_every_source_and_in_the_configmaps() -> None:
    # Field case: a gate the target release removed stops every component at start-up.
    result = run(control_plane_host("cp-1", "dra"), cms=configmaps("dra"))
    forbidden = keyed(result, "gates.model-forbidden")
    for component in (*CONTROL_PLANE, "kubelet"):
        assert forbidden[("cp-1", component, "DRAControlPlaneController")] == "fail"
        assert forbidden[(None, component, "DRAControlPlaneController")] == "fail"
    api = next(
        f
        for f in found(result, "gates.model-forbidden")
        if f.host == "cp-1" and f.component == "kube-apiserver"
    )
    assert api.values == {"process": "true", "file": "true", "model": None}
    assert "unrecognized feature gate: DRAControlPlaneController" in api.message
    advice = keyed(result, "gates.model-advice")
    assert advice[("cp-1", "kube-apiserver", "DRAAdminAccess")] == "warn"
    assert advice[("cp-1", "kube-apiserver", "resource.k8s.io/v1alpha3")] == "warn"
    assert not found(result, "gates.configmap-drift")
    assert not found(result, "gates.process-file-drift")


def test_locked_gate_at_the_other_value_is_forbidden_once() -> None:
    api = control_plane(
        "kube-apiserver", extra=("--feature-gates=DynamicResourceAllocation=false",)
    )
    result = run(host("cp-1", api), components=["kube-apiserver"])
    forbidden = found(result, "gates.model-forbidden")
    assert [(f.name, f.values) for f in forbidden] == [
        ("DynamicResourceAllocation", {"process": "false", "model": None})
    ]
    assert "locked" in forbidden[0].message
    assert not found(result, "gates.model-mismatch")


def test_unserved_runtime_config_is_reported() -> None:
    # Field case: runtime-config naming a group/version the release does not serve stops
    # kube-apiserver ("group version ... that has not been registered").
    stale = edited_manifest(
        "defaults", "kube-apiserver", runtime_config={"resource.k8s.io/v1alpha2": "true"}
    )
    api = control_plane("kube-apiserver", running=stale, file=stale)
    result = run(host("cp-1", api), components=["kube-apiserver"])
    unserved = found(result, "gates.runtime-config-unserved")
    assert [(f.severity, f.name, f.values) for f in unserved] == [
        ("fail", "resource.k8s.io/v1alpha2", {"process": "true", "file": "true", "model": None})
    ]


def test_runtime_config_the_plan_needs() -> None:
    features = ["resource-pool-status"]  # ResourcePoolStatusRequest: resource.k8s.io/v1alpha3
    cp = host("cp-1", control_plane("kube-apiserver"))
    missing = run(cp, components=["kube-apiserver"], features=features)
    assert keyed(missing, "gates.runtime-config-missing") == {
        ("cp-1", "kube-apiserver", "resource.k8s.io/v1alpha3"): "fail"
    }
    assert keyed(missing, "gates.model-missing") == {
        ("cp-1", "kube-apiserver", "DRAResourcePoolStatus"): "fail"  # alpha, off by default
    }
    # the dra variant enables v1alpha3: no runtime-config finding, and no advice to drop it
    ok = run(
        host("cp-1", control_plane("kube-apiserver", variant="dra")),
        components=["kube-apiserver"],
        features=features,
    )
    assert not found(ok, "gates.runtime-config-missing")
    assert ("cp-1", "kube-apiserver", "resource.k8s.io/v1alpha3") not in keyed(
        ok, "gates.model-advice"
    )


def test_process_and_manifest_differ() -> None:
    off = control_plane("kube-apiserver", extra=("--feature-gates=DRAPartitionableDevices=false",))
    result = run(host("cp-1", off), components=["kube-apiserver"])
    drift = found(result, "gates.process-file-drift")
    assert [(f.severity, f.name, f.values) for f in drift] == [
        ("fail", "DRAPartitionableDevices", {"process": "false", "file": None})
    ]
    assert "/etc/kubernetes/manifests" in drift[0].fix
    # the same entry at the default value: only the spelling differs
    on = control_plane("kube-apiserver", extra=("--feature-gates=DRAPartitionableDevices=true",))
    result = run(host("cp-1", on), components=["kube-apiserver"])
    assert keyed(result, "gates.process-file-drift") == {
        ("cp-1", "kube-apiserver", "DRAPartitionableDevices"): "warn"
    }


def test_manifest_without_a_process() -> None:
    api = control_plane("kube-apiserver", variant="dra", running="")
    result = run(host("cp-1", api), components=["kube-apiserver"])
    absent_ = found(result, "gates.process-absent")
    assert [(f.severity, f.host, f.component) for f in absent_] == [
        ("fail", "cp-1", "kube-apiserver")
    ]
    # the model findings then come from the file alone
    forbidden = next(f for f in found(result, "gates.model-forbidden"))
    assert forbidden.values == {"file": "true", "model": None}
    assert result.summary["cells"]["kube-apiserver"]["cp-1"]["state"] == "not running"


def test_node_drift_names_the_host_that_differs_from_the_model() -> None:
    features = ["partitionable-devices"]
    hosts = []
    for name, value in (("cp-1", True), ("cp-2", False), ("cp-3", True)):
        text = edited_manifest(
            "defaults", "kube-apiserver", feature_gates={"DRAPartitionableDevices": value}
        )
        hosts.append(host(name, control_plane("kube-apiserver", running=text, file=text)))
    result = run(*hosts, components=["kube-apiserver"], features=features)
    drift = found(result, "gates.node-drift")
    assert [(f.severity, f.host, f.name, f.values) for f in drift] == [
        ("fail", "cp-2", "DRAPartitionableDevices", {"this host": "false", "reference": "true"})
    ]
    assert "2 of 3 hosts" in drift[0].message
    assert keyed(result, "gates.model-mismatch") == {
        ("cp-2", "kube-apiserver", "DRAPartitionableDevices"): "fail"
    }
    assert not found(result, "gates.process-file-drift")


def test_gates_on_the_control_plane_but_not_on_the_kubelet() -> None:
    # Field case: gates in all three control-plane manifests, missing from the kubelet
    # configuration, so DRA plugins on the node fail.
    features = ["node-allocatable-resources"]
    plan = dra_plan.plan_components(VERSION, features)
    components = []
    for c in CONTROL_PLANE:
        gates = plan.components[c].feature_gates
        text = edited_manifest("defaults", c, feature_gates=gates) if gates else None
        components.append(control_plane(c, running=text, file=text))
    result = run(host("cp-1", *components, kubelet()), worker(), features=features)
    assert keyed(result, "gates.model-missing") == {
        ("cp-1", "kubelet", "DRANodeAllocatableResources"): "fail",
        ("worker-1", "kubelet", "DRANodeAllocatableResources"): "fail",
    }
    one = found(result, "gates.model-missing")[0]
    assert one.values == {"process": None, "file": None, "configmap": None, "model": "true"}


def test_metric_disagrees_with_the_command_line() -> None:
    api = control_plane(
        "kube-apiserver",
        extra=("--feature-gates=DRAPartitionableDevices=false",),
        metrics=metric("kube-apiserver"),  # captured with the gate at its default (on)
    )
    result = run(host("cp-1", api), components=["kube-apiserver"])
    drift = found(result, "gates.metric-drift")
    assert [(f.severity, f.name, f.values) for f in drift] == [
        ("fail", "DRAPartitionableDevices", {"process": "false", "metric": "true"})
    ]
    assert not found(result, "gates.metric-stage")


def test_metric_of_another_release_is_a_stage_warning() -> None:
    api = control_plane("kube-apiserver", metrics=metric("kube-apiserver"))
    result = run(host("cp-1", api), components=["kube-apiserver"], version="1.36.3")
    stage = found(result, "gates.metric-stage")
    assert [(f.severity, f.host) for f in stage] == [("warn", "cp-1")]
    # DRAExtendedResource is beta in 1.36 and GA in the 1.37.2 binary that was read
    assert stage[0].values["DRAExtendedResource"] == "ga (model: beta)"


def test_kubelet_flag_overriding_its_configuration() -> None:
    facts = kubelet(extra_args="--feature-gates=DRANodeAllocatableResources=true")
    result = run(worker(), host("worker-2", facts), components=["kubelet"])
    assert keyed(result, "gates.kubelet-flag-override") == {
        ("worker-2", "kubelet", "DRANodeAllocatableResources"): "warn"
    }
    assert "KUBELET_EXTRA_ARGS" in found(result, "gates.kubelet-flag-override")[0].fix
    assert keyed(result, "gates.node-drift") == {
        ("worker-2", "kubelet", "DRANodeAllocatableResources"): "fail"
    }


def test_kubelet_configuration_newer_than_the_kubelet() -> None:
    result = run(worker(started_at=1000.0, mtime=2000.0), components=["kubelet"])
    pending = found(result, "gates.restart-pending")
    assert [(f.severity, f.host) for f in pending] == [("warn", "worker-1")]
    assert "systemctl restart kubelet" in pending[0].fix


def test_unreachable_host_and_missing_component() -> None:
    result = run(worker(), expected_hosts=["worker-1", "worker-2"])
    assert keyed(result, "gates.facts-missing") == {("worker-2", None, None): "fail"}
    assert {f.component for f in found(result, "gates.component-not-found")} == set(CONTROL_PLANE)


def test_unreadable_sources_are_warnings() -> None:
    api = control_plane("kube-apiserver")
    api.errors.append("2 kube-apiserver processes run (pids 10, 20)")
    api.metrics = gf.MetricSource("https://127.0.0.1:6443/metrics", error="HTTP 403 Forbidden")
    sched = absent("kube-scheduler")
    assert sched.file is not None
    sched.file.exists, sched.file.error = True, "cannot read: Permission denied"
    result = run(host("cp-1", api, sched), components=["kube-apiserver", "kube-scheduler"])
    unreadable = found(result, "gates.source-unreadable")
    assert sorted((f.component, next(iter(f.values))) for f in unreadable) == [
        ("kube-apiserver", "metric"),
        ("kube-apiserver", "process"),
        ("kube-scheduler", "file"),
    ]
    assert all(f.severity == "warn" for f in unreadable)
    assert result.summary["cells"]["kube-apiserver"]["cp-1"]["metrics"] == (
        "error: HTTP 403 Forbidden"
    )


def test_no_host_at_all_is_a_failure_not_a_pass() -> None:
    result = ga.audit({}, VERSION)
    assert [(f.id, f.severity, f.host) for f in result.findings] == [
        ("gates.facts-missing", "fail", None)
    ]


def test_absent_configmaps_are_warnings_for_the_components_audited() -> None:
    result = run(worker(), cms=gf.ConfigMapFacts(None, None), components=["kubelet"])
    absent_cms = found(result, "gates.configmap-absent")
    assert [f.component for f in absent_cms] == ["kubelet"]
    assert result.ok


def test_result_is_json_failures_first_and_facts_round_trip() -> None:
    cp = control_plane_host("cp-1", "dra")
    cp.components["kube-apiserver"].metrics = control_plane(
        "kube-apiserver", metrics=metric("kube-apiserver")
    ).metrics
    data = json.loads(json.dumps(cp.to_dict()))
    assert gf.HostFacts.from_dict(data, "cp-1") == cp
    result = run(cp, cms=configmaps("defaults"))
    doc = json.loads(json.dumps(result.to_dict()))
    severities = [f["severity"] for f in doc["findings"]]
    assert severities == sorted(severities, key=["fail", "warn"].index)
    assert doc["counts"] == {"fail": severities.count("fail"), "warn": severities.count("warn")}
    assert doc["ok"] is False


def test_impossible_request_is_refused_by_the_model() -> None:
    with pytest.raises(dra_core.VersionModelError, match="DRAControlPlaneController"):
        run(worker(), gates={"DRAControlPlaneController": True})
    with pytest.raises(gt.GateAuditError, match="kube-proxy"):
        run(worker(), components=["kube-proxy"])


# ------------------------------------------------------------------ DRA beta (1.33)

BETA = "1.33.13"


def beta_host(
    name: str, control_plane_variant: str, kubelet_variant: str | None = None
) -> gf.HostFacts:
    """A 1.33.13 control-plane node whose processes run what its files say."""
    return host(
        name,
        *(control_plane(c, variant=f"{BETA}/{control_plane_variant}") for c in CONTROL_PLANE),
        kubelet(variant=f"{BETA}/{kubelet_variant or control_plane_variant}"),
    )


def test_beta_gate_on_the_control_plane_but_not_on_the_kubelet() -> None:
    # Field case: gates in the three control-plane manifests, none in the kubelet
    # configuration; on 1.33 DynamicResourceAllocation is beta and off by default.
    result = run(
        beta_host("cp-1", "v1beta3", kubelet_variant="defaults"),
        cms=configmaps(f"{BETA}/v1beta3"),
        version=BETA,
    )
    missing = found(result, "gates.model-missing")
    assert [(f.severity, f.host, f.component, f.name) for f in missing] == [
        ("fail", "cp-1", "kubelet", "DynamicResourceAllocation")
    ]
    assert missing[0].values == {
        "process": None,
        "file": None,
        "configmap": "true",
        "model": "true",
    }
    # the kubelet-config ConfigMap has the gate: the node file is behind it
    drift = found(result, "gates.configmap-drift")
    assert [(f.severity, f.component, f.name, f.values) for f in drift] == [
        ("fail", "kubelet", "DynamicResourceAllocation", {"file": None, "configmap": "true"})
    ]
    assert "kubeadm upgrade node phase kubelet-config" in drift[0].fix


def test_beta_gate_added_to_the_manifests_only() -> None:
    # Field case: DynamicResourceAllocation=true added by hand to the manifests of a 1.33
    # cluster whose kubeadm-config has no gate: the upgrade turns DRA off again.
    result = run(
        beta_host("cp-1", "v1beta3", kubelet_variant="v1beta3"),
        cms=configmaps(f"{BETA}/defaults"),
        version=BETA,
        components=list(CONTROL_PLANE),
    )
    drift = keyed(result, "gates.configmap-drift")
    for c in CONTROL_PLANE:
        assert drift[("cp-1", c, "DynamicResourceAllocation")] == "fail"
    assert drift[("cp-1", "kube-apiserver", "resource.k8s.io/v1beta1")] == "fail"


def test_a_132_style_configuration_on_133_lacks_v1beta2() -> None:
    # v1beta3 input written for 1.32 (v1beta1 only); the model enables v1beta2 on 1.33 too.
    result = run(beta_host("cp-1", "v1beta3"), cms=configmaps(f"{BETA}/v1beta3"), version=BETA)
    assert keyed(result, "gates.runtime-config-missing") == {
        ("cp-1", "kube-apiserver", "resource.k8s.io/v1beta2"): "fail",
        (None, "kube-apiserver", "resource.k8s.io/v1beta2"): "fail",
    }
    assert [f.id for f in result.failed] == ["gates.runtime-config-missing"] * 2
    assert not found(result, "gates.model-missing")


def test_carried_over_cluster_checked_before_upgrading_to_134() -> None:
    # The dra variant of 1.33.13 still names DRAControlPlaneController (removed in 1.32)
    # and resource.k8s.io/v1alpha3; judged against the 1.34 target before the upgrade.
    result = run(beta_host("cp-1", "dra"), cms=configmaps(f"{BETA}/dra"), version="1.34.4")
    forbidden = keyed(result, "gates.model-forbidden")
    assert {k for k in forbidden if k[0] == "cp-1"} == {
        ("cp-1", c, "DRAControlPlaneController") for c in (*CONTROL_PLANE, "kubelet")
    }
    advice = keyed(result, "gates.model-advice")
    # DRA is GA and on by default in 1.34: setting it only risks the removal in 1.38
    assert advice[("cp-1", "kubelet", "DynamicResourceAllocation")] == "warn"
    assert advice[(None, "kube-apiserver", "resource.k8s.io/v1beta1")] == "warn"


def test_any_gate_the_release_does_not_register_is_forbidden_naming_host_and_file() -> None:
    # Field case: a long-removed non-DRA gate in the kubelet's configuration file stops the
    # kubelet at its next start; the audit names the host, the file and the gate.
    text = (fixture("defaults") / "kubelet-config.yaml").read_text()
    config = yaml.safe_load(text)
    config["featureGates"] = {"CSIMigration": True, "ContextualLogging": True}
    result = run(worker(config=yaml.safe_dump(config)), components=["kubelet"])
    forbidden = found(result, "gates.model-forbidden")
    assert [(f.host, f.component, f.name) for f in forbidden] == [
        ("worker-1", "kubelet", "CSIMigration")
    ]
    assert "registers no feature gate CSIMigration" in forbidden[0].message
    assert "/var/lib/kubelet/config.yaml" in forbidden[0].fix
    # ContextualLogging is registered by every component (component-base logs): no finding.
    assert not [
        f for f in result.findings if f.name == "ContextualLogging" and f.severity == "fail"
    ]


def test_a_controller_manager_only_gate_on_the_kubelet_is_forbidden() -> None:
    result = run(
        worker(extra_args="--feature-gates=ControllerManagerReleaseLeaderElectionLockOnExit=true"),
        components=["kubelet"],
    )
    forbidden = found(result, "gates.model-forbidden")
    assert [(f.component, f.name) for f in forbidden] == [
        ("kubelet", "ControllerManagerReleaseLeaderElectionLockOnExit")
    ]
    assert "only kube-controller-manager registers" in forbidden[0].message
