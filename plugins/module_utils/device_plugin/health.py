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
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.nodes import (
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
    else the one with Helm's ``meta.helm.sh/release-name`` annotation equal to ``release``
    whose name has ``device-plugin`` in it (NVIDIA's ``<release>-nvidia-device-plugin``, or
    the release's name when it holds the chart's; the stand-in's ``<name>-device-plugin``),
    not the chart's MPS control daemon or GPU feature discovery."""
    for ds in daemonsets:
        meta = ds.get("metadata") or {}
        ds_name = str(meta.get("name") or "")
        if name:
            if ds_name == name:
                return ds
            continue
        ann = meta.get("annotations") or {}
        if (
            ann.get("meta.helm.sh/release-name") == release
            and "device-plugin" in ds_name
            and not ds_name.endswith(_OTHER_DAEMONSETS)
        ):
            return ds
    return None


def _pod_spec(ds: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}


def _misplaced(
    ds: Mapping[str, Any], plugin_nodes: Sequence[str], nodes: Sequence[Mapping[str, Any]]
) -> str:
    """Why the DaemonSet's pods are not on exactly the device-plugin nodes: the ones its pod
    template does not fit, and the other nodes it fits."""
    spec = _pod_spec(ds)
    by_name = {node_name_of(n): n for n in nodes}
    wanted = set(plugin_nodes)
    misfits = []
    for name in plugin_nodes:
        node = by_name.get(name)
        why = "has no Node object" if node is None else why_not_here(node, spec)
        if why:
            misfits.append(f"{name} {why}")
    extra = sorted(
        node_name_of(n)
        for n in nodes
        if node_name_of(n) not in wanted and not why_not_here(n, spec)
    )
    text = "; ".join(misfits)
    if extra:
        text += ("; " if text else "") + "it also fits other node(s) " + ", ".join(extra)
    return text


def daemonset_verdict(
    ds: Mapping[str, Any] | None,
    plugin_nodes: Sequence[str],
    nodes: Sequence[Mapping[str, Any]],
    *,
    release: str = "",
    namespace: str = "",
) -> dict[str, Any]:
    """Whether the DaemonSet runs a ready pod on every device-plugin node, and only there.

    Returns ``{"ok": bool, "final": bool, "message": str}``. ``ok`` needs the controller to
    have seen the newest spec (``status.observedGeneration >= metadata.generation``),
    ``desiredNumberScheduled == len(plugin_nodes) > 0`` and ``numberReady`` and
    ``updatedNumberScheduled`` equal to it. ``final`` is True when waiting cannot help: the
    controller has seen the spec and schedules another number of pods; the message then
    names the device-plugin nodes the pod does not fit and the other nodes it fits.
    """
    if ds is None:
        return {
            "ok": False,
            "final": False,
            "message": f"no device-plugin DaemonSet of release {release!r} in namespace "
            f"{namespace!r} yet",
        }
    meta, status = ds.get("metadata") or {}, ds.get("status") or {}
    name = f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))
    desired = int(status.get("desiredNumberScheduled") or 0)
    ready = int(status.get("numberReady") or 0)
    updated = int(status.get("updatedNumberScheduled") or 0)
    seen = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    want = len(plugin_nodes)
    counts = f"desiredNumberScheduled {desired}, numberReady {ready}, updated {updated}"
    if not seen:
        return {
            "ok": False,
            "final": False,
            "message": f"DaemonSet {name}: rollout not observed yet ({counts})",
        }
    if desired != want or desired == 0:
        text = (
            f"DaemonSet {name} is scheduled on {desired} node(s) but there are {want} "
            f"device-plugin node(s) ({counts})"
        )
        why = _misplaced(ds, plugin_nodes, nodes)
        text += (f"; {why}" if why else "") + (
            f"; fix: label the nodes with the gpu_node_labels role ({gp.PATH_LABEL}="
            f"{gp.DEVICE_PLUGIN} on the device-plugin pools, {gp.PATH_LABEL}={gp.DRA} on the "
            "others) or set device_plugin_node_selector to match them"
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
