# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Whether the installed NVIDIA DRA driver works: the kubelet plugin DaemonSet
(``find_kubelet_plugin_daemonset``, ``daemonset_verdict``: scheduled nowhere, pods not
ready; a 0 == 0 readiness check does not pass, kubernetes-sigs/dra-driver-nvidia-gpu#1084)
and the ResourceSlices it publishes (``expected_devices``, ``slice_verdict``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    NVIDIA_DRIVER,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.nodes import (
    node_name_of,
    scheduling_problem,
)

__all__ = [
    "daemonset_verdict",
    "expected_devices",
    "slice_verdict",
]


# --------------------------------------------------------------------------------------
# Verification: the kubelet-plugin DaemonSet and the ResourceSlices
# --------------------------------------------------------------------------------------


def find_kubelet_plugin_daemonset(
    daemonsets: Sequence[Mapping[str, Any]], release: str, name: str = ""
) -> Mapping[str, Any] | None:
    """The release's kubelet-plugin DaemonSet from one DaemonSet list: ``name`` when given,
    else the one with Helm's ``meta.helm.sh/release-name`` annotation equal to ``release``
    and ``kubelet-plugin`` or ``kubeletplugin`` in its name."""
    for ds in daemonsets:
        meta = ds.get("metadata") or {}
        if name:
            if meta.get("name") == name:
                return ds
            continue
        ann = meta.get("annotations") or {}
        ds_name = str(meta.get("name") or "").replace("-", "")
        if ann.get("meta.helm.sh/release-name") == release and "kubeletplugin" in ds_name:
            return ds
    return None


def daemonset_verdict(
    ds: Mapping[str, Any] | None,
    gpu_nodes: Sequence[str],
    nodes: Sequence[Mapping[str, Any]],
    *,
    release: str = "",
    namespace: str = "",
) -> dict[str, Any]:
    """Whether the kubelet-plugin DaemonSet runs on every GPU node.

    Returns ``{"ok": bool, "final": bool, "message": str}``. ``ok`` needs the controller to
    have seen the newest spec (``status.observedGeneration >= metadata.generation``),
    ``desiredNumberScheduled == len(gpu_nodes) > 0`` and ``numberReady`` and
    ``updatedNumberScheduled`` equal to it. ``final`` is True when waiting cannot help: the
    controller has seen the spec and schedules the wrong number of pods (for example 0 of 0:
    kubernetes-sigs/dra-driver-nvidia-gpu#1084). The message names the GPU nodes the pod
    template does not fit (missing labels, untolerated taints) from the live DaemonSet.
    """
    where = f"{namespace}/" if namespace else ""
    if ds is None:
        return {
            "ok": False,
            "final": False,
            "message": f"no kubelet-plugin DaemonSet of release {release!r} in namespace "
            f"{namespace!r} yet",
        }
    meta, status = ds.get("metadata") or {}, ds.get("status") or {}
    name = f"{where}{meta.get('name')}"
    desired = int(status.get("desiredNumberScheduled") or 0)
    ready = int(status.get("numberReady") or 0)
    updated = int(status.get("updatedNumberScheduled") or 0)
    seen = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    want = len(gpu_nodes)
    counts = f"desiredNumberScheduled {desired}, numberReady {ready}, updated {updated}"
    if not seen:
        return {
            "ok": False,
            "final": False,
            "message": f"DaemonSet {name}: rollout not observed yet ({counts})",
        }
    if desired != want or desired == 0:
        spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        by_name = {node_name_of(n): n for n in nodes}
        misfits = []
        for node_name in gpu_nodes:
            node = by_name.get(node_name)
            why = (
                "has no Node object"
                if node is None
                else scheduling_problem(
                    node, spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")
                )
            )
            if why:
                misfits.append(f"{node_name} {why}")
        extra = [
            node_name_of(n)
            for n in nodes
            if node_name_of(n) not in gpu_nodes
            and not scheduling_problem(
                n, spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")
            )
        ]
        text = (
            f"DaemonSet {name} is scheduled on {desired} node(s) but there are {want} GPU "
            f"node(s) ({counts})"
        )
        if desired == 0:
            text += "; a DaemonSet with 0 of 0 pods ready serves no GPU"
        if misfits:
            text += "; " + "; ".join(misfits)
        if extra:
            text += "; it also fits non-GPU node(s) " + ", ".join(sorted(extra))
        text += (
            "; fix: label the GPU nodes (playbooks/gpu_node_labels.yml, "
            "nvidia.com/gpu.present=true) or set dra_driver_node_selector or "
            "dra_driver_extra_values.kubeletPlugin to match them"
        )
        return {"ok": False, "final": True, "message": text}
    if ready != desired or updated != desired:
        return {
            "ok": False,
            "final": False,
            "message": f"DaemonSet {name}: {ready} of {desired} pods ready, {updated} updated",
        }
    return {
        "ok": True,
        "final": True,
        "message": f"DaemonSet {name}: {ready} of {desired} pods ready",
    }


def expected_devices(gpus: Sequence[Mapping[str, Any]] | None) -> int | None:
    """Devices the driver publishes for a node with these GPUs (``gpu_facts``'
    ``gpufleet_gpus``): one per MIG device of a GPU whose current MIG mode is Enabled, else one
    per GPU (the static path of the driver: nvlib.go GetPerGpuAllocatableDevices). None when
    the facts are unknown."""
    if gpus is None:
        return None
    total = 0
    for gpu in gpus:
        if gpu.get("mig_mode_current") == "Enabled":
            total += len(gpu.get("mig_devices") or [])
        else:
            total += 1
    return total


def slice_verdict(
    slices: Sequence[Mapping[str, Any]],
    expected: Mapping[str, int | None],
    *,
    driver: str = NVIDIA_DRIVER,
    dynamic_mig: bool = False,
) -> dict[str, Any]:
    """Compare the ResourceSlices of ``driver`` (one list of every slice) with the devices
    each GPU node should publish (``expected``: node -> count, None = at least one).

    Per node, only the slices of the newest generation of each pool count, and a pool whose
    ``resourceSliceCount`` slices are not all there yet is incomplete. With ``dynamic_mig``
    the driver publishes every possible MIG placement, so only "at least one" is checked.
    Returns ``{"ok": bool, "devices": {node: n}, "problems": [str]}``.
    """
    pools: dict[tuple[str, str], dict[str, Any]] = {}
    for sl in slices:
        spec = sl.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") != driver or not node:
            continue
        pool = spec.get("pool") or {}
        key = (str(node), str(pool.get("name") or node))
        gen = int(pool.get("generation") or 0)
        entry = pools.setdefault(key, {"generation": gen, "slices": [], "count": 0})
        if gen > entry["generation"]:
            entry.update(generation=gen, slices=[], count=0)
        if gen == entry["generation"]:
            entry["slices"].append(sl)
            entry["count"] = max(entry["count"], int(pool.get("resourceSliceCount") or 1))
    devices: dict[str, int] = {}
    incomplete: set[str] = set()
    for (node, _unused), entry in pools.items():
        devices[node] = devices.get(node, 0) + sum(
            len((s.get("spec") or {}).get("devices") or []) for s in entry["slices"]
        )
        if len(entry["slices"]) < entry["count"]:
            incomplete.add(node)
    problems = []
    for node, want in sorted(expected.items()):
        have = devices.get(node)
        if have is None:
            problems.append(f"GPU node {node} has no ResourceSlice of driver {driver}")
        elif node in incomplete:
            problems.append(f"GPU node {node}: its ResourceSlice pool is incomplete")
        elif dynamic_mig or want is None:
            if have < 1:
                problems.append(f"GPU node {node} publishes no device of driver {driver}")
        elif have != want:
            problems.append(
                f"GPU node {node} publishes {have} device(s) of driver {driver}, its GPU facts "
                f"say {want} (one per GPU, one per MIG device of a MIG-enabled GPU)"
            )
    return {"ok": not problems, "devices": devices, "problems": problems}
