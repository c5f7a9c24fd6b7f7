"""GPU paths of a listed cluster: a node advertising its GPUs both through NVIDIA's device
plugin and DRA, a GPU node advertising none, DeviceClass extendedResourceName against the
release (``plugins/module_utils/validate/gpu_paths.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import gpu_paths as vgp

from tests.unit.validate.listed_cluster import UUID1, by_id, healthy
from tests.unit.validate_objects import GPU_CLASS, gpu_device, node, resource_slice

pytestmark = pytest.mark.unit


def device_plugin_node(name: str, gpus: str = "8", member: str = "allocatable") -> dict[str, Any]:
    """A GPU node where NVIDIA's device plugin registered ``nvidia.com/gpu`` (the kubelet
    lists it in both capacity and allocatable)."""
    n = node(name, {"nvidia.com/gpu.present": "true"})
    n["status"]["capacity"] = {"cpu": "64", "memory": "2113527340Ki", "pods": "110"}
    n["status"]["allocatable"] = {"cpu": "63800m", "memory": "2113424940Ki", "pods": "110"}
    n["status"][member]["nvidia.com/gpu"] = gpus
    if member == "allocatable":
        n["status"]["capacity"]["nvidia.com/gpu"] = gpus
    return n


def extended_class(version_name: str = "gpu.nvidia.com") -> dict[str, Any]:
    """NVIDIA's GPU DeviceClass as the chart renders it for resource.k8s.io/v1."""
    dc = {**GPU_CLASS, "metadata": {"name": version_name}}
    dc["spec"] = {**GPU_CLASS["spec"], "extendedResourceName": "nvidia.com/gpu"}
    return dc


def checks(listing: Any, settings: Any, audit: Any = None) -> dict:
    return by_id(vgp.gpu_paths_checks(listing, settings, audit))


def test_a_healthy_dra_cluster_passes_and_reports_each_nodes_path() -> None:
    listing, settings = healthy()
    c = checks(listing, settings)
    assert c["nodes.gpu-path-dual"].status == "pass"
    assert c["nodes.gpu-path-none"].status == "pass"
    assert c["nodes.gpu-path-dual"].data["paths"] == {"gpu-1": "dra", "gpu-2": "dra"}
    assert c["nodes.gpu-path-dual"].data["counts"] == {
        "device-plugin": 0,
        "dra": 2,
        "both": 0,
        "none": 0,
    }
    assert c["nodes.gpu-path-dual"].summary == "one path per node (2 dra)"


def test_a_node_advertised_by_the_device_plugin_and_a_resourceslice_fails_naming_both() -> None:
    listing, settings = healthy()
    listing.nodes[1] = device_plugin_node("gpu-1", "8")
    c = checks(listing, settings)["nodes.gpu-path-dual"]
    assert c.status == "fail"
    assert [(p.subject, p.status) for p in c.problems] == [("gpu-1", "fail")]
    assert c.problems[0].message == (
        "nvidia.com/gpu=8 in status.allocatable (NVIDIA device plugin) and 1 device(s) in "
        "ResourceSlice(s) gpu-1-gpu.nvidia.com-1 of driver gpu.nvidia.com (DRA): two "
        "advertisers of the same GPUs, the scheduler can hand one GPU out twice; the "
        "inventory puts the node on dra (in no gpu_path_* group, the default): remove the "
        "device-plugin advertiser"
    )
    assert c.data["paths"] == {"gpu-1": "both", "gpu-2": "dra"}
    assert "devicePlugin.enabled=false" in (c.fix or "")
    assert "spec.nodeName=<node>,spec.driver=gpu.nvidia.com" in (c.fix or "")
    assert "gpu_path_device_plugin" in (c.fix or "") and "gpu_path_dra" in (c.fix or "")


def test_capacity_alone_counts_when_allocatable_does_not_list_the_resource() -> None:
    listing, settings = healthy()
    listing.nodes[1] = device_plugin_node("gpu-1", "4", member="capacity")
    c = checks(listing, settings)["nodes.gpu-path-dual"]
    assert c.status == "fail"
    assert c.problems[0].message.startswith("nvidia.com/gpu=4 in status.capacity ")


def test_mig_resources_of_the_mixed_strategy_are_device_plugin_resources() -> None:
    listing, settings = healthy()
    n = node("gpu-2", {"nvidia.com/gpu.present": "true"})
    n["status"]["allocatable"] = {"nvidia.com/mig-1g.18gb": "7"}
    listing.nodes[2] = n
    c = checks(listing, settings)["nodes.gpu-path-dual"]
    assert [p.subject for p in c.problems] == ["gpu-2"]
    assert "nvidia.com/mig-1g.18gb=7 in status.allocatable" in c.problems[0].message


def test_a_device_plugin_pool_without_slices_passes_on_its_own_path() -> None:
    listing, settings = healthy()
    listing.nodes[2] = device_plugin_node("gpu-2")
    listing.slices = [s for s in listing.slices if s["spec"]["nodeName"] != "gpu-2"]
    c = checks(listing, settings)
    assert c["nodes.gpu-path-dual"].status == "pass"
    assert c["nodes.gpu-path-none"].status == "pass"
    assert c["nodes.gpu-path-dual"].data["paths"] == {"gpu-1": "dra", "gpu-2": "device-plugin"}


def test_a_stopped_device_plugin_at_zero_does_not_advertise() -> None:
    listing, settings = healthy()
    listing.nodes[1] = device_plugin_node("gpu-1", "0")
    c = checks(listing, settings)
    assert c["nodes.gpu-path-dual"].status == "pass"
    assert c["nodes.gpu-path-dual"].data["paths"]["gpu-1"] == "dra"


def test_slices_of_other_drivers_and_of_older_generations_do_not_count() -> None:
    listing, settings = healthy()
    listing.nodes[1] = device_plugin_node("gpu-1")
    listing.slices = [
        resource_slice("gpu-1", [gpu_device(0, UUID1)], generation=1, name="old"),
        resource_slice("gpu-1", [], generation=2, name="new-empty"),
        resource_slice("gpu-1", [{"name": "channel-0"}], driver="compute-domain.nvidia.com"),
        resource_slice("gpu-2", [gpu_device(0, "GPU-2222")]),
    ]
    c = checks(listing, settings)
    assert c["nodes.gpu-path-dual"].status == "pass"
    assert c["nodes.gpu-path-dual"].data["paths"] == {"gpu-1": "device-plugin", "gpu-2": "dra"}


def test_the_validated_driver_counts_beside_nvidias() -> None:
    listing, settings = healthy()
    settings.driver = "gpu.example.com"
    listing.nodes[2] = device_plugin_node("gpu-2")
    listing.slices.append(
        resource_slice("gpu-2", [gpu_device(1, "GPU-3")], driver="gpu.example.com")
    )
    c = checks(listing, settings)["nodes.gpu-path-dual"]
    assert [p.subject for p in c.problems] == ["gpu-2"]
    assert "of driver gpu.example.com, gpu.nvidia.com (DRA)" in c.problems[0].message
    assert "spec.driver=gpu.example.com; kubectl delete" in (c.fix or "")


def test_an_unlabelled_node_with_both_advertisers_fails_too() -> None:
    listing, settings = healthy()
    n = device_plugin_node("cpu-x")
    n["metadata"]["labels"] = {}
    listing.nodes.append(n)
    listing.slices.append(resource_slice("cpu-x", [gpu_device(0, "GPU-9")]))
    c = checks(listing, settings)["nodes.gpu-path-dual"]
    assert [p.subject for p in c.problems] == ["cpu-x"]


def test_a_gpu_node_advertising_nothing_fails() -> None:
    listing, settings = healthy()
    listing.slices = [s for s in listing.slices if s["spec"]["nodeName"] != "gpu-2"]
    c = checks(listing, settings)
    none = c["nodes.gpu-path-none"]
    assert none.status == "fail"
    assert [(p.subject, p.status) for p in none.problems] == [("gpu-2", "fail")]
    assert none.problems[0].message == (
        "advertises no GPU: no device plugin resource nvidia.com/gpu and no ResourceSlice "
        "with devices of driver gpu.nvidia.com; no pod can get its GPUs"
    )
    assert none.data["nodes"] == ["gpu-2"]
    assert c["nodes.gpu-path-dual"].data["paths"]["gpu-2"] == "none"
    assert "nodes.plugin-running" in (none.fix or "")


def test_a_labelled_node_outside_the_inventory_is_a_gpu_node() -> None:
    listing, settings = healthy()
    listing.nodes.append(node("gpu-3", {"nvidia.com/gpu.present": "true"}))
    none = checks(listing, settings)["nodes.gpu-path-none"]
    assert [p.subject for p in none.problems] == ["gpu-3"]


def test_a_stopped_device_plugin_is_named_on_a_node_with_nothing() -> None:
    listing, settings = healthy()
    listing.nodes[2] = device_plugin_node("gpu-2", "0")
    listing.slices = [s for s in listing.slices if s["spec"]["nodeName"] != "gpu-2"]
    none = checks(listing, settings)["nodes.gpu-path-none"]
    assert "(nvidia.com/gpu=0: the device plugin stopped)" in none.problems[0].message


def test_without_gpu_nodes_the_none_check_is_skipped() -> None:
    listing, settings = healthy()
    listing.nodes = [node("cp")]
    listing.slices = []
    settings.gpu_nodes = []
    c = checks(listing, settings)
    assert c["nodes.gpu-path-none"].status == "skip"
    assert c["nodes.gpu-path-dual"].status == "pass"


def test_unlisted_nodes_or_slices_skip_the_path_checks() -> None:
    listing, settings = healthy()
    listing.errors["resourceslices"] = "403 Forbidden"
    c = checks(listing, settings)
    assert c["nodes.gpu-path-dual"].status == "skip"
    assert "403 Forbidden" in (c["nodes.gpu-path-dual"].reason or "")
    assert c["nodes.gpu-path-none"].status == "skip"


def test_an_unreadable_resource_group_skips_the_path_checks() -> None:
    listing, settings = healthy()
    listing.resource_version = None
    listing.errors["resource.k8s.io"] = "503 Service Unavailable"
    listing.errors["resourceslices"] = "resource.k8s.io is not served"
    listing.nodes[1] = device_plugin_node("gpu-1")
    c = checks(listing, settings)
    assert c["nodes.gpu-path-dual"].status == "skip"
    assert "503 Service Unavailable" in (c["nodes.gpu-path-dual"].reason or "")


def test_a_cluster_without_resource_k8s_io_is_judged_on_the_device_plugin_alone() -> None:
    listing, settings = healthy()
    listing.resource_version = None
    listing.errors["resourceslices"] = "resource.k8s.io is not served"
    listing.slices = []
    listing.nodes[1] = device_plugin_node("gpu-1")
    c = checks(listing, settings)
    assert c["nodes.gpu-path-dual"].data["paths"] == {"gpu-1": "device-plugin", "gpu-2": "none"}
    assert [p.subject for p in c["nodes.gpu-path-none"].problems] == ["gpu-2"]


# ------------------------------------------------------------ extendedResourceName


def test_extended_resource_name_on_a_release_that_serves_it_passes() -> None:
    listing, settings = healthy()  # 1.37.2: DRAExtendedResource GA, locked on
    listing.classes = [extended_class()]
    c = checks(listing, settings)["api.deviceclass-extended-resource"]
    assert c.status == "pass"
    assert "DRAExtendedResource is GA, on by default, locked in 1.37.2" in c.summary


def test_extended_resource_name_where_the_gate_is_alpha_and_off_fails_with_the_fix() -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.35.1"}
    listing.classes = [extended_class(), {**GPU_CLASS, "metadata": {"name": "mig.nvidia.com"}}]
    c = checks(listing, settings)["api.deviceclass-extended-resource"]
    assert c.status == "fail"
    assert [p.subject for p in c.problems] == ["gpu.nvidia.com"]
    assert c.problems[0].message == (
        "DeviceClass gpu.nvidia.com sets extendedResourceName: nvidia.com/gpu, but "
        "DRAExtendedResource is alpha, off by default in 1.35.1, off as planned for the "
        "features and gates asked for: kube-apiserver does not serve the field and no pod "
        "asking for nvidia.com/gpu is served by DRA"
    )
    assert "dra_feature_gates_features: [extended-resource]" in (c.fix or "")
    assert "gpufleet gates apply -i INVENTORY" in (c.fix or "")


def test_extended_resource_name_passes_where_the_feature_was_asked_for() -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.35.1"}
    listing.classes = [extended_class()]
    settings.features = ["extended-resource"]
    c = checks(listing, settings)["api.deviceclass-extended-resource"]
    assert c.status == "pass"


def test_extended_resource_name_before_the_gate_exists_fails_with_an_upgrade() -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.33.4"}
    listing.classes = [extended_class()]
    c = checks(listing, settings)["api.deviceclass-extended-resource"]
    assert c.status == "fail"
    assert "not known to 1.33 (introduced in 1.34)" in c.problems[0].message
    assert "DRAExtendedResource since 1.34" in (c.fix or "")


def test_the_gate_audit_of_kube_apiserver_decides_over_the_default() -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.36.0"}  # beta, on by default
    listing.classes = [extended_class()]
    audit = {
        "summary": {
            "cells": {
                "kube-apiserver": {
                    "cp-1": {"state": "running", "feature_gates": {}},
                    "cp-2": {"state": "running", "feature_gates": {"DRAExtendedResource": False}},
                }
            }
        }
    }
    c = checks(listing, settings, audit)["api.deviceclass-extended-resource"]
    assert c.status == "fail"
    assert "off on the kube-apiserver of cp-2 (gate audit)" in c.problems[0].message
    assert checks(listing, settings)["api.deviceclass-extended-resource"].status == "pass"


def test_no_extended_resource_name_passes_whatever_the_release() -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.33.4"}
    c = checks(listing, settings)["api.deviceclass-extended-resource"]
    assert c.status == "pass"
    assert c.summary == "no DeviceClass sets extendedResourceName"


def test_the_checks_run_with_every_cluster_check() -> None:
    listing, settings = healthy()
    ids = {c.id for c in vc.all_checks(listing, settings)}
    assert {
        "nodes.gpu-path-dual",
        "nodes.gpu-path-none",
        "api.deviceclass-extended-resource",
    } <= ids
