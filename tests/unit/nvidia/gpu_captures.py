"""Captured nvidia-smi and NVML answers of real GPUs (``tests/unit/data/gpu``), shared by the
nvidia-smi, GPU and host fact tests.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"

SINGLE = DATA / "h200-single"

X2 = DATA / "h200-x2-nvlink"


def capture(path: Path) -> str:
    """The command's output only: without the ``$ <command>`` first line and ``[exit N]``
    last line of the H200 captures, or the ``# source/command/note`` lines of the public
    ones."""
    lines = path.read_text().splitlines()
    if lines and lines[0].startswith("$ "):
        lines = lines[1:]
    if lines and lines[-1].startswith("[exit "):
        lines = lines[:-1]
    while lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "".join(f"{ln}\n" for ln in lines)
