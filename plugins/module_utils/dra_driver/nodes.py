# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Where the NVIDIA DRA driver's kubelet plugin can run: the chart's default required node
affinity (``default_affinity``), whether a node passes the plugin's node selector, affinity
and taints (``kubelet_plugin_problem``, the DaemonSet controller's rules of
``kube.scheduling`` in the words of the chart's ``kubeletPlugin`` values), and the problems
of the GPU nodes (``node_problems``: nowhere to schedule, the classic device plugin still
advertising ``nvidia.com/gpu``); field case kubernetes-sigs/dra-driver-nvidia-gpu#1084.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    DEVICE_PLUGIN_RESOURCE,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.scheduling import (
    node_name_of,
    scheduling_problem,
)

__all__ = [
    "default_affinity",
    "kubelet_plugin_problem",
    "node_problems",
]


# --------------------------------------------------------------------------------------
# Nodes: scheduling of the kubelet plugin, the classic device plugin
# --------------------------------------------------------------------------------------

#: values.yaml ``kubeletPlugin.affinity`` defaults: any one of these labels.
_DEFAULT_AFFINITY_LABELS = {
    True: (
        ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
        ("nvidia.com/gpu.present", "true"),
    ),
    False: (
        ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
        ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
        ("nvidia.com/gpu.present", "true"),
    ),
}


def default_affinity(legacy: bool) -> dict[str, Any]:
    """The chart's default ``kubeletPlugin.affinity`` (25.x: ``legacy`` True; 0.4+: False)."""
    terms = [
        {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]}
        for k, v in _DEFAULT_AFFINITY_LABELS[legacy]
    ]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def kubelet_plugin_problem(node: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> str:
    """Why the kubelet plugin's pod (``pod_spec``: its ``nodeSelector``, ``affinity`` and
    ``tolerations``, from the chart values ``kubeletPlugin.*`` or the live DaemonSet) cannot
    run on ``node``, or "" (``kube.scheduling.scheduling_problem``, naming those values)."""
    return scheduling_problem(node, pod_spec, values="kubeletPlugin.", owner="the kubelet plugin's")


def node_problems(
    nodes: Sequence[Mapping[str, Any]],
    gpu_nodes: Sequence[str],
    values: Mapping[str, Any],
    *,
    legacy_chart: bool = False,
    coexist_with_device_plugin: bool = False,
    device_plugin_nodes: Sequence[str] = (),
) -> list[str]:
    """Problems of the GPU nodes found in one Node list, each naming the node and the fix.

    ``gpu_nodes`` are the nodes of the DRA pools (every GPU node where the inventory has no
    device-plugin pool), ``device_plugin_nodes`` those of the device-plugin pools.

    - a GPU host without a Node object;
    - a GPU node the kubelet plugin would not be scheduled on with ``values`` (its
      ``kubeletPlugin.nodeSelector``, ``affinity`` or the chart default, ``tolerations``);
    - a GPU node whose ``status.allocatable`` has ``nvidia.com/gpu`` (the classic NVIDIA
      device plugin runs there), unless ``coexist_with_device_plugin``;
    - a node of a device-plugin pool the kubelet plugin would be scheduled on (two
      advertisers of its GPUs); ``coexist_with_device_plugin`` does not accept this one.
    """
    by_name = {node_name_of(n): n for n in nodes}
    plugin = values.get("kubeletPlugin") or {}
    pod_spec = {
        "nodeSelector": plugin.get("nodeSelector"),
        "affinity": plugin.get("affinity") or default_affinity(legacy_chart),
        "tolerations": plugin.get("tolerations"),
    }
    out: list[str] = []
    for name in gpu_nodes:
        node = by_name.get(name)
        if node is None:
            out.append(
                f"GPU node {name}: no Node object of that name; fix: join the node to the cluster "
                "or set kubernetes_node_name for the host"
            )
            continue
        why = kubelet_plugin_problem(node, pod_spec)
        if why:
            out.append(
                f"GPU node {name} {why}, so the kubelet plugin would not run there; fix: label it "
                "with the gpu_node_labels role (playbooks/gpu_node_labels.yml) or set "
                "dra_driver_node_selector/dra_driver_node_taints to what it carries"
            )
        alloc = (node.get("status") or {}).get("allocatable") or {}
        plugin_gpus = str(alloc.get(DEVICE_PLUGIN_RESOURCE, "0"))
        if plugin_gpus not in ("0", "") and not coexist_with_device_plugin:
            out.append(
                f"GPU node {name} advertises {DEVICE_PLUGIN_RESOURCE}="
                f"{alloc[DEVICE_PLUGIN_RESOURCE]} in status.allocatable: the classic NVIDIA "
                "device plugin runs there and would hand out the same GPUs as DRA; fix: remove "
                "the device plugin (GPU Operator devicePlugin.enabled=false) or set "
                "dra_driver_coexist_with_device_plugin: true"
            )
    for name in device_plugin_nodes:
        node = by_name.get(name)
        if node is None:
            continue
        if not kubelet_plugin_problem(node, pod_spec):
            out.append(
                f"GPU node {name} is on the device-plugin path (group "
                f"{gp.path_group(gp.DEVICE_PLUGIN)}) but the kubelet plugin would run there "
                "too, and both would hand out its GPUs; fix: label it with the gpu_node_labels "
                f"role ({gp.PATH_LABEL}={gp.DEVICE_PLUGIN}) and keep {gp.PATH_LABEL} out of "
                "dra_driver_node_selector and dra_driver_extra_values.kubeletPlugin"
            )
    return out
