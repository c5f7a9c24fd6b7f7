"""Cluster-side checks (versions, gates, api, nodes, claims) over small listed objects."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import api as vapi
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import gates as vga
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import nodes as vno
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import (
    report as validate_report,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import versions as vver

from tests.unit.validate_objects import (
    GPU_CLASS,
    MIG_CLASS,
    claim,
    gpu_device,
    mig_device,
    node,
    pod,
    resource_slice,
)

pytestmark = pytest.mark.unit

LABELS = {"nvidia.com/gpu.present": "true"}
PLUGIN = {"app.kubernetes.io/component": "kubelet-plugin"}
UUID1, UUID2 = "GPU-1111", "GPU-2222"


def apiserver_pod(node_name: str, version: str) -> dict:
    p = pod(
        f"kube-apiserver-{node_name}",
        namespace="kube-system",
        node_name=node_name,
        labels={"component": "kube-apiserver"},
        image=f"registry.k8s.io/kube-apiserver:v{version}",
    )
    p["spec"]["containers"][0]["name"] = "kube-apiserver"
    return p


def facts(uuid: str, driver: str = "580.159.04", mig: list | None = None) -> dict:
    gpu = {
        "index": 0,
        "uuid": uuid,
        "name": "NVIDIA H200",
        "memory_mib": 143771,
        "driver_version": driver,
        "mig_mode_current": "Enabled" if mig else "Disabled",
        "mig_devices": mig or [],
    }
    return {"gpufleet_gpus": [gpu], "gpufleet_gpu_driver_version": driver}


def healthy() -> tuple[vli.Listing, vli.Settings]:
    listing = vli.Listing(
        version={"gitVersion": "v1.37.2"},
        resource_group={"versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]},
        resource_version="v1",
        nodes=[node("cp"), node("gpu-1", LABELS), node("gpu-2", LABELS)],
        pods=[
            apiserver_pod("cp", "1.37.2"),
            pod("plugin-a", "dra", node_name="gpu-1", labels=PLUGIN),
            pod("plugin-b", "dra", node_name="gpu-2", labels=PLUGIN),
        ],
        slices=[
            resource_slice("gpu-1", [gpu_device(0, UUID1)]),
            resource_slice("gpu-2", [gpu_device(0, UUID2)]),
        ],
        classes=[GPU_CLASS, MIG_CLASS],
    )
    settings = vli.Settings(
        driver=ddc.NVIDIA_DRIVER,
        device_classes=[*ddc.GPU_DEVICE_CLASSES],
        gpu_nodes=["gpu-1", "gpu-2"],
        gpu_facts={"gpu-1": facts(UUID1), "gpu-2": facts(UUID2)},
        now=1767225600.0,
    )
    return listing, settings


def by_id(checks: list) -> dict:
    return {c.id: c for c in checks}


def test_a_healthy_cluster_passes_every_cluster_check() -> None:
    listing, settings = healthy()
    checks = by_id(vc.all_checks(listing, settings, audit={"version": "1.37.2", "findings": []}))
    bad = {i: (c.status, c.summary) for i, c in checks.items() if c.status not in ("pass", "skip")}
    assert bad == {}
    assert checks["api.scheduler-dynamicresources"].status == "skip"
    assert checks["nodes.resourceslices"].summary.endswith("matching the GPU facts on 2")


def test_kubelet_newer_than_the_apiserver_fails_skew() -> None:
    listing, settings = healthy()
    listing.nodes[1] = node("gpu-1", LABELS, kubelet="v1.38.0")
    c = by_id(vver.versions_checks(listing, settings))
    assert c["versions.kubelet-skew"].status == "fail"
    assert (
        "kubelet must not be newer than any kube-apiserver"
        in c["versions.kubelet-skew"].problems[0].message
    )
    assert c["versions.gpu-kubelet-lockstep"].status == "fail"
    # on a tie the node that is not on the newest version is named
    assert [p.subject for p in c["versions.gpu-kubelet-lockstep"].problems] == ["gpu-2"]


def test_lockstep_tie_names_the_node_left_behind() -> None:
    listing, settings = healthy()
    listing.nodes[2] = node("gpu-2", LABELS, kubelet="v1.36.3")
    c = by_id(vver.versions_checks(listing, settings))
    lockstep = c["versions.gpu-kubelet-lockstep"]
    assert lockstep.status == "fail"
    assert [(p.subject, p.message.split(" while ")[0]) for p in lockstep.problems] == [
        ("gpu-2", "kubelet 1.36.3")
    ]
    assert c["versions.kubelet-skew"].status == "pass"


def test_apiservers_two_minors_apart_fail() -> None:
    listing, settings = healthy()
    listing.pods.append(apiserver_pod("cp-2", "1.35.0"))
    c = by_id(vver.versions_checks(listing, settings))
    assert c["versions.apiserver-skew"].status == "fail"


def test_known_bad_release_is_flagged() -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.30.0"}
    listing.pods = [apiserver_pod("cp", "1.30.0")]
    listing.nodes = [node("gpu-1", LABELS, kubelet="v1.30.0")]
    c = by_id(vver.versions_checks(listing, settings))
    assert c["versions.known-bad"].status == "fail"
    assert "1.30.1" in (c["versions.known-bad"].fix or "")


def test_gate_findings_are_grouped_with_their_own_ids() -> None:
    audit = {
        "version": "1.37.2",
        "findings": [
            {
                "id": "gates.node-drift",
                "severity": "fail",
                "host": "gpu-2",
                "component": "kubelet",
                "message": "m1",
                "fix": "f1",
            },
            {
                "id": "gates.model-advice",
                "severity": "warn",
                "host": "cp",
                "component": "kube-apiserver",
                "message": "m2",
                "fix": "f2",
            },
            {
                "id": "gates.facts-missing",
                "severity": "fail",
                "host": "gpu-3",
                "component": None,
                "message": "m3",
                "fix": "f3",
            },
        ],
    }
    c = by_id(vga.gates_checks(audit))
    assert c["gates.component-drift"].status == "fail"
    assert c["gates.component-drift"].problems[0].message == "[gates.node-drift] m1"
    assert c["gates.component-drift"].problems[0].subject == "gpu-2 kubelet"
    assert c["gates.model"].status == "warn"
    assert c["gates.coverage"].status == "fail"
    assert all(x.status == "skip" for x in vga.gates_checks(None, "no facts"))


def test_missing_resource_api_version_and_device_class() -> None:
    listing, settings = healthy()
    listing.resource_group = {"versions": [{"groupVersion": "resource.k8s.io/v1beta2"}]}
    listing.classes = [GPU_CLASS]
    c = by_id(vapi.api_checks(listing, settings))
    assert c["api.resource-versions"].status == "fail"
    assert "resource.k8s.io/v1 is not served" in c["api.resource-versions"].problems[0].message
    assert c["api.deviceclasses"].status == "fail"
    assert c["api.deviceclasses"].problems[0].subject == "mig.nvidia.com"


def test_scheduler_profile_without_dynamicresources_fails() -> None:
    listing, settings = healthy()
    sched = [
        {
            "host": "cp",
            "custom_config": True,
            "message": "m",
            "changes": [
                {
                    "where": "profile default-scheduler plugins.multiPoint.disabled",
                    "what": "DynamicResources",
                    "old": "disabled",
                    "new": None,
                    "why": "DRA needs it",
                }
            ],
        }
    ]
    c = by_id(vapi.api_checks(listing, settings, sched))
    assert c["api.scheduler-dynamicresources"].status == "fail"


def _default_profile_on_beta(audit: dict | None) -> validate_report.Check:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.33.13"}
    sched = [{"host": "cp", "custom_config": False, "message": "no --config", "changes": []}]
    return by_id(vapi.api_checks(listing, settings, sched, audit))["api.scheduler-dynamicresources"]


def test_default_profile_on_a_beta_release_warns_unless_the_gate_is_on_there() -> None:
    # 1.33: DynamicResourceAllocation is beta and off by default; the default profile runs
    # DynamicResources only while the gate is on
    assert _default_profile_on_beta(None).status == "warn"
    cell = {"state": "running", "source": "process", "runtime_config": {}}
    off = {"summary": {"cells": {"kube-scheduler": {"cp": {**cell, "feature_gates": {}}}}}}
    assert _default_profile_on_beta(off).status == "warn"
    on = {
        "summary": {
            "cells": {
                "kube-scheduler": {
                    "cp": {**cell, "feature_gates": {"DynamicResourceAllocation": True}}
                }
            }
        }
    }
    assert _default_profile_on_beta(on).status == "pass"


def test_unlabeled_gpu_node_fails_labels() -> None:
    listing, settings = healthy()
    listing.nodes[2] = node("gpu-2", {})
    c = by_id(vno.nodes_checks(listing, settings))
    assert c["nodes.gpu-labels"].status == "fail"
    assert [p.subject for p in c["nodes.gpu-labels"].problems] == ["gpu-2"]
    assert "nvidia.com/gpu.present absent" in c["nodes.gpu-labels"].problems[0].message


def test_the_label_fix_names_a_command_and_a_playbook_that_exist() -> None:
    from gpufleet.cli import main
    from gpufleet.runner import collection_root

    listing, settings = healthy()
    listing.nodes[2] = node("gpu-2", {})
    fix = by_id(vno.nodes_checks(listing, settings))["nodes.gpu-labels"].fix or ""
    assert "gpufleet up -i INVENTORY" in fix and "up" in main.commands
    assert "labels apply" not in fix
    assert "ansible-playbook -i INVENTORY gpufleet.cluster.gpu_node_labels" in fix
    assert (collection_root() / "playbooks" / "gpu_node_labels.yml").is_file()


def test_plugin_missing_on_a_node_fails_and_its_slices_are_orphans() -> None:
    listing, settings = healthy()
    listing.pods = [p for p in listing.pods if p["metadata"]["name"] != "plugin-b"]
    c = by_id(vno.nodes_checks(listing, settings))
    assert [(p.subject, p.status) for p in c["nodes.plugin-running"].problems] == [
        ("gpu-2", "fail")
    ]
    assert [p.subject for p in c["nodes.orphan-slices"].problems] == ["gpu-2"]


def test_slices_of_a_deleted_node_are_orphans() -> None:
    listing, settings = healthy()
    listing.slices.append(resource_slice("gone", [gpu_device(0, "GPU-x")]))
    c = by_id(vno.nodes_checks(listing, settings))
    assert "which no longer exists" in c["nodes.orphan-slices"].problems[0].message


def test_plugin_selector_and_namespace_are_honoured() -> None:
    listing, settings = healthy()
    settings.plugin_namespace = "other"
    c = by_id(vno.nodes_checks(listing, settings))
    assert c["nodes.plugin-running"].status == "fail"
    settings.plugin_namespace = "dra"
    settings.plugin_selector = "app.kubernetes.io/component in (kubelet-plugin),!absent"
    assert by_id(vno.nodes_checks(listing, settings))["nodes.plugin-running"].status == "pass"


def test_slices_that_disagree_with_the_host_facts() -> None:
    listing, settings = healthy()
    settings.gpu_facts["gpu-2"] = facts(UUID2, driver="570.0.0")
    listing.slices[0] = resource_slice("gpu-1", [gpu_device(0, "GPU-other")])
    c = by_id(vno.nodes_checks(listing, settings))["nodes.resourceslices"]
    msgs = {(p.subject, p.message) for p in c.problems}
    assert ("gpu-1", "GPU 0 GPU-1111 is not published (nvidia-smi shows it)") in msgs
    assert any(s == "gpu-1" and "GPU-other" in m and "no such GPU" in m for s, m in msgs)
    assert any(
        s == "gpu-2" and "driverVersion is 580.159.4, the host says 570.0.0" in m for s, m in msgs
    )


def test_mig_layout_is_compared_with_published_mig_devices() -> None:
    listing, settings = healthy()
    mig = [{"uuid": f"MIG-{i}", "profile": "1g.18gb", "memory_mib": 16384} for i in range(2)]
    settings.gpu_facts["gpu-1"] = facts(UUID1, mig=mig)
    listing.slices[0] = resource_slice(
        "gpu-1", [mig_device(0, UUID1, f"MIG-{i}", start=i) for i in range(2)]
    )
    settings.mig_layout = {"gpu-1": {"1g.18gb": 7}}
    c = by_id(vno.nodes_checks(listing, settings))["nodes.resourceslices"]
    assert c.status == "fail"
    assert (
        "published MIG devices {'1g.18gb': 2}, wanted layout {'1g.18gb': 7}"
        in c.problems[0].message
    )
    settings.mig_layout = {"gpu-1": {"0": {"1g.18gb": 2}}}
    assert by_id(vno.nodes_checks(listing, settings))["nodes.resourceslices"].status == "pass"


def test_leaked_and_pending_claims_become_checks() -> None:
    listing, settings = healthy()
    listing.claims = [
        claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("gone", "u-gone")])
    ]
    c = by_id(vc.claims_checks(listing, settings))
    assert c["claims.leaked"].status == "fail"
    assert c["claims.leaked"].problems[0].subject == "default/train"
    assert c["claims.pending"].status == "pass"


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a in (x, y),c", {"a": "y", "c": ""}, True),
        ("a notin (x)", {"a": "x"}, False),
        ("!a", {"a": "1"}, False),
    ],
)
def test_label_selector(selector: str, labels: dict, matches: bool) -> None:
    assert vli.label_selector_matches(vli.parse_label_selector(selector), labels) is matches


def test_bad_label_selector_names_the_term() -> None:
    with pytest.raises(ValueError, match="'a in x'"):
        vli.parse_label_selector("a in x")


def test_smoke_builds_one_template_and_pod_per_profile() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    opts = {"smoke_profiles": ["1g.18gb"], "smoke_image": "img:1", "smoke_command": ["x"]}
    templates = vs.smoke_templates(opts, "ns-1", "1.37.2")
    assert [t["metadata"]["name"] for t in templates] == ["smoke-gpu", "mig-1g-18gb"]
    assert {t["apiVersion"] for t in templates} == {"resource.k8s.io/v1"}
    pod = vs.smoke_pod(templates[1], opts)
    assert pod["metadata"]["namespace"] == "ns-1"
    assert pod["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "mig-1g-18gb"}
    ]
    (container,) = pod["spec"]["containers"]
    assert (container["image"], container["command"]) == ("img:1", ["x"])
    assert container["resources"] == {"claims": [{"name": "gpu"}]}
    assert pod["spec"]["restartPolicy"] == "Never"


def test_a_pending_threshold_of_zero_is_kept() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import (
        run as validate_run,
    )

    assert validate_run.settings_from({"pending_threshold": 0}, []).pending_threshold_s == 0
    assert validate_run.settings_from({}, []).pending_threshold_s == 300


def smoke_names(listing: vli.Listing, settings: vli.Settings, **opts: object) -> list[str]:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    published = vs.published_kinds(listing, settings)
    return [t["metadata"]["name"] for t in vs.smoke_templates(opts, "ns", "1.37.2", published)]


def test_smoke_asks_for_what_the_gpu_nodes_publish() -> None:
    listing, settings = healthy()
    assert smoke_names(listing, settings) == ["smoke-gpu"]
    # every GPU carved: no whole GPU is left, so the whole-GPU pod could never run
    listing.slices = [
        resource_slice("gpu-1", [mig_device(0, UUID1, "MIG-a", "1g.18gb")]),
        resource_slice("gpu-2", [mig_device(0, UUID2, "MIG-b", "2g.35gb")]),
    ]
    assert smoke_names(listing, settings) == ["mig-1g-18gb", "mig-2g-35gb"]
    # one node still has a whole GPU
    listing.slices[1] = resource_slice("gpu-2", [gpu_device(0, UUID2)])
    assert smoke_names(listing, settings) == ["smoke-gpu", "mig-1g-18gb"]


def test_smoke_adds_configured_profiles_and_ignores_other_drivers_and_nodes() -> None:
    listing, settings = healthy()
    listing.slices.append(resource_slice("cpu-node", [mig_device(0, "X", "MIG-x", "7g.141gb")]))
    listing.slices.append(
        resource_slice("gpu-1", [mig_device(1, "Y", "MIG-y", "4g.71gb")], driver="other.example")
    )
    settings.mig_layout = {"gpu-1": {"0": {"3g.71gb": 2}, "1": {"1g.18gb": 0}}}
    assert smoke_names(listing, settings) == ["smoke-gpu", "mig-3g-71gb"]
    assert smoke_names(listing, settings, smoke_profiles=["1g.35gb"]) == [
        "smoke-gpu",
        "mig-1g-35gb",
        "mig-3g-71gb",
    ]


def test_smoke_with_nothing_published_still_tries_a_whole_gpu() -> None:
    listing, settings = healthy()
    listing.slices = []
    assert smoke_names(listing, settings) == ["smoke-gpu"]


def test_explicit_smoke_templates_win() -> None:
    listing, settings = healthy()
    listing.slices = [resource_slice("gpu-1", [mig_device(0, UUID1, "MIG-a")])]
    wanted = [{"kind": "mig-slice", "profile": "1g.18gb", "name": "mine"}]
    assert smoke_names(listing, settings, smoke_templates=wanted) == ["mine"]


def test_a_138_kubelet_on_containerd_17_fails_naming_the_node() -> None:
    listing, settings = healthy()
    listing.nodes[2] = node("gpu-2", LABELS, kubelet="v1.38.0")
    listing.nodes[2]["status"]["nodeInfo"]["containerRuntimeVersion"] = "containerd://1.7.28"
    listing.nodes[1]["status"]["nodeInfo"]["containerRuntimeVersion"] = "containerd://1.7.28"
    c = by_id(vver.versions_checks(listing, settings))["versions.container-runtime"]
    assert c.status == "fail"
    # gpu-1's kubelet is 1.37: containerd 1.7 is still fine for it
    assert [p.subject for p in c.problems] == ["gpu-2"]
    assert "containerd 2.0 or later" in c.problems[0].message
    listing.nodes[2]["status"]["nodeInfo"]["containerRuntimeVersion"] = "containerd://2.4.2"
    assert by_id(vver.versions_checks(listing, settings))["versions.container-runtime"].status == (
        "pass"
    )
