"""The benchmark's measuring wrapper (``tests/bench/cluster.py`` ``_WRAPPER``): the CPU a
measured command spends counts that of a process it detached (as an Ansible ``async`` task
detaches itself), which its parent never waits for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench import cluster

pytestmark = pytest.mark.unit

#: Forks a grandchild that leaves its parent (double fork, new session) and spins for 0.6
#: CPU s, while the command itself ends at once.
DETACHED = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        end = time.process_time() + 0.6
        while time.process_time() < end:
            pass
    os._exit(0)
os.wait()
"""


def test_a_detached_process_is_waited_for_and_counted(tmp_path: Path) -> None:
    out = tmp_path / "rss.json"
    argv = [sys.executable, "-I", "-S", "-c", cluster._WRAPPER, str(out)]
    subprocess.run([*argv, sys.executable, "-c", DETACHED], check=True, timeout=60)
    assert json.loads(out.read_text())["cpu_s"] >= 0.6
