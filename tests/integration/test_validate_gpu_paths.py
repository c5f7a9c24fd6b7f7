"""GPU paths against a real kube-apiserver: a Node whose status (patched through the status
subresource, as the kubelet writes it) advertises ``nvidia.com/gpu`` from NVIDIA's device
plugin, and a ResourceSlice of the GPU driver for the same node, fail
``nodes.gpu-path-dual`` naming both advertisers; a DeviceClass with
``extendedResourceName`` is kept by the release that serves the field and passes
``api.deviceclass-extended-resource``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc

from tests.harness.controlplane import ControlPlane

pytestmark = pytest.mark.integration

LABELS = {"nvidia.com/gpu.present": "true"}


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": LABELS}}


def gpu_slice(node_name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpu.nvidia.com-abcde"},
        "spec": {
            "driver": ddc.NVIDIA_DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "uuid": {"string": f"GPU-{node_name}-{i}"},
                        "productName": {"string": "NVIDIA H200"},
                    },
                    "capacity": {"memory": {"value": "143771Mi"}},
                }
                for i in range(gpus)
            ],
        },
    }


def apply(cp: ControlPlane, objs: list[dict[str, Any]]) -> None:
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
    path = cp.kubeconfig.parent / "gpu-paths.json"
    path.write_text(doc)
    cp.kubectl("apply", "-f", str(path))


def advertise_device_plugin(cp: ControlPlane, name: str, gpus: str) -> None:
    """The Node's status as the kubelet writes it for a device plugin of ``gpus`` GPUs."""
    status = {
        "capacity": {"cpu": "64", ddc.DEVICE_PLUGIN_RESOURCE: gpus},
        "allocatable": {"cpu": "63", ddc.DEVICE_PLUGIN_RESOURCE: gpus},
    }
    cp.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p",
               json.dumps({"status": status}))  # fmt: skip


def test_a_node_advertised_by_the_device_plugin_and_dra_fails_naming_both(
    apiserver: ControlPlane,
) -> None:
    cp = apiserver
    gpu_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": ddc.GPU_CLASS},
        "spec": {
            "selectors": [{"cel": {"expression": f"device.driver == '{ddc.NVIDIA_DRIVER}'"}}],
            "extendedResourceName": ddc.DEVICE_PLUGIN_RESOURCE,
        },
    }
    apply(
        cp,
        [node("both-1"), node("dra-1"), node("plugin-1"), node("bare-1"), gpu_class],
    )
    for name in ("both-1", "plugin-1"):
        advertise_device_plugin(cp, name, "8")
    apply(cp, [gpu_slice("both-1", 8), gpu_slice("dra-1", 8)])
    stored = cp.get_json(f"/apis/resource.k8s.io/v1/deviceclasses/{ddc.GPU_CLASS}")
    assert stored["spec"]["extendedResourceName"] == ddc.DEVICE_PLUGIN_RESOURCE

    listing = vli.list_cluster(vk.Kube(str(cp.kubeconfig)))
    assert not listing.errors, listing.errors
    settings = vli.Settings(
        driver=ddc.NVIDIA_DRIVER,
        device_classes=[ddc.GPU_CLASS],
        gpu_nodes=["both-1", "dra-1", "plugin-1", "bare-1"],
    )
    checks = {c.id: c for c in vc.all_checks(listing, settings)}

    dual = checks["nodes.gpu-path-dual"]
    assert dual.status == "fail"
    assert [p.subject for p in dual.problems] == ["both-1"]
    message = dual.problems[0].message
    assert "nvidia.com/gpu=8 in status.allocatable (NVIDIA device plugin)" in message
    assert "8 device(s) in ResourceSlice(s) both-1-gpu.nvidia.com-abcde" in message
    assert "of driver gpu.nvidia.com (DRA)" in message
    assert dual.data["paths"] == {
        "bare-1": "none",
        "both-1": "both",
        "dra-1": "dra",
        "plugin-1": "device-plugin",
    }

    none = checks["nodes.gpu-path-none"]
    assert [(p.subject, p.status) for p in none.problems] == [("bare-1", "fail")]

    ext = checks["api.deviceclass-extended-resource"]
    assert ext.status == "pass", ext.problems
    assert "DRAExtendedResource is GA" in ext.summary


def test_pools_report_their_declared_path_and_the_dra_checks_leave_device_plugin_nodes_out(
    apiserver: ControlPlane,
) -> None:
    """Pool ``pool_dp`` on the device plugin (one node listing ``nvidia.com/gpu``, one whose
    plugin stopped at 0), pool ``pool_dra`` on DRA (one node moved, one still on the device
    plugin): the DRA checks judge ``pool_dra`` only, ``nodes.device-plugin-gpus`` fails the
    stopped node and ``nodes.gpu-paths`` the node left behind."""
    cp = apiserver
    names = ["dp-ok", "dp-stopped", "dra-moved", "dra-behind"]
    apply(cp, [node(n) for n in names])
    for name, gpus in (("dp-ok", "8"), ("dp-stopped", "0"), ("dra-behind", "8")):
        advertise_device_plugin(cp, name, gpus)
    apply(cp, [gpu_slice("dra-moved", 8)])

    listing = vli.list_cluster(vk.Kube(str(cp.kubeconfig)))
    assert not listing.errors, listing.errors
    settings = vli.Settings(
        driver=ddc.NVIDIA_DRIVER,
        device_classes=[ddc.GPU_CLASS],
        gpu_nodes=names,
        node_groups={
            "pool_dp": ["dp-ok", "dp-stopped"],
            "pool_dra": ["dra-moved", "dra-behind"],
            "gpu_path_device_plugin": ["dp-ok", "dp-stopped"],
            "gpu_path_dra": ["dra-moved", "dra-behind"],
        },
    )
    checks = {c.id: c for c in vc.all_checks(listing, settings)}

    slices = checks["nodes.resourceslices"]
    assert [p.subject for p in slices.problems] == ["dra-behind"]
    assert any("left out: 2 GPU node(s)" in e.detail for e in slices.evidence)
    assert [p.subject for p in checks["nodes.plugin-running"].problems] == [
        "dra-moved",
        "dra-behind",
    ]

    dp = checks["nodes.device-plugin-gpus"]
    assert [(p.subject, p.status) for p in dp.problems] == [("dp-stopped", "fail")]
    assert "nvidia.com/gpu=0: NVIDIA's device plugin stopped" in dp.problems[0].message
    assert dp.data["nodes"] == {
        "dp-ok": {ddc.DEVICE_PLUGIN_RESOURCE: "8"},
        "dp-stopped": {ddc.DEVICE_PLUGIN_RESOURCE: "0"},
    }

    pools = checks["nodes.gpu-paths"]
    assert [(p.subject, p.status) for p in pools.problems] == [
        ("dp-stopped", "fail"),
        ("dra-behind", "fail"),
    ]
    assert pools.details[:2] == [
        "pool_dp: declares device-plugin; 2 node(s) advertise device-plugin 1, none 1 "
        "(off path: dp-stopped none)",
        "pool_dra: declares dra; 2 node(s) advertise device-plugin 1, dra 1 "
        "(off path: dra-behind device-plugin)",
    ]
