"""``gpusim``: the administration entry of the GPU simulator on a lab node.

Subcommands::

    gpusim init --model "NVIDIA H200" --count 2 [--node-name N] [--driver-version V]
                [--cuda-version C] [--force]
    gpusim hold --gpu 0 --pid 4242 --name python3 --mib 1024   # a process holds GPU 0
    gpusim release --gpu 0 [--pid 4242]                         # it lets go
    gpusim set --driver-version 580.159.04 [--cuda-version 13.0]
    gpusim set --gpu 0 --utilization 85                         # simulated GPU utilization
    gpusim driver unload                                        # rmmod nvidia
    gpusim driver load [--version 580.95.05] [--cuda-version 13.0]  # modprobe nvidia
    gpusim show                                                 # the state as JSON

``set --driver-version`` is lab setup, the install of a driver package: it rewrites the
release in place, loaded or not (the simulator does not model a package installed beside
a loaded module of another release, whose real sign is NVML's "Driver/library version
mismatch"). A driver upgrade uses ``driver unload`` then ``driver load --version``, which
the in-use rule guards (``driver.py``).

Exit codes: 0 done (or nothing to change), 1 refused (bad input, the message names the
option, the value and the fix; a module in use), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from gpufleet.lab.gpusim import driver, hardware, mig
from gpufleet.lab.gpusim.state import (
    Gpu,
    Process,
    State,
    StateError,
    device_file_path,
    load,
    locked,
    save,
    state_path,
    transaction,
)

DEFAULT_DRIVER = "580.159.04"
DEFAULT_CUDA = "13.0"


@dataclass(frozen=True)
class NonMigModel:
    """A GPU model without MIG (``mig_capable`` false), for the non-MIG lab case."""

    name: str
    memory_mib: int
    architecture: str
    compute_capability: str


# NVIDIA L4 data sheet: 24 GB GDDR6 (23034 MiB usable as nvidia-smi reports), Ada, sm_89.
NON_MIG_MODELS = {
    "nvidia l4": NonMigModel("NVIDIA L4", 23034, "Ada Lovelace", "8.9"),
    "l4": NonMigModel("NVIDIA L4", 23034, "Ada Lovelace", "8.9"),
}


def simulated_models() -> tuple[str, ...]:
    """The GPU models ``gpusim init --model`` simulates: every model of the MIG tables
    (``mig.profiles.MODELS``, built from ``mig.tables``) and the non-MIG ones."""
    non_mig = {m.name for m in NON_MIG_MODELS.values()}
    return tuple(sorted(mig.mig_profiles.MODELS)) + tuple(sorted(non_mig))


class AdminError(Exception):
    """Refused input; the message names the option, the value and the fix."""


def build_state(
    model_name: str,
    count: int,
    node_name: str,
    driver_version: str = DEFAULT_DRIVER,
    cuda_version: str = DEFAULT_CUDA,
) -> State:
    """A fresh state: ``count`` GPUs of ``model_name``, MIG disabled, nothing running.

    UUIDs and serials are derived from ``node_name`` and the GPU index (stable across
    re-creation); PCI bus IDs are ``00000000:00:06.0``, ``…:07.0``… as on the captured
    H200 hosts, the PCIe root and addressing mode the defaults of ``hardware``. Raises
    ``AdminError`` for an unknown model or a count outside 1..16.
    """
    if not 1 <= count <= 16:
        raise AdminError(f"--count {count}: a lab node simulates 1 to 16 GPUs; pass --count 1..16")
    non_mig = NON_MIG_MODELS.get(" ".join(model_name.split()).lower())
    if non_mig is not None:
        name, memory, arch, cc, capable = (
            non_mig.name,
            non_mig.memory_mib,
            non_mig.architecture,
            non_mig.compute_capability,
            False,
        )
    else:
        try:
            m = mig.mig_profiles.model(model_name)
        except mig.mig_profiles.UnknownGpuModel as exc:
            raise AdminError(
                f"--model {model_name!r}: {exc}; or a non-MIG model: NVIDIA L4"
            ) from None
        name, memory, arch, cc, capable = (
            m.name,
            m.memory_mib,
            m.architecture,
            m.compute_capability,
            True,
        )
    mode = "Disabled" if capable else "N/A"
    buses = [f"00000000:00:{6 + i:02X}.0" for i in range(count)]
    gpus = [
        Gpu(
            index=i,
            minor=i,
            uuid=hardware.gpu_uuid(node_name, i),
            serial=hardware.gpu_serial(node_name, i),
            name=name,
            brand="Nvidia",
            architecture=arch,
            compute_capability=cc,
            pci_bus_id=buses[i],
            memory_mib=memory,
            mig_capable=capable,
            mig_mode_current=mode,
            mig_mode_pending=mode,
            pcie_root=hardware.pcie_root(buses[i]),
            addressing_mode=hardware.addressing_mode(name),
        )
        for i in range(count)
    ]
    return State(driver_version=driver_version, cuda_version=cuda_version, gpus=gpus)


def _gpu(state: State, index: int) -> Gpu:
    if not 0 <= index < len(state.gpus):
        raise AdminError(
            f"--gpu {index}: this node has GPUs 0..{len(state.gpus) - 1}; pass one of them"
        )
    return state.gpus[index]


def hold(state: State, index: int, pid: int, name: str, mib: int) -> bool:
    """Record process ``pid`` holding GPU ``index`` with ``mib`` MiB; False if already so.
    Refused while the driver is not loaded (no process can open a GPU then)."""
    gpu = _gpu(state, index)
    if not state.driver_loaded:
        raise AdminError(
            f"hold --gpu {index}: the NVIDIA driver is not loaded; load it with "
            "'gpusim driver load'"
        )
    if pid <= 0:
        raise AdminError(f"--pid {pid}: a process ID is a positive integer")
    if mib < 0 or mib > gpu.memory_mib:
        raise AdminError(f"--mib {mib}: GPU {index} has {gpu.memory_mib} MiB; pass 0..that")
    new = Process(pid=pid, name=name, used_memory_mib=mib)
    for i, p in enumerate(gpu.processes):
        if p.pid == pid:
            if p == new:
                return False
            gpu.processes[i] = new
            return True
    gpu.processes.append(new)
    return True


def release(state: State, index: int, pid: int | None) -> bool:
    """Drop process ``pid`` (all when None) from GPU ``index``; False if none was there.

    On Hopper a pending MIG mode becomes current as soon as nothing holds the GPU
    (no reset needed from Hopper on: NVIDIA MIG user guide, "Enable MIG Mode"); a
    pending disable still waits while MIG instances exist.
    """
    gpu = _gpu(state, index)
    before = len(gpu.processes)
    gpu.processes = [p for p in gpu.processes if pid is not None and p.pid != pid]
    changed = len(gpu.processes) != before
    if (
        changed
        and not gpu.in_use
        and gpu.architecture == "Hopper"
        and gpu.mig_mode_pending != gpu.mig_mode_current
        and not (gpu.mig_mode_pending == "Disabled" and gpu.gpu_instances)
    ):
        mig.apply_pending(gpu)
    return changed


def set_utilization(state: State, index: int | None, percent: int | None) -> bool:
    """Set GPU ``index``'s simulated utilization to ``percent``; False if already so.
    Every MIG device of the GPU reports it too."""
    if index is None or percent is None:
        raise AdminError("set: --utilization needs --gpu N and --gpu needs --utilization P")
    gpu = _gpu(state, index)
    if not 0 <= percent <= 100:
        raise AdminError(f"--utilization {percent}: a utilization is 0..100 percent")
    if gpu.utilization_percent == percent:
        return False
    gpu.utilization_percent = percent
    return True


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpusim", description="GPU simulator administration")
    p.add_argument("--state", help="state file (default: $GPUFLEET_GPUSIM_STATE or /var/lib/...)")
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init", help="create the state file")
    i.add_argument("--model", default="NVIDIA H200")
    i.add_argument("--count", type=int, default=1)
    i.add_argument("--node-name", default=None)
    i.add_argument("--driver-version", default=DEFAULT_DRIVER)
    i.add_argument("--cuda-version", default=DEFAULT_CUDA)
    i.add_argument("--force", action="store_true", help="replace an existing, different state")
    h = sub.add_parser("hold", help="a process starts holding a GPU")
    h.add_argument("--gpu", type=int, required=True)
    h.add_argument("--pid", type=int, required=True)
    h.add_argument("--name", required=True)
    h.add_argument("--mib", type=int, default=0)
    r = sub.add_parser("release", help="a process stops holding a GPU")
    r.add_argument("--gpu", type=int, required=True)
    r.add_argument("--pid", type=int, default=None)
    s = sub.add_parser("set", help="change driver or CUDA version, or a GPU's utilization")
    s.add_argument("--driver-version", default=None)
    s.add_argument("--cuda-version", default=None)
    s.add_argument("--gpu", type=int, default=None, help="the GPU --utilization applies to")
    s.add_argument("--utilization", type=int, default=None, help="GPU utilization, percent")
    d = sub.add_parser("driver", help="unload or load the simulated NVIDIA kernel module")
    dsub = d.add_subparsers(dest="action", required=True)
    dsub.add_parser("unload", help="rmmod nvidia: refused while a process uses the GPUs")
    ld = dsub.add_parser("load", help="modprobe nvidia, optionally at another release")
    ld.add_argument("--version", default=None, help="driver release, e.g. 580.95.05")
    ld.add_argument("--cuda-version", default=None, help="its CUDA version, e.g. 13.0")
    sub.add_parser("show", help="print the state as JSON")
    return p


def _init(args: argparse.Namespace, path: Path) -> str:
    node = args.node_name or socket.gethostname()
    version = _driver_version(args.driver_version)
    new = build_state(args.model, args.count, node, version, args.cuda_version)
    with locked(path):
        _create_device_file(path)
        if path.exists() and not args.force:
            try:
                old = load(path)
            except StateError:
                old = None
            if old is not None and _same_hardware(old, new):
                return f"unchanged: {path} already simulates {args.count} x {new.gpus[0].name}\n"
            raise AdminError(
                f"{path} already holds a different GPU simulator state; pass --force to "
                "replace it (its MIG layout and processes are lost)"
            )
        save(new, path)
    return f"created: {path} with {args.count} x {new.gpus[0].name}\n"


def _create_device_file(path: Path) -> None:
    """``state.device_file_path``: an empty regular file, kept (not truncated) if there."""
    device = device_file_path(path)
    device.parent.mkdir(parents=True, exist_ok=True)
    device.touch(mode=0o666, exist_ok=True)


def _driver_version(text: str) -> str:
    try:
        return driver.check_version(text, "--driver-version")
    except driver.DriverError as exc:
        raise AdminError(str(exc)) from None


def _driver(args: argparse.Namespace, path: Path) -> str:
    """``gpusim driver unload|load``: what to print; raises ``driver.DriverError``."""
    with transaction(path) as state:
        if args.action == "unload":
            if not driver.unload(state, path):
                return "unchanged: the nvidia module is not loaded; nothing to do\n"
            return f"unloaded: nvidia module {driver.printable(state.driver_version)}\n"
        if not driver.load(state, args.version, args.cuda_version):
            return (
                f"unchanged: nvidia module {driver.printable(state.driver_version)} is loaded; "
                "nothing to do\n"
            )
        return (
            f"loaded: nvidia module {driver.printable(state.driver_version)} "
            f"(CUDA {driver.printable(state.cuda_version)})\n"
        )


def _same_hardware(a: State, b: State) -> bool:
    key = [(g.uuid, g.name, g.pci_bus_id) for g in a.gpus]
    return key == [(g.uuid, g.name, g.pci_bus_id) for g in b.gpus] and (
        a.driver_version == b.driver_version and a.cuda_version == b.cuda_version
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``/usr/local/bin/gpusim``; returns the exit code."""
    args = _parser().parse_args(argv)
    path = state_path(args.state)
    try:
        if args.cmd == "init":
            sys.stdout.write(_init(args, path))
            return 0
        if args.cmd == "show":
            sys.stdout.write(json.dumps(load(path).to_dict(), indent=2) + "\n")
            return 0
        if args.cmd == "driver":
            sys.stdout.write(_driver(args, path))
            return 0
        with transaction(path) as state:
            if args.cmd == "hold":
                changed = hold(state, args.gpu, args.pid, args.name, args.mib)
            elif args.cmd == "release":
                changed = release(state, args.gpu, args.pid)
            elif args.utilization is not None or args.gpu is not None:
                changed = set_utilization(state, args.gpu, args.utilization)
            else:
                if args.driver_version is None and args.cuda_version is None:
                    raise AdminError(
                        "set: pass --driver-version and/or --cuda-version, or --gpu N "
                        "--utilization PERCENT"
                    )
                before = (state.driver_version, state.cuda_version)
                if args.driver_version is not None:
                    state.driver_version = _driver_version(args.driver_version)
                state.cuda_version = args.cuda_version or state.cuda_version
                changed = before != (state.driver_version, state.cuda_version)
        sys.stdout.write(("changed" if changed else "unchanged") + "\n")
        return 0
    except driver.ModuleInUse as exc:
        # rmmod's own line first, as the real refusal reads; the holders below it
        sys.stderr.write(f"{exc}\n")
        return 1
    except (AdminError, StateError, driver.DriverError) as exc:
        sys.stderr.write(f"gpusim: {exc}\n")
        return 1
