"""``gpufleet up --check`` on the converged lab: every play of ``playbooks/site.yml`` runs in
check mode on real nodes (preflight, the DRA gates, the node labels, the DRA driver's
chart, MIG, validate with its background listing) and reports nothing to change. A task
that cannot run in check mode, or a later task that reads what such a task would have
registered, fails the run; a task that would change a converged lab shows in the recap.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .running import GPUFLEET, Lab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

INVENTORY = Path(__file__).resolve().parents[2] / "inventory" / "lab"

#: A host's line of ansible-playbook's PLAY RECAP.
RECAP = re.compile(r"^(\S+)\s*: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def _up(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GPUFLEET), "up", "-i", str(INVENTORY), *args],
        env=lab.env(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def _recap(up: subprocess.CompletedProcess[str]) -> dict[str, tuple[int, int, int, int]]:
    """host -> (ok, changed, unreachable, failed), from the run's ansible log."""
    (log,) = re.findall(r"^ansible log: (.+)$", up.stdout, re.M)
    text = Path(log).read_text(encoding="utf-8", errors="replace")
    return {m[1]: (int(m[2]), int(m[3]), int(m[4]), int(m[5])) for m in RECAP.finditer(text)}


def _lab_state(lab: Lab) -> dict[str, object]:
    """What a run that changed the lab would change: the nodes' labels and the DRA
    driver's release (its secret's revision), the DeviceClasses."""
    nodes = lab.kubectl_json("get", "nodes")["items"]
    releases = lab.kubectl_json("get", "secrets", "-A", "-l", "owner=helm")["items"]
    classes = lab.kubectl_json("get", "deviceclasses")["items"]
    return {
        "labels": {n["metadata"]["name"]: n["metadata"].get("labels") for n in nodes},
        "releases": sorted(s["metadata"]["name"] for s in releases),
        "deviceclasses": {c["metadata"]["name"]: c["metadata"]["resourceVersion"] for c in classes},
    }


def test_check_mode_on_the_converged_lab_runs_every_play_and_changes_nothing(lab: Lab) -> None:
    # converged first (a run of its own), so that what the check reports is its own
    first = _up(lab, "-e", "site_validate=false")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    before = _lab_state(lab)
    up = _up(lab, "--check")
    assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-3000:]
    recap = _recap(up)
    workers = [n["name"] for n in lab.status["nodes"] if n["role"] != "control-plane"]
    assert set(workers) <= set(recap), recap
    assert "localhost" in recap, recap  # the validate plays ran on the control host
    changed = {host: counts for host, counts in recap.items() if counts[1] or counts[3]}
    assert not changed, f"check mode, converged lab: (ok, changed, unreachable, failed) {changed}"
    assert _lab_state(lab) == before
