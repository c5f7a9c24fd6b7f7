"""State of the GPU simulator: the GPUs of one lab node, their MIG layout and processes.

The file format is schema 1 of ``lab/gpu-simulator/README.md``; the DRA kubelet plugin
(simulator) reads the same file, so field names and units here must not drift from it.
Memory is in MiB everywhere; ``placement_start``/``placement_size`` are memory slices as
``nvidia-smi mig -lgipp`` prints them.

Writers take an exclusive ``flock`` on ``<state>.lock`` for the whole read-modify-write
and replace the file atomically (temporary file in the same directory, ``fsync``,
``os.replace``), so a reader never sees a half-written file.

Standard library only: this package is copied onto lab nodes that have ``python3`` alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = 1
#: Addressing modes NVML reports (``nvmlDeviceGetAddressingMode``: NONE, HMM, ATS, printed
#: as go-nvlib's ``GetAddressingModeAsString`` names them); "" is a GPU that reports none.
ADDRESSING_MODES = ("None", "HMM", "ATS", "")
#: A PCIe root complex as sysfs names it (``/sys/devices/pci<domain>:<bus>``).
PCIE_ROOT_RE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
SIMULATOR = "gpufleet GPU simulator"
STATE_ENV = "GPUFLEET_GPUSIM_STATE"
DEFAULT_STATE_PATH = Path("/var/lib/gpufleet-gpu-simulator/state.json")
MIG_MODES = ("Enabled", "Disabled")


#: Beside the state file: the simulator's stand-in for ``/proc/driver/nvidia/version``
#: (a container cannot create /proc entries). ``nvidia_driver_facts``' ``proc_version``
#: (role variable ``nvidia_driver_proc_version``) reads it there.
PROC_VERSION = Path("proc/driver/nvidia/version")


def proc_version_path(state_file: Path) -> Path:
    """``<state directory>/proc/driver/nvidia/version``."""
    return state_file.parent / PROC_VERSION


#: Beside the state file: the simulator's stand-in for ``/dev/nvidiactl``, the device file
#: every NVML client (nvidia-smi, the DRA kubelet plugin, a CUDA program) holds open. A
#: process that holds it open keeps the simulated kernel module in use, as a process
#: holding ``/dev/nvidia*`` keeps the real ``nvidia`` module from ``rmmod``.
DEVICE_FILE = Path("dev/nvidiactl")


def device_file_path(state_file: Path) -> Path:
    """``<state directory>/dev/nvidiactl``: the simulated driver's control device file (an
    empty regular file that ``gpusim init`` creates)."""
    return state_file.parent / DEVICE_FILE


def proc_version_text(driver_version: str) -> str:
    """What the simulator writes in place of ``/proc/driver/nvidia/version``: the two
    lines of the real file (``tests/unit/data/gpu/h200-device/proc-driver-nvidia-version.txt``:
    the open kernel module's ``NVRM version`` line, then ``GCC version``) with the
    state's driver release, and the simulator named where the real file names the build
    host and the compiler."""
    return (
        f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {driver_version}  "
        f"Release Build  ({SIMULATOR})  \n"
        f"GCC version:  none ({SIMULATOR}, no kernel module) \n"
    )


class StateError(ValueError):
    """The state file is missing, unreadable or not schema 1; the message names the fix."""


@dataclass
class Process:
    """A process holding a GPU (``nvidia-smi --query-compute-apps``); memory in MiB."""

    pid: int
    name: str
    used_memory_mib: int


@dataclass
class ComputeInstance:
    """A MIG compute instance (CI) inside a GPU instance; ``uuid`` is the MIG device UUID."""

    id: int
    profile: str
    profile_id: int
    multiprocessors: int
    uuid: str


@dataclass
class GpuInstance:
    """A MIG GPU instance (GI): profile, placement in memory slices, engines, its CIs."""

    id: int
    profile: str
    profile_id: int
    placement_start: int
    placement_size: int
    memory_mib: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    compute_instances: list[ComputeInstance] = field(default_factory=list)


@dataclass
class Gpu:
    """One simulated GPU (schema 1 ``gpus[]`` entry).

    ``pcie_root`` is the PCIe root complex above the GPU (``pci0000:00``) and
    ``addressing_mode`` what NVML reports (``None``, ``HMM``, ``ATS``); both are optional
    in the file, and "" (absent) means the GPU reports none, so the DRA kubelet plugin
    (simulator) leaves the attribute out, as NVIDIA's plugin does.
    ``utilization_percent`` (0-100, optional, default 0) is the simulated GPU utilization
    the simulator's DCGM-named metrics report (``gpusim set --gpu N --utilization P``).
    """

    index: int
    minor: int
    uuid: str
    serial: str
    name: str
    brand: str
    architecture: str
    compute_capability: str
    pci_bus_id: str
    memory_mib: int
    mig_capable: bool
    mig_mode_current: str
    mig_mode_pending: str
    pcie_root: str = ""
    addressing_mode: str = ""
    utilization_percent: int = 0
    gpu_instances: list[GpuInstance] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)

    @property
    def in_use(self) -> bool:
        """True while a process holds the GPU (MIG mode changes stay pending, reset fails)."""
        return bool(self.processes)

    def gi(self, gi_id: int) -> GpuInstance | None:
        return next((g for g in self.gpu_instances if g.id == gi_id), None)


@dataclass
class State:
    """The whole state file: driver/CUDA versions, the GPUs in index order, and whether the
    simulated kernel module is loaded (``driver_loaded``; optional in the file, absent is
    loaded, as files written before the field existed mean)."""

    driver_version: str
    cuda_version: str
    gpus: list[Gpu]
    schema: int = SCHEMA
    simulator: str = SIMULATOR
    driver_loaded: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Schema-1 mapping, keys in the order of the README example."""
        return {
            "schema": self.schema,
            "simulator": self.simulator,
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "driver_loaded": self.driver_loaded,
            "gpus": [asdict(g) for g in self.gpus],
        }


def state_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The state file: ``explicit``, else ``$GPUFLEET_GPUSIM_STATE``, else the default."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(STATE_ENV)
    return Path(env) if env else DEFAULT_STATE_PATH


# --- schema check ---------------------------------------------------------------------


def _req(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise StateError(f"{where}.{key} is missing; schema 1 requires it")
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise StateError(f"{where}.{key} = {value!r}: expected {kinds[0].__name__}")
    if not isinstance(value, kinds):
        raise StateError(
            f"{where}.{key} = {value!r}: expected {' or '.join(k.__name__ for k in kinds)}"
        )
    return value


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str:
    """An optional string field; "" when absent."""
    if key not in obj:
        return ""
    return _req(obj, key, str, where)


def _ci_from(obj: Any, where: str) -> ComputeInstance:
    if not isinstance(obj, dict):
        raise StateError(f"{where} = {obj!r}: expected an object")
    return ComputeInstance(
        id=_req(obj, "id", int, where),
        profile=_req(obj, "profile", str, where),
        profile_id=_req(obj, "profile_id", int, where),
        multiprocessors=_req(obj, "multiprocessors", int, where),
        uuid=_req(obj, "uuid", str, where),
    )


def _gi_from(obj: Any, where: str) -> GpuInstance:
    if not isinstance(obj, dict):
        raise StateError(f"{where} = {obj!r}: expected an object")
    cis = _req(obj, "compute_instances", list, where)
    return GpuInstance(
        id=_req(obj, "id", int, where),
        profile=_req(obj, "profile", str, where),
        profile_id=_req(obj, "profile_id", int, where),
        placement_start=_req(obj, "placement_start", int, where),
        placement_size=_req(obj, "placement_size", int, where),
        memory_mib=_req(obj, "memory_mib", int, where),
        multiprocessors=_req(obj, "multiprocessors", int, where),
        copy_engines=_req(obj, "copy_engines", int, where),
        decoders=_req(obj, "decoders", int, where),
        encoders=_req(obj, "encoders", int, where),
        jpeg_engines=_req(obj, "jpeg_engines", int, where),
        ofa_engines=_req(obj, "ofa_engines", int, where),
        compute_instances=[
            _ci_from(c, f"{where}.compute_instances[{i}]") for i, c in enumerate(cis)
        ],
    )


def _gpu_from(obj: Any, where: str) -> Gpu:
    if not isinstance(obj, dict):
        raise StateError(f"{where} = {obj!r}: expected an object")
    mig_capable = _req(obj, "mig_capable", bool, where)
    allowed = MIG_MODES if mig_capable else ("N/A",)
    modes = {}
    for key in ("mig_mode_current", "mig_mode_pending"):
        value = _req(obj, key, str, where)
        if value not in allowed:
            raise StateError(
                f"{where}.{key} = {value!r}: expected one of {', '.join(allowed)} "
                f"(mig_capable is {str(mig_capable).lower()})"
            )
        modes[key] = value
    procs = _req(obj, "processes", list, where)
    processes = []
    for i, p in enumerate(procs):
        w = f"{where}.processes[{i}]"
        if not isinstance(p, dict):
            raise StateError(f"{w} = {p!r}: expected an object")
        processes.append(
            Process(
                pid=_req(p, "pid", int, w),
                name=_req(p, "name", str, w),
                used_memory_mib=_req(p, "used_memory_mib", int, w),
            )
        )
    gis = _req(obj, "gpu_instances", list, where)
    pcie_root = _opt_str(obj, "pcie_root", where)
    if pcie_root and not PCIE_ROOT_RE.match(pcie_root):
        raise StateError(
            f"{where}.pcie_root = {pcie_root!r}: expected a root complex like 'pci0000:00' "
            "(lower-case hex) or no pcie_root"
        )
    addressing_mode = _opt_str(obj, "addressing_mode", where)
    if addressing_mode not in ADDRESSING_MODES:
        raise StateError(
            f"{where}.addressing_mode = {addressing_mode!r}: expected one of None, HMM, ATS "
            "or no addressing_mode"
        )
    utilization = obj.get("utilization_percent", 0)
    if (
        isinstance(utilization, bool)
        or not isinstance(utilization, int)
        or not (0 <= utilization <= 100)
    ):
        raise StateError(
            f"{where}.utilization_percent = {utilization!r}: expected an integer 0..100 or "
            "no utilization_percent"
        )
    return Gpu(
        index=_req(obj, "index", int, where),
        minor=_req(obj, "minor", int, where),
        uuid=_req(obj, "uuid", str, where),
        serial=_req(obj, "serial", str, where),
        name=_req(obj, "name", str, where),
        brand=_req(obj, "brand", str, where),
        architecture=_req(obj, "architecture", str, where),
        compute_capability=_req(obj, "compute_capability", str, where),
        pci_bus_id=_req(obj, "pci_bus_id", str, where),
        memory_mib=_req(obj, "memory_mib", int, where),
        mig_capable=mig_capable,
        mig_mode_current=modes["mig_mode_current"],
        mig_mode_pending=modes["mig_mode_pending"],
        pcie_root=pcie_root,
        addressing_mode=addressing_mode,
        utilization_percent=utilization,
        gpu_instances=[_gi_from(g, f"{where}.gpu_instances[{i}]") for i, g in enumerate(gis)],
        processes=processes,
    )


def from_dict(data: Any) -> State:
    """Validate a parsed schema-1 document and build a ``State``.

    Raises ``StateError`` naming the field (``gpus[0].mig_mode_current``), the value
    found and what schema 1 expects.
    """
    if not isinstance(data, dict):
        raise StateError(f"state = {data!r}: expected a JSON object (schema 1)")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise StateError(
            f"state.schema = {schema!r}: this simulator reads schema {SCHEMA}; "
            "re-create the file with 'gpusim init'"
        )
    gpus = _req(data, "gpus", list, "state")
    parsed = [_gpu_from(g, f"state.gpus[{i}]") for i, g in enumerate(gpus)]
    if [g.index for g in parsed] != list(range(len(parsed))):
        raise StateError(
            f"state.gpus indexes = {[g.index for g in parsed]}: expected 0..{len(parsed) - 1} "
            "in order"
        )
    loaded = data.get("driver_loaded", True)
    if not isinstance(loaded, bool):
        raise StateError(
            f"state.driver_loaded = {loaded!r}: expected true, false or no driver_loaded"
        )
    return State(
        driver_version=_req(data, "driver_version", str, "state"),
        cuda_version=_req(data, "cuda_version", str, "state"),
        gpus=parsed,
        schema=SCHEMA,
        simulator=str(data.get("simulator", SIMULATOR)),
        driver_loaded=loaded,
    )


# --- I/O ------------------------------------------------------------------------------


def load(path: Path) -> State:
    """Read and validate the state file. Raises ``StateError`` (missing, bad JSON, schema)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StateError(
            f"GPU simulator state {path} does not exist; create it with "
            f"'gpusim init --model \"NVIDIA H200\" --count 1' or set {STATE_ENV}"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StateError(f"GPU simulator state {path} is not JSON: {exc}") from None
    return from_dict(data)


def save(state: State, path: Path) -> None:
    """Write ``state`` atomically (temporary file in the same directory, fsync, rename),
    then the driver version file beside it (:func:`proc_version_path`) while the driver is
    loaded; while it is not, that file is removed, as ``/proc/driver/nvidia/version``
    goes with the unloaded module."""
    _write_atomic(path, json.dumps(state.to_dict(), indent=2) + "\n")
    version = proc_version_path(path)
    if state.driver_loaded:
        _write_atomic(version, proc_version_text(state.driver_version))
    else:
        with contextlib.suppress(FileNotFoundError):
            version.unlink()


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    with open(lock, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def transaction(path: Path) -> Iterator[State]:
    """Load under the lock, yield the state, save it when the block exits without error."""
    with locked(path):
        state = load(path)
        yield state
        save(state, path)
