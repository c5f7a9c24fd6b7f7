"""gpufleet doctor: real checks of this machine, exit code contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

GPUFLEET = str(Path(sys.executable).with_name("gpufleet"))


def _doctor(env: dict[str, str] | None = None) -> tuple[int, dict]:
    proc = subprocess.run(
        [GPUFLEET, "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    return proc.returncode, json.loads(proc.stdout)


def test_doctor_reports_every_prerequisite_with_a_verdict() -> None:
    rc, report = _doctor()
    names = {c["name"] for c in report["checks"]}
    assert {
        "python",
        "ansible-core",
        "collection kubernetes.core",
        "collection gpufleet.cluster",
        "go",
        "podman",
    } <= names
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["python"]["ok"] is True
    assert by_name["collection gpufleet.cluster"]["ok"] is True
    failed = [c for c in report["checks"] if not c["ok"]]
    assert rc == (1 if failed else 0)
    assert report["ok"] is (not failed)
    for c in failed:
        assert c["fix"], f"failed check {c['name']} gives no fix"


def test_missing_tools_fail_with_the_command_that_fixes_them(tmp_path: Path) -> None:
    # a PATH holding only this Python's bin dir: no go, no podman
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))
    rc, report = _doctor(env)
    by_name = {c["name"]: c for c in report["checks"]}
    assert rc == 1
    assert by_name["go"]["ok"] is False and "go" in by_name["go"]["fix"]
    assert by_name["podman"]["ok"] is False
    assert by_name["podman"]["fix"] == "lab/prepare-podman"


def test_version_flag_prints_the_package_version() -> None:
    from gpufleet import __version__

    out = subprocess.run([GPUFLEET, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"gpufleet, version {__version__}"
