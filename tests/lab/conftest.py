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
from functools import partial
from pathlib import Path

import pytest

from gpufleet.build import binaries
from gpufleet.lab import podman

from .running import LAB_ENV, Lab, run_gpufleet

_gpufleet = partial(run_gpufleet, LAB_ENV)


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
