# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""ResourceClaims that leaked, claims that stay pending, and why a claim matches no device.

Pure functions over listed objects (JSON dicts as the API returns them: ResourceClaims,
Pods, ResourceSlices, DeviceClasses, Nodes); no I/O.

Leaks mirror what kube-controller-manager's resource claim controller cleans up
(``pkg/controller/resourceclaim/controller.go`` ``syncClaim``, v1.37.2): a
``status.reservedFor`` entry for a pod that no longer exists, was replaced (another UID)
or is done (phase Succeeded/Failed) is dropped; when none is left, an allocation made by
the scheduler (finalizer ``resource.kubernetes.io/delete-protection``) is cleared and the
finalizer removed; a claim generated for a pod (controller ownerReference ``v1/Pod``)
whose pod is gone or done is deleted. A claim still listed that way holds devices no pod
uses: the controller is not running, is failing, or something else keeps it.

``plan_gc`` turns leaks into the same updates, never for a claim that a live pod reserves
or references.

``explain_claim`` evaluates the DeviceClass and request selectors of a claim (with the
Kubernetes CEL environment of ``cel.evaluate``) against every published device and says,
per request and node, how many devices match and why the others do not, e.g. ``0 of 14
devices match: profile is 1g.18gb, wanted 1g.10gb (14)``.
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import evaluate as vcel
from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import verdicts as dra_cel

__all__ = [
    "FINALIZER",
    "GcAction",
    "Leak",
    "PendingClaim",
    "explain_claim",
    "find_leaks",
    "find_pending",
    "iter_latest_slices",
    "iter_published_devices",
    "latest_slices",
    "plan_gc",
    "published_devices",
]

#: Finalizer the scheduler sets when it allocates (``resourceapi.Finalizer``).
FINALIZER = "resource.kubernetes.io/delete-protection"
#: Annotation of claims generated from a pod's ResourceClaimTemplate.
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
_TERMINAL = ("Succeeded", "Failed")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of an object (``name`` for cluster-scoped ones)."""
    m = _meta(obj)
    return f"{m['namespace']}/{m['name']}" if m.get("namespace") else str(m.get("name"))


def parse_time(text: str | None) -> float | None:
    """RFC 3339 time of the API (``2026-01-01T10:00:00Z``) -> seconds since the epoch."""
    if not text:
        return None
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _pod_done(pod: Mapping[str, Any]) -> bool:
    """``isPodDone``: a terminal phase, or deleted before it was scheduled."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    return status.get("phase") in _TERMINAL or (
        bool(_meta(pod).get("deletionTimestamp")) and not spec.get("nodeName")
    )


class _Users(Mapping[tuple[str, str], list[Mapping[str, Any]]]):
    """``(namespace, claim)`` -> the live pods that use the claim, each as the small pod
    ``PodIndex.get`` gives."""

    def __init__(self, index: PodIndex) -> None:
        self._index = index
        self._names: dict[tuple[str, str], list[str]] = {}

    def add(self, namespace: str, claim: str, pod: str) -> None:
        self._names.setdefault((namespace, claim), []).append(pod)

    def __getitem__(self, k: tuple[str, str]) -> list[Mapping[str, Any]]:
        pods = (self._index.get(k[0], pod) for pod in self._names[k])
        return [p for p in pods if p is not None]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class PodIndex:
    """Pods by ``(namespace, name)`` and the claims each live (not done) pod uses.

    Each pod is kept as a tuple of the fields the checks read (uid, phase,
    deletionTimestamp, nodeName, the PodScheduled condition when it is not True), about
    0.3 KiB a pod whatever the pod's size; ``get`` and ``users`` give each as a small
    pod object with those fields only (``metadata.name``, ``metadata.namespace``,
    ``metadata.uid``, ``metadata.deletionTimestamp``, ``spec.nodeName``,
    ``status.phase``, ``status.conditions``)."""

    def __init__(self, pods: Iterable[Mapping[str, Any]]) -> None:
        self._pods: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.users = _Users(self)
        for pod in pods:
            m = _meta(pod)
            # a namespace is shared by many pods: one string object each
            ns, name = sys.intern(str(m.get("namespace", ""))), str(m.get("name", ""))
            status = pod.get("status") or {}
            phase = status.get("phase")
            unscheduled = [
                c
                for c in status.get("conditions") or []
                if isinstance(c, Mapping)
                and c.get("type") == "PodScheduled"
                and c.get("status") != "True"
            ]
            self._pods[(ns, name)] = (
                m.get("uid"),
                phase,
                m.get("deletionTimestamp"),
                (pod.get("spec") or {}).get("nodeName"),
                tuple(dict(c) for c in unscheduled) or None,
            )
            if _pod_done(pod):
                continue
            names = {
                rc.get("resourceClaimName")
                for rc in (pod.get("spec") or {}).get("resourceClaims") or []
            }
            names |= {
                s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
            }
            for n in names - {None}:
                self.users.add(ns, str(n), name)

    def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        rec = self._pods.get((namespace, name))
        if rec is None:
            return None
        uid, phase, deleted, node, conditions = rec
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
        if deleted:
            meta["deletionTimestamp"] = deleted
        status: dict[str, Any] = {"phase": phase} if phase is not None else {}
        if conditions:
            status["conditions"] = [dict(c) for c in conditions]
        return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}

    def __len__(self) -> int:
        return len(self._pods)


def _owner_pod(claim: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in _meta(claim).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
            return ref
    return None


def allocated_devices(claim: Mapping[str, Any]) -> list[str]:
    """``driver/pool/device`` of every allocation result of a claim."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [
        f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"
        for r in (alloc.get("devices") or {}).get("results") or []
    ]


@dataclass
class Leak:
    """A claim that holds (or is kept for) something no live pod uses.

    ``kind``: ``dead-reservation`` (reserved for pods that are gone, replaced or done, and
    for no live one), ``stale-entries`` (dead entries beside live ones: not collected),
    ``orphaned`` (generated for a pod that is gone), ``owner-done`` (generated for a pod
    that finished), ``unreserved`` (allocated, reserved for nobody, used by no pod).
    ``status`` is ``fail`` or ``warn``; ``dead``/``live`` are reservedFor entries.
    """

    claim: str
    uid: str
    kind: str
    status: str
    reason: str
    allocated: bool
    devices: list[str]
    dead: list[dict[str, Any]] = field(default_factory=list)
    live: list[dict[str, Any]] = field(default_factory=list)
    owner: str | None = None
    users: list[str] = field(default_factory=list)
    owner_gone: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "owner_gone": self.owner_gone,
            "claim": self.claim,
            "uid": self.uid,
            "kind": self.kind,
            "status": self.status,
            "reason": self.reason,
            "allocated": self.allocated,
            "devices": list(self.devices),
            "dead": list(self.dead),
            "live": list(self.live),
            "owner": self.owner,
            "users": list(self.users),
        }


def _why_dead(ns: str, entry: Mapping[str, Any], pods: PodIndex) -> str | None:
    """Why a reservedFor pod entry is dead, or None when the pod lives."""
    name, uid = entry.get("name", ""), entry.get("uid", "")
    pod = pods.get(ns, name)
    if pod is None:
        return f"pod {ns}/{name} (uid {uid}) no longer exists"
    if _meta(pod).get("uid") != uid:
        return f"pod {ns}/{name} was replaced (reserved uid {uid}, now {_meta(pod).get('uid')})"
    phase = (pod.get("status") or {}).get("phase")
    if _pod_done(pod):
        return f"pod {ns}/{name} is done (phase {phase})"
    return None


def find_leaks(
    claims: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] | PodIndex
) -> list[Leak]:
    """Every claim of ``claims`` that leaked, judged against ``pods`` (all pods of the
    namespaces the claims live in, listed after the claims)."""
    index = pods if isinstance(pods, PodIndex) else PodIndex(pods)
    out: list[Leak] = []
    for claim in claims:
        m = _meta(claim)
        ns, name = m.get("namespace", ""), m.get("name", "")
        status = claim.get("status") or {}
        allocated = bool(status.get("allocation"))
        devices = allocated_devices(claim)
        dead: list[dict[str, Any]] = []
        live: list[dict[str, Any]] = []
        reasons: list[str] = []
        for entry in status.get("reservedFor") or []:
            if entry.get("resource") != "pods" or entry.get("apiGroup") not in (None, ""):
                live.append(dict(entry))  # not a pod: kept, as the controller does
                continue
            why = _why_dead(ns, entry, index)
            if why is None:
                live.append(dict(entry))
            else:
                dead.append({**entry, "why": why})
                reasons.append(why)
        users = [key(p) for p in index.users.get((ns, name), [])]
        owner_ref = _owner_pod(claim)
        owner = None
        owner_state = None
        if owner_ref is not None:
            owner = f"{ns}/{owner_ref.get('name')}"
            pod = index.get(ns, owner_ref.get("name", ""))
            if pod is None or _meta(pod).get("uid") != owner_ref.get("uid"):
                owner_state = "gone"
            elif _pod_done(pod):
                owner_state = "done"
        held = f"allocated ({', '.join(devices)})" if allocated else "not allocated"
        base = dict(
            claim=f"{ns}/{name}",
            uid=m.get("uid", ""),
            allocated=allocated,
            owner_gone=owner_state == "gone",
        )
        if dead and not live:
            out.append(
                Leak(
                    **base,
                    kind="dead-reservation",
                    status="fail",
                    reason=f"{held} and reserved only for pods that will not run: "
                    + "; ".join(reasons),
                    devices=devices,
                    dead=dead,
                    owner=owner,
                    users=users,
                )
            )
        elif owner_state == "gone" and not live:
            out.append(
                Leak(
                    **base,
                    kind="orphaned",
                    status="fail",
                    reason=f"generated for pod {owner} (uid {owner_ref.get('uid')}) which no "
                    f"longer exists; {held}; the garbage collector should have deleted it",
                    devices=devices,
                    owner=owner,
                    users=users,
                )
            )
        elif owner_state == "done" and not live:
            out.append(
                Leak(
                    **base,
                    kind="owner-done",
                    status="warn",
                    reason=f"generated for pod {owner}, which finished; {held}; the resource "
                    "claim controller deletes such claims",
                    devices=devices,
                    owner=owner,
                    users=users,
                )
            )
        elif dead and live:
            out.append(
                Leak(
                    **base,
                    kind="stale-entries",
                    status="warn",
                    reason="reservedFor keeps entries of pods that will not run ("
                    + "; ".join(reasons)
                    + f") beside live ones ({', '.join(e.get('name', '') for e in live)})",
                    devices=devices,
                    dead=dead,
                    live=live,
                    owner=owner,
                    users=users,
                )
            )
        elif allocated and not live and not users and owner_state is None:
            out.append(
                Leak(
                    **base,
                    kind="unreserved",
                    status="warn",
                    reason=f"{held} but reserved for no pod and used by none; the devices "
                    "stay taken until a pod uses the claim or the allocation is cleared",
                    devices=devices,
                    owner=owner,
                    users=users,
                )
            )
    return out


# ------------------------------------------------------------------ garbage collection


@dataclass
class GcAction:
    """What ``claims gc`` does to one claim: ``action`` ``release`` (drop dead reservedFor
    entries, clear the allocation, remove the finalizer) or ``delete`` (a generated claim
    of a pod that is gone, after releasing it); ``skip`` with the reason otherwise."""

    claim: str
    action: str
    reason: str
    status_patch: dict[str, Any] | None = None
    remove_finalizer: bool = False
    delete: bool = False
    devices: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "action": self.action,
            "reason": self.reason,
            "remove_finalizer": self.remove_finalizer,
            "delete": self.delete,
            "devices": list(self.devices),
        }


def plan_gc(
    claims: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> list[GcAction]:
    """The updates that release leaked claims. A claim that a live pod reserves, or that a
    live pod references in ``spec.resourceClaims``/``status.resourceClaimStatuses``, is
    never touched (``skip``). ``status_patch`` is the new ``status`` to PUT on the
    ``status`` subresource (reservedFor emptied, allocation cleared)."""
    if isinstance(claims, Iterator):
        claims = list(claims)
    leaks = find_leaks(claims, PodIndex(pods))
    # a second pass over the claims keeps only the leaked ones whole
    wanted = {leak.claim for leak in leaks}
    by_key = {key(c): c for c in claims if key(c) in wanted}
    out: list[GcAction] = []
    for leak in leaks:
        claim = by_key[leak.claim]
        if leak.live or leak.users:
            who = [e.get("name", "") for e in leak.live] + leak.users
            out.append(
                GcAction(leak.claim, "skip", f"used by live pod(s) {', '.join(sorted(set(who)))}")
            )
            continue
        if leak.kind == "owner-done":
            out.append(
                GcAction(
                    leak.claim,
                    "skip",
                    "its pod finished; the resource claim controller deletes it (not a leak "
                    "gc acts on)",
                )
            )
            continue
        status = dict(claim.get("status") or {})
        status["reservedFor"] = []
        status.pop("allocation", None)
        finalizers = _meta(claim).get("finalizers") or []
        out.append(
            GcAction(
                leak.claim,
                "delete" if leak.owner_gone else "release",
                leak.reason,
                status_patch=status
                if (claim.get("status") or {}).get("reservedFor") or leak.allocated
                else None,
                remove_finalizer=FINALIZER in finalizers,
                delete=leak.owner_gone,
                devices=leak.devices,
            )
        )
    return out


# ------------------------------------------------------------------ pending claims


@dataclass
class PendingClaim:
    """A claim not allocated for longer than the threshold: ``age_s`` seconds, the pods
    waiting for it (``users``), ``status`` (``fail`` when a pod waits, else ``warn``),
    ``reason`` and ``explain`` (``explain_claim``'s result, when a pod waits)."""

    claim: str
    age_s: float
    users: list[str]
    status: str
    reason: str
    explain: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "age_s": round(self.age_s, 1),
            "users": list(self.users),
            "status": self.status,
            "reason": self.reason,
            "explain": self.explain,
        }


def find_pending(
    claims: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]] | PodIndex,
    slices: Sequence[Mapping[str, Any]],
    device_classes: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    now: float,
    threshold_s: float,
) -> list[PendingClaim]:
    """Claims without allocation created more than ``threshold_s`` seconds before ``now``
    (seconds since the epoch), each explained. ``pods`` may be a ``PodIndex``."""
    index = pods if isinstance(pods, PodIndex) else PodIndex(pods)
    out: list[PendingClaim] = []
    for claim in claims:
        if (claim.get("status") or {}).get("allocation"):
            continue
        if _meta(claim).get("deletionTimestamp"):
            continue
        created = parse_time(_meta(claim).get("creationTimestamp"))
        age = now - created if created is not None else 0.0
        if age < threshold_s:
            continue
        m = _meta(claim)
        ns, name = m.get("namespace", ""), m.get("name", "")
        users = index.users.get((ns, name), [])
        if not users:
            out.append(
                PendingClaim(
                    f"{ns}/{name}",
                    age,
                    [],
                    "warn",
                    f"not allocated for {_duration(age)}: no pod uses it (DRA allocates a claim "
                    "when the scheduler places a pod that references it)",
                )
            )
            continue
        ex = explain_claim(claim, device_classes, slices, claims, nodes, index)
        out.append(
            PendingClaim(
                f"{ns}/{name}",
                age,
                [key(p) for p in users],
                "fail",
                f"not allocated for {_duration(age)} while pod(s) "
                f"{', '.join(key(p) for p in users)} wait: {ex['summary']}",
                ex,
            )
        )
    return out


# ------------------------------------------------------------------ published devices


def iter_latest_slices(slices: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """ResourceSlices of the newest generation of each ``(driver, pool)``: the scheduler
    ignores older generations (``pool.generation``). ``slices`` is walked twice when it
    can be (a list or a ``PagedList``), so that no list of all slices is held."""
    if isinstance(slices, Iterator):
        slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        k = (spec.get("driver", ""), pool.get("name", ""))
        newest[k] = max(newest.get(k, 0), int(pool.get("generation") or 0))
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        if int(pool.get("generation") or 0) == newest.get(
            (spec.get("driver", ""), pool.get("name", "")), 0
        ):
            yield s


def latest_slices(slices: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """:func:`iter_latest_slices` as a list."""
    return list(iter_latest_slices(slices))


@dataclass(frozen=True)
class Published:
    """One published device: ``driver``, ``pool``, ``name``, ``node`` (``spec.nodeName``,
    or ``(all nodes)``/``(node selector)``) and the device object."""

    driver: str
    pool: str
    name: str
    node: str
    device: Mapping[str, Any]

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"


def iter_published_devices(slices: Iterable[Mapping[str, Any]]) -> Iterator[Published]:
    """Every device of the newest generation of every pool, one slice at a time."""
    for s in iter_latest_slices(slices):
        spec = s.get("spec") or {}
        node = spec.get("nodeName") or (
            "(all nodes)" if spec.get("allNodes") else "(node selector)"
        )
        pool = (spec.get("pool") or {}).get("name", "")
        for d in spec.get("devices") or []:
            yield Published(spec.get("driver", ""), pool, d.get("name", ""), node, d)


def published_devices(slices: Iterable[Mapping[str, Any]]) -> list[Published]:
    """Every device of the newest generation of every pool (:func:`iter_published_devices`
    as a list)."""
    return list(iter_published_devices(slices))


# ------------------------------------------------------------------ explain


def _alternatives(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The device requests a claim request may be satisfied by: ``exactly`` (v1,
    v1beta2), the fields on the request itself (v1beta1) or each ``firstAvailable``
    subrequest. Each: name, deviceClassName, selectors, allocationMode, count."""
    name = request.get("name", "")
    if isinstance(request.get("firstAvailable"), list):
        return [
            {**sub, "name": f"{name}/{sub.get('name', '')}"} for sub in request["firstAvailable"]
        ]
    body = request.get("exactly") if isinstance(request.get("exactly"), Mapping) else request
    return [{**body, "name": name}]


def _selectors(obj: Mapping[str, Any]) -> list[str]:
    return [
        str((s.get("cel") or {}).get("expression", ""))
        for s in obj.get("selectors") or []
        if isinstance(s, Mapping) and s.get("cel")
    ]


def _node_ready(node: Mapping[str, Any]) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def _attr(device: Mapping[str, Any], driver: str, qualified: str) -> Any:
    body = device.get("basic") if isinstance(device.get("basic"), Mapping) else device
    domain, _, ident = qualified.partition("/")
    for name, value in (body.get("attributes") or {}).items():
        d, sep, i = str(name).partition("/")
        d, i = (d, i) if sep else (driver, name)
        if d == domain and i == ident:
            return next(iter(value.values()), None) if isinstance(value, Mapping) else value
    return None


def _top(counter: Counter, n: int = 3) -> str:
    items = counter.most_common()
    text = "; ".join(f"{r} ({c})" for r, c in items[:n])
    if len(items) > n:
        text += f"; {len(items) - n} more reasons"
    return text


class Unjudged(str):
    """Why a selector cannot be judged offline (``cel.verdicts.CANNOT_JUDGE``)."""


class _Compiled:
    """Selectors compiled once per explanation: a Selector, the reason Kubernetes refuses
    the expression (str), or why it cannot be judged offline (Unjudged), by ``judge``
    (expression -> ``cel.verdicts.Verdict``; default: ``cel.verdicts.judge``, the newest
    environment)."""

    def __init__(self, judge: Callable[[str], Any] | None = None) -> None:
        self.cache: dict[str, vcel.Selector | str] = {}
        self.judge = judge or dra_cel.judge

    def get(self, expression: str) -> vcel.Selector | str:
        if expression not in self.cache:
            verdict = self.judge(expression)
            if verdict.verdict == dra_cel.CANNOT_JUDGE:
                self.cache[expression] = Unjudged(verdict.message)
            elif verdict.verdict != dra_cel.OK:
                self.cache[expression] = verdict.message
            else:
                try:
                    self.cache[expression] = vcel.Selector(expression)
                except vcel.CelError as err:
                    # the judge accepts it (Kubernetes' own environment may): not a
                    # compile error, but nothing cel-python can evaluate offline
                    self.cache[expression] = Unjudged(f"cannot be evaluated offline: {err}")
        return self.cache[expression]


def explain_claim(
    claim: Mapping[str, Any],
    device_classes: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]] | PodIndex = (),
    judge: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Why ``claim`` is (or would be) not allocated.

    ``judge`` gives the compile verdict (``cel.verdicts.Verdict``) on each selector: the one of
    the cluster's release (``gpufleet.lab.celcheck.judge_for``); default ``cel.verdicts.judge``,
    the newest environment. Devices are evaluated by ``cel.evaluate`` either way.

    For each request (and each ``firstAvailable`` alternative) every published device is
    checked in the scheduler's order: its DeviceClass's selectors, then the request's
    selectors, then whether another claim already has it allocated. Returns::

        {"claim": "ns/name", "summary": "...", "verdict": one of no-device, in-use,
         class-missing, cel-error, cannot-judge (a selector the Python CEL
         environment cannot judge offline), constraint, would-fit,
         "requests": [{"request", "device_class", "count", "mode", "total", "matching",
                       "free", "reasons": [[reason, devices]], "errors": [...],
                       "selectors": [{"selector", "expression", "rejects"}],
                       "nodes": [{"node", "ready", "total", "matching", "free", "fits",
                                  "reasons": [[reason, devices]]}], "summary"}],
         "constraints": [...], "pods": [{"pod", "scheduler"}]}

    ``reasons`` name the first failing ``&&`` term and the device's value, e.g.
    ``profile is 1g.18gb, wanted 1g.10gb``; ``selectors`` name each selector that rejects a
    device (``request selector #0``, ``class mig.nvidia.com selector #0``), its expression
    and how many devices it is the first to reject. A CEL runtime error (an attribute a device
    lacks) is listed in ``errors``: kube-scheduler then fails the whole claim.
    """
    m = _meta(claim)
    ckey = f"{m.get('namespace', '')}/{m.get('name', '')}"
    classes = {_meta(c).get("name"): c for c in device_classes}
    devices = published_devices(slices)
    in_use: dict[str, str] = {}
    for other in claims:
        if _meta(other).get("uid") == m.get("uid"):
            continue
        for d in allocated_devices(other):
            in_use[d] = key(other)
    node_ready = {_meta(n).get("name"): _node_ready(n) for n in nodes}
    compiled = _Compiled(judge)
    requests_out: list[dict[str, Any]] = []
    verdicts: list[str] = []
    candidates: dict[str, dict[str, list[Published]]] = {}
    spec_devices = (claim.get("spec") or {}).get("devices") or {}
    for request in spec_devices.get("requests") or []:
        for alt in _alternatives(request):
            out, free_by_node, verdict = _explain_alternative(
                alt, classes, devices, in_use, node_ready, compiled
            )
            candidates[alt["name"]] = free_by_node
            requests_out.append(out)
            verdicts.append(verdict)
    constraints_out = _explain_constraints(
        spec_devices.get("constraints") or [], requests_out, candidates
    )
    pods_out = []
    index = pods if isinstance(pods, PodIndex) else PodIndex(pods)
    for pod in index.users.get((m.get("namespace", ""), m.get("name", "")), []):
        msg = ""
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") != "True":
                msg = cond.get("message") or cond.get("reason") or ""
        pods_out.append({"pod": key(pod), "scheduler": msg})
    if not requests_out:
        verdict = "no-request"
        summary = "the claim has no device requests"
    else:
        order = [
            "class-missing",
            "cel-error",
            "cannot-judge",
            "no-device",
            "in-use",
            "constraint",
            "would-fit",
        ]
        if any(c["fits"] is False for c in constraints_out) and all(
            v == "would-fit" for v in verdicts
        ):
            verdicts = ["constraint"]
        # firstAvailable: one satisfiable alternative is enough per request
        verdict = min(verdicts, key=order.index) if "would-fit" not in verdicts else "would-fit"
        if any(c["fits"] is False for c in constraints_out):
            verdict = "constraint" if verdict == "would-fit" else verdict
        parts = [r["summary"] for r in requests_out]
        parts += [c["summary"] for c in constraints_out if c["fits"] is False]
        summary = "; ".join(parts)
    for p in pods_out:
        if p["scheduler"] and verdict == "would-fit":
            summary += f"; scheduler says for {p['pod']}: {p['scheduler']}"
    return {
        "claim": ckey,
        "summary": summary,
        "verdict": verdict,
        "requests": requests_out,
        "constraints": constraints_out,
        "pods": pods_out,
    }


def _explain_alternative(
    alt: Mapping[str, Any],
    classes: Mapping[str, Mapping[str, Any]],
    devices: Sequence[Published],
    in_use: Mapping[str, str],
    node_ready: Mapping[str, bool],
    compiled: _Compiled,
) -> tuple[dict[str, Any], dict[str, list[Published]], str]:
    class_name = alt.get("deviceClassName", "")
    mode = alt.get("allocationMode") or "ExactCount"
    count = int(alt.get("count") or 1) if mode == "ExactCount" else 0
    base = {
        "request": alt.get("name", ""),
        "device_class": class_name,
        "count": count,
        "mode": mode,
        "total": len(devices),
        "matching": 0,
        "free": 0,
        "reasons": [],
        "errors": [],
        "selectors": [],
        "nodes": [],
    }
    cls = classes.get(class_name)
    if cls is None:
        base["summary"] = (
            f"request {alt.get('name')}: DeviceClass {class_name!r} does not exist "
            f"(classes: {', '.join(sorted(classes)) or 'none'})"
        )
        return base, {}, "class-missing"
    stages = [
        (f"class {class_name} selector #{i}", e)
        for i, e in enumerate(_selectors(cls.get("spec") or {}))
    ]
    stages += [(f"request selector #{i}", e) for i, e in enumerate(_selectors(alt))]
    reasons: Counter = Counter()
    errors: Counter = Counter()
    unjudged: Counter = Counter()
    rejected: Counter = Counter()
    per_node: dict[str, dict[str, Any]] = {}
    free_by_node: dict[str, list[Published]] = {}
    for dev in devices:
        n = per_node.setdefault(
            dev.node, {"total": 0, "matching": 0, "free": 0, "reasons": Counter()}
        )
        n["total"] += 1
        why = None
        try:
            act = vcel.device_activation(dev.driver, dev.device)
        except vcel.CelError as err:
            act = None
            why = f"device not usable by CEL: {err}"
        if act is not None:
            for stage, expr in stages:
                sel = compiled.get(expr)
                if isinstance(sel, Unjudged):
                    why = f"{stage}: {sel}"
                    unjudged[why] += 1
                    break
                if isinstance(sel, str):
                    why = f"{stage} does not compile: {sel}"
                    errors[why] += 1
                    break
                res = sel.evaluate(act)
                if res.error:
                    why = f"{stage}: CEL runtime error: {res.error}"
                    errors[why] += 1
                    break
                if not res.matched:
                    rejected[stage] += 1
                    prefix = f"class {class_name}: " if stage.startswith("class") else ""
                    why = prefix + (res.reason or f"{stage} is false")
                    break
        if why is None:
            n["matching"] += 1
            base["matching"] += 1
            holder = in_use.get(dev.id)
            if holder is not None:
                why = f"allocated to claim {holder}"
            else:
                n["free"] += 1
                base["free"] += 1
                free_by_node.setdefault(dev.node, []).append(dev)
                continue
        reasons[why] += 1
        n["reasons"][why] += 1
    need = max(count, 1)
    nodes_out = []
    for node, n in sorted(per_node.items()):
        fits = (
            n["free"] >= need
            if mode == "ExactCount"
            else n["matching"] > 0 and n["free"] == n["matching"]
        )
        nodes_out.append(
            {
                "node": node,
                "ready": node_ready.get(node, node.startswith("(")),
                "total": n["total"],
                "matching": n["matching"],
                "free": n["free"],
                "fits": fits,
                "reasons": [[r, c] for r, c in n["reasons"].most_common()],
            }
        )
    base["reasons"] = [[r, c] for r, c in reasons.most_common()]
    base["errors"] = [[r, c] for r, c in errors.most_common()]
    base["selectors"] = [
        {"selector": stage, "expression": expr, "rejects": rejected[stage]}
        for stage, expr in stages
        if rejected[stage]
    ]
    base["nodes"] = nodes_out
    label = (
        f"request {alt.get('name')} ({class_name}, "
        f"{mode}{'' if mode != 'ExactCount' else f' {count}'})"
    )
    fitting = [x["node"] for x in nodes_out if x["fits"] and x["ready"]]
    if errors:
        verdict = "cel-error"
        summary = (
            f"{label}: CEL runtime error, kube-scheduler fails the whole claim: {_top(errors)}"
        )
    elif unjudged:
        verdict = "cannot-judge"
        summary = f"{label}: a selector cannot be judged offline: {_top(unjudged)}"
    elif base["matching"] == 0:
        verdict = "no-device"
        summary = (
            f"{label}: 0 of {len(devices)} devices match: "
            f"{_top(reasons) or 'no device is published'}"
        )
        if base["selectors"]:
            summary += "; rejected by " + ", ".join(
                f"{s['selector']} {s['expression']!r} ({s['rejects']})" for s in base["selectors"]
            )
    elif not fitting and base["free"] < base["matching"] and base["free"] < need:
        verdict = "in-use"
        summary = (
            f"{label}: {base['matching']} of {len(devices)} devices match but only "
            f"{base['free']} free (need {need} on one node): "
            + _top(Counter({r: c for r, c in reasons.items() if r.startswith("allocated to")}))
        )
    elif not fitting:
        verdict = "no-device"
        best = max(nodes_out, key=lambda x: x["free"])
        summary = (
            f"{label}: {base['matching']} of {len(devices)} devices match, but no Ready node "
            f"has {need} free (most: {best['free']} on {best['node']})"
        )
    else:
        verdict = "would-fit"
        summary = (
            f"{label}: {base['free']} of {len(devices)} devices match and are free; fits on "
            f"{', '.join(fitting[:5])}{' ...' if len(fitting) > 5 else ''}"
        )
    base["summary"] = summary
    return base, free_by_node, verdict


def _explain_constraints(
    constraints: Sequence[Mapping[str, Any]],
    requests_out: Sequence[Mapping[str, Any]],
    candidates: Mapping[str, Mapping[str, list[Published]]],
) -> list[dict[str, Any]]:
    """``matchAttribute`` constraints: is there a node where each constrained request has
    its count of free matching devices that all share one value of the attribute?"""
    out = []
    counts = {r["request"]: max(int(r["count"]), 1) for r in requests_out}
    for c in constraints:
        attr = c.get("matchAttribute")
        if not attr:
            out.append({"constraint": dict(c), "fits": None, "summary": "not evaluated"})
            continue
        names = c.get("requests") or list(counts)
        names = [n for n in names if n in candidates]
        nodes = set.intersection(*(set(candidates[n]) for n in names)) if names else set()
        ok_nodes = []
        seen_values: Counter = Counter()
        for node in sorted(nodes):
            values_ok = None
            per_req = []
            for n in names:
                vals = Counter(str(_attr(d.device, d.driver, attr)) for d in candidates[n][node])
                seen_values.update(vals)
                per_req.append({v for v, k in vals.items() if k >= counts[n] and v != "None"})
            values_ok = set.intersection(*per_req) if per_req else set()
            if values_ok:
                ok_nodes.append(node)
        fits = bool(ok_nodes)
        summary = (
            f"constraint matchAttribute {attr}: satisfied on {', '.join(ok_nodes[:5])}"
            if fits
            else f"constraint matchAttribute {attr} over {', '.join(names)}: no node has enough "
            f"free matching devices that share one value (values seen: "
            f"{', '.join(f'{v} ({k})' for v, k in seen_values.most_common(4)) or 'none'})"
        )
        out.append({"constraint": dict(c), "fits": fits, "summary": summary})
    return out
