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

    ``nvlinks`` is the number of NVLinks per GPU and ``nvlink_gbps`` the speed of one, as
    ``nvidia-smi nvlink -s`` prints it: H200 from the capture of two NVLinked H200s
    (``h200-x2-nvlink/smi-nvlink-s.txt``, ``smi-topo.txt``: 18 links, NV18, 26.562 GB/s).
    No other model has a capture, so the simulator gives them no NVLink (0) rather than
    a guessed count.
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
    nvlinks: int = 0
    nvlink_gbps: str = ""


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
        18,
        "26.562",
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


def nvlinked(names: list[str]) -> bool:
    """Whether the simulated GPUs of one node (their model names, in index order) are
    joined by NVLink: two GPUs or more, all of a model whose board has NVLinks.

    As captured: two H200s of one host are NV18 to each other and their fabric state is
    ``Completed``; a host with one H200 prints no NVLink (``nvlink -s`` prints nothing,
    fabric ``N/A``: ``h200-single-cli/smi-nvlink-s.txt``, ``h200-single/smi-q.txt``).
    """
    return len(names) > 1 and all(board(n).nvlinks > 0 for n in names)


def cpu_list(cpus: set[int] | None = None) -> str:
    """CPU numbers as ``nvidia-smi topo -m`` prints its ``CPU Affinity`` column and sysfs
    ``local_cpulist`` (ranges joined by commas: ``0-15``, ``0-3,8-11``). ``cpus`` defaults
    to the CPUs this process may run on (``sched_getaffinity``): a simulated GPU is local
    to every CPU of the node."""
    found = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    ranges: list[str] = []
    i = 0
    while i < len(found):
        j = i
        while j + 1 < len(found) and found[j + 1] == found[j] + 1:
            j += 1
        ranges.append(str(found[i]) if i == j else f"{found[i]}-{found[j]}")
        i = j + 1
    return ",".join(ranges)


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


def default_readings(index: int, uuid: str, nvlink: bool = False) -> dict[str, Any]:
    """Sensor readings of an idle GPU; values from ``h200-single/smi-q.txt``.

    ``pdi`` (the GPU's platform data identifier) is derived from the UUID so that it is
    stable per simulated GPU; ``board_id``/``module_id`` follow the GPU index. With
    ``nvlink`` (the node's GPUs are NVLinked, :func:`nvlinked`) the fabric block is the
    one of ``h200-x2-nvlink/smi-q.txt`` (``Completed``, ``Success``, clique 0, the zero
    cluster UUID), else ``N/A`` as on the single H200. ``cpu_affinity`` and
    ``numa_affinity`` are the ``topo -m`` columns: the node's CPUs and NUMA node 0.
    """
    fabric = (
        {
            "fabric_state": "Completed",
            "fabric_status": "Success",
            "fabric_clique": "0",
            "fabric_cluster": "00000000-0000-0000-0000-000000000000",
        }
        if nvlink
        else {
            "fabric_state": "N/A",
            "fabric_status": "N/A",
            "fabric_clique": "N/A",
            "fabric_cluster": "N/A",
        }
    )
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
        **fabric,
        "cpu_affinity": cpu_list(),
        "numa_affinity": "0",
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


def load_readings(state_file: Path, gpus: list[tuple[int, str]], nvlink: bool = False) -> Readings:
    """Defaults for ``gpus`` (``(index, uuid)`` pairs; ``nvlink`` as for
    :func:`default_readings`) overlaid with the readings file.

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
        values = default_readings(index, uuid, nvlink)
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
