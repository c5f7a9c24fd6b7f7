"""Small Kubernetes objects (JSON dicts, as the API lists them) for the validation tests.

Shapes follow ``staging/src/k8s.io/api`` (core/v1 Node and Pod, resource/v1 ResourceSlice,
ResourceClaim, DeviceClass); device attributes and capacities are those the NVIDIA DRA
driver publishes for an H200 (``lab/gpu-simulator/kubelet-plugin/internal/devices``).
"""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.nvidia.com"
H200_MIB = 143771


def node(
    name: str,
    labels: dict[str, str] | None = None,
    kubelet: str = "v1.37.2",
    ready: bool = True,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {
            "nodeInfo": {"kubeletVersion": kubelet},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    namespace: str = "default",
    uid: str | None = None,
    node_name: str | None = None,
    phase: str = "Running",
    labels: dict[str, str] | None = None,
    claims: list[str] | None = None,
    ready: bool = True,
    image: str | None = None,
    scheduled_message: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": name.split("-")[0], "image": image or "x"}]}
    if node_name:
        spec["nodeName"] = node_name
    if claims:
        spec["resourceClaims"] = [
            {"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)
        ]
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [{"ready": ready}]}
    if scheduled_message:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "message": scheduled_message}
        ]
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{name}",
            "labels": dict(labels or {}),
        },
        "spec": spec,
        "status": status,
    }


def gpu_device(
    minor: int, uuid: str, driver_version: str = "580.159.4", memory_mib: int = H200_MIB
) -> dict[str, Any]:
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": uuid},
            "productName": {"string": "NVIDIA H200"},
            "architecture": {"string": "Hopper"},
            "driverVersion": {"version": driver_version},
            "cudaComputeCapability": {"version": "9.0.0"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x19 + minor:02x}:00.0"},
        },
        "capacity": {"memory": {"value": f"{memory_mib}Mi"}},
    }


def mig_device(
    minor: int, parent: str, uuid: str, profile: str = "1g.18gb", start: int = 0
) -> dict[str, Any]:
    return {
        "name": f"gpu-{minor}-mig-{profile.replace('.', '')}-19-{start}",
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": uuid},
            "parentUUID": {"string": parent},
            "profile": {"string": profile},
            "productName": {"string": "NVIDIA H200"},
            "driverVersion": {"version": "580.159.4"},
        },
        "capacity": {
            "memory": {"value": "16Gi"},
            "multiprocessors": {"value": "16"},
            f"memorySlice{start}": {"value": "1"},
        },
    }


def resource_slice(
    node_name: str,
    devices: list[dict[str, Any]],
    driver: str = DRIVER,
    generation: int = 1,
    name: str | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name or f"{node_name}-{driver}-{generation}"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


GPU_CLASS = device_class(
    "gpu.nvidia.com",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
)
MIG_CLASS = device_class(
    "mig.nvidia.com",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
)


def claim(
    name: str,
    namespace: str = "default",
    requests: list[dict[str, Any]] | None = None,
    allocated: list[tuple[str, str]] | None = None,
    reserved_for: list[tuple[str, str]] | None = None,
    owner_pod: tuple[str, str] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    constraints: list[dict[str, Any]] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """``allocated``: [(pool, device)] of driver gpu.nvidia.com; ``reserved_for``:
    [(pod name, pod uid)]; ``owner_pod``: (pod name, pod uid) of a generated claim."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-claim-{name}",
        "creationTimestamp": created,
        "resourceVersion": "1",
    }
    status: dict[str, Any] = {}
    if allocated:
        meta["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        status["allocation"] = {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": pool, "device": dev}
                    for pool, dev in allocated
                ]
            }
        }
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": n, "uid": u} for n, u in reserved_for]
    if owner_pod:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner_pod[0],
                "uid": owner_pod[1],
                "controller": True,
            }
        ]
        meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    devices: dict[str, Any] = {
        "requests": requests or [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
    }
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": meta, "spec": {"devices": devices}, "status": status}


def mig_request(profile: str, count: int = 1) -> dict[str, Any]:
    return {
        "name": "mig",
        "exactly": {
            "deviceClassName": "mig.nvidia.com",
            "allocationMode": "ExactCount",
            "count": count,
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
                    }
                }
            ],
        },
    }
