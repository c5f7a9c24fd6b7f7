# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The records of what a host's NVIDIA GPUs are (``GpuInfo``, ``MigDevice``,
``NvLinkPeer``, ``HostGpus``; every ``to_dict`` gives JSON types, memory in MiB), the
errors of a GPU query, and the value readers both backends share: absent answers
(``N/A``, ``[Not Supported]``...: ``absent``), integers, MIG mode, driver and CUDA
versions, the architecture of a compute capability, PCI bus IDs and MIG profile names.

Standard library only (the boot-time MIG apply copies this file to the node).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

#: Answers that mean "this GPU does not have that" (nvidia-smi prints them bare in ``-q``
#: and XML, in brackets in ``--query-gpu`` CSV).
ABSENT = frozenset({"", "N/A", "[N/A]", "Not Supported", "[Not Supported]", "None"})


#: ``nvmlDeviceArchitecture_t`` values, ``NVML_DEVICE_ARCH_*`` in pynvml.py (nvidia-ml-py
#: 13.615.71) and nvml.h: KEPLER=2 MAXWELL=3 PASCAL=4 VOLTA=5 TURING=6 AMPERE=7 ADA=8
#: HOPPER=9 BLACKWELL=10 RUBIN=13; UNKNOWN=0xffffffff. Names as nvidia-smi prints
#: ``Product Architecture`` (``Ada Lovelace`` on the RTX 4070 capture).
NVML_ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}


MIB = 1024 * 1024


class GpuQueryError(Exception):
    """A GPU query could not be answered (a command failed, output could not be parsed)."""


class NoDriverError(GpuQueryError):
    """Neither nvidia-smi nor NVML exists on the host: no NVIDIA driver is installed."""


# ------------------------------------------------------------------ records


@dataclass
class MigDevice:
    """One MIG device (a compute instance inside a GPU instance) of a GPU.

    ``index`` is the MIG device index (``Device N`` of ``nvidia-smi -L``, ``MIG Dev`` of the
    ``nvidia-smi`` table, the index of ``nvmlDeviceGetMigDeviceHandleByIndex``).
    ``profile`` is the device's profile as nvidia-smi names it without the ``MIG `` prefix:
    the GPU instance profile (``1g.18gb``) when the compute instance fills the GPU
    instance, else ``<n>c.<GI profile>`` (``1c.3g.20gb``). ``gi_profile`` is the GPU
    instance profile, ``gi_profile_id`` its ID (``nvidia-smi mig -lgip`` ID column, NVML
    ``nvmlGpuInstanceProfileInfo_t.id``), ``placement_start``/``placement_size`` in memory
    slices (``mig -lgi`` Start:Size). ``memory_mib`` in MiB. Fields a source could not give
    are ``None``.
    """

    index: int | None
    gi_id: int | None
    ci_id: int | None
    profile: str | None
    gi_profile: str | None = None
    gi_profile_id: int | None = None
    ci_profile_id: int | None = None
    placement_start: int | None = None
    placement_size: int | None = None
    uuid: str | None = None
    memory_mib: int | None = None


@dataclass
class NvLinkPeer:
    """Another GPU of the host reached over NVLink; ``links`` is the number of bonded links
    (``NV18`` in ``nvidia-smi topo -m`` is 18)."""

    index: int
    uuid: str | None
    pci_bus_id: str | None
    links: int


@dataclass
class GpuInfo:
    """One physical GPU.

    Units and formats: ``memory_mib`` framebuffer total in MiB (``fb_memory_usage/total``,
    NVML ``nvmlDeviceGetMemoryInfo().total`` / 2**20); ``pci_bus_id`` as nvidia-smi prints
    it (``00000000:19:00.0``, 8-digit domain); ``driver_version`` as the driver reports it
    (``580.159.04``); ``cuda_driver_version`` ``major.minor`` (``13.0``, NVML
    ``nvmlSystemGetCudaDriverVersion`` 13000); ``compute_capability`` ``major.minor``
    (``9.0``). ``mig_mode_current``/``mig_mode_pending`` are ``"Enabled"``, ``"Disabled"``
    or ``None`` on a GPU without MIG (then ``mig_capable`` is false). ``minor_number`` is
    the ``/dev/nvidia<N>`` minor, which the NVIDIA DRA driver names devices after
    (``gpu-<minor>``). ``nvlink_active_links`` is only read on hosts with two GPUs or
    more (``None`` otherwise).
    """

    index: int
    uuid: str
    name: str
    pci_bus_id: str | None = None
    memory_mib: int | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    compute_capability: str | None = None
    architecture: str | None = None
    mig_capable: bool = False
    mig_mode_current: str | None = None
    mig_mode_pending: str | None = None
    mig_devices: list[MigDevice] = field(default_factory=list)
    nvlink_peers: list[NvLinkPeer] = field(default_factory=list)
    nvlink_active_links: int | None = None
    serial: str | None = None
    minor_number: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data, plus the versions as the NVIDIA DRA driver publishes
        them (``driver_version_semver`` ``580.159.4``, ``cuda_driver_version_semver``
        ``13.0.0``, ``compute_capability_semver`` ``9.0.0``; see :func:`semver`)."""
        data = asdict(self)
        data["driver_version_semver"] = semver(self.driver_version)
        data["cuda_driver_version_semver"] = semver(self.cuda_driver_version)
        data["compute_capability_semver"] = semver(self.compute_capability)
        return data


@dataclass
class HostGpus:
    """What :func:`collect_host` found: the backend that answered (``nvml``,
    ``nvidia-smi`` or ``none``), the host's driver and CUDA driver versions, the GPUs in
    index order, and warnings about parts that could not be read."""

    backend: str
    driver_version: str | None
    cuda_driver_version: str | None
    gpus: list[GpuInfo]
    warnings: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ small conversions


def absent(value: str | None) -> str | None:
    """``value`` stripped, or ``None`` when nvidia-smi says the feature is absent."""
    if value is None:
        return None
    value = value.strip()
    return None if value in ABSENT else value


def to_int(value: str | None) -> int | None:
    """The leading integer of ``value`` (``"143771 MiB"`` -> 143771); ``None`` when absent
    or not a number."""
    value = absent(value)
    if value is None:
        return None
    match = re.match(r"[-+]?\d+", value)
    return int(match.group()) if match else None


def mig_mode(value: str | None) -> str | None:
    """``"Enabled"``/``"Disabled"`` from nvidia-smi's MIG mode words, ``None`` when absent."""
    value = absent(value)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("enabled", "1"):
        return "Enabled"
    if lowered in ("disabled", "0"):
        return "Disabled"
    raise GpuQueryError(f"unknown MIG mode {value!r} (expected Enabled, Disabled or N/A)")


def semver(version: str | None) -> str | None:
    """``580.159.04`` -> ``580.159.4``; ``13.0`` -> ``13.0.0``; ``None`` when ``version``
    is absent or not 1 to 3 dot-separated numbers.

    This is what the NVIDIA DRA driver publishes as ``driverVersion``,
    ``cudaDriverVersion`` and ``cudaComputeCapability`` (``semver.MustParse(v).String()``
    of github.com/Masterminds/semver in cmd/gpu-kubelet-plugin/deviceinfo.go: missing
    parts become 0, leading zeros go).
    """
    version = absent(version)
    if version is None:
        return None
    parts = version.split(".")
    # ASCII digits only (``str.isdigit`` is true of ``²``, which ``int`` refuses), and no
    # more than a version holds (``int`` refuses thousands of digits)
    if not 1 <= len(parts) <= 3 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    if any(len(p) > 18 for p in parts):
        return None
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return ".".join(str(n) for n in numbers)


def cuda_version_from_int(value: int | None) -> str | None:
    """NVML's CUDA driver version integer as ``major.minor`` (13000 -> ``13.0``, 12080 ->
    ``12.8``; ``CUDA_VERSION`` encoding ``1000*major + 10*minor``)."""
    if value is None or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def architecture_from_compute_capability(cc: str | None) -> str | None:
    """Architecture name for a CUDA compute capability (``9.0`` -> ``Hopper``), per the
    CUDA C Programming Guide's compute capability table: 3.x Kepler, 5.x Maxwell, 6.x
    Pascal, 7.0/7.2 Volta, 7.5 Turing, 8.0/8.6/8.7 Ampere, 8.9 Ada Lovelace, 9.x Hopper,
    10.x/11.x/12.x Blackwell. ``None`` when absent or unknown."""
    cc = absent(cc)
    if cc is None:
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)", cc)
    if not match:
        return None
    major, minor = int(match.group(1)), int(match.group(2))
    if major == 7:
        return "Turing" if minor >= 5 else "Volta"
    if major == 8:
        return "Ada Lovelace" if minor >= 9 else "Ampere"
    return {3: "Kepler", 5: "Maxwell", 6: "Pascal", 9: "Hopper"}.get(
        major, "Blackwell" if major in (10, 11, 12) else None
    )


def normalize_bus_id(bus_id: str | None) -> str | None:
    """``0000:19:00.0`` or ``00000000:19:00.0`` -> ``00000000:19:00.0`` (upper-case hex, as
    nvidia-smi prints it), for comparing ids from different sources."""
    bus_id = absent(bus_id)
    if bus_id is None:
        return None
    match = re.fullmatch(r"(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])", bus_id)
    if not match:
        return bus_id
    domain, bus, dev, fn = match.groups()
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(dev, 16):02X}.{fn}"


def profile_name(name: str | None) -> str | None:
    """``MIG 1g.18gb`` -> ``1g.18gb`` (NVML and nvidia-smi prefix profile names)."""
    name = absent(name)
    if name is None:
        return None
    return name[4:].strip() if name.startswith("MIG ") else name
