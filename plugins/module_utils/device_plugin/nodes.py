# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Where NVIDIA's device plugin DaemonSet would run with the planned values, checked on one
Node list before anything is installed (``node_problems``): every node of a device-plugin
pool must get a pod, no node of a DRA pool may (its GPUs would be advertised twice, once
as ``nvidia.com/gpu`` and once in the DRA driver's ResourceSlices).

The scheduling rules are the DaemonSet controller's, as ``kube.scheduling
.scheduling_problem`` applies them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin.chart import (
    CHART_TOLERATIONS,
    DEFAULT_AFFINITY,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.scheduling import (
    node_name_of,
    scheduling_problem,
)

__all__ = [
    "node_problems",
    "placement",
    "why_not_here",
]


def placement(values: Mapping[str, Any], stand_in: bool = False) -> dict[str, Any]:
    """The DaemonSet pod's ``nodeSelector``, ``affinity`` and ``tolerations`` from Helm
    ``values`` (the chart's defaults where the values leave them out): NVIDIA's chart takes
    them at the top level; the stand-in takes ``devicePlugin.nodeSelector`` and its pod's
    ``kubeletPlugin.affinity``/``tolerations``."""
    if stand_in:
        pod = values.get("kubeletPlugin") or {}
        selector = (values.get("devicePlugin") or {}).get("nodeSelector")
    else:
        pod, selector = values, values.get("nodeSelector")
    return {
        "nodeSelector": dict(selector or {}),
        "affinity": pod.get("affinity") if "affinity" in pod else DEFAULT_AFFINITY,
        "tolerations": pod.get("tolerations") if "tolerations" in pod else CHART_TOLERATIONS,
    }


def why_not_here(node: Mapping[str, Any], where: Mapping[str, Any]) -> str:
    """Why the pod of ``where`` (``placement``, or a DaemonSet's pod spec) cannot run on
    ``node``, or ""."""
    return scheduling_problem(node, where, values="", owner="the device plugin's")


def node_problems(
    nodes: Sequence[Mapping[str, Any]],
    plugin_nodes: Sequence[str],
    dra_nodes: Sequence[str],
    values: Mapping[str, Any],
    *,
    stand_in: bool = False,
) -> list[str]:
    """Problems found in one Node list, each naming the node and the fix:

    - a node of a device-plugin pool (``plugin_nodes``) without a Node object, or that the
      DaemonSet would not be scheduled on with ``values``;
    - a node of a DRA pool (``dra_nodes``) that it would be scheduled on.
    """
    by_name = {node_name_of(n): n for n in nodes}
    where = placement(values, stand_in)
    out: list[str] = []
    for name in plugin_nodes:
        node = by_name.get(name)
        if node is None:
            out.append(
                f"device-plugin node {name}: no Node object of that name; fix: join the node to "
                "the cluster or set kubernetes_node_name for the host"
            )
            continue
        why = why_not_here(node, where)
        if why:
            out.append(
                f"device-plugin node {name} {why}, so the device plugin would not run there; "
                "fix: label it with the gpu_node_labels role (playbooks/gpu_node_labels.yml: "
                f"{gp.PATH_LABEL}={gp.DEVICE_PLUGIN} and the GPU labels) or set "
                "device_plugin_node_selector/device_plugin_node_taints to what it carries"
            )
    for name in dra_nodes:
        node = by_name.get(name)
        if node is not None and not why_not_here(node, where):
            out.append(
                f"DRA node {name} would get the device plugin too, and both it and the DRA "
                "driver would hand out its GPUs; fix: label it with the gpu_node_labels role "
                f"({gp.PATH_LABEL}={gp.DRA}) and keep {gp.PATH_LABEL}={gp.DEVICE_PLUGIN} in "
                "the device plugin's selector (device_plugin_extra_values must not replace it)"
            )
    return out
