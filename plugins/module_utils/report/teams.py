# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""GPU memory and devices held per namespace and per team: allocated, idle (below the
activity threshold, ``report.activity``) and leaked (allocated to a claim no live pod
uses, ``claims.leaks``), so that "which team holds idle GPUs" has a one-line answer.

The team of a claim is the value of the label ``team_label`` (default
``DEFAULT_TEAM_LABEL``) on the claim's Namespace: a ResourceClaim is used by pods of its
own namespace, and one namespace per team is the usual multi-tenant convention (labels
on the Namespace are set by whoever provisions it, not by the team's workloads). A
namespace without the label (or one that was not listed) counts as ``NO_TEAM``; the per
namespace figures name every namespace as it is.

Pure: no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_TEAM_LABEL",
    "NO_TEAM",
    "Held",
    "namespace_labels",
    "waste",
]

#: Namespace label whose value names the team by default.
DEFAULT_TEAM_LABEL = "gpufleet.io/team"
#: Team of a namespace without the team label.
NO_TEAM = "(no team)"


@dataclass
class Held:
    """Devices and GPU memory (bytes) a group holds: allocated, idle and leaked."""

    devices_allocated: int = 0
    memory_allocated: int = 0
    devices_idle: int = 0
    memory_idle: int = 0
    devices_leaked: int = 0
    memory_leaked: int = 0

    def add(self, memory: int, idle: bool, leaked: bool) -> None:
        self.devices_allocated += 1
        self.memory_allocated += memory
        if idle:
            self.devices_idle += 1
            self.memory_idle += memory
        if leaked:
            self.devices_leaked += 1
            self.memory_leaked += memory

    def to_dict(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.__dict__.items()}


def namespace_labels(namespaces: Iterable[Any]) -> dict[str, Mapping[str, str]]:
    """Namespace name -> its labels, for the Namespace objects (as the API returns them)
    that have a name; labels that are not a mapping count as none."""
    out: dict[str, Mapping[str, str]] = {}
    for ns in namespaces:
        meta = ns.get("metadata") if isinstance(ns, Mapping) else None
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            continue
        labels = meta.get("labels")
        out[meta["name"]] = labels if isinstance(labels, Mapping) else {}
    return out


def _team(labels: Mapping[str, Any] | None, team_label: str) -> str:
    value = (labels or {}).get(team_label)
    return str(value) if isinstance(value, str) and value else NO_TEAM


def _order(row: Mapping[str, Any], name: str) -> tuple[int, int, int, str]:
    """Most idle memory first, then most leaked, then most allocated, then by name."""
    return (-row["memory_idle"], -row["memory_leaked"], -row["memory_allocated"], row[name])


def waste(
    allocated: Iterable[tuple[str, str, int]],
    idle: Iterable[str] | None,
    leaked: Iterable[str],
    labels: Mapping[str, Mapping[str, Any]] | None,
    team_label: str = DEFAULT_TEAM_LABEL,
) -> dict[str, Any]:
    """Per team and per namespace the devices and memory allocated, idle and leaked.

    ``allocated`` holds ``(device id, claim as namespace/name, memory bytes)`` of each
    allocated device; ``idle`` the ids of the idle devices (None: activity not measured,
    ``idle_measured`` False and the idle figures 0); ``leaked`` the claims (namespace/name)
    that are leaked; ``labels`` namespace -> labels (``namespace_labels``; None: the
    namespaces were not listed, ``namespaces_listed`` False, every team ``NO_TEAM``).
    ``teams`` rows carry ``team``, the ``Held`` figures and ``namespaces``; ``namespaces``
    rows ``namespace``, ``team`` and the figures; both sorted by idle, then leaked, then
    allocated memory, most first."""
    idle_ids = set(idle or ())
    leaked_claims = set(leaked)
    by_ns: dict[str, Held] = defaultdict(Held)
    for device, claim, memory in allocated:
        namespace = claim.partition("/")[0] if "/" in claim else ""
        by_ns[namespace].add(int(memory), device in idle_ids, claim in leaked_claims)
    by_team: dict[str, Held] = defaultdict(Held)
    members: dict[str, list[str]] = defaultdict(list)
    ns_rows = []
    for namespace, held in by_ns.items():
        team = _team((labels or {}).get(namespace), team_label)
        members[team].append(namespace)
        total = by_team[team]
        for key, value in held.to_dict().items():
            setattr(total, key, getattr(total, key) + value)
        ns_rows.append({"namespace": namespace, "team": team, **held.to_dict()})
    team_rows = [
        {"team": team, **held.to_dict(), "namespaces": sorted(members[team])}
        for team, held in by_team.items()
    ]
    return {
        "label": team_label,
        "namespaces_listed": labels is not None,
        "idle_measured": idle is not None,
        "teams": sorted(team_rows, key=lambda r: _order(r, "team")),
        "namespaces": sorted(ns_rows, key=lambda r: _order(r, "namespace")),
    }
