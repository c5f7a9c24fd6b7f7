"""A small healthy listed cluster (API server pods, host facts, GPU nodes) and check lookup,
shared by the cluster-side validate tests.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc

from tests.unit.validate_objects import (
    GPU_CLASS,
    MIG_CLASS,
    gpu_device,
    node,
    pod,
    resource_slice,
)

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
