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
    kubelet_plugin_problem,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.daemonsets import (
    release_daemonset,
    rollout_verdict,
)

__all__ = [
    "daemonset_verdict",
    "expected_devices",
    "find_kubelet_plugin_daemonset",
    "slice_verdict",
]


# --------------------------------------------------------------------------------------
# Verification: the kubelet-plugin DaemonSet and the ResourceSlices
# --------------------------------------------------------------------------------------


def find_kubelet_plugin_daemonset(
    daemonsets: Sequence[Mapping[str, Any]], release: str, name: str = ""
) -> Mapping[str, Any] | None:
    """The release's kubelet-plugin DaemonSet from one DaemonSet list: ``name`` when given,
    else the one of Helm release ``release`` with ``kubelet-plugin`` or ``kubeletplugin`` in
    its name (``kube.daemonsets.release_daemonset``)."""
    return release_daemonset(daemonsets, release, name, is_it=_is_kubelet_plugin)


def _is_kubelet_plugin(ds_name: str) -> bool:
    return "kubeletplugin" in ds_name.replace("-", "")


def daemonset_verdict(
    ds: Mapping[str, Any] | None,
    gpu_nodes: Sequence[str],
    nodes: Sequence[Mapping[str, Any]],
    *,
    release: str = "",
    namespace: str = "",
) -> dict[str, Any]:
    """Whether the kubelet-plugin DaemonSet runs a ready pod on every GPU node of the DRA
    pools (``gpu_nodes``), and only there: ``kube.daemonsets.rollout_verdict``, which
    returns ``{"ok", "final", "message"}`` and does not pass 0 of 0
    (kubernetes-sigs/dra-driver-nvidia-gpu#1084). The message names the GPU nodes the live
    pod template does not fit (missing labels, untolerated taints, in the words of the
    chart's ``kubeletPlugin`` values), the other nodes it fits, and the fix."""
    return rollout_verdict(
        ds,
        gpu_nodes,
        nodes,
        why_not_here=kubelet_plugin_problem,
        what="kubelet-plugin",
        wanted_as="GPU",
        fix="label the GPU nodes (playbooks/gpu_node_labels.yml, nvidia.com/gpu.present=true) "
        "or set dra_driver_node_selector or dra_driver_extra_values.kubeletPlugin to match them",
        release=release,
        namespace=namespace,
    )


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
