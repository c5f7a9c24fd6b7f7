# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Run read-only commands of a host and return them as a loop of ``command`` registers
(module ``host_commands``)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_commands", "run_one"]


def check_commands(commands: Sequence[Any]) -> str:
    """The first problem of ``commands`` (each a mapping with ``argv``, a non-empty list
    of strings) as a message naming it, or ``""``."""
    for i, item in enumerate(commands):
        argv = item.get("argv") if isinstance(item, Mapping) else None
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            return (
                f"commands[{i}]={item!r}: give a mapping with argv, a non-empty list of "
                "strings (e.g. {name: version, argv: [containerd, --version]})"
            )
    return ""


def run_one(item: Mapping[str, Any], timeout: int) -> dict[str, Any]:
    """Run ``item['argv']`` without a shell -> ``{item, rc, stdout, stderr, stdout_lines,
    stderr_lines, cmd}``, in the module's environment (the locale ansible.builtin.command
    gives its commands too; tests/ansible/test_host_read_modules.py compares the two). A
    program that cannot be started has ``rc`` set to its error number (2 for one that is
    not installed) and empty output, as ansible.builtin.command reports it; one that runs
    past ``timeout`` seconds is killed (``rc`` -9). Trailing newlines of the output are
    removed, as ansible.builtin.command does."""
    argv = list(item["argv"])
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except OSError as exc:
        rc, out, err = exc.errno or 2, b"", b""
    except subprocess.TimeoutExpired as exc:
        rc, out, err = -9, exc.stdout or b"", exc.stderr or b""
    stdout = out.decode("utf-8", "replace").rstrip("\r\n")
    stderr = err.decode("utf-8", "replace").rstrip("\r\n")
    return {
        "item": dict(item),
        "cmd": argv,
        "rc": rc,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_lines": stdout.splitlines(),
        "stderr_lines": stderr.splitlines(),
    }
