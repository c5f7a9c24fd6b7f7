"""GPU node checks of a listed cluster: labels, kubelet plugins, ResourceSlices against host facts
(``plugins/module_utils/validate/nodes.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import nodes as vno

from tests.unit.validate.listed_cluster import UUID1, UUID2, by_id, facts, healthy
from tests.unit.validate_objects import (
    gpu_device,
    mig_device,
    node,
    resource_slice,
)

pytestmark = pytest.mark.unit


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


def _compute_domain_slice(node_name: str) -> dict:
    return resource_slice(
        node_name,
        [{"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}}],
        driver="compute-domain.nvidia.com",
    )


def test_compute_domain_slices_without_their_plugin_are_orphans() -> None:
    """The chart's ComputeDomain driver publishes from the same kubelet plugin pods: its
    slices on a node without a running plugin pod are judged, not set aside."""
    listing, settings = healthy()
    listing.slices.append(_compute_domain_slice("gpu-2"))
    listing.pods = [p for p in listing.pods if p["metadata"]["name"] != "plugin-b"]
    c = by_id(vno.nodes_checks(listing, settings))["nodes.orphan-slices"]
    cd = [(p.subject, p.message) for p in c.problems if "compute-domain.nvidia.com" in p.message]
    assert [s for s, _ in cd] == ["gpu-2"]
    assert "of driver compute-domain.nvidia.com is published but no plugin pod of " in cd[0][1]
    assert "with its compute-domains container ready" in cd[0][1]
    assert [p.subject for p in c.problems] == ["gpu-2", "gpu-2"]
    assert "spec.driver=compute-domain.nvidia.com" in c.fix
    assert "spec.driver=gpu.nvidia.com" in c.fix
    assert not any("not judged" in e.source for e in c.evidence)


def test_compute_domain_slices_with_their_container_ready_pass() -> None:
    listing, settings = healthy()
    listing.slices.append(_compute_domain_slice("gpu-1"))
    plugin = next(p for p in listing.pods if p["metadata"]["name"] == "plugin-a")
    plugin["status"]["containerStatuses"] = [
        {"name": "gpus", "ready": False},
        {"name": "compute-domains", "ready": True},
    ]
    c = by_id(vno.nodes_checks(listing, settings))["nodes.orphan-slices"]
    assert [(p.subject, p.message.split(" is published")[0]) for p in c.problems] == [
        ("gpu-1", "ResourceSlice gpu-1-gpu.nvidia.com-1 of driver gpu.nvidia.com")
    ]


def test_slices_of_a_driver_outside_the_chart_stay_unjudged_evidence() -> None:
    listing, settings = healthy()
    listing.slices.append(resource_slice("gpu-2", [gpu_device(0, "x")], driver="x.example.com"))
    listing.pods = [p for p in listing.pods if p["metadata"]["name"] != "plugin-b"]
    c = by_id(vno.nodes_checks(listing, settings))["nodes.orphan-slices"]
    assert [p.subject for p in c.problems] == ["gpu-2"]
    assert any("x.example.com" in e.detail for e in c.evidence if e.source == "not judged")
