# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What holds a GPU open, and how the MIG apply stops and restarts it.

Standard library only (copied to hosts with ``mig.apply``). When a MIG mode must change
or GPU instances be destroyed, the GPU must be free: ``find_clients`` lists systemd units
(``nvidia-persistenced``, ``nvidia-dcgm``, ``dcgm-exporter``, ``nvidia-fabricmanager``),
kernel module ``nvidia_drm``, the DRA kubelet plugin and device plugin containers and the
GPU processes; the kinds ``allow_stop`` names are stopped and restarted after, the others
make the apply refuse with ``refuse_message`` (NVIDIA/gpu-operator#118,
NVIDIA/mig-parted#181).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.gpu_state import (
    MigApplyError,
    Process,
    ReadFile,
    RunCommand,
    run_program,
    run_program_ok,
)

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
            rc, out, _unused = run(["systemctl", "is-active", unit])
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
        rc, out, _unused = run(["crictl", "ps", "-o", "json"])
    except (FileNotFoundError, OSError):
        return []
    if rc != 0:
        return []
    try:
        data = ig.load_json(out, "crictl ps -o json")
    except ig.InputError:
        return []
    if not isinstance(data, dict):
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


def refuse_message(
    blocking: list[Client], option: Callable[[str], str], gpu_index: int, why: str
) -> str:
    """One message naming every client that blocks and how to allow it; ``option`` names
    an option as the caller spells it (``Request.name``: ``allow_stop`` or
    ``mig_allow_stop``)."""
    parts = []
    for c in blocking:
        if c.kind == "process":
            parts.append(
                f"{c.describe()}: stop it, or set {option('allow_reboot')}=true to apply "
                "the change at the next reboot"
            )
        else:
            parts.append(
                f"{c.describe()}: add {c.kind!r} to {option('allow_stop')} to stop it "
                "during the change and restart it after"
            )
    return f"GPU {gpu_index}: {why}; held by " + "; ".join(parts)


def stop_client(run: RunCommand, client: Client) -> str:
    """Stop one client; returns what was done. Raises ``MigApplyError`` on failure."""
    if client.kind in SYSTEMD_CLIENTS:
        run_program_ok(run, ["systemctl", "stop", client.name])
        return f"stopped {client.name}"
    if client.kind in MODULE_CLIENTS:
        run_program_ok(run, ["modprobe", "-r", client.name])
        return f"unloaded {client.name}"
    if client.kind in CONTAINER_CLIENTS and client.ref and client.kind != "process":
        if client.ref.isdigit():
            run_program_ok(run, ["kill", client.ref])
            return f"killed pid {client.ref} ({client.name})"
        run_program_ok(run, ["crictl", "stop", client.ref])
        return f"stopped container {client.name}"
    raise MigApplyError(f"cannot stop {client.describe()}")


def restart_client(run: RunCommand, client: Client) -> str:
    """Start a stopped client again (containers are restarted by the kubelet)."""
    if client.kind in SYSTEMD_CLIENTS:
        rc, _out, err = run_program(run, ["systemctl", "start", client.name])
        return f"started {client.name}" if rc == 0 else f"start of {client.name} failed: {err}"
    if client.kind in MODULE_CLIENTS:
        rc, _out, err = run_program(run, ["modprobe", client.name])
        return f"loaded {client.name}" if rc == 0 else f"load of {client.name} failed: {err}"
    return f"{client.name}: restarted by the kubelet"
