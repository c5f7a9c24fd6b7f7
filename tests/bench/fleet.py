"""The objects of the scale benchmark: a fleet of H200 nodes as the API server holds them.

Everything here is built from the GPU simulator's own state (``gpufleet.lab.gpusim``),
so the devices are the ones the simulator's DRA kubelet plugin publishes for that state
(``lab/gpu-simulator/kubelet-plugin/internal/devices/devices.go`` ``Build``, which
follows the NVIDIA DRA driver's ``deviceinfo.go``/``mig.go``); the benchmark checks this
against the real plugin for one node before it creates the rest.

Shape per GPU node (``NODE_GPUS`` GPUs, the sample inventory's ``h200-split`` layout):
GPUs 0-3 MIG-enabled with one 3g.71gb and two 2g.35gb each, GPUs 4-7 whole, so 4 whole
GPUs and 12 MIG devices, one ResourceSlice of 16 devices (pool = node name, driver
``gpu.nvidia.com``). ResourceClaims take ``CLAIMS_PER_NODE`` devices of their node; every
``LEAK_EVERY``-th claim is leaked (allocated and reserved for a pod that no longer
exists, half of them generated for that pod), the others are reserved for a live pod
bound to the node. Each node also runs one kubelet plugin pod of a DaemonSet.

Pure functions returning JSON dicts; no I/O.
"""

from __future__ import annotations

import hashlib
import re
import uuid as uuidlib
from dataclasses import dataclass
from typing import Any

from gpufleet.lab import gpusim_plugin
from gpufleet.lab.gpusim import admin, mig
from gpufleet.lab.gpusim.state import State

DRIVER = "gpu.nvidia.com"
RESOURCE_API = "resource.k8s.io/v1"
GPU_MODEL = "NVIDIA H200"
NODE_GPUS = 8
#: GPU index -> MIG layout (GI profiles in ``nvidia-smi mig -cgi`` order); the sample
#: inventory's ``h200-split`` (inventory/sample/group_vars/all.yml).
MIG_LAYOUT: dict[int, tuple[str, ...]] = {i: ("3g.71gb", "2g.35gb", "2g.35gb") for i in range(4)}
CLAIMS_PER_NODE = 10
LEAK_EVERY = 20
#: Finalizer kube-scheduler sets when it allocates a claim (``resourceapi.Finalizer``).
FINALIZER = "resource.kubernetes.io/delete-protection"
GPU_LABEL = "nvidia.com/gpu.present"
PLUGIN_NAMESPACE = "nvidia-dra-driver-gpu"
PLUGIN_DAEMONSET = "nvidia-dra-driver-gpu-kubelet-plugin"
PLUGIN_LABELS = {
    "app.kubernetes.io/name": "nvidia-dra-driver-gpu",
    "app.kubernetes.io/component": "kubelet-plugin",
}
WORKLOAD_NAMESPACES = tuple(f"team-{i}" for i in range(10))
#: Never pulled: KWOK plays the kubelet.
IMAGE = "registry.invalid/pause:3.10"


# --------------------------------------------------------------------------- GPUs


def node_state(node: str) -> State:
    """The GPU simulator's state of one node: ``NODE_GPUS`` H200s (UUIDs derived from the
    node name by ``gpusim``), the GPUs of ``MIG_LAYOUT`` MIG-enabled and carved as
    ``nvidia-smi mig -cgi <profiles> -C`` would carve them."""
    state = admin.build_state(GPU_MODEL, NODE_GPUS, node)
    for gpu in state.gpus:
        layout = MIG_LAYOUT.get(gpu.index)
        if not layout:
            continue
        gpu.mig_mode_current = gpu.mig_mode_pending = "Enabled"
        model = mig.gpu_model(gpu)
        for token in layout:
            gi = mig.create_gi(gpu, mig.resolve_profile(model, token))
            mig.create_ci(gpu, gi, None)
    return state


def semver(nvidia_version: str) -> str:
    """``"580.159.04"`` -> ``"580.159.4"``, ``"9.0"`` -> ``"9.0.0"`` (devices.go
    ``SemverFromNVIDIA``)."""
    parts = [str(int(p)) for p in nvidia_version.strip().split(".")]
    return ".".join([*parts, "0", "0"][:3])


def bdf(pci_bus_id: str) -> str:
    """NVML's ``"00000000:19:00.0"`` -> ``"0000:19:00.0"`` (devices.go ``PCIBusIDToBDF``)."""
    domain, bus, rest = pci_bus_id.split(":")
    return f"{domain[-4:]}:{bus}:{rest}".lower()


_SUFFIXES = (
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)


def binary_si(value: int) -> str:
    """An integer quantity in Kubernetes' canonical BinarySI form (``16Gi``,
    ``143771Mi``, ``60``): the largest binary suffix that divides it exactly
    (``k8s.io/apimachinery/pkg/api/resource`` ``Quantity.String``)."""
    for suffix, size in _SUFFIXES:
        if value and value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)


def _mig_name(minor: int, profile: str, gi_profile_id: int, start: int) -> str:
    pname = re.sub(r"[^a-z0-9-.]", "-", profile.replace(".", "").lower()).strip("-")
    return f"gpu-{minor}-mig-{pname}-{gi_profile_id}-{start}"


def devices(state: State) -> list[dict[str, Any]]:
    """The devices the simulator's kubelet plugin publishes for ``state``, in publishing
    order (GPU minor, then GI placement, then CI ID); memory in bytes as BinarySI."""
    driver_version = semver(state.driver_version)
    cuda_version = semver(state.cuda_version)
    out: list[dict[str, Any]] = []
    for g in sorted(state.gpus, key=lambda g: g.minor):
        common = {
            "productName": {"string": g.name},
            "brand": {"string": g.brand},
            "architecture": {"string": g.architecture},
            "cudaComputeCapability": {"version": semver(g.compute_capability)},
            "driverVersion": {"version": driver_version},
            "cudaDriverVersion": {"version": cuda_version},
            "resource.kubernetes.io/pciBusID": {"string": bdf(g.pci_bus_id)},
        }
        # published only where the GPU reports them (devices.go, as NVML)
        if g.addressing_mode:
            common["addressingMode"] = {"string": g.addressing_mode}
        if g.pcie_root:
            common["resource.kubernetes.io/pcieRoot"] = {"string": g.pcie_root}
        if g.mig_mode_current != "Enabled":
            out.append(
                {
                    "name": f"gpu-{g.minor}",
                    "attributes": {
                        **common,
                        "type": {"string": "gpu"},
                        "uuid": {"string": g.uuid},
                    },
                    "capacity": {"memory": {"value": binary_si(g.memory_mib * 2**20)}},
                }
            )
            continue
        for gi in sorted(g.gpu_instances, key=lambda gi: gi.placement_start):
            for ci in sorted(gi.compute_instances, key=lambda ci: ci.id):
                profile = ci.profile or gi.profile
                capacity = {
                    "multiprocessors": {"value": binary_si(gi.multiprocessors)},
                    "copyEngines": {"value": binary_si(gi.copy_engines)},
                    "decoders": {"value": binary_si(gi.decoders)},
                    "encoders": {"value": binary_si(gi.encoders)},
                    "jpegEngines": {"value": binary_si(gi.jpeg_engines)},
                    "ofaEngines": {"value": binary_si(gi.ofa_engines)},
                    "memory": {"value": binary_si(gi.memory_mib * 2**20)},
                }
                for s in range(gi.placement_start, gi.placement_start + gi.placement_size):
                    capacity[f"memorySlice{s}"] = {"value": "1"}
                out.append(
                    {
                        "name": _mig_name(g.minor, profile, gi.profile_id, gi.placement_start),
                        "attributes": {
                            **common,
                            "type": {"string": "mig"},
                            "uuid": {"string": ci.uuid},
                            "parentUUID": {"string": g.uuid},
                            "profile": {"string": profile},
                        },
                        "capacity": capacity,
                    }
                )
    return out


def resource_slice(node: str, node_uid: str, devs: list[dict[str, Any]]) -> dict[str, Any]:
    """One ResourceSlice holding a node's whole pool, as the kubelet plugin's
    ResourceSlice controller writes it (``k8s.io/dynamic-resource-allocation`` v0.37.2
    ``resourceslice/resourceslicecontroller.go``: ``generateName``
    ``00000-<driver>-<node>-``, owned by the Node)."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": f"00000-{DRIVER}-{node}-",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node,
                    "uid": node_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devs,
        },
    }


def device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses the simulator's chart creates (``gpusim_plugin.device_classes``)."""
    return gpusim_plugin.device_classes(RESOURCE_API)


# --------------------------------------------------------------------------- claims


@dataclass(frozen=True)
class ClaimPlan:
    """One ResourceClaim of the fleet: where it lives, which device it holds, whether it
    leaked and, for a leaked one, whether it was generated for its (gone) pod."""

    namespace: str
    name: str
    pod: str
    node: str
    device: str
    device_class: str
    leaked: bool
    generated: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def plan_claims(nodes: list[str], node_devices: list[dict[str, Any]]) -> list[ClaimPlan]:
    """``CLAIMS_PER_NODE`` claims per node over ``node_devices`` (the devices every node
    publishes, by name): whole GPUs 4 and 5, then MIG devices in publishing order.
    Claim ``i`` (over the whole fleet) leaks when ``i % LEAK_EVERY == LEAK_EVERY - 1``;
    every other leaked claim is a generated one."""
    whole = [d for d in node_devices if d["attributes"]["type"]["string"] == "gpu"][:2]
    migs = [d for d in node_devices if d["attributes"]["type"]["string"] == "mig"]
    chosen = (whole + migs)[:CLAIMS_PER_NODE]
    out: list[ClaimPlan] = []
    i = 0
    for node in nodes:
        for d in chosen:
            leaked = i % LEAK_EVERY == LEAK_EVERY - 1
            generated = leaked and (i // LEAK_EVERY) % 2 == 1
            ns = WORKLOAD_NAMESPACES[i % len(WORKLOAD_NAMESPACES)]
            pod = f"job-{i:05d}"
            name = f"{pod}-gpu-{_suffix(i)}" if generated else f"claim-{i:05d}"
            kind = d["attributes"]["type"]["string"]
            out.append(
                ClaimPlan(ns, name, pod, node, d["name"], f"{kind}.nvidia.com", leaked, generated)
            )
            i += 1
    return out


def _suffix(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()[:5]


def claim_object(plan: ClaimPlan, dead_pod_uid: str | None = None) -> dict[str, Any]:
    """The ResourceClaim as created (spec and the scheduler's finalizer); a generated one
    carries the annotation and controller ownerReference the resource claim controller
    gives it (``pkg/controller/resourceclaim/controller.go``)."""
    meta: dict[str, Any] = {
        "name": plan.name,
        "namespace": plan.namespace,
        "finalizers": [FINALIZER],
    }
    if plan.generated:
        meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": plan.pod,
                "uid": dead_pod_uid or str(uuidlib.uuid4()),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": plan.device_class}}]
            }
        },
    }


def claim_status(plan: ClaimPlan, pod_uid: str) -> dict[str, Any]:
    """``status`` as kube-scheduler writes it when it allocates the device on the node
    and reserves the claim for the pod (``pkg/scheduler/framework/plugins/
    dynamicresources``): allocation results, node selector on ``metadata.name``,
    ``reservedFor`` the pod."""
    return {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": DRIVER,
                        "pool": plan.node,
                        "device": plan.device,
                    }
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [plan.node]}
                        ]
                    }
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": plan.pod, "uid": pod_uid}],
    }


def workload_pod(plan: ClaimPlan) -> dict[str, Any]:
    """The live pod that uses a claim, bound to the claim's node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": plan.pod, "namespace": plan.namespace, "labels": {"app": "train"}},
        "spec": {
            "nodeName": plan.node,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": plan.name}],
            "containers": [
                {"name": "main", "image": IMAGE, "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


# --------------------------------------------------------------------------- plugin


def plugin_daemonset() -> dict[str, Any]:
    """The kubelet plugin DaemonSet of the driver chart (only its selector and template
    labels matter to validation)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": PLUGIN_DAEMONSET, "namespace": PLUGIN_NAMESPACE},
        "spec": {
            "selector": {"matchLabels": dict(PLUGIN_LABELS)},
            "template": {
                "metadata": {"labels": dict(PLUGIN_LABELS)},
                "spec": {
                    "nodeSelector": {GPU_LABEL: "true"},
                    "containers": [{"name": "gpus", "image": IMAGE}],
                },
            },
        },
    }


def plugin_daemonset_status(nodes: int) -> dict[str, Any]:
    """DaemonSet status as the DaemonSet controller reports a plugin Ready everywhere."""
    return {
        "currentNumberScheduled": nodes,
        "desiredNumberScheduled": nodes,
        "numberAvailable": nodes,
        "numberMisscheduled": 0,
        "numberReady": nodes,
        "updatedNumberScheduled": nodes,
        "observedGeneration": 1,
    }


def plugin_pod(node: str, ds_uid: str) -> dict[str, Any]:
    """The DaemonSet's pod on ``node``, as the DaemonSet controller creates it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{PLUGIN_DAEMONSET}-{node}",
            "namespace": PLUGIN_NAMESPACE,
            "labels": dict(PLUGIN_LABELS),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": PLUGIN_DAEMONSET,
                    "uid": ds_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"nodeName": node, "containers": [{"name": "gpus", "image": IMAGE}]},
    }
