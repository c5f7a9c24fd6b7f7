# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The cluster listed once: what the cluster-side checks and the report read (``Listing``:
Nodes, kube-apiserver pods, DRA plugin pods, DeviceClasses, ResourceSlices, claims, the
kubelet's FailedPrepareDynamicResources Events...), the
settings (``Settings``), the cluster's version (``cluster_version``), and Kubernetes label
selectors (``parse_label_selector``, ``label_selector_matches``), and ``list_cluster``,
which lists it.

``list_cluster`` lists resource.k8s.io kinds in the most stable version the cluster serves
(v1, v1beta2, v1beta1: the version model's ``dra/resource_versions``) and trims every
page as it arrives (``TRIMS``; where msgspec is installed each item is decoded straight
into the fields its trim reads, ``SCHEMAS``) down to what the checks read, stored compressed
(``kube/client.PagedList``), so that the listing of a large fleet fits in memory: 1,000
GPU nodes with 10,500 pods, 16,000 devices and 10,000 claims are about 70 MB of JSON and
took 460 MiB as whole objects, about 110 MiB trimmed; as compressed pages a few MiB.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional, TypedDict

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import is_map
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    OBJECT_RESOURCE_VERSIONS,
    device_fields,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.client import (
    PAGE_SIZE,
    Kube,
    KubeError,
    PagedList,
    gc_paused,
)

__all__ = [
    "READABLE",
    "Listing",
    "Settings",
    "label_selector_matches",
    "list_for_checks",
    "parse_label_selector",
    "readable",
]


MIB = 2**20

#: Reason of the kubelet's Event on a Pod whose ResourceClaims the node's DRA driver could
#: not prepare (``pkg/kubelet/events/event.go``); ``Listing.events`` holds these only.
PREPARE_FAILED_REASON = "FailedPrepareDynamicResources"


#: What a ``Listing`` holds per kind: a list of objects, or a
#: ``kube/client.PagedList`` (sized, re-iterable, decoded one page at a time). Checks
#: walk it with ``for`` and ``len`` and keep what they need, never the whole list.
Objects = Any


@dataclass
class Listing:
    """What was read from the API, each kind once: ``version`` (``/version``),
    ``resource_group`` (``/apis/resource.k8s.io``), ``resource_version`` (the group
    version the resource.k8s.io kinds were listed in), the object lists (``Objects``: a
    list or a ``PagedList``; ``events``: only those with reason
    FailedPrepareDynamicResources), ``errors`` (kind -> error text for a list that
    failed), ``requests`` (API requests made) and ``sources`` (kind -> the request that
    read it)."""

    version: Mapping[str, Any] | None = None
    resource_group: Mapping[str, Any] | None = None
    resource_version: str | None = None
    nodes: Objects = field(default_factory=list)
    pods: Objects = field(default_factory=list)
    slices: Objects = field(default_factory=list)
    claims: Objects = field(default_factory=list)
    classes: Objects = field(default_factory=list)
    daemonsets: Objects = field(default_factory=list)
    events: Objects = field(default_factory=list)
    namespaces: Objects = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    requests: int = 0
    sources: dict[str, str] = field(default_factory=dict)

    def src(self, kind: str) -> str:
        return self.sources.get(kind, kind)


@dataclass
class Settings:
    """What the checks are judged against.

    ``gpu_nodes``: Kubernetes node names of the inventory's GPU nodes; ``gpu_labels``:
    labels every GPU node must have; ``driver``: the DRA driver name (the caller's: the
    ``dra_validate`` module's ``driver`` option); ``plugin_namespace``
    (empty: any) and ``plugin_selector`` (a label selector such as
    ``app.kubernetes.io/component=kubelet-plugin``) find the driver's kubelet plugin pods;
    ``device_classes``: DeviceClasses that must exist (the caller's, as ``driver``);
    ``pending_threshold_s``: seconds a
    claim may stay unallocated; ``version``: Kubernetes version judged against (empty:
    ``/version``); ``features``/``gates``: what the version model was asked for;
    ``gpu_facts``: node -> ``gpu_facts`` module facts (``gpufleet_gpus``,
    ``gpufleet_gpu_driver_version``); ``mig_layout``: node -> wanted ``{profile: count}``
    per MIG-enabled GPU (a mapping of GPU index -> layout, or one layout for all);
    ``node_groups``: inventory group -> Kubernetes node names of its hosts, for the
    groups that hold a GPU node (the GPU group itself left out): the ``gpu_path_*``
    groups that declare a pool's GPU path and the node groups that make the pools
    (``validate.gpu_paths.declared_paths`` reads them); ``gpu_path_moves``: pool group ->
    path (``device-plugin`` or ``dra``) for the pools ``gpufleet migrate`` moved whose group
    is not yet in its new ``gpu_path_*`` group: their nodes declare the new path
    (``declared_paths`` applies it); ``now``: seconds since the epoch.
    """

    gpu_nodes: list[str] = field(default_factory=list)
    gpu_labels: dict[str, str] = field(default_factory=lambda: {"nvidia.com/gpu.present": "true"})
    driver: str = field(kw_only=True)
    plugin_namespace: str = ""
    plugin_selector: str = "app.kubernetes.io/component=kubelet-plugin"
    device_classes: list[str] = field(kw_only=True)
    pending_threshold_s: float = 300.0
    version: str = ""
    features: list[str] = field(default_factory=list)
    gates: dict[str, Any] = field(default_factory=dict)
    gpu_facts: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    mig_layout: dict[str, Any] = field(default_factory=dict)
    node_groups: dict[str, list[str]] = field(default_factory=dict)
    gpu_path_moves: dict[str, str] = field(default_factory=dict)
    now: float = 0.0


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _names(objects: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    return frozenset(name_of(obj) for obj in objects)


def node_names(listing: Listing) -> frozenset[str]:
    """The names of the listed Nodes: stored pages are walked for them once
    (``PagedList.derived``), however many checks ask."""
    if isinstance(listing.nodes, PagedList):
        return listing.nodes.derived("names", _names)
    return _names(listing.nodes)


def cluster_version(listing: Listing, settings: Settings) -> str | None:
    """The version judged against: ``settings.version``, else ``/version``."""
    if settings.version:
        return settings.version
    return (listing.version or {}).get("gitVersion")


# ------------------------------------------------------------------ label selectors

_SEL_RE = re.compile(
    r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9._-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$"
)


def parse_label_selector(text: str) -> list[tuple[str, str, list[str]]]:
    """A label selector string (``a=b,c!=d,e in (x,y),!f,g``) as ``(key, op, values)``
    with op ``=``, ``!=``, ``in``, ``notin``, ``exists``, ``!exists``. Raises ValueError
    naming the term for one it cannot read."""
    out: list[tuple[str, str, list[str]]] = []
    depth = 0
    term = ""
    terms = []
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(term)
            term = ""
        else:
            term += ch
    terms.append(term)
    for t in terms:
        if not t.strip():
            continue
        m = _SEL_RE.match(t)
        if not m:
            raise ValueError(
                f"label selector term {t.strip()!r} is not key=value, key!=value, "
                "key in (a,b), key notin (a,b), key or !key"
            )
        neg, k, op, val, setop, setvals = m.groups()
        if op:
            out.append((k, "!=" if op == "!=" else "=", [val or ""]))
        elif setop:
            out.append((k, setop, [v.strip() for v in setvals.split(",") if v.strip()]))
        else:
            out.append((k, "!exists" if neg else "exists", []))
    return out


def label_selector_matches(
    selector: Sequence[tuple[str, str, list[str]]], labels: Mapping[str, str]
) -> bool:
    for k, op, vals in selector:
        has = k in labels
        v = labels.get(k)
        if (
            (op == "=" and v != vals[0])
            or (op == "!=" and has and v == vals[0])
            or (op == "in" and v not in vals)
            or (op == "notin" and has and v in vals)
            or (op == "exists" and not has)
            or (op == "!exists" and has)
        ):
            return False
    return True


def _pick(obj: Any, keys: Sequence[str]) -> dict[str, Any]:
    return {k: obj[k] for k in keys if k in obj} if is_map(obj) else {}


#: The pod fields the checks read (``validate.cluster``: apiserver versions, plugin pods;
#: ``claims.pods.PodIndex``: pods by name, their claims, done or not, scheduler messages;
#: the report: the extended resources of its containers, ``trim_pod``).
POD_FIELDS = {
    "metadata": ("name", "namespace", "uid", "labels", "deletionTimestamp"),
    "spec": ("nodeName", "resourceClaims"),
    "status": ("phase", "resourceClaimStatuses"),
}


#: The one pod condition a check reads (the scheduler's message on a pod that waits for
#: its claims), and its fields.
POD_CONDITION = ("PodScheduled", ("type", "status", "reason", "message"))
#: The fields kept of a container, an init container and a container status (and the
#: extended resources of the containers' ``resources``).
CONTAINER_FIELDS = ("name", "image")
INIT_CONTAINER_FIELDS = ("name", "restartPolicy")
CONTAINER_STATUS_FIELDS = ("name", "ready")


def _fields(name: str, keys: Sequence[str], **typed: Any) -> Any:
    """A ``TypedDict`` of ``keys`` (any value) and ``typed`` (of that type), each key
    optional: the fields the fast decoder keeps of an object, skipping the others
    (``kube/client.fast_page``); a value of another type than ``typed`` sends the item
    to the ``json`` path, which keeps it as the trim does."""
    return TypedDict(name, {**dict.fromkeys(keys, Any), **typed}, total=False)


def _nullable(kind: Any) -> Any:
    """``kind`` or ``null``: a member the API may send as ``null``."""
    return Optional[kind]  # noqa: UP045 - pylint of ansible-test sanity cannot type "X | None" here


_CONTAINER = _fields("Container", (*CONTAINER_FIELDS, *INIT_CONTAINER_FIELDS, "resources"))

#: What ``trim_pod`` reads of a pod.
POD_SCHEMA = _fields(
    "Pod",
    (),
    metadata=_nullable(_fields("PodMetadata", POD_FIELDS["metadata"])),
    spec=_nullable(
        _fields(
            "PodSpec",
            POD_FIELDS["spec"],
            containers=_nullable(list[_CONTAINER]),
            initContainers=_nullable(list[_CONTAINER]),
        )
    ),
    status=_nullable(
        _fields(
            "PodStatus",
            POD_FIELDS["status"],
            conditions=_nullable(list[_fields("PodCondition", POD_CONDITION[1])]),
            containerStatuses=_nullable(list[_fields("ContainerStatus", CONTAINER_STATUS_FIELDS)]),
        )
    ),
)


def _extended_resources(resources: Any) -> dict[str, Any]:
    """A container's ``resources`` with only the extended resources of its ``requests``
    and ``limits`` (a name with a domain prefix: ``nvidia.com/gpu``; the native ``cpu``,
    ``memory``, ``ephemeral-storage`` and ``hugepages-*`` have none), which the report
    counts per node; ``{}`` when it lists none."""
    out = {}
    for member in ("requests", "limits"):
        values = resources.get(member) if is_map(resources) else None
        if is_map(values):
            kept = {k: v for k, v in values.items() if "/" in str(k)}
            if kept:
                out[member] = kept
    return out


def _container(container: Any, keys: Sequence[str]) -> dict[str, Any]:
    out = _pick(container, keys)
    resources = _extended_resources(container.get("resources") if is_map(container) else None)
    if resources:
        out["resources"] = resources
    return out


def trim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """A pod with ``POD_FIELDS`` only, its containers' ``name``, ``image`` and extended
    resources (``_extended_resources``), its init containers' ``name``, ``restartPolicy``
    and extended resources, its container statuses' ``name`` and ``ready`` and its
    ``POD_CONDITION``; volumes, tolerations, env, probes, the other resources and
    conditions and the rest are dropped."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    out_spec = _pick(spec, POD_FIELDS["spec"])
    out_spec["containers"] = [_container(c, CONTAINER_FIELDS) for c in spec.get("containers") or []]
    if spec.get("initContainers"):
        out_spec["initContainers"] = [
            _container(c, INIT_CONTAINER_FIELDS) for c in spec.get("initContainers") or []
        ]
    out_status = _pick(status, POD_FIELDS["status"])
    if "conditions" in status:
        kind, fields = POD_CONDITION
        out_status["conditions"] = [
            _pick(c, fields)
            for c in status.get("conditions") or []
            if is_map(c) and c.get("type") == kind
        ]
    if "containerStatuses" in status:
        out_status["containerStatuses"] = [
            _pick(c, CONTAINER_STATUS_FIELDS) for c in status.get("containerStatuses") or []
        ]
    return {
        "metadata": _pick(pod.get("metadata"), POD_FIELDS["metadata"]),
        "spec": out_spec,
        "status": out_status,
    }


#: ObjectMeta's fields but ``managedFields`` (``k8s.io/apimachinery/pkg/apis/meta/v1/
#: types.go``): what ``trim_whole`` keeps of an object's metadata.
OBJECT_METADATA = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)


#: The members of an object kept whole (``trim_whole``).
WHOLE_FIELDS = ("apiVersion", "kind", "metadata", "spec", "status")
_WHOLE_KEYS = frozenset(WHOLE_FIELDS)
_METADATA_KEYS = frozenset(OBJECT_METADATA)


def _whole(name: str) -> Any:
    """The fields of an object kept whole but its ``metadata.managedFields``, for the fast
    decoder: the bookkeeping is skipped as the page is read, not decoded and dropped (a
    page of 2,000 ResourceClaims decodes whole in half the time; item by item, with the
    trim, in 21 ms instead of 28 ms)."""
    kept = tuple(k for k in WHOLE_FIELDS if k != "metadata")
    return _fields(name, kept, metadata=_nullable(_fields(f"{name}Metadata", OBJECT_METADATA)))


def trim_whole(obj: dict[str, Any]) -> dict[str, Any]:
    """An object kept whole but its ``metadata.managedFields`` (server-side apply
    bookkeeping, which no check reads; client-go's informers drop it the same way,
    ``cache.TransformStripManagedFields``): its ``WHOLE_FIELDS``, its metadata's
    ``OBJECT_METADATA`` (the fields ``_whole`` decodes). An object that holds no other
    field is kept as it is (the fast decoder's, every item of a page)."""
    out = obj if obj.keys() <= _WHOLE_KEYS else _pick(obj, WHOLE_FIELDS)
    meta = out.get("metadata")
    if is_map(meta) and not meta.keys() <= _METADATA_KEYS:
        out["metadata"] = _pick(meta, OBJECT_METADATA)
    return out


def trim_node(node: dict[str, Any]) -> dict[str, Any]:
    """A node kept whole (``trim_whole``) but its ``status.images`` (the kubelet lists up
    to 50 images with all their names; no check reads them)."""
    out = trim_whole(node)
    status = out.get("status")
    if isinstance(status, dict) and "images" in status:
        out["status"] = {k: v for k, v in status.items() if k != "images"}
    return out


def _share_values(values: Any, shared: dict[tuple[str, type, Any], Any]) -> None:
    """Each value of the mapping ``values`` that is an object of one scalar member
    (``{"string": "NVIDIA H200"}``) replaced by the equal one kept in ``shared`` (kept
    there when it is the first): the devices of a fleet repeat a few dozen values
    thousands of times. The shared values are never modified (the checks only read
    devices). The member's type is part of the key: ``1``, ``1.0`` and ``true`` are
    equal in Python but not the same value."""
    if type(values) is not dict:  # pylint: disable=unidiomatic-typecheck
        return
    keep = shared.setdefault
    for name, value in values.items():
        if type(value) is dict and len(value) == 1:  # pylint: disable=unidiomatic-typecheck
            for key, member in value.items():
                kind = type(member)
                if kind in _SCALARS:
                    values[name] = keep((key, kind, member), value)


#: The types of a JSON scalar as decoded (the exact types: this runs for every value of
#: every device).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def trim_slices() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A trim for ResourceSlices: kept whole (``trim_whole``), equal attribute, capacity and
    counter values of all devices and CounterSets shared (one object per distinct value:
    with dynamic MIG a GPU publishes some 26 devices of about 10 counters, most ``1``)."""
    shared: dict[tuple[str, type, Any], Any] = {}

    def trim(listed: dict[str, Any]) -> dict[str, Any]:
        rslice = trim_whole(listed)
        spec = rslice.get("spec") or {}
        for device in spec.get("devices") or []:
            body = device_fields(device)
            for member in ("attributes", "capacity"):
                _share_values(body.get(member), shared)
            consumes = body.get("consumesCounters")
            for entry in consumes if isinstance(consumes, list) else []:
                if isinstance(entry, dict):
                    _share_values(entry.get("counters"), shared)
        counter_sets = spec.get("sharedCounters")
        for entry in counter_sets if isinstance(counter_sets, list) else []:
            if isinstance(entry, dict):
                _share_values(entry.get("counters"), shared)
        return rslice

    return trim


#: The Event fields ``claims.prepare-failed`` reads (core/v1 Event, ``staging/src/k8s.io/api/
#: core/v1/types.go``).
EVENT_FIELDS = (
    "reason",
    "message",
    "type",
    "involvedObject",
    "source",
    "reportingComponent",
    "reportingInstance",
    "count",
    "series",
    "firstTimestamp",
    "lastTimestamp",
    "eventTime",
)


#: The Event metadata and Namespace metadata fields kept.
EVENT_METADATA = ("name", "namespace", "creationTimestamp")
NAMESPACE_METADATA = ("name", "labels")


def trim_namespace(namespace: dict[str, Any]) -> dict[str, Any]:
    """A Namespace with its name and labels only (the report's teams read the labels)."""
    return {"metadata": _pick(namespace.get("metadata"), NAMESPACE_METADATA)}


def trim_event(event: dict[str, Any]) -> dict[str, Any]:
    """An Event with ``EVENT_FIELDS`` and its name and namespace only."""
    out = _pick(event, EVENT_FIELDS)
    out["metadata"] = _pick(event.get("metadata"), EVENT_METADATA)
    return out


#: Kind -> a factory of the trim applied to each listed item (see ``Kube.list``).
TRIMS: dict[str, Callable[[], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "nodes": lambda: trim_node,
    "pods": lambda: trim_pod,
    "resourceslices": trim_slices,
    "resourceclaims": lambda: trim_whole,
    "deviceclasses": lambda: trim_whole,
    "daemonsets": lambda: trim_whole,
    "events": lambda: trim_event,
    "namespaces": lambda: trim_namespace,
}

#: Kind -> the fields its trim reads, for the fast decoder (``Kube.pages``' ``schema``);
#: the kinds kept nearly whole are decoded but their managedFields (``_whole``), a kind
#: not named here whole.
SCHEMAS: dict[str, Any] = {
    "pods": POD_SCHEMA,
    "nodes": _whole("Node"),
    "resourceslices": _whole("ResourceSlice"),
    "resourceclaims": _whole("ResourceClaim"),
    "deviceclasses": _whole("DeviceClass"),
    "daemonsets": _whole("DaemonSet"),
    "events": _fields(
        "Event", EVENT_FIELDS, metadata=_nullable(_fields("EventMetadata", EVENT_METADATA))
    ),
    "namespaces": _fields(
        "Namespace", (), metadata=_nullable(_fields("NamespaceMetadata", NAMESPACE_METADATA))
    ),
}


def resource_version(kube: Kube) -> tuple[Mapping[str, Any] | None, str | None]:
    """``/apis/resource.k8s.io`` (None when the group is not served) and the version to
    list in: the most stable one served of ``OBJECT_RESOURCE_VERSIONS``."""
    try:
        group = kube.get("/apis/resource.k8s.io")
    except KubeError as err:
        if err.status == 404:
            return None, None
        raise
    versions = group.get("versions")
    served = [
        v.get("version")
        for v in (versions if isinstance(versions, list) else [])
        if isinstance(v, Mapping)
    ]
    for v in OBJECT_RESOURCE_VERSIONS:
        if v in served:
            return group, v
    return group, None


#: Items per page at most, for the kinds whose objects are large, whatever
#: ``page_size`` says: a ResourceSlice of 16 H200 devices (4 GPUs carved into 3 MIG
#: devices, 4 whole) is about 12.7 KB of JSON and decodes to about 31 KB of Python
#: objects, so a page of 500 keeps a page in flight near 15 MB; a KWOK or kubelet Node
#: is 4 to 10 KB.
PAGE_LIMITS = {"resourceslices": 500, "nodes": 1000}


#: Kinds listed at once: the API server encodes one list while this process decodes
#: another; more threads hold more pages in memory without being faster on a few cores.
LIST_THREADS = 3


#: The kinds ``list_cluster`` lists unless told others: those validate reads.
DEFAULT_KINDS = (
    "nodes",
    "pods",
    "resourceslices",
    "resourceclaims",
    "deviceclasses",
    "daemonsets",
    "events",
)

#: Listing attribute of each kind whose name differs.
_ATTRS = {"resourceslices": "slices", "resourceclaims": "claims", "deviceclasses": "classes"}


def list_cluster(
    kube: Kube,
    plugin_namespace: str = "",
    page_size: int = PAGE_SIZE,
    kinds: Sequence[str] = DEFAULT_KINDS,
    keep: Mapping[str, Callable[[Any], bool]] | None = None,
) -> Listing:
    """List each kind once (paged by ``page_size``, at most ``PAGE_LIMITS`` for the kinds
    named there, each page trimmed by ``TRIMS``, its items judged by ``keep``'s
    predicate of the kind where it names one (``Kube.paged``: an item it refuses is not
    stored, ``PagedList.vetted`` counts them) and
    stored as a ``PagedList``; the kinds concurrently) into a Listing; a kind that fails
    is recorded in ``errors`` and left empty. ``/version`` and ``/apis/resource.k8s.io``
    are read first; Events only with the reason
    ``cluster.listing.PREPARE_FAILED_REASON``. Raises KubeError only when the API server
    does not answer ``/version``."""
    # Events are selected by reason on the server, so that their list stays small
    queries = {"events": (("fieldSelector", f"reason={PREPARE_FAILED_REASON}"),)}
    listing = Listing()
    listing.version = kube.get("/version")
    listing.sources["version"] = "GET /version"
    try:
        listing.resource_group, listing.resource_version = resource_version(kube)
    except KubeError as err:
        listing.errors["resource.k8s.io"] = str(err)
    rv = listing.resource_version
    paths = {
        "nodes": "/api/v1/nodes",
        "pods": "/api/v1/pods",
        "events": "/api/v1/events",
        "namespaces": "/api/v1/namespaces",
        "daemonsets": f"/apis/apps/v1/namespaces/{plugin_namespace}/daemonsets"
        if plugin_namespace
        else "/apis/apps/v1/daemonsets",
    }
    if rv:
        for kind in ("resourceslices", "resourceclaims", "deviceclasses"):
            paths[kind] = f"/apis/resource.k8s.io/{rv}/{kind}"
    wanted = []
    for kind in kinds:
        if kind not in paths:
            listing.errors[kind] = "resource.k8s.io is not served"
            continue
        query = "".join(f"?{k}={v}" for k, v in queries.get(kind, ()))
        listing.sources[kind] = f"GET {paths[kind]}{query}"
        wanted.append(kind)

    def read(kind: str) -> PagedList | KubeError:
        try:
            return kube.paged(
                paths[kind],
                min(page_size, PAGE_LIMITS.get(kind, page_size)),
                query=queries.get(kind, ()),
                trim=TRIMS[kind](),
                schema=SCHEMAS.get(kind),
                keep=(keep or {}).get(kind),
                # side by side already; a page read ahead for each as well held up to six
                # answers at once (report and mig advise peaked above 300 MiB at 10,000
                # GPU nodes)
                ahead=False,
            )
        except KubeError as err:
            return err

    # the kinds are listed side by side: the API server encodes one list while this
    # process decodes another
    with (
        gc_paused(),
        ThreadPoolExecutor(max_workers=max(1, min(LIST_THREADS, len(wanted)))) as pool,
    ):
        results = list(pool.map(read, wanted))
    for kind, result in zip(wanted, results, strict=True):
        if isinstance(result, KubeError):
            listing.errors[kind] = str(result)
        else:
            setattr(listing, _ATTRS.get(kind, kind), result)
    listing.requests = kube.requests
    return listing


def readable(item: Any) -> bool:
    """An object whose envelope has the API's types: ``metadata``, ``spec`` and
    ``status`` objects when present, ``metadata.name``/``namespace`` strings, its
    ``labels``/``annotations`` objects. An empty value (``None``, ``""``, ``[]``...) counts
    as absent. Every listed item is judged as its page is decoded: the decoded dicts are
    told by ``is_map`` without the abstract check."""
    if not is_map(item):
        return False
    meta = item.get("metadata")
    for value in (meta, item.get("spec"), item.get("status")):
        if value and not is_map(value):
            return False
    if not meta:
        return True
    for key in ("name", "namespace"):
        value = meta.get(key)
        if value and not isinstance(value, str):
            return False
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value and not is_map(value):
            return False
    return True


#: Listed kind -> ``readable``: ``list_for_checks`` judges each page as it decodes it
#: (``list_cluster``'s ``keep``), so that a reader that drops what is not readable need
#: not walk the stored pages (``PagedList.vetted``).
READABLE = dict.fromkeys(DEFAULT_KINDS, readable)


def list_for_checks(kube: Kube, plugin_namespace: str = "", page_size: int = PAGE_SIZE) -> Listing:
    """The cluster listed as validate's checks read it: ``list_cluster`` of the default
    kinds, each item judged ``readable`` as its page is decoded."""
    return list_cluster(kube, plugin_namespace, page_size, keep=READABLE)
