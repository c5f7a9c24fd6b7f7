"""The lab for tests: one real kubeadm cluster on podman nodes with simulated GPUs,
brought up once for the tests of this package with ``gpufleet lab up`` and removed after
the last of them, so the rest of the run does not share the machine with it.

It is a lab of its own (``GPUFLEET_LAB_NAME=gpufleet-test``, network 10.89.60.0/24;
``GPUFLEET_TEST_LAB_NAME``/``GPUFLEET_TEST_LAB_SUBNET`` pick another), so a developer's
default lab is never touched. ``GPUFLEET_TEST_KEEP_LAB=1`` keeps it after
the session (the next session reuses it: ``lab up`` converges a running lab;
``GPUFLEET_TEST_REUSE_LAB=1`` uses a lab whose nodes are all Ready without converging it).
Tests that change the lab (MIG layouts, labels) put it back as they found it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpufleet.build import binaries
from gpufleet.lab import podman

REPO = Path(__file__).resolve().parents[2]
GPUFLEET = REPO / ".venv" / "bin" / "gpufleet"
# GPUFLEET_TEST_LAB_NAME / GPUFLEET_TEST_LAB_SUBNET run the package on a lab of one's own.
LAB_ENV = {
    "GPUFLEET_LAB_NAME": os.environ.get("GPUFLEET_TEST_LAB_NAME", "gpufleet-test"),
    "GPUFLEET_LAB_SUBNET": os.environ.get("GPUFLEET_TEST_LAB_SUBNET", "10.89.60.0/24"),
}


@dataclass(frozen=True)
class Lab:
    """A running lab: its name, kubeconfig, the kubectl of its release, and its status."""

    name: str
    kubeconfig: Path
    kubectl: Path
    status: dict[str, Any]
    up_seconds: float

    def env(self) -> dict[str, str]:
        return {**os.environ, **LAB_ENV, "KUBECONFIG": str(self.kubeconfig)}

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


def _gpufleet(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(GPUFLEET), *args],
        env={**os.environ, **LAB_ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _reuse() -> subprocess.CompletedProcess | None:
    """With ``GPUFLEET_TEST_REUSE_LAB=1``, a lab whose every node is Ready is used as it is
    (no ``lab up`` converge); None otherwise."""
    if os.environ.get("GPUFLEET_TEST_REUSE_LAB") != "1":
        return None
    status = _gpufleet("lab", "status", "--json", timeout=120)
    try:
        ready = json.loads(status.stdout).get("ready") is True
    except ValueError:
        ready = False
    return status if status.returncode == 0 and ready else None


@pytest.fixture(scope="package")
def lab() -> Iterator[Lab]:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: run scripts/setup (lab/prepare-podman)")
    # Playbooks run in this process (gpufleet.runner) read inventory/lab for this lab too.
    os.environ.update(LAB_ENV)
    if not podman.image_present(podman.node_image_ref()):
        pytest.skip("the lab node image is not built: run lab/prepare-podman")
    t0 = time.monotonic()
    up = _reuse() or _gpufleet("lab", "up")
    up_seconds = time.monotonic() - t0
    try:
        assert up.returncode == 0, (
            f"gpufleet lab up exited {up.returncode}:\n{up.stdout}\n{up.stderr}"
        )
        st = json.loads(_gpufleet("lab", "status", "--json").stdout)
        version = st["kubernetes_version"]
        yield Lab(
            name=LAB_ENV["GPUFLEET_LAB_NAME"],
            kubeconfig=Path(st["kubeconfig"]),
            kubectl=binaries.binary_path("kubectl", version),
            status=st,
            up_seconds=up_seconds,
        )
    finally:
        if os.environ.get("GPUFLEET_TEST_KEEP_LAB") != "1":
            down = _gpufleet("lab", "down", timeout=600)
            assert down.returncode == 0, f"gpufleet lab down left things behind:\n{down.stderr}"
