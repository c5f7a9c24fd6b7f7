"""Every feature gate and runtime-config entry a cluster carries is judged at each step's
target before a host is touched (plugins/module_utils/upgrade/blocking.py through
``upgrade_plan.build_plan``): what the target refuses and the upgrade does not change
itself blocks the plan, naming where it is, why and the fix.

Expected values come from the Kubernetes sources of the releases: CSIMigration is no
feature gate of any release from 1.31 on (removed in 1.27); NodeSwap is a gate of 1.37
and not of 1.38; EnvFiles is beta (default on, settable) in 1.37 and GA, locked to true,
in 1.38; ControllerManagerReleaseLeaderElectionLockOnExit is registered by
kube-controller-manager only; PodLevelResources is still a gate (beta) of 1.38;
DynamicResourceAllocation is removed in 1.38 (GA and locked since 1.34); batch/v2alpha1
is served by no release since 1.21; resource.k8s.io/v1beta1 is not served by 1.38."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import kubeadm_config as ukc
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import nodes as un
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import plan as up

pytestmark = pytest.mark.unit

KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"
APISERVER_MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"


def nodes(version="1.37.2"):
    return [
        un.NodeState("cp-1", "cp-1", True, version, version, version),
        un.NodeState("gpu-1", "gpu-1", False, version, None, version, 8),
        un.NodeState("gpu-2", "gpu-2", False, version, None, version, 8),
    ]


def kubelet(file_gates, flag_gates=None, drop_in=None, drop_in_gates=None):
    """The kubelet part of dra_gate_audit_facts: the --config file, the process (the
    files merged, then --feature-gates on top, as the kubelet does)."""
    argv = ["/usr/bin/kubelet", f"--config={KUBELET_CONFIG}"]
    if flag_gates:
        argv.append(
            "--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in flag_gates.items())
        )
    process = {**file_gates, **(drop_in_gates or {}), **(flag_gates or {})}
    return {
        "component": "kubelet",
        "running": True,
        "pid": 812,
        "argv": argv,
        "process": {"feature_gates": process, "runtime_config": {}},
        "config_files": [KUBELET_CONFIG] + ([drop_in] if drop_in else []),
        "file": {
            "path": KUBELET_CONFIG,
            "exists": True,
            "flags": {"feature_gates": dict(file_gates), "runtime_config": {}},
        },
    }


def apiserver(manifest_rc, process_rc=None):
    process_rc = manifest_rc if process_rc is None else process_rc
    return {
        "component": "kube-apiserver",
        "running": True,
        "pid": 2211,
        "argv": ["kube-apiserver"],
        "process": {"feature_gates": {}, "runtime_config": process_rc},
        "file": {
            "path": APISERVER_MANIFEST,
            "exists": True,
            "flags": {"feature_gates": {}, "runtime_config": manifest_rc},
        },
    }


def facts(host, *components):
    return {host: {"host": host, "components": {c["component"]: c for c in components}}}


def plan(target="1.38.0", host_facts=None, current=None, version="1.37.2", via=()):
    return up.build_plan(
        target, nodes(version), host_facts=host_facts, current_settings=current, via=via
    )


def test_a_gate_no_release_registers_in_a_kubelet_file_blocks_naming_host_file_and_release():
    p = plan(host_facts=facts("gpu-1", kubelet({"CSIMigration": True})))
    [b] = p.blocking
    assert (b.source, b.host, b.file, b.component) == ("file", "gpu-1", KUBELET_CONFIG, "kubelet")
    assert (b.name, b.entry) == ("CSIMigration", "CSIMigration=true")
    assert "unrecognized feature gate: CSIMigration" in b.reason
    assert "1.38" in b.reason
    assert b.fix == (
        f"remove CSIMigration from featureGates in {KUBELET_CONFIG} on gpu-1 before upgrading "
        "to 1.38.0"
    )
    doc = p.to_dict()
    assert doc["blocking"] == doc["steps"][0]["blocking"]
    assert doc["blocking"][0]["gate"] == "CSIMigration"
    assert doc["blocking"][0]["host"] == "gpu-1"


def test_a_gate_the_target_removed_blocks_with_the_release_that_removed_it():
    [b] = plan(host_facts=facts("gpu-2", kubelet({"NodeSwap": True}))).blocking
    assert (b.host, b.name) == ("gpu-2", "NodeSwap")
    assert "removed in 1.38" in b.reason


def test_a_gate_locked_to_the_other_value_blocks():
    [b] = plan(host_facts=facts("gpu-1", kubelet({"EnvFiles": False}))).blocking
    assert b.entry == "EnvFiles=false"
    assert "locked" in b.reason


def test_a_gate_only_another_component_registers_blocks_on_the_kubelet():
    gate = "ControllerManagerReleaseLeaderElectionLockOnExit"
    [b] = plan(host_facts=facts("gpu-1", kubelet({gate: True}))).blocking
    assert (b.component, b.name) == ("kubelet", gate)
    assert "only kube-controller-manager registers" in b.reason


def test_a_gate_the_target_still_registers_does_not_block():
    p = plan(host_facts=facts("gpu-1", kubelet({"PodLevelResources": True})))
    assert p.blocking == []


def test_a_dra_gate_the_upgrade_removes_itself_does_not_block():
    current = {"kubelet": {"feature_gates": {"DynamicResourceAllocation": True}}}
    p = plan(
        host_facts=facts("gpu-1", kubelet({"DynamicResourceAllocation": True})), current=current
    )
    assert p.blocking == []
    # the upgrade does remove it: it is in the sanitize list the role applies
    removed = [f["entry"] for f in p.steps[0].sanitize["kubelet"]["remove"]]
    assert removed == ["DynamicResourceAllocation=true"]


def test_the_kubelet_configmap_blocks_and_each_fix_names_the_other_places():
    current = {"kubelet": {"feature_gates": {"CSIMigration": True}}}
    p = plan(host_facts=facts("gpu-1", kubelet({"CSIMigration": True})), current=current)
    by_source = {b.source: b for b in p.blocking}
    assert set(by_source) == {"configmap", "file"}
    cm = by_source["configmap"]
    assert (cm.host, cm.configmap, cm.component) == (None, "kube-system/kubelet-config", "kubelet")
    assert cm.fix == (
        "remove CSIMigration from featureGates in key kubelet of kube-system/kubelet-config "
        "(kubectl -n kube-system edit configmap kubelet-config) and from "
        f"{KUBELET_CONFIG} on gpu-1 before upgrading to 1.38.0"
    )
    assert by_source["file"].fix == (
        f"remove CSIMigration from featureGates in {KUBELET_CONFIG} on gpu-1 and from "
        "kube-system/kubelet-config before upgrading to 1.38.0"
    )


def test_a_kubeadm_config_gate_names_the_section_and_the_component():
    current = ukc.settings_from_configmaps(
        {"scheduler": {"extraArgs": [{"name": "feature-gates", "value": "CSIMigration=true"}]}},
        None,
    )
    [b] = plan(current=current).blocking
    assert (b.configmap, b.component) == ("kube-system/kubeadm-config", "kube-scheduler")
    assert "scheduler.extraArgs of kube-system/kubeadm-config" in b.fix


def test_a_kubelet_flag_is_the_process_s_item_and_names_where_flags_are_set():
    p = plan(host_facts=facts("gpu-1", kubelet({}, flag_gates={"CSIMigration": True})))
    [b] = p.blocking
    assert (b.source, b.host, b.where) == ("process", "gpu-1", "the kubelet's --feature-gates flag")
    assert "/var/lib/kubelet/kubeadm-flags.env" in b.fix and "/etc/default/kubelet" in b.fix


def test_an_entry_of_file_and_process_alike_is_one_item_of_the_file():
    [b] = plan(host_facts=facts("gpu-1", kubelet({"CSIMigration": True}))).blocking
    assert b.source == "file"


def test_a_drop_in_is_named():
    drop_in = "/etc/kubernetes/kubelet.conf.d/20-gates.conf"
    host = facts("gpu-1", kubelet({}, drop_in=drop_in, drop_in_gates={"CSIMigration": True}))
    [b] = plan(host_facts=host).blocking
    assert (b.source, b.file) == ("process", drop_in)
    assert f"from featureGates in {drop_in} on gpu-1" in b.fix


def test_runtime_config_of_another_group_blocks_unserved_dra_versions_are_the_upgrade_s():
    host = facts("cp-1", apiserver({"batch/v2alpha1": "true", "resource.k8s.io/v1beta1": "true"}))
    p = plan(host_facts=host)
    [b] = p.blocking
    assert (b.kind, b.entry, b.file) == (
        "runtime-config",
        "batch/v2alpha1=true",
        APISERVER_MANIFEST,
    )
    assert f"remove batch/v2alpha1 from --runtime-config in {APISERVER_MANIFEST} on cp-1" in b.fix
    # resource.k8s.io/v1beta1, not served by 1.38, is what the role removes from kubeadm-config
    # and the manifests itself (absent_runtime_config of the target's settings)
    from ansible_collections.gpufleet.cluster.plugins.filter.dra import dra_component_settings

    absent = dra_component_settings("1.38.0")["apiserver"]["absent_runtime_config"]
    assert "resource.k8s.io/v1beta1" in absent


def test_a_control_plane_process_started_from_another_file_is_named():
    host = facts("cp-1", apiserver({}, process_rc={"batch/v2alpha1": "true"}))
    [b] = plan(host_facts=host).blocking
    assert (b.source, b.where) == ("process", "the running kube-apiserver (pid 2211)")
    assert "its static pod manifest does not hold it" in b.fix


def test_each_step_judges_at_its_own_target_and_names_an_entry_once():
    # NodeSwap is a gate of 1.37 and not of 1.38: the second step blocks, the first not
    host = facts("gpu-1", kubelet({"NodeSwap": True}))
    p = plan(host_facts=host, version="1.36.3", via=["1.37.2"])
    assert p.steps[0].blocking == []
    assert [(b.version, b.name) for b in p.steps[1].blocking] == [("1.38.0", "NodeSwap")]
    # CSIMigration blocks at the first step already and is not repeated at the second
    p = plan(host_facts=facts("gpu-1", kubelet({"CSIMigration": True})), version="1.36.3",
             via=["1.37.2"])  # fmt: skip
    assert [len(s.blocking) for s in p.steps] == [1, 0]
    assert p.steps[0].blocking[0].fix.endswith("before upgrading to 1.37.2")


def test_a_host_without_facts_is_warned_about_and_malformed_facts_are_refused():
    p = plan(host_facts={"gpu-1": None, "not-in-inventory": {"host": "x", "components": {}}})
    assert p.blocking == []
    assert any(w.startswith("gpu-1: the feature gates of its components") for w in p.warnings)
    with pytest.raises(dra_core.VersionModelError) as err:
        plan(host_facts={"gpu-1": {"host": "gpu-1", "components": {"kubelet": {"component": "x"}}}})
    assert "gpu-1" in err.value.reason


def test_no_facts_and_clean_configmaps_do_not_block_and_nothing_is_left_unchecked():
    p = plan(current={"kube-apiserver": {"feature_gates": {"PodLevelResources": True}}})
    assert p.blocking == []
    assert all(r["not_checked"] == [] for r in p.steps[0].sanitize.values())
