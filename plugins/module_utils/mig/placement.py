# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""GPU-instance (GI) placements: what a plan places (``Placement``, ``Plan``), what a GPU
has (``GpuInstance``, from ``nvidia-smi mig -lgi``), a layout that does not fit
(``LayoutDoesNotFit``, with its ``Collision``s), and ``diff``: which instances to keep
(same profile and placement), destroy and create.

Standard library only (the boot-time MIG apply copies this file to the node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.profiles import (
    normalize_profile_name,
)

__all__ = [
    "Collision",
    "GpuInstance",
    "LayoutDoesNotFit",
    "MigDiff",
    "Placement",
    "Plan",
    "diff",
]


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
    def causes(self) -> tuple[str, ...]:
        """Why the layout is refused, the count-level causes first: ``instance-limit``
        (a count above the profile's ``-lgip`` Total), ``media-extension-budget`` (more
        OFA than the GPU has), ``engine-budget`` (more copy engines, NVDEC, NVENC or JPEG
        engines than the GPU has), ``memory-slices`` (more slices than the GPU has),
        ``placement`` (only the allowed starts refuse it)."""
        out = []
        if self.over_max_instances:
            out.append("instance-limit")
        if "ofa_engines" in self.over_engine_budget:
            out.append("media-extension-budget")
        if set(self.over_engine_budget) - {"ofa_engines"}:
            out.append("engine-budget")
        if self.slices_requested > self.slices_available:
            out.append("memory-slices")
        return tuple(out) or ("placement",)

    @property
    def cause(self) -> str:
        """The first of ``causes``."""
        return self.causes[0]

    @property
    def reason(self) -> str:
        parts = [f"MIG layout {_layout_str(self.wanted)} does not fit on {self.gpu_model}"]
        for name, (asked, most) in self.over_max_instances.items():
            plural = "s" if most != 1 else ""
            parts.append(f"{name} allows at most {most} instance{plural} per GPU (asked {asked})")
        for engine, (asked, most) in self.over_engine_budget.items():
            if engine == "ofa_engines":
                parts.append(
                    f"the media-extension budget is exceeded: the layout needs {asked} "
                    f"optical-flow engine(s) (OFA) but the GPU has {most}: one +me instance "
                    "per GPU, and none beside the full-GPU profile"
                )
            else:
                parts.append(
                    f"the engine budget is exceeded: the layout needs {asked} "
                    f"{ENGINE_NAMES.get(engine, engine)} but the GPU has {most} (the "
                    "full-GPU profile's count)"
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
                    else "the media-extension budget (one +me instance per GPU)"
                    if "ofa_engines" in self.over_engine_budget
                    else "the engine budget"
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
                f"({_CAUSE_TEXT[self.cause]}, not the total, refuses it)"
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
            "causes": list(self.causes),
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


#: Engine fields of a GPU-instance profile as NVIDIA names them (``nvidia-smi mig -lgip``
#: columns CE, DEC, ENC, JPEG, OFA; the MIG user guide's "Hardware Units" and "Copy
#: Engines").
ENGINE_NAMES = {
    "copy_engines": "copy engine(s) (CE)",
    "decoders": "video decoder(s) (NVDEC)",
    "encoders": "video encoder(s) (NVENC)",
    "jpeg_engines": "JPEG decoder(s) (NVJPG)",
    "ofa_engines": "optical-flow engine(s) (OFA)",
}

_CAUSE_TEXT = {
    "instance-limit": "the per-profile instance limit",
    "media-extension-budget": "the media-extension budget",
    "engine-budget": "the engine budget",
    "memory-slices": "the memory slices",
    "placement": "the placement rules",
}


def _span(slots: Sequence[int]) -> str:
    return f"{slots[0]}-{slots[-1]}" if len(slots) > 1 else f"{slots[0]}"


def _layout_str(layout: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in layout.items()) + "}"


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


def as_gpu_instance(item: Any) -> GpuInstance:
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
    current = [as_gpu_instance(c) for c in current_instances]
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
