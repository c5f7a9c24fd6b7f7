# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What the NVIDIA GPUs of one host are: identity, memory, driver, MIG state and devices,
NVLink peers. Read-only; nothing here changes a GPU.

Two backends:

* **NVML** through ``pynvml`` (PyPI package ``nvidia-ml-py``), used when that module is
  importable on the host and ``nvmlInit`` finds the driver's ``libnvidia-ml.so.1``. Calls
  and constants are those of ``pynvml.py`` in nvidia-ml-py 13.615.71.
* **nvidia-smi**, driven through an injected command runner (``AnsibleModule.run_command``
  in the module), with these commands, all read-only:

  ======================================================================  =====================
  command                                                                 gives
  ======================================================================  =====================
  ``nvidia-smi -q -x``                                                    identity, memory,
                                                                          driver, CUDA, MIG
                                                                          mode, MIG devices
                                                                          (GI/CI/memory)
  ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv``                  compute capability
  ``nvidia-smi -L``                                                       MIG device UUIDs
  ``nvidia-smi mig -lgi`` / ``mig -lci`` (only when a GPU has MIG on)     GI profile, profile
                                                                          ID, placement; CI
                                                                          profile
  ``nvidia-smi topo -m`` / ``nvlink -s`` (only with two GPUs or more)     NVLink peers, active
                                                                          links
  ======================================================================  =====================

  When ``-q -x`` fails, ``nvidia-smi -q`` (text) is parsed instead.

Formats follow real output: the captures of an H200 host and of two NVLinked H200s with
driver 580.159.04 (``tests/unit/data/gpu/h200-*``) and public NVIDIA MIG guide examples
(``tests/unit/data/gpu/public``). An answer of ``N/A``, ``[N/A]``, ``Not Supported`` or
``[Not Supported]`` means the GPU lacks the feature: the field is ``None`` (or ``False``
for ``mig_capable``), never an error.

Only the standard library is imported at import time; ``pynvml`` is imported by
``nvidia.nvml.load_nvml`` when the NVML backend is tried.

The parts, one job each: ``nvidia.gpu`` (the records, errors and value readers),
``nvidia.smi`` (the nvidia-smi parsers), ``nvidia.nvml`` (the NVML backend); this
module runs the nvidia-smi commands and picks the backend (``collect_host``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.gpu import (
    GpuInfo,
    GpuQueryError,
    HostGpus,
    NoDriverError,
    NvLinkPeer,
    architecture_from_compute_capability,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.nvml import (
    collect_nvml,
    load_nvml,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.smi import (
    EMPTY_MIG,
    ListedGpu,
    assemble_mig_devices,
    parse_mig_lci,
    parse_mig_lgi,
    parse_nvlink_status,
    parse_query_gpu,
    parse_smi_list,
    parse_smi_q_text,
    parse_smi_xml,
    parse_topo_matrix,
)

#: ``run_command(argv) -> (rc, stdout, stderr)``, the shape of ``AnsibleModule.run_command``.
RunCommand = Callable[[list[str]], tuple[int, str, str]]


BACKENDS = ("auto", "nvml", "nvidia-smi")


#: Fields of the ``--query-gpu`` call; the same command line as the captured
#: ``smi-query.txt`` (header and units kept, so columns are read by name).
QUERY_FIELDS = (
    "index,uuid,name,pci.bus_id,driver_version,memory.total,mig.mode.current,"
    "mig.mode.pending,compute_cap,persistence_mode"
)


# ------------------------------------------------------------------ nvidia-smi backend


def _run(run_command: RunCommand, argv: list[str]) -> tuple[int, str, str]:
    try:
        rc, out, err = run_command(argv)
    except FileNotFoundError as exc:
        raise NoDriverError(f"{argv[0]} not found: {exc}") from exc
    except OSError as exc:
        raise GpuQueryError(f"cannot run {' '.join(argv)}: {exc}") from exc
    if rc == 127:
        raise NoDriverError(f"{argv[0]} not found (exit 127): {(err or out).strip()}")
    return rc, out or "", err or ""


def _failed(argv: list[str], rc: int, out: str, err: str) -> GpuQueryError:
    message = (err.strip() or out.strip() or "no output").splitlines()
    text = " ".join(line.strip() for line in message[:4])
    if "couldn't communicate with the NVIDIA driver" in text or rc == 9:
        return GpuQueryError(
            f"{' '.join(argv)} exited {rc}: {text}; the driver is installed but not loaded "
            "(load the nvidia kernel module, or reboot after installing the driver)"
        )
    return GpuQueryError(f"{' '.join(argv)} exited {rc}: {text}")


def _read_nvlink(run_command: RunCommand, smi: str, host: HostGpus, warnings: list[str]) -> None:
    """NVLink peers (``nvidia-smi topo -m``) and active links (``nvidia-smi nvlink -s``) of
    each GPU of ``host``, set on its records; a command that fails leaves a warning."""
    by_index = {g.index: g for g in host.gpus}
    rc, out, err = _run(run_command, [smi, "topo", "-m"])
    if rc == 0:
        for me, peers in parse_topo_matrix(out).items():
            if me not in by_index:
                continue
            by_index[me].nvlink_peers = [
                NvLinkPeer(
                    index=p,
                    uuid=by_index[p].uuid if p in by_index else None,
                    pci_bus_id=by_index[p].pci_bus_id if p in by_index else None,
                    links=n,
                )
                for p, n in peers
            ]
    else:
        warnings.append(f"NVLink peers not read: {_failed([smi, 'topo', '-m'], rc, out, err)}")
    rc, out, err = _run(run_command, [smi, "nvlink", "-s"])
    if rc == 0:
        for idx, links in parse_nvlink_status(out).items():
            if idx in by_index:
                by_index[idx].nvlink_active_links = sum(1 for s in links.values() if s is not None)
    else:
        warnings.append(f"NVLink links not read: {_failed([smi, 'nvlink', '-s'], rc, out, err)}")


def collect_nvidia_smi(run_command: RunCommand, nvidia_smi: str = "nvidia-smi") -> HostGpus:
    """Query every GPU with the nvidia-smi commands listed in the module docstring.

    ``-q -x`` (or ``-q``) and the ``--query-gpu`` call are required; the MIG and NVLink
    listings add detail and, when they fail, leave a warning instead.

    Raises:
        NoDriverError: ``nvidia_smi`` does not exist (runner raised FileNotFoundError or
            the shell answered 127).
        GpuQueryError: nvidia-smi failed (driver not loaded, …) or printed what cannot be
            parsed.
    """
    smi = nvidia_smi
    warnings: list[str] = []
    rc, out, err = _run(run_command, [smi, "-q", "-x"])
    host: HostGpus | None = None
    if rc == 0:
        try:
            host = parse_smi_xml(out)
        except GpuQueryError as exc:
            warnings.append(f"{exc}; reading nvidia-smi -q instead")
    if host is None:
        rc2, out2, err2 = _run(run_command, [smi, "-q"])
        if rc2 != 0:
            raise (
                _failed([smi, "-q"], rc2, out2, err2)
                if rc == 0
                else _failed([smi, "-q", "-x"], rc, out, err)
            )
        host = parse_smi_q_text(out2)
    host.warnings = warnings

    argv = [smi, f"--query-gpu={QUERY_FIELDS}", "--format=csv"]
    rc, out, err = _run(run_command, argv)
    if rc == 0:
        rows = {r.get("uuid"): r for r in parse_query_gpu(out)}
        for gpu in host.gpus:
            row = rows.get(gpu.uuid)
            if row is None:
                warnings.append(f"GPU {gpu.index} ({gpu.uuid}) missing from --query-gpu output")
                continue
            gpu.compute_capability = row.get("compute_cap")
            gpu.architecture = gpu.architecture or architecture_from_compute_capability(
                gpu.compute_capability
            )
    else:
        warnings.append(f"compute capability not read: {_failed(argv, rc, out, err)}")

    listed: dict[str, ListedGpu] = {}
    rc, out, err = _run(run_command, [smi, "-L"])
    if rc == 0:
        listed = {g.uuid: g for g in parse_smi_list(out)}
    else:
        warnings.append(f"MIG device UUIDs not read: {_failed([smi, '-L'], rc, out, err)}")

    lgi: list[dict[str, Any]] = []
    lci: list[dict[str, Any]] = []
    if any(g.mig_mode_current == "Enabled" for g in host.gpus):
        for flag, parser, target in (
            ("-lgi", parse_mig_lgi, lgi),
            ("-lci", parse_mig_lci, lci),
        ):
            rc, out, err = _run(run_command, [smi, "mig", flag])
            try:
                target.extend(parser(out + "\n" + err))
            except GpuQueryError as exc:
                warnings.append(f"{exc} (MIG profiles and placements left empty)")
                continue
            if rc != 0 and not EMPTY_MIG.search(out + err):
                warnings.append(str(_failed([smi, "mig", flag], rc, out, err)))
    for gpu in host.gpus:
        if gpu.mig_mode_current == "Enabled" or gpu.mig_devices:
            gpu.mig_devices = assemble_mig_devices(gpu, listed.get(gpu.uuid), lgi, lci)

    if len(host.gpus) > 1:
        _read_nvlink(run_command, smi, host, warnings)
    return host


# ------------------------------------------------------------------ MIG profiles


def collect_mig_profiles(
    run_command: RunCommand, nvidia_smi: str | None, gpus: list[GpuInfo]
) -> tuple[dict[int, list[dict[str, Any]]], list[str]]:
    """The MIG GPU-instance profiles each MIG-capable GPU reports: ``({gpu index: [profile
    record]}, warnings)``, records as ``mig.profiles.profile_facts`` gives them, read with
    ``nvidia-smi mig -lgip`` and ``-lgipp`` (read-only; both answer whether MIG is on or
    off). Nothing is run when no GPU is MIG-capable or there is no nvidia-smi; a command
    that fails or prints what cannot be read is a warning, never an error."""
    if not nvidia_smi or not any(g.mig_capable for g in gpus):
        return {}, []
    texts = []
    for flag in ("-lgip", "-lgipp"):
        argv = [nvidia_smi, "mig", flag]
        rc, out, err = _run(run_command, argv)
        if rc != 0:
            return {}, [f"MIG profiles not read: {_failed(argv, rc, out, err)}"]
        texts.append(out)
    try:
        found = mprof.profile_facts(texts[0], texts[1])
    except mprof.LgipParseError as exc:
        return {}, [f"MIG profiles not read: {exc}"]
    capable = {g.index for g in gpus if g.mig_capable}
    return {i: recs for i, recs in found.items() if i in capable}, []


# ------------------------------------------------------------------ entry points


def collect_host(
    run_command: RunCommand,
    backend: str = "auto",
    nvidia_smi: str | None = "nvidia-smi",
) -> HostGpus:
    """The GPUs of this host through ``backend``.

    ``auto`` uses NVML when ``pynvml`` imports and ``nvmlInit`` succeeds, else nvidia-smi.
    ``nvidia_smi`` is the program to run (``None``: known to be missing).

    Raises:
        ValueError: ``backend`` is not one of :data:`BACKENDS`.
        NoDriverError: no NVML library and no nvidia-smi (``auto``), or the chosen backend's
            one is missing.
        GpuQueryError: ``backend=nvml`` without ``pynvml``; a query failed.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {', '.join(BACKENDS)}")
    nvml_reason = None
    nvml_warning = None
    if backend in ("auto", "nvml"):
        nv = load_nvml()
        if nv is None:
            nvml_reason = "the Python module pynvml (package nvidia-ml-py) is not importable"
            if backend == "nvml":
                raise GpuQueryError(
                    f"backend=nvml: {nvml_reason}; fix: install nvidia-ml-py for the Python "
                    "that runs the module, or set backend=auto"
                )
        else:
            try:
                return collect_nvml(nv)
            except NoDriverError as exc:
                if backend == "nvml":
                    raise
                nvml_reason = str(exc)
            except GpuQueryError as exc:
                if backend == "nvml":
                    raise
                nvml_warning = f"NVML failed, nvidia-smi used instead: {exc}"
    if nvidia_smi is None:
        raise NoDriverError(
            "nvidia-smi is not installed"
            + (f" and NVML is not usable ({nvml_reason})" if nvml_reason else "")
        )
    try:
        host = collect_nvidia_smi(run_command, nvidia_smi)
        if nvml_warning:
            host.warnings.insert(0, nvml_warning)
        return host
    except NoDriverError as exc:
        raise NoDriverError(
            f"{exc}" + (f"; NVML is not usable either ({nvml_reason})" if nvml_reason else "")
        ) from exc


def collect(
    run_command: RunCommand, backend: str = "auto", nvidia_smi: str | None = "nvidia-smi"
) -> list[GpuInfo]:
    """The GPUs of this host in index order (see :func:`collect_host` for arguments and
    errors)."""
    return collect_host(run_command, backend, nvidia_smi).gpus
