"""MIG rules of the GPU simulator: profiles, placements, GI/CI creation and removal.

Pure functions over ``state.Gpu``; the profile tables come from the collection's
``mig.profiles`` module (on a lab node the installer copies that file next to this
package, hence the fallback import).

Facts the rules follow (NVIDIA MIG user guide, "Concepts" and "Getting started"):

* a GPU instance (GI) occupies ``placement_size`` memory slices from ``placement_start``;
  two GIs may not share a slice, and a profile has at most ``max_instances`` GIs;
* the GI ID is the swizzle ID of its memory placement (7g: 0; halves: 1, 2; quarters:
  3..6; eighths: 7..14 on 8-slice GPUs), which is what the MIG user guide examples show
  (``1g.5gb`` at ``6:1`` is ID 13, at ``0:1`` ID 7; ``2g.10gb`` at ``4:2`` is ID 5);
* when ``-cgi`` picks the placement itself, it fills the most used region first (the
  guide's ``-cgi 19,19,14,9`` places the 1g instances at slices 6 then 4, the 2g at 0,
  and the 3g then fails with "Insufficient Resources");
* a compute instance (CI) takes compute slices inside its GI; CI profile IDs follow the
  slice count (NVML ``NVML_COMPUTE_INSTANCE_PROFILE_*_SLICE``).
"""

from __future__ import annotations

from dataclasses import dataclass

# on a lab node the installer copies the module under the same package path (install.py)
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mig_profiles

from gpufleet.lab.gpusim import hardware
from gpufleet.lab.gpusim.state import ComputeInstance, Gpu, GpuInstance

GIProfile = mig_profiles.GIProfile
GpuModel = mig_profiles.GpuModel

# CI profile ID -> compute slices (nvml.h NVML_COMPUTE_INSTANCE_PROFILE_<N>_SLICE).
CI_SLICES_BY_PROFILE_ID = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6}


class MigError(Exception):
    """A MIG operation NVML refuses; ``reason`` is NVML's error string as nvidia-smi prints it.

    Reasons used: ``Insufficient Resources``, ``In use by another client``,
    ``Not Found``, ``Invalid Argument``, ``Not Supported``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def gpu_model(gpu: Gpu) -> GpuModel:
    """The MIG profile data of ``gpu`` (by its ``nvidia-smi -L`` name).

    Raises ``MigError("Not Supported")`` for a GPU that is not MIG capable or whose model
    has no profile data.
    """
    if not gpu.mig_capable:
        raise MigError("Not Supported")
    try:
        return mig_profiles.model(gpu.name)
    except mig_profiles.UnknownGpuModel:
        raise MigError("Not Supported") from None


def resolve_profile(model: GpuModel, token: str) -> GIProfile:
    """A ``-cgi`` argument (``19``, ``1g.18gb`` or ``MIG 1g.18gb``) -> the GI profile.

    Raises ``MigError("Invalid Argument")`` when the model has no such profile.
    """
    try:
        return model.profile(token.strip())
    except mig_profiles.UnknownProfile:
        raise MigError("Invalid Argument") from None


def swizzle_id(total_slices: int, start: int, size: int) -> int:
    """GI ID of a placement: ``total/size - 1 + start/size`` (binary-tree numbering)."""
    return total_slices // size - 1 + start // size


def used_slices(gpu: Gpu) -> set[int]:
    """Memory slices held by the GPU's instances."""
    out: set[int] = set()
    for gi in gpu.gpu_instances:
        out.update(range(gi.placement_start, gi.placement_start + gi.placement_size))
    return out


def _unreachable(model: GpuModel) -> set[int]:
    """Slices no single-slice placement covers (slice 7 on 8-slice GPUs)."""
    smallest = min(model.profiles, key=lambda p: p.slices)
    reach = {s for start in smallest.placements for s in smallest.slots(start)}
    return set(range(model.total_slices)) - reach


def free_placements(model: GpuModel, gpu: Gpu, profile: GIProfile) -> list[int]:
    """Placement starts of ``profile`` that overlap no existing GI."""
    used = used_slices(gpu)
    return [s for s in profile.placements if not used.intersection(profile.slots(s))]


def choose_placement(model: GpuModel, gpu: Gpu, profile: GIProfile) -> int | None:
    """The start ``-cgi`` would pick for ``profile``, or None when none is free.

    Preference: a placement over slices smaller profiles cannot use, then the one whose
    enclosing aligned blocks (2x, 4x ... its size) are the most occupied, then the lowest.
    """
    if sum(1 for gi in gpu.gpu_instances if gi.profile_id == profile.profile_id) >= (
        profile.max_instances
    ):
        return None
    candidates = free_placements(model, gpu, profile)
    if not candidates:
        return None
    dead = _unreachable(model)
    occupied = used_slices(gpu) | dead

    def score(start: int) -> tuple:
        own = len(dead.intersection(profile.slots(start)))
        blocks = []
        size = profile.slices * 2
        while size <= model.total_slices:
            base = (start // size) * size
            blocks.append(len(occupied.intersection(range(base, base + size))))
            size *= 2
        return (-own, *(-b for b in blocks), start)

    return min(candidates, key=score)


def remaining_capacity(model: GpuModel, gpu: Gpu, profile: GIProfile) -> int:
    """How many more GIs of ``profile`` fit (``-lgip`` ``Free``), placing greedily."""
    existing = sum(1 for gi in gpu.gpu_instances if gi.profile_id == profile.profile_id)
    used = used_slices(gpu)
    count = 0
    for start in profile.placements:
        slots = set(profile.slots(start))
        if not used & slots:
            used |= slots
            count += 1
    return max(0, min(count, profile.max_instances - existing))


def ci_name(gi_profile: str, gi_compute_slices: int, ci_slices: int) -> str:
    """CI profile name: the GI's own for a full-size CI, else ``<n>c.<gi profile>``."""
    return mig_profiles.compute_instance_profile(gi_profile, gi_compute_slices, ci_slices)


def gi_compute_slices(gi: GpuInstance) -> int:
    """Compute slices of ``gi`` (the ``<g>g`` of its profile). Raises ValueError for a
    profile that is not a MIG profile name."""
    parsed = mig_profiles.parse_profile(gi.profile)
    if parsed is None:
        raise ValueError(f"GPU instance profile {gi.profile!r} is not a MIG profile name")
    return parsed.gi_slices


@dataclass(frozen=True)
class CIPlacement:
    start: int
    size: int


def ci_placements(gi: GpuInstance) -> dict[int, CIPlacement]:
    """Compute-slice placement of each CI of ``gi`` (CI ID -> start:size).

    Derived, not stored (schema 1 has no CI placement): CIs in ID order, each at the
    lowest start aligned to its size that is still free.
    """
    taken: set[int] = set()
    out: dict[int, CIPlacement] = {}
    total = gi_compute_slices(gi)
    for ci in sorted(gi.compute_instances, key=lambda c: c.id):
        size = CI_SLICES_BY_PROFILE_ID.get(ci.profile_id, total)
        start = _ci_start(total, size, taken)
        start = 0 if start is None else start
        taken.update(range(start, start + size))
        out[ci.id] = CIPlacement(start, size)
    return out


def _ci_start(total: int, size: int, taken: set[int]) -> int | None:
    step = size if size in (1, 2, 4) else total
    for start in range(0, total - size + 1, max(step, 1)):
        if not taken.intersection(range(start, start + size)):
            return start
    return None


def create_gi(gpu: Gpu, profile: GIProfile, start: int | None = None) -> GpuInstance:
    """Create a GI of ``profile`` on ``gpu`` (mutates ``gpu``) and return it.

    ``start`` is the requested placement start (``-cgi 19:3``, NVML
    ``nvmlDeviceCreateGpuInstanceWithPlacement``); None lets the simulator choose as
    ``-cgi 19`` does. Raises ``MigError("Invalid Argument")`` for a start that is not one
    of the profile's placements (``-lgipp``), ``MigError("Insufficient Resources")`` when
    no placement is free, the requested one overlaps a GI (NVML answers
    INSUFFICIENT_RESOURCES for an occupied placement too) or the profile's instance limit
    is reached.
    """
    model = gpu_model(gpu)
    if start is None:
        start = choose_placement(model, gpu, profile)
    else:
        if start not in profile.placements:
            raise MigError("Invalid Argument")
        count = sum(1 for gi in gpu.gpu_instances if gi.profile_id == profile.profile_id)
        if count >= profile.max_instances or start not in free_placements(model, gpu, profile):
            raise MigError("Insufficient Resources")
    if start is None:
        raise MigError("Insufficient Resources")
    gi = GpuInstance(
        id=swizzle_id(model.total_slices, start, profile.slices),
        profile=profile.name,
        profile_id=profile.profile_id,
        placement_start=start,
        placement_size=profile.slices,
        memory_mib=profile.memory_mib,
        multiprocessors=profile.multiprocessors,
        copy_engines=profile.copy_engines,
        decoders=profile.decoders,
        encoders=profile.encoders,
        jpeg_engines=profile.jpeg_engines,
        ofa_engines=profile.ofa_engines,
    )
    gpu.gpu_instances.append(gi)
    return gi


def create_ci(gpu: Gpu, gi: GpuInstance, ci_profile_id: int | None) -> ComputeInstance:
    """Create a CI in ``gi`` (mutates it); ``None`` means the full-size CI (``-C``).

    Raises ``MigError("Invalid Argument")`` for a CI profile larger than the GI or
    unknown to NVML, ``MigError("Insufficient Resources")`` when the GI's compute slices
    are taken.
    """
    total = gi_compute_slices(gi)
    if ci_profile_id is None:
        ci_profile_id = mig_profiles.ci_profile_id_for(total)
    size = CI_SLICES_BY_PROFILE_ID.get(ci_profile_id)
    if size is None or size > total:
        raise MigError("Invalid Argument")
    taken: set[int] = set()
    for p in ci_placements(gi).values():
        taken.update(range(p.start, p.start + p.size))
    if _ci_start(total, size, taken) is None:
        raise MigError("Insufficient Resources")
    ids = {c.id for c in gi.compute_instances}
    ci_id = next(i for i in range(len(ids) + 1) if i not in ids)
    ci = ComputeInstance(
        id=ci_id,
        profile=ci_name(gi.profile, total, size),
        profile_id=ci_profile_id,
        multiprocessors=gi.multiprocessors * size // total,
        uuid=hardware.mig_uuid(gpu.uuid, gi.id, ci_id),
    )
    gi.compute_instances.append(ci)
    return ci


def destroy_ci(gpu: Gpu, gi: GpuInstance, ci_id: int) -> None:
    """Remove CI ``ci_id`` from ``gi``. Raises ``MigError`` (Not Found / In use)."""
    ci = next((c for c in gi.compute_instances if c.id == ci_id), None)
    if ci is None:
        raise MigError("Not Found")
    if gpu.in_use:
        raise MigError("In use by another client")
    gi.compute_instances.remove(ci)


def destroy_gi(gpu: Gpu, gi_id: int) -> None:
    """Remove GI ``gi_id``; a GI that still has CIs is refused as in use, as NVML does."""
    gi = gpu.gi(gi_id)
    if gi is None:
        raise MigError("Not Found")
    if gi.compute_instances or gpu.in_use:
        raise MigError("In use by another client")
    gpu.gpu_instances.remove(gi)


def ordered_gis(model: GpuModel | None, gpu: Gpu) -> list[GpuInstance]:
    """GIs in ``nvidia-smi mig -lgi`` order: profile table order, then GI ID."""
    rank = {p.profile_id: i for i, p in enumerate(model.profiles)} if model else {}
    return sorted(gpu.gpu_instances, key=lambda g: (rank.get(g.profile_id, 99), g.id))


def mig_devices(gpu: Gpu) -> list[tuple[GpuInstance, ComputeInstance]]:
    """MIG devices (one per CI) in device-index order: GI ID, then CI ID."""
    out = []
    for gi in sorted(gpu.gpu_instances, key=lambda g: g.id):
        for ci in sorted(gi.compute_instances, key=lambda c: c.id):
            out.append((gi, ci))
    return out


def apply_pending(gpu: Gpu) -> None:
    """Make the pending MIG mode current (GPU reset); MIG instances do not survive it."""
    if gpu.mig_mode_pending != gpu.mig_mode_current:
        gpu.mig_mode_current = gpu.mig_mode_pending
    gpu.gpu_instances.clear()
