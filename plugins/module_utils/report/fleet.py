# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Utilization of a DRA GPU fleet: devices published, allocated and free, GPU memory
stranded, claims pending and why, claims allocated for nobody, and fragmentation; beside
it the GPUs NVIDIA's device plugin hands out, per path and pool (``report.paths``).

Pure functions over listed objects (JSON dicts as the API returns them: ResourceSlices,
ResourceClaims, Pods, Nodes, listed once by ``kube.client.list_cluster``); no I/O.

Facts and their sources:

- A device is one entry of ``spec.devices`` of the newest generation of each pool
  (``claims.slices.iter_published_devices``); only devices of ``driver`` (default
  ``gpu.nvidia.com``) are counted. Its GPU model is the ``productName`` attribute, its
  MIG profile the ``profile`` attribute (``1g.18gb``; a device without one is a whole
  GPU, profile ``gpu``), its memory the capacity ``memory`` (a Kubernetes quantity,
  counted in bytes), as NVIDIA's DRA driver publishes them.
- A device is allocated when a claim's ``status.allocation.devices.results`` names its
  ``driver/pool/device`` (``claims.slices.allocated_devices``). It is free when it is not
  allocated and the scheduler could allocate it now: for a device that consumes shared
  counters (``consumesCounters``), every counter it consumes has at least what it needs
  left in its CounterSet after what the allocated devices consume
  (``claims.counters.shortfalls``); otherwise it is blocked. A device that consumes no
  counters is never blocked.
- A claim is pending when it has no ``status.allocation`` and is not being deleted.
- A claim is leaked when it holds an allocation that no live pod uses: reserved for
  nobody, or only for pods that are gone, replaced or done; generated for a pod that is
  gone or done (``claims.leaks.find_leaks``, modelled on kube-controller-manager's
  resource claim controller).

Definitions (docs/report.md repeats them):

- Shape of a request: the DeviceClass (``gpu.nvidia.com``: a whole GPU,
  ``mig.nvidia.com``: a MIG device) plus equality tests on ``profile`` and
  ``productName`` joined by ``&&`` in its CEL selectors. Any other class or selector
  term makes the shape ``unknown``.
- Published, allocated, free: each group counts its devices published (every entry of
  the slices), allocated, free and blocked (published = allocated + free + blocked), and
  the memory of its devices; a GPU with shared counters counts its memory once (below).
- Stranded memory of a (GPU model, MIG profile): the memory of its free devices when no
  pending claim of known shape asks for a device of that model and profile. With no
  pending claim it equals the free memory (capacity nobody waits for); pending claims of
  unknown shape do not count as asking, so with such claims it is an upper bound
  (``pending_unknown`` says how many).
- Fragmentation of a set of devices: per node, ``1 - largest free device memory /
  free memory``; over several nodes the mean weighted by free memory, which is
  ``1 - sum(largest free device memory) / sum(free memory)``. A device is the unit the
  scheduler hands out, so the largest free device bounds the largest single device a
  claim can still get on that node; weighting by free memory keeps a node with a crumb
  free from counting as much as a node with half its GPUs free. 0: every node's free
  memory is one device; near 1: free memory is scattered in small devices. None when
  nothing is free.

- Shared counters (partitionable devices; NVIDIA's dynamic MIG): a GPU published with a
  CounterSet (``claims.counters``) gets a row in ``gpus``: its memory slices free and
  stranded, its memory and multiprocessors free and stranded, the MIG profiles that
  still fit and the claims holding counters (``claims.counters.gpu_figures``). A free
  memory slice is stranded when no device that could be allocated now consumes it;
  free multiprocessors are stranded when no device of the GPU can be allocated at all.
- The devices of a GPU with shared counters overlap: the whole GPU and each placement of
  each MIG profile are alternatives for the same memory slices and engines. Its devices
  count as published, allocated, free (each placement that fits now counts once; free
  placements are alternatives, so not all of them can be allocated together) or
  blocked, but its memory counts once, from the counters, not as the sum of its devices:
  allocated is the memory of its allocated devices, free what is left of its ``memory``
  counter (``gpu_figures``' ``memory_free``), published the two together. The free part
  belongs to no MIG profile and counts in the GPU's whole-GPU rows (profile ``gpu``,
  ``CounterShare``); a MIG profile's rows hold the memory of its allocated devices only.
  Stranded: all of the free part when no free device of the GPU has the shape of a
  pending claim; else the memory of the free memory slices that no such device consumes
  (``claims.counters.unused_memory_slices``, a slice's share of ``memory`` each). In
  fragmentation the free part is free memory and the largest free device is the largest
  that fits now: seven 1g.18gb on an H200 leave 28 GiB free, none of it allocatable,
  fragmentation 1. A request whose devices are too few free because some are blocked
  waits for ``counters-exhausted``, never ``free-devices``.

Objects of another shape than the API's (a field of another type: ``spec.devices`` not a
list, a device not a mapping, a claim name not a string) are skipped, not read, and
counted per kind in ``cluster.objects_skipped`` (``readable_objects``).
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as ccounters
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import explain as cexplain
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import leaks as cleaks
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pending as cpending
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pods as cpods
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import is_map
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    device_fields,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    GPU_CLASS,
    MIG_CLASS,
    NVIDIA_DRIVER,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.quantity import parse_quantity
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import activity as fa
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import paths as rpaths
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import teams as rteams

__all__ = [
    "ALL_ALLOCATED",
    "COUNTERS_EXHAUSTED",
    "DEFAULT_POOL_LABEL",
    "FREE_DEVICES",
    "NO_DEVICE",
    "OBJECT_SHAPES",
    "UNKNOWN",
    "CounterShare",
    "Device",
    "Inventory",
    "Shape",
    "build_report",
    "counter_shares",
    "fragmentation",
    "readable",
    "readable_objects",
    "request_shapes",
]

#: Node label that names the node pool by default: the GPU product label of NVIDIA's
#: GPU feature discovery (``nvidia.com/gpu.product``).
DEFAULT_POOL_LABEL = "nvidia.com/gpu.product"
#: Pool of a node without the pool label, or of a device published for no single node.
NO_POOL = "(none)"
#: Profile of a whole GPU (a device without a ``profile`` attribute).
WHOLE_GPU = "gpu"
#: ``type`` of a MIG device (NVIDIA's driver: ``gpu``, ``mig``, ``vfio``).
MIG = "mig"
UNKNOWN_MODEL = "(unknown)"

#: Why a request waits, worst first: a claim takes the worst of its requests, a request
#: the best of its alternatives (``firstAvailable``).
NO_DEVICE = "no-device-published"
ALL_ALLOCATED = "all-allocated"
UNKNOWN = "unknown"
FREE_DEVICES = "free-devices"
COUNTERS_EXHAUSTED = "counters-exhausted"
_ORDER = (NO_DEVICE, ALL_ALLOCATED, COUNTERS_EXHAUSTED, UNKNOWN, FREE_DEVICES)
_REASON_TEXT = {
    NO_DEVICE: "no device of that shape is published",
    ALL_ALLOCATED: "every device of that shape is allocated",
    COUNTERS_EXHAUSTED: "devices of that shape are not allocated, but allocated devices hold "
    "the shared counters they need (memory slices, multiprocessors or engines of a dynamic "
    "MIG GPU): gpufleet claims explain names them, gpufleet mig advise proposes moves",
    UNKNOWN: "its shape cannot be read (another DeviceClass, or a selector beyond "
    "profile/productName equality)",
    FREE_DEVICES: "free devices of that shape exist: the claim waits for a pod to be "
    "scheduled, or for a constraint the report does not read",
}

#: One equality test on a device attribute in a CEL selector:
#: ``device.attributes['gpu.nvidia.com'].profile == '1g.18gb'`` (also ``["..."]``
#: indexing, double quotes and the operands swapped).
_ATTR = (
    r"device\.attributes\[\s*['\"](?P<domain>[^'\"]+)['\"]\s*\]"
    r"(?:\.(?P<dot>[A-Za-z][A-Za-z0-9_]*)|\[\s*['\"](?P<idx>[A-Za-z][A-Za-z0-9_]*)['\"]\s*\])"
)
_LIT = r"(?P<q>['\"])(?P<value>[^'\"\\]*)(?P=q)"
_EQ_LEFT = re.compile(rf"^\(?\s*{_ATTR}\s*==\s*{_LIT}\s*\)?$")
_EQ_RIGHT = re.compile(rf"^\(?\s*{_LIT}\s*==\s*{_ATTR}\s*\)?$")
_DRIVER_EQ = re.compile(r"^\(?\s*device\.driver\s*==\s*(['\"])([^'\"]+)\1\s*\)?$")
#: Attributes a shape reads.
_SHAPE_ATTRS = {"profile", "productName"}


_STR, _INT, _MAP, _LIST = (str,), (int,), (Mapping,), (list,)
_META = (
    ("metadata", _MAP),
    ("metadata.name", _STR),
    ("metadata.namespace", _STR),
    ("metadata.uid", _STR),
    ("metadata.labels", _MAP),
    ("metadata.annotations", _MAP),
    ("metadata.ownerReferences", _LIST),
    ("metadata.ownerReferences.*", _MAP),
    ("metadata.ownerReferences.*.name", _STR),
    ("metadata.ownerReferences.*.uid", _STR),
    ("spec", _MAP),
    ("status", _MAP),
)
_REQUEST = (
    ("name", _STR),
    ("deviceClassName", _STR),
    ("allocationMode", _STR),
    ("count", _INT),
    ("selectors", _LIST),
    ("selectors.*", _MAP),
    ("selectors.*.cel", _MAP),
    ("selectors.*.cel.expression", _STR),
)
#: Kind -> (dotted path, accepted types) of every field the report reads; ``*`` is each
#: item of a list. A field that is absent or null passes; one of another type makes the
#: object unreadable (field names and types: the resource.k8s.io and core/v1 API).
OBJECT_SHAPES: dict[str, tuple[tuple[str, tuple[type, ...]], ...]] = {
    "resourceslices": (
        *_META,
        ("spec.driver", _STR),
        ("spec.nodeName", _STR),
        ("spec.pool", _MAP),
        ("spec.pool.name", _STR),
        ("spec.pool.generation", _INT),
        ("spec.devices", _LIST),
        ("spec.devices.*", _MAP),
        ("spec.devices.*.name", _STR),
        ("spec.devices.*.attributes", _MAP),
        ("spec.devices.*.capacity", _MAP),
        ("spec.devices.*.basic", _MAP),
        ("spec.devices.*.basic.attributes", _MAP),
        ("spec.devices.*.basic.capacity", _MAP),
        ("spec.sharedCounters", _LIST),
        ("spec.sharedCounters.*", _MAP),
        ("spec.sharedCounters.*.name", _STR),
        ("spec.sharedCounters.*.counters", _MAP),
        *(
            shape
            for body in ("spec.devices.*", "spec.devices.*.basic")
            for shape in (
                (f"{body}.consumesCounters", _LIST),
                (f"{body}.consumesCounters.*", _MAP),
                (f"{body}.consumesCounters.*.counterSet", _STR),
                (f"{body}.consumesCounters.*.counters", _MAP),
            )
        ),
    ),
    "resourceclaims": (
        *_META,
        ("spec.devices", _MAP),
        ("spec.devices.requests", _LIST),
        ("spec.devices.requests.*", _MAP),
        *((f"spec.devices.requests.*.{p}", t) for p, t in _REQUEST),
        ("spec.devices.requests.*.exactly", _MAP),
        *((f"spec.devices.requests.*.exactly.{p}", t) for p, t in _REQUEST),
        ("spec.devices.requests.*.firstAvailable", _LIST),
        ("spec.devices.requests.*.firstAvailable.*", _MAP),
        *((f"spec.devices.requests.*.firstAvailable.*.{p}", t) for p, t in _REQUEST),
        ("status.allocation", _MAP),
        ("status.allocation.devices", _MAP),
        ("status.allocation.devices.results", _LIST),
        ("status.allocation.devices.results.*", _MAP),
        *((f"status.allocation.devices.results.*.{p}", _STR) for p in ("driver", "pool", "device")),
        ("status.reservedFor", _LIST),
        ("status.reservedFor.*", _MAP),
        *((f"status.reservedFor.*.{p}", _STR) for p in ("name", "uid", "resource", "apiGroup")),
    ),
    "pods": (
        *_META,
        ("spec.nodeName", _STR),
        *(
            shape
            for member in ("containers", "initContainers")
            for shape in (
                (f"spec.{member}", _LIST),
                (f"spec.{member}.*", _MAP),
                (f"spec.{member}.*.resources", _MAP),
                (f"spec.{member}.*.resources.requests", _MAP),
                (f"spec.{member}.*.resources.limits", _MAP),
            )
        ),
        ("spec.initContainers.*.restartPolicy", _STR),
        ("spec.resourceClaims", _LIST),
        ("spec.resourceClaims.*", _MAP),
        ("spec.resourceClaims.*.resourceClaimName", _STR),
        ("status.phase", _STR),
        ("status.resourceClaimStatuses", _LIST),
        ("status.resourceClaimStatuses.*", _MAP),
        ("status.resourceClaimStatuses.*.resourceClaimName", _STR),
    ),
    "nodes": (
        *_META,
        ("status.allocatable", _MAP),
    ),
    "namespaces": (
        ("metadata", _MAP),
        ("metadata.name", _STR),
        ("metadata.labels", _MAP),
    ),
}


#: Accepted types -> the concrete types JSON parsing gives, checked first.
_EXACT: dict[tuple[type, ...], tuple[type, ...]] = {_STR: (str,), _INT: (int,), _MAP: (dict,),
                                                    _LIST: (list,)}  # fmt: skip


def _shape_error(value: Any, path: Sequence[str], types: tuple[type, ...]) -> bool:
    """Whether a value at ``path`` below ``value`` is present and not of ``types``
    (``bool`` is not an ``int``)."""
    if not path:
        if value is None or type(value) in _EXACT.get(types, ()):
            return False  # the common case, without the slower ABC check
        ok = isinstance(value, types) and not (types == _INT and isinstance(value, bool))
        return not ok
    if isinstance(value, list) and path[0] == "*":
        last = len(path) == 1  # a list item itself: null is not an item
        return any((last and item is None) or _shape_error(item, path[1:], types) for item in value)
    if isinstance(value, (dict, Mapping)):
        return _shape_error(value.get(path[0]), path[1:], types)
    return False  # the parent's own check reports it


@dataclass
class _Field:
    """The paths of ``OBJECT_SHAPES`` of one kind as a tree: the types the value here must
    have (None: no path ends here) and the fields below, so that an object is walked once
    (``_shape_error`` walks it once per path; both give the same verdict)."""

    types: tuple[type, ...] | None = None
    below: dict[str, _Field] = field(default_factory=dict)
    #: the concrete types of ``types`` that pass without the slower ``isinstance``
    exact: tuple[type, ...] = ()
    #: ``below`` without ``*``, as pairs; the item of a list (``*``)
    fields: tuple[tuple[str, _Field], ...] = ()
    item: _Field | None = None

    @classmethod
    def tree(cls, kind: str) -> _Field:
        root = cls()
        for path, types in OBJECT_SHAPES[kind]:
            node = root
            for name in path.split("."):
                node = node.below.setdefault(name, cls())
            node.types = types
        root._freeze()
        return root

    def _freeze(self) -> None:
        self.exact = _EXACT.get(self.types, ()) if self.types is not None else ()
        self.fields = tuple((k, v) for k, v in self.below.items() if k != "*")
        self.item = self.below.get("*")
        for sub in self.below.values():
            sub._freeze()

    def error(self, value: Any) -> bool:
        """Whether a field at or below ``value`` is present and of another type."""
        if value is None:
            return False
        t = self.types
        if (
            t is not None
            and type(value) not in self.exact
            and (not isinstance(value, t) or (t == _INT and isinstance(value, bool)))
        ):
            return True
        if not self.below:  # most fields end here
            return False
        # the exact types first: the abstract check of Mapping is slow, and a list is none
        kind = type(value)
        if kind is dict or (kind is not list and isinstance(value, Mapping)):
            # loops, not any() over a generator: this runs for every field of every object,
            # and a generator per call doubled the time
            get = value.get
            for name, sub in self.fields:  # noqa: SIM110
                if sub.error(get(name)):
                    return True
            return False
        sub = self.item
        if sub is None or not isinstance(value, list):
            return False
        typed = sub.types is not None
        for item in value:  # noqa: SIM110
            if (item is None and typed) or sub.error(item):
                return True
        return False


@functools.cache
def readable(kind: str) -> Callable[[Any], bool]:
    """Whether an object of ``kind`` (a key of ``OBJECT_SHAPES``) is a mapping whose
    fields the report reads have the API's types; one function per kind, so that a
    listing judged by it (``cluster.listing.list_cluster``'s ``keep``) is known to be
    (``kube.client.PagedList.vetted``)."""
    tree = _Field.tree(kind)

    def check(obj: Any) -> bool:
        return isinstance(obj, Mapping) and not tree.error(obj)

    return check


def readable_objects(kind: str, objects: Iterable[Any]) -> tuple[list[Mapping[str, Any]], int]:
    """The objects of ``kind`` (a key of ``OBJECT_SHAPES``) that are ``readable``, and how
    many were skipped (not a mapping, or a field of another type). A
    ``kube.client.PagedList`` is read and kept page by page (a ``PagedList`` of the
    readable ones); one listed with ``keep=readable(kind)`` is taken as it is, with the
    count refused then; anything else is read as a list."""
    check = readable(kind)
    if isinstance(objects, vk.PagedList):  # kept page by page, as listed
        refused = objects.vetted(check)
        if refused is not None:
            return objects, refused  # type: ignore[return-value]
        kept = objects.filtered(check)
        return kept, len(objects) - len(kept)  # type: ignore[return-value]
    objects = list(objects)
    keep = [obj for obj in objects if check(obj)]
    return keep, len(objects) - len(keep)


@dataclass(frozen=True, slots=True)
class Device:
    """One published device of the reported driver: ``id`` (``driver/pool/device``),
    ``node`` (``spec.nodeName``, or ``(all nodes)``/``(node selector)``), node ``pool``,
    ``model`` (productName), ``profile`` (MIG profile, ``gpu`` for a whole GPU, else the
    ``type`` attribute, e.g. ``vfio``), ``memory`` (bytes, 0 when not published),
    ``claim`` (``namespace/name`` of the claim it is allocated to, or None when free),
    ``kind`` (``gpu``, ``mig`` or the ``type`` attribute), ``counter_set`` (the
    ``claims.counters.CounterSet.id`` of the shared counters it consumes, the first of
    several; None for a device that consumes none), ``blocked`` (not allocated, but a
    counter it consumes has less left than it needs: the scheduler cannot allocate it
    now)."""

    id: str
    node: str
    pool: str
    model: str
    profile: str
    memory: int
    claim: str | None = None
    kind: str = WHOLE_GPU
    counter_set: str | None = None
    blocked: bool = False

    @property
    def allocated(self) -> bool:
        return self.claim is not None

    @property
    def free(self) -> bool:
        """Whether the scheduler could allocate it now: not allocated and not blocked."""
        return self.claim is None and not self.blocked


@dataclass(frozen=True, slots=True)
class CounterShare:
    """The memory left in the CounterSet of one GPU published with shared counters,
    counted once for the GPU because its devices overlap: ``id`` (the
    ``claims.counters.CounterSet.id``), ``node``, ``pool`` (node pool), ``model``,
    ``memory_free`` (bytes: the ``memory`` counter less what allocated devices consume,
    ``claims.counters.gpu_figures``), ``memory_stranded`` (bytes of it that no pending
    claim can get, see the module docstring). It counts in the rows of the whole GPU
    (``profile`` and ``kind`` ``gpu``), as published and free memory, never as a device."""

    id: str
    node: str
    pool: str
    model: str
    memory_free: int
    memory_stranded: int = 0
    profile: str = WHOLE_GPU
    kind: str = WHOLE_GPU


@dataclass(frozen=True)
class Shape:
    """The devices a request asks for: ``kind`` (``gpu`` or ``mig``, as ``Device.kind``),
    ``profile`` and ``model`` (None: any), ``count`` (devices wanted, ``All`` counts as
    1), or ``kind`` None when the shape cannot be read (``why`` says what was not read)."""

    kind: str | None
    profile: str | None = None
    model: str | None = None
    count: int = 1
    why: str = ""

    def fits(self, model: str, profile: str, kind: str) -> bool:
        """Whether a device of GPU ``model``, MIG ``profile`` and ``kind`` (``Device``)
        has this shape; never for an unknown shape."""
        if self.kind is None or kind != self.kind:
            return False
        if self.profile is not None and profile != self.profile:
            return False
        return self.model is None or model == self.model

    def matches(self, device: Device) -> bool:
        return self.fits(device.model, device.profile, device.kind)

    def label(self) -> str:
        if self.kind is None:
            return f"unknown ({self.why})"
        what = self.profile or ("any MIG profile" if self.kind == MIG else WHOLE_GPU)
        return f"{self.count} x {what}" + (f" of {self.model}" if self.model else "")


# ------------------------------------------------------------------ devices


def _value(device: Mapping[str, Any], field_name: str, name: str) -> Any:
    """Attribute or capacity ``name`` of a device (bare or under NVIDIA's driver name);
    None when absent or when ``field_name`` is not a mapping."""
    # this runs for every attribute the report reads of every device: dicts are taken
    # without the abstract check, here and in device_fields
    values = device_fields(device).get(field_name)
    if values is None or not is_map(values):
        return None
    v = values.get(name)
    if v is None:
        v = values.get(f"{NVIDIA_DRIVER}/{name}")
    if v is not None and is_map(v):
        return v.get("value") if field_name == "capacity" else next(iter(v.values()), None)
    return v


def memory_bytes(value: Any) -> int:
    """Bytes of a capacity quantity (``143771Mi``); 0 when absent or not a quantity."""
    if value is None:
        return 0
    if type(value) is str:  # pylint: disable=unidiomatic-typecheck
        return _text_bytes(value)
    return _bytes(value)


def _bytes(value: Any) -> int:
    try:
        return int(parse_quantity(value))
    except (ValueError, TypeError, OverflowError):
        return 0


@functools.lru_cache(maxsize=1024)
def _text_bytes(text: str) -> int:
    """``_bytes`` of a quantity's text, remembered: a fleet's devices publish a few
    memory sizes, each read once per device."""
    return _bytes(text)


def node_pools(nodes: Iterable[Mapping[str, Any]], pool_label: str) -> dict[str, str]:
    """Node name -> the value of its ``pool_label`` label (``NO_POOL`` without it, or
    for every node when ``pool_label`` is empty)."""
    out = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        out[str(meta.get("name", ""))] = (
            str(labels.get(pool_label, NO_POOL)) if pool_label else NO_POOL
        )
    return out


def devices_of(
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    pools: Mapping[str, str],
    driver: str = NVIDIA_DRIVER,
    sets: Mapping[str, ccounters.CounterSet] | None = None,
    owner: Mapping[str, str] | None = None,
) -> list[Device]:
    """Every published device of ``driver`` with its node pool (``pools``: node ->
    pool, :func:`node_pools`), the claim it is allocated to, and for a device consuming
    shared counters its CounterSet and whether it is blocked (``claims.counters.shortfalls``
    over ``sets``, the ``claims.counters.counter_sets`` of ``slices`` and ``claims``,
    computed here when not given). ``owner``: ``driver/pool/device`` -> the claim that
    holds it (``claims.explain.allocations`` of ``claims``), read from ``claims`` when not
    given. ``slices`` and ``claims`` are each walked at most twice."""
    if isinstance(slices, Iterator):
        slices = list(slices)
    if isinstance(claims, Iterator):
        claims = list(claims)
    if sets is None:
        sets = ccounters.counter_sets(slices, claims)
    if owner is None:
        owner = cexplain.allocations(claims, keep=False)[0]
    out = []
    for pub in cslices.iter_published_devices(slices):
        if pub.driver != driver:
            continue
        profile = _value(pub.device, "attributes", "profile")
        kind = str(_value(pub.device, "attributes", "type") or (MIG if profile else WHOLE_GPU))
        used = ccounters.consumption(pub.device)
        claim = owner.get(pub.id)
        out.append(
            Device(
                id=pub.id,
                node=pub.node,
                pool=pools.get(pub.node, NO_POOL),
                model=str(_value(pub.device, "attributes", "productName") or UNKNOWN_MODEL),
                profile=str(profile) if profile else kind,
                memory=memory_bytes(_value(pub.device, "capacity", "memory")),
                claim=claim,
                kind=kind,
                counter_set=f"{pub.driver}/{pub.pool}/{next(iter(used))}" if used else None,
                blocked=bool(used)
                and claim is None
                and bool(ccounters.shortfalls(sets, pub.driver, pub.pool, pub.device)),
            )
        )
    return out


# ------------------------------------------------------------------ request shapes


def _split_and(expression: str) -> list[str] | None:
    """The terms of ``a && b && c`` at the top level, or None when the expression has
    ``||``, ``!`` (other than ``!=``) or a ternary, which a shape does not read."""
    if "||" in expression or "?" in expression or re.search(r"!(?!=)", expression):
        return None
    return [t.strip() for t in expression.split("&&")]


def _selector_shape(expressions: Sequence[str], driver: str) -> tuple[dict[str, str], str]:
    """The ``profile``/``productName`` equalities of CEL selectors, and what could not be
    read ('' when everything was)."""
    wanted: dict[str, str] = {}
    for expression in expressions:
        terms = _split_and(expression)
        if terms is None:
            return wanted, f"selector {expression!r}"
        for term in terms:
            d = _DRIVER_EQ.match(term)
            if d and d.group(2) == driver:
                continue
            m = _EQ_LEFT.match(term) or _EQ_RIGHT.match(term)
            name = (m.group("dot") or m.group("idx")) if m else None
            if not m or m.group("domain") != driver or name not in _SHAPE_ATTRS:
                return wanted, f"selector term {term!r}"
            if wanted.get(name, m.group("value")) != m.group("value"):
                return wanted, f"selector {expression!r} wants two values of {name}"
            wanted[name] = m.group("value")
    return wanted, ""


def request_shapes(claim: Mapping[str, Any], driver: str = NVIDIA_DRIVER) -> list[list[Shape]]:
    """Per request of ``spec.devices.requests`` the shapes that may satisfy it (one, or
    one per ``firstAvailable`` subrequest), in v1/v1beta2 (``exactly``) or v1beta1 form."""
    out = []
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        shapes = []
        for alt in cexplain.request_alternatives(request):
            cls = alt.get("deviceClassName")
            mode = alt.get("allocationMode") or "ExactCount"
            count = (alt.get("count") or 1) if mode == "ExactCount" else 1
            if cls not in (GPU_CLASS, MIG_CLASS):
                shapes.append(Shape(None, count=count, why=f"DeviceClass {cls}"))
                continue
            wanted, unread = _selector_shape(cexplain.cel_selectors(alt), driver)
            if unread:
                shapes.append(Shape(None, count=count, why=unread))
                continue
            kind = WHOLE_GPU if cls == GPU_CLASS else MIG
            profile = wanted.get("profile")
            if kind == WHOLE_GPU and profile not in (None, WHOLE_GPU):
                shapes.append(Shape(kind, profile=profile, count=count))  # matches nothing
                continue
            shapes.append(
                Shape(
                    kind,
                    profile=profile if kind == MIG else None,
                    model=wanted.get("productName"),
                    count=count,
                )
            )
        out.append(shapes)
    return out


class Inventory:
    """Devices published, free and not allocated per (GPU model, MIG profile), and per
    shape (counted once per distinct shape: a fleet has thousands of claims of a few
    shapes). Free is ``Device.free``: a blocked device is not allocated, yet not free."""

    def __init__(self, devices: Iterable[Device]) -> None:
        self.by_key: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
        for d in devices:
            counts = self.by_key[(d.model, d.profile, d.kind)]
            counts[0] += 1
            counts[1] += d.free
            counts[2] += not d.allocated
        self._cache: dict[Shape, tuple[int, int, int]] = {}

    def count(self, shape: Shape) -> tuple[int, int, int]:
        """Devices of ``shape`` published, free, and not allocated (free or blocked)."""
        if shape not in self._cache:
            fit = [c for k, c in self.by_key.items() if shape.fits(*k)]
            self._cache[shape] = (
                sum(c[0] for c in fit),
                sum(c[1] for c in fit),
                sum(c[2] for c in fit),
            )
        return self._cache[shape]

    def judge(self, shapes: Sequence[Shape]) -> str:
        """Why one request is not satisfied: the best verdict over its alternatives."""
        verdicts = []
        for shape in shapes:
            if shape.kind is None:
                verdicts.append(UNKNOWN)
                continue
            published, free, unallocated = self.count(shape)
            verdicts.append(
                NO_DEVICE
                if published < shape.count
                else FREE_DEVICES
                if free >= shape.count
                else COUNTERS_EXHAUSTED
                if unallocated > free  # some are blocked: shared counters hold them
                else ALL_ALLOCATED
            )
        return max(verdicts, key=_ORDER.index) if verdicts else UNKNOWN

    def stranded(self, wanted: Iterable[Shape]) -> set[tuple[str, str]]:
        """The (model, profile) pairs with free devices that no shape of ``wanted`` (the
        shapes of pending claims; unknown ones fit nothing) fits."""
        wanted = set(wanted)
        return {
            (m, p)
            for (m, p, k), (_unused, free, _unallocated) in self.by_key.items()
            if free and not any(s.fits(m, p, k) for s in wanted)
        }


# ------------------------------------------------------------------ figures


@dataclass
class Totals:
    """Devices and GPU memory (bytes) of a group: published, allocated, free, blocked
    (devices) and stranded (memory), as the module docstring defines them."""

    devices_published: int = 0
    devices_allocated: int = 0
    devices_free: int = 0
    devices_blocked: int = 0
    memory_published: int = 0
    memory_allocated: int = 0
    memory_free: int = 0
    memory_stranded: int = 0

    def add(self, item: Device | CounterShare, stranded: bool = False) -> None:
        """Count a device (``stranded``: its free memory is stranded) or the memory left
        on a GPU with shared counters. A device consuming shared counters adds memory
        only when allocated: the rest of its GPU's memory is the GPU's ``CounterShare``."""
        if isinstance(item, CounterShare):
            self.memory_published += item.memory_free
            self.memory_free += item.memory_free
            self.memory_stranded += item.memory_stranded
            return
        self.devices_published += 1
        if item.allocated:
            self.devices_allocated += 1
            self.memory_published += item.memory
            self.memory_allocated += item.memory
            return
        self.devices_free += item.free
        self.devices_blocked += item.blocked
        if item.counter_set is None:
            self.memory_published += item.memory
            self.memory_free += item.memory
            if stranded:
                self.memory_stranded += item.memory

    def to_dict(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.__dict__.items()}


def fragmentation(devices: Iterable[Device | CounterShare]) -> float | None:
    """``1 - sum over nodes of the largest free device memory / sum of free memory``
    (the per-node ``1 - largest/free`` weighted by free memory), in [0, 1]; None when no
    memory is free. Free memory: of free devices that consume no shared counters, and
    of each ``CounterShare``; the largest free device: any ``Device.free`` device (at most
    the node's free memory)."""
    free: dict[str, int] = defaultdict(int)
    largest: dict[str, int] = defaultdict(int)
    for d in devices:
        if isinstance(d, CounterShare):
            free[d.node] += d.memory_free
        elif d.free and d.memory > 0:
            if d.counter_set is None:
                free[d.node] += d.memory
            largest[d.node] = max(largest[d.node], d.memory)
    total = sum(free.values())
    if not total:
        return None
    return round(1 - sum(min(largest[n], free[n]) for n in free) / total, 4)


@dataclass
class Pending:
    """A pending claim: ``claim`` (namespace/name), ``reason`` (one of ``NO_DEVICE``,
    ``ALL_ALLOCATED``, ``COUNTERS_EXHAUSTED``, ``UNKNOWN``, ``FREE_DEVICES``),
    ``requests`` (per request its name, shapes and verdict), ``users`` (live pods that
    reference it)."""

    claim: str
    reason: str
    requests: list[dict[str, Any]]
    users: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "reason": self.reason,
            "message": _REASON_TEXT[self.reason],
            "users": list(self.users),
            "requests": list(self.requests),
        }


def awaits_allocation(claim: Mapping[str, Any]) -> bool:
    """Whether ``claim`` is one :func:`pending_claims` judges: not allocated, not being
    deleted."""
    meta = claim.get("metadata") or {}
    return not ((claim.get("status") or {}).get("allocation") or meta.get("deletionTimestamp"))


#: The most claims awaiting allocation that the report and ``mig advise`` keep from their
#: walk of the claims (``claims.pending.unallocated_fold``); with more they walk the claims
#: again rather than hold them all.
MAX_KEPT_AWAITING = 10_000


def pending_claims(
    claims: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]] | cpods.PodIndex,
    devices: Sequence[Device],
    driver: str = NVIDIA_DRIVER,
) -> tuple[list[Pending], list[list[Shape]]]:
    """Every pending claim with its verdict, and the shapes of each (for
    ``Inventory.stranded``). ``pods`` may be a ``claims.pods.PodIndex``."""
    index = pods if isinstance(pods, cpods.PodIndex) else cpods.PodIndex(pods)
    inventory = Inventory(devices)
    out, shapes_of = [], []
    for claim in claims:
        if not awaits_allocation(claim):
            continue
        meta = claim.get("metadata") or {}
        per_request = request_shapes(claim, driver)
        reqs, verdicts = [], []
        names = [
            r.get("name", "")
            for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        ]
        for name, shapes in zip(names, per_request, strict=True):
            verdict = inventory.judge(shapes)
            verdicts.append(verdict)
            reqs.append({"request": name, "shapes": [s.label() for s in shapes], "reason": verdict})
        users = [
            cpods.key(p)
            for p in index.users.get((meta.get("namespace", ""), meta.get("name", "")), [])
        ]
        out.append(
            Pending(
                cpods.key(claim),
                min(verdicts, key=_ORDER.index) if verdicts else UNKNOWN,
                reqs,
                users,
            )
        )
        shapes_of.append([s for shapes in per_request for s in shapes])
    return out, shapes_of


def leaked_claims(leaks: Iterable[cleaks.Leak], devices: Sequence[Device]) -> list[dict[str, Any]]:
    """The allocated claims of ``leaks`` (``claims.leaks.find_leaks``) that no live pod
    uses (kinds ``dead-reservation``, ``orphaned``, ``owner-done``, ``unreserved``), each
    with the devices it holds and their memory (bytes, devices of the reported driver
    only)."""
    memory = {d.id: d.memory for d in devices}
    out = []
    for leak in leaks:
        if not leak.allocated or leak.live or leak.users:
            continue
        out.append(
            {
                "claim": leak.claim,
                "kind": leak.kind,
                "reason": leak.reason,
                "devices": list(leak.devices),
                "memory": sum(memory.get(d, 0) for d in leak.devices),
            }
        )
    return out


def _group(
    devices: Sequence[Device | CounterShare],
    key: Any,
    stranded: set[tuple[str, str]],
    frag: bool,
) -> list[dict[str, Any]]:
    groups: dict[Any, list[Device | CounterShare]] = defaultdict(list)
    for d in devices:
        groups[key(d)].append(d)
    out = []
    for k in sorted(groups):
        totals = Totals()
        for d in groups[k]:
            totals.add(d, (d.model, d.profile) in stranded)
        row = dict(zip(key.names, k if isinstance(k, tuple) else (k,), strict=True))
        row.update(totals.to_dict())
        if frag:
            row["fragmentation"] = fragmentation(groups[k])
        out.append(row)
    return out


class _Key:
    def __init__(self, *names: str) -> None:
        self.names = names

    def __call__(self, d: Device | CounterShare) -> Any:
        values = tuple(getattr(d, n) for n in self.names)
        return values if len(values) > 1 else values[0]


def _walk_pods_and_claims(
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    capacity: Mapping[str, Mapping[str, int]],
) -> tuple[Any, ...]:
    """What the report reads of the pods and the claims, in one walk of each: the pods'
    ``PodIndex`` and the device plugin's allocations (``capacity``: per node, its
    resources); the CounterSets, who holds each device, the claims awaiting allocation
    (None: more than ``MAX_KEPT_AWAITING``) and the leaks, in the CounterSets' walk of the
    claims where a device consumes counters. Nothing is kept in a ``PagedList``."""
    index, plugin_use = vk.folded(pods, {}, [cpods.PodIndex(), rpaths.DevicePluginUse(capacity)])
    folds = dict(
        [
            cexplain.allocations_fold(holders=False),
            cpending.unallocated_fold(MAX_KEPT_AWAITING),
            cleaks.leaks_fold(index),
        ]
    )
    sets = ccounters.counter_sets(slices, claims, folds)
    (owner, _holders), awaiting, leaks = vk.folded(claims, folds)
    if isinstance(claims, vk.PagedList):
        claims.forget(*folds)  # held by the report while it needs them, not in the list
    return index, plugin_use, sets, owner, awaiting, leaks


def build_report(
    slices: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    pool_label: str = DEFAULT_POOL_LABEL,
    driver: str = NVIDIA_DRIVER,
    activity: Mapping[str, float] | None = None,
    activity_window: str = fa.DEFAULT_WINDOW,
    idle_below: float = fa.DEFAULT_IDLE_PERCENT,
    namespaces: Sequence[Mapping[str, Any]] | None = None,
    team_label: str = rteams.DEFAULT_TEAM_LABEL,
) -> dict[str, Any]:
    """The utilization report as a JSON-ready dict: ``cluster`` (``Totals``, fragmentation,
    pending and leaked counts), ``pools``, ``models``, ``profiles`` (per model and
    profile) and ``rows`` (per pool, model and profile) with ``Totals``; ``nodes`` (per
    node its free memory, largest free device and fragmentation); ``pending`` and
    ``leaked`` claims; ``paths``: devices, allocations and utilization per GPU path
    (NVIDIA's device plugin and DRA), for the cluster and per pool
    (``report.paths.path_figures``); ``cluster.objects_skipped``: per kind the objects not
    read (``readable_objects``). Memory figures are bytes. With ``activity`` (percent per
    device id over ``activity_window``, ``report.activity.fetch``): ``idle``, the allocated
    devices below ``idle_below`` percent, and ``activity``; both None without it.
    ``teams``: per team (the ``team_label`` label of the claim's Namespace among
    ``namespaces``; None: not listed) and per namespace the devices and memory allocated,
    idle and leaked (``report.teams.waste``). ``gpus``: per GPU published with shared
    counters (dynamic MIG) its memory slices, memory and multiprocessors free and
    stranded (``counter_gpus``), summed in ``cluster.shared_counters``."""
    skipped = {}
    slices, skipped["resourceslices"] = readable_objects("resourceslices", slices)
    claims, skipped["resourceclaims"] = readable_objects("resourceclaims", claims)
    pods, skipped["pods"] = readable_objects("pods", pods)
    nodes, skipped["nodes"] = readable_objects("nodes", nodes)
    if namespaces is not None:
        namespaces, skipped["namespaces"] = readable_objects("namespaces", namespaces)
    pools = node_pools(nodes, pool_label)
    capacity = rpaths.device_plugin_capacity_of(nodes)
    walked = _walk_pods_and_claims(slices, claims, pods, capacity)
    index, plugin_use, sets, owner, awaiting, leaks = walked
    del walked
    devices = devices_of(slices, claims, pools, driver, sets, owner)
    del owner
    per_set = _counter_figures(sets, pools, driver)
    gpus, counter_sums = _counter_sums([fig for _cs, fig in per_set])
    pending, shapes = pending_claims(
        claims if awaiting is None else awaiting, index, devices, driver
    )
    wanted = [s for group in shapes for s in group]
    stranded = Inventory(devices).stranded(wanted)
    items = [*devices, *counter_shares(per_set, devices, wanted)]
    leaked = leaked_claims(leaks, devices)
    totals = Totals()
    for d in items:
        totals.add(d, (d.model, d.profile) in stranded)
    by_reason = {r: sum(1 for p in pending if p.reason == r) for r in _ORDER}
    largest: dict[str, int] = defaultdict(int)
    for d in devices:
        if d.free:
            largest[d.node] = max(largest[d.node], d.memory)
    node_rows = _group(items, _Key("node", "pool"), stranded, True)
    for row in node_rows:
        row["largest_free"] = largest[row["node"]]
    figures = _activity(devices, activity, activity_window, idle_below)
    teams = rteams.waste(
        ((d.id, d.claim or "", d.memory) for d in devices if d.allocated),
        None if figures["idle"] is None else (item["device"] for item in figures["idle"]),
        (item["claim"] for item in leaked),
        None if namespaces is None else rteams.namespace_labels(namespaces),
        team_label,
    )
    return {
        "cluster": {
            **totals.to_dict(),
            "fragmentation": fragmentation(items),
            "claims_pending": len(pending),
            "pending_by_reason": by_reason,
            "pending_unknown": by_reason[UNKNOWN],
            "claims_leaked": len(leaked),
            "memory_leaked": sum(item["memory"] for item in leaked),
            "nodes": len(nodes),
            "nodes_publishing": len({d.node for d in devices}),
            "objects_skipped": {k: n for k, n in skipped.items() if n},
            "shared_counters": counter_sums,
        },
        "pools": _group(items, _Key("pool"), stranded, True),
        "models": _group(items, _Key("model"), stranded, True),
        "profiles": _group(items, _Key("model", "profile"), stranded, False),
        "rows": _group(items, _Key("pool", "model", "profile"), stranded, False),
        "nodes": node_rows,
        "gpus": gpus,
        "pending": [p.to_dict() for p in pending],
        "leaked": leaked,
        "paths": rpaths.path_figures(
            nodes, capacity, plugin_use, devices, pools, WHOLE_GPU, NO_POOL
        ),
        "pool_label": pool_label,
        "driver": driver,
        **figures,
        "teams": teams,
    }


#: Per GPU figures of ``gpus`` summed for ``cluster.shared_counters``.
_COUNTER_SUMS = ("memory", "memory_free", "memory_stranded", "multiprocessors",
                 "multiprocessors_free", "multiprocessors_stranded")  # fmt: skip


def counter_gpus(
    slices: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    pools: Mapping[str, str],
    driver: str = NVIDIA_DRIVER,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per CounterSet of ``driver`` (one per GPU with NVIDIA's dynamic MIG) the figures of
    ``claims.counters.gpu_figures`` with the node ``pool`` and GPU ``model`` (the
    ``productName`` of a device consuming it), by node and GPU; and their sums for the
    cluster (``gpus``, memory slices, bytes and multiprocessors, free and stranded)."""
    sets = ccounters.counter_sets(slices, claims)
    return _counter_sums([fig for _cs, fig in _counter_figures(sets, pools, driver)])


def _counter_figures(
    sets: Mapping[str, ccounters.CounterSet], pools: Mapping[str, str], driver: str
) -> list[tuple[ccounters.CounterSet, dict[str, Any]]]:
    """Each CounterSet of ``driver`` with its row of ``counter_gpus``, by node and GPU."""
    out = []
    known: dict[str, bool] = {}  # device id -> whether it fits, judged once
    for cs in sets.values():
        if cs.driver != driver:
            continue
        fig = ccounters.gpu_figures(cs, sets, known)
        model = next((_value(d, "attributes", "productName") for d in cs.objects.values()), None)
        fig["pool"] = pools.get(cs.node, NO_POOL)
        fig["model"] = str(model or UNKNOWN_MODEL)
        out.append((cs, fig))
    out.sort(key=lambda pair: (pair[1]["node"], pair[1]["gpu"], pair[1]["counter_set"]))
    return out


def _counter_sums(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``rows`` and their sums for ``cluster.shared_counters``."""
    sums: dict[str, Any] = {"gpus": len(rows)}
    sums["memory_slices"] = sum(r["memory_slices"] for r in rows)
    sums["memory_slices_free"] = sum(len(r["memory_slices_free"]) for r in rows)
    sums["memory_slices_stranded"] = sum(len(r["memory_slices_stranded"]) for r in rows)
    for k in _COUNTER_SUMS:
        sums[k] = sum(r[k] for r in rows)
    return rows, sums


def counter_shares(
    per_set: Sequence[tuple[ccounters.CounterSet, Mapping[str, Any]]],
    devices: Sequence[Device],
    wanted: Iterable[Shape],
) -> list[CounterShare]:
    """Per GPU with shared counters (``per_set``: each CounterSet with its
    ``claims.counters.gpu_figures`` row, ``pool`` and ``model`` added) the memory left in
    its ``memory`` counter, and how much of it is stranded: all of it when no free device
    of the GPU (``Device.free``) has a shape of ``wanted`` (the shapes of pending claims);
    else the memory of its free memory slices that no such device consumes
    (``claims.counters.unused_memory_slices`` times ``slice_memory``), at most all."""
    wanted = set(wanted)
    asked: dict[tuple[str, str, str], bool] = {}
    takers: dict[str, list[str]] = defaultdict(list)
    for d in devices:
        if d.counter_set is None or not d.free:
            continue
        key = (d.model, d.profile, d.kind)
        if key not in asked:
            asked[key] = any(s.fits(*key) for s in wanted)
        if asked[key]:
            takers[d.counter_set].append(d.id.rsplit("/", 1)[-1])
    out = []
    for cs, fig in per_set:
        free = int(fig["memory_free"])
        stranded = free
        if takers.get(cs.id):
            holes = ccounters.unused_memory_slices(cs, takers[cs.id])
            stranded = min(free, int(ccounters.slice_memory(cs) * len(holes)))
        out.append(CounterShare(cs.id, cs.node, fig["pool"], fig["model"], free, stranded))
    return out


def _activity(
    devices: Sequence[Device], activity: Mapping[str, float] | None, window: str, below: float
) -> dict[str, Any]:
    if activity is None:
        return {"idle": None, "activity": None}
    allocated = [(d.id, d.claim or "", d.node, d.model, d.profile) for d in devices if d.allocated]
    idle, unknown = fa.idle_devices(allocated, activity, below)
    return {
        "idle": idle,
        "activity": {
            "window": window,
            "idle_below_percent": below,
            "devices_allocated": len(allocated),
            "devices_measured": len(allocated) - unknown,
            "devices_idle": len(idle),
        },
    }
