"""The simulated NVIDIA kernel module: loaded or not, and who keeps it in use.

``gpusim driver unload`` and ``gpusim driver load`` (``admin``) answer from here. The
rules follow the real module on a driver upgrade:

* ``rmmod nvidia`` is refused while anything uses the module: a CUDA process (the state's
  compute processes, ``gpusim hold``) or any process that holds a device file open (here
  the simulator's ``<state dir>/dev/nvidiactl``, :func:`state.device_file_path`, which the
  DRA kubelet plugin (simulator) holds for its lifetime). ``rmmod`` prints ``rmmod: ERROR:
  Module nvidia is in use`` (:data:`IN_USE`); the holders below it are the simulator's,
  as ``fuser`` would list them.
* An unloaded module takes its GPU state with it: every GPU instance and compute instance
  is gone (MIG instances do not survive a driver reload), a pending MIG mode becomes current
  (as on a GPU reset), and ``/proc/driver/nvidia/version`` disappears.
* ``modprobe nvidia`` of another version does not replace a loaded module: the simulator
  refuses a load at another version while one is loaded.

Standard library only (plus the collection's stdlib-only ``nvidia/driver.py``): this
package is copied onto lab nodes that have ``python3`` alone.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# on a lab node the installer copies the module under the same package path (install.py)
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.driver import (
    PlanError,
    parse_driver_version,
)

from gpufleet.lab.gpusim import mig
from gpufleet.lab.gpusim.state import State, device_file_path

#: What kmod's ``rmmod`` prints for a module whose reference count is not zero because a
#: process holds it (with dependent modules it says ``... is in use by: <modules>``).
IN_USE = "rmmod: ERROR: Module nvidia is in use"
PROC = Path("/proc")


class DriverError(Exception):
    """Refused load or unload; the message names the value and the fix."""


class ModuleInUse(DriverError):
    """Unload refused: ``str()`` is ``rmmod``'s line, then one line per holder."""


@dataclass(frozen=True)
class Holder:
    """A process that keeps the module in use: ``gpu`` is the GPU index of a compute
    process of the state, None for a process holding the device file open."""

    pid: int
    name: str
    gpu: int | None = None

    def describe(self, device: Path) -> str:
        """One line under the ``rmmod`` error."""
        name = printable(self.name)
        if self.gpu is not None:
            return f"  GPU {self.gpu}: compute process {self.pid} ({name})"
        return f"  process {self.pid} ({name}) holds {device} open"


def check_version(text: str, option: str) -> str:
    """``text`` if it is an NVIDIA release number (``NNN.NN[.NN]``, the collection's
    ``parse_driver_version``); raises ``DriverError`` naming ``option`` otherwise."""
    try:
        return str(parse_driver_version(text, option))
    except PlanError as exc:
        raise DriverError(str(exc)) from None


#: A CUDA version as ``nvidia-smi`` prints it (``13.0``).
CUDA_VERSION = re.compile(r"\d{1,3}\.\d{1,3}", re.ASCII)


def check_cuda_version(text: str, option: str) -> str:
    """``text`` if it is a CUDA version (``MAJOR.MINOR``, ASCII digits); raises
    ``DriverError`` naming ``option``, the value and the fix otherwise."""
    if not CUDA_VERSION.fullmatch(text):
        shown = repr(text) if len(text) <= 100 else f"{text[:100]!r}... ({len(text)} characters)"
        raise DriverError(
            f"{option}={shown} is not a CUDA version; fix: give it as nvidia-smi prints it, "
            "MAJOR.MINOR, for example 13.0"
        )
    return text


def printable(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``): a value
    read from a file or ``/proc`` shows and cannot act on the reader's terminal."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def device_holders(device: Path, proc: Path = PROC) -> list[Holder]:
    """Processes with ``device`` open, by pid: every ``<proc>/<pid>/fd/<n>`` is
    ``os.stat``-ed (following the link to the open file) and compared by ``(st_dev,
    st_ino)`` with ``device``, as ``fuser`` does, so a bind mount of the file into a pod
    counts. Processes that end or deny access during the scan are left out. No device file:
    no holder."""
    try:
        want = os.stat(device)
    except FileNotFoundError:
        return []
    key = (want.st_dev, want.st_ino)
    found: list[Holder] = []
    try:
        # ASCII digits only: ``str.isdigit`` is true of ``²``, which ``int`` refuses
        pids = sorted(int(e) for e in os.listdir(proc) if e.isascii() and e.isdigit())
    except OSError:
        return []
    for pid in pids:
        fd_dir = proc / str(pid) / "fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # ended, or not ours to read
            continue
        for fd in fds:
            try:
                st = os.stat(fd_dir / fd)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == key:
                found.append(Holder(pid, _comm(proc, pid)))
                break
    return found


def _comm(proc: Path, pid: int) -> str:
    try:
        raw = (proc / str(pid) / "comm").read_bytes()[:256]
        return printable(raw.decode("utf-8", errors="replace").strip())
    except OSError:
        return "?"


def holders(state: State, state_file: Path, proc: Path = PROC) -> list[Holder]:
    """Everything that keeps the module in use: the compute processes of the state (GPU
    index order), then the processes holding the device file open (pid order)."""
    compute = [Holder(p.pid, p.name, g.index) for g in state.gpus for p in g.processes]
    return compute + device_holders(device_file_path(state_file), proc)


def unload(state: State, state_file: Path, proc: Path = PROC) -> bool:
    """Unload the simulated module; False if it was not loaded.

    Raises ``ModuleInUse`` (``IN_USE`` and one line per holder) while anything holds it.
    Unloading destroys every GPU instance and compute instance and makes a pending MIG
    mode current (``mig.apply_pending``, as a GPU reset does); ``state.save`` then removes
    the driver version file.
    """
    if not state.driver_loaded:
        return False
    found = holders(state, state_file, proc)
    if found:
        device = device_file_path(state_file)
        raise ModuleInUse("\n".join([IN_USE, *(h.describe(device) for h in found)]))
    for gpu in state.gpus:
        mig.apply_pending(gpu)
    state.driver_loaded = False
    return True


def load(state: State, version: str | None = None, cuda_version: str | None = None) -> bool:
    """Load the simulated module, at ``version`` when given (else the installed one, the
    state's ``driver_version``); False if that module is loaded already.

    Raises ``DriverError`` for a version that is not an NVIDIA release, and for a version
    or CUDA version other than the loaded module's (a loaded module is not replaced: unload
    it first).
    """
    wanted = check_version(version, "--version") if version is not None else None
    if cuda_version is not None:
        check_cuda_version(cuda_version, "--cuda-version")
    if state.driver_loaded:
        other = (wanted is not None and wanted != state.driver_version) or (
            cuda_version is not None and cuda_version != state.cuda_version
        )
        if other:
            raise DriverError(
                f"the loaded module is {printable(state.driver_version)} "
                f"(CUDA {printable(state.cuda_version)}); "
                "unload it first: 'gpusim driver unload'"
            )
        return False
    state.driver_version = wanted or state.driver_version
    state.cuda_version = cuda_version or state.cuda_version
    state.driver_loaded = True
    return True
