# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Whether NVIDIA's device plugin works once installed: its DaemonSet runs a ready pod on
every node of the device-plugin pools and nowhere else (``find_daemonset``,
``daemonset_verdict``; a 0 of 0 DaemonSet does not pass), and each such node advertises
its GPUs in ``status.allocatable`` while no node of a DRA pool does
(``advertised_verdict``).

What a node advertises: the kubelet lists a device plugin's resource in the Node's
``status.capacity`` and ``status.allocatable`` as a count, and keeps it at 0 after the
plugin stops (``pkg/kubelet/nodestatus/setters.go``), so only a positive count advertises.
``nvidia.com/gpu`` counts; with the ``mixed`` MIG strategy a GPU in MIG mode is advertised
as ``nvidia.com/mig-<profile>`` instead (NVIDIA/k8s-device-plugin ``internal/rm/rm.go``),
so its profiles count too. On a node of a DRA pool a quantity that is not a count fails
closed (it is taken as advertised), as validate's ``nodes.gpu-path-dual`` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin.nodes import (
    why_not_here,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    DEVICE_PLUGIN_RESOURCE,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.daemonsets import (
    release_daemonset,
    rollout_verdict,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.scheduling import (
    node_name_of,
)

__all__ = [
    "advertised_verdict",
    "daemonset_verdict",
    "find_daemonset",
]

#: DaemonSets of NVIDIA's chart that are not the plugin (templates/daemonset-*.yml).
_OTHER_DAEMONSETS = ("-mps-control-daemon", "-gpu-feature-discovery")
_COUNT = re.compile(r"[0-9]+")


def find_daemonset(
    daemonsets: Sequence[Mapping[str, Any]], release: str, name: str = ""
) -> Mapping[str, Any] | None:
    """The release's device-plugin DaemonSet from one DaemonSet list: ``name`` when given,
    else the one of Helm release ``release`` (``kube.daemonsets.release_daemonset``) whose
    name has ``device-plugin`` in it (NVIDIA's ``<release>-nvidia-device-plugin``, or the
    release's name when it holds the chart's; the stand-in's ``<name>-device-plugin``), not
    the chart's MPS control daemon or GPU feature discovery."""
    return release_daemonset(daemonsets, release, name, is_it=_is_plugin)


def _is_plugin(ds_name: str) -> bool:
    return "device-plugin" in ds_name and not ds_name.endswith(_OTHER_DAEMONSETS)


def daemonset_verdict(
    ds: Mapping[str, Any] | None,
    plugin_nodes: Sequence[str],
    nodes: Sequence[Mapping[str, Any]],
    *,
    release: str = "",
    namespace: str = "",
) -> dict[str, Any]:
    """Whether the DaemonSet runs a ready pod on every device-plugin node, and only there:
    ``kube.daemonsets.rollout_verdict`` (``{"ok", "final", "message"}``; 0 of 0 does not
    pass), whose message names the device-plugin nodes the pod does not fit, the other nodes
    it fits, and the fix."""
    return rollout_verdict(
        ds,
        plugin_nodes,
        nodes,
        why_not_here=why_not_here,
        what="device-plugin",
        wanted_as="device-plugin",
        fix=f"label the nodes with the gpu_node_labels role ({gp.PATH_LABEL}="
        f"{gp.DEVICE_PLUGIN} on the device-plugin pools, {gp.PATH_LABEL}={gp.DRA} on the "
        "others) or set device_plugin_node_selector to match them",
        release=release,
        namespace=namespace,
    )


def _count(quantity: Any) -> int | None:
    """A count as the kubelet writes one (``"8"``), or None for anything else."""
    if isinstance(quantity, int) and not isinstance(quantity, bool):
        return quantity if quantity >= 0 else None
    if isinstance(quantity, str) and _COUNT.fullmatch(quantity):
        return int(quantity)
    return None


def _counted(name: str, mig_strategy: str) -> bool:
    if name == DEVICE_PLUGIN_RESOURCE:
        return True
    return mig_strategy == "mixed" and name.startswith(gp.DEVICE_PLUGIN_MIG_PREFIX)


def advertised_verdict(
    nodes: Sequence[Mapping[str, Any]],
    plugin_nodes: Sequence[str],
    dra_nodes: Sequence[str],
    mig_strategy: str = "none",
) -> dict[str, Any]:
    """What the nodes advertise, from one Node list.

    Returns ``{"ok": bool, "gpus": {node: n}, "problems": [str]}``: ``gpus`` is the count
    each device-plugin node advertises (``nvidia.com/gpu``, plus ``nvidia.com/mig-*`` with
    the ``mixed`` strategy, from ``status.allocatable`` where listed, else
    ``status.capacity``); a problem for each device-plugin node without a Node object or
    that advertises none, and for each DRA node that advertises any device-plugin resource
    (two advertisers of one GPU)."""
    by_name = {node_name_of(n): n for n in nodes}
    gpus: dict[str, int] = {}
    problems: list[str] = []
    for name in plugin_nodes:
        node = by_name.get(name)
        if node is None:
            problems.append(f"device-plugin node {name} has no Node object")
            continue
        found = gp.device_plugin_resources(node.get("status"))
        gpus[name] = sum(
            _count(qty) or 0 for res, (_unused, qty) in found.items() if _counted(res, mig_strategy)
        )
        if gpus[name] == 0:
            seen = ", ".join(f"{r}={q} in status.{m}" for r, (m, q) in sorted(found.items()))
            problems.append(
                f"device-plugin node {name} advertises no {DEVICE_PLUGIN_RESOURCE}"
                + (" or nvidia.com/mig-*" if mig_strategy == "mixed" else "")
                + f" ({seen or 'none listed'}); fix: read the log of the device plugin's pod "
                "there (kubectl logs): without the NVIDIA runtime "
                "(device_plugin_runtime_class_name) or the driver "
                "(device_plugin_nvidia_driver_root) it finds no GPU"
            )
    for name in dra_nodes:
        node = by_name.get(name)
        found = gp.device_plugin_resources((node or {}).get("status"))
        shown = [
            f"{res}={qty} in status.{member}"
            for res, (member, qty) in sorted(found.items())
            if _count(qty) != 0
        ]
        if shown:
            problems.append(
                f"DRA node {name} advertises {', '.join(shown)}: a device plugin runs there "
                "besides the DRA driver, and one GPU can go to two pods; fix: label it with "
                f"the gpu_node_labels role ({gp.PATH_LABEL}={gp.DRA}) and remove any other "
                "device plugin from it (GPU Operator devicePlugin.enabled=false)"
            )
    return {"ok": not problems, "gpus": gpus, "problems": problems}
