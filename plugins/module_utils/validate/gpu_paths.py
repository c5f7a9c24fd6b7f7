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
* ``api.deviceclass-extended-resource``: no DeviceClass sets ``spec.extendedResourceName``
  where the cluster's release does not serve the field: the gate ``DRAExtendedResource``
  is off there (the version model's stage per release; the gate audit's kube-apiserver
  flags, else the plan for the features and gates asked for). kube-apiserver drops the
  field of a disabled gate on write (``pkg/registry/resource/deviceclass/strategy.go``
  ``dropDisabledFields``), and kube-scheduler serves pods that ask for the resource
  through DRA only with the gate on.

Pure functions over ``cluster.listing.Listing``: the objects were listed once, each list
call under the client's one deadline (``cluster.listing.list_cluster``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import evaluate as vcel
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import (
    Listing,
    Settings,
    cluster_version,
    labels_of,
    name_of,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = [
    "EXTENDED_RESOURCE_GATE",
    "NodeGpus",
    "advertisers",
    "extended_resource_served",
    "gpu_paths_checks",
]

#: The gate behind DeviceClass ``spec.extendedResourceName`` (KEP-5004).
EXTENDED_RESOURCE_GATE = "DRAExtendedResource"
#: ResourceSlices a finding names one by one; the rest are counted.
MAX_SLICES_NAMED = 3


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
        value = vcel.parse_quantity(quantity)
    except vcel.CelError:
        return None
    return value if value >= 0 else None


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
    drivers = gp.gpu_drivers(settings.driver)
    listed = {name_of(n) for n in listing.nodes}
    for s in cslices.iter_latest_slices(listing.slices):
        spec = s.get("spec") or {}
        node, driver, devices = spec.get("nodeName"), spec.get("driver"), spec.get("devices")
        if driver not in drivers or not isinstance(node, str) or node not in listed:
            continue
        if not isinstance(devices, list) or not devices:
            continue
        info = out.setdefault(node, NodeGpus(node))
        info.slices.append(name_of(s) or "(unnamed)")
        info.drivers.add(str(driver))
        info.devices += len(devices)
    return out


def gpu_paths_checks(
    listing: Listing, settings: Settings, audit: Mapping[str, Any] | None = None
) -> list[Check]:
    """``nodes.gpu-path-dual``, ``nodes.gpu-path-none``, ``api.deviceclass-extended-resource``.
    ``audit``: the gate audit (``gate_audit.report``'s dict), whose kube-apiserver flags
    say whether ``DRAExtendedResource`` was set there."""
    why = _unlisted(listing)
    if why:
        checks = [
            skipped("nodes.gpu-path-dual", _DUAL_TITLE, why),
            skipped("nodes.gpu-path-none", _NONE_TITLE, why),
        ]
    else:
        nodes = advertisers(listing, settings)
        checks = [_dual_check(listing, settings, nodes), _none_check(listing, settings, nodes)]
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


def _dual_check(listing: Listing, settings: Settings, nodes: Mapping[str, NodeGpus]) -> Check:
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
            "the scheduler can hand one GPU out twice",
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


def extended_resource_served(
    version: str, settings: Settings, audit: Mapping[str, Any] | None = None
) -> tuple[bool, str]:
    """Whether kube-apiserver at ``version`` serves DeviceClass ``extendedResourceName``
    (``DRAExtendedResource`` on), and why: the gate's state in the version model; for a
    gate that can be set, the gate audit's kube-apiserver flags where it read any
    (every kube-apiserver must have it on), else the plan for ``settings.features`` and
    ``settings.gates``. Raises VersionModelError for a version outside the model."""
    st = dra_gates.gate_state(EXTENDED_RESOURCE_GATE, version)
    state = f"{EXTENDED_RESOURCE_GATE} is {st.describe()} in {version.lstrip('v')}"
    if st.status == dra_gates.REMOVED:
        last = dra_gates.gate_state(
            EXTENDED_RESOURCE_GATE, dra_core.KubeVersion(1, (st.removed_in or st.minor) - 1)
        )
        return last.locked and last.default, state
    if not st.known or st.locked:
        return st.known and st.default, state
    cells = (((audit or {}).get("summary") or {}).get("cells") or {}).get(dra_core.APISERVER) or {}
    read = {
        host: (cell.get("feature_gates") or {}).get(EXTENDED_RESOURCE_GATE, st.default)
        for host, cell in sorted(cells.items())
        if isinstance(cell, Mapping) and cell.get("state") != "absent"
    }
    if read:
        off = [h for h, v in read.items() if v is not True]
        if off:
            return False, f"{state}, and off on the kube-apiserver of {', '.join(off)} (gate audit)"
        return True, f"{state}, on every kube-apiserver (gate audit)"
    try:
        plan = dra_plan.plan_components(version, settings.features, settings.gates)
    except dra_core.VersionModelError:
        return st.default, state
    on = bool(plan.wishes.get(EXTENDED_RESOURCE_GATE, st.default))
    return on, f"{state}, {'on' if on else 'off'} as planned for the features and gates asked for"


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
        served, why = extended_resource_served(version, settings, audit)
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
    st = dra_gates.gate_state(EXTENDED_RESOURCE_GATE, version)
    turn_on = (
        "turn the gate on in every component: dra_feature_gates_features: [extended-resource], "
        "then gpufleet gates apply -i INVENTORY"
        if st.known and not st.locked
        else f"upgrade to a release that serves it ({EXTENDED_RESOURCE_GATE} since "
        f"1.{st.since}: gpufleet upgrade -i INVENTORY --to 1.X.Y, one minor at a time)"
    )
    c.fix = (
        f"{turn_on}; or remove extendedResourceName from the DeviceClass (NVIDIA's chart sets "
        f"it on {ddc.GPU_CLASS} with resource.k8s.io/v1) and let pods claim GPUs with "
        "ResourceClaims"
    )
    return finish(c, f"{len(named)} DeviceClass(es) set extendedResourceName; {why}")
