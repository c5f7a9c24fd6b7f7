# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The processes of a host that its reader shares files with (modules ``dra_gate_audit_facts``
and ``kubelet_config_gates``).

A kubelet or kube-apiserver in a container on this host (a kind or podman node, a test
control plane in a sandbox) shows in ``/proc`` too, but reads the files of its own mount
namespace: its flags name paths that are not this host's. Only processes in the reader's own
mount namespace are this host's components. Where a namespace cannot be read (another user's
process read without privileges), the process is kept: the reader cannot tell.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["mount_namespace", "own_pids", "read_argv", "split_cmdline"]


def mount_namespace(proc_root: str, pid: str) -> str | None:
    """The mount namespace of ``pid`` (``"self"`` for the reader), e.g. ``"mnt:[4026531841]"``;
    None when it cannot be read."""
    try:
        return os.readlink(os.path.join(proc_root, pid, "ns", "mnt"))
    except OSError:
        return None


def own_pids(proc_root: str = "/proc") -> Iterator[int]:
    """The pids under ``proc_root`` of processes in the reader's mount namespace (or whose
    namespace cannot be read); every pid when the reader's own namespace cannot be read."""
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return
    own = mount_namespace(proc_root, "self")
    for entry in entries:
        if not entry.isdigit():
            continue
        if own is not None:
            theirs = mount_namespace(proc_root, entry)
            if theirs is not None and theirs != own:
                continue
        yield int(entry)


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
