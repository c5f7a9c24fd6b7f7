# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Host checks of what NVIDIA's DRA kubelet plugin needs on each GPU node, over the host
records ``validate.hosts.normalize_host`` builds:

- ``hosts.driver-root``: under the plugin's ``nvidiaDriverRoot`` (``driver_root.root``,
  role variable ``validate_nvidia_driver_root``) the plugin finds ``libnvidia-ml.so.1``
  and ``nvidia-smi`` where it looks for them (``dra_driver.driver_root``, the plugin's own
  lists: a library only in ``/usr/lib`` is not found with root ``/``), and the device
  nodes ``nvidia[0-9]*``, ``nvidiactl`` and ``nvidia-uvm`` are in its dev root. The dev
  root is the driver root when ``<root>/dev`` is a directory, else ``/`` (the plugin's
  ``root.getDevRoot``): an empty ``<root>/dev`` hides the host's ``/dev``. The plugin
  then starts and publishes its ResourceSlice, and fails every claim at prepare time
  ("unable to create CDI spec file for claim ... invalid device, empty device edits").
- ``hosts.cdi-hook``: ``nvidia-cdi-hook`` (``cdi_hook.path``, role variable
  ``validate_nvidia_cdi_hook_path``) exists and is executable: the plugin does not start
  without it, and the CDI specs it writes call it at container creation
  (``createContainer`` hooks ``create-symlinks``, ``update-ldcache``).

Nodes with a simulated GPU have no NVIDIA driver; both checks leave them out with that
reason. Normalized records::

    "driver_root": {"root": "/run/nvidia/driver", "read": true,
                    "libraries": ["/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1"],
                    "library_dirs": ["usr/lib64", ...], "smi": [...], "smi_dirs": [...],
                    "dev_dir": true, "devices": {"/dev": ["nvidia0", "nvidiactl"]},
                    "error": ""},
    "cdi_hook": {"path": "/usr/bin/nvidia-cdi-hook", "read": true, "exists": true,
                 "isreg": true, "executable": true, "mode": "0755"}
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    driver_root as plugin_root,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    WARN,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = [
    "cdi_hook_check",
    "dev_root",
    "driver_root_check",
    "looked_for_device_node",
    "missing_device_nodes",
    "plugin_sockets_check",
]

#: The first toolkit release that ships nvidia-cdi-hook (the ``nvidia-ctk hook`` commands
#: moved there; NVIDIA Container Toolkit 1.16.0 release notes).
CDI_HOOK_TOOLKIT = "1.16.0"
_GPU_NODE = re.compile(r"^nvidia[0-9]+$")
_SIMULATED = (
    "every GPU node has a simulated GPU (no NVIDIA driver or kubelet plugin of NVIDIA to check)"
)


def dev_root(root: str, dev_dir: bool) -> str:
    """The directory whose ``dev/`` the plugin takes device nodes from: ``root`` when
    ``<root>/dev`` is a directory (``dev_dir``), else ``/``."""
    return posixpath.normpath(root or "/") if dev_dir else "/"


def looked_for_device_node(name: str) -> bool:
    """Whether ``name`` (a basename in ``/dev``) is one of the device nodes the validate
    role looks for: ``nvidia[0-9]*``, ``nvidiactl``, ``nvidia-uvm``."""
    return bool(_GPU_NODE.match(name)) or name in ("nvidiactl", "nvidia-uvm")


def missing_device_nodes(names: Sequence[str]) -> list[str]:
    """Which of ``nvidia[0-9]*``, ``nvidiactl``, ``nvidia-uvm`` ``names`` (basenames in
    one ``dev/``) lacks, in that order."""
    have = set(names)
    missing = [] if any(_GPU_NODE.match(n) for n in have) else ["nvidia[0-9]*"]
    return missing + [n for n in ("nvidiactl", "nvidia-uvm") if n not in have]


def _dev_of(root: str) -> str:
    return posixpath.normpath(posixpath.join(root, "dev"))


def _searched(root: str, dirs: Sequence[str], name: str) -> str:
    return ", ".join(posixpath.join(root, d, name) for d in dirs) or "nowhere"


def _plugin_dirs(name: str) -> tuple[str, ...]:
    return plugin_root.search_dirs(name)


def _real_gpu_hosts(hosts: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]] | str:
    """The GPU nodes with real GPUs, or why there is nothing to judge."""
    if not hosts:
        return "the inventory group gpu_nodes is empty"
    return [h for h in hosts if not h.get("simulator")] or _SIMULATED


def driver_root_check(hosts: Sequence[Mapping[str, Any]]) -> Check:
    """``hosts.driver-root`` over the GPU nodes' records (see the module docstring)."""
    c = Check("hosts.driver-root", "the DRA driver's driver root holds the driver and devices")
    real = _real_gpu_hosts(hosts)
    if isinstance(real, str):
        return skipped(c.id, c.title, real)
    fixes: list[str] = []
    for h in real:
        rec = h.get("driver_root")
        if not isinstance(rec, Mapping) or not rec.get("read"):
            c.problem(h["host"], WARN, "the driver root was not read on this node")
            fixes.append(
                "run gpufleet validate again with read access to the node (validate_become)"
            )
            continue
        root = str(rec.get("root") or "/")
        devs = dev_root(root, bool(rec.get("dev_dir")))
        found = (rec.get("devices") or {}).get(_dev_of(devs), [])
        c.evidence.append(
            Evidence(
                f"{h['host']}: stat/find under {root}",
                f"libnvidia-ml.so.1 {', '.join(rec.get('libraries') or []) or 'absent'}; "
                f"nvidia-smi {', '.join(rec.get('smi') or []) or 'absent'}; "
                f"device nodes in {_dev_of(devs)}: {', '.join(found) or 'none'}",
            )
        )
        for kind, name in (("library", "libnvidia-ml.so.1"), ("smi", "nvidia-smi")):
            if rec.get("libraries" if kind == "library" else "smi"):
                continue
            c.problem(
                h["host"],
                FAIL,
                f"{name} is not under the driver root {root} (looked for "
                f"{_searched(root, rec.get(f'{kind}_dirs') or [], name)}, where the DRA "
                f"kubelet plugin looks): the plugin stops with 'error locating \"{name}\"' and "
                "publishes no ResourceSlice",
            )
            fixes.append(
                "set dra_driver_nvidia_driver_root (and validate_nvidia_driver_root) to the "
                "directory under which the driver sits where the plugin looks ("
                + ", ".join(f"<root>/{d}" if d else "<root>/" for d in _plugin_dirs(name))
                + "): / for a driver installed in those directories of the host, the "
                "driver's own prefix (e.g. /usr/local/nvidia) for a driver installed under "
                "one, /run/nvidia/driver for the GPU Operator's driver container "
                "(dra_driver_gpu_operator: true); then ansible-playbook -i INVENTORY "
                "playbooks/dra_driver.yml"
            )
        missing = missing_device_nodes(found)
        if rec.get("error"):
            c.problem(h["host"], WARN, f"device nodes not read: {rec['error']}")
        elif missing and devs != "/":
            host_dev = (rec.get("devices") or {}).get("/dev", [])
            c.problem(
                h["host"],
                FAIL,
                f"{_dev_of(devs)} exists, so the kubelet plugin takes the device nodes from "
                "it and not from the host's /dev, and it "
                + f"lacks {', '.join(missing)}"
                + (f" (the host's /dev has {', '.join(host_dev)})" if host_dev else "")
                + ": the plugin publishes its ResourceSlice but fails every claim at prepare "
                "time (invalid device, empty device edits) and the pods stay Pending",
            )
            fixes.append(
                f"make {_dev_of(devs)} hold the device nodes: bind-mount the host's /dev "
                "there, or let the GPU Operator's driver container provide it; or remove the "
                "empty directory so that the plugin uses the host's /dev (then restart the "
                "kubelet plugin pod)"
            )
        elif missing:
            c.problem(
                h["host"],
                FAIL,
                f"/dev lacks {', '.join(missing)}: the NVIDIA kernel modules are not loaded or "
                "their device nodes were not created, so every claim fails at prepare time",
            )
            fixes.append(
                "load the driver and create its device nodes: nvidia-modprobe -c 0 -u (or "
                "ansible-playbook -i INVENTORY playbooks/nvidia_driver.yml)"
            )
    c.fix = "; ".join(dict.fromkeys(fixes)) or None
    return finish(c, f"driver, nvidia-smi and device nodes found on {len(real)} GPU node(s)")


def cdi_hook_check(hosts: Sequence[Mapping[str, Any]]) -> Check:
    """``hosts.cdi-hook`` over the GPU nodes' records (see the module docstring). Nodes
    with a simulated GPU are judged too: the GPU simulator's CDI specs call NVIDIA's real
    hook, as NVIDIA's driver's specs do."""
    c = Check("hosts.cdi-hook", "nvidia-cdi-hook present and executable for the DRA driver")
    if not hosts:
        return skipped(c.id, c.title, "the inventory group gpu_nodes is empty")
    for h in hosts:
        rec = h.get("cdi_hook")
        if not isinstance(rec, Mapping) or not rec.get("read"):
            c.problem(h["host"], WARN, "nvidia-cdi-hook was not looked for on this node")
            continue
        path = str(rec.get("path") or "/usr/bin/nvidia-cdi-hook")
        c.evidence.append(
            Evidence(
                f"{h['host']}: stat {path}",
                (f"mode {rec.get('mode') or '?'}" if rec.get("exists") else "absent"),
            )
        )
        if not rec.get("exists"):
            c.problem(
                h["host"],
                FAIL,
                f"{path} does not exist: the DRA kubelet plugin does not start without "
                "nvidia-cdi-hook, and the CDI specs' createContainer hooks (create-symlinks, "
                "update-ldcache) call it",
            )
        elif not rec.get("isreg") or not rec.get("executable"):
            c.problem(
                h["host"],
                FAIL,
                f"{path} is not an executable file (mode {rec.get('mode') or '?'}): containers "
                "with a claimed GPU fail at creation when the CDI hooks cannot run",
            )
    c.fix = (
        f"install nvidia-container-toolkit-base >= {CDI_HOOK_TOOLKIT} (it ships "
        "nvidia-cdi-hook; role nvidia_container_toolkit: gpufleet up -i INVENTORY, -l NODE for "
        "the nodes named), or, where it lives elsewhere, set nvidiaCDIHookPath in "
        "dra_driver_extra_values and validate_nvidia_cdi_hook_path to that path"
    )
    return finish(c, f"nvidia-cdi-hook executable on {len(hosts)} GPU node(s)")


def _stale_problem(driver: str, stale: list[str], live: list[str]) -> tuple[str, str]:
    """(status, message) for the stale sockets of one driver on one node."""
    paths = ", ".join(stale)
    if live:
        return WARN, (
            f"{len(stale)} socket(s) of driver {driver} refuse connections ({paths}) beside the "
            f"live {', '.join(live)}: left by kubelet plugin pods that are gone; the kubelet "
            "keeps trying to register them"
        )
    return FAIL, (
        f"every kubelet plugin socket of driver {driver} refuses connections ({paths}): its "
        "plugin pod is gone but left them, so the kubelet cannot reach the driver here and "
        f"claims of {driver} devices on this node fail to prepare"
    )


def plugin_sockets_check(hosts: Sequence[Mapping[str, Any]]) -> Check:
    """``hosts.plugin-sockets``: no registration or service socket of the DRA drivers
    (``plugin_sockets``: the ``kubelet_plugin_sockets`` module's answer, normalized by
    ``validate.hosts``) that nothing listens on. A driver whose every socket is stale
    fails (its plugin is not running but the kubelet still has its sockets); stale
    sockets beside a live one warn. Sockets that could not be probed are only evidence."""
    c = Check("hosts.plugin-sockets", "no stale kubelet plugin socket of the DRA drivers")
    if not hosts:
        return skipped(c.id, c.title, "the inventory group gpu_nodes is empty")
    judged = 0
    for h in hosts:
        rec = h.get("plugin_sockets")
        if not isinstance(rec, Mapping) or not rec.get("read"):
            why = (rec or {}).get("error") if isinstance(rec, Mapping) else ""
            c.problem(
                h["host"], WARN, f"the kubelet plugin sockets were not read: {why or 'no result'}"
            )
            continue
        judged += 1
        by_driver: dict[str, dict[Any, list[str]]] = {}
        for x in rec.get("sockets") or []:
            by_driver.setdefault(x["driver"], {}).setdefault(x["listening"], []).append(x["path"])
        c.evidence.append(
            Evidence(
                f"{h['host']}: connect to the kubelet plugin sockets",
                "; ".join(
                    f"{d}: {len(v.get(True, []))} live, {len(v.get(False, []))} stale, "
                    f"{len(v.get(None, []))} not told"
                    for d, v in sorted(by_driver.items())
                )
                or "no socket of the drivers",
            )
        )
        for driver, v in sorted(by_driver.items()):
            if v.get(False):
                status, message = _stale_problem(driver, v[False], v.get(True, []))
                c.problem(h["host"], status, message)
    c.fix = (
        "on the node named, remove the socket files that refuse connections (rm -f PATH; the "
        "kubelet plugin makes its own again when it starts), and where none of a driver's is "
        "live restart its kubelet plugin: kubectl -n NAMESPACE delete pod -l "
        "app.kubernetes.io/component=kubelet-plugin --field-selector spec.nodeName=NODE"
    )
    if judged == 0 and not c.problems:
        return skipped(c.id, c.title, "no GPU node's sockets were read", c.evidence)
    return finish(c, f"no stale kubelet plugin socket on {judged} GPU node(s)")
