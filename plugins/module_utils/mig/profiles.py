# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""MIG GPU-instance profiles per GPU model, and parsers of ``nvidia-smi mig`` output.

Standard library only: Ansible ships ``module_utils`` to managed hosts, and the GPU
simulator copies this file alone onto lab nodes.

Vocabulary (NVIDIA MIG user guide, "Concepts"):

* A MIG-capable GPU has 8 *memory slices* and 7 *compute slices* (4 and 4 on A30 and
  RTX PRO 6000 Blackwell).
  A GPU instance (GI) takes a contiguous run of memory slices: its *placement*
  ``start:size`` in the unit ``nvidia-smi mig -lgipp`` and ``-lgi`` print.
* A profile such as ``3g.71gb`` names the compute slices (``3g``) and the memory in GB
  rounded (``71gb``). ``1g.35gb`` has 1 compute slice but 2 memory slices; ``7g.*`` takes
  all 8 memory slices.
* ``+me`` profiles take the GPU's media extensions (OFA, and on Ampere the only JPEG
  decoder); there is one instance at most.
* The GI profile ID is what ``nvidia-smi mig -lgip`` prints in column ``ID`` (NVML
  ``nvmlGpuInstanceProfileInfo_t.id``), the argument of ``-cgi``. IDs are per model: on
  A30, ID 14 is ``1g.6gb``, on A100 it is ``2g.10gb``.
* The compute-instance profile ID of the one full-size CI of a GI (``-C``, marked ``*``
  by ``nvidia-smi mig -lcip``) follows the CI slice count: NVML
  ``NVML_COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7,8,6}_SLICE`` = 0, 1, 2, 3, 4, 5, 6 (nvml.h;
  ``-lcip`` shows ``MIG 1g.5gb 0*``, ``MIG 2g.10gb 1*``, ``MIG 3g.40gb 2*``).

Memory: ``-lgip`` prints GiB with two decimals (MiB / 1024). Every GI size NVIDIA prints
in MiB elsewhere (``nvidia-smi`` MIG devices table: 4864, 9856, 20096, 40192, 40448 MiB;
NVML ``memorySizeMB``: 16384, 33280, 71424, 143360 MiB) is a multiple of 64 MiB, so the
parser recovers MiB as the nearest multiple of 64 (``round(GiB * 16) * 64``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import tables as mig_tables

__all__ = [
    "MODELS",
    "PROFILE_SUFFIXES",
    "GIProfile",
    "GpuModel",
    "LgipParseError",
    "ProfileName",
    "UnknownGpuModel",
    "UnknownProfile",
    "check_geometry",
    "ci_profile_id_for",
    "compute_instance_profile",
    "compute_instance_slices",
    "dra_driver_refusal",
    "gib_to_mib",
    "model",
    "model_by_device_id",
    "model_from_nvidia_smi",
    "normalize_profile_name",
    "parse_lgi",
    "parse_lgip",
    "parse_lgipp",
    "parse_profile",
]


class UnknownProfile(ValueError):
    """A MIG profile name or ID that the GPU model does not have."""


class UnknownGpuModel(ValueError):
    """A GPU name for which no MIG profile data is known."""


class LgipParseError(ValueError):
    """``nvidia-smi mig -lgip`` / ``-lgipp`` output that cannot be read."""


# NVML_COMPUTE_INSTANCE_PROFILE_<N>_SLICE values (nvml.h): CI slices -> CI profile ID.
_CI_PROFILE_ID_BY_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}

#: The suffixes a MIG profile name can carry, as nvidia-smi prints them (NVIDIA MIG user
#: guide, "Supported MIG Profiles"; mig-parted ``pkg/types/mig_profile.go``): ``+me`` (the
#: GPU instance holds the media extensions), ``-me`` (it has none), ``+gfx`` (graphics, RTX
#: PRO 6000 Blackwell), ``+me.all`` (it holds all of the GPU's media engines).
PROFILE_SUFFIXES = ("+me", "-me", "+gfx", "+me.all")

_PROFILE_RE = re.compile(
    r"^(?:(?P<ci>[1-9][0-9]*)c\.)?(?P<gi>[1-9][0-9]*)g\.(?P<gb>[1-9][0-9]*)gb"
    r"(?P<suffix>"
    + "|".join(re.escape(s) for s in sorted(PROFILE_SUFFIXES, key=len, reverse=True))
    + r")?\Z"
)


@dataclass(frozen=True)
class ProfileName:
    """A MIG profile name split into its parts: ``1c.3g.40gb+me`` ->
    ``ci_slices=1, gi_slices=3, memory_gb=40, suffix="+me"``.

    ``ci_slices``: compute slices of a compute-instance profile (``<c>c.``), None for a
    GPU-instance profile; ``gi_slices``: compute slices of the GPU instance (``<g>g``);
    ``memory_gb``: the GPU instance's memory in GB as the name rounds it (``<m>gb``, not
    MiB); ``suffix``: "" or one of ``PROFILE_SUFFIXES``."""

    ci_slices: int | None
    gi_slices: int
    memory_gb: int
    suffix: str = ""

    @property
    def gi_profile(self) -> str:
        """The GPU-instance profile: ``3g.40gb+me`` for ``1c.3g.40gb+me``."""
        return f"{self.gi_slices}g.{self.memory_gb}gb{self.suffix}"

    @property
    def name(self) -> str:
        """The name as nvidia-smi prints it (what ``parse_profile`` read)."""
        ci = f"{self.ci_slices}c." if self.ci_slices is not None else ""
        return ci + self.gi_profile


def parse_profile(name: str) -> ProfileName | None:
    """Split a MIG profile name as ``nvidia-smi mig -lgip``/``-lcip`` print it and NVIDIA's
    DRA driver publishes it (attribute ``profile``): ``<g>g.<m>gb`` (``1g.18gb``), with an
    optional compute-instance prefix ``<c>c.`` (``1c.3g.40gb``) and suffix of
    ``PROFILE_SUFFIXES`` (``1g.10gb+me``, ``1g.24gb+gfx``, ``1g.24gb+me.all``,
    ``1g.24gb-me``). None for anything else: other case, a ``MIG `` prefix (callers that
    take ``nvidia-smi``'s column use ``normalize_profile_name`` first), spaces, a zero or a
    leading zero, another suffix. Syntax only: whether a GPU model has the profile is
    ``GpuModel.profile``'s question. The one parser of the collection: no other module
    matches or splits profile names."""
    m = _PROFILE_RE.match(name) if isinstance(name, str) else None
    if m is None:
        return None
    ci = m.group("ci")
    return ProfileName(
        int(ci) if ci else None, int(m.group("gi")), int(m.group("gb")), m.group("suffix") or ""
    )


def compute_instance_profile(gi_profile: str, gi_slices: int, ci_slices: int) -> str:
    """The profile name of a compute instance of ``ci_slices`` compute slices in a GPU
    instance of ``gi_profile`` (``gi_slices`` compute slices), as ``nvidia-smi mig -lci``
    prints it: the GI profile itself for a full-size CI (``3g.40gb``), else
    ``<c>c.<gi profile>`` (``1c.3g.40gb``)."""
    if ci_slices == gi_slices:
        return gi_profile
    return f"{ci_slices}c.{gi_profile}"


def _gi_slices(name: str) -> int:
    """Compute slices of the GPU-instance profile ``name`` (``3g.71gb`` -> 3). Raises
    LgipParseError for a name that is not one."""
    parsed = parse_profile(name)
    if parsed is None or parsed.ci_slices is not None:
        raise LgipParseError(f"{name!r} is not a GPU-instance profile name")
    return parsed.gi_slices


def ci_profile_id_for(compute_slices: int) -> int:
    """Return the CI profile ID of a compute instance spanning ``compute_slices`` slices.

    Source: nvml.h ``NVML_COMPUTE_INSTANCE_PROFILE_*_SLICE``. Raises ``ValueError`` for a
    slice count NVML has no CI profile for.
    """
    try:
        return _CI_PROFILE_ID_BY_SLICES[compute_slices]
    except KeyError:
        raise ValueError(f"no compute-instance profile spans {compute_slices} slices") from None


def compute_instance_slices(profile: str) -> tuple[int, int, str] | None:
    """``"1c.3g.71gb"`` -> ``(1, 3, "3g.71gb")``: compute slices of the compute instance,
    of its GPU instance, and the GI profile. None for a GPU-instance profile
    (``3g.71gb``), whose default compute instance spans the whole GPU instance.

    Names as ``nvidia-smi mig -lci`` prints them (NVIDIA MIG user guide, "CI profiles").
    """
    parsed = parse_profile(normalize_profile_name(profile))
    if parsed is None or parsed.ci_slices is None:
        return None
    return parsed.ci_slices, parsed.gi_slices, parsed.gi_profile


def dra_driver_refusal(profile: str) -> tuple[str, str] | None:
    """Why NVIDIA's DRA driver cannot serve MIG devices of ``profile``, with the fix, or
    None when it can.

    The one rule, asked by the MIG planner, the ``nvidia_mig`` module and preflight: a
    compute instance narrower than its GPU instance (``1c.3g.71gb``) cannot be served.
    NVIDIA's DRA kubelet plugin (driver ``gpu.nvidia.com``) lists MIG profiles only for
    compute instances whose compute slices equal their GPU instance's and finds no
    profile for any other MIG device, so its device enumeration fails and the plugin
    exits at start; its pod crash-loops on the node. Source: NVIDIA/k8s-dra-driver-gpu
    (now kubernetes-sigs/dra-driver-nvidia-gpu) ``cmd/gpu-kubelet-plugin/nvlib.go``,
    ``getGpuInfo`` (profiles with G != C skipped) and ``getMigDevices`` ("error getting
    profile info for MIG device"), the same in every release v25.3.0 to v0.4.0.
    """
    slices = compute_instance_slices(profile)
    if slices is None or slices[0] >= slices[1]:
        return None
    ci, gi, gi_profile = slices
    return (
        f"MIG profile {normalize_profile_name(profile)} is a compute instance of {ci} compute "
        f"slice(s) inside a {gi}-slice GPU instance ({gi_profile}); NVIDIA's DRA kubelet "
        "plugin publishes only compute instances that span their whole GPU instance and "
        "exits at start on any other, so its pod crash-loops on this node",
        f"use the GPU-instance profile {gi_profile} (one compute instance spanning it)",
    )


def normalize_profile_name(name: str) -> str:
    """``"MIG 1g.18gb"`` / ``" 1G.18GB "`` -> ``"1g.18gb"`` (no validation against a model)."""
    text = name.strip()
    if text[:4].upper() == "MIG ":
        text = text[4:].strip()
    return text.lower()


def gib_to_mib(gib: float) -> int:
    """GiB as ``-lgip`` prints them (2 decimals) -> MiB, the nearest multiple of 64."""
    return round(gib * 16) * 64


@dataclass(frozen=True)
class GIProfile:
    """One GPU-instance profile of one GPU model.

    ``slices`` is the placement size in memory slices (the ``:size`` of ``-lgipp``);
    ``memory_mib`` the GI's memory in MiB; ``placements`` the allowed start slots;
    ``max_instances`` the ``Total`` of ``-lgip``'s ``Free/Total``; ``ci_profile_id`` the
    CI profile ID of the full-size compute instance (``-lcip`` default ``*``);
    ``derived`` the fields that no cited source states for this profile (``id``,
    ``gib``, ``sm``, ``engines``, ``placements``; see ``mig.tables``), empty for a
    profile read from the node.
    """

    name: str
    profile_id: int
    slices: int
    memory_mib: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    max_instances: int
    placements: tuple[int, ...]
    ci_profile_id: int
    derived: tuple[str, ...] = field(default=(), compare=False)

    @property
    def placement_size(self) -> int:
        """Memory slices one instance occupies (the size printed by ``-lgipp``)."""
        return self.slices

    @property
    def compute_slices(self) -> int:
        """Compute slices (the ``Ng`` of the name): 1 for ``1g.35gb``, 7 for ``7g.141gb``."""
        return _gi_slices(self.name)

    @property
    def media_extensions(self) -> bool:
        """True for ``+me`` profiles (they hold the GPU's media extensions)."""
        return "+me" in self.name

    @property
    def full_name(self) -> str:
        """The name as ``nvidia-smi`` prints it: ``MIG 1g.18gb``."""
        return f"MIG {self.name}"

    def slots(self, start: int) -> range:
        """Memory slices an instance placed at ``start`` occupies."""
        return range(start, start + self.slices)


@dataclass(frozen=True)
class GpuModel:
    """A MIG-capable GPU model.

    ``name`` is the NVML / ``nvidia-smi -L`` name; ``memory_mib`` the total framebuffer
    (``nvidia-smi -q`` "FB Memory Usage / Total"); ``total_slices`` the memory slices
    (8, or 4 on A30); ``pci_device_ids`` the PCI device IDs (``nvidia-smi -q`` "Device
    Id", the form mig-parted's ``device-filter`` matches, e.g. ``0x233510DE``);
    ``source`` where the profile table comes from and ``note`` where the name, device IDs
    and framebuffer come from and what is not sourced (``mig.tables``; for a model read
    from the node: its ``nvidia-smi mig`` output); ``layout`` the key of the table,
    shared by same-layout variants (H200 NVL and H200, H800 and H100, A800 and A100);
    ``other_names`` the ``(name, source)`` of every other name that NVML and ``nvidia-smi``
    print for this GPU (``NVIDIA B300 SXM6 AC`` for ``NVIDIA B300``).
    A model with no profiles is known by name but has no sourced MIG table: plan it
    from the node's ``nvidia-smi mig -lgip``/``-lgipp``.
    """

    name: str
    memory_mib: int
    total_slices: int
    architecture: str
    compute_capability: str
    profiles: tuple[GIProfile, ...]
    pci_device_ids: tuple[str, ...] = ()
    source: str = field(default="", compare=False)
    note: str = field(default="", compare=False)
    layout: str = field(default="", compare=False)
    other_names: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def nvml_names(self) -> tuple[str, ...]:
        """Every name this GPU is known by: ``name`` and the ``(name, source)`` pairs of
        ``other_names`` (the other names NVML and ``nvidia-smi`` print for it)."""
        return (self.name, *(n for n, _unused in self.other_names))

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)

    def profile(self, name_or_id: str | int) -> GIProfile:
        """Look a profile up by name (``1g.18gb``, ``MIG 1g.18gb``) or GI profile ID.

        Raises ``UnknownProfile`` naming the valid profiles of this model.
        """
        if isinstance(name_or_id, bool):
            raise UnknownProfile(self._unknown(name_or_id))
        if isinstance(name_or_id, int) or (
            isinstance(name_or_id, str) and name_or_id.strip().isdigit()
        ):
            pid = int(name_or_id)
            for p in self.profiles:
                if p.profile_id == pid:
                    return p
            raise UnknownProfile(self._unknown(name_or_id))
        if isinstance(name_or_id, str):
            wanted = normalize_profile_name(name_or_id)
            for p in self.profiles:
                if p.name == wanted:
                    return p
        raise UnknownProfile(self._unknown(name_or_id))

    def _unknown(self, value: object) -> str:
        if not self.profiles:
            return (
                f"MIG profile {value!r}: {self.name} has no sourced MIG profile table "
                f"({self.note}); plan it from the node's own answer: pass the output of "
                "'nvidia-smi mig -lgip' and '-lgipp' (gpufleet mig plan --lgip FILE "
                "--lgipp FILE)"
            )
        valid = ", ".join(f"{p.name} (ID {p.profile_id})" for p in self.profiles)
        return f"MIG profile {value!r} does not exist on {self.name}; valid profiles: {valid}"


def _memory_mib(name: str, gib: float | None) -> int:
    """MiB of a table row: from ``-lgip``'s GiB, else the name's decimal GB (derived)."""
    if gib is not None:
        return gib_to_mib(gib)
    parsed = parse_profile(name)
    if parsed is None:
        raise LgipParseError(f"{name!r} is not a MIG profile name")
    return round(parsed.memory_gb * 10**9 / 2**20 / 64) * 64


def _profile(row: tuple) -> GIProfile:
    name, pid, slices, gib, sm, ce, dec, enc, jpeg, ofa, most, starts, derived = row
    return GIProfile(
        name=name,
        profile_id=pid,
        slices=slices,
        memory_mib=_memory_mib(name, gib),
        multiprocessors=sm,
        copy_engines=ce,
        decoders=dec,
        encoders=enc,
        jpeg_engines=jpeg,
        ofa_engines=ofa,
        max_instances=most,
        placements=tuple(starts),
        ci_profile_id=ci_profile_id_for(_gi_slices(name)),
        derived=tuple(derived) + (("gib",) if gib is None and "gib" not in derived else ()),
    )


def _builtin() -> tuple[GpuModel, ...]:
    """``GpuModel`` per row of ``mig.tables.GPUS``. A GPU whose framebuffer total is not
    sourced gets its full-GPU profile's memory (its ``note`` says so)."""
    out = []
    for row in mig_tables.GPUS:
        name, key, fb, arch, cc, ids, note = row[:7]
        others = tuple(row[7]) if len(row) > 7 else ()
        layout = mig_tables.LAYOUTS[key]
        profiles = tuple(_profile(r) for r in layout["rows"])
        if fb is None:
            fb = max((p.memory_mib for p in profiles), default=0)
        out.append(
            GpuModel(
                name=name,
                memory_mib=fb,
                total_slices=layout["total_slices"],
                architecture=arch,
                compute_capability=cc,
                profiles=profiles,
                pci_device_ids=tuple(ids),
                source=layout["source"],
                note=note,
                layout=key,
                other_names=others,
            )
        )
    return tuple(out)


#: Built-in MIG data, keyed by NVML name (``nvidia-smi -L`` / ``--query-gpu=name``); the
#: tables and their sources are in ``mig.tables``.
MODELS: dict[str, GpuModel] = {m.name: m for m in _builtin()}

#: Short names accepted by ``model()`` (and the CLI's ``--gpu-model``).
ALIASES: dict[str, str] = dict(mig_tables.ALIASES)

#: Every other name NVML prints for a built-in GPU -> the name it is listed under
#: (``GpuModel.other_names``; sources in ``mig.tables``).
NVML_NAMES: dict[str, str] = {o: m.name for m in MODELS.values() for o, _src in m.other_names}


def model_by_device_id(device_id: str) -> GpuModel | None:
    """The built-in model whose PCI device IDs include ``device_id`` (``0x233510DE``,
    any case), or None."""
    want = str(device_id).strip().lower()
    for m in MODELS.values():
        if want in {d.lower() for d in m.pci_device_ids}:
            return m
    return None


def _key(name: str) -> str:
    return " ".join(name.split()).lower()


def model(name: str) -> GpuModel:
    """Return the built-in ``GpuModel`` for an NVML name or a short alias.

    The name is matched exactly against each model's ``nvml_names`` (its listed name and
    every other name NVML prints for it: ``NVIDIA B300 SXM6 AC``, ``NVIDIA GH200 480GB``),
    then against the short aliases; never by likeness. Case and repeated spaces are
    ignored; a name without the ``NVIDIA `` prefix (older drivers print ``A100-SXM4-40GB``)
    is accepted. Raises ``UnknownGpuModel`` listing the known names and aliases.
    """
    key = _key(str(name))
    by_key = {_key(n): m for m in MODELS.values() for n in m.nvml_names}
    if key in by_key:
        return by_key[key]
    if "nvidia " + key in by_key:
        return by_key["nvidia " + key]
    if key in ALIASES:
        return MODELS[ALIASES[key]]
    raise UnknownGpuModel(
        f"GPU model {str(name)[:120]!r} has no MIG profile data; known models: "
        + ", ".join(n for m in MODELS.values() for n in m.nvml_names)
        + "; short names: "
        + ", ".join(ALIASES)
    )


# --- parsers --------------------------------------------------------------------------

_LGIP_ROW1 = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<id>\d+)\s+(?P<free>\d+)/(?P<total>\d+)"
    r"\s+(?P<gib>\d+(?:\.\d+)?)\s+(?P<p2p>\w+)\s+(?P<sm>\d+)\s+(?P<dec>\d+)\s+(?P<enc>\d+)\s*\|\s*$"
)
_LGIP_ROW2 = re.compile(r"^\|\s+(?P<ce>\d+)\s+(?P<jpeg>\d+)\s+(?P<ofa>\d+)\s*\|\s*$")
_LGIPP_ROW = re.compile(
    r"^GPU\s+(?P<gpu>\d+)\s+Profile ID\s+(?P<id>\d+)\s+Placements?\s*:\s*"
    r"\{(?P<starts>[\d,\s]*)\}\s*:\s*(?P<size>\d+)\s*$"
)


def parse_lgip(text: str) -> list[dict]:
    """Parse ``nvidia-smi mig -lgip`` into one dict per (GPU, profile) row.

    Keys: ``gpu`` (int index), ``name`` (``1g.18gb``), ``profile_id``, ``free``,
    ``total`` (max instances), ``memory_gib`` (float, as printed), ``memory_mib`` (int,
    see ``gib_to_mib``), ``p2p`` (bool), ``multiprocessors``, ``decoders``, ``encoders``,
    ``copy_engines``, ``jpeg_engines``, ``ofa_engines``. Lines outside the table (a
    ``$ command`` line, ``# comment`` lines, ``[exit N]``) are ignored. Raises
    ``LgipParseError`` when a profile row has no second (CE/JPEG/OFA) line or when no
    row is found in text that holds the ``GPU instance profiles:`` header.
    """
    rows: list[dict] = []
    pending: dict | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        m1 = _LGIP_ROW1.match(line)
        if m1:
            if pending is not None:
                raise LgipParseError(
                    f"-lgip line {lineno}: profile row for {pending['name']} has no "
                    "CE/JPEG/OFA line under it"
                )
            g = m1.groupdict()
            gib = float(g["gib"])
            pending = {
                "gpu": int(g["gpu"]),
                "name": normalize_profile_name(g["name"]),
                "profile_id": int(g["id"]),
                "free": int(g["free"]),
                "total": int(g["total"]),
                "memory_gib": gib,
                "memory_mib": gib_to_mib(gib),
                "p2p": g["p2p"].lower() == "yes",
                "multiprocessors": int(g["sm"]),
                "decoders": int(g["dec"]),
                "encoders": int(g["enc"]),
            }
            continue
        m2 = _LGIP_ROW2.match(line)
        if m2 and pending is not None:
            pending["copy_engines"] = int(m2["ce"])
            pending["jpeg_engines"] = int(m2["jpeg"])
            pending["ofa_engines"] = int(m2["ofa"])
            rows.append(pending)
            pending = None
    if pending is not None:
        raise LgipParseError(
            f"-lgip output ends after the profile row for {pending['name']} without its "
            "CE/JPEG/OFA line"
        )
    if not rows and "GPU instance profiles" in text:
        raise LgipParseError("-lgip output has the profile table header but no profile row")
    return rows


def parse_lgipp(text: str) -> dict[int, dict[int, tuple[tuple[int, ...], int]]]:
    """Parse ``nvidia-smi mig -lgipp`` into ``{gpu: {profile_id: (starts, size)}}``.

    ``starts`` are the allowed placement starts, ``size`` the memory slices taken, as in
    ``GPU  0 Profile ID  9 Placements: {0,4}:4``. Other lines are ignored. Raises
    ``LgipParseError`` on a ``Profile ID`` line that does not have that shape.
    """
    out: dict[int, dict[int, tuple[tuple[int, ...], int]]] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = _LGIPP_ROW.match(line)
        if not m:
            if line.startswith("GPU") and "Profile ID" in line:
                raise LgipParseError(f"-lgipp line {lineno} is not GPU/Profile/placements: {line}")
            continue
        starts = tuple(int(s) for s in m["starts"].replace(" ", "").split(",") if s)
        out.setdefault(int(m["gpu"]), {})[int(m["id"])] = (starts, int(m["size"]))
    return out


_LGI_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+MIG\s+(?P<name>\S+)\s+(?P<pid>\d+)\s+(?P<gi>\d+)\s+"
    r"(?P<start>\d+):(?P<size>\d+)\s*\|\s*$"
)


def parse_lgi(text: str) -> list[dict]:
    """Parse ``nvidia-smi mig -lgi`` into one dict per GPU instance.

    Keys: ``gpu``, ``profile`` (``3g.20gb``), ``profile_id``, ``instance_id`` (the GI ID),
    ``start`` and ``size`` (placement, memory slices). Both the wide table of current
    drivers and the narrower one of the NVIDIA MIG user guide examples are read.
    ``No GPU instances found: Not Found`` gives ``[]``.
    """
    out = []
    for raw in text.splitlines():
        m = _LGI_ROW.match(raw.rstrip())
        if m:
            out.append(
                {
                    "gpu": int(m["gpu"]),
                    "profile": normalize_profile_name(m["name"]),
                    "profile_id": int(m["pid"]),
                    "instance_id": int(m["gi"]),
                    "start": int(m["start"]),
                    "size": int(m["size"]),
                }
            )
    return out


def _arch_of(name: str) -> tuple[str, str]:
    low = name.lower()
    if any(k in low for k in ("a100", "a800", "a30")):
        return "Ampere", "8.0"
    if any(k in low for k in ("h100", "h200", "h800", "h20", "gh200")):
        return "Hopper", "9.0"
    if any(k in low for k in ("b200", "b300", "gb200", "gb300")):
        return "Blackwell", "10.0"
    return "unknown", "unknown"


#: The largest GPU geometry a node's own answer may describe: memory slices, profiles and
#: placements per profile. Every MIG-capable NVIDIA GPU has 8 memory slices (4 on A30 and
#: RTX PRO 6000 Blackwell) and at most 11 GPU-instance profiles (NVIDIA MIG user guide,
#: "Supported MIG Profiles"); 64 leaves room for GPUs to come and bounds the planner.
MAX_MEMORY_SLICES = 64
MAX_PROFILES = 64


def _node_ci_profile_id(name: str) -> int:
    """The full-size CI profile ID of a GPU-instance profile a node reported; raises
    ``LgipParseError`` for a name that is not one or whose compute slices no NVML CI
    profile spans (``5g.50gb``)."""
    try:
        return ci_profile_id_for(_gi_slices(name))
    except ValueError as exc:
        raise LgipParseError(
            f"profile {name!r} in the node's answer: {exc}; give the unedited output of "
            "'nvidia-smi mig -lgip'"
        ) from None


def check_geometry(name: str, profiles: list[GIProfile] | tuple[GIProfile, ...], what: str) -> int:
    """The memory slices of a GPU read from a node (the end of its last placement), after
    checking that ``profiles`` describe a MIG geometry: at most ``MAX_PROFILES`` profiles
    with distinct names and IDs, each 1 to ``MAX_MEMORY_SLICES`` slices wide with every
    placement inside the first ``MAX_MEMORY_SLICES`` slices, and at least one placement
    in all. Raises ``LgipParseError`` naming ``what``, the profile and the fix."""
    fix = "give the unedited output of 'nvidia-smi mig -lgip' and '-lgipp' of the node"
    if len(profiles) > MAX_PROFILES:
        raise LgipParseError(
            f"{name}: {what} lists {len(profiles)} GPU-instance profiles, more than the "
            f"{MAX_PROFILES} any GPU has; {fix}"
        )
    seen: dict[object, str] = {}
    for p in profiles:
        for key in (("name", p.name), ("ID", p.profile_id)):
            if key in seen:
                raise LgipParseError(f"{name}: {what} lists profile {key[0]} {key[1]} twice; {fix}")
            seen[key] = p.name
        if not 1 <= p.slices <= MAX_MEMORY_SLICES:
            raise LgipParseError(
                f"{name}: {what}: profile {p.name} (ID {p.profile_id}) is {p.slices} memory "
                f"slices wide; a placement is 1 to {MAX_MEMORY_SLICES} slices; {fix}"
            )
        bad = [s for s in p.placements if s < 0 or s + p.slices > MAX_MEMORY_SLICES]
        if bad:
            raise LgipParseError(
                f"{name}: {what}: profile {p.name} (ID {p.profile_id}) has placement start "
                f"{bad[0]} of size {p.slices}, past the {MAX_MEMORY_SLICES} memory slices "
                f"any GPU has; {fix}"
            )
    ends = [s + p.slices for p in profiles for s in p.placements]
    if not ends:
        raise LgipParseError(f"{name}: {what} gives no placement for any profile; {fix}")
    return max(ends)


def model_from_nvidia_smi(
    name: str,
    memory_mib: int,
    lgip_text: str,
    lgipp_text: str | None,
    gpu_index: int | None = None,
) -> GpuModel:
    """Build a ``GpuModel`` from what a node prints; parsed data wins over built-in data.

    ``name`` is the NVML name, ``memory_mib`` the framebuffer total in MiB,
    ``lgip_text``/``lgipp_text`` the output of ``nvidia-smi mig -lgip``/``-lgipp``.
    ``gpu_index`` selects the GPU's rows (default: the lowest index found). Without
    ``-lgipp`` rows for a profile, placements come from the built-in model when it has the
    same profile ID and name. Architecture and compute capability come from the built-in
    model, else from the name. Raises ``LgipParseError`` when no profile row is found for
    the GPU or a profile has no known placements.
    """
    rows = parse_lgip(lgip_text)
    if not rows:
        raise LgipParseError(f"no MIG profile rows in the -lgip output for {name!r}")
    index = min(r["gpu"] for r in rows) if gpu_index is None else gpu_index
    rows = [r for r in rows if r["gpu"] == index]
    if not rows:
        raise LgipParseError(f"-lgip output has no rows for GPU {index}")
    placements = parse_lgipp(lgipp_text or "").get(index, {})
    try:
        builtin: GpuModel | None = model(name)
    except UnknownGpuModel:
        builtin = None
    profiles = []
    for r in rows:
        if r["profile_id"] in placements:
            starts, size = placements[r["profile_id"]]
        else:
            known = None
            if builtin is not None:
                known = next(
                    (
                        p
                        for p in builtin.profiles
                        if p.profile_id == r["profile_id"] and p.name == r["name"]
                    ),
                    None,
                )
            if known is None:
                raise LgipParseError(
                    f"no placements for profile {r['name']} (ID {r['profile_id']}) on GPU "
                    f"{index}: pass the output of 'nvidia-smi mig -lgipp'"
                )
            starts, size = known.placements, known.slices
        profiles.append(
            GIProfile(
                name=r["name"],
                profile_id=r["profile_id"],
                slices=size,
                memory_mib=r["memory_mib"],
                multiprocessors=r["multiprocessors"],
                copy_engines=r["copy_engines"],
                decoders=r["decoders"],
                encoders=r["encoders"],
                jpeg_engines=r["jpeg_engines"],
                ofa_engines=r["ofa_engines"],
                max_instances=r["total"],
                placements=starts,
                ci_profile_id=_node_ci_profile_id(r["name"]),
            )
        )
    arch, cc = (builtin.architecture, builtin.compute_capability) if builtin else _arch_of(name)
    total = check_geometry(name, profiles, "the -lgip/-lgipp output")
    return GpuModel(
        name=name,
        memory_mib=int(memory_mib),
        total_slices=total,
        architecture=arch,
        compute_capability=cc,
        profiles=tuple(profiles),
        pci_device_ids=builtin.pci_device_ids if builtin else (),
        source=f"the node's nvidia-smi mig -lgip (GPU {index})"
        + (" and -lgipp" if placements else ""),
        note=builtin.note if builtin else "not in the built-in tables (mig_tables)",
        layout=builtin.layout if builtin else "",
    )


def with_name(gpu_model: GpuModel, name: str) -> GpuModel:
    """A copy of ``gpu_model`` under another NVML name (same profiles)."""
    return replace(gpu_model, name=name)


# --- the node's own answer as facts -----------------------------------------------------

#: Keys of one profile record in ``gpufleet_gpus[].mig_profiles`` (``profile_facts``).
FACT_KEYS = (
    "name", "profile_id", "slices", "memory_mib", "multiprocessors", "copy_engines",
    "decoders", "encoders", "jpeg_engines", "ofa_engines", "max_instances", "placements",
)  # fmt: skip


def profile_facts(lgip_text: str, lgipp_text: str) -> dict[int, list[dict]]:
    """``{gpu index: [profile record]}`` from ``nvidia-smi mig -lgip`` and ``-lgipp``, the
    shape the ``gpu_facts`` module publishes per GPU as ``mig.profiles`` (keys
    ``FACT_KEYS``; memory in MiB, ``slices`` and ``placements`` in memory slices). A profile
    without a ``-lgipp`` row is left out (its placements are unknown). Raises
    ``LgipParseError`` for output that cannot be read."""
    rows = parse_lgip(lgip_text)
    placements = parse_lgipp(lgipp_text)
    out: dict[int, list[dict]] = {}
    for r in rows:
        where = placements.get(r["gpu"], {}).get(r["profile_id"])
        if where is None:
            continue
        starts, size = where
        out.setdefault(r["gpu"], []).append(
            {
                "name": r["name"],
                "profile_id": r["profile_id"],
                "slices": size,
                "memory_mib": r["memory_mib"],
                "multiprocessors": r["multiprocessors"],
                "copy_engines": r["copy_engines"],
                "decoders": r["decoders"],
                "encoders": r["encoders"],
                "jpeg_engines": r["jpeg_engines"],
                "ofa_engines": r["ofa_engines"],
                "max_instances": r["total"],
                "placements": list(starts),
            }
        )
    return out


def model_from_facts(name: str, memory_mib: int | None, profiles: list) -> GpuModel:
    """A ``GpuModel`` from the ``mig.profiles`` records of a gathered GPU (see
    ``profile_facts``): what the node reports, whatever the built-in tables say.
    Architecture, compute capability and PCI device IDs come from the built-in model of
    ``name`` when there is one. Raises ``LgipParseError`` naming the record and key for a
    record that lacks a key or holds a value of the wrong type, or for no record at all."""
    if not isinstance(profiles, list) or not profiles:
        raise LgipParseError(f"{name}: mig_profiles is empty; the node reported no profile")
    built = []
    for i, rec in enumerate(profiles):
        if not isinstance(rec, dict):
            raise LgipParseError(f"{name}: mig_profiles[{i}] is not a mapping: {rec!r}")
        for key in FACT_KEYS:
            value = rec.get(key)
            ok = (
                isinstance(value, str)
                if key == "name"
                else (
                    isinstance(value, list) and all(isinstance(v, int) for v in value)
                    if key == "placements"
                    else isinstance(value, int) and not isinstance(value, bool)
                )
            )
            if not ok:
                raise LgipParseError(
                    f"{name}: mig_profiles[{i}].{key} is {value!r}; gather the GPU facts "
                    "again (module gpufleet.cluster.gpu_facts)"
                )
        pname = normalize_profile_name(rec["name"])
        built.append(
            GIProfile(
                name=pname,
                profile_id=rec["profile_id"],
                slices=rec["slices"],
                memory_mib=rec["memory_mib"],
                multiprocessors=rec["multiprocessors"],
                copy_engines=rec["copy_engines"],
                decoders=rec["decoders"],
                encoders=rec["encoders"],
                jpeg_engines=rec["jpeg_engines"],
                ofa_engines=rec["ofa_engines"],
                max_instances=rec["max_instances"],
                placements=tuple(rec["placements"]),
                ci_profile_id=_node_ci_profile_id(pname),
            )
        )
    try:
        builtin: GpuModel | None = model(name)
    except UnknownGpuModel:
        builtin = None
    arch, cc = (builtin.architecture, builtin.compute_capability) if builtin else _arch_of(name)
    return GpuModel(
        name=name,
        memory_mib=int(memory_mib or 0),
        total_slices=check_geometry(name, built, "mig_profiles"),
        architecture=arch,
        compute_capability=cc,
        profiles=tuple(built),
        pci_device_ids=builtin.pci_device_ids if builtin else (),
        source="the node's nvidia-smi mig -lgip/-lgipp (gathered GPU facts)",
        note=builtin.note if builtin else "not in the built-in tables (mig_tables)",
        layout=builtin.layout if builtin else "",
    )
