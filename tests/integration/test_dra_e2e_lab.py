"""Kubernetes' own DRA e2e specs (``test/e2e/dra`` of the lab's release) against a lab
that ``gpufleet up`` provisioned.

It brings up a lab of its own (``gpufleet-e2e`` on 10.89.64.0/24, two GPU workers), runs
``gpufleet up -i inventory/lab`` on it, then ``python -m gpufleet.lab.dra_e2e_run``: the
suite built by ``gpufleet.build.dra_e2e``, its images made and imported by
``gpufleet.lab.e2e_images``, the default label filter and skip (docs/dra-e2e.md says
which specs they leave out and why). The lab is removed at the end
(``GPUFLEET_TEST_KEEP_LAB=1`` keeps it).

It runs only with ``GPUFLEET_DRA_E2E=1``: on the two-core CI machine the 103 specs take
about 20 minutes on three Ginkgo processes (52 minutes of spec time), on top of about
9 minutes of ``lab up`` and ``up``, so they are not part of the default run yet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GPUFLEET = REPO / ".venv" / "bin" / "gpufleet"
OWN_LAB = {"GPUFLEET_LAB_NAME": "gpufleet-e2e", "GPUFLEET_LAB_SUBNET": "10.89.64.0/24"}
INVENTORY = str(REPO / "inventory" / "lab")


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env={**os.environ, **OWN_LAB},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def lab() -> Iterator[None]:
    if os.environ.get("GPUFLEET_DRA_E2E") != "1":
        pytest.skip(
            "GPUFLEET_DRA_E2E=1 runs Kubernetes' DRA e2e specs on a lab of their own "
            "(about 30 minutes); not part of the default run"
        )
    try:
        t = time.monotonic()
        up = _run([str(GPUFLEET), "lab", "up"], timeout=1800)
        assert up.returncode == 0, f"lab up exited {up.returncode}:\n{up.stderr[-3000:]}"
        site = _run([str(GPUFLEET), "up", "-i", INVENTORY], timeout=1800)
        out = site.stdout + site.stderr
        assert site.returncode == 0, f"gpufleet up exited {site.returncode}:\n{out[-6000:]}"
        print(f"\nlab up and gpufleet up {time.monotonic() - t:.0f}s")
        yield
    finally:
        if os.environ.get("GPUFLEET_TEST_KEEP_LAB") != "1":
            down = _run([str(GPUFLEET), "lab", "down"], timeout=600)
            assert down.returncode == 0, f"lab down left things behind:\n{down.stderr[-3000:]}"


def test_the_release_dra_e2e_specs_pass_on_a_provisioned_lab(lab: None, tmp_path: Path) -> None:
    proc = _run(
        [
            sys.executable,
            "-m",
            "gpufleet.lab.dra_e2e_run",
            "--procs",
            "3",
            "--report-dir",
            str(tmp_path),
        ],
        timeout=4200,
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    print(json.dumps(summary["specs"]), f"{summary['seconds']}s")
    failed = "\n".join(
        f"{f['name']} ({f['location']}): {f['message'][:300]}" for f in summary["failed"]
    )
    assert summary["specs"]["failed"] == 0, failed
    # every spec the default filter selects ran: none was skipped at run time
    assert summary["specs"]["run"] == 103, summary["specs"]
    assert proc.returncode == 0, proc.stderr[-3000:]
