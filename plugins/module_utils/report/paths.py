# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""GPU use per path and per pool: NVIDIA's device plugin beside DRA, so that a pool's use
before its move from one path to the other can be set against its use after.

Pure functions over listed Nodes and Pods and the devices ``report.fleet`` read from the
ResourceSlices and ResourceClaims; no I/O. Facts and their sources:

- A node's path is what it advertises (``dra_driver.gpu_paths.node_path``): the device
  plugin when its ``status.allocatable`` lists ``nvidia.com/gpu`` or ``nvidia.com/mig-*``
  (the mixed MIG strategy) at a whole count above 0 (``device_plugin_capacity``), DRA when
  a ResourceSlice of the reported driver publishes a device on it, ``both``, or ``none``.
- Device-plugin capacity: those ``status.allocatable`` quantities, what the scheduler
  hands out. Device-plugin allocations: per node, the requests of those resources by the
  pods bound to it (``spec.nodeName``) that have not finished (phase neither
  ``Succeeded`` nor ``Failed``), the pods the scheduler counts against allocatable. A pod
  requests what ``pod_requests`` says: the larger of the sum over its containers and
  restartable init containers (sidecars) and, for each other init container, its request
  plus the sidecars started before it (``PodRequests``,
  ``staging/src/k8s.io/component-helpers/resource/helpers.go``); a container requests its
  ``resources.requests`` quantity, else its ``resources.limits`` one (kube-apiserver
  defaults a missing request to the limit, and an extended resource's request must equal
  its limit). Only pods on nodes that advertise the resource count: on a DRA node a pod
  that asks for ``nvidia.com/gpu`` gets a ResourceClaim (a DeviceClass with
  ``extendedResourceName``), counted with DRA.
- DRA capacity and allocations: the devices of the reported driver published and
  allocated (``report.fleet.Device``), as the rest of the report counts them; a device
  that is blocked (``Device.blocked``: it consumes shared counters that allocated devices
  hold, one of the overlapping placements of a dynamic MIG GPU) is no capacity, so
  ``free`` is the report's free devices. The free placements of such a GPU are
  alternatives to each other: its free devices are not all to be had at once.
- Profiles: ``nvidia.com/gpu`` counts whole GPUs under the report's whole-GPU profile
  (``gpu``), ``nvidia.com/mig-1g.18gb`` MIG devices under ``1g.18gb``, as DRA devices
  count under their ``profile`` attribute; so a pool's figures are the same units on both
  paths.
- Utilization: allocated / capacity, None without capacity. On the device plugin path
  allocations can exceed the capacity (above 1): the kubelet lowers ``allocatable`` when
  the plugin reports a GPU unhealthy, and the pods that hold it keep running.

A node on both paths offers its GPUs twice; its figures count on both, and ``nodes_both``
names it (``gpufleet validate``'s ``nodes.gpu-path-dual`` fails on it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_list
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    DEVICE_PLUGIN_RESOURCE,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.quantity import parse_quantity

__all__ = [
    "DONE_PHASES",
    "DevicePluginUse",
    "PathTotals",
    "device_plugin_capacity",
    "device_plugin_capacity_of",
    "path_figures",
    "pod_requests",
    "profile_of",
    "whole",
]

#: Pod phases whose containers have all ended: their devices are free again.
DONE_PHASES = ("Succeeded", "Failed")
#: Init container ``restartPolicy`` of a sidecar, which runs beside the containers.
SIDECAR = "Always"


def whole(quantity: Any) -> int:
    """A quantity as a whole count (``8``, ``"8"``, ``"1k"``); 0 for one that is not a
    whole count (``500m``, ``abc``, ``-1``): an extended resource is handed out in whole
    units."""
    if isinstance(quantity, bool):
        return 0
    try:
        value = parse_quantity(quantity)
    except (ValueError, TypeError, OverflowError):
        return 0
    return int(value) if value > 0 and value.denominator == 1 else 0


def _gpu_resource(name: Any) -> bool:
    return name == DEVICE_PLUGIN_RESOURCE or str(name).startswith(gp.DEVICE_PLUGIN_MIG_PREFIX)


def profile_of(resource: str, gpu_profile: str) -> str:
    """The profile a device plugin resource counts under: ``gpu_profile`` for
    ``nvidia.com/gpu``, ``1g.18gb`` for ``nvidia.com/mig-1g.18gb``."""
    if resource.startswith(gp.DEVICE_PLUGIN_MIG_PREFIX):
        return resource[len(gp.DEVICE_PLUGIN_MIG_PREFIX) :]
    return gpu_profile


def device_plugin_capacity(node: Mapping[str, Any]) -> dict[str, int]:
    """Device plugin resource -> its whole count above 0 in the Node's
    ``status.allocatable`` (``{"nvidia.com/gpu": 8}``); empty when it lists none."""
    status = node.get("status")
    values = status.get("allocatable") if isinstance(status, Mapping) else None
    if not isinstance(values, Mapping):
        return {}
    out = {}
    for name, quantity in values.items():
        count = whole(quantity)
        if _gpu_resource(name) and count:
            out[str(name)] = count
    return out


def _container_requests(container: Any) -> dict[str, int]:
    """Device plugin resource -> whole count a container requests (its limit where it
    states no request)."""
    resources = container.get("resources") if isinstance(container, Mapping) else None
    if not isinstance(resources, Mapping):
        return {}
    out: dict[str, int] = {}
    for member in ("limits", "requests"):  # requests, read last, win
        values = resources.get(member)
        if isinstance(values, Mapping):
            for name, quantity in values.items():
                if _gpu_resource(name):
                    out[str(name)] = whole(quantity)
    return {k: v for k, v in out.items() if v}


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, count in more.items():
        total[name] = total.get(name, 0) + count


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """Device plugin resource -> whole count the pod requests, as the scheduler counts it
    (module docstring: ``PodRequests``)."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    total: dict[str, int] = {}
    for c in as_list(spec.get("containers")):
        _add(total, _container_requests(c))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in as_list(spec.get("initContainers")):
        wants = _container_requests(c)
        if isinstance(c, Mapping) and c.get("restartPolicy") == SIDECAR:
            _add(total, wants)
            _add(sidecars, wants)
            step = dict(sidecars)
        else:
            step = dict(sidecars)
            _add(step, wants)
        for name, count in step.items():
            init_max[name] = max(init_max.get(name, 0), count)
    for name, count in init_max.items():
        total[name] = max(total.get(name, 0), count)
    return {k: v for k, v in total.items() if v}


@dataclass
class PathTotals:
    """Devices of one path in one group (a pool, or the cluster): ``nodes`` that advertise
    the path, ``devices`` (capacity) and ``allocated`` per profile."""

    nodes: set[str] = field(default_factory=set)
    devices: dict[str, int] = field(default_factory=dict)
    allocated: dict[str, int] = field(default_factory=dict)

    def add(self, profile: str, devices: int, allocated: int) -> None:
        """Add capacity and allocations of a profile; nothing of either adds no profile."""
        if not devices and not allocated:
            return
        self.devices[profile] = self.devices.get(profile, 0) + devices
        self.allocated[profile] = self.allocated.get(profile, 0) + allocated

    def to_dict(self) -> dict[str, Any]:
        devices, allocated = sum(self.devices.values()), sum(self.allocated.values())
        return {
            "nodes": len(self.nodes),
            "devices": devices,
            "allocated": allocated,
            "free": max(devices - allocated, 0),
            "utilization": round(allocated / devices, 4) if devices else None,
            "profiles": {
                p: {"devices": self.devices[p], "allocated": self.allocated.get(p, 0)}
                for p in sorted(self.devices)
            },
        }


def device_plugin_capacity_of(nodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Node -> :func:`device_plugin_capacity` of each node of ``nodes`` that advertises a
    device plugin resource."""
    out = {}
    for n in nodes:
        offered = device_plugin_capacity(n)
        if offered:
            out[str((n.get("metadata") or {}).get("name", ""))] = offered
    return out


class DevicePluginUse:
    """The fold (``kube.client.folded``) of the pods: node -> device plugin resource ->
    count requested by the unfinished pods bound to it, for the nodes (``capacity``, of
    :func:`device_plugin_capacity_of`) and resources each advertises."""

    def __init__(self, capacity: Mapping[str, Mapping[str, int]]) -> None:
        self.capacity = capacity
        self.used: dict[str, dict[str, int]] = {}

    def add(self, pod: Mapping[str, Any]) -> None:
        spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
        node = spec.get("nodeName")
        if node not in self.capacity:
            return
        status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
        if status.get("phase") in DONE_PHASES:
            return
        offered, used = self.capacity[node], self.used
        for name, count in pod_requests(pod).items():
            if name in offered:
                used.setdefault(node, {})[name] = used.get(node, {}).get(name, 0) + count

    def result(self) -> dict[str, dict[str, int]]:
        return self.used


def path_figures(
    nodes: Sequence[Mapping[str, Any]],
    capacity: Mapping[str, Mapping[str, int]],
    used: Mapping[str, Mapping[str, int]],
    devices: Iterable[Any],
    pools: Mapping[str, str],
    gpu_profile: str,
    no_pool: str,
) -> dict[str, Any]:
    """The figures per path as a JSON-ready dict: ``cluster`` (one row per path of
    ``gp.PATHS``: ``path``, ``nodes``, ``devices``, ``allocated``, ``free``,
    ``utilization``, ``profiles``), ``pools`` (the same per pool and path with devices or
    nodes on it), ``nodes`` (nodes per advertised path: ``device-plugin``, ``dra``,
    ``both``, ``none``) and ``nodes_both`` (names). ``capacity``: the device plugin's
    resources per node (:func:`device_plugin_capacity_of` of ``nodes``); ``used``: what
    the pods request of them (``DevicePluginUse``); ``devices``: ``report.fleet.Device``
    (``node``, ``pool``, ``profile``, ``allocated``, ``blocked``); ``pools``: node -> pool
    (``report.fleet.node_pools``); ``gpu_profile``: the profile of a whole GPU among the
    devices; ``no_pool``: the pool of a device on no listed node."""
    cluster = {p: PathTotals() for p in gp.PATHS}
    by_pool: dict[tuple[str, str], PathTotals] = {}

    def count(path: str, node: str, pool: str, profile: str, n: int, taken: int) -> None:
        for totals in (cluster[path], by_pool.setdefault((pool, path), PathTotals())):
            totals.add(profile, n, taken)
            if node in pools:
                totals.nodes.add(node)

    for node, offered in capacity.items():
        pool = pools.get(node, no_pool)
        for name, n in offered.items():
            taken = used.get(node, {}).get(name, 0)
            count(gp.DEVICE_PLUGIN, node, pool, profile_of(name, gpu_profile), n, taken)
    dra_nodes = set()
    for d in devices:
        capacity_of = int(not getattr(d, "blocked", False))
        count(gp.DRA, d.node, d.pool, d.profile, capacity_of, int(d.allocated))
        dra_nodes.add(d.node)
    paths = {
        name: gp.node_path(name in capacity, name in dra_nodes)
        for name in (str((n.get("metadata") or {}).get("name", "")) for n in nodes)
    }
    return {
        "cluster": [{"path": p, **cluster[p].to_dict()} for p in gp.PATHS],
        "pools": [
            {"pool": pool, "path": path, **by_pool[(pool, path)].to_dict()}
            for pool, path in sorted(by_pool, key=lambda k: (k[0], gp.PATHS.index(k[1])))
        ],
        "nodes": {
            p: sum(1 for v in paths.values() if v == p) for p in (*gp.PATHS, gp.BOTH, gp.NONE)
        },
        "nodes_both": sorted(n for n, p in paths.items() if p == gp.BOTH),
    }
