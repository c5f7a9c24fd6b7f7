"""Run an Ansible command line of the virtualenv from the repository root, with colours off
and SSH connections that fail fast (a test whose hosts are addresses nothing answers on
fails at once if one is contacted, instead of hanging)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def ansible(
    *args: str, timeout: int = 300, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``args[0]`` is the program (``ansible-playbook``, ``ansible-inventory``), the rest its
    arguments; ``env_extra`` is added to its environment. Returns the finished process
    (never raises on a non-zero exit)."""
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(Path.home()),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "True",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_SSH_ARGS": "-o ConnectTimeout=2",
        **(env_extra or {}),
    }
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
