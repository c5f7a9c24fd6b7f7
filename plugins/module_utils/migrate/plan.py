# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The plan of moving one GPU pool from one GPU path to the other (``dra_driver.gpu_paths``):
from NVIDIA's device plugin to DRA, or back.

Pure: no I/O. The plan says, per node of the pool in its batch, what the node advertises
now, which GPU pods the move evicts (pods on the node that ask for the device plugin's
resources, ``nvidia.com/gpu`` or ``nvidia.com/mig-*``, or that hold ResourceClaims), and,
moving to DRA, which DeviceClass serves each extended resource those pods ask for
afterwards (``spec.extendedResourceName``: with the gate ``DRAExtendedResource`` on, the
scheduler serves a pod that asks for ``nvidia.com/gpu: 1`` from the devices of the class
that names it, on nodes where no device plugin advertises it). What would leave a pod
without GPUs after the move blocks the plan:

* ``node-missing``: a host of the pool has no Node in the cluster;
* ``node-dual``: a node advertises its GPUs both ways already (validate's
  ``nodes.gpu-path-dual``): fix that first;
* ``extended-resource-not-served``: moving to DRA where the release does not serve
  ``extendedResourceName`` while pods of the pool ask for an extended resource;
* ``extended-resource-unmapped``: a resource those pods ask for that no DeviceClass names
  (``nvidia.com/mig-1g.18gb`` with the device plugin's mixed MIG strategy, when no class
  maps it);
* ``claims-on-device-plugin``: moving to the device plugin while pods of the pool hold
  ResourceClaims (nothing would serve them there);
* ``no-dra-driver``: moving to DRA with no DeviceClass of the GPU driver in the cluster;
* ``no-new-advertiser``: no DaemonSet selects nodes by the path label at the target path
  (``gpu_paths.PATH_LABEL``): nothing would start advertising the pool's GPUs;
* ``old-advertiser-not-by-path``: no DaemonSet selects nodes by the path label at the
  pool's path now: the advertiser that runs there does not follow the label, so moving
  the label would not stop it (the ``dra_driver`` role selects by path once the
  inventory has a device-plugin pool).

Batches: ``batch_size`` nodes at a time (at least 1), nodes with the fewest GPU pods
first, then by name, so that a failure shows on the batch that disturbs least.

Objects and fields of another type than the API's (an item that is no object, a list where
a map belongs) read as absent, never raise: a Node that is none is missing, a DaemonSet
that is none selects nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_list, as_map
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.quantity import (
    QuantityError,
    parse_quantity,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import paths as rpaths

__all__ = [
    "NodeMove",
    "PoolHost",
    "PoolMove",
    "advertises",
    "build_plan",
]


@dataclass(frozen=True)
class PoolHost:
    """One host of the pool: inventory name, Kubernetes node name, the path its inventory
    groups declare."""

    host: str
    node: str
    declared: str


@dataclass(frozen=True)
class Blocker:
    rule: str
    node: str
    message: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "node": self.node, "message": self.message, "fix": self.fix}


@dataclass
class NodeMove:
    """One node: its host, what it advertises now (``device-plugin``, ``dra``, ``both``,
    ``none``), its batch and the GPU pods the move evicts (``namespace/name`` with what
    each asks for)."""

    host: str
    node: str
    advertises: str
    batch: int = 0
    pods: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "node": self.node,
            "advertises": self.advertises,
            "batch": self.batch,
            "pods": [dict(p) for p in self.pods],
        }


@dataclass
class PoolMove:
    """The plan: ``pool`` from ``from_path`` to ``to_path``; ``nodes`` in batch order;
    ``served_by`` maps each extended resource the pool's pods ask for to the DeviceClass
    that serves it after a move to DRA (``""`` for none); ``blockers`` stop the run;
    ``notes`` say what the run will not do."""

    pool: str
    from_path: str
    to_path: str
    nodes: list[NodeMove]
    served_by: dict[str, str]
    blockers: list[Blocker]
    notes: list[str]

    @property
    def batches(self) -> list[list[str]]:
        out: dict[int, list[str]] = {}
        for n in self.nodes:
            out.setdefault(n.batch, []).append(n.node)
        return [out[k] for k in sorted(out)]

    @property
    def blocked(self) -> bool:
        return bool(self.blockers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "from": self.from_path,
            "to": self.to_path,
            "batches": self.batches,
            "nodes": [n.to_dict() for n in self.nodes],
            "served_by": dict(self.served_by),
            "blocked": self.blocked,
            "blockers": [b.to_dict() for b in self.blockers],
            "notes": list(self.notes),
            "evicted_pods": sum(len(n.pods) for n in self.nodes),
        }


def _objects(items: Iterable[Any]) -> list[Mapping[str, Any]]:
    """The items that are objects."""
    return [i for i in items if isinstance(i, Mapping)]


def _name(obj: Mapping[str, Any]) -> str:
    name = as_map(obj.get("metadata")).get("name")
    return name if isinstance(name, str) else ""


def _pod_claims(pod: Mapping[str, Any]) -> list[str]:
    return [
        str(c.get("name"))
        for c in as_list(as_map(pod.get("spec")).get("resourceClaims"))
        if isinstance(c, Mapping) and c.get("name")
    ]


def _running(pod: Mapping[str, Any]) -> bool:
    status, meta = as_map(pod.get("status")), as_map(pod.get("metadata"))
    return status.get("phase") not in ("Succeeded", "Failed") and not meta.get("deletionTimestamp")


def _owner(pod: Mapping[str, Any]) -> str:
    for ref in as_list(as_map(pod.get("metadata")).get("ownerReferences")):
        if isinstance(ref, Mapping) and ref.get("controller"):
            return f"{ref.get('kind')}/{ref.get('name')}"
    return ""


def _gpu_pods(pods: Iterable[Mapping[str, Any]], node: str) -> list[dict[str, Any]]:
    out = []
    for pod in _objects(pods):
        if as_map(pod.get("spec")).get("nodeName") != node or not _running(pod):
            continue
        requests = rpaths.pod_requests(pod)
        claims = _pod_claims(pod)
        if not requests and not claims:
            continue
        meta = as_map(pod.get("metadata"))
        out.append(
            {
                "namespace": str(meta.get("namespace") or ""),
                "name": str(meta.get("name") or ""),
                "owner": _owner(pod),
                "requests": requests,
                "claims": claims,
            }
        )
    return sorted(out, key=lambda p: (p["namespace"], p["name"]))


def _listed_at_zero(quantity: Any) -> bool:
    """Whether a device plugin resource is listed at 0 (``0``, ``0k``, ``-0``: its plugin
    stopped); a quantity that is not one (``abc``, ``²``) is not: fail closed."""
    try:
        return parse_quantity(quantity) == 0
    except QuantityError:
        return False


def advertises(allocatable: Any, devices: int) -> str:
    """What a node advertises (``device-plugin``, ``dra``, ``both``, ``none``): the device
    plugin's resources in its ``status.allocatable`` listed at anything but 0 (a quantity
    that is not a count counts as advertised, as validate reads it: fail closed), and
    ``devices``, the DRA devices its ResourceSlices publish."""
    listed = gp.device_plugin_resources({"allocatable": allocatable or {}})
    plugin = any(not _listed_at_zero(value) for _member, value in listed.values())
    return gp.node_path(plugin, devices > 0)


def _advertises(node: Mapping[str, Any] | None, slice_nodes: set[str]) -> str:
    if node is None:
        return gp.NONE
    devices = 1 if _name(node) in slice_nodes else 0
    return advertises(as_map(node.get("status")).get("allocatable"), devices)


def _slice_nodes(slices: Iterable[Mapping[str, Any]], drivers: Sequence[str]) -> set[str]:
    out = set()
    for rslice in _objects(slices):
        spec = as_map(rslice.get("spec"))
        if spec.get("driver") in drivers and spec.get("nodeName") and spec.get("devices"):
            out.add(str(spec["nodeName"]))
    return out


def _class_map(device_classes: Iterable[Mapping[str, Any]]) -> tuple[dict[str, str], bool]:
    """(extended resource -> the DeviceClass that names it, whether the GPU driver's
    DeviceClasses exist: ``dra_driver.chart.GPU_DEVICE_CLASSES``, which the chart writes)."""
    served: dict[str, str] = {}
    names = set()
    for dc in sorted(_objects(device_classes), key=_name):
        name = _name(dc)
        names.add(name)
        resource = as_map(dc.get("spec")).get("extendedResourceName")
        if isinstance(resource, str) and resource and resource not in served:
            served[resource] = name
    return served, ddc.GPU_CLASS in names


def _node_moves(
    pool: str, hosts: Sequence[PoolHost], by_name: Mapping[str, Any], slice_nodes: set[str],
    pods: Sequence[Mapping[str, Any]], blockers: list[Blocker],
) -> list[NodeMove]:  # fmt: skip
    moves = []
    for host in hosts:
        node = by_name.get(host.node)
        move = NodeMove(host.host, host.node, _advertises(node, slice_nodes))
        if node is None:
            blockers.append(
                Blocker(
                    "node-missing",
                    host.node,
                    f"host {host.host} of pool {pool} has no Node {host.node} in the cluster",
                    "join the node first, or set kubernetes_node_name for the host",
                )
            )
        elif move.advertises == gp.BOTH:
            blockers.append(
                Blocker(
                    "node-dual",
                    host.node,
                    f"node {host.node} advertises its GPUs both through the device plugin "
                    "and through DRA already",
                    "stop one advertiser on the node first (gpufleet validate names both)",
                )
            )
        move.pods = _gpu_pods(pods, host.node)
        moves.append(move)
    return moves


def _to_dra_blockers(
    pool: str,
    moves: Sequence[NodeMove],
    served_by: Mapping[str, str],
    gpu_class: bool,
    extended_resource_served: tuple[bool, str],
) -> list[Blocker]:
    out = []
    if not gpu_class:
        out.append(
            Blocker(
                "no-dra-driver",
                "",
                f"no DeviceClass {ddc.GPU_CLASS} in the cluster: no DRA driver would "
                f"publish the GPUs of pool {pool} after the move",
                "install the DRA driver first (playbooks/site.yml, role dra_driver)",
            )
        )
    asked = list(served_by)
    ok, why = extended_resource_served
    if asked and not ok:
        out.append(
            Blocker(
                "extended-resource-not-served",
                "",
                f"pods of pool {pool} ask for {', '.join(asked)}, but {why}: after the "
                "move nothing would serve them",
                "upgrade to a release that serves DeviceClass extendedResourceName "
                "(DRAExtendedResource), or move those workloads to claims first",
            )
        )
    for resource in asked:
        if ok and not served_by[resource]:
            users = [
                f"{p['namespace']}/{p['name']}"
                for m in moves
                for p in m.pods
                if resource in p["requests"]
            ]
            out.append(
                Blocker(
                    "extended-resource-unmapped",
                    "",
                    f"no DeviceClass sets extendedResourceName: {resource}, which "
                    f"{len(users)} pod(s) of pool {pool} ask for ({', '.join(users[:5])})",
                    f"add a DeviceClass with extendedResourceName: {resource} (the DRA "
                    f"driver's chart sets {ddc.DEVICE_PLUGIN_RESOURCE} on {ddc.GPU_CLASS}), "
                    f"or change those workloads to ask for {ddc.DEVICE_PLUGIN_RESOURCE} or a "
                    "claim",
                )
            )
    return out


def _to_device_plugin_blockers(pool: str, moves: Sequence[NodeMove]) -> list[Blocker]:
    holders = [
        (m.node, f"{p['namespace']}/{p['name']}") for m in moves for p in m.pods if p["claims"]
    ]
    if not holders:
        return []
    return [
        Blocker(
            "claims-on-device-plugin",
            holders[0][0],
            f"{len(holders)} pod(s) of pool {pool} hold ResourceClaims "
            f"({', '.join(h for _n, h in holders[:5])}): nothing serves claims on a "
            "device-plugin pool",
            "move those workloads to a DRA pool first",
        )
    ]


def _selected_paths(daemonsets: Iterable[Mapping[str, Any]]) -> set[str]:
    """The path label values DaemonSets select nodes by: their pod template's
    ``nodeSelector``, or a required node-affinity term ``In`` one value."""
    out = set()
    for ds in _objects(daemonsets):
        spec = as_map(as_map(as_map(ds.get("spec")).get("template")).get("spec"))
        selected = as_map(spec.get("nodeSelector")).get(gp.PATH_LABEL)
        if isinstance(selected, str) and selected:
            out.add(selected)
        affinity = as_map(as_map(spec.get("affinity")).get("nodeAffinity"))
        required = as_map(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
        for term in _objects(as_list(required.get("nodeSelectorTerms"))):
            for expr in _objects(as_list(term.get("matchExpressions"))):
                values = as_list(expr.get("values"))
                ours = expr.get("key") == gp.PATH_LABEL and expr.get("operator") == "In"
                if ours and len(values) == 1 and isinstance(values[0], str):
                    out.add(values[0])
    return out


def _advertiser_blockers(
    pool: str, from_path: str, to_path: str, daemonsets: Iterable[Mapping[str, Any]] | None
) -> list[Blocker]:
    if daemonsets is None:  # not read: the caller could not list them
        return []
    selected = _selected_paths(daemonsets)
    out = []
    if to_path not in selected:
        fix = (
            "install NVIDIA's device plugin for path pools first: a pool in "
            "gpu_path_device_plugin and playbooks/site.yml (role device_plugin)"
            if to_path == gp.DEVICE_PLUGIN
            else "run playbooks/site.yml (role dra_driver) with the pool still in "
            "gpu_path_device_plugin: its kubelet plugin then selects by path"
        )
        out.append(
            Blocker(
                "no-new-advertiser",
                "",
                f"no DaemonSet selects nodes labelled {gp.PATH_LABEL}={to_path}: nothing "
                f"would start advertising the GPUs of pool {pool} after the move",
                fix,
            )
        )
    if from_path in gp.PATHS and from_path != to_path and from_path not in selected:
        out.append(
            Blocker(
                "old-advertiser-not-by-path",
                "",
                f"no DaemonSet selects nodes labelled {gp.PATH_LABEL}={from_path}: the "
                f"{from_path} advertiser of pool {pool} does not follow the label, so the "
                "move could not stop it",
                "run playbooks/site.yml with a device-plugin pool in the inventory (the "
                "roles then place each advertiser by path), then move",
            )
        )
    return out


def build_plan(
    pool: str,
    to_path: str,
    hosts: Sequence[PoolHost],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    device_classes: Iterable[Mapping[str, Any]],
    *,
    batch_size: int = 1,
    drivers: Sequence[str] = (ddc.NVIDIA_DRIVER,),
    extended_resource_served: tuple[bool, str] = (True, ""),
    daemonsets: Iterable[Mapping[str, Any]] | None = None,
) -> PoolMove:
    """The plan of moving ``hosts`` (the pool ``pool``) to ``to_path``.

    ``extended_resource_served``: whether the cluster's release serves DeviceClass
    ``extendedResourceName`` and, when not, why (the caller asks the version model).
    ``daemonsets``: the cluster's DaemonSets, to find the advertisers that select nodes
    by the path label (None: not judged).
    Raises ValueError for a ``to_path`` that is not a path, an empty pool or a batch size
    that is not a whole number of at least 1 (the caller judged them; this is the last
    guard)."""
    if to_path not in gp.PATHS:
        raise ValueError(f"to_path {to_path!r} is not one of {', '.join(gp.PATHS)}")
    if not hosts:
        raise ValueError(f"pool {pool!r} has no hosts")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size {batch_size!r} is not a whole number of at least 1")
    by_name = {_name(n): n for n in _objects(nodes)}
    served, gpu_class = _class_map(device_classes)
    declared = sorted({h.declared for h in hosts})
    from_path = declared[0] if len(declared) == 1 else "mixed"
    blockers: list[Blocker] = []
    slice_nodes = _slice_nodes(slices, tuple(drivers))
    moves = _node_moves(pool, hosts, by_name, slice_nodes, list(pods), blockers)
    asked = sorted({r for m in moves for p in m.pods for r in p["requests"]})
    served_by = {r: served.get(r, "") for r in asked}
    if to_path == gp.DRA:
        blockers += _to_dra_blockers(pool, moves, served_by, gpu_class, extended_resource_served)
    else:
        blockers += _to_device_plugin_blockers(pool, moves)
    blockers += _advertiser_blockers(pool, from_path, to_path, daemonsets)
    notes = []
    if from_path == to_path and all(m.advertises == to_path for m in moves):
        notes.append(f"pool {pool} is on {to_path} already and every node advertises it")
    moves.sort(key=lambda m: (len(m.pods), m.node))
    for i, move in enumerate(moves):
        move.batch = i // batch_size + 1
    return PoolMove(pool, from_path, to_path, moves, served_by, blockers, notes)
