#!/usr/bin/env python3
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Fixture replay of ``nvidia-smi``: prints the real output captured on an H200 host for
exactly the command lines that were captured, and nothing else. It is not a simulator: it
has no state and no rules, and any other command line fails with exit status 2.

The capture directory is ``$GPUFLEET_FIXTURE_REPLAY_DIR`` (default: ``h200-x2-nvlink`` next
to this file). A capture ``*.txt`` starts with ``$ nvidia-smi <args>`` and ends with
``[exit N]``; ``smi-q.xml`` is ``nvidia-smi -q -x``; ``smi-nvlink-s.txt`` and
``smi-topo-p2p.txt`` (captured without the command line) are ``nvlink -s`` and
``topo -p2p n``.

Used as a program (``nvidia_smi_path`` of the module under test) and as a library
(:func:`runner`, a ``run_command`` for :func:`gpu_query.collect`).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DIR = HERE / "h200-x2-nvlink"
#: Captures stored without their command line.
BARE = {
    "smi-q.xml": ("-q", "-x"),
    "smi-nvlink-s.txt": ("nvlink", "-s"),
    "smi-topo-p2p.txt": ("topo", "-p2p", "n"),
}


def captures(directory: Path) -> dict[tuple[str, ...], tuple[int, str]]:
    """Argument tuple (without ``nvidia-smi``) -> (exit status, stdout) of every capture."""
    found: dict[tuple[str, ...], tuple[int, str]] = {}
    for path in sorted(directory.iterdir()):
        if path.suffix not in (".txt", ".xml"):
            continue
        text = path.read_text()
        if path.name in BARE:
            found[BARE[path.name]] = (0, text)
            continue
        lines = text.splitlines()
        if not lines or not lines[0].startswith("$ nvidia-smi"):
            continue
        rc = 0
        body = lines[1:]
        if body and body[-1].startswith("[exit "):
            rc = int(body[-1][len("[exit ") : -1])
            body = body[:-1]
        found[tuple(shlex.split(lines[0][2:])[1:])] = (rc, "".join(f"{ln}\n" for ln in body))
    return found


def answer(args: list[str], directory: Path) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) for ``nvidia-smi <args>``."""
    known = captures(directory)
    if tuple(args) in known:
        rc, out = known[tuple(args)]
        return rc, out, ""
    return 2, "", f"fixture replay: no capture of 'nvidia-smi {shlex.join(args)}' in {directory}\n"


def runner(directory: Path) -> Callable[[list[str]], tuple[int, str, str]]:
    """A ``run_command`` that answers from ``directory`` (the program name is ignored)."""
    return lambda argv: answer(list(argv[1:]), directory)


def main() -> int:
    directory = Path(os.environ.get("GPUFLEET_FIXTURE_REPLAY_DIR") or DEFAULT_DIR)
    rc, out, err = answer(sys.argv[1:], directory)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


if __name__ == "__main__":
    sys.exit(main())
