# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Placement-aware MIG planning: a layout placed on a GPU model, and a whole mig-parted
config checked against one.

Standard library only (Ansible ships ``module_utils`` to managed hosts).

* ``parse_layout`` reads a layout (MIG profile -> count).
* ``plan`` places every wanted GPU instance on a ``GpuModel`` under its placement rules
  (``nvidia-smi mig -lgipp``: allowed starts and size in memory slices), the per-profile
  instance limit (``-lgip`` ``Total``) and the engine budgets (see below), or raises
  ``LayoutDoesNotFit`` saying what cannot be placed, which slices collide with which
  placed instances, and what would fit instead. The search goes left to right over the
  memory slices, a state being (slice, instances left per profile), largest profiles
  first, with memoised dead ends: it finds a plan whenever one exists, within
  ``MAX_SEARCH_STATES`` states per call whatever the GPU's geometry (``PlanTooLarge``
  past them; no built-in table comes near).
* ``check_config`` validates a whole config against one GPU model.
* ``check_dra_driver`` refuses MIG profiles that NVIDIA's DRA driver cannot serve, on
  nodes that run it (the rule is ``mig.profiles.dra_driver_refusal``).

The mig-parted config format lives in ``mig_config`` (``load_mig_config``,
``select_layout``), the placement records and the GI diff in ``mig.placement``
(``Placement``, ``Plan``, ``LayoutDoesNotFit``, ``GpuInstance``, ``diff``).

Engine budgets: for each engine the NVIDIA MIG user guide lists per profile (copy
engines, NVDEC, NVENC, JPEG, OFA; ``nvidia-smi mig -lgip`` columns CE, DEC, ENC, JPEG,
OFA), the instances on one GPU may not hold more than the full-GPU profile does, which
holds all of the GPU's. The OFA budget (the media-extension budget: one OFA on every MIG
GPU) allows one ``+me`` instance per GPU across all ``+me`` profiles (A30 has two:
``1g.6gb+me`` and ``2g.12gb+me``); the NVDEC/NVENC/JPEG budgets keep ``1g.24gb+me.all``
(all four of each on an RTX PRO 6000 Blackwell) from sharing the GPU with any instance
that has one (``1g.24gb``), not with the engineless ``1g.24gb-me``. Source: the guide,
"Supported MIG Profiles", and the captures of ``mig.tables``.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.config import (
    MAX_COUNT,
    MigConfig,
    MigConfigError,
    load_mig_config,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.placement import (
    Collision,
    GpuInstance,
    LayoutDoesNotFit,
    Placement,
    Plan,
    as_gpu_instance,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.profiles import (
    GIProfile,
    GpuModel,
    UnknownProfile,
    dra_driver_refusal,
    normalize_profile_name,
    parse_profile,
)

# MigConfig, MigConfigError, load_mig_config (mig_config) and LayoutDoesNotFit
# (mig_placement) are named here too: preflight reads them from here.

__all__ = [
    "DraDriverCannotServe",
    "LayoutDoesNotFit",
    "MigConfig",
    "MigConfigError",
    "PlanTooLarge",
    "Problem",
    "check_config",
    "check_dra_driver",
    "load_mig_config",
    "parse_layout",
    "plan",
]


# --- layout input -----------------------------------------------------------------------


def parse_layout(
    data: Any, *, name: str = "layout", max_count: int | None = MAX_COUNT
) -> dict[str, int]:
    """Check a wanted layout ``{profile: count}`` (a mapping, or its JSON text).

    Returns a new dict with normalised profile names (``MIG 1g.18gb`` -> ``1g.18gb``) and
    the counts of repeated names added. Raises ``ValueError`` naming ``name``, the value
    and the fix for a non-object, a non-string key or a count that is not an integer >= 0
    (and at most ``max_count``; ``None``: no upper bound, as ``plan`` takes them: it
    refuses a count above the profile's instance limit from the count alone).
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
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(
                f"{name}[{key!r}] is {str(count)[:40]}; the count must be an integer >= 0, "
                f'e.g. {{"{key}": 1}}'
            )
        if max_count is not None and count > max_count:
            raise ValueError(
                f"{name}[{key!r}] is {str(count)[:40]}; the count must be an integer >= 0 and "
                f'at most {max_count} (no GPU holds more MIG instances), e.g. {{"{key}": 1}}'
            )
        norm = normalize_profile_name(key)
        out[norm] = out.get(norm, 0) + count
    return out


class DraDriverCannotServe(ValueError):
    """A MIG profile that NVIDIA's DRA driver cannot serve, on a node that runs it.

    ``profile`` is the profile as given, ``reason`` and ``fix`` the text of
    ``mig.profiles.dra_driver_refusal``; the message names ``name`` (the variable).
    """

    def __init__(self, name: str, profile: str, reason: str, fix: str) -> None:
        self.name = name
        self.profile = profile
        self.reason = reason
        self.fix = fix
        super().__init__(f"{name}[{profile!r}]: {reason}; fix: {fix}")


def check_dra_driver(profiles: Iterable[str], *, name: str = "layout") -> None:
    """Raise ``DraDriverCannotServe`` for the first of ``profiles`` (layout keys, zero
    counts included) that NVIDIA's DRA driver cannot serve (``1c.3g.71gb``); ask it only
    for nodes that run the DRA driver."""
    for profile in profiles:
        refusal = dra_driver_refusal(profile)
        if refusal is not None:
            raise DraDriverCannotServe(name, profile, *refusal)


# Engines budgeted per GPU: the sum over the GPU instances of one GPU may not exceed the
# full-GPU profile's count (NVIDIA MIG user guide, "Supported MIG Profiles": copy engines,
# NVDEC, NVENC, JPEG and OFA per profile; the full-GPU profile holds all of the GPU's).
_BUDGET_ENGINES = ("copy_engines", "decoders", "encoders", "jpeg_engines", "ofa_engines")

#: Search states that one ``plan`` call (its explanation included) may visit before it
#: gives up (``PlanTooLarge``, or an explanation without its fixes): the worst layout of
#: any built-in table needs 166 (H200, 1g.18gb x5 + 1g.18gb+me + 1g.35gb + 2g.35gb,
#: refused); a hand-made capture of 64 memory slices and dozens of kinds can need far more.
MAX_SEARCH_STATES = 20_000

_BUDGET: contextvars.ContextVar[list[int]] = contextvars.ContextVar("mig_search_budget")


class _SearchLimit(Exception):
    """The search budget of the current ``plan`` call is spent."""


class PlanTooLarge(LayoutDoesNotFit):
    """A layout whose placement search would visit more than ``MAX_SEARCH_STATES`` states:
    refused as not shown to fit (cause ``search-limit``). Only a GPU geometry far beyond
    any NVIDIA GPU's (a hand-made or corrupted ``-lgip``/``-lgipp`` capture) gets here."""

    def __init__(self, model: GpuModel, wanted: Mapping[str, int], requested: int) -> None:
        super().__init__(
            gpu_model=model.name,
            wanted={k: v for k, v in wanted.items() if v},
            unplaceable={k: v for k, v in wanted.items() if v},
            placed=Plan(model.name, model.total_slices, ()),
            collisions=(),
            over_max_instances={},
            over_engine_budget={},
            slices_requested=requested,
            slices_available=model.total_slices,
            max_counts={},
            suggestion=None,
        )

    @property
    def causes(self) -> tuple[str, ...]:
        return ("search-limit",)

    @property
    def reason(self) -> str:
        return (
            f"MIG layout {self.wanted} on {self.gpu_model} ({self.slices_available} memory "
            f"slices) was not shown to fit within {MAX_SEARCH_STATES} placement search "
            "states; no NVIDIA GPU's geometry needs that many. Fix: plan from the unedited "
            "output of 'nvidia-smi mig -lgip' and '-lgipp' of the node, or ask for fewer "
            "kinds of MIG profile"
        )


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
    """(profile, count) for the non-zero counts, in the order given; every name is looked
    up, a zero count's too (a profile the GPU lacks is refused
    whatever its count: ``UnknownProfile``)."""
    out = []
    for name, count in wanted.items():
        prof = model.profile(name)
        if count:
            out.append((prof, count))
    return out


def _over_counts(
    model: GpuModel, pairs: list[tuple[GIProfile, int]]
) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]], int]:
    """What the counts alone refuse, without expanding them into instances.

    Returns (profile -> (asked, max instances) for counts above ``-lgip``'s ``Total``;
    engine -> (asked, available) over the GPU's engine budget; memory slices asked).
    Time and memory grow with the number of profiles, not with the counts.
    """
    over = {p.name: (n, p.max_instances) for p, n in pairs if n > p.max_instances}
    budget = _budgets(model)
    asked = {e: sum(getattr(p, e) * n for p, n in pairs) for e in _BUDGET_ENGINES}
    over_engine = {e: (asked[e], budget[e]) for e in budget if asked[e] > budget[e]}
    return over, over_engine, sum(p.slices * n for p, n in pairs)


class _Search:
    """Left-to-right placement over the memory slices of one GPU.

    A state is (slice position, instances still to place per kind): at each free slice
    an instance of some kind starts there (largest kinds first) or the slice stays
    empty. Instances are contiguous runs, so no bitmask of the past is needed and the
    number of states is at most (total slices + 1) x the product of (count + 1) over the
    kinds; ``MAX_SEARCH_STATES`` bounds the states of one ``plan`` call for any input."""

    def __init__(self, total: int, kinds: list[GIProfile], fixed_mask: int = 0) -> None:
        self.total = total
        self.kinds = kinds
        free = [0] * (total + 1)
        for pos in range(total - 1, -1, -1):
            free[pos] = free[pos + 1] + (0 if (fixed_mask >> pos) & 1 else 1)
        self.free_from = free
        # kinds that may start at each slice (largest first), their run free of fixed_mask
        self.starting: list[list[tuple[int, int]]] = [[] for _round in range(total)]
        for k, p in enumerate(kinds):
            for pos in sorted(set(p.placements)):
                end = pos + p.slices
                if pos >= 0 and end <= total and not fixed_mask & (((1 << p.slices) - 1) << pos):
                    self.starting[pos].append((k, end))
        self.budget = _BUDGET.get([MAX_SEARCH_STATES])

    def _visit(self) -> None:
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise _SearchLimit

    def fill(self, counts: tuple[int, ...]) -> list[tuple[int, int]] | None:
        """(kind index, start) for every instance of ``counts``, or None: exhaustive."""
        dead: set[tuple[int, tuple[int, ...]]] = set()
        path: list[tuple[int, int]] = []
        sizes = [p.slices for p in self.kinds]

        def rec(pos: int, rem: tuple[int, ...], left: int) -> bool:
            if left == 0:
                return True
            if left > self.free_from[pos] or (pos, rem) in dead:
                return False
            self._visit()
            for k, end in self.starting[pos]:
                if not rem[k]:
                    continue
                path.append((k, pos))
                nrem = (*rem[:k], rem[k] - 1, *rem[k + 1 :])
                if rec(end, nrem, left - sizes[k]):
                    return True
                path.pop()
            if rec(pos + 1, rem, left):
                return True
            dead.add((pos, rem))
            return False

        need = sum(c * s for c, s in zip(counts, sizes, strict=True))
        return list(path) if rec(0, tuple(counts), need) else None

    def best(self, counts: tuple[int, ...], limits: tuple[int, ...]) -> list[tuple[int, int]]:
        """The placements of the largest subset of ``counts`` that fits within the engine
        ``limits`` (most memory slices, then most instances)."""
        memo: dict[tuple[int, tuple[int, ...]], tuple[tuple[int, int], tuple]] = {}
        usage = [_usage([p]) for p in self.kinds]

        def rec(pos: int, rem: tuple[int, ...], used: tuple[int, ...]) -> tuple:
            if pos >= self.total or not any(rem):
                return (0, 0), ()
            key = (pos, rem)  # ``used`` follows from ``rem``
            if key in memo:
                return memo[key]
            self._visit()
            best = rec(pos + 1, rem, used)
            for k, end in self.starting[pos]:
                if not rem[k]:
                    continue
                nused = tuple(a + b for a, b in zip(used, usage[k], strict=True))
                if any(a > b for a, b in zip(nused, limits, strict=True)):
                    continue
                nrem = (*rem[:k], rem[k] - 1, *rem[k + 1 :])
                (sl, cnt), rest = rec(end, nrem, nused)
                cand = ((sl + self.kinds[k].slices, cnt + 1), ((k, pos), *rest))
                if cand[0] > best[0]:
                    best = cand
            memo[key] = best
            return best

        return list(rec(0, tuple(counts), (0,) * len(limits))[1])


def _solve(
    model: GpuModel, pairs: list[tuple[GIProfile, int]], fixed_mask: int = 0
) -> list[tuple[GIProfile, int]] | None:
    """(profile, start) for every instance of ``pairs`` or None (no placement exists).
    Counts and engines are checked by the caller (``_over_counts``): placing every
    instance uses the same engines wherever they go."""
    pairs = sorted(pairs, key=lambda pc: _order_key(pc[0]))
    kinds = [p for p, _unused in pairs]
    found = _Search(model.total_slices, kinds, fixed_mask).fill(tuple(n for _unused, n in pairs))
    return None if found is None else [(kinds[k], s) for k, s in found]


def _best_partial(
    model: GpuModel, pairs: list[tuple[GIProfile, int]]
) -> list[tuple[GIProfile, int]]:
    """The largest subset of ``pairs`` that fits (most slices, then most instances)."""
    budget = _budgets(model)
    limits = tuple(budget.get(e, 1 << 30) for e in _BUDGET_ENGINES)
    pairs = sorted(pairs, key=lambda pc: _order_key(pc[0]))
    kinds = [p for p, _unused in pairs]
    chosen = _Search(model.total_slices, kinds).best(tuple(n for _unused, n in pairs), limits)
    return [(kinds[k], s) for k, s in chosen]


def _fits(model: GpuModel, wanted: Mapping[str, int]) -> bool:
    pairs = _resolve(model, wanted)
    over, over_engine, requested = _over_counts(model, pairs)
    if over or over_engine or requested > model.total_slices:
        return False
    return _solve(model, pairs) is not None


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
    profile the model lacks (also with count 0), ``ValueError`` for a count that is not an
    integer >= 0, ``LayoutDoesNotFit`` when no placement exists (``PlanTooLarge``, one of
    them, when the search would visit more than ``MAX_SEARCH_STATES`` states). A count
    above the profile's instance limit, an engine budget overrun (copy engines, NVDEC,
    NVENC, JPEG, OFA) or more memory slices than the GPU has are refused from the counts;
    the placement search is bounded by ``MAX_SEARCH_STATES`` whatever the capture.
    """
    wanted = parse_layout(dict(wanted), name="wanted", max_count=None)
    pairs = _resolve(model, wanted)
    over, over_engine, requested = _over_counts(model, pairs)
    budget = [MAX_SEARCH_STATES]
    token = _BUDGET.set(budget)
    try:
        # Searched only when the counts alone do not refuse the layout.
        if not over and not over_engine and requested <= model.total_slices:
            existing = [as_gpu_instance(c) for c in (current or [])]
            try:
                kept_plan = _plan_keeping(model, pairs, existing) if existing else None
            except _SearchLimit:  # keeping instances is a preference: plan afresh
                kept_plan = None
            if kept_plan is not None:
                return kept_plan
            budget[0] = MAX_SEARCH_STATES
            chosen = _solve(model, pairs)
            if chosen is not None:
                return _to_plan(model, chosen)
        raise _explain(model, wanted, pairs, (over, over_engine, requested))
    except _SearchLimit:
        raise PlanTooLarge(model, wanted, requested) from None
    finally:
        _BUDGET.reset(token)


def _plan_keeping(
    model: GpuModel, pairs: list[tuple[GIProfile, int]], existing: list[GpuInstance]
) -> Plan | None:
    by_id = {p.profile_id: p for p, _unused in pairs}
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
            rest = [(p, n - kept.get(p.profile_id, 0)) for p, n in pairs]
            chosen = _solve(model, [(p, n) for p, n in rest if n], mask)
            if chosen is not None:
                return _to_plan(model, [*subset, *chosen])
    return None


def _explain(
    model: GpuModel,
    wanted: dict[str, int],
    pairs: list[tuple[GIProfile, int]],
    refused: tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]], int],
) -> LayoutDoesNotFit:
    over, over_engine, requested = refused
    # Search for the best partial plan with counts capped at what could ever be placed.
    capped = [
        (p, min(n, p.max_instances, len(p.placements), model.total_slices // p.slices))
        for p, n in pairs
    ]
    try:
        partial = _best_partial(model, [(p, n) for p, n in capped if n])
    except _SearchLimit:  # the explanation is spent: name what the counts say
        partial = []
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
    max_counts: dict[str, int] = {}
    suggestion = None
    try:
        for p, n in pairs:
            if p.name not in unplaceable:
                continue
            for k in range(min(n - 1, p.max_instances), -1, -1):
                trial = {q.name: (k if q is p else m) for q, m in pairs}
                if _fits(model, trial):
                    max_counts[p.name] = k
                    break
        suggestion = _suggest(model, placed_counts, pairs, unplaceable)
    except _SearchLimit:  # the fixes offered so far stand; the search budget is spent
        pass
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
    by_name = {p.name: p for p, _unused in pairs}
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
        for _round in range(min(missing, model.total_slices)):
            for q in options:
                trial = {**layout, q.name: layout.get(q.name, 0) + 1}
                if _fits(model, trial):
                    layout = trial
                    break
    layout = {k: v for k, v in layout.items() if v}
    return layout or None


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


def check_config(config: MigConfig, model: GpuModel, *, dra_driver: bool = False) -> list[Problem]:
    """Check every config of ``config`` against ``model``; return the problems found.

    ``dra_driver``: the GPUs' node runs NVIDIA's DRA driver; a compute-instance profile
    it cannot serve (``check_dra_driver``) is then refused with that reason.

    Entries whose ``device-filter`` excludes the model's PCI device IDs are skipped (they
    target other GPUs); a config with no entry for the model is a warning. Errors: a
    profile the model lacks (whatever its count, 0 included), a compute-instance profile
    (``1c.3g.20gb``; the planner places GPU instances), a layout that does not fit (with
    the planner's reason).
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
            bad = False
            for prof in entry.mig_devices:  # a count of 0 names a profile too
                key = f"mig-configs.{name}[{i}].mig-devices.{prof}"
                parsed = parse_profile(prof)
                refusal = dra_driver_refusal(prof) if dra_driver else None
                if refusal is not None:
                    problems.append(
                        Problem(name, i, key, "error", f"{refusal[0]}. Fix: {refusal[1]}")
                    )
                    bad = True
                    continue
                if parsed is not None and parsed.ci_slices is not None:
                    problems.append(
                        Problem(
                            name,
                            i,
                            key,
                            "error",
                            f"{prof} is a compute-instance profile; gpufleet plans GPU "
                            f"instances: use the GPU-instance profile {parsed.gi_profile}",
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
