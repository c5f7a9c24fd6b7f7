# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Placement-aware MIG planning, mig-parted config validation and the GI diff.

Standard library only (Ansible ships ``module_utils`` to managed hosts).

* ``load_mig_config`` reads NVIDIA mig-parted's config format (``api/spec/v1/spec.go``)::

      version: v1
      mig-configs:
        <name>:
          - devices: all            # or [0, 1]
            mig-enabled: true
            mig-devices: {"1g.18gb": 7}
            device-filter: "0x233510DE"   # optional, str or list (PCI device ID)

* ``select_layout`` picks the wanted profile counts per GPU index for one config name.
* ``plan`` places every wanted GPU instance on a ``GpuModel`` under its placement rules
  (``nvidia-smi mig -lgipp``: allowed starts and size in memory slices), the per-profile
  instance limit (``-lgip`` ``Total``) and the media-extension budget (see below), or
  raises ``LayoutDoesNotFit`` saying what cannot be placed, which slices collide with
  which placed instances, and what would fit instead. The search is exhaustive (largest
  profiles first, memoised dead ends, identical instances in increasing start order), so
  it finds a plan whenever one exists.
* ``diff`` compares the GPU instances a GPU has (``nvidia-smi mig -lgi``) with a plan:
  which to keep (same profile and placement), destroy and create.
* ``check_config`` validates a whole config against one GPU model.

Media-extension budget: ``+me`` profiles hold the GPU's optical-flow accelerator (OFA).
The OFA count of the instances on one GPU may not exceed the full-GPU profile's (e.g.
``7g.141gb``: 1); this allows one ``+me`` instance per GPU across all ``+me`` profiles
(A30 has two: ``1g.6gb+me`` and ``2g.12gb+me``). Source: the ``OFA`` column of
``nvidia-smi mig -lgip`` (only ``+me`` and full-GPU profiles have one) and the NVIDIA MIG
user guide, "Supported MIG Profiles" (every ``+me`` profile has one instance at most).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils import input_guard as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig_profiles import (
    GIProfile,
    GpuModel,
    UnknownProfile,
    normalize_profile_name,
)

__all__ = [
    "Collision",
    "GpuInstance",
    "LayoutDoesNotFit",
    "MigConfig",
    "MigConfigEntry",
    "MigConfigError",
    "MigDiff",
    "Placement",
    "Plan",
    "Problem",
    "check_config",
    "diff",
    "load_mig_config",
    "parse_layout",
    "plan",
    "select_entries",
    "select_layout",
]

# Engines that the +me profiles take; their sum is bounded by the full-GPU profile. Every
# MIG GPU here has one OFA, held by the full-GPU profile or by one +me instance.
_BUDGET_ENGINES = ("ofa_engines",)
MAX_COUNT = 64  # the largest count of one profile in a layout (a GPU holds 7 instances at most)


# --- results ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """One planned GPU instance: profile, GI profile ID, placement ``start:size`` (slices)."""

    profile: str
    profile_id: int
    start: int
    size: int

    @property
    def slots(self) -> range:
        return range(self.start, self.start + self.size)

    def __str__(self) -> str:
        return f"{self.profile} at {self.start}:{self.size}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "profile_id": self.profile_id,
            "start": self.start,
            "size": self.size,
        }


@dataclass(frozen=True)
class Plan:
    """Placements for every wanted instance on one GPU, sorted by start slice."""

    gpu_model: str
    total_slices: int
    placements: tuple[Placement, ...]

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.placements:
            out[p.profile] = out.get(p.profile, 0) + 1
        return out

    @property
    def used_slots(self) -> tuple[int, ...]:
        return tuple(sorted(s for p in self.placements for s in p.slots))

    @property
    def free_slots(self) -> tuple[int, ...]:
        used = set(self.used_slots)
        return tuple(s for s in range(self.total_slices) if s not in used)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_model": self.gpu_model,
            "total_slices": self.total_slices,
            "placements": [p.to_dict() for p in self.placements],
            "free_slices": list(self.free_slots),
        }


@dataclass(frozen=True)
class Collision:
    """An allowed start of a profile that could not be used, and what occupies it."""

    profile: str
    start: int
    slots: tuple[int, ...]
    occupied_by: tuple[Placement, ...]

    def describe(self) -> str:
        span = _span(self.slots)
        if self.occupied_by:
            who = ", ".join(str(p) for p in self.occupied_by)
            return f"start {self.start} (slices {span}) is taken by {who}"
        return f"start {self.start} (slices {span}) is free, but another limit applies"

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "start": self.start,
            "slots": list(self.slots),
            "occupied_by": [p.to_dict() for p in self.occupied_by],
        }


class LayoutDoesNotFit(ValueError):
    """A wanted layout that no placement satisfies on the GPU model.

    Fields: ``gpu_model``; ``wanted`` (profile -> count); ``unplaceable`` (profile -> how
    many instances could not be placed in the best partial plan); ``placed`` (that partial
    ``Plan``); ``collisions`` (per unplaceable profile, each allowed start and the placed
    instances occupying it); ``over_max_instances`` (profile -> (asked, max));
    ``over_engine_budget`` (engine -> (asked, available)); ``slices_requested`` and
    ``slices_available``; ``max_counts`` (per unplaceable profile, the most instances that
    fit with the others unchanged); ``suggestion`` (a nearby layout that fits, or None).
    """

    def __init__(
        self,
        *,
        gpu_model: str,
        wanted: dict[str, int],
        unplaceable: dict[str, int],
        placed: Plan,
        collisions: tuple[Collision, ...],
        over_max_instances: dict[str, tuple[int, int]],
        over_engine_budget: dict[str, tuple[int, int]],
        slices_requested: int,
        slices_available: int,
        max_counts: dict[str, int],
        suggestion: dict[str, int] | None,
    ) -> None:
        self.gpu_model = gpu_model
        self.wanted = wanted
        self.unplaceable = unplaceable
        self.placed = placed
        self.collisions = collisions
        self.over_max_instances = over_max_instances
        self.over_engine_budget = over_engine_budget
        self.slices_requested = slices_requested
        self.slices_available = slices_available
        self.max_counts = max_counts
        self.suggestion = suggestion
        super().__init__(self.reason)

    @property
    def reason(self) -> str:
        parts = [f"MIG layout {_layout_str(self.wanted)} does not fit on {self.gpu_model}"]
        for name, (asked, most) in self.over_max_instances.items():
            plural = "s" if most != 1 else ""
            parts.append(f"{name} allows at most {most} instance{plural} per GPU (asked {asked})")
        for _engine, (asked, most) in self.over_engine_budget.items():
            parts.append(
                f"the layout needs {asked} optical-flow engine(s) (OFA) but the GPU has {most}: "
                "one +me instance per GPU, and none beside the full-GPU profile"
            )
        for name, missing in self.unplaceable.items():
            asked = self.wanted.get(name, 0)
            mine = [c for c in self.collisions if c.profile == name]
            groups: dict[tuple[Placement, ...], list[Collision]] = {}
            for c in mine:
                if c.occupied_by:
                    groups.setdefault(c.occupied_by, []).append(c)
            taken = []
            for occ, cs in groups.items():
                starts = ", ".join(str(c.start) for c in cs)
                slots = sorted({s for c in cs for s in c.slots})
                who = ", ".join(str(p) for p in occ)
                label = "start" if len(cs) == 1 else "starts"
                taken.append(f"{label} {starts} (slices {_span(slots)}) taken by {who}")
            free = [c.start for c in mine if not c.occupied_by]
            where = taken[:]
            if free:
                limit = (
                    "the instance limit"
                    if name in self.over_max_instances
                    else "the OFA budget (one +me instance per GPU)"
                    if self.over_engine_budget
                    else "the placement of the other instances"
                )
                where.append(f"free start(s) {free} are refused by {limit}")
            parts.append(f"{missing} of {asked} x {name} cannot be placed: " + "; ".join(where))
        if self.slices_requested > self.slices_available:
            parts.append(
                f"the layout asks for {self.slices_requested} memory slices, the GPU has "
                f"{self.slices_available}"
            )
        else:
            parts.append(
                f"slices asked {self.slices_requested} of {self.slices_available} "
                "(placement rules, not the total, refuse it)"
            )
        fixes = []
        for name, most in self.max_counts.items():
            fixes.append(f"at most {most} x {name} with the rest unchanged")
        if self.suggestion:
            fixes.append(f"this nearby layout fits: {_layout_str(self.suggestion)}")
        text = "; ".join(parts)
        if fixes:
            text += ". Fix: " + "; or ".join(fixes)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_model": self.gpu_model,
            "wanted": dict(self.wanted),
            "reason": self.reason,
            "unplaceable": dict(self.unplaceable),
            "placed": self.placed.to_dict(),
            "collisions": [c.to_dict() for c in self.collisions],
            "over_max_instances": {k: list(v) for k, v in self.over_max_instances.items()},
            "over_engine_budget": {k: list(v) for k, v in self.over_engine_budget.items()},
            "slices_requested": self.slices_requested,
            "slices_available": self.slices_available,
            "max_counts": dict(self.max_counts),
            "suggestion": dict(self.suggestion) if self.suggestion else None,
        }


def _span(slots: Sequence[int]) -> str:
    return f"{slots[0]}-{slots[-1]}" if len(slots) > 1 else f"{slots[0]}"


def _layout_str(layout: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in layout.items()) + "}"


# --- layout input -----------------------------------------------------------------------


def parse_layout(data: Any, *, name: str = "layout") -> dict[str, int]:
    """Check a wanted layout ``{profile: count}`` (a mapping, or its JSON text).

    Returns a new dict with normalised profile names (``MIG 1g.18gb`` -> ``1g.18gb``) and
    the counts of repeated names added. Raises ``ValueError`` naming ``name``, the value
    and the fix for a non-object, a non-string key or a count that is not an integer >= 0.
    """
    if isinstance(data, str):
        try:
            data = ig.load_json(data, f"{name} {data[:60]!r}", '{"1g.18gb": 7}')
        except ig.InputError as exc:
            raise ValueError(str(exc)) from None
    if not isinstance(data, Mapping):
        raise ValueError(
            f"{name} must be an object of MIG profile -> count, got {data!r}; "
            'write e.g. {"1g.18gb": 7}'
        )
    out: dict[str, int] = {}
    for key, count in data.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"{name} has key {key!r}; keys are MIG profile names such as 1g.18gb")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_COUNT:
            raise ValueError(
                f"{name}[{key!r}] is {str(count)[:40]}; the count must be an integer >= 0 and "
                f'at most {MAX_COUNT} (no GPU holds more MIG instances), e.g. {{"{key}": 1}}'
            )
        norm = normalize_profile_name(key)
        out[norm] = out.get(norm, 0) + count
    return out


# --- planning ---------------------------------------------------------------------------


def _budgets(model: GpuModel) -> dict[str, int]:
    full = [p for p in model.profiles if p.slices == model.total_slices]
    if not full:
        return {}
    return {e: max(getattr(p, e) for p in full) for e in _BUDGET_ENGINES}


def _usage(profiles: Iterable[GIProfile]) -> tuple[int, ...]:
    totals = [0] * len(_BUDGET_ENGINES)
    for p in profiles:
        for i, e in enumerate(_BUDGET_ENGINES):
            totals[i] += getattr(p, e)
    return tuple(totals)


def _order_key(p: GIProfile) -> tuple:
    return (-p.slices, -p.compute_slices, len(p.placements), p.name)


def _bits(p: GIProfile, start: int) -> int:
    return ((1 << p.slices) - 1) << start


def _resolve(model: GpuModel, wanted: Mapping[str, int]) -> list[tuple[GIProfile, int]]:
    out = []
    for name, count in wanted.items():
        if count:
            out.append((model.profile(name), count))
    return out


def _expand(pairs: Iterable[tuple[GIProfile, int]]) -> list[GIProfile]:
    items: list[GIProfile] = []
    for p, n in pairs:
        items.extend([p] * n)
    items.sort(key=_order_key)
    return items


def _solve(
    model: GpuModel,
    items: list[GIProfile],
    fixed_mask: int = 0,
    fixed_usage: tuple[int, ...] | None = None,
) -> list[int] | None:
    """Starts for ``items`` (sorted by ``_order_key``) or None: exhaustive DFS."""
    total = model.total_slices
    budget = _budgets(model)
    limits = tuple(budget.get(e, 1 << 30) for e in _BUDGET_ENGINES)
    usage0 = fixed_usage or (0,) * len(_BUDGET_ENGINES)
    n = len(items)
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + items[i].slices
    full = (1 << total) - 1
    starts: list[int] = [0] * n
    dead: set[tuple] = set()

    def rec(i: int, mask: int, usage: tuple[int, ...], lo: int) -> bool:
        if i == n:
            return True
        if suffix[i] > total - bin(mask & full).count("1"):
            return False
        key = (i, mask, usage, lo)
        if key in dead:
            return False
        p = items[i]
        pu = _usage([p])
        nu = tuple(a + b for a, b in zip(usage, pu, strict=True))
        if any(a > b for a, b in zip(nu, limits, strict=True)):
            dead.add(key)
            return False
        same_next = i + 1 < n and items[i + 1] is p
        for s in p.placements:
            if s < lo or s + p.slices > total:
                continue
            b = _bits(p, s)
            if mask & b:
                continue
            starts[i] = s
            if rec(i + 1, mask | b, nu, s + 1 if same_next else 0):
                return True
        dead.add(key)
        return False

    return list(starts) if rec(0, fixed_mask, usage0, 0) else None


def _best_partial(model: GpuModel, items: list[GIProfile]) -> list[tuple[GIProfile, int]]:
    """The largest subset of ``items`` that fits (most slices, then most instances)."""
    total = model.total_slices
    budget = _budgets(model)
    limits = tuple(budget.get(e, 1 << 30) for e in _BUDGET_ENGINES)
    n = len(items)
    memo: dict[tuple, tuple[tuple[int, int], tuple[tuple[int, int], ...]]] = {}

    def rec(i: int, mask: int, usage: tuple[int, ...], lo: int, used: tuple) -> tuple:
        if i == n:
            return (0, 0), ()
        key = (i, mask, usage, lo, used)
        if key in memo:
            return memo[key]
        p = items[i]
        same_next = i + 1 < n and items[i + 1] is p
        # skip this instance (and keep the increasing-start rule for the rest of its kind)
        best = rec(i + 1, mask, usage, lo if same_next else 0, used)
        placed_of_kind = dict(used).get(p.name, 0)
        if placed_of_kind < p.max_instances:
            nu = tuple(a + b for a, b in zip(usage, _usage([p]), strict=True))
            if all(a <= b for a, b in zip(nu, limits, strict=True)):
                nused = tuple(sorted({**dict(used), p.name: placed_of_kind + 1}.items()))
                for s in p.placements:
                    if s < lo or s + p.slices > total or mask & _bits(p, s):
                        continue
                    (sl, cnt), rest = rec(
                        i + 1, mask | _bits(p, s), nu, s + 1 if same_next else 0, nused
                    )
                    cand = ((sl + p.slices, cnt + 1), ((i, s), *rest))
                    if cand[0] > best[0]:
                        best = cand
        memo[key] = best
        return best

    _score, chosen = rec(0, 0, (0,) * len(_BUDGET_ENGINES), 0, ())
    return [(items[i], s) for i, s in chosen]


def _fits(model: GpuModel, wanted: Mapping[str, int]) -> bool:
    pairs = _resolve(model, wanted)
    if any(n > p.max_instances for p, n in pairs):
        return False
    return _solve(model, _expand(pairs)) is not None


def _to_plan(model: GpuModel, chosen: Iterable[tuple[GIProfile, int]]) -> Plan:
    placements = sorted(
        (Placement(p.name, p.profile_id, s, p.slices) for p, s in chosen),
        key=lambda x: (x.start, x.size),
    )
    return Plan(model.name, model.total_slices, tuple(placements))


def plan(
    model: GpuModel,
    wanted: Mapping[str, int],
    current: Iterable[Any] | None = None,
) -> Plan:
    """Place every wanted GPU instance on ``model``.

    ``wanted`` maps profile names (or IDs) to counts. ``current`` (optional) lists the GPU
    instances the GPU has (``GpuInstance``, or dicts as ``diff`` accepts): placements that
    keep as many of them as possible are preferred, so that ``diff`` destroys the least.
    Returns a ``Plan`` (placements sorted by start). Raises ``UnknownProfile`` for a
    profile the model lacks, ``ValueError`` for a bad count, ``LayoutDoesNotFit`` when no
    placement exists.
    """
    wanted = parse_layout(dict(wanted), name="wanted")
    pairs = _resolve(model, wanted)
    over = {p.name: (n, p.max_instances) for p, n in pairs if n > p.max_instances}
    if not over:  # expanded only when every count is at most its profile's maximum
        items = _expand(pairs)
        existing = [_instance(c) for c in (current or [])]
        kept_plan = _plan_keeping(model, pairs, existing) if existing else None
        if kept_plan is not None:
            return kept_plan
        starts = _solve(model, items)
        if starts is not None:
            return _to_plan(model, zip(items, starts, strict=True))
    raise _explain(model, wanted, pairs, over)


def _plan_keeping(
    model: GpuModel, pairs: list[tuple[GIProfile, int]], existing: list[GpuInstance]
) -> Plan | None:
    by_id = {p.profile_id: p for p, _ in pairs}
    want = {p.profile_id: n for p, n in pairs}
    cands = [
        (by_id[e.profile_id], e.start)
        for e in existing
        if e.profile_id in by_id
        and e.start in by_id[e.profile_id].placements
        and e.size == by_id[e.profile_id].slices
    ]
    if len(cands) > 12:  # keep the search small; fall back to a fresh plan
        return None
    for k in range(len(cands), 0, -1):
        for subset in itertools.combinations(cands, k):
            mask = 0
            ok = True
            kept: dict[int, int] = {}
            for p, s in subset:
                b = _bits(p, s)
                if mask & b:
                    ok = False
                    break
                mask |= b
                kept[p.profile_id] = kept.get(p.profile_id, 0) + 1
            if not ok or any(kept[i] > want[i] for i in kept):
                continue
            rest = _expand((p, n - kept.get(p.profile_id, 0)) for p, n in pairs)
            starts = _solve(model, rest, mask, _usage(p for p, _ in subset))
            if starts is not None:
                return _to_plan(model, [*subset, *zip(rest, starts, strict=True)])
    return None


def _explain(
    model: GpuModel,
    wanted: dict[str, int],
    pairs: list[tuple[GIProfile, int]],
    over: dict[str, tuple[int, int]],
) -> LayoutDoesNotFit:
    # Search for the best partial plan with counts capped at what could ever be placed.
    capped = [(p, min(n, len(p.placements), model.total_slices // p.slices)) for p, n in pairs]
    partial = _best_partial(model, _expand(capped))
    placed = _to_plan(model, partial)
    placed_counts = placed.counts
    unplaceable = {
        p.name: n - placed_counts.get(p.name, 0)
        for p, n in pairs
        if n > placed_counts.get(p.name, 0)
    }
    collisions = []
    for p, _n in pairs:
        if p.name not in unplaceable:
            continue
        for s in p.placements:
            slots = tuple(p.slots(s))
            occ = tuple(q for q in placed.placements if set(q.slots) & set(slots))
            collisions.append(Collision(p.name, s, slots, occ))
    budget = _budgets(model)
    asked_usage = dict(
        zip(_BUDGET_ENGINES, _usage(p for p, n in pairs for _ in range(n)), strict=True)
    )
    over_engine = {e: (asked_usage[e], budget[e]) for e in budget if asked_usage[e] > budget[e]}
    requested = sum(p.slices * n for p, n in pairs)
    max_counts: dict[str, int] = {}
    for name in unplaceable:
        for k in range(wanted[name] - 1, -1, -1):
            trial = {**wanted, name: k}
            if _fits(model, trial):
                max_counts[name] = k
                break
    suggestion = _suggest(model, placed_counts, pairs, unplaceable)
    return LayoutDoesNotFit(
        gpu_model=model.name,
        wanted={k: v for k, v in wanted.items() if v},
        unplaceable=unplaceable,
        placed=placed,
        collisions=tuple(collisions),
        over_max_instances=over,
        over_engine_budget=over_engine,
        slices_requested=requested,
        slices_available=model.total_slices,
        max_counts=max_counts,
        suggestion=suggestion,
    )


def _suggest(
    model: GpuModel,
    placed_counts: dict[str, int],
    pairs: list[tuple[GIProfile, int]],
    unplaceable: dict[str, int],
) -> dict[str, int] | None:
    """Start from what was placed; for each dropped instance add the biggest profile that
    is no bigger than it (compute slices, then memory) and still fits."""
    layout = dict(placed_counts)
    by_name = {p.name: p for p, _ in pairs}
    for name, missing in unplaceable.items():
        dropped = by_name[name]
        options = sorted(
            (
                q
                for q in model.profiles
                if q.compute_slices <= dropped.compute_slices
                and q.memory_mib <= dropped.memory_mib
                and (not q.media_extensions or dropped.media_extensions)
            ),
            key=lambda q: (-q.compute_slices, -q.memory_mib, q.media_extensions),
        )
        for _ in range(missing):
            for q in options:
                trial = {**layout, q.name: layout.get(q.name, 0) + 1}
                if _fits(model, trial):
                    layout = trial
                    break
    layout = {k: v for k, v in layout.items() if v}
    return layout or None


# --- current instances and the diff -----------------------------------------------------


@dataclass(frozen=True)
class GpuInstance:
    """A GPU instance that exists on a GPU (``nvidia-smi mig -lgi``, NVML GI info)."""

    profile: str
    profile_id: int
    start: int
    size: int
    instance_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "profile_id": self.profile_id,
            "start": self.start,
            "size": self.size,
            "instance_id": self.instance_id,
        }


def _instance(item: Any) -> GpuInstance:
    """Accept a ``GpuInstance``, a ``parse_lgi`` dict or a GPU-simulator state GI dict."""
    if isinstance(item, GpuInstance):
        return item
    if isinstance(item, Placement):
        return GpuInstance(item.profile, item.profile_id, item.start, item.size)
    if isinstance(item, Mapping):
        try:
            start = item["start"] if "start" in item else item["placement_start"]
            size = item["size"] if "size" in item else item["placement_size"]
            iid = item.get("instance_id", item.get("id"))
            return GpuInstance(
                normalize_profile_name(str(item["profile"])),
                int(item["profile_id"]),
                int(start),
                int(size),
                None if iid is None else int(iid),
            )
        except KeyError as exc:
            raise ValueError(
                f"GPU instance {dict(item)!r} lacks {exc.args[0]!r}; give profile, "
                "profile_id, start (or placement_start) and size (or placement_size)"
            ) from None
    raise ValueError(f"GPU instance {item!r} is not a mapping or GpuInstance")


@dataclass(frozen=True)
class MigDiff:
    """What to do to go from the current GPU instances to a plan.

    Order to apply: destroy (compute instances first, then the GI), then create
    (largest first, at the planned start).
    """

    keep: tuple[GpuInstance, ...]
    destroy: tuple[GpuInstance, ...]
    create: tuple[Placement, ...]

    @property
    def changed(self) -> bool:
        return bool(self.destroy or self.create)

    def to_dict(self) -> dict[str, Any]:
        return {
            "changed": self.changed,
            "keep": [g.to_dict() for g in self.keep],
            "destroy": [g.to_dict() for g in self.destroy],
            "create": [p.to_dict() for p in self.create],
        }


def diff(current_instances: Iterable[Any], target: Plan) -> MigDiff:
    """Compare existing GPU instances with ``target``.

    A GI is kept when a planned instance has the same GI profile ID and placement
    (start and size); every other GI is destroyed and every unmatched placement created.
    ``create`` is ordered largest first, then by start.
    """
    current = [_instance(c) for c in current_instances]
    remaining = list(target.placements)
    keep: list[GpuInstance] = []
    destroy: list[GpuInstance] = []
    for gi in current:
        match = next(
            (
                p
                for p in remaining
                if p.profile_id == gi.profile_id and p.start == gi.start and p.size == gi.size
            ),
            None,
        )
        if match is None:
            destroy.append(gi)
        else:
            keep.append(gi)
            remaining.remove(match)
    create = sorted(remaining, key=lambda p: (-p.size, p.start))
    return MigDiff(tuple(keep), tuple(destroy), tuple(create))


# --- mig-parted config ------------------------------------------------------------------


class MigConfigError(ValueError):
    """A mig-parted config that does not follow the v1 format.

    ``key`` is the path of the offending key (``mig-configs.balanced[0].devices``),
    ``value`` the value found, ``fix`` what to write instead.
    """

    def __init__(self, key: str, value: Any, problem: str, fix: str) -> None:
        self.key = key
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"{key}: {problem} (found {value!r}); {fix}")


_TOP_KEYS = ("version", "mig-configs")
_ENTRY_KEYS = ("device-filter", "devices", "mig-enabled", "mig-devices")
# mig-parted accepts GI profiles with +me, -me, +gfx, +me.all suffixes and the
# compute-instance form "1c.3g.20gb" (api/spec/v1, pkg/types/mig_profile.go).
_MIG_DEVICE_RE = re.compile(r"^(?:\d+c\.)?\d+g\.\d+gb(?:\+me|-me|\+gfx|\+me\.all)?$")
_CI_FORM_RE = re.compile(r"^(\d+)c\.(\d+g\.\d+gb.*)$")
_DEVICE_ID_RE = re.compile(r"^0x[0-9A-Fa-f]{8}$")


@dataclass(frozen=True)
class MigConfigEntry:
    """One entry of a mig-parted config: which GPUs, MIG mode, profile counts."""

    devices: str | tuple[int, ...]
    mig_enabled: bool
    mig_devices: dict[str, int] = field(default_factory=dict)
    device_filter: tuple[str, ...] = ()

    def matches(self, gpu_index: int, device_id: str | None = None) -> bool:
        """Does this entry apply to GPU ``gpu_index`` with PCI ``device_id``?

        Raises ``MigConfigError`` when the entry filters on device IDs and ``device_id``
        is unknown.
        """
        if self.devices != "all" and gpu_index not in self.devices:
            return False
        if not self.device_filter:
            return True
        if device_id is None:
            raise MigConfigError(
                "device-filter",
                list(self.device_filter),
                "this entry applies only to some PCI device IDs and the GPU's is unknown",
                "give the GPU model (its PCI device ID, e.g. 0x233510DE for NVIDIA H200)",
            )
        return device_id.lower() in {d.lower() for d in self.device_filter}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "devices": self.devices if self.devices == "all" else list(self.devices),
            "mig-enabled": self.mig_enabled,
        }
        if self.mig_devices or self.mig_enabled:
            out["mig-devices"] = dict(self.mig_devices)
        if self.device_filter:
            out["device-filter"] = list(self.device_filter)
        return out


@dataclass(frozen=True)
class MigConfig:
    """A validated mig-parted config: ``version`` and ``configs`` (name -> entries)."""

    version: str
    configs: dict[str, tuple[MigConfigEntry, ...]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.configs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "mig-configs": {n: [e.to_dict() for e in es] for n, es in self.configs.items()},
        }


def _suggest_key(key: str, allowed: Sequence[str]) -> str:
    norm = str(key).replace("_", "-").lower()
    for a in allowed:
        if norm == a or norm.replace("-", "") == a.replace("-", ""):
            return f"write {a!r} instead"
    return "remove it; allowed keys: " + ", ".join(allowed)


def load_mig_config(data: Any) -> MigConfig:
    """Validate a mig-parted config (a mapping, or YAML/JSON text) and return ``MigConfig``.

    Rules (NVIDIA mig-parted ``api/spec/v1/spec.go``): top-level keys ``version`` (only
    ``v1``) and ``mig-configs`` (a non-empty mapping of name -> non-empty list of
    entries); entry keys ``devices`` (``all`` or a list of distinct GPU indices >= 0,
    required), ``mig-enabled`` (bool, required), ``mig-devices`` (profile -> count >= 0;
    empty or absent with ``mig-enabled: false``), ``device-filter`` (a PCI device ID such
    as ``0x233510DE`` or a list of them). Within one config no two entries may apply to the
    same GPU index unless their device filters are disjoint. Raises ``MigConfigError``
    naming the key, the value and the fix.
    """
    if isinstance(data, (str, bytes)):
        data = _load_text(data)
    if not isinstance(data, Mapping):
        raise MigConfigError(
            "(top level)",
            data,
            "a mig-parted config is a mapping",
            "write 'version: v1' and 'mig-configs:' at the top level",
        )
    for key in data:
        if key not in _TOP_KEYS:
            raise MigConfigError(str(key), data[key], "unknown key", _suggest_key(key, _TOP_KEYS))
    version = data.get("version")
    if version != "v1":
        raise MigConfigError(
            "version", version, "only version v1 of the format exists", "write 'version: v1'"
        )
    configs = data.get("mig-configs")
    if not isinstance(configs, Mapping) or not configs:
        raise MigConfigError(
            "mig-configs",
            configs,
            "must be a non-empty mapping of config name -> list of entries",
            "write e.g. 'mig-configs: {all-1g.18gb: [{devices: all, mig-enabled: true, "
            "mig-devices: {1g.18gb: 7}}]}'",
        )
    out: dict[str, tuple[MigConfigEntry, ...]] = {}
    for name, entries in configs.items():
        where = f"mig-configs.{name}"
        if not isinstance(name, str) or not name.strip():
            raise MigConfigError(where, name, "config names are non-empty strings", "rename it")
        if not isinstance(entries, list) or not entries:
            raise MigConfigError(
                where,
                entries,
                "must be a non-empty list of entries",
                "write a list: '- {devices: all, mig-enabled: false}'",
            )
        parsed = tuple(_entry(f"{where}[{i}]", e) for i, e in enumerate(entries))
        _check_overlap(where, parsed)
        out[name] = parsed
    return MigConfig(version="v1", configs=out)


def _load_text(text: str | bytes) -> Any:
    what = "the mig-parted config"
    try:
        text = ig.decode_text(text, what) if isinstance(text, bytes) else text
        try:
            return ig.load_json(text, what)
        except ig.ShapeError:
            raise
        except ig.InputError:
            return ig.load_yaml(text, what)  # YAML, or the reason it is neither
    except ig.InputError as exc:
        raise MigConfigError("(top level)", str(text)[:40], str(exc), "fix the file") from None


def _entry(where: str, raw: Any) -> MigConfigEntry:
    if not isinstance(raw, Mapping):
        raise MigConfigError(
            where,
            raw,
            "an entry is a mapping",
            "write '{devices: all, mig-enabled: true, mig-devices: {...}}'",
        )
    for key in raw:
        if key not in _ENTRY_KEYS:
            raise MigConfigError(
                f"{where}.{key}", raw[key], "unknown key", _suggest_key(key, _ENTRY_KEYS)
            )
    if "devices" not in raw:
        raise MigConfigError(
            f"{where}.devices",
            None,
            "required key missing",
            "write 'devices: all' or 'devices: [0, 1]'",
        )
    devices_raw = raw["devices"]
    devices: str | tuple[int, ...]
    if devices_raw == "all":
        devices = "all"
    elif isinstance(devices_raw, list) and devices_raw:
        bad = [d for d in devices_raw if isinstance(d, bool) or not isinstance(d, int) or d < 0]
        if bad:
            raise MigConfigError(
                f"{where}.devices",
                devices_raw,
                f"GPU indices are integers >= 0, {bad[0]!r} is not",
                "write e.g. 'devices: [0, 1]' (nvidia-smi GPU indices) or 'devices: all'",
            )
        dups = sorted({d for d in devices_raw if devices_raw.count(d) > 1})
        if dups:
            raise MigConfigError(
                f"{where}.devices",
                devices_raw,
                f"GPU index {dups[0]} is listed twice",
                "list it once",
            )
        devices = tuple(devices_raw)
    else:
        raise MigConfigError(
            f"{where}.devices",
            devices_raw,
            "must be 'all' or a non-empty list of GPU indices",
            "write 'devices: all' or 'devices: [0, 1]'",
        )
    if "mig-enabled" not in raw:
        raise MigConfigError(
            f"{where}.mig-enabled",
            None,
            "required key missing",
            "write 'mig-enabled: true' or false",
        )
    enabled = raw["mig-enabled"]
    if not isinstance(enabled, bool):
        raise MigConfigError(
            f"{where}.mig-enabled",
            enabled,
            "must be a boolean",
            "write 'mig-enabled: true' or false",
        )
    mig_devices_raw = raw.get("mig-devices", {})
    if mig_devices_raw is None:
        mig_devices_raw = {}
    if not isinstance(mig_devices_raw, Mapping):
        raise MigConfigError(
            f"{where}.mig-devices",
            mig_devices_raw,
            "must be a mapping of MIG profile -> count",
            "write e.g. 'mig-devices: {\"1g.18gb\": 7}'",
        )
    mig_devices: dict[str, int] = {}
    for prof, count in mig_devices_raw.items():
        key = f"{where}.mig-devices.{prof}"
        if not isinstance(prof, str) or not _MIG_DEVICE_RE.match(prof.strip()):
            raise MigConfigError(
                key,
                prof,
                "not a MIG profile name",
                "write a profile as nvidia-smi mig -lgip prints it without 'MIG ', e.g. "
                "1g.18gb, 1g.18gb+me, 3g.71gb",
            )
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_COUNT:
            raise MigConfigError(
                key,
                count,
                f"the count must be an integer >= 0 and at most {MAX_COUNT}",
                f"write '{prof}: 1'",
            )
        mig_devices[prof.strip()] = count
    if not enabled and any(mig_devices.values()):
        raise MigConfigError(
            f"{where}.mig-devices",
            mig_devices,
            "MIG devices cannot exist with mig-enabled: false",
            "set mig-enabled: true or remove mig-devices",
        )
    filt_raw = raw.get("device-filter")
    filt: tuple[str, ...] = ()
    if filt_raw is not None:
        items = [filt_raw] if isinstance(filt_raw, str) else filt_raw
        if not isinstance(items, list) or not items:
            raise MigConfigError(
                f"{where}.device-filter",
                filt_raw,
                "must be a PCI device ID or a non-empty list of them",
                "write e.g. 'device-filter: \"0x233510DE\"'",
            )
        for d in items:
            if not isinstance(d, str) or not _DEVICE_ID_RE.match(d):
                raise MigConfigError(
                    f"{where}.device-filter",
                    d,
                    "not a PCI device ID (device and vendor, 8 hex digits)",
                    "write it as nvidia-smi -q prints 'Device Id', e.g. 0x233510DE",
                )
        filt = tuple(items)
    return MigConfigEntry(devices, enabled, mig_devices, filt)


def _check_overlap(where: str, entries: tuple[MigConfigEntry, ...]) -> None:
    for (i, a), (j, b) in itertools.combinations(enumerate(entries), 2):
        if a.devices == "all" or b.devices == "all":
            shared = a.devices if b.devices == "all" else b.devices
            shared_desc = "all GPUs" if shared == "all" else f"GPU(s) {list(shared)}"
        else:
            common = sorted(set(a.devices) & set(b.devices))
            if not common:
                continue
            shared_desc = f"GPU(s) {common}"
        fa = {d.lower() for d in a.device_filter}
        fb = {d.lower() for d in b.device_filter}
        if fa and fb and not (fa & fb):
            continue
        raise MigConfigError(
            f"{where}[{j}].devices",
            b.devices if b.devices == "all" else list(b.devices),
            f"entries {i} and {j} both apply to {shared_desc}",
            "give each GPU index to one entry, or give the entries disjoint device-filter lists",
        )


def select_entries(
    config: MigConfig,
    name: str,
    gpu_indices: Iterable[int],
    device_ids: Mapping[int, str] | str | None = None,
) -> dict[int, MigConfigEntry]:
    """The entry of config ``name`` that applies to each GPU index (GPUs no entry matches
    are absent: mig-parted leaves them alone).

    ``device_ids`` is one PCI device ID for all GPUs or a mapping index -> ID; it is needed
    only when an entry has a ``device-filter``. Raises ``MigConfigError`` for an unknown
    config name (listing the names), for a listed GPU index the node does not have, and
    for a device filter without device IDs.
    """
    if name not in config.configs:
        raise MigConfigError(
            "config name",
            name,
            "no such config in mig-configs",
            "choose one of: " + ", ".join(config.names),
        )
    indices = list(gpu_indices)
    present = set(indices)
    out: dict[int, MigConfigEntry] = {}
    for i, entry in enumerate(config.configs[name]):
        if entry.devices != "all":
            missing = [d for d in entry.devices if d not in present]
            if missing:
                raise MigConfigError(
                    f"mig-configs.{name}[{i}].devices",
                    list(entry.devices),
                    f"GPU index {missing[0]} does not exist on this node (GPUs: {sorted(present)})",
                    "list only the indices nvidia-smi -L shows, or use 'devices: all'",
                )
        for gpu in indices:
            did = device_ids.get(gpu) if isinstance(device_ids, Mapping) else device_ids
            if gpu not in out and entry.matches(gpu, did):
                out[gpu] = entry
    return out


def select_layout(
    config: MigConfig,
    name: str,
    gpu_indices: Iterable[int],
    device_ids: Mapping[int, str] | str | None = None,
) -> dict[int, dict[str, int]]:
    """Wanted ``{profile: count}`` per GPU index for config ``name``.

    A GPU whose entry has ``mig-enabled: false`` maps to ``{}`` (use ``select_entries``
    to tell that from MIG on without instances). Errors as ``select_entries``.
    """
    return {
        gpu: {k: v for k, v in e.mig_devices.items() if v}
        for gpu, e in select_entries(config, name, gpu_indices, device_ids).items()
    }


@dataclass(frozen=True)
class Problem:
    """One finding of ``check_config``: ``severity`` is ``error`` or ``warning``."""

    config: str
    entry: int | None
    key: str
    severity: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "entry": self.entry,
            "key": self.key,
            "severity": self.severity,
            "message": self.message,
        }


def check_config(config: MigConfig, model: GpuModel) -> list[Problem]:
    """Check every config of ``config`` against ``model``; return the problems found.

    Entries whose ``device-filter`` excludes the model's PCI device IDs are skipped (they
    target other GPUs); a config with no entry for the model is a warning. Errors: a
    profile the model lacks, a compute-instance profile (``1c.3g.20gb``; the planner
    places GPU instances), a layout that does not fit (with the planner's reason).
    Warning: ``mig-enabled: true`` with no MIG devices (MIG mode on with zero instances
    leaves the GPU unusable for whole-GPU and static-MIG consumers alike).
    """
    problems: list[Problem] = []
    ids = {d.lower() for d in model.pci_device_ids}
    for name, entries in config.configs.items():
        applied = 0
        for i, entry in enumerate(entries):
            if entry.device_filter and ids and not ({d.lower() for d in entry.device_filter} & ids):
                continue
            if entry.device_filter and not ids:
                problems.append(
                    Problem(
                        name,
                        i,
                        f"mig-configs.{name}[{i}].device-filter",
                        "warning",
                        f"{model.name} has no known PCI device ID; cannot tell whether this "
                        "entry applies",
                    )
                )
                continue
            applied += 1
            if not entry.mig_enabled:
                continue
            wanted = {k: v for k, v in entry.mig_devices.items() if v}
            if not wanted:
                problems.append(
                    Problem(
                        name,
                        i,
                        f"mig-configs.{name}[{i}].mig-devices",
                        "warning",
                        "MIG mode on with no MIG devices: nothing can use the GPU until "
                        "instances are created; list the profiles to create",
                    )
                )
                continue
            bad = False
            for prof in wanted:
                key = f"mig-configs.{name}[{i}].mig-devices.{prof}"
                ci = _CI_FORM_RE.match(prof)
                if ci:
                    problems.append(
                        Problem(
                            name,
                            i,
                            key,
                            "error",
                            f"{prof} is a compute-instance profile; gpufleet plans GPU "
                            f"instances: use the GPU-instance profile {ci.group(2)}",
                        )
                    )
                    bad = True
                    continue
                try:
                    model.profile(prof)
                except UnknownProfile as exc:
                    problems.append(Problem(name, i, key, "error", str(exc)))
                    bad = True
            if bad:
                continue
            try:
                plan(model, wanted)
            except LayoutDoesNotFit as exc:
                problems.append(
                    Problem(name, i, f"mig-configs.{name}[{i}].mig-devices", "error", exc.reason)
                )
        if applied == 0:
            problems.append(
                Problem(
                    name,
                    None,
                    f"mig-configs.{name}",
                    "warning",
                    f"no entry applies to {model.name} (device-filter excludes "
                    f"{', '.join(model.pci_device_ids) or 'its unknown device ID'})",
                )
            )
    return problems
