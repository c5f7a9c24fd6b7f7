"""host.processes: which processes under a /proc tree are the reader's host's, and their
command lines. The trees are built here as /proc lays them out (``<pid>/ns/mnt`` a symlink
naming the namespace, ``<pid>/cmdline`` NUL-separated)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import processes as hp

pytestmark = pytest.mark.unit


def proc(root: Path, pid: str, argv: list[str] | None, namespace: str | None) -> None:
    d = root / pid
    (d / "ns").mkdir(parents=True)
    if namespace is not None:
        os.symlink(namespace, d / "ns" / "mnt")
    if argv is not None:
        (d / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))


def test_a_process_in_another_mount_namespace_is_not_this_hosts(tmp_path: Path) -> None:
    proc(tmp_path, "self", None, "mnt:[1]")
    proc(tmp_path, "10", ["/usr/bin/kubelet"], "mnt:[1]")
    proc(tmp_path, "20", ["/usr/bin/kubelet"], "mnt:[2]")  # a kubelet in a container
    proc(tmp_path, "30", ["/usr/bin/kubelet"], None)  # another user's: cannot tell
    (tmp_path / "stat").write_text("btime 1\n")
    assert sorted(hp.own_pids(str(tmp_path))) == [10, 30]
    assert sorted(hp.pids(str(tmp_path))) == [10, 20, 30]


def test_every_pid_counts_when_the_readers_namespace_is_unknown(tmp_path: Path) -> None:
    proc(tmp_path, "10", ["a"], "mnt:[1]")
    proc(tmp_path, "20", ["b"], "mnt:[2]")
    assert sorted(hp.own_pids(str(tmp_path))) == [10, 20]
    assert list(hp.own_pids(str(tmp_path / "missing"))) == []


def test_the_real_proc_holds_this_process() -> None:
    assert os.getpid() in set(hp.own_pids("/proc"))
    with open("/proc/self/cmdline", "rb") as fh:
        assert hp.read_argv("/proc", os.getpid()) == hp.split_cmdline(fh.read())


def test_command_lines_keep_every_argument(tmp_path: Path) -> None:
    argv = ["/usr/bin/kube-apiserver", "--feature-gates=A=true", "", "--v=2", "ü"]
    proc(tmp_path, "10", argv, "mnt:[1]")
    assert hp.read_argv(str(tmp_path), 10) == argv
    assert hp.read_argv(str(tmp_path), 11) is None
    assert hp.split_cmdline(b"") == []
    assert hp.split_cmdline(b"a\xff\0") == ["a\ufffd"]
