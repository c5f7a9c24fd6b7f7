"""The GPU path checks (``validate.gpu_paths``) on Nodes, ResourceSlices and DeviceClasses
whose fields are odd, missing or of another type than the API's: nothing raises, a quantity
that is not a count fails closed (a node with one and a GPU ResourceSlice is on both
paths, named with the value as found), and a missing field advertises nothing."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import gpu_paths as vgp

from tests.unit.validate.listed_cluster import by_id, healthy
from tests.unit.validate_objects import GPU_CLASS, node

pytestmark = pytest.mark.unit


def _with_gpus(quantity: Any) -> dict[str, Any]:
    n = node("gpu-1", {"nvidia.com/gpu.present": "true"})
    n["status"]["allocatable"] = {"nvidia.com/gpu": quantity}
    return n


def _checks(listing: Any, settings: Any) -> dict[str, Any]:
    return by_id(vgp.gpu_paths_checks(listing, settings))


@pytest.mark.parametrize(
    ("quantity", "shown"),
    [
        ("1k", "nvidia.com/gpu=1k in status.allocatable"),
        ("8", "nvidia.com/gpu=8 in status.allocatable"),
        (8, "nvidia.com/gpu=8 in status.allocatable"),
        ("500m", "nvidia.com/gpu=500m in status.allocatable"),
        ("-1", "nvidia.com/gpu=-1 (not a count) in status.allocatable"),
        ("abc", "nvidia.com/gpu=abc (not a count) in status.allocatable"),
        ("", "nvidia.com/gpu= (not a count) in status.allocatable"),
        (None, "nvidia.com/gpu=None (not a count) in status.allocatable"),
        (True, "nvidia.com/gpu=True (not a count) in status.allocatable"),
        ({"value": "8"}, "nvidia.com/gpu={'value': '8'} (not a count) in status.allocatable"),
        ("9" * 400, "nvidia.com/gpu=" + "9" * 400 + " in status.allocatable"),
    ],
)
def test_odd_quantities_beside_a_gpu_resourceslice_fail_closed(quantity: Any, shown: str) -> None:
    listing, settings = healthy()
    listing.nodes[1] = _with_gpus(quantity)
    c = _checks(listing, settings)["nodes.gpu-path-dual"]
    assert c.status == "fail"
    assert [p.subject for p in c.problems] == ["gpu-1"]
    assert c.problems[0].message.startswith(shown + " (NVIDIA device plugin)")


@pytest.mark.parametrize("quantity", ["0", 0, "0k", "-0"])
def test_zero_in_any_spelling_advertises_nothing(quantity: Any) -> None:
    listing, settings = healthy()
    listing.nodes[1] = _with_gpus(quantity)
    c = _checks(listing, settings)
    assert c["nodes.gpu-path-dual"].status == "pass"
    assert c["nodes.gpu-path-dual"].data["paths"]["gpu-1"] == "dra"


@pytest.mark.parametrize(
    "status",
    [None, {}, {"allocatable": None}, {"allocatable": "8"}, {"capacity": ["nvidia.com/gpu"]}],
)
def test_a_node_status_without_resources_advertises_nothing(status: Any) -> None:
    listing, settings = healthy()
    n = node("gpu-1", {"nvidia.com/gpu.present": "true"})
    n["status"] = status
    listing.nodes[1] = n
    assert _checks(listing, settings)["nodes.gpu-path-dual"].data["paths"]["gpu-1"] == "dra"


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"driver": "gpu.nvidia.com", "nodeName": "gpu-2"},
        {"driver": "gpu.nvidia.com", "nodeName": "gpu-2", "devices": None},
        {"driver": "gpu.nvidia.com", "nodeName": "gpu-2", "devices": "gpu-0"},
        {"driver": "gpu.nvidia.com", "nodeName": "gpu-2", "devices": {"name": "gpu-0"}},
        {"driver": "gpu.nvidia.com", "nodeName": 7, "devices": [{"name": "gpu-0"}]},
        {"driver": None, "nodeName": "gpu-2", "devices": [{"name": "gpu-0"}]},
        {"driver": "gpu.nvidia.com", "allNodes": True, "devices": [{"name": "gpu-0"}]},
    ],
)
def test_a_slice_missing_its_node_driver_or_devices_advertises_nothing(spec: Any) -> None:
    listing, settings = healthy()
    listing.slices = [listing.slices[0], {"metadata": {"name": "odd"}, "spec": spec}]
    c = _checks(listing, settings)
    assert c["nodes.gpu-path-dual"].data["paths"] == {"gpu-1": "dra", "gpu-2": "none"}
    assert [p.subject for p in c["nodes.gpu-path-none"].problems] == ["gpu-2"]


def test_a_slice_of_a_node_that_is_not_listed_is_left_to_the_orphans_check() -> None:
    listing, settings = healthy()
    listing.slices.append(
        {"metadata": {}, "spec": {"driver": "gpu.nvidia.com", "nodeName": "gone", "devices": [{}]}}
    )
    assert "gone" not in _checks(listing, settings)["nodes.gpu-path-dual"].data["paths"]


@pytest.mark.parametrize(
    "dc",
    [
        {"metadata": {"name": "x"}},
        {"metadata": {"name": "x"}, "spec": None},
        {"metadata": {"name": "x"}, "spec": "extendedResourceName"},
        {"metadata": {"name": "x"}, "spec": {"extendedResourceName": None}},
        {"metadata": {"name": "x"}, "spec": {"extendedResourceName": ""}},
    ],
)
def test_a_deviceclass_without_a_readable_extended_resource_name_sets_none(dc: Any) -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.35.1"}
    listing.classes = [GPU_CLASS, dc]
    c = _checks(listing, settings)["api.deviceclass-extended-resource"]
    assert c.status == "pass" and c.summary == "no DeviceClass sets extendedResourceName"


@pytest.mark.parametrize("value", [7, ["nvidia.com/gpu"], {"name": "nvidia.com/gpu"}])
def test_an_extended_resource_name_of_another_type_is_still_judged(value: Any) -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.35.1"}
    listing.classes = [{"metadata": {"name": "odd"}, "spec": {"extendedResourceName": value}}]
    c = _checks(listing, settings)["api.deviceclass-extended-resource"]
    assert [(p.subject, p.status) for p in c.problems] == [("odd", "fail")]
    assert f"extendedResourceName: {value}, but" in c.problems[0].message


@pytest.mark.parametrize("version", ["v0.1", "garbage", "v1.99.0"])
def test_a_version_outside_the_model_skips_the_extended_resource_check(version: str) -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": version}
    listing.classes = [
        {**GPU_CLASS, "spec": {**GPU_CLASS["spec"], "extendedResourceName": "nvidia.com/gpu"}}
    ]
    c = _checks(listing, settings)["api.deviceclass-extended-resource"]
    assert c.status == "skip" and "the version model refuses" in (c.reason or "")


@pytest.mark.parametrize(
    "groups",
    [
        {"gpu_path_device_plugin": "gpu-1"},
        {"gpu_path_device_plugin": None, "gpu_h200": {"gpu-1": True}},
        {"gpu_path_device_plugin": [None, 7], "gpu_h200": []},
        {"gpu_path_dra_mig": ["gpu-1"]},
    ],
    ids=["string", "not-lists", "no-node-names", "unknown-path"],
)
def test_node_groups_that_name_no_node_declare_the_default(groups: Any) -> None:
    listing, settings = healthy()
    settings.node_groups = groups
    declared = vgp.declared_paths(settings)
    assert {n: (d.pool, d.path) for n, d in declared.items()} == {
        "gpu-1": ("(no node group)", "dra"),
        "gpu-2": ("(no node group)", "dra"),
    }
    assert _checks(listing, settings)["nodes.gpu-paths"].status == "pass"
