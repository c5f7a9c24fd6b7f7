# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Validation checks of the GPU path of each node (``dra_driver.gpu_paths``): NVIDIA's
device plugin or DRA, never both on one node.

* ``nodes.gpu-path-dual``: no node advertises its GPUs both as the extended resource
  ``nvidia.com/gpu`` (or ``nvidia.com/mig-*``) in ``status.allocatable``/``capacity`` and
  as devices of a GPU driver (``gpu.nvidia.com``, or the driver validated) in a
  ResourceSlice of the node (``spec.nodeName``): the scheduler would hand one GPU out
  twice. Fails closed: a quantity that is not a count (``abc``, ``-1``) counts as
  advertised. Its ``data`` holds each GPU node's path (``paths``: node -> ``device-plugin``,
  ``dra``, ``both`` or ``none``) and the nodes per path (``counts``).
* ``nodes.gpu-path-none``: every GPU node (labels ``gpu_labels``, or in the inventory's
  ``gpu_nodes``) advertises its GPUs one way or the other.
* ``nodes.device-plugin-gpus``: every GPU node whose pool declares the device-plugin path
  lists ``nvidia.com/gpu`` (or ``nvidia.com/mig-*``, the device plugin's mixed MIG
  strategy) above 0 in ``status.allocatable``, the quantity the scheduler hands out. The
  DRA checks (``nodes.plugin-running``, ``nodes.resourceslices``) leave these nodes out.
* ``nodes.gpu-paths``: per pool (node group of the inventory) the path it declares, its
  nodes and the path each advertises; passes when they agree. Its ``data.pools`` and the
  check's ``details`` (one line per pool) are the path report.
* ``api.deviceclass-extended-resource``: no DeviceClass sets ``spec.extendedResourceName``
  where the cluster's release does not serve the field: the gate ``DRAExtendedResource``
  is off there (the version model's stage per release; the gate audit's kube-apiserver
  flags, else the plan for the features and gates asked for). kube-apiserver drops the
  field of a disabled gate on write (``pkg/registry/resource/deviceclass/strategy.go``
  ``dropDisabledFields``), and kube-scheduler serves pods that ask for the resource
  through DRA only with the gate on.

The path a GPU node's pool declares has one owner here, ``declared_paths``: the groups of
``Settings.node_groups`` read by ``dra_driver.gpu_paths.inventory_paths`` (a node in no
``gpu_path_*`` group is on ``DEFAULT_PATH``). Its pool is its innermost node groups: the
groups of ``node_groups`` whose every host is a GPU node, other than the path groups, less
any that holds another of the node's node groups (``gpu_nodes`` > ``gpu_h200``: the pool
is ``gpu_h200``); a node in two groups that do not nest is in both (``gpu_h200+rack_7``).
A node in a group of ``Settings.gpu_path_moves`` (a pool ``gpufleet migrate`` moved whose
group is not yet in its new ``gpu_path_*`` group) declares the moved-to path instead; every
check that reads a declared path reads it from ``declared_paths``, and ``nodes.gpu-paths``
names each move in its evidence.

Pure functions over ``cluster.listing.Listing``: the objects were listed once, each list
call under the client's one deadline (``cluster.listing.list_cluster``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import (
    Listing,
    Settings,
    cluster_version,
    labels_of,
    name_of,
    node_names,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.quantity import (
    QuantityError,
    parse_quantity,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = [
    "NOT_IN_INVENTORY",
    "NO_NODE_GROUP",
    "Declared",
    "NodeGpus",
    "advertisers",
    "declared_paths",
    "gpu_paths_checks",
]

#: ResourceSlices a finding names one by one; the rest are counted.
MAX_SLICES_NAMED = 3
#: Nodes a line of the path report names one by one; the rest are counted.
MAX_NODES_NAMED = 5
#: Pool of a GPU node of the inventory in no node group but the GPU group.
NO_NODE_GROUP = "(no node group)"
#: Pool of a node that carries the GPU labels or advertises GPUs but is not a GPU node
#: of the inventory: no path is declared for it.
NOT_IN_INVENTORY = "(not in the inventory)"


def _path_of(paths: tuple[str, ...]) -> str:
    """The path of a node in the path groups of ``paths``: the one, ``both``, or none of
    them ``gp.DEFAULT_PATH``."""
    if len(paths) > 1:
        return gp.BOTH
    return paths[0] if paths else gp.DEFAULT_PATH


def _source(paths: tuple[str, ...]) -> str:
    """Where the inventory's path comes from: ``group gpu_path_device_plugin``, or the
    default."""
    if paths:
        return "group " + " and ".join(gp.path_group(p) for p in paths)
    return f"in no {gp.PATH_GROUP_PREFIX}* group, the default"


@dataclass(frozen=True)
class Declared:
    """What the inventory declares for one GPU node: ``pool`` (its innermost node
    groups, ``+``-joined, or ``NO_NODE_GROUP``), ``paths`` (the known paths of its
    ``gpu_path_*`` groups, ``gp.PATHS`` order; none: ``gp.DEFAULT_PATH``). A node of a
    pool ``gpufleet migrate`` moved (``Settings.gpu_path_moves``) declares the moved-to
    path instead: ``moved_pools`` are the moved groups it is in, ``inventory`` the paths
    its ``gpu_path_*`` groups still declare."""

    node: str
    pool: str
    paths: tuple[str, ...] = ()
    moved_pools: tuple[str, ...] = ()
    inventory: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        """``device-plugin`` or ``dra``; ``both`` for a node in both path groups (which
        preflight refuses: ``gpu-path-both``)."""
        return _path_of(self.paths)

    def source(self) -> str:
        """Where the path comes from: ``group gpu_path_device_plugin``, the default, or
        the move with what the inventory still declares."""
        if not self.moved_pools:
            return _source(self.paths)
        return (
            f"validate_gpu_path_moves; the inventory still declares "
            f"{_path_of(self.inventory)}, {_source(self.inventory)}"
        )

    def groups(self) -> str:
        """The path groups the node is in: ``gpu_path_device_plugin and gpu_path_dra``."""
        return " and ".join(gp.path_group(p) for p in self.paths)

    def on_path(self) -> str:
        """``the inventory puts pool gpu_h200 on dra (group gpu_path_dra)``, or for a
        moved pool ``gpufleet migrate moved pool gpu_h100 to dra (validate_gpu_path_moves;
        the inventory still declares device-plugin, group gpu_path_device_plugin)``."""
        if self.moved_pools:
            moved = " and ".join(self.moved_pools)
            return f"gpufleet migrate moved pool {moved} to {self.path} ({self.source()})"
        who = "the node" if self.pool == NO_NODE_GROUP else f"pool {self.pool}"
        return f"the inventory puts {who} on {self.path} ({self.source()})"


def declared_paths(settings: Settings) -> dict[str, Declared]:
    """Node name -> ``Declared`` for every GPU node of the inventory
    (``settings.gpu_nodes``), from ``settings.node_groups`` (group -> node names; a
    value that is not a list names no node). The one place ``settings.gpu_path_moves``
    applies: a node in a moved pool's group declares the moved-to path, in place of its
    ``gpu_path_*`` groups."""
    gpu = set(settings.gpu_nodes)
    path_groups: dict[str, list[str]] = {n: [] for n in settings.gpu_nodes}
    moved: dict[str, list[str]] = {n: [] for n in settings.gpu_nodes}
    node_groups: dict[str, list[frozenset[str]]] = {n: [] for n in settings.gpu_nodes}
    named: dict[frozenset[str], set[str]] = {}
    for group, members in sorted(settings.node_groups.items()):
        hosts = frozenset(str(m) for m in members) if isinstance(members, list) else frozenset()
        if str(group) in settings.gpu_path_moves:
            for m in hosts & gpu:
                moved[m].append(str(group))
        if str(group).startswith(gp.PATH_GROUP_PREFIX):
            for m in hosts & gpu:
                path_groups[m].append(str(group))
        elif hosts and hosts <= gpu:
            named.setdefault(hosts, set()).add(str(group))
            for m in hosts:
                if hosts not in node_groups[m]:
                    node_groups[m].append(hosts)
    out = {}
    for n in settings.gpu_nodes:
        mine = node_groups[n]
        innermost = [h for h in mine if not any(o < h for o in mine)]
        pool = "+".join(sorted(g for h in innermost for g in named[h])) or NO_NODE_GROUP
        paths, _unknown = gp.inventory_paths(path_groups[n])  # preflight names the unknown
        if moved[n]:
            to = {settings.gpu_path_moves[g] for g in moved[n]}
            now = tuple(p for p in gp.PATHS if p in to)
            out[n] = Declared(n, pool, now, tuple(moved[n]), tuple(paths))
        else:
            out[n] = Declared(n, pool, tuple(paths))
    return out


@dataclass
class NodeGpus:
    """What one node advertises. ``gpu_node``: it carries the GPU labels or is a GPU node
    of the inventory; ``plugin``: device plugin resource -> (``status`` member, quantity
    text) for each resource that advertises (a positive quantity, or one that is not a
    count); ``stopped``: those listed at 0 (a device plugin that stopped); ``slices``:
    names of the node's ResourceSlices of a GPU driver with devices (newest generation);
    ``drivers``: their drivers; ``devices``: their devices."""

    node: str
    gpu_node: bool = False
    plugin: dict[str, tuple[str, str]] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)
    slices: list[str] = field(default_factory=list)
    drivers: set[str] = field(default_factory=set)
    devices: int = 0

    @property
    def path(self) -> str:
        return gp.node_path(bool(self.plugin), self.devices > 0)

    def plugin_text(self) -> str:
        """``nvidia.com/gpu=8 in status.allocatable``, with ``(not a count)`` where the
        quantity is none."""
        parts = []
        for name, (member, qty) in sorted(self.plugin.items()):
            odd = "" if _count(qty) is not None else " (not a count)"
            parts.append(f"{name}={qty}{odd} in status.{member}")
        return ", ".join(parts)

    def slices_text(self) -> str:
        named = ", ".join(sorted(self.slices)[:MAX_SLICES_NAMED])
        more = len(self.slices) - MAX_SLICES_NAMED
        return named + (f" and {more} more" if more > 0 else "")


def _count(quantity: Any) -> Any:
    """The quantity as a number (a Fraction), or None when it is not a non-negative
    Kubernetes quantity."""
    try:
        value = parse_quantity(quantity)
    except QuantityError:
        return None
    return value if value >= 0 else None


def _whole(quantity: Any) -> int | None:
    """The quantity as a whole count above 0 (``8``, ``1k``), else None (``0``, ``500m``,
    ``abc``): an extended resource is handed out in whole units."""
    value = _count(quantity)
    return int(value) if value is not None and value > 0 and value.denominator == 1 else None


def _is_gpu_node(labels: Any, gpu_labels: Mapping[str, str]) -> bool:
    return (
        bool(gpu_labels)
        and isinstance(labels, Mapping)
        and all(labels.get(k) == v for k, v in gpu_labels.items())
    )


def advertisers(listing: Listing, settings: Settings) -> dict[str, NodeGpus]:
    """Node name -> NodeGpus, for every GPU node and every node that advertises GPUs
    (one walk over the nodes, one over the slices). Slices of nodes that are not listed
    are left to ``nodes.orphan-slices``."""
    wanted = set(settings.gpu_nodes)
    out: dict[str, NodeGpus] = {}
    for n in listing.nodes:
        name = name_of(n)
        info = NodeGpus(name, name in wanted or _is_gpu_node(labels_of(n), settings.gpu_labels))
        for resource, (member, qty) in gp.device_plugin_resources(n.get("status")).items():
            value = _count(qty)
            if value == 0:
                info.stopped.append(resource)
            else:
                info.plugin[resource] = (member, str(qty))
        if info.gpu_node or info.plugin or info.stopped:
            out[name] = info
    listed = node_names(listing)
    folds = cslices.latest_folds(listing.slices, dict([_advertising_fold(settings)]))
    by_node: dict[str, _Advertised] = vk.folded(listing.slices, folds)[0]
    for node, (slices, drivers, devices) in by_node.items():
        if node not in listed:
            continue
        info = out.setdefault(node, NodeGpus(node))
        info.slices.extend(slices)
        info.drivers.update(drivers)
        info.devices += devices[0]
    return out


#: What a node's slices of GPU drivers advertise: the slices' names, the drivers, the
#: number of devices (a list of one, counted up in place).
_Advertised = tuple[list[str], set[str], list[int]]


class _AdvertisingSlices:
    """The fold (``kube.client.PagedList.derive``) of ``advertisers``' walk of the newest
    generation: per node (of a slice of a GPU driver, ``drivers``, with devices) what its
    slices advertise."""

    def __init__(self, drivers: tuple[str, ...]) -> None:
        self.drivers = drivers
        self.out: dict[str, _Advertised] = {}

    def add(self, s: Mapping[str, Any]) -> None:
        spec = s.get("spec") or {}
        node, driver, devices = spec.get("nodeName"), spec.get("driver"), spec.get("devices")
        if driver not in self.drivers or not isinstance(node, str):
            return
        if not isinstance(devices, list) or not devices:
            return
        slices, drivers, count = self.out.setdefault(node, ([], set(), [0]))
        slices.append(name_of(s) or "(unnamed)")
        drivers.add(str(driver))
        count[0] += len(devices)

    def result(self) -> dict[str, _Advertised]:
        return self.out


def _advertising_fold(settings: Settings) -> tuple[str, Callable[[], _AdvertisingSlices]]:
    drivers = gp.gpu_drivers(settings.driver)
    return f"slices of the GPU drivers {drivers!r}", lambda: _AdvertisingSlices(drivers)


def slice_folds(listing: Listing, settings: Settings) -> dict[str, Callable[[], Any]]:
    """The folds of the slices ``gpu_paths_checks`` reads, for a caller that walks the
    slices once for several checks (``validate.cluster.all_checks``)."""
    return cslices.latest_folds(listing.slices, dict([_advertising_fold(settings)]))


def gpu_paths_checks(
    listing: Listing, settings: Settings, audit: Mapping[str, Any] | None = None
) -> list[Check]:
    """``nodes.gpu-path-dual``, ``nodes.gpu-path-none``, ``nodes.device-plugin-gpus``,
    ``nodes.gpu-paths``, ``api.deviceclass-extended-resource``. ``audit``: the gate audit
    (``gate_audit.report``'s dict), whose kube-apiserver flags say whether
    ``DRAExtendedResource`` was set there."""
    why = _unlisted(listing)
    if why:
        checks = [
            skipped("nodes.gpu-path-dual", _DUAL_TITLE, why),
            skipped("nodes.gpu-path-none", _NONE_TITLE, why),
            skipped(_DP_ID, _DP_TITLE, why),
            skipped(_POOLS_ID, _POOLS_TITLE, why),
        ]
    else:
        nodes = advertisers(listing, settings)
        declared = declared_paths(settings)
        checks = [
            _dual_check(listing, settings, nodes, declared),
            _none_check(listing, settings, nodes),
            _device_plugin_check(listing, settings, nodes, declared),
            _pools_check(listing, settings, nodes, declared),
        ]
    checks.append(_extended_resource_check(listing, settings, audit))
    return checks


def _unlisted(listing: Listing) -> str:
    """Why the paths cannot be judged (nodes or the served ResourceSlices not listed)."""
    if "nodes" in listing.errors:
        return f"Nodes could not be listed: {listing.errors['nodes']}"
    if "resource.k8s.io" in listing.errors:  # whether DRA is served is not known
        return f"/apis/resource.k8s.io could not be read: {listing.errors['resource.k8s.io']}"
    if "resourceslices" in listing.errors and listing.resource_version:
        return f"ResourceSlices could not be listed: {listing.errors['resourceslices']}"
    return ""


_DUAL_TITLE = "no node advertises its GPUs through both the device plugin and DRA"
_NONE_TITLE = "every GPU node advertises its GPUs through the device plugin or DRA"


def _evidence(listing: Listing, settings: Settings) -> list[Evidence]:
    slices = (
        f"{len(listing.slices)} slice(s); GPU drivers {', '.join(gp.gpu_drivers(settings.driver))}"
        if listing.resource_version
        else "resource.k8s.io is not served: no node advertises through DRA"
    )
    return [
        Evidence(
            f"{listing.src('nodes')} status.allocatable, status.capacity",
            f"{len(listing.nodes)} node(s); device plugin resources "
            f"{ddc.DEVICE_PLUGIN_RESOURCE}, "
            f"{gp.DEVICE_PLUGIN_MIG_PREFIX}*",
        ),
        Evidence(f"{listing.src('resourceslices')} spec.nodeName, spec.driver", slices),
    ]


def _keep_side(declared: Declared | None) -> str:
    """What a node on both paths should keep, from the path its pool declares."""
    if declared is None:
        return "; the node is not a GPU node of the inventory, so no path is declared for it"
    if declared.path == gp.BOTH:
        return f"; it is in both {declared.groups()}: keep its pool in one"
    other = gp.DRA if declared.path == gp.DEVICE_PLUGIN else gp.DEVICE_PLUGIN
    return f"; {declared.on_path()}: remove the {other} advertiser"


def _dual_check(
    listing: Listing,
    settings: Settings,
    nodes: Mapping[str, NodeGpus],
    declared: Mapping[str, Declared],
) -> Check:
    c = Check("nodes.gpu-path-dual", _DUAL_TITLE, evidence=_evidence(listing, settings))
    for name in sorted(nodes):
        info = nodes[name]
        if info.path != gp.BOTH:
            continue
        c.problem(
            name,
            FAIL,
            f"{info.plugin_text()} (NVIDIA device plugin) and {info.devices} device(s) in "
            f"ResourceSlice(s) {info.slices_text()} of driver "
            f"{', '.join(sorted(info.drivers))} (DRA): two advertisers of the same GPUs, "
            "the scheduler can hand one GPU out twice" + _keep_side(declared.get(name)),
        )
    paths = {
        n: nodes[n].path for n in sorted(nodes) if nodes[n].gpu_node or nodes[n].path != gp.NONE
    }
    c.data["paths"] = paths
    c.data["counts"] = {
        p: sum(1 for v in paths.values() if v == p) for p in (*gp.PATHS, gp.BOTH, gp.NONE)
    }
    drivers = sorted({d for i in nodes.values() if i.path == gp.BOTH for d in i.drivers})
    c.fix = (
        "keep one path per node pool: on a DRA pool remove NVIDIA's device plugin from the "
        "node (GPU Operator devicePlugin.enabled=false, or the device plugin DaemonSet's "
        "nodeSelector off the pool); on a device-plugin pool keep the DRA kubelet plugin off "
        "the node (dra_driver_node_selector) and delete its slices: "
        + "; ".join(
            "kubectl delete resourceslices --field-selector spec.nodeName=<node>,spec.driver=" + d
            for d in drivers or [settings.driver]
        )
        + f"; declare each pool's path with the inventory group {gp.path_group(gp.DEVICE_PLUGIN)}"
        f" or {gp.path_group(gp.DRA)}"
    )
    counts = ", ".join(f"{n} {p}" for p, n in c.data["counts"].items() if n)
    return finish(c, f"one path per node ({counts or 'no GPU node'})")


def _none_check(listing: Listing, settings: Settings, nodes: Mapping[str, NodeGpus]) -> Check:
    want = ", ".join(f"{k}={v}" for k, v in sorted(settings.gpu_labels.items()))
    c = Check("nodes.gpu-path-none", _NONE_TITLE, evidence=_evidence(listing, settings))
    gpu = [nodes[n] for n in sorted(nodes) if nodes[n].gpu_node]
    c.evidence.append(
        Evidence(
            "GPU nodes",
            f"{len(gpu)} node(s) labelled {want or '(no labels)'} or in the inventory's GPU group",
        )
    )
    if not gpu:
        return skipped(
            c.id,
            c.title,
            "no node carries the GPU labels or is a GPU node of the inventory",
            c.evidence,
        )
    for info in gpu:
        if info.path != gp.NONE:
            continue
        stopped = (
            f" ({', '.join(f'{r}=0' for r in sorted(info.stopped))}: the device plugin stopped)"
            if info.stopped
            else ""
        )
        c.problem(
            info.node,
            FAIL,
            f"advertises no GPU: no device plugin resource nvidia.com/gpu{stopped} and no "
            f"ResourceSlice with devices of driver {', '.join(gp.gpu_drivers(settings.driver))}; "
            "no pod can get its GPUs",
        )
    c.data["nodes"] = [p.subject for p in c.problems]
    c.fix = (
        "start the path the node's pool declares: DRA (group gpu_path_dra, the default): the "
        "DRA kubelet plugin (nodes.plugin-running says why it does not run there); device "
        "plugin (group gpu_path_device_plugin): NVIDIA's device plugin on the node"
    )
    return finish(c, f"{len(gpu)} GPU node(s) advertise their GPUs")


_DP_ID = "nodes.device-plugin-gpus"
_DP_TITLE = (
    f"every node of a device-plugin pool lists {ddc.DEVICE_PLUGIN_RESOURCE} in status.allocatable"
)


def _device_plugin_problem(info: NodeGpus) -> str | None:
    """Why a node of a device-plugin pool offers no GPU to the scheduler, or None when
    ``status.allocatable`` lists a device plugin resource at a whole count above 0."""
    if any(m == "allocatable" and _whole(q) for m, q in info.plugin.values()):
        return None
    odd = sorted(f"{r}={q}" for r, (m, q) in info.plugin.items() if m == "allocatable")
    if odd:
        return (
            f"{', '.join(odd)} in status.allocatable is not a whole count above 0: the "
            "scheduler cannot hand out a GPU of the node"
        )
    listed = sorted(f"{r}={q}" for r, (m, q) in info.plugin.items() if m == "capacity")
    if listed:
        return (
            f"{', '.join(listed)} in status.capacity but not in status.allocatable: the "
            "scheduler reads allocatable, so pods asking for "
            f"{ddc.DEVICE_PLUGIN_RESOURCE} do not land here"
        )
    stopped = (
        f"{', '.join(f'{r}=0' for r in sorted(info.stopped))}: NVIDIA's device plugin stopped"
        if info.stopped
        else f"no {ddc.DEVICE_PLUGIN_RESOURCE} (nor {gp.DEVICE_PLUGIN_MIG_PREFIX}*): NVIDIA's "
        "device plugin has not registered with the kubelet"
    )
    return (
        f"{stopped}, so status.allocatable offers no GPU and pods asking for "
        f"{ddc.DEVICE_PLUGIN_RESOURCE} stay Pending"
    )


def _device_plugin_check(
    listing: Listing,
    settings: Settings,
    nodes: Mapping[str, NodeGpus],
    declared: Mapping[str, Declared],
) -> Check:
    """``nodes.device-plugin-gpus`` over the GPU nodes of the inventory whose pool
    declares the device-plugin path and that have a Node object (one without is
    ``nodes.gpu-labels``' finding)."""
    group = gp.path_group(gp.DEVICE_PLUGIN)
    mine = [n for n in sorted(declared) if declared[n].path == gp.DEVICE_PLUGIN]
    listed = [n for n in mine if n in nodes]
    c = Check(
        _DP_ID,
        _DP_TITLE,
        evidence=[
            Evidence(
                f"{listing.src('nodes')} status.allocatable",
                f"{len(listed)} node(s) of a device-plugin pool ({group}) listed"
                + (f", {len(mine) - len(listed)} without a Node object" if mine != listed else ""),
            )
        ],
    )
    if not listed:
        return skipped(
            c.id, c.title, f"no GPU node of the inventory is on the device-plugin path ({group})"
        )
    c.data["nodes"] = {}
    for name in listed:
        info = nodes[name]
        listed_here = {r: "0" for r in info.stopped} | {r: q for r, (_m, q) in info.plugin.items()}
        c.data["nodes"][name] = dict(sorted(listed_here.items()))
        why = _device_plugin_problem(info)
        if why:
            c.problem(name, FAIL, f"{declared[name].on_path()}: {why}")
    c.fix = (
        "start NVIDIA's device plugin on the node: its pod there (kubectl get pods -A -o wide "
        "--field-selector spec.nodeName=<node>), its DaemonSet's nodeSelector and tolerations "
        "against the node, and its log (the NVIDIA driver and container runtime it needs); "
        f"it registers {ddc.DEVICE_PLUGIN_RESOURCE} with the kubelet once it runs. If the "
        f"pool moved to DRA, move its node group from {group} to {gp.path_group(gp.DRA)}"
    )
    return finish(
        c, f"{len(listed)} node(s) of device-plugin pools list {ddc.DEVICE_PLUGIN_RESOURCE}"
    )


_POOLS_ID = "nodes.gpu-paths"
_POOLS_TITLE = "each GPU pool advertises its GPUs through the path it declares"


def _advertised_text(info: NodeGpus | None, driver: str) -> str:
    """What a node advertises, in words, for a finding."""
    if info is None or info.path == gp.NONE:
        return "advertises no GPU (nodes.gpu-path-none)"
    if info.path == gp.BOTH:
        return "advertises its GPUs both ways (nodes.gpu-path-dual)"
    if info.path == gp.DEVICE_PLUGIN:
        return (
            f"advertises {info.plugin_text()} (NVIDIA device plugin) and no device in a "
            f"ResourceSlice of driver {driver}"
        )
    return (
        f"advertises {info.devices} device(s) in ResourceSlice(s) {info.slices_text()} (DRA) "
        f"and no {ddc.DEVICE_PLUGIN_RESOURCE}"
    )


def _mismatch(d: Declared, info: NodeGpus | None, driver: str) -> str:
    """The finding of a node that does not advertise the path its pool declares."""
    if d.path == gp.BOTH:
        return (
            f"pool {d.pool} is in both {d.groups()}: a pool declares one path "
            "(preflight's gpu-path-both)"
        )
    what = _advertised_text(info, driver)
    effect = {
        gp.DEVICE_PLUGIN: f"pods asking for {ddc.DEVICE_PLUGIN_RESOURCE} do not get its GPUs",
        gp.DRA: "ResourceClaims cannot be allocated its GPUs",
    }[d.path]
    return f"{d.on_path()} but the node {what}: {effect}"


def _pool_line(pool: str, rows: Mapping[str, Mapping[str, str]]) -> str:
    """``gpu_h100: declares device-plugin; 2 node(s) advertise device-plugin 1, dra 1
    (h100-02 dra)``: one line of the path report."""
    declared = sorted({r["declared"] for r in rows.values()})
    counts: dict[str, int] = {}
    for r in rows.values():
        counts[r["advertised"]] = counts.get(r["advertised"], 0) + 1
    off = [f"{n} {r['advertised']}" for n, r in sorted(rows.items()) if not _agrees(r)]
    shown = ", ".join(off[:MAX_NODES_NAMED]) + (
        f" and {len(off) - MAX_NODES_NAMED} more" if len(off) > MAX_NODES_NAMED else ""
    )
    return (
        f"{pool}: declares {' and '.join(declared)}; {len(rows)} node(s) advertise "
        + ", ".join(f"{p} {n}" for p, n in sorted(counts.items()))
        + (f" (off path: {shown})" if off else "")
    )


def _agrees(row: Mapping[str, str]) -> bool:
    """Whether a node advertises what its pool declares (a node in both path groups never
    does; one outside the inventory, or without a Node object, is not judged)."""
    if row["declared"] == gp.BOTH:
        return False
    return row["declared"] == "-" or row["advertised"] in (row["declared"], "absent")


def _pool_rows(
    nodes: Mapping[str, NodeGpus], declared: Mapping[str, Declared]
) -> dict[str, dict[str, dict[str, str]]]:
    """Pool -> node -> {declared, advertised}: every GPU node of the inventory
    (``absent`` without a Node object) and, in ``NOT_IN_INVENTORY`` with ``-`` declared,
    every other node that carries the GPU labels or advertises GPUs."""
    pools: dict[str, dict[str, dict[str, str]]] = {}
    for name, d in declared.items():
        info = nodes.get(name)
        pools.setdefault(d.pool, {})[name] = {
            "declared": d.path,
            "advertised": info.path if info is not None else "absent",
        }
    for name, info in nodes.items():
        if name not in declared and (info.gpu_node or info.path != gp.NONE):
            pools.setdefault(NOT_IN_INVENTORY, {})[name] = {
                "declared": "-",
                "advertised": info.path,
            }
    return pools


def _move_text(pool: str, path: str, declared: Mapping[str, Declared]) -> str:
    """The evidence of one move: ``gpufleet migrate moved pool gpu_h100 to dra; the
    inventory still declares device-plugin (group gpu_path_device_plugin) for its 2 node(s),
    which are judged on dra until group gpu_h100 is a child of gpu_path_dra``."""
    mine = [d for d in declared.values() if pool in d.moved_pools]
    said = f"gpufleet migrate moved pool {pool} to {path}"
    if not mine:
        return f"{said}; no GPU node of the inventory is in it"
    still = sorted(
        {
            f"{_path_of(d.inventory)} ({_source(d.inventory)})"
            for d in mine
            if _path_of(d.inventory) != path
        }
    )
    if not still:
        return f"{said}; the inventory declares {path} for its {len(mine)} node(s) already"
    return (
        f"{said}; the inventory still declares {' and '.join(still)} for its {len(mine)} "
        f"node(s), which are judged on {path} until group {pool} is a child of "
        f"{gp.path_group(path)}"
    )


def _pools_check(
    listing: Listing,
    settings: Settings,
    nodes: Mapping[str, NodeGpus],
    declared: Mapping[str, Declared],
) -> Check:
    """``nodes.gpu-paths``: the path report per pool; a node of the inventory that
    advertises another path than its pool declares fails (``absent`` nodes are
    ``nodes.gpu-labels``' finding, nodes outside the inventory are listed only)."""
    c = Check(_POOLS_ID, _POOLS_TITLE, evidence=_evidence(listing, settings))
    c.evidence.append(
        Evidence(
            "inventory: gpu_nodes and node groups",
            f"{len(declared)} GPU node(s) in "
            f"{len({d.pool for d in declared.values()})} pool(s); path groups "
            f"{gp.path_group(gp.DEVICE_PLUGIN)}, {gp.path_group(gp.DRA)} (neither: "
            f"{gp.DEFAULT_PATH})",
        )
    )
    c.evidence += [
        Evidence("validate_gpu_path_moves (gpufleet migrate)", _move_text(pool, path, declared))
        for pool, path in sorted(settings.gpu_path_moves.items())
    ]
    pools = _pool_rows(nodes, declared)
    if not pools:
        return skipped(
            c.id,
            c.title,
            "no GPU node: the inventory group gpu_nodes is empty and no node carries the "
            "GPU labels or advertises GPUs",
            c.evidence,
        )
    for name in sorted(declared):
        row = pools[declared[name].pool][name]
        if not _agrees(row):
            c.problem(name, FAIL, _mismatch(declared[name], nodes.get(name), settings.driver))
    order = sorted(pools, key=lambda p: (p == NOT_IN_INVENTORY, p))  # the judged ones first
    c.data["pools"] = [
        {
            "pool": pool,
            "declared": " and ".join(sorted({r["declared"] for r in pools[pool].values()})),
            "nodes": dict(sorted(pools[pool].items())),
            "agree": all(_agrees(r) for r in pools[pool].values()),
        }
        for pool in order
    ]
    c.details = [_pool_line(pool, pools[pool]) for pool in order]
    c.fix = (
        "bring each node to the path its pool declares, or declare the path the pool is on: "
        "to finish a move to DRA remove NVIDIA's device plugin from the node and let the DRA "
        f"kubelet plugin publish its devices (nodes.plugin-running); to keep a pool on the "
        f"device plugin put its node group in {gp.path_group(gp.DEVICE_PLUGIN)} and keep the "
        "DRA kubelet plugin off it (dra_driver_node_selector); a pool is in one path group"
    ) + "".join(
        f"; make group {pool} a child of {gp.path_group(path)} in the inventory (gpufleet "
        f"migrate moved it to {path})"
        for pool, path in sorted(settings.gpu_path_moves.items())
    )
    judged = [p for p in pools if p != NOT_IN_INVENTORY]
    return finish(c, f"{len(judged)} pool(s) advertise the path they declare")


def _extended_resource_check(
    listing: Listing, settings: Settings, audit: Mapping[str, Any] | None
) -> Check:
    cid = "api.deviceclass-extended-resource"
    title = "DeviceClass extendedResourceName only where the release serves it"
    if "deviceclasses" in listing.errors:
        return skipped(
            cid, title, f"DeviceClasses could not be listed: {listing.errors['deviceclasses']}"
        )
    named = []
    for dc in listing.classes:
        spec = dc.get("spec") if isinstance(dc.get("spec"), Mapping) else {}
        value = spec.get("extendedResourceName")
        if value not in (None, ""):
            named.append((name_of(dc), value))
    c = Check(
        cid,
        title,
        evidence=[
            Evidence(
                f"{listing.src('deviceclasses')} spec.extendedResourceName",
                "; ".join(f"{n}: {v}" for n, v in named) or "no DeviceClass sets it",
            )
        ],
    )
    if not named:
        return finish(c, "no DeviceClass sets extendedResourceName")
    version = cluster_version(listing, settings)
    if not version:
        return skipped(cid, title, "the Kubernetes version is unknown", c.evidence)
    try:
        served, why = dra_plan.extended_resource_served(
            version, settings.features, settings.gates, audit
        )
    except dra_core.VersionModelError as err:
        return skipped(cid, title, f"the version model refuses {version}: {err}", c.evidence)
    c.evidence.append(Evidence("DRA version model", why))
    if not served:
        for name, value in named:
            c.problem(
                name,
                FAIL,
                f"DeviceClass {name} sets extendedResourceName: {value}, but {why}: "
                "kube-apiserver does not serve the field and no pod asking for "
                f"{value} is served by DRA",
            )
    st = dra_gates.gate_state(dra_plan.EXTENDED_RESOURCE_GATE, version)
    turn_on = (
        "turn the gate on in every component: dra_feature_gates_features: [extended-resource], "
        "then gpufleet gates apply -i INVENTORY"
        if st.known and not st.locked
        else f"upgrade to a release that serves it ({dra_plan.EXTENDED_RESOURCE_GATE} since "
        f"1.{st.since}: gpufleet upgrade -i INVENTORY --to 1.X.Y, one minor at a time)"
    )
    c.fix = (
        f"{turn_on}; or remove extendedResourceName from the DeviceClass (NVIDIA's chart sets "
        f"it on {ddc.GPU_CLASS} with resource.k8s.io/v1) and let pods claim GPUs with "
        "ResourceClaims"
    )
    return finish(c, f"{len(named)} DeviceClass(es) set extendedResourceName; {why}")
