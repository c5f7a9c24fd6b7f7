# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The processes of a host and their command lines (modules ``dra_gate_audit_facts`` and
``kubelet_config_gates``).

``pids`` lists every process. ``own_pids`` keeps those in the reader's own mount namespace:
the kubelet runs on the host itself, so a kubelet in another mount namespace (a kind or
podman node on this host) reads other files and is not this host's. (The control plane is
not judged so: kubeadm runs it in static pods, containers of their own.) Where a namespace
cannot be read (another user's process read without privileges), the process is kept: the
reader cannot tell.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["mount_namespace", "own_pids", "pids", "read_argv", "split_cmdline"]


def mount_namespace(proc_root: str, pid: str) -> str | None:
    """The mount namespace of ``pid`` (``"self"`` for the reader), e.g. ``"mnt:[4026531841]"``;
    None when it cannot be read."""
    try:
        return os.readlink(os.path.join(proc_root, pid, "ns", "mnt"))
    except OSError:
        return None


def pids(proc_root: str = "/proc") -> Iterator[int]:
    """Every pid under ``proc_root`` (none when it cannot be listed)."""
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return
    for entry in entries:
        if entry.isdigit():
            yield int(entry)


def own_pids(proc_root: str = "/proc") -> Iterator[int]:
    """The pids under ``proc_root`` of processes in the reader's mount namespace (or whose
    namespace cannot be read); every pid when the reader's own namespace cannot be read."""
    own = mount_namespace(proc_root, "self")
    for pid in pids(proc_root):
        if own is not None:
            theirs = mount_namespace(proc_root, str(pid))
            if theirs is not None and theirs != own:
                continue
        yield pid


def read_argv(proc_root: str, pid: int) -> list[str] | None:
    """The command line of ``pid`` split at NUL bytes; None when the process is gone or its
    command line cannot be read (a kernel thread gives ``[]``)."""
    try:
        with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as fh:
            return split_cmdline(fh.read())
    except OSError:
        return None


def split_cmdline(raw: bytes) -> list[str]:
    """``/proc/<pid>/cmdline`` (NUL-separated, NUL-terminated) -> argv; an empty argument
    stays. Bytes that are not UTF-8 are replaced (``surrogateescape`` would not survive
    JSON)."""
    text = raw.decode("utf-8", errors="replace")
    if text.endswith("\0"):
        text = text[:-1]
    return text.split("\0") if text else []
