# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""ResourceClaims that stay pending: not allocated for longer than a threshold, each
explained by ``claims.explain.explain_claim`` when a pod waits for it.

Pure functions over listed objects (JSON dicts as the API returns them); no I/O.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.counters import (
    CounterSet,
    counter_sets,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.explain import (
    allocations_fold,
    explain_claim,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.pods import (
    PodIndex,
    key,
    metadata,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk


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


#: Claims not allocated that ``find_pending`` keeps from the walk that reads the claims'
#: allocations (``_Unallocated``); with more, it walks the claims again rather than hold
#: them all.
MAX_KEPT_UNALLOCATED = 1000


def _unallocated(claim: Mapping[str, Any]) -> bool:
    """A claim ``find_pending`` judges: not allocated and not being deleted."""
    if (claim.get("status") or {}).get("allocation"):
        return False
    return not metadata(claim).get("deletionTimestamp")


class _Unallocated:
    """The fold (``kube.client.PagedList.derive``) of the claims not allocated and not
    being deleted, in their order; None when there are more than ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.claims: list[Mapping[str, Any]] | None = []

    def add(self, claim: Mapping[str, Any]) -> None:
        if self.claims is None or not _unallocated(claim):
            return
        if len(self.claims) >= self.limit:
            self.claims = None
            return
        self.claims.append(claim)

    def result(self) -> list[Mapping[str, Any]] | None:
        return self.claims


def unallocated_fold(limit: int | None = None) -> tuple[str, Callable[[], _Unallocated]]:
    """The key and the fold of the claims not allocated and not being deleted (those
    ``find_pending`` and the report's pending claims judge), for a reader that walks the
    claims for more: at most ``limit`` kept (``MAX_KEPT_UNALLOCATED`` when not given),
    its value None past it (then read them from the claims)."""
    kept = MAX_KEPT_UNALLOCATED if limit is None else limit
    return f"claims not allocated (at most {kept})", lambda: _Unallocated(kept)


def find_pending(
    claims: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]] | PodIndex,
    slices: Sequence[Mapping[str, Any]],
    device_classes: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    now: float,
    threshold_s: float,
    sets: Mapping[str, CounterSet] | None = None,
) -> list[PendingClaim]:
    """Claims without allocation created more than ``threshold_s`` seconds before ``now``
    (seconds since the epoch), each explained. ``pods`` may be a ``PodIndex``; ``sets``:
    ``counter_sets(slices, claims)`` when the caller has it (read here when a claim needs
    it)."""
    index = pods if isinstance(pods, PodIndex) else PodIndex(pods)
    if isinstance(slices, Iterator):  # read more than once: for the counters, the devices
        slices = list(slices)
    # the claims explained are not allocated: one accounting serves them all
    shared: dict[str, Any] = {}  # and one reading of the devices (explain_claim's shared)
    judged: Iterable[Mapping[str, Any]] = claims
    if isinstance(claims, vk.PagedList):
        # one walk of the stored claims for the claims judged here and the allocations
        # their explanations read (read whether or not a claim needs them: where one does,
        # a walk of their own would cost more than reading them here)
        folds = dict([allocations_fold(), unallocated_fold()])
        unallocated = vk.folded(claims, folds)[1]
        judged = claims if unallocated is None else unallocated
    out: list[PendingClaim] = []
    for claim in judged:
        if not _unallocated(claim):
            continue
        created = parse_time(metadata(claim).get("creationTimestamp"))
        age = now - created if created is not None else 0.0
        if age < threshold_s:
            continue
        m = metadata(claim)
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
        if sets is None:
            sets = counter_sets(slices, claims)
        ex = explain_claim(
            claim, device_classes, slices, claims, nodes, index, counter_sets=sets, shared=shared
        )
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
