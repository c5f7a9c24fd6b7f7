"""A running lab as the lab tests use it (``Lab``: kubectl of its release, commands on
its nodes, waiting), and the lab ``tests/lab`` brings up (``LAB_ENV``). Other tests that
bring up a lab of their own use ``Lab`` with their own ``lab_env``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GPUFLEET = REPO / ".venv" / "bin" / "gpufleet"
# GPUFLEET_TEST_LAB_NAME / GPUFLEET_TEST_LAB_SUBNET run the package on a lab of one's own.
LAB_ENV = {
    "GPUFLEET_LAB_NAME": os.environ.get("GPUFLEET_TEST_LAB_NAME", "gpufleet-test"),
    "GPUFLEET_LAB_SUBNET": os.environ.get("GPUFLEET_TEST_LAB_SUBNET", "10.89.60.0/24"),
}


def run_gpufleet(
    lab_env: dict[str, str], *args: str, timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    """``gpufleet ARGS`` of this checkout's venv on the lab ``lab_env`` names, its output
    captured; the exit code is the caller's to judge."""
    return subprocess.run(
        [str(GPUFLEET), *args],
        env={**os.environ, **lab_env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass(frozen=True)
class Lab:
    """A running lab: its name, kubeconfig, the kubectl of its release, and its status."""

    name: str
    kubeconfig: Path
    kubectl: Path
    status: dict[str, Any]
    up_seconds: float
    #: The variables that name the lab (GPUFLEET_LAB_NAME, GPUFLEET_LAB_SUBNET).
    lab_env: dict[str, str] = field(default_factory=lambda: dict(LAB_ENV))

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.lab_env, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl_run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
            )
        return proc.stdout

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl_run(*args, "-o", "json"))

    def node_exec(self, node: str, *cmd: str, check: bool = True) -> str:
        proc = subprocess.run(
            ["podman", "exec", node, *cmd], capture_output=True, text=True, timeout=120, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(cmd)} on {node} exited {proc.returncode}: {proc.stderr}"
            )
        return proc.stdout

    def workers(self) -> list[str]:
        return [n["name"] for n in self.status["nodes"] if n["role"] == "gpu-worker"]

    def wait_for(self, what: str, predicate, timeout_s: float = 120, interval_s: float = 2):
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(interval_s)
        raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}; last: {last!r}")
