# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Apply a MIG layout to the GPUs of one host with ``nvidia-smi``.

Standard library only: Ansible ships this file to managed hosts (module ``nvidia_mig``),
and role ``mig`` copies it with the module_utils it imports (``mig.profiles.py``,
``mig.planner.py``, ``mig_config.py``, ``mig.placement.py``, ``nvidia.gpu.py``...; the list
is in ``roles/mig/tasks/persist.yml``) to ``/usr/local/lib/gpufleet-mig`` where
``gpufleet-mig.service`` runs it at boot as ``python3 -m
ansible_collections.gpufleet.cluster.plugins.module_utils.mig.apply --layout-file
/etc/gpufleet/mig/layout.yaml`` (see :func:`main`).

Steps of :func:`apply` (mig-parted's apply logic, NVIDIA/mig-parted ``cmd/nvidia-mig-parted/
apply``, and the NVIDIA MIG user guide, "Getting started with MIG"):

1. read every GPU: ``nvidia-smi -q -x`` (identity, PCI device ID, MIG mode current and
   pending), ``nvidia-smi --query-compute-apps`` (processes), ``nvidia-smi mig -lgi`` and
   ``-lci`` (GPU and compute instances) and, per MIG-capable GPU, ``mig -lgip`` and
   ``-lgipp`` (profiles and placements as the driver reports them; they win over the
   built-in tables of ``mig.profiles``);
2. plan every selected GPU with ``mig.planner.plan`` (keeping the instances that already
   match) before anything changes: a layout that does not fit stops the run here;
3. when a MIG mode must change, find the GPU's clients (processes, systemd units
   ``nvidia-persistenced``, ``nvidia-dcgm``, ``dcgm-exporter``, ``nvidia-fabricmanager``,
   kernel module ``nvidia_drm``, the DRA kubelet plugin and device plugin containers) and
   stop the allowed ones; refuse, naming each client and the variable that allows it,
   otherwise (NVIDIA/gpu-operator#118, NVIDIA/mig-parted#181);
4. destroy compute instances then GPU instances not in the plan (NVML refuses to destroy
   a GI that still has CIs); set the MIG mode (``nvidia-smi -i N -mig 0|1``); a mode left
   pending is reset (``nvidia-smi -i N -r``) when allowed, else reported as needing a
   reboot when allowed, else refused naming what holds the GPU;
5. create the planned GIs at their placements with a default CI each (``nvidia-smi mig
   -i N -cgi <profile ID>:<start>,... -C``: "a profile tuple consists of a profile name or
   ID and an optional placement specifier, which consists of a colon and a placement
   start index", ``nvidia-smi mig -h``);
6. read the GPUs again and verify the layout; restart what was stopped, also on failure.

MIG mode is never left on with zero instances: such a request is refused, and a GPU
whose creation failed right after this run enabled MIG is switched back off
(NVIDIA/gpu-operator#2833: MIG on with no instances is a wedged node;
kubernetes-sigs/dra-driver-nvidia-gpu#149).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mpl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import gpu as ginfo
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import smi as smip

#: ``run_command(argv) -> (rc, stdout, stderr)``, the shape of ``AnsibleModule.run_command``.
RunCommand = Callable[[list[str]], tuple[int, str, str]]
#: ``read_file(path) -> text``, or raises OSError.
ReadFile = Callable[[str], str]

#: Client kinds that ``allow_stop`` may name, and what stops each.
SYSTEMD_CLIENTS = {
    "nvidia-persistenced": "nvidia-persistenced.service",
    "nvidia-dcgm": "nvidia-dcgm.service",
    "dcgm-exporter": "dcgm-exporter.service",
    "nvidia-fabricmanager": "nvidia-fabricmanager.service",
}
CONTAINER_CLIENTS = {
    # kind: substrings of the container name (crictl ps) or process name (/proc/*/comm)
    "dra-kubelet-plugin": ("gpu-kubelet-plugin", "kubelet-plugin", "gpus"),
    "k8s-device-plugin": ("nvidia-device-plugin", "device-plugin"),
}
MODULE_CLIENTS = {"nvidia-drm": "nvidia_drm"}
CLIENT_KINDS = (*SYSTEMD_CLIENTS, *CONTAINER_CLIENTS, *MODULE_CLIENTS)

#: GPU process names -> the client kind whose stop releases them.
PROCESS_KINDS = {
    "nvidia-persistenced": "nvidia-persistenced",
    "nv-hostengine": "nvidia-dcgm",
    "dcgm-exporter": "dcgm-exporter",
    "nv-fabricmanager": "nvidia-fabricmanager",
    "gpu-kubelet-plugin": "dra-kubelet-plugin",
    "nvidia-device-plugin": "k8s-device-plugin",
}


class MigApplyError(Exception):
    """The layout cannot be applied; the message names the GPU, the cause and the fix.

    ``results`` holds the per-GPU results gathered so far (as ``apply`` returns them).
    """

    def __init__(self, message: str, results: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.results = results or []


# --- inputs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What to apply. Exactly one of ``layout`` (profile -> count, the same for every
    selected GPU) and ``config`` (a mig-parted config mapping) with ``config_name``.

    ``devices`` is ``"all"`` or GPU indices; ``mig_enabled`` applies to ``layout``;
    ``allow_stop`` lists client kinds (``CLIENT_KINDS``) that may be stopped;
    ``var_prefix`` is how error messages name the options (``""`` for the module,
    ``"mig_"`` for the role); ``dra_driver``: the node runs NVIDIA's DRA driver, so a
    profile it cannot serve is refused (``mig.planner.check_dra_driver``).
    """

    layout: Mapping[str, int] | None = None
    config: Any = None
    config_name: str | None = None
    devices: str | tuple[int, ...] = "all"
    mig_enabled: bool = True
    allow_stop: tuple[str, ...] = ()
    allow_gpu_reset: bool = True
    allow_reboot: bool = False
    nvidia_smi: str = "nvidia-smi"
    var_prefix: str = ""
    dra_driver: bool = False

    def name(self, option: str) -> str:
        return f"{self.var_prefix}{option}"


@dataclass(frozen=True)
class Target:
    """What one GPU should become: MIG on with ``layout``, or MIG off."""

    mig_enabled: bool
    layout: dict[str, int]


def check_request(req: Request) -> None:
    """Validate option combinations. Raises ``MigApplyError`` naming the option."""
    if (req.layout is None) == (req.config is None):
        raise MigApplyError(
            f"give exactly one of {req.name('layout')} (profile -> count) and "
            f"{req.name('config')} (a mig-parted config) with {req.name('config_name')}"
        )
    if req.config is not None and not req.config_name:
        raise MigApplyError(
            f"{req.name('config')} is set but {req.name('config_name')} is empty; fix: name "
            "the mig-configs entry to apply"
        )
    bad = [k for k in req.allow_stop if k not in CLIENT_KINDS]
    if bad:
        raise MigApplyError(
            f"{req.name('allow_stop')}={list(req.allow_stop)!r}: unknown client kind "
            f"{bad[0]!r}; fix: use only {', '.join(CLIENT_KINDS)}"
        )
    if req.layout is not None:
        layout = mpl.parse_layout(dict(req.layout), name=req.name("layout"))
        _check_dra_driver(req, layout, req.name("layout"))
        wanted = {k: v for k, v in layout.items() if v}
        if req.mig_enabled and not wanted:
            raise MigApplyError(
                f"{req.name('layout')}={dict(req.layout)!r} with {req.name('mig_enabled')}=true "
                "would leave MIG mode on with zero GPU instances, which no workload can use; "
                f"fix: list the profiles to create, or set {req.name('mig_enabled')}=false to "
                "turn MIG off"
            )
        if not req.mig_enabled and wanted:
            raise MigApplyError(
                f"{req.name('layout')}={dict(req.layout)!r} asks for MIG instances but "
                f"{req.name('mig_enabled')}=false; fix: set it to true or empty the layout"
            )


def _check_dra_driver(req: Request, layout: Mapping[str, int], name: str) -> None:
    if req.dra_driver:
        try:
            mpl.check_dra_driver(layout, name=name)
        except mpl.DraDriverCannotServe as exc:
            raise MigApplyError(
                f"{exc} (the node runs the DRA driver: {req.name('dra_driver')}=true)"
            ) from None


def targets(req: Request, gpus: list[GpuState]) -> dict[int, Target]:
    """The target of each selected GPU (GPUs a mig-parted config leaves out are absent).

    Raises ``MigApplyError`` for an unknown device index, a bad config or a config entry
    with MIG on and zero instances.
    """
    indices = [g.index for g in gpus]
    if req.devices == "all":
        selected = indices
    else:
        missing = [d for d in req.devices if d not in indices]
        if missing:
            raise MigApplyError(
                f"{req.name('devices')}={list(req.devices)!r}: GPU {missing[0]} does not exist "
                f"on this host (GPUs: {indices}); fix: list indices nvidia-smi -L shows, or 'all'"
            )
        selected = list(req.devices)
    if req.layout is not None:
        layout = mpl.parse_layout(dict(req.layout), name=req.name("layout"))
        # zero counts stay: the planner refuses a profile the GPU lacks whatever its count
        return {i: Target(req.mig_enabled, dict(layout)) for i in selected}
    try:
        config = mcfg.load_mig_config(req.config)
        ids = {g.index: g.device_id for g in gpus if g.device_id}
        entries = mcfg.select_entries(config, str(req.config_name), selected, ids or None)
    except mcfg.MigConfigError as exc:
        raise MigApplyError(f"{req.name('config')}: {exc}") from None
    out: dict[int, Target] = {}
    for i, entry in entries.items():
        where = f"{req.name('config')} {req.config_name!r} GPU {i} mig-devices"
        _check_dra_driver(req, entry.mig_devices, where)
        wanted = {k: v for k, v in entry.mig_devices.items() if v}
        if entry.mig_enabled and not wanted:
            raise MigApplyError(
                f"{req.name('config')} entry {req.config_name!r} for GPU {i} has "
                "mig-enabled: true and no mig-devices: that leaves MIG mode on with zero GPU "
                "instances; fix: list the profiles to create, or set mig-enabled: false"
            )
        out[i] = Target(entry.mig_enabled, dict(entry.mig_devices))
    return out


# --- reading the GPUs ------------------------------------------------------------------


@dataclass(frozen=True)
class Process:
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


def _run(run: RunCommand, argv: list[str]) -> tuple[int, str, str]:
    try:
        rc, out, err = run(argv)
    except FileNotFoundError as exc:
        raise MigApplyError(
            f"{argv[0]} not found ({exc}); fix: install the NVIDIA driver"
        ) from None
    return rc, out or "", err or ""


def _must(run: RunCommand, argv: list[str]) -> str:
    rc, out, err = _run(run, argv)
    if rc != 0:
        text = " ".join((out + " " + err).split())
        raise MigApplyError(f"'{' '.join(argv)}' exited {rc}: {text}")
    return out


def _device_ids(xml_text: str) -> list[str | None]:
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
    xml_text = _must(run, [smi, "-q", "-x"])
    try:
        host = smip.parse_smi_xml(xml_text)
    except ginfo.GpuQueryError as exc:
        raise MigApplyError(str(exc)) from None
    ids = _device_ids(xml_text)
    apps = parse_compute_apps(
        _must(
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
        rc, out, err = _run(run, [smi, "mig", "-lgi"])
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
        rc, out, err = _run(run, [smi, "mig", "-lci"])
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
    rc, lgip, _ = _run(run, [smi, "mig", "-i", str(gpu.index), "-lgip"])
    if rc == 0 and "MIG" in lgip:
        _, lgipp, _ = _run(run, [smi, "mig", "-i", str(gpu.index), "-lgipp"])
        try:
            return mpr.model_from_nvidia_smi(gpu.name, gpu.memory_mib, lgip, lgipp, gpu.index)
        except mpr.LgipParseError:
            pass
    try:
        return mpr.model(gpu.name)
    except mpr.UnknownGpuModel as exc:
        raise MigApplyError(f"GPU {gpu.index}: {exc}") from None


# --- GPU clients -------------------------------------------------------------------------


@dataclass(frozen=True)
class Client:
    """Something that holds a GPU open: ``kind`` (one of ``CLIENT_KINDS``, or ``process``
    for a process no kind explains), ``name`` (unit, module, container or process name)
    and ``ref`` (container ID or PID)."""

    kind: str
    name: str
    ref: str = ""

    def describe(self) -> str:
        if self.kind == "process":
            return f"process {self.name} (pid {self.ref})"
        if self.kind in CONTAINER_CLIENTS:
            return f"{self.kind} container {self.name} ({self.ref[:13]})"
        if self.kind in MODULE_CLIENTS:
            return f"kernel module {self.name}"
        return f"systemd unit {self.name}"


def find_clients(run: RunCommand, read_file: ReadFile, processes: list[Process]) -> list[Client]:
    """Clients on the host: active systemd units of ``SYSTEMD_CLIENTS`` (``systemctl
    is-active``), ``nvidia_drm`` in ``/proc/modules``, running containers of
    ``CONTAINER_CLIENTS`` (``crictl ps -o json``) and the GPU ``processes`` (those of a
    known client process name are folded into that client). A missing ``systemctl`` or
    ``crictl`` means no such clients."""
    found: list[Client] = []
    for kind, unit in SYSTEMD_CLIENTS.items():
        try:
            rc, out, _ = run(["systemctl", "is-active", unit])
        except (FileNotFoundError, OSError):
            break
        if rc == 0 and out.strip() == "active":
            found.append(Client(kind, unit))
    try:
        modules = read_file("/proc/modules")
    except OSError:
        modules = ""
    for kind, mod in MODULE_CLIENTS.items():
        if any(line.split(" ", 1)[0] == mod for line in modules.splitlines()):
            found.append(Client(kind, mod))
    found.extend(_containers(run))
    for p in processes:
        kind = PROCESS_KINDS.get(p.name.rsplit("/", 1)[-1])
        if kind is None:
            found.append(Client("process", p.name, str(p.pid)))
        elif not any(c.kind == kind for c in found):
            found.append(Client(kind, p.name, str(p.pid)))
    return found


def _containers(run: RunCommand) -> list[Client]:
    try:
        rc, out, _ = run(["crictl", "ps", "-o", "json"])
    except (FileNotFoundError, OSError):
        return []
    if rc != 0:
        return []
    try:
        data = json.loads(out)
    except ValueError:
        return []
    found = []
    for c in data.get("containers") or []:
        name = str((c.get("metadata") or {}).get("name", ""))
        labels = c.get("labels") or {}
        pod = str(labels.get("io.kubernetes.pod.name", ""))
        kind = classify_container(name, pod)
        if kind:
            found.append(Client(kind, f"{pod}/{name}" if pod else name, str(c.get("id", ""))))
    return found


def classify_container(name: str, pod: str) -> str | None:
    """The client kind of a container by its name and its pod's name, or None.

    The NVIDIA DRA driver's kubelet plugin pod is ``*-kubelet-plugin-*`` with containers
    ``gpus`` and ``compute-domains`` (the GPU simulator's chart copies that shape); the
    device plugin's is ``nvidia-device-plugin-*``."""
    text = f"{pod} {name}".lower()
    if "device-plugin" in text:
        return "k8s-device-plugin"
    if name == "gpu-kubelet-plugin" or ("kubelet-plugin" in pod.lower() and name == "gpus"):
        return "dra-kubelet-plugin"
    return None


def refuse_message(blocking: list[Client], req: Request, gpu_index: int, why: str) -> str:
    """One message naming every client that blocks and how to allow it."""
    parts = []
    for c in blocking:
        if c.kind == "process":
            parts.append(
                f"{c.describe()}: stop it, or set {req.name('allow_reboot')}=true to apply "
                "the change at the next reboot"
            )
        else:
            parts.append(
                f"{c.describe()}: add {c.kind!r} to {req.name('allow_stop')} to stop it "
                "during the change and restart it after"
            )
    return f"GPU {gpu_index}: {why}; held by " + "; ".join(parts)


def stop_client(run: RunCommand, client: Client) -> str:
    """Stop one client; returns what was done. Raises ``MigApplyError`` on failure."""
    if client.kind in SYSTEMD_CLIENTS:
        _must(run, ["systemctl", "stop", client.name])
        return f"stopped {client.name}"
    if client.kind in MODULE_CLIENTS:
        _must(run, ["modprobe", "-r", client.name])
        return f"unloaded {client.name}"
    if client.kind in CONTAINER_CLIENTS and client.ref and client.kind != "process":
        if client.ref.isdigit():
            _must(run, ["kill", client.ref])
            return f"killed pid {client.ref} ({client.name})"
        _must(run, ["crictl", "stop", client.ref])
        return f"stopped container {client.name}"
    raise MigApplyError(f"cannot stop {client.describe()}")


def restart_client(run: RunCommand, client: Client) -> str:
    """Start a stopped client again (containers are restarted by the kubelet)."""
    if client.kind in SYSTEMD_CLIENTS:
        rc, _out, err = _run(run, ["systemctl", "start", client.name])
        return f"started {client.name}" if rc == 0 else f"start of {client.name} failed: {err}"
    if client.kind in MODULE_CLIENTS:
        rc, _out, err = _run(run, ["modprobe", client.name])
        return f"loaded {client.name}" if rc == 0 else f"load of {client.name} failed: {err}"
    return f"{client.name}: restarted by the kubelet"


# --- planning ------------------------------------------------------------------------------


@dataclass
class GpuPlan:
    """What to do to one GPU."""

    gpu: GpuState
    target: Target
    plan: mpla.Plan | None = None
    destroy: list[mpla.GpuInstance] = field(default_factory=list)
    create: list[mpla.Placement] = field(default_factory=list)
    ci_create: list[int] = field(default_factory=list)  # kept GI IDs that lack a CI
    mode_change: str | None = None  # "1" enable / "0" disable

    @property
    def changed(self) -> bool:
        return bool(self.destroy or self.create or self.ci_create or self.mode_change)

    def after(self) -> dict[str, Any]:
        if not self.target.mig_enabled:
            mode = "Disabled" if self.gpu.mig_capable else "N/A"
            return {"mig_mode_current": mode, "mig_mode_pending": mode, "instances": []}
        assert self.plan is not None
        return {
            "mig_mode_current": "Enabled",
            "mig_mode_pending": "Enabled",
            "instances": [{**p.to_dict(), "compute_instances": 1} for p in self.plan.placements],
        }


def _narrower(ci_profile: str) -> bool:
    """True for a compute instance narrower than its GPU instance (``1c.3g.71gb``)."""
    slices = mpr.compute_instance_slices(ci_profile)
    return slices is not None and slices[0] < slices[1]


def plan_gpu(gpu: GpuState, target: Target, model: mpr.GpuModel | None, req: Request) -> GpuPlan:
    """Pure: the actions that turn ``gpu`` into ``target``.

    Raises ``MigApplyError`` for a layout on a GPU without MIG, an unknown profile or a
    layout that does not fit (the planner's reason and fix).
    """
    out = GpuPlan(gpu, target)
    if not gpu.mig_capable:
        if target.mig_enabled:
            raise MigApplyError(
                f"GPU {gpu.index} ({gpu.name}) does not support MIG (nvidia-smi answers 'Not "
                f"Supported') but the layout asks for {target.layout}; fix: leave this GPU out "
                f"with {req.name('devices')}, or apply the layout only to MIG GPU nodes"
            )
        return out
    if not target.mig_enabled:
        out.destroy = list(gpu.gis)
        if gpu.mode_current != "Disabled" or gpu.mode_pending != "Disabled":
            out.mode_change = "0"
        return out
    assert model is not None
    try:
        out.plan = mpl.plan(model, target.layout, current=gpu.gis if gpu.mig_on else None)
    except mpr.UnknownProfile as exc:
        raise MigApplyError(f"GPU {gpu.index}: {exc}; fix {req.name('layout')}") from None
    except mpla.LayoutDoesNotFit as exc:
        raise MigApplyError(f"GPU {gpu.index}: {exc.reason}") from None
    guessed = sorted(
        {
            p.profile
            for p in out.plan.placements
            if {"id", "placements"} & set(model.profile(p.profile_id).derived)
        }
    )
    if guessed:
        # -cgi with a GI profile ID or start no source gives could carve something else
        raise MigApplyError(
            f"GPU {gpu.index} ({gpu.name}): the GI profile ID or placements of "
            f"{', '.join(guessed)} in the built-in table are derived, not sourced, and "
            "the GPU did not answer 'nvidia-smi mig -lgip'/'-lgipp'; fix: make those "
            "commands answer on the node (run as root), then apply again"
        )
    current = gpu.gis if gpu.mig_on else []
    # a GI sub-divided into several CIs, or holding a CI narrower than itself, is not what
    # the layout describes (one full compute instance per GI): recreate it
    split = [
        g
        for g in current
        if len(gpu.cis.get(g.instance_id or -1, [])) > 1
        or any(_narrower(c) for c in gpu.ci_profiles.get(g.instance_id or -1, []))
    ]
    whole = [g for g in current if g not in split]
    d = mpla.diff(whole, out.plan)
    out.destroy = split + list(d.destroy)
    out.create = list(d.create)
    out.ci_create = [
        g.instance_id
        for g in d.keep
        if g.instance_id is not None and not gpu.cis.get(g.instance_id)
    ]
    if gpu.mode_current != "Enabled" or gpu.mode_pending != "Enabled":
        out.mode_change = "1"
    return out


# --- applying ------------------------------------------------------------------------------


@dataclass
class Outcome:
    """Per-GPU result, as returned to the caller."""

    index: int
    name: str
    mig_capable: bool
    before: dict[str, Any]
    after: dict[str, Any]
    changed: bool = False
    created: list[dict[str, Any]] = field(default_factory=list)
    destroyed: list[dict[str, Any]] = field(default_factory=list)
    stopped_clients: list[str] = field(default_factory=list)
    reset: bool = False
    reboot_required: bool = False
    commands: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ApplyResult:
    changed: bool
    gpus: list[dict[str, Any]]
    stopped_clients: list[str]
    restarted_clients: list[str]
    reboot_required: bool
    mig_devices: int
    diff: dict[str, str]
    messages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def layout_text(gpus: list[tuple[int, str, dict[str, Any]]]) -> str:
    """Diff text: one line per GPU and per instance (``1g.18gb (ID 19) at 0:1``)."""
    lines = []
    for index, name, lay in gpus:
        lines.append(
            f"GPU {index} ({name}): MIG {lay['mig_mode_current']}"
            + (
                f" (pending {lay['mig_mode_pending']})"
                if lay["mig_mode_pending"] != lay["mig_mode_current"]
                else ""
            )
        )
        for inst in lay["instances"]:
            lines.append(
                f"  {inst['profile']} (ID {inst['profile_id']}) at {inst['start']}:{inst['size']}"
            )
    return "\n".join(lines) + "\n"


def _smi(run: RunCommand, out: Outcome, argv: list[str]) -> tuple[int, str]:
    rc, so, se = _run(run, argv)
    out.commands.append(" ".join(argv[1:]) + f" -> {rc}")
    return rc, (so + se)


def apply(
    req: Request,
    run: RunCommand,
    read_file: ReadFile | None = None,
    check_mode: bool = False,
) -> ApplyResult:
    """Bring the host's GPUs to the requested layout (see the module docstring).

    Returns ``ApplyResult``; raises ``MigApplyError`` (with the per-GPU results so far)
    when the layout cannot be applied. In ``check_mode`` nothing is changed and the result
    says what would be.
    """
    read_file = read_file or _read_text
    check_request(req)
    smi = req.nvidia_smi
    gpus = read_gpus(run, smi)
    if not gpus:
        raise MigApplyError(f"{smi} lists no GPU on this host")
    wanted = targets(req, gpus)
    plans: list[GpuPlan] = []
    for gpu in gpus:
        if gpu.index not in wanted:
            continue
        target = wanted[gpu.index]
        model = gpu_model(run, smi, gpu) if gpu.mig_capable and target.mig_enabled else None
        plans.append(plan_gpu(gpu, target, model, req))
    outcomes = {
        p.gpu.index: Outcome(
            p.gpu.index, p.gpu.name, p.gpu.mig_capable, p.gpu.layout(), p.after(), p.changed
        )
        for p in plans
    }
    for p in plans:
        o = outcomes[p.gpu.index]
        o.created = [c.to_dict() for c in p.create]
        o.destroyed = [d.to_dict() for d in p.destroy]
    changing = [p for p in plans if p.changed]
    before_text = layout_text([(p.gpu.index, p.gpu.name, p.gpu.layout()) for p in plans])
    after_text = layout_text([(p.gpu.index, p.gpu.name, p.after()) for p in plans])

    untouched = sum(len(g.gis) for g in gpus if g.index not in outcomes and g.mig_on)

    def result(changed: bool, stopped: list[str], restarted: list[str]) -> ApplyResult:
        devices = untouched + sum(
            len(o.after["instances"])
            for o in outcomes.values()
            if o.after["mig_mode_current"] == "Enabled"
        )
        return ApplyResult(
            changed=changed,
            gpus=[outcomes[i].to_dict() for i in sorted(outcomes)],
            stopped_clients=stopped,
            restarted_clients=restarted,
            reboot_required=any(o.reboot_required for o in outcomes.values()),
            mig_devices=devices,
            diff={"before": before_text, "after": after_text},
        )

    if not changing:
        return result(False, [], [])

    # Who holds the GPUs: decided before any change.
    mode_plans = [p for p in changing if p.mode_change]
    destroy_plans = [p for p in changing if p.destroy and not p.mode_change]
    to_stop: list[Client] = []
    reboot_gpus: set[int] = set()
    if mode_plans or destroy_plans:
        procs = [pr for p in mode_plans + destroy_plans for pr in p.gpu.processes]
        clients = (
            find_clients(run, read_file, procs)
            if mode_plans
            else [Client("process", pr.name, str(pr.pid)) for pr in procs]
        )
        blocking = [c for c in clients if c.kind not in req.allow_stop]
        to_stop = [c for c in clients if c.kind in req.allow_stop]
        if blocking:
            only_procs = all(c.kind == "process" for c in blocking)
            held = {p.gpu.index for p in mode_plans + destroy_plans if p.gpu.processes}
            if only_procs and req.allow_reboot and mode_plans:
                reboot_gpus = {p.gpu.index for p in mode_plans if p.gpu.index in held}
            else:
                first = (mode_plans + destroy_plans)[0]
                why = (
                    "changing the MIG mode needs the GPU free"
                    if mode_plans
                    else "destroying GPU instances needs them free"
                )
                raise MigApplyError(
                    refuse_message(blocking, req, first.gpu.index, why),
                    [o.to_dict() for o in outcomes.values()],
                )
    if check_mode:
        res = result(True, [c.describe() for c in to_stop], [])
        for i in reboot_gpus:
            outcomes[i].reboot_required = True
        res.gpus = [outcomes[i].to_dict() for i in sorted(outcomes)]
        res.reboot_required = bool(reboot_gpus)
        return res

    stopped: list[Client] = []
    restarted: list[str] = []
    try:
        for c in to_stop:
            stop_client(run, c)
            stopped.append(c)
        for p in changing:
            o = outcomes[p.gpu.index]
            o.stopped_clients = [c.describe() for c in stopped]
            _apply_gpu(req, run, p, o, p.gpu.index in reboot_gpus)
        final = {g.index: g for g in read_gpus(run, smi)}
        for p in changing:
            o = outcomes[p.gpu.index]
            if o.reboot_required:
                o.after = final[p.gpu.index].layout()
                continue
            _verify(p, final[p.gpu.index], o, req)
    finally:
        for c in reversed(stopped):
            restarted.append(restart_client(run, c))
    return result(True, [c.describe() for c in stopped], restarted)


def _apply_gpu(req: Request, run: RunCommand, p: GpuPlan, o: Outcome, reboot: bool) -> None:
    smi, i = req.nvidia_smi, str(p.gpu.index)
    for gi in p.destroy:
        gid = str(gi.instance_id)
        if p.gpu.cis.get(gi.instance_id or -1):
            rc, text = _smi(run, o, [smi, "mig", "-i", i, "-dci", "-gi", gid])
            if rc != 0:
                raise MigApplyError(
                    f"GPU {i}: destroying the compute instances of GI {gid}: {text}"
                )
        rc, text = _smi(run, o, [smi, "mig", "-i", i, "-dgi", "-gi", gid])
        if rc != 0:
            raise MigApplyError(f"GPU {i}: destroying GPU instance {gid} ({gi.profile}): {text}")
    enabled_now = False
    if p.mode_change:
        rc, text = _smi(run, o, [smi, "-i", i, "-mig", p.mode_change])
        if rc != 0:
            raise MigApplyError(f"GPU {i}: nvidia-smi -mig {p.mode_change} failed: {text}")
        state = _one(run, smi, p.gpu.index)
        if state.mode_pending != state.mode_current:
            if req.allow_gpu_reset and not reboot:
                rc, text = _smi(run, o, [smi, "-i", i, "-r"])
                o.reset = rc == 0
                state = _one(run, smi, p.gpu.index)
            if state.mode_pending != state.mode_current:
                if req.allow_reboot:
                    o.reboot_required = True
                    return
                holders = (
                    ", ".join(f"process {pr.name} (pid {pr.pid})" for pr in state.processes)
                    or "a client nvidia-smi does not list (see fuser -v /dev/nvidia*)"
                )
                raise MigApplyError(
                    f"GPU {i}: MIG mode is pending {state.mode_pending} (current "
                    f"{state.mode_current}) after nvidia-smi -mig {p.mode_change}"
                    + (" and a GPU reset" if req.allow_gpu_reset else "")
                    + f"; held by {holders}; fix: stop it, set {req.name('allow_gpu_reset')}="
                    f"true, or set {req.name('allow_reboot')}=true to apply it at reboot"
                )
        enabled_now = p.mode_change == "1" and p.gpu.mode_current != "Enabled"
    if not p.target.mig_enabled:
        return
    try:
        if p.create:
            tuples = ",".join(f"{c.profile_id}:{c.start}" for c in p.create)
            rc, text = _smi(run, o, [smi, "mig", "-i", i, "-cgi", tuples, "-C"])
            if rc != 0:
                raise MigApplyError(f"GPU {i}: creating GPU instances {tuples} failed: {text}")
        for gid in p.ci_create:
            rc, text = _smi(run, o, [smi, "mig", "-i", i, "-cci", "-gi", str(gid)])
            if rc != 0:
                raise MigApplyError(f"GPU {i}: creating the compute instance of GI {gid}: {text}")
    except MigApplyError as exc:
        if enabled_now and not _one(run, smi, p.gpu.index).gis:
            _smi(run, o, [smi, "-i", i, "-mig", "0"])
            raise MigApplyError(f"{exc}; MIG mode was switched back off (no instances)") from None
        raise


def _one(run: RunCommand, smi: str, index: int) -> GpuState:
    for g in read_gpus(run, smi):
        if g.index == index:
            return g
    raise MigApplyError(f"GPU {index} disappeared from nvidia-smi")


def _verify(p: GpuPlan, now: GpuState, o: Outcome, req: Request) -> None:
    o.after = now.layout()
    if not p.target.mig_enabled:
        if now.mig_capable and (now.mode_current != "Disabled" or now.gis):
            raise MigApplyError(
                f"GPU {now.index}: MIG is still {now.mode_current} after the change"
            )
        return
    assert p.plan is not None
    d = mpla.diff(now.gis, p.plan)
    lacking = [g.instance_id for g in now.gis if len(now.cis.get(g.instance_id or -1, [])) != 1]
    if not now.mig_on or d.changed or lacking or not now.gis:
        shown = layout_text([(now.index, now.name, now.layout())]).strip()
        raise MigApplyError(
            f"GPU {now.index}: after the change the GPU shows {shown!r}, not the planned "
            f"{[str(x) for x in p.plan.placements]}; re-run to converge"
        )


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def subprocess_runner(argv: list[str]) -> tuple[int, str, str]:
    """Run ``argv`` (no shell); ``FileNotFoundError`` when the program is missing."""
    import subprocess

    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def request_from_file(data: Mapping[str, Any]) -> Request:
    """A ``Request`` from the layout file role ``mig`` writes (JSON, a YAML subset):
    ``{"layout": {...}}`` or ``{"config": {...}, "config_name": "..."}``, plus
    ``devices``, ``mig_enabled``, ``allow_stop``, ``allow_gpu_reset``, ``nvidia_smi_path``,
    ``dra_driver``. A boot-time apply never reboots (``allow_reboot`` false)."""
    devices = data.get("devices", "all")
    return Request(
        layout=data.get("layout"),
        config=data.get("config"),
        config_name=data.get("config_name"),
        devices="all" if devices in ("all", None) else tuple(int(d) for d in devices),
        mig_enabled=bool(data.get("mig_enabled", True)),
        allow_stop=tuple(data.get("allow_stop") or ()),
        allow_gpu_reset=bool(data.get("allow_gpu_reset", True)),
        allow_reboot=False,
        nvidia_smi=data.get("nvidia_smi_path") or "nvidia-smi",
        var_prefix="mig_",
        dra_driver=bool(data.get("dra_driver", False)),
    )


def main(argv: list[str] | None = None) -> int:
    """``python3 -m ...mig_apply --layout-file PATH [--check]``: apply the layout file at
    boot (``gpufleet-mig.service``). Prints the result as JSON; exit 0 applied or nothing
    to do, 1 refused or failed (the reason on stderr), 2 unreadable layout file."""
    ap = argparse.ArgumentParser(prog="gpufleet-mig-apply")
    ap.add_argument("--layout-file", default="/etc/gpufleet/mig/layout.yaml")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    try:
        data = ig.load_json(ig.read_text(args.layout_file) or "", args.layout_file)
        if not isinstance(data, dict):
            raise ig.InputError(f"{args.layout_file} is not a JSON object; fix: rerun role mig")
    except ig.InputError as exc:
        sys.stderr.write(f"gpufleet-mig: cannot read {args.layout_file}: {exc}\n")
        return 2
    try:
        res = apply(request_from_file(data), subprocess_runner, check_mode=args.check)
    except (MigApplyError, ValueError, TypeError) as exc:
        sys.stderr.write(f"gpufleet-mig: {exc}\n")
        return 1
    sys.stdout.write(json.dumps(res.to_dict(), indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - run by gpufleet-mig.service
    os.environ.setdefault("LC_ALL", "C")
    sys.exit(main())
