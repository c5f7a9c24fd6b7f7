# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""MIG GPU-instance profiles per GPU model, and parsers of ``nvidia-smi mig`` output.

Standard library only: Ansible ships ``module_utils`` to managed hosts, and the GPU
simulator copies this file alone onto lab nodes.

Vocabulary (NVIDIA MIG user guide, "Concepts"):

* A MIG-capable GPU has 8 *memory slices* (4 on A30) and 7 *compute slices* (4 on A30).
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
from dataclasses import dataclass, replace

__all__ = [
    "MODELS",
    "GIProfile",
    "GpuModel",
    "LgipParseError",
    "UnknownGpuModel",
    "UnknownProfile",
    "ci_profile_id_for",
    "gib_to_mib",
    "model",
    "model_from_nvidia_smi",
    "normalize_profile_name",
    "parse_lgi",
    "parse_lgip",
    "parse_lgipp",
]


class UnknownProfile(ValueError):
    """A MIG profile name or ID that the GPU model does not have."""


class UnknownGpuModel(ValueError):
    """A GPU name for which no MIG profile data is known."""


class LgipParseError(ValueError):
    """``nvidia-smi mig -lgip`` / ``-lgipp`` output that cannot be read."""


# NVML_COMPUTE_INSTANCE_PROFILE_<N>_SLICE values (nvml.h): CI slices -> CI profile ID.
_CI_PROFILE_ID_BY_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}

_PROFILE_NAME_RE = re.compile(r"^(\d+)g\.(\d+)gb((?:[+-][a-z]+)(?:\.[a-z]+)?)?$")


def ci_profile_id_for(compute_slices: int) -> int:
    """Return the CI profile ID of a compute instance spanning ``compute_slices`` slices.

    Source: nvml.h ``NVML_COMPUTE_INSTANCE_PROFILE_*_SLICE``. Raises ``ValueError`` for a
    slice count NVML has no CI profile for.
    """
    try:
        return _CI_PROFILE_ID_BY_SLICES[compute_slices]
    except KeyError:
        raise ValueError(f"no compute-instance profile spans {compute_slices} slices") from None


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
    CI profile ID of the full-size compute instance (``-lcip`` default ``*``).
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

    @property
    def placement_size(self) -> int:
        """Memory slices one instance occupies (the size printed by ``-lgipp``)."""
        return self.slices

    @property
    def compute_slices(self) -> int:
        """Compute slices (the ``Ng`` of the name): 1 for ``1g.35gb``, 7 for ``7g.141gb``."""
        return int(self.name.split("g.", 1)[0])

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
    Id", the form mig-parted's ``device-filter`` matches, e.g. ``0x233510DE``).
    """

    name: str
    memory_mib: int
    total_slices: int
    architecture: str
    compute_capability: str
    profiles: tuple[GIProfile, ...]
    pci_device_ids: tuple[str, ...] = ()

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
        valid = ", ".join(f"{p.name} (ID {p.profile_id})" for p in self.profiles)
        return f"MIG profile {value!r} does not exist on {self.name}; valid profiles: {valid}"


def _p(
    name: str,
    profile_id: int,
    slices: int,
    memory_mib: int,
    sm: int,
    ce: int,
    dec: int,
    enc: int,
    jpeg: int,
    ofa: int,
    max_instances: int,
    placements: tuple[int, ...],
) -> GIProfile:
    compute = int(name.split("g.", 1)[0])
    return GIProfile(
        name=name,
        profile_id=profile_id,
        slices=slices,
        memory_mib=memory_mib,
        multiprocessors=sm,
        copy_engines=ce,
        decoders=dec,
        encoders=enc,
        jpeg_engines=jpeg,
        ofa_engines=ofa,
        max_instances=max_instances,
        placements=placements,
        ci_profile_id=ci_profile_id_for(compute),
    )


_ALL7 = (0, 1, 2, 3, 4, 5, 6)
_EVEN4 = (0, 2, 4, 6)
_EVEN3 = (0, 2, 4)
_HALVES = (0, 4)

# --- NVIDIA H200 (141 GB) -------------------------------------------------------------
# Source: real capture on an H200, driver 580.159.04 (tests/unit/data/gpu/h200-single/:
# smi-mig-lgip.txt, smi-mig-lgipp.txt, nvml.txt memorySizeMB, smi-q.txt FB total).
_H200 = (
    _p("1g.18gb", 19, 1, 16384, 16, 1, 1, 0, 1, 0, 7, _ALL7),
    _p("1g.18gb+me", 20, 1, 16384, 16, 1, 1, 0, 1, 1, 1, _ALL7),
    _p("1g.35gb", 15, 2, 33280, 26, 1, 1, 0, 1, 0, 4, _EVEN4),
    _p("2g.35gb", 14, 2, 33280, 32, 2, 2, 0, 2, 0, 3, _EVEN3),
    _p("3g.71gb", 9, 4, 71424, 60, 3, 3, 0, 3, 0, 2, _HALVES),
    _p("4g.71gb", 5, 4, 71424, 64, 4, 4, 0, 4, 0, 1, (0,)),
    _p("7g.141gb", 0, 8, 143360, 132, 8, 7, 0, 7, 1, 1, (0,)),
)

# --- NVIDIA A100-SXM4-40GB --------------------------------------------------------------
# Source: NVIDIA MIG user guide, getting-started-with-mig, "nvidia-smi mig -lgip" and
# "-lgipp" examples for A100-SXM4-40GB (tests/unit/data/gpu/public/a100-sxm4-40gb/
# nvdocs-lgipp.txt). 1g.10gb (ID 15) needs driver R525 or later.
_A100_40 = (
    _p("1g.5gb", 19, 1, gib_to_mib(4.75), 14, 1, 0, 0, 0, 0, 7, _ALL7),
    _p("1g.5gb+me", 20, 1, gib_to_mib(4.75), 14, 1, 1, 0, 1, 1, 1, _ALL7),
    _p("1g.10gb", 15, 2, gib_to_mib(9.62), 14, 1, 1, 0, 0, 0, 4, _EVEN4),
    _p("2g.10gb", 14, 2, gib_to_mib(9.62), 28, 2, 1, 0, 0, 0, 3, _EVEN3),
    _p("3g.20gb", 9, 4, gib_to_mib(19.50), 42, 3, 2, 0, 0, 0, 2, _HALVES),
    _p("4g.20gb", 5, 4, gib_to_mib(19.50), 56, 4, 2, 0, 0, 0, 1, (0,)),
    _p("7g.40gb", 0, 8, gib_to_mib(39.25), 98, 7, 5, 0, 1, 1, 1, (0,)),
)

# --- NVIDIA A100-PCIE-40GB ------------------------------------------------------------
# Source: public capture, driver 510.47.03 (tests/unit/data/gpu/public/a100-pcie-40gb/
# lgip.txt); placements and 1g.10gb (R525+, absent from that capture) as A100-SXM4-40GB
# in the NVIDIA MIG user guide (same GA100 MIG geometry), its memory that of 2g.10gb on
# the same two memory slices.
_A100_PCIE_40 = (
    _p("1g.5gb", 19, 1, gib_to_mib(4.75), 14, 1, 0, 0, 0, 0, 7, _ALL7),
    _p("1g.5gb+me", 20, 1, gib_to_mib(4.75), 14, 1, 1, 0, 1, 1, 1, _ALL7),
    _p("1g.10gb", 15, 2, gib_to_mib(9.75), 14, 1, 1, 0, 0, 0, 4, _EVEN4),
    _p("2g.10gb", 14, 2, gib_to_mib(9.75), 28, 2, 1, 0, 0, 0, 3, _EVEN3),
    _p("3g.20gb", 9, 4, gib_to_mib(19.62), 42, 3, 2, 0, 0, 0, 2, _HALVES),
    _p("4g.20gb", 5, 4, gib_to_mib(19.62), 56, 4, 2, 0, 0, 0, 1, (0,)),
    _p("7g.40gb", 0, 8, gib_to_mib(39.50), 98, 7, 5, 0, 1, 1, 1, (0,)),
)

# --- NVIDIA A100 80GB (SXM4 and PCIe) ---------------------------------------------------
# Source: public "nvidia-smi mig -lgip" capture of an "NVIDIA A100 80GB PCIe", driver
# 515.86.01 (NVIDIA MIG guide profile names; placements as A100-40GB, GA100 geometry).
# 1g.20gb (ID 15, R525+) is not in that capture: name and count from the NVIDIA MIG user
# guide "Supported MIG Profiles" A100-80GB table, memory and engines as 2g.20gb / the
# A100-40GB 1g.10gb row (one compute slice on two memory slices).
_A100_80 = (
    _p("1g.10gb", 19, 1, gib_to_mib(9.50), 14, 1, 0, 0, 0, 0, 7, _ALL7),
    _p("1g.10gb+me", 20, 1, gib_to_mib(9.50), 14, 1, 1, 0, 1, 1, 1, _ALL7),
    _p("1g.20gb", 15, 2, gib_to_mib(19.50), 14, 1, 1, 0, 0, 0, 4, _EVEN4),
    _p("2g.20gb", 14, 2, gib_to_mib(19.50), 28, 2, 1, 0, 0, 0, 3, _EVEN3),
    _p("3g.40gb", 9, 4, gib_to_mib(39.25), 42, 3, 2, 0, 0, 0, 2, _HALVES),
    _p("4g.40gb", 5, 4, gib_to_mib(39.25), 56, 4, 2, 0, 0, 0, 1, (0,)),
    _p("7g.80gb", 0, 8, gib_to_mib(79.00), 98, 7, 5, 0, 1, 1, 1, (0,)),
)

# --- NVIDIA A30 (24 GB) ---------------------------------------------------------------
# Source: public capture (tests/unit/data/gpu/public/a30-24gb/lgip-all-used.txt and
# lgipp.txt). 2g.12gb+me (ID 6, R525+) is not in that capture: listed in the NVIDIA MIG
# user guide A30 table (1 instance); placements as 2g.12gb, engines as 2g.12gb plus the
# media extensions of 1g.6gb+me (JPEG 1, OFA 1).
_A30 = (
    _p("1g.6gb", 14, 1, gib_to_mib(5.81), 14, 1, 1, 0, 0, 0, 4, (0, 1, 2, 3)),
    _p("1g.6gb+me", 21, 1, gib_to_mib(5.81), 14, 1, 1, 0, 1, 1, 1, (0, 1, 2, 3)),
    _p("2g.12gb", 5, 2, gib_to_mib(11.69), 28, 2, 2, 0, 0, 0, 2, (0, 2)),
    _p("2g.12gb+me", 6, 2, gib_to_mib(11.69), 28, 2, 2, 0, 1, 1, 1, (0, 2)),
    _p("4g.24gb", 0, 4, gib_to_mib(23.50), 56, 4, 4, 0, 1, 1, 1, (0,)),
)

# --- NVIDIA H100 80GB (SXM5 "H100 80GB HBM3" and "H100 PCIe") ----------------------------
# Source: public "nvidia-smi mig -lgip" and "-lgipp" capture of an "NVIDIA H100 80GB HBM3"
# (nvidia-smi usage notes, same rows on an H100 SXM5 80GB Rocky Linux cluster page);
# FB total 81559 MiB from the NVIDIA MIG user guide R580 nvidia-smi example
# (tests/unit/data/gpu/public/h100-80gb-hbm3/nvdocs-smi-mig-mps-580.txt).
_H100_80 = (
    _p("1g.10gb", 19, 1, gib_to_mib(9.75), 16, 1, 1, 0, 1, 0, 7, _ALL7),
    _p("1g.10gb+me", 20, 1, gib_to_mib(9.75), 16, 1, 1, 0, 1, 1, 1, _ALL7),
    _p("1g.20gb", 15, 2, gib_to_mib(19.62), 26, 1, 1, 0, 1, 0, 4, _EVEN4),
    _p("2g.20gb", 14, 2, gib_to_mib(19.62), 32, 2, 2, 0, 2, 0, 3, _EVEN3),
    _p("3g.40gb", 9, 4, gib_to_mib(39.50), 60, 3, 3, 0, 3, 0, 2, _HALVES),
    _p("4g.40gb", 5, 4, gib_to_mib(39.50), 64, 4, 4, 0, 4, 0, 1, (0,)),
    _p("7g.80gb", 0, 8, gib_to_mib(79.25), 132, 8, 7, 0, 7, 1, 1, (0,)),
)

# --- NVIDIA H100 NVL (94 GB) ------------------------------------------------------------
# Source: public "nvidia-smi mig -lgip" capture of an "NVIDIA H100 NVL" (OpenNebula
# documentation, NVIDIA vGPU/MIG page); placements as every Hopper 8-slice GPU
# (NVIDIA MIG user guide "Supported MIG Profiles", H100-94GB table).
_H100_94 = (
    _p("1g.12gb", 19, 1, gib_to_mib(10.62), 16, 1, 1, 0, 1, 0, 7, _ALL7),
    _p("1g.12gb+me", 20, 1, gib_to_mib(10.62), 16, 1, 1, 0, 1, 1, 1, _ALL7),
    _p("1g.24gb", 15, 2, gib_to_mib(21.50), 26, 1, 1, 0, 1, 0, 4, _EVEN4),
    _p("2g.24gb", 14, 2, gib_to_mib(21.50), 32, 2, 2, 0, 2, 0, 3, _EVEN3),
    _p("3g.47gb", 9, 4, gib_to_mib(46.12), 60, 3, 3, 0, 3, 0, 2, _HALVES),
    _p("4g.47gb", 5, 4, gib_to_mib(46.12), 64, 4, 4, 0, 4, 0, 1, (0,)),
    _p("7g.94gb", 0, 8, gib_to_mib(92.62), 132, 8, 7, 0, 7, 1, 1, (0,)),
)


def _m(
    name: str,
    memory_mib: int,
    arch: str,
    cc: str,
    profiles: tuple[GIProfile, ...],
    pci_device_ids: tuple[str, ...],
) -> GpuModel:
    total = max(start + p.slices for p in profiles for start in p.placements)
    return GpuModel(name, memory_mib, total, arch, cc, profiles, pci_device_ids)


# Framebuffer totals ("FB Memory Usage / Total", MiB): H200 143771 from the real capture
# (smi-q.txt); the others as public nvidia-smi outputs print them: A100 40GB 40960
# (public/a100-pcie-40gb/smi-mig-disabled.txt), A100 80GB 81920 (NVIDIA/mig-parted#31),
# A30 24576, H100 80GB 81559 (NVIDIA MIG user guide R580 example), H100 NVL 95830.
# PCI device IDs: H200 0x233510DE from the real capture; the others from the
# device-filter lists of NVIDIA mig-parted deployments/systemd/config-default.yaml.
_BUILTIN: tuple[GpuModel, ...] = (
    _m("NVIDIA H200", 143771, "Hopper", "9.0", _H200, ("0x233510DE",)),
    _m("NVIDIA A100-SXM4-40GB", 40960, "Ampere", "8.0", _A100_40, ("0x20B010DE",)),
    _m("NVIDIA A100-PCIE-40GB", 40960, "Ampere", "8.0", _A100_PCIE_40, ("0x20F110DE",)),
    _m("NVIDIA A100-SXM4-80GB", 81920, "Ampere", "8.0", _A100_80, ("0x20B210DE",)),
    _m("NVIDIA A100 80GB PCIe", 81920, "Ampere", "8.0", _A100_80, ("0x20B510DE",)),
    _m("NVIDIA A30", 24576, "Ampere", "8.0", _A30, ("0x20B710DE",)),
    _m("NVIDIA H100 80GB HBM3", 81559, "Hopper", "9.0", _H100_80, ("0x233010DE",)),
    _m("NVIDIA H100 PCIe", 81559, "Hopper", "9.0", _H100_80, ("0x233110DE",)),
    _m("NVIDIA H100 NVL", 95830, "Hopper", "9.0", _H100_94, ("0x232110DE",)),
)

#: Built-in MIG data, keyed by NVML name (``nvidia-smi -L`` / ``--query-gpu=name``).
MODELS: dict[str, GpuModel] = {m.name: m for m in _BUILTIN}

#: Short names accepted by ``model()`` (and the CLI's ``--gpu-model``).
ALIASES: dict[str, str] = {
    "h200": "NVIDIA H200",
    "h200-141gb": "NVIDIA H200",
    "a100-40gb": "NVIDIA A100-SXM4-40GB",
    "a100-sxm4-40gb": "NVIDIA A100-SXM4-40GB",
    "a100-pcie-40gb": "NVIDIA A100-PCIE-40GB",
    "a100-80gb": "NVIDIA A100-SXM4-80GB",
    "a100-sxm4-80gb": "NVIDIA A100-SXM4-80GB",
    "a30": "NVIDIA A30",
    "a30-24gb": "NVIDIA A30",
    "h100-80gb": "NVIDIA H100 80GB HBM3",
    "h100": "NVIDIA H100 80GB HBM3",
    "h100-94gb": "NVIDIA H100 NVL",
    "h100-nvl": "NVIDIA H100 NVL",
}


def _key(name: str) -> str:
    return " ".join(name.split()).lower()


def model(name: str) -> GpuModel:
    """Return the built-in ``GpuModel`` for an NVML name or a short alias.

    Case and repeated spaces are ignored; a name without the ``NVIDIA `` prefix (older
    drivers print ``A100-SXM4-40GB``) is accepted. Raises ``UnknownGpuModel`` listing the
    known names and aliases.
    """
    key = _key(str(name))
    by_key = {_key(n): m for n, m in MODELS.items()}
    if key in by_key:
        return by_key[key]
    if "nvidia " + key in by_key:
        return by_key["nvidia " + key]
    if key in ALIASES:
        return MODELS[ALIASES[key]]
    raise UnknownGpuModel(
        f"GPU model {name!r} has no MIG profile data; known models: "
        + ", ".join(MODELS)
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
                ci_profile_id=ci_profile_id_for(int(r["name"].split("g.", 1)[0])),
            )
        )
    arch, cc = (builtin.architecture, builtin.compute_capability) if builtin else _arch_of(name)
    total = max(start + p.slices for p in profiles for start in p.placements)
    return GpuModel(
        name=name,
        memory_mib=int(memory_mib),
        total_slices=total,
        architecture=arch,
        compute_capability=cc,
        profiles=tuple(profiles),
        pci_device_ids=builtin.pci_device_ids if builtin else (),
    )


def with_name(gpu_model: GpuModel, name: str) -> GpuModel:
    """A copy of ``gpu_model`` under another NVML name (same profiles)."""
    return replace(gpu_model, name=name)
