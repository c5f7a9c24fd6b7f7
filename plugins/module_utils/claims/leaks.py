# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""ResourceClaims that leaked: they hold (or are kept for) devices no live pod uses.

Pure functions over listed objects (JSON dicts as the API returns them: ResourceClaims,
Pods); no I/O.

Leaks mirror what kube-controller-manager's resource claim controller cleans up
(``pkg/controller/resourceclaim/controller.go`` ``syncClaim``, v1.37.2): a
``status.reservedFor`` entry for a pod that no longer exists, was replaced (another UID)
or is done (phase Succeeded/Failed) is dropped; when none is left, an allocation made by
the scheduler (finalizer ``resource.kubernetes.io/delete-protection``) is cleared and the
finalizer removed; a claim generated for a pod (controller ownerReference ``v1/Pod``)
whose pod is gone or done is deleted. A claim still listed that way holds devices no pod
uses: the controller is not running, is failing, or something else keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.pods import (
    PodIndex,
    key,
    metadata,
    pod_done,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.slices import (
    allocated_devices,
)

#: Finalizer the scheduler sets when it allocates (``resourceapi.Finalizer``).
FINALIZER = "resource.kubernetes.io/delete-protection"
#: Annotation of claims generated from a pod's ResourceClaimTemplate.
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"


def _owner_pod(claim: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in metadata(claim).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
            return ref
    return None


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
    if metadata(pod).get("uid") != uid:
        return f"pod {ns}/{name} was replaced (reserved uid {uid}, now {metadata(pod).get('uid')})"
    phase = (pod.get("status") or {}).get("phase")
    if pod_done(pod):
        return f"pod {ns}/{name} is done (phase {phase})"
    return None


def _reservations(
    ns: str, status: Mapping[str, Any], index: PodIndex
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """A claim's ``status.reservedFor`` split into dead pod entries (each with ``why``),
    live entries (pods that run, and entries that are no pod: kept, as the controller
    does) and the reasons the dead ones are dead."""
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
    return dead, live, reasons


def _owner_state(
    ns: str, owner_ref: Mapping[str, Any] | None, index: PodIndex
) -> tuple[str | None, str | None]:
    """``(owner, state)`` of a generated claim: ``namespace/pod`` of the controlling pod
    and ``gone`` (no pod of that name and UID), ``done`` or None (it runs); ``(None,
    None)`` for a claim no pod controls."""
    if owner_ref is None:
        return None, None
    owner = f"{ns}/{owner_ref.get('name')}"
    pod = index.get(ns, owner_ref.get("name", ""))
    if pod is None or metadata(pod).get("uid") != owner_ref.get("uid"):
        return owner, "gone"
    if pod_done(pod):
        return owner, "done"
    return owner, None


def _leak_of(claim: Mapping[str, Any], index: PodIndex) -> Leak | None:
    """The leak of one claim (kinds as ``Leak`` names them, judged in that order), or
    None when the claim is in use or waits for a pod."""
    m = metadata(claim)
    ns, name = m.get("namespace", ""), m.get("name", "")
    status = claim.get("status") or {}
    allocated = bool(status.get("allocation"))
    devices = allocated_devices(claim)
    dead, live, reasons = _reservations(ns, status, index)
    users = [key(p) for p in index.users.get((ns, name), [])]
    owner_ref = _owner_pod(claim)
    owner, owner_state = _owner_state(ns, owner_ref, index)
    held = f"allocated ({', '.join(devices)})" if allocated else "not allocated"
    base = dict(
        claim=f"{ns}/{name}",
        uid=m.get("uid", ""),
        allocated=allocated,
        owner_gone=owner_state == "gone",
        devices=devices,
        owner=owner,
        users=users,
    )
    if dead and not live:
        return Leak(
            **base,
            kind="dead-reservation",
            status="fail",
            reason=f"{held} and reserved only for pods that will not run: " + "; ".join(reasons),
            dead=dead,
        )
    if owner_state == "gone" and not live:
        return Leak(
            **base,
            kind="orphaned",
            status="fail",
            reason=f"generated for pod {owner} (uid {owner_ref.get('uid')}) which no "
            f"longer exists; {held}; the garbage collector should have deleted it",
        )
    if owner_state == "done" and not live:
        return Leak(
            **base,
            kind="owner-done",
            status="warn",
            reason=f"generated for pod {owner}, which finished; {held}; the resource "
            "claim controller deletes such claims",
        )
    if dead and live:
        return Leak(
            **base,
            kind="stale-entries",
            status="warn",
            reason="reservedFor keeps entries of pods that will not run ("
            + "; ".join(reasons)
            + f") beside live ones ({', '.join(e.get('name', '') for e in live)})",
            dead=dead,
            live=live,
        )
    if allocated and not live and not users and owner_state is None:
        return Leak(
            **base,
            kind="unreserved",
            status="warn",
            reason=f"{held} but reserved for no pod and used by none; the devices "
            "stay taken until a pod uses the claim or the allocation is cleared",
        )
    return None


class _Leaks:
    """The fold (``kube.client.PagedList.derive``) of :func:`find_leaks` against one
    ``PodIndex``."""

    def __init__(self, index: PodIndex) -> None:
        self.index = index
        self.leaks: list[Leak] = []

    def add(self, claim: Mapping[str, Any]) -> None:
        leak = _leak_of(claim, self.index)
        if leak is not None:
            self.leaks.append(leak)

    def result(self) -> list[Leak]:
        return self.leaks


def leaks_fold(index: PodIndex) -> tuple[str, Callable[[], _Leaks]]:
    """The key and the fold of the claims that leaked, judged against ``index`` (the pods
    listed with the claims), for a reader that walks the claims for more (the report, in
    the walk that reads the allocations): its value is that of :func:`find_leaks`."""
    return "claim-leaks", lambda: _Leaks(index)


def find_leaks(
    claims: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] | PodIndex
) -> list[Leak]:
    """Every claim of ``claims`` that leaked, judged against ``pods`` (all pods of the
    namespaces the claims live in, listed after the claims)."""
    index = pods if isinstance(pods, PodIndex) else PodIndex(pods)
    return [leak for claim in claims if (leak := _leak_of(claim, index)) is not None]
