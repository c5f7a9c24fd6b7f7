# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The GPUs of one host as ``nvidia-smi`` shows them, for the MIG apply.

Standard library only (copied to hosts with ``mig.apply``). ``read_gpus`` reads
``nvidia-smi -q -x`` (identity, PCI device ID, MIG mode current and pending),
``nvidia-smi --query-compute-apps`` (processes) and, when MIG is on, ``nvidia-smi mig
-lgi`` and ``-lci`` (GPU and compute instances); ``gpu_model`` the MIG profiles and
placements the driver reports (``mig -lgip``/``-lgipp``), else the built-in tables of
``mig.profiles``. Commands run through a ``RunCommand``; ``MigApplyError`` is the error
of every step of the apply, from this first one on.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import gpu as ginfo
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import smi as smip

#: ``run_command(argv) -> (rc, stdout, stderr)``, the shape of ``AnsibleModule.run_command``.
RunCommand = Callable[[list[str]], tuple[int, str, str]]
#: ``read_file(path) -> text``, or raises OSError.
ReadFile = Callable[[str], str]


class MigApplyError(Exception):
    """The layout cannot be applied; the message names the GPU, the cause and the fix.

    ``results`` holds the per-GPU results gathered so far (as ``apply`` returns them).
    """

    def __init__(self, message: str, results: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.results = results or []


def run_program(run: RunCommand, argv: list[str]) -> tuple[int, str, str]:
    """``run(argv)`` as ``(rc, stdout, stderr)``, outputs ``""`` for None. Raises
    ``MigApplyError`` when the program is missing."""
    try:
        rc, out, err = run(argv)
    except FileNotFoundError as exc:
        raise MigApplyError(
            f"{argv[0]} not found ({exc}); fix: install the NVIDIA driver"
        ) from None
    return rc, out or "", err or ""


def run_program_ok(run: RunCommand, argv: list[str]) -> str:
    """The stdout of ``run(argv)``. Raises ``MigApplyError`` when the program is missing or
    exits non-zero (the message quotes the command and its output)."""
    rc, out, err = run_program(run, argv)
    if rc != 0:
        text = " ".join((out + " " + err).split())
        raise MigApplyError(f"'{' '.join(argv)}' exited {rc}: {text}")
    return out


@dataclass(frozen=True)
class Process:
    """A GPU process (``nvidia-smi --query-compute-apps``): PID, name, used memory in MiB
    (None when not reported)."""

    pid: int
    name: str
    used_memory_mib: int | None = None


@dataclass
class GpuState:
    """One GPU as nvidia-smi shows it. ``gis`` are ``mig.placement.GpuInstance`` (with
    ``instance_id``), ``cis`` maps GI ID -> CI IDs, ``ci_profiles`` GI ID -> their CI
    profiles (``1c.3g.71gb``), ``device_id`` is ``0x233510DE``."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str | None
    memory_mib: int
    mig_capable: bool
    mode_current: str | None
    mode_pending: str | None
    device_id: str | None = None
    gis: list[mpla.GpuInstance] = field(default_factory=list)
    cis: dict[int, list[int]] = field(default_factory=dict)
    ci_profiles: dict[int, list[str]] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)

    @property
    def mig_on(self) -> bool:
        return self.mode_current == "Enabled"

    def layout(self) -> dict[str, Any]:
        """Plain data for results and diffs: mode and instances (start:size in slices)."""
        return {
            "mig_mode_current": self.mode_current or "N/A",
            "mig_mode_pending": self.mode_pending or "N/A",
            "instances": [
                {**gi.to_dict(), "compute_instances": len(self.cis.get(gi.instance_id or -1, []))}
                for gi in sorted(self.gis, key=lambda g: (g.start, g.size))
            ],
        }


def device_ids(xml_text: str) -> list[str | None]:
    """``pci/pci_device_id`` of each GPU (``233510DE`` -> ``0x233510DE``)."""
    try:
        root = ET.fromstring(xml_text.strip())
    except ET.ParseError:
        return []
    out: list[str | None] = []
    for node in root.findall("gpu"):
        found = node.find("pci/pci_device_id")
        text = (found.text or "").strip() if found is not None else ""
        if text and ginfo.absent(text):
            out.append(text if text.lower().startswith("0x") else "0x" + text)
        else:
            out.append(None)
    return out


def parse_compute_apps(text: str) -> dict[str, list[Process]]:
    """``--query-compute-apps=gpu_uuid,pid,process_name,used_memory
    --format=csv,noheader,nounits`` -> GPU UUID -> processes."""
    out: dict[str, list[Process]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 3 or not cells[1].isdigit():
            continue
        mem = ginfo.to_int(cells[3]) if len(cells) > 3 else None
        out.setdefault(cells[0], []).append(Process(int(cells[1]), cells[2], mem))
    return out


def read_gpus(run: RunCommand, smi: str) -> list[GpuState]:
    """Every GPU of the host with its MIG mode, instances and processes.

    Raises ``MigApplyError`` when nvidia-smi fails or prints what cannot be read.
    """
    xml_text = run_program_ok(run, [smi, "-q", "-x"])
    try:
        host = smip.parse_smi_xml(xml_text)
    except ginfo.GpuQueryError as exc:
        raise MigApplyError(str(exc)) from None
    ids = device_ids(xml_text)
    apps = parse_compute_apps(
        run_program_ok(
            run,
            [
                smi,
                "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                "--format=csv,noheader,nounits",
            ],
        )
    )
    gpus: list[GpuState] = []
    for n, g in enumerate(host.gpus):
        gpus.append(
            GpuState(
                index=g.index,
                uuid=g.uuid,
                name=g.name,
                pci_bus_id=g.pci_bus_id,
                memory_mib=g.memory_mib or 0,
                mig_capable=g.mig_capable,
                mode_current=g.mig_mode_current,
                mode_pending=g.mig_mode_pending,
                device_id=ids[n] if n < len(ids) else None,
                processes=apps.get(g.uuid, []),
            )
        )
    if any(g.mig_on for g in gpus):
        by_index = {g.index: g for g in gpus}
        rc, out, err = run_program(run, [smi, "mig", "-lgi"])
        if rc != 0 and not smip.EMPTY_MIG.search(out + err):
            raise MigApplyError(f"'{smi} mig -lgi' exited {rc}: {' '.join((out + err).split())}")
        for row in mpr.parse_lgi(out):
            gpu = by_index.get(row["gpu"])
            if gpu is not None:
                gpu.gis.append(
                    mpla.GpuInstance(
                        row["profile"],
                        row["profile_id"],
                        row["start"],
                        row["size"],
                        row["instance_id"],
                    )
                )
        rc, out, err = run_program(run, [smi, "mig", "-lci"])
        try:
            rows = smip.parse_mig_lci(out + "\n" + err)
        except ginfo.GpuQueryError as exc:
            raise MigApplyError(str(exc)) from None
        for row in rows:
            gpu = by_index.get(row["gpu"])
            if gpu is not None:
                gpu.cis.setdefault(row["gi_id"], []).append(row["ci_id"])
                gpu.ci_profiles.setdefault(row["gi_id"], []).append(row["profile"])
    return gpus


def gpu_model(run: RunCommand, smi: str, gpu: GpuState) -> mpr.GpuModel:
    """The GPU's MIG profiles: parsed ``mig -lgip``/``-lgipp`` when the driver answers
    them, else the built-in table. Raises ``MigApplyError`` when neither knows the GPU."""
    rc, lgip, _unused = run_program(run, [smi, "mig", "-i", str(gpu.index), "-lgip"])
    if rc == 0 and "MIG" in lgip:
        _unused, lgipp, _unused = run_program(run, [smi, "mig", "-i", str(gpu.index), "-lgipp"])
        try:
            return mpr.model_from_nvidia_smi(gpu.name, gpu.memory_mib, lgip, lgipp, gpu.index)
        except mpr.LgipParseError:
            pass
    try:
        return mpr.model(gpu.name)
    except mpr.UnknownGpuModel as exc:
        raise MigApplyError(f"GPU {gpu.index}: {exc}") from None
