# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What to move on GPUs with shared counters (NVIDIA's dynamic MIG): which allocated claims
keep a larger MIG profile from fitting, the fewest claims to move for a wanted profile,
and per node the GPU that is cheapest to drain.

Pure functions over the CounterSets of ``claims.counters.counter_sets`` (ResourceSlices
and ResourceClaims as the API returns them); no I/O, no placement table: every fact comes
from what the driver publishes.

- A *placement* is one published device of a CounterSet that has a ``profile`` attribute
  (NVIDIA's ``gpu-<minor>-mig-<profile>-<GI profile ID>-<start>``): the memory slices it
  consumes (``memory-slice-<i>``) are its place on the GPU, its start the lowest of them.
  The whole GPU (``gpu-<minor>``, no ``profile``) is not a placement.
- A profile's *size* is (memory slices, multiprocessors) its devices consume: ``1g.18gb``
  (1, 16) < ``2g.35gb`` (2, 32) < ``4g.71gb`` (4, 64) on an H200.
- A placement *fits* when it is not allocated and every counter it consumes from its
  CounterSet has enough left (``claims.counters.CounterSet.free``), as the scheduler's
  allocator checks (KEP 4815).
- Moving a claim frees what every device it holds on the GPU consumes (each
  (device, claim) pair counted as ``counter_sets`` counts it). The claims to move for a
  placement are the fewest whose release makes it fit: every claim holding one of its
  memory slices (a memory slice has the value 1, so none of them can stay), then the
  fewest others that free enough of the remaining counters (multiprocessors, engines),
  the smallest first.

Only the placement's own CounterSet is read: NVIDIA's driver publishes one per GPU and a
MIG device consumes from that one alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    device_fields,
)

#: Claims beyond the memory slices' holders tried in every combination; above it the
#: others are added smallest first (a GPU has at most 7 MIG devices allocated).
EXACT_LIMIT = 12


@dataclass(frozen=True)
class Placement:
    """A published MIG device of a CounterSet: ``device`` name, MIG ``profile``,
    ``slices`` (memory slice indexes it consumes, ascending) and ``multiprocessors``."""

    device: str
    profile: str
    slices: tuple[int, ...]
    multiprocessors: Fraction

    @property
    def start(self) -> int:
        """The placement start: its lowest memory slice (-1 when it consumes none)."""
        return self.slices[0] if self.slices else -1

    @property
    def size(self) -> tuple[int, Fraction]:
        return (len(self.slices), self.multiprocessors)


@dataclass(frozen=True)
class Move:
    """A claim to move off a GPU: ``claim`` (``namespace/name``), the ``devices`` it holds
    there, the memory ``slices`` and ``multiprocessors`` they consume."""

    claim: str
    devices: tuple[str, ...]
    slices: tuple[int, ...]
    multiprocessors: Fraction

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "devices": list(self.devices),
            "memory_slices": list(self.slices),
            "multiprocessors": cc.amount_json(self.multiprocessors),
        }


def _attribute(device: Mapping[str, Any], name: str) -> str | None:
    body = device_fields(device)
    attrs = body.get("attributes") if isinstance(body.get("attributes"), Mapping) else {}
    value = attrs.get(name)
    if isinstance(value, Mapping):
        value = value.get("string")
    return str(value) if isinstance(value, str) and value else None


def _slices_of(counters: Mapping[str, Fraction]) -> tuple[int, ...]:
    return tuple(
        sorted(
            i
            for i in map(cc.memory_slice, counters)
            if i is not None and counters[f"memory-slice-{i}"] > 0
        )
    )


def placements(cs: cc.CounterSet) -> list[Placement]:
    """Every MIG placement of ``cs`` (its devices with a ``profile`` attribute), by
    size then start."""
    out = []
    for name, counters in cs.devices.items():
        profile = _attribute(cs.objects.get(name, {}), "profile")
        if profile is None:
            continue
        sm = counters.get(cc.MULTIPROCESSORS, Fraction(0))
        out.append(Placement(name, profile, _slices_of(counters), sm))
    return sorted(out, key=lambda p: (p.size, p.start, p.profile, p.device))


def model_of(cs: cc.CounterSet) -> str | None:
    """The ``productName`` of the first device consuming ``cs`` that names one."""
    return next((m for m in (_attribute(d, "productName") for d in cs.objects.values()) if m), None)


def profile_sizes(cs: cc.CounterSet) -> dict[str, tuple[int, Fraction]]:
    """MIG profile -> its size (largest placement of it) on the GPU of ``cs``."""
    out: dict[str, tuple[int, Fraction]] = {}
    for p in placements(cs):
        out[p.profile] = max(out.get(p.profile, p.size), p.size)
    return out


def holders(cs: cc.CounterSet) -> dict[str, Move]:
    """Claim -> what moving it frees on the GPU of ``cs``, by claim name."""
    devices: dict[str, list[str]] = {}
    for device, claims in cs.allocated.items():
        for claim in claims:
            devices.setdefault(claim, []).append(device)
    out = {}
    for claim in sorted(devices):
        names = tuple(sorted(devices[claim]))
        slices = sorted({i for d in names for i in _slices_of(cs.devices[d])})
        sm = sum((cs.devices[d].get(cc.MULTIPROCESSORS, Fraction(0)) for d in names), Fraction(0))
        out[claim] = Move(claim, names, tuple(slices), sm)
    return out


def _freed(cs: cc.CounterSet, claims: Iterable[str]) -> dict[str, Fraction]:
    """Counter -> what the devices of ``claims`` consume from ``cs``."""
    gone = set(claims)
    out: dict[str, Fraction] = {}
    for device, held_by in cs.allocated.items():
        for claim in held_by:
            if claim in gone:
                for counter, value in cs.devices[device].items():
                    out[counter] = out.get(counter, Fraction(0)) + value
    return out


def fits_without(cs: cc.CounterSet, device: str, claims: Iterable[str]) -> bool:
    """Whether ``device`` of ``cs`` would fit if ``claims`` were moved off the GPU: every
    claim holding it is among them, and every counter it consumes has enough left."""
    claims = set(claims)
    if any(c not in claims for c in cs.allocated.get(device, ())):
        return False
    freed = _freed(cs, claims) if claims else {}
    return all(
        need <= 0 or cs.free(counter) + freed.get(counter, Fraction(0)) >= need
        for counter, need in cs.devices[device].items()
    )


def _cost(moves: Sequence[Move]) -> tuple[int, int, Fraction, tuple[str, ...]]:
    return (
        len(moves),
        sum(len(m.slices) for m in moves),
        sum((m.multiprocessors for m in moves), Fraction(0)),
        tuple(m.claim for m in moves),
    )


@dataclass(frozen=True)
class _Index:
    """What every ``moves_for`` of one CounterSet reads, made once (``index``): the claims'
    moves, cheapest first; per memory slice the claims holding it; per claim what moving
    it frees."""

    ranked: tuple[Move, ...]
    moves: Mapping[str, Move]
    by_slice: Mapping[int, tuple[str, ...]]
    freed: Mapping[str, Mapping[str, Fraction]]


def index(cs: cc.CounterSet) -> _Index:
    """The ``_Index`` of ``cs``: give it to each ``moves_for`` of the same state."""
    held = holders(cs)
    by_slice: dict[int, list[str]] = {}
    for m in held.values():
        for i in m.slices:
            by_slice.setdefault(i, []).append(m.claim)
    ranked = tuple(sorted(held.values(), key=lambda m: (_cost([m])[1:], m.claim)))
    return _Index(ranked, held, {i: tuple(c) for i, c in by_slice.items()}, _freed_by_claim(cs))


def moves_for(cs: cc.CounterSet, device: str, idx: _Index | None = None) -> list[Move] | None:
    """The fewest claims to move off the GPU of ``cs`` so that ``device`` fits (empty when
    it fits now), smallest first; None when no set of moves makes it fit (it needs more
    of a counter than the GPU has)."""
    idx = idx or index(cs)
    moves = idx.moves
    named = set(cs.allocated.get(device, ()))
    for i in _slices_of(cs.devices[device]):
        named.update(idx.by_slice.get(i, ()))
    must = [moves[c] for c in sorted(named) if c in moves]
    # what each claim frees is summed once (``index``): each try below adds up the claims
    # it moves instead of reading every allocation again, and the others are walked in
    # their order only as far as the first set that fits
    by_claim = idx.freed
    count = len(idx.ranked) - len(must)
    others = (m for m in idx.ranked if m.claim not in named)
    need = {c: n for c, n in cs.devices[device].items() if n > 0}
    base = _add({}, (by_claim.get(m.claim, {}) for m in must), need)

    def fits(freed: Mapping[str, Fraction]) -> bool:
        return all(cs.free(c) + freed.get(c, Fraction(0)) >= n for c, n in need.items())

    if count <= EXACT_LIMIT:
        others = list(others)
        for k in range(len(others) + 1):
            found = [
                list(extra)
                for extra in itertools.combinations(others, k)
                if fits(_add(base, (by_claim.get(m.claim, {}) for m in extra), need))
            ]
            if found:
                return sorted(must + min(found, key=_cost), key=lambda m: _cost([m]))
        return None
    chosen, freed = list(must), dict(base)
    for m in itertools.chain([None], others):
        if m is not None:
            chosen.append(m)
            freed = _add(freed, [by_claim.get(m.claim, {})], need)
        if fits(freed):
            return sorted(chosen, key=lambda m: _cost([m]))
    return None


def _freed_by_claim(cs: cc.CounterSet) -> dict[str, dict[str, Fraction]]:
    """Claim -> counter -> what moving the claim frees (``_freed`` of the claim alone)."""
    out: dict[str, dict[str, Fraction]] = {}
    for device, held_by in cs.allocated.items():
        for claim in held_by:
            mine = out.setdefault(claim, {})
            for counter, value in cs.devices[device].items():
                mine[counter] = mine.get(counter, Fraction(0)) + value
    return out


def _add(
    freed: Mapping[str, Fraction], more: Iterable[Mapping[str, Fraction]], need: Mapping[str, Any]
) -> dict[str, Fraction]:
    """``freed`` plus each of ``more``, over the counters of ``need`` alone."""
    out = dict(freed)
    for amounts in more:
        for counter in need:
            if counter in amounts:
                out[counter] = out.get(counter, Fraction(0)) + amounts[counter]
    return out


def _placement_dict(p: Placement, moves: Sequence[Move]) -> dict[str, Any]:
    return {
        "device": p.device,
        "profile": p.profile,
        "start": p.start,
        "memory_slices": list(p.slices),
        "moves": [m.to_dict() for m in moves],
    }


def _ranked(cs: cc.CounterSet, profile: str) -> list[tuple[Placement, list[Move]]]:
    """The placements of ``profile`` with their moves, cheapest first (those no move
    makes fit left out)."""
    out = []
    idx = index(cs)
    for p in placements(cs):
        if p.profile == profile:
            moves = moves_for(cs, p.device, idx)
            if moves is not None:
                out.append((p, moves))
    return sorted(out, key=lambda pm: (_cost(pm[1]), pm[0].start))


def blocked_profiles(cs: cc.CounterSet) -> tuple[str | None, list[dict[str, Any]]]:
    """The largest MIG profile that fits on the GPU of ``cs`` now (None: none fits), and
    for each larger profile (by size, then name) its placements with the claims to move
    for each, cheapest first: ``{profile, memory_slices, multiprocessors, placements:
    [{device, profile, start, memory_slices, moves: [Move.to_dict()]}]}``."""
    fitting = [p for p in placements(cs) if fits_without(cs, p.device, ())]
    largest = max(fitting, key=lambda p: (p.size, p.profile)) if fitting else None
    floor = largest.size if largest else (0, Fraction(-1))
    out = []
    for profile, size in sorted(profile_sizes(cs).items(), key=lambda kv: (kv[1], kv[0])):
        if size <= floor:
            continue
        out.append(
            {
                "profile": profile,
                "memory_slices": size[0],
                "multiprocessors": cc.amount_json(size[1]),
                "placements": [_placement_dict(p, m) for p, m in _ranked(cs, profile)],
            }
        )
    return (largest.profile if largest else None), out


def target(cs: cc.CounterSet, wanted: Mapping[str, Sequence[str]]) -> dict[str, Any] | None:
    """The cheapest placement, with its moves, of the largest profile that a pending claim
    asks for on this GPU (``wanted``: profile -> claims asking for it; profiles the GPU
    does not publish are ignored), else of the GPU's largest profile: ``{profile,
    asked_by, device, start, memory_slices, moves}``. None when the GPU publishes no MIG
    placement, or no move makes any placement of that profile fit."""
    sizes = profile_sizes(cs)
    asked = [p for p in wanted if p in sizes and wanted[p]]
    pool = asked or list(sizes)
    if not pool:
        return None
    profile = max(pool, key=lambda p: (sizes[p], p))
    ranked = _ranked(cs, profile)
    if not ranked:
        return None
    p, moves = ranked[0]
    return {"asked_by": sorted(wanted.get(profile, ())) if asked else [],
            **_placement_dict(p, moves)}  # fmt: skip


def drain_order(sets: Iterable[cc.CounterSet]) -> list[dict[str, Any]]:
    """Per node (by name), its GPUs that hold claims ordered by what draining them takes:
    fewest claims, then fewest memory slices and multiprocessors held, then GPU name;
    moving a GPU's claims frees every memory slice of it. ``{node, gpus_free, order:
    [{gpu, counter_set, memory_slices, moves: [Move.to_dict()]}]}``; ``gpus_free`` the
    GPUs no claim holds."""
    per_node: dict[str, list[cc.CounterSet]] = {}
    for cs in sets:
        per_node.setdefault(cs.node, []).append(cs)
    out = []
    for node in sorted(per_node):
        ranked, free = [], []
        for cs in per_node[node]:
            moves = list(holders(cs).values())
            if not moves:
                free.append(cs.gpu)
                continue
            moves.sort(key=lambda m: _cost([m]))
            ranked.append((_cost(moves)[:3], cs.gpu, cs, moves))
        ranked.sort(key=lambda r: (r[0], r[1]))
        out.append(
            {
                "node": node,
                "gpus_free": sorted(free),
                "order": [
                    {
                        "gpu": gpu,
                        "counter_set": cs.name,
                        "memory_slices": len(cs.memory_slices()),
                        "moves": [m.to_dict() for m in moves],
                    }
                    for _cost_key, gpu, cs, moves in ranked
                ],
            }
        )
    return out


def advice(cs: cc.CounterSet, wanted: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """What helps on the GPU of ``cs``: ``node``, ``gpu``, ``counter_set``, ``model``,
    ``memory_slices_free``, ``largest_fitting`` (profile or None), ``blocked``
    (``blocked_profiles``) and ``target`` (``target`` for ``wanted``)."""
    largest, blocked = blocked_profiles(cs)
    return {
        "node": cs.node,
        "gpu": cs.gpu,
        "counter_set": cs.name,
        "driver": cs.driver,
        "pool": cs.pool,
        "model": model_of(cs),
        "memory_slices_free": cs.free_memory_slices(),
        "claims": sorted(holders(cs)),
        "largest_fitting": largest,
        "blocked": blocked,
        "target": target(cs, wanted),
    }
