# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Where the NVIDIA DRA driver's kubelet plugin can run: the chart's default required node
affinity (``default_affinity``), whether a node passes the plugin's node selector, affinity
and taints (``scheduling_problem``), and the problems of the GPU nodes
(``node_problems``: nowhere to schedule, the classic device plugin still advertising
``nvidia.com/gpu``); field case kubernetes-sigs/dra-driver-nvidia-gpu#1084.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    DEVICE_PLUGIN_RESOURCE,
)

__all__ = [
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


def _expr_matches(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key, op = expr.get("key"), expr.get("operator")
    vals = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return key in labels and labels[key] in vals
    if op == "NotIn":
        return key not in labels or labels[key] not in vals
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and vals:
        try:
            have, want = int(labels[key]), int(vals[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _describe_expr(expr: Mapping[str, Any]) -> str:
    op, key, vals = expr.get("operator"), expr.get("key"), expr.get("values") or []
    if op == "In":
        return f"{key}={'|'.join(str(v) for v in vals)}"
    if op == "Exists":
        return f"{key} (any value)"
    if op == "DoesNotExist":
        return f"no {key}"
    if op == "NotIn":
        return f"{key} not in {list(vals)}"
    return f"{key} {op} {list(vals)}"


def scheduling_problem(
    node: Mapping[str, Any],
    node_selector: Mapping[str, str] | None,
    affinity: Mapping[str, Any] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    *,
    values: str = "kubeletPlugin.",
    plugin: str = "the kubelet plugin's",
) -> str:
    """Why a DaemonSet pod with this nodeSelector/affinity/tolerations cannot run on
    ``node`` (a Node object), or "" when it can. Only required node affinity counts, and
    only NoSchedule/NoExecute taints other than the node-condition taints every DaemonSet
    pod tolerates (the DaemonSet controller's rules, pkg/controller/daemon/daemon_controller.go
    NodeShouldRunDaemonPod). The reason names the chart values by ``values`` (their prefix:
    ``kubeletPlugin.`` for the DRA driver's chart, ``""`` for charts with top-level
    ``nodeSelector``) and the pod's owner by ``plugin``."""
    labels = node.get("metadata", {}).get("labels") or {}
    missing = [f"{k}={v}" for k, v in (node_selector or {}).items() if labels.get(k) != str(v)]
    if missing:
        return "lacks the label(s) " + ", ".join(missing) + f" that {values}nodeSelector requires"
    required = ((affinity or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(
        all(_expr_matches(labels, e) for e in t.get("matchExpressions") or []) for t in terms
    ):
        wants = [
            " and ".join(_describe_expr(e) for e in t.get("matchExpressions") or []) for t in terms
        ]
        return (
            f"matches none of {plugin} required node affinity terms: it needs one of "
            + "; ".join(wants)
        )
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if taint.get("key") in DAEMONSET_TOLERATED_TAINTS:
            continue
        if not any(_tolerates(t, taint) for t in tolerations or []):
            value = f"={taint['value']}" if taint.get("value") else ""
            return (
                f"has the taint {taint.get('key')}{value}:{taint.get('effect')} that "
                f"{values}tolerations do not tolerate"
            )
    return ""


#: Taints every DaemonSet pod tolerates: the DaemonSet controller adds these tolerations
#: itself (pkg/controller/daemon/util/daemonset_util.go AddOrUpdateDaemonPodTolerations).
DAEMONSET_TOLERATED_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable",
    }
)


def _tolerates(tol: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if tol.get("effect") and tol.get("effect") != taint.get("effect"):
        return False
    op = tol.get("operator") or "Equal"
    if not tol.get("key"):
        return op == "Exists"
    if tol.get("key") != taint.get("key"):
        return False
    return op == "Exists" or str(tol.get("value") or "") == str(taint.get("value") or "")


def node_name_of(node: Mapping[str, Any]) -> str:
    return str(node.get("metadata", {}).get("name") or "")


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
    affinity = plugin.get("affinity") or default_affinity(legacy_chart)
    out: list[str] = []
    for name in gpu_nodes:
        node = by_name.get(name)
        if node is None:
            out.append(
                f"GPU node {name}: no Node object of that name; fix: join the node to the cluster "
                "or set kubernetes_node_name for the host"
            )
            continue
        why = scheduling_problem(
            node, plugin.get("nodeSelector"), affinity, plugin.get("tolerations")
        )
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
        if not scheduling_problem(
            node, plugin.get("nodeSelector"), affinity, plugin.get("tolerations")
        ):
            out.append(
                f"GPU node {name} is on the device-plugin path (group "
                f"{gp.path_group(gp.DEVICE_PLUGIN)}) but the kubelet plugin would run there "
                "too, and both would hand out its GPUs; fix: label it with the gpu_node_labels "
                f"role ({gp.PATH_LABEL}={gp.DEVICE_PLUGIN}) and keep {gp.PATH_LABEL} out of "
                "dra_driver_node_selector and dra_driver_extra_values.kubeletPlugin"
            )
    return out
