"""Static board data and sensor readings of the simulated GPUs.

The state file (schema 1) holds what the project acts on: identity, memory, MIG layout,
processes. ``nvidia-smi`` also prints board constants (PCI device ID, VBIOS, power
limits, BAR1 size) and sensor readings (temperature, power draw, PCIe throughput) that
no part of the project reads. They live here: board constants per GPU model, sensor
readings with defaults taken from the real H200 capture
(``tests/unit/data/gpu/h200-single/smi-q.txt``, idle GPU) and optional overrides from a
readings file (``readings.json`` beside the state file, or ``$GPUFLEET_GPUSIM_READINGS``)
so that a test can pin the values of one real capture.

Readings file shape (every key optional)::

    {"timestamp": "Sun Nov 29 19:21:42 2026",
     "gpus": [{"temp": 33, "power_w": 76, "power_avg": "76.51", ...}, ...]}
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# on a lab node the installer copies the module under the same package path (install.py)
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mig_profiles

READINGS_ENV = "GPUFLEET_GPUSIM_READINGS"


@dataclass(frozen=True)
class Board:
    """Board constants ``nvidia-smi -q`` prints; power in W, memory in MiB.

    H200 values: real capture (``h200-single/smi-q.txt``). Other models: PCI device IDs
    from the PCI ID database (``pci.ids``, vendor 10de), power limits from NVIDIA's
    product briefs (A100 SXM4 400 W, A30 165 W, H100 SXM5 700 W, HGX B200 1000 W), BAR1
    sizes and reserved memory approximate: the simulator prints them only so the layout
    matches. B200 and GH200: the PCI device ID is the MIG table's
    (``mig.tables.GPUS``, through ``mig.profiles``); subsystem ID, VBIOS and part numbers
    are placeholders, GH200's power limit (900 W) approximate (its module is configurable
    from 450 W to 1000 W, NVIDIA GH200 product brief).
    """

    device_id: str
    subsystem_id: str
    vbios: str
    board_part: str
    gpu_part: str
    power_limit_w: float
    power_min_w: float
    bar1_mib: int
    reserved_mib: int


BOARDS: dict[str, Board] = {
    "NVIDIA H200": Board(
        "233510DE",
        "18BF10DE",
        "96.00.A5.00.1A",
        "692-2G520-0282-001",
        "2335-895-A1",
        700.0,
        200.0,
        262144,
        616,
    ),
    "NVIDIA H100 80GB HBM3": Board(
        "233010DE",
        "16C110DE",
        "96.00.99.00.01",
        "692-2G520-0200-000",
        "2330-885-A1",
        700.0,
        200.0,
        131072,
        589,
    ),
    "NVIDIA A100-SXM4-40GB": Board(
        "20B010DE",
        "134F10DE",
        "92.00.36.00.02",
        "692-2G506-0200-003",
        "20B0-884-A1",
        400.0,
        100.0,
        65536,
        421,
    ),
    "NVIDIA A100-SXM4-80GB": Board(
        "20B210DE",
        "147F10DE",
        "92.00.45.00.03",
        "692-2G506-0210-002",
        "20B2-895-A1",
        400.0,
        100.0,
        131072,
        609,
    ),
    "NVIDIA A30": Board(
        "20B710DE",
        "153210DE",
        "92.00.66.00.01",
        "900-21001-0040-100",
        "20B7-895-A1",
        165.0,
        100.0,
        32768,
        284,
    ),
    "NVIDIA L4": Board(
        "27B810DE",
        "16CA10DE",
        "95.04.29.00.06",
        "900-2G193-0000-001",
        "27B8-895-A1",
        72.0,
        40.0,
        32768,
        434,
    ),
}


def _table_device_id(name: str) -> str:
    """The first PCI device ID that the MIG table gives for GPU model ``name``, as
    ``nvidia-smi -q`` prints it without ``0x`` (``290110DE``); ``000010DE`` when none."""
    try:
        ids = mig_profiles.model(name).pci_device_ids
    except mig_profiles.UnknownGpuModel:
        ids = ()
    return ids[0][2:].upper() if ids else "000010DE"


BOARDS["NVIDIA B200"] = Board(
    _table_device_id("NVIDIA B200"),
    "199910DE",
    "97.00.00.00.00",
    "N/A",
    "2901-886-A1",
    1000.0,
    200.0,
    262144,
    704,
)
BOARDS["NVIDIA GH200 144G HBM3e"] = Board(
    _table_device_id("NVIDIA GH200 144G HBM3e"),
    "18FE10DE",
    "96.00.00.00.00",
    "N/A",
    "2348-895-A1",
    900.0,
    450.0,
    262144,
    616,
)

GENERIC_BOARD = Board("000010DE", "000010DE", "N/A", "N/A", "N/A", 300.0, 100.0, 65536, 512)


def board(name: str) -> Board:
    """Board constants of a GPU model name (``nvidia-smi -L`` name), generic when unknown."""
    return BOARDS.get(name, GENERIC_BOARD)


def addressing_mode(name: str) -> str:
    """Default ``addressing_mode`` of a GPU model name: ``"None"`` or ``"ATS"``.

    What NVML's ``nvmlDeviceGetAddressingMode`` reports (documented for Turing and newer
    on Linux: NVML API reference, "CPU and Memory Affinity"): ``None`` (supported, no HMM
    or ATS active) on x86 hosts, as the real H200 reported it to NVIDIA's DRA driver
    v0.4.1 (``tests/unit/data/gpu/h200-single/resourceslice-nvidia-dra-driver-0.4.1.json``);
    ``ATS`` on Grace Hopper and Grace Blackwell superchips (``NVIDIA GH200 …``,
    ``NVIDIA GB200``, ``NVIDIA GB300``), whose GPU reaches system memory over NVLink-C2C
    with Address Translation Services.
    """
    words = name.split()
    if len(words) > 1 and words[0] == "NVIDIA" and words[1][:2] in ("GH", "GB"):
        return "ATS"
    return "None"


def pcie_root(pci_bus_id: str) -> str:
    """Default PCIe root complex (``pci<domain>:<bus>``) of an NVML PCI bus ID.

    ``"00000000:00:06.0"`` -> ``"pci0000:00"``. The simulator puts each GPU behind the
    host bridge of bus 00 of its PCI domain, as on the captured H200 host (bus ID
    0000:00:06.0 under root pci0000:00, ``h200-single/resourceslice-*.json``); a state
    file may name another root. The name is the directory sysfs shows under
    ``/sys/devices``, which k8s.io/dynamic-resource-allocation's deviceattribute reads
    for ``resource.kubernetes.io/pcieRoot``. Raises ``ValueError`` for a bus ID that is
    not ``<domain>:<bus>:<device>.<function>`` in hex.
    """
    parts = pci_bus_id.strip().split(":")
    if len(parts) != 3 or not all(parts) or "." not in parts[2]:
        raise ValueError(f"{pci_bus_id!r} is not a PCI bus ID like '00000000:19:00.0'")
    try:
        domain = int(parts[0], 16)
    except ValueError:
        raise ValueError(f"{pci_bus_id!r} is not a PCI bus ID like '00000000:19:00.0'") from None
    if domain > 0xFFFF:
        raise ValueError(f"{pci_bus_id!r} has a PCI domain wider than 16 bits")
    return f"pci{domain:04x}:00"


def _hex_digest(*parts: object) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()


def default_readings(index: int, uuid: str) -> dict[str, Any]:
    """Sensor readings of an idle GPU; values from ``h200-single/smi-q.txt``.

    ``pdi`` (the GPU's platform data identifier) is derived from the UUID so that it is
    stable per simulated GPU; ``board_id``/``module_id`` follow the GPU index.
    """
    return {
        "temp": 33,
        "tlimit": 54,
        "mem_temp": 34,
        "power_w": 76,
        "power_avg": "76.51",
        "power_inst": "77.07",
        "mem_power_avg": "32.17",
        "tx": 964,
        "rx": 562,
        "replays": 0,
        "pdi": "0x" + _hex_digest("pdi", uuid)[:16],
        "board_id": hex(6 + index),
        "module_id": index + 1,
        "fabric_state": "N/A",
        "fabric_status": "N/A",
        "fabric_clique": "N/A",
        "fabric_cluster": "N/A",
    }


def readings_path(state_file: Path) -> Path:
    """``$GPUFLEET_GPUSIM_READINGS`` or ``readings.json`` beside the state file."""
    env = os.environ.get(READINGS_ENV)
    return Path(env) if env else state_file.with_name("readings.json")


@dataclass(frozen=True)
class Readings:
    """Timestamp and per-GPU sensor readings for one ``nvidia-smi`` invocation."""

    timestamp: str
    gpus: tuple[dict[str, Any], ...]

    def gpu(self, index: int) -> dict[str, Any]:
        return self.gpus[index]


def load_readings(state_file: Path, gpus: list[tuple[int, str]]) -> Readings:
    """Defaults for ``gpus`` (``(index, uuid)`` pairs) overlaid with the readings file.

    The timestamp is the local time (``nvidia-smi`` format ``%a %b %d %H:%M:%S %Y``)
    unless the file pins it. A readings file that is not a JSON object is ignored:
    readings are cosmetic and never stop the simulator.
    """
    overrides: dict[str, Any] = {}
    path = readings_path(state_file)
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            overrides = loaded
    except (OSError, ValueError):
        overrides = {}
    per_gpu = overrides.get("gpus") if isinstance(overrides.get("gpus"), list) else []
    out = []
    for index, uuid in gpus:
        values = default_readings(index, uuid)
        if index < len(per_gpu) and isinstance(per_gpu[index], dict):
            values.update(per_gpu[index])
        out.append(values)
    stamp = overrides.get("timestamp")
    if not isinstance(stamp, str):
        stamp = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime())
    return Readings(timestamp=stamp, gpus=tuple(out))


def gpu_uuid(node_name: str, index: int) -> str:
    """Deterministic GPU UUID (``GPU-8-4-4-4-12`` hex) from the node name and GPU index."""
    h = _hex_digest("gpu", node_name, index)
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def mig_uuid(parent_uuid: str, gi_id: int, ci_id: int) -> str:
    """Deterministic MIG device UUID (``MIG-8-4-4-4-12``) from the parent GPU, GI and CI."""
    h = _hex_digest("mig", parent_uuid, gi_id, ci_id)
    return f"MIG-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_serial(node_name: str, index: int) -> str:
    """Deterministic 13-digit board serial number (``1650`` + 9 digits)."""
    return "1650" + str(int(_hex_digest("serial", node_name, index)[:12], 16))[-9:].zfill(9)
