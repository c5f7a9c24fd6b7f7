# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What the cluster-side validation checks read: the objects listed once (``Listing``:
Nodes, kube-apiserver pods, DRA plugin pods, DeviceClasses, ResourceSlices, claims, the
kubelet's FailedPrepareDynamicResources Events...), the
settings (``Settings``), the cluster's version (``cluster_version``), and Kubernetes label
selectors (``parse_label_selector``, ``label_selector_matches``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Listing",
    "Settings",
    "label_selector_matches",
    "parse_label_selector",
]


MIB = 2**20

#: Reason of the kubelet's Event on a Pod whose ResourceClaims the node's DRA driver could
#: not prepare (``pkg/kubelet/events/event.go``); ``Listing.events`` holds these only.
PREPARE_FAILED_REASON = "FailedPrepareDynamicResources"


#: What a ``Listing`` holds per kind: a list of objects, or a
#: ``validate_kube.PagedList`` (sized, re-iterable, decoded one page at a time). Checks
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
    errors: dict[str, str] = field(default_factory=dict)
    requests: int = 0
    sources: dict[str, str] = field(default_factory=dict)

    def src(self, kind: str) -> str:
        return self.sources.get(kind, kind)


@dataclass
class Settings:
    """What the checks are judged against.

    ``gpu_nodes``: Kubernetes node names of the inventory's GPU nodes; ``gpu_labels``:
    labels every GPU node must have; ``driver``: the DRA driver name; ``plugin_namespace``
    (empty: any) and ``plugin_selector`` (a label selector such as
    ``app.kubernetes.io/component=kubelet-plugin``) find the driver's kubelet plugin pods;
    ``device_classes``: DeviceClasses that must exist; ``pending_threshold_s``: seconds a
    claim may stay unallocated; ``version``: Kubernetes version judged against (empty:
    ``/version``); ``features``/``gates``: what the version model was asked for;
    ``gpu_facts``: node -> ``gpu_facts`` module facts (``gpufleet_gpus``,
    ``gpufleet_gpu_driver_version``); ``mig_layout``: node -> wanted ``{profile: count}``
    per MIG-enabled GPU (a mapping of GPU index -> layout, or one layout for all);
    ``now``: seconds since the epoch.
    """

    gpu_nodes: list[str] = field(default_factory=list)
    gpu_labels: dict[str, str] = field(default_factory=lambda: {"nvidia.com/gpu.present": "true"})
    driver: str = "gpu.nvidia.com"
    plugin_namespace: str = ""
    plugin_selector: str = "app.kubernetes.io/component=kubelet-plugin"
    device_classes: list[str] = field(default_factory=lambda: ["gpu.nvidia.com", "mig.nvidia.com"])
    pending_threshold_s: float = 300.0
    version: str = ""
    features: list[str] = field(default_factory=list)
    gates: dict[str, Any] = field(default_factory=dict)
    gpu_facts: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    mig_layout: dict[str, Any] = field(default_factory=dict)
    now: float = 0.0


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


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
