"""Registered results of the validate role's driver-root and nvidia-cdi-hook reads
(``roles/validate/tasks/read_node.yml``), shaped as Ansible returns them: the looped
``stat`` of ``<dir>/libnvidia-ml.so.1``, ``<dir>/nvidia-smi`` and ``dev``, the ``find`` of
the device nodes, the ``stat`` of the hook."""

from __future__ import annotations

import posixpath
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    driver_root as plugin_root,
)

#: The directories the role stats, in order ("" is the driver root itself): the kubelet
#: plugin's own search lists (``dra_driver.driver_root``).
LIBRARY_DIRS = plugin_root.search_dirs(plugin_root.NVML_LIBRARY)
BINARY_DIRS = plugin_root.search_dirs(plugin_root.SMI_BINARY)
#: What ``ls /dev/nvidia*`` shows on an H200 node with the driver loaded (the find pattern
#: leaves out nvidia-uvm-tools, nvidia-modeset and nvidia-caps).
DEVICES = ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm")


def _stat(root: str, item: str, exists: bool, isdir: bool = False) -> dict[str, Any]:
    path = posixpath.join(root, item)
    st: dict[str, Any] = {"exists": exists}
    if exists:
        st.update(path=path, isdir=isdir, isreg=not isdir, mode="0755" if isdir else "0644")
    return {"item": item, "stat": st, "changed": False, "failed": False}


def driver_root(
    root: str = "/",
    library_dir: str | None = "usr/lib/x86_64-linux-gnu",
    smi_dir: str | None = "usr/bin",
    dev_dir: bool | None = None,
    root_devices: tuple[str, ...] = (),
    host_devices: tuple[str, ...] = DEVICES,
) -> dict[str, Any]:
    """The ``driver_root`` entry of a ``validate_host`` fact: ``library_dir``/``smi_dir``
    the directory the library/nvidia-smi is in (None: absent); ``dev_dir`` whether
    ``<root>/dev`` is a directory (None: only for ``/``); ``root_devices`` the device nodes
    in ``<root>/dev``, ``host_devices`` those in the host's ``/dev``."""
    if dev_dir is None:
        dev_dir = root == "/"
    files = [
        _stat(root, posixpath.join(d, "libnvidia-ml.so.1"), d == library_dir) for d in LIBRARY_DIRS
    ]
    files += [_stat(root, posixpath.join(d, "nvidia-smi"), d == smi_dir) for d in BINARY_DIRS]
    files.append(_stat(root, "dev", dev_dir, isdir=True))
    found = [f"/dev/{n}" for n in host_devices]
    if dev_dir and root != "/":
        found += [posixpath.join(root, "dev", n) for n in root_devices]
    return {
        "root": root,
        "files": files,
        "devices": {
            "changed": False,
            "files": [{"path": p, "ischr": True} for p in found],
            "matched": len(found),
            "skipped_paths": {},
        },
    }


def cdi_hook(
    path: str = "/usr/bin/nvidia-cdi-hook", exists: bool = True, mode: str = "0755"
) -> dict[str, Any]:
    """The ``cdi_hook`` entry: ``path`` and its ``stat`` (as root: ``executable`` when any
    x bit is set)."""
    st: dict[str, Any] = {"exists": exists}
    if exists:
        x = int(mode, 8) & 0o111
        st.update(
            path=path,
            isreg=True,
            mode=mode,
            executable=bool(x),
            xusr=bool(x & 0o100),
            xgrp=bool(x & 0o010),
            xoth=bool(x & 0o001),
        )
    return {"path": path, "stat": {"changed": False, "failed": False, "stat": st}}


def plugin_sockets(
    live: tuple[str, ...] = ("gpu.nvidia.com",), stale: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The registered ``kubelet_plugin_sockets`` result: a live registration socket of each
    driver in ``live`` and a stale one of each driver in ``stale``."""
    reg = "/var/lib/kubelet/plugins_registry"
    sockets = [{"driver": d, "path": f"{reg}/{d}-reg.sock", "listening": True} for d in live]
    sockets += [{"driver": d, "path": f"{reg}/{d}-0ld-reg.sock", "listening": False} for d in stale]
    return {"changed": False, "failed": False, "sockets": sockets, "truncated": False}
