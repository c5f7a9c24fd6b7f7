# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The updates that release leaked ResourceClaims (``claims gc``).

``plan_gc`` turns the leaks of ``claims.leaks.find_leaks`` into the updates
kube-controller-manager's resource claim controller would make, never for a claim that a
live pod reserves or references. Pure: the caller writes the updates.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.leaks import (
    FINALIZER,
    find_leaks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.pods import (
    PodIndex,
    key,
    metadata,
)


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
        finalizers = metadata(claim).get("finalizers") or []
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
