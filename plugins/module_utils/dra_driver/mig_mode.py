"""Which MIG mode a GPU node's DRA kubelet plugin runs, read from the API objects: its pod,
its ResourceSlices and the ResourceClaims allocated on it (the ``mig_mode`` operation,
roles/mig/tasks/mode.yml).

Where the mode lives (kubernetes-sigs/dra-driver-nvidia-gpu, chart
``deployments/helm/dra-driver-nvidia-gpu``): the chart renders one kubelet-plugin DaemonSet
per release and passes ``featureGates`` to its containers as the environment variable
``FEATURE_GATES`` (``DynamicMIG=true,``); ``cmd/gpu-kubelet-plugin`` reads the gate once at
start. The mode is therefore the release's, and a node changes mode when its plugin pod
starts again from the updated template. The chart also renders the cluster-scoped
DeviceClasses ``gpu.nvidia.com`` and ``mig.nvidia.com`` whenever ``resources.gpus.enabled``,
so a second release for the same GPUs is refused by Helm: one mode per DRA pool of a release.
The lab's GPU simulator takes ``--dynamic-mig`` or ``GPUFLEET_GPUSIM_DYNAMIC_MIG=true``
(lab/gpu-simulator/kubelet-plugin/main.go) from the same chart value.

A node publishes dynamic MIG when a ResourceSlice of the driver on it has
``spec.sharedCounters`` or a device with ``consumesCounters`` (KEP-4815 partitionable
devices); static when its slices list devices and no counters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_list, as_map

__all__ = [
    "DYNAMIC",
    "MODES",
    "STATIC",
    "MigModeError",
    "check_batch",
    "check_target",
    "claims_on_node",
    "node_state",
    "nodes_behind",
    "pod_mode",
    "slices_mode",
]

DYNAMIC = "dynamic"
STATIC = "static"
MODES = (DYNAMIC, STATIC)
#: What ``slices_mode`` says of a node that publishes no device of the driver.
NONE = "none"
SIMULATOR_FLAG = "--dynamic-mig"
SIMULATOR_ENV = "GPUFLEET_GPUSIM_DYNAMIC_MIG"


class MigModeError(ValueError):
    """An input of the operation that cannot be used; ``str()`` names the variable, the
    value and the fix."""


def check_target(value: Any, variable: str = "mig_mode_to") -> str:
    """``value`` as a mode (``dynamic`` or ``static``); MigModeError otherwise (the value
    shown cut to 60 characters)."""
    if isinstance(value, str) and value in MODES:
        return value
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:60] + "..."
    raise MigModeError(
        f"{variable}={shown} is not a MIG mode; fix: set {variable} to dynamic (the DRA "
        "driver creates each GPU instance when a claim is prepared) or static (the mig role "
        "carves the node's mig_layout ahead)"
    )


#: A batch as Ansible's ``serial`` takes it: a count of nodes, or a percentage of them
#: (ASCII digits only; ``serial: 0`` or below would run every node at once).
_BATCH = re.compile(r"^([1-9][0-9]{0,5})(%?)$", re.ASCII)


def check_batch(value: Any, variable: str = "mig_mode_batch") -> int | str:
    """``value`` as a batch of the move (the play's ``serial``): a count of nodes from 1
    (an int, or its digits) or a percentage from 1% to 100% (``"25%"``). MigModeError
    otherwise, naming ``variable`` and the value (cut to 60 characters): 0 or a negative
    count, which Ansible reads as every node at once, a bool, a float, other digits than
    ASCII, more than 6 digits."""
    text = str(value).strip() if isinstance(value, (int, str)) else ""
    m = _BATCH.match(text) if not isinstance(value, bool) else None
    if m and not (m.group(2) and int(m.group(1)) > 100):
        return text if m.group(2) else int(m.group(1))
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:60] + "..."
    raise MigModeError(
        f"{variable}={shown} is not a batch size; fix: give a count of nodes (e.g. 2) or a "
        "percentage of them (e.g. 25%)"
    )


def _truthy(text: Any) -> bool:
    return str(text).strip().lower() in ("true", "1", "yes")


def _gates(text: str) -> dict[str, bool]:
    """``FEATURE_GATES`` (``A=true,B=false,``) as name -> bool; malformed items skipped."""
    out: dict[str, bool] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            out[name.strip()] = _truthy(value)
    return out


def _container_dynamic(container: Mapping[str, Any]) -> bool:
    env = {
        str(e.get("name")): e.get("value", "")
        for e in as_list(container.get("env"))
        if isinstance(e, Mapping)
    }
    if _gates(str(env.get("FEATURE_GATES") or "")).get("DynamicMIG"):
        return True
    if _truthy(env.get(SIMULATOR_ENV, "")):
        return True
    argv = [str(a) for a in as_list(container.get("command")) + as_list(container.get("args"))]
    return any(a == SIMULATOR_FLAG or a == f"{SIMULATOR_FLAG}=true" for a in argv)


def pod_mode(pod_spec: Mapping[str, Any] | None) -> str:
    """The MIG mode a kubelet-plugin pod (or a DaemonSet's pod template ``spec``) starts
    its plugin in: ``dynamic`` when a container has ``DynamicMIG=true`` in
    ``FEATURE_GATES`` (NVIDIA's chart), ``GPUFLEET_GPUSIM_DYNAMIC_MIG=true`` or
    ``--dynamic-mig`` (the lab's simulator); else ``static``."""
    containers = as_list(as_map(pod_spec).get("containers"))
    return DYNAMIC if any(_container_dynamic(as_map(c)) for c in containers) else STATIC


def _spec(obj: Any) -> Mapping[str, Any]:
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def slices_mode(slices: Iterable[Any], node: str, driver: str) -> str:
    """What ``node``'s ResourceSlices of ``driver`` publish: ``dynamic`` (counters),
    ``static`` (devices, no counters) or ``none`` (no device and no counter). A field of
    another type than the API's (a device without a name, a counter set that is not a
    mapping) is not read."""
    devices = counters = False
    for s in slices:
        spec = _spec(s)
        if spec.get("nodeName") != node or spec.get("driver") != driver:
            continue
        if any(isinstance(c, Mapping) for c in as_list(spec.get("sharedCounters"))):
            counters = True
        for d in as_list(spec.get("devices")):
            if not isinstance(d, Mapping) or not isinstance(d.get("name"), str):
                continue
            devices = True
            if any(isinstance(c, Mapping) for c in as_list(d.get("consumesCounters"))):
                counters = True
    if counters:
        return DYNAMIC
    return STATIC if devices else NONE


def _on_node(claim: Mapping[str, Any], node: str, driver: str) -> bool:
    allocation = as_map(as_map(claim.get("status")).get("allocation"))
    results = as_list(as_map(allocation.get("devices")).get("results"))
    return any(
        isinstance(r, Mapping) and r.get("driver") == driver and r.get("pool") == node
        for r in results
    )


def claims_on_node(claims: Iterable[Any], node: str, driver: str) -> list[str]:
    """``namespace/name`` of each ResourceClaim with a device of ``driver`` from ``node``'s
    pool (NVIDIA's driver names the pool after the node) that a pod still reserves
    (``status.reservedFor``): the kubelet has not unprepared it yet. Sorted."""
    out = []
    for c in claims:
        if not isinstance(c, Mapping) or not _on_node(c, node, driver):
            continue
        if as_map(c.get("status")).get("reservedFor"):
            meta = as_map(c.get("metadata"))
            out.append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
    return sorted(out)


def node_state(
    node: str, pods: Iterable[Any], slices: Iterable[Any], driver: str, target: str
) -> dict[str, Any]:
    """Where ``node`` stands against ``target``: ``plugin`` (the mode its running plugin
    pods start in, ``none`` without a pod), ``pods`` (their names), ``slices``
    (``slices_mode``) and ``done`` (the plugin runs ``target`` and the slices publish it).
    Pods being deleted are not counted."""
    check_target(target)
    live = [
        p
        for p in pods
        if isinstance(p, Mapping)
        and _spec(p).get("nodeName") == node
        and not as_map(p.get("metadata")).get("deletionTimestamp")
    ]
    modes = {pod_mode(_spec(p)) for p in live}
    plugin = modes.pop() if len(modes) == 1 else ("mixed" if modes else NONE)
    published = slices_mode(slices, node, driver)
    return {
        "node": node,
        "plugin": plugin,
        "pods": sorted(str(as_map(p.get("metadata")).get("name", "")) for p in live),
        "slices": published,
        "done": plugin == target and published == target,
    }


def nodes_behind(pods: Iterable[Any], target: str) -> list[str]:
    """Nodes whose kubelet-plugin pod (any of ``pods``, the DaemonSet's) does not run
    ``target`` yet, or is being deleted. Sorted, each once."""
    check_target(target)
    out = set()
    for p in pods:
        if not isinstance(p, Mapping):
            continue
        node = str(_spec(p).get("nodeName") or "")
        deleting = bool(as_map(p.get("metadata")).get("deletionTimestamp"))
        if node and (deleting or pod_mode(_spec(p)) != target):
            out.add(node)
    return sorted(out)
