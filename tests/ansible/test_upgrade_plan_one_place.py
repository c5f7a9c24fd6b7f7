"""The upgrade is planned in one place: on the same inventory (hosts that are never
contacted: addresses nothing answers on) and the same cluster snapshot,
``gpufleet upgrade --plan --json`` and ``ansible-playbook playbooks/upgrade.yml --check
-e upgrade_plan_file=...`` give the same plan, for a one-step path, a multi-step path and a
blocked plan; the check-mode run stops after planning."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit import cluster_snapshot
from tests.unit.ansible_cli import ansible

pytestmark = pytest.mark.ansible

INVENTORY = """
all:
  vars:
    ansible_host: 192.0.2.1
    upgrade_batch_size: "50%"
  children:
    kube_control_plane:
      hosts:
        cp-a: {kubernetes_node_name: node-cp-a}
    kube_node:
      hosts:
        gpu-a: {kubernetes_node_name: node-gpu-a}
        gpu-b: {kubernetes_node_name: node-gpu-b}
        gpu-c: {kubernetes_node_name: node-gpu-c}
"""
HOSTS = {"cp-a": "node-cp-a", "gpu-a": "node-gpu-a", "gpu-b": "node-gpu-b", "gpu-c": "node-gpu-c"}


def _snapshot(version: str, kubelet_gates: dict[str, bool] | None = None) -> dict:
    return cluster_snapshot.snapshot(
        version, "cp-a", ["gpu-a", "gpu-b", "gpu-c"], node_names=HOSTS,
        kubelet_gates=kubelet_gates, cluster_uid="uid-1",
    )  # fmt: skip


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    return tmp_path


def cli_plan(site: Path, snapshot: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "gpufleet"), "upgrade", "-i", str(site / "hosts.yml"),
         "--plan", "--json", "--snapshot", str(snapshot), *args,
         "-e", f"upgrade_report_path={site / 'report.json'}"],
        capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(site),
             "ANSIBLE_SSH_ARGS": "-o ConnectTimeout=2"},
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout)


def playbook_plan(
    site: Path, snapshot: Path, *extra: str
) -> tuple[subprocess.CompletedProcess, dict]:
    plan_file = site / "plan.json"
    plan_file.unlink(missing_ok=True)
    proc = ansible(
        "ansible-playbook", "-i", str(site / "hosts.yml"), "playbooks/upgrade.yml", "--check",
        "-e", f"upgrade_snapshot={snapshot}", "-e", f"upgrade_plan_file={plan_file}",
        "-e", f"upgrade_report_path={site / 'report.json'}", *extra,
    )  # fmt: skip
    return proc, json.loads(plan_file.read_text())


def test_one_step_is_the_same_plan_and_the_run_stops_after_planning(site: Path) -> None:
    snap = site / "snap.json"
    snap.write_text(json.dumps(_snapshot("1.36.3")))
    rc, cli = cli_plan(site, snap, "--to", "1.37.2")
    proc, book = playbook_plan(site, snap, "-e", "upgrade_kubernetes_version=1.37.2")
    assert (rc, proc.returncode) == (0, 0), proc.stdout[-3000:]
    assert cli == book
    assert cli["path"] == ["1.37.2"]
    # 50% of 3 workers, rounded down: 1 per batch
    assert cli["steps"][0]["worker_serial"] == [1, 1, 1]
    assert "unreachable=1" not in proc.stdout
    # nothing after the plan ran: no backup, control plane, worker or final task
    for marker in ("Upgrade | Backup |", "Upgrade | Kubelet |", "Upgrade | Final |", "Preflight |"):
        assert f"{marker}" not in proc.stdout.split("PLAY RECAP")[0], marker
    assert not (site / "report.json").exists()


def test_a_multi_step_path_is_planned_whole_in_check_mode(site: Path) -> None:
    snap = site / "snap.json"
    snap.write_text(json.dumps(_snapshot("1.35.4")))
    rc, cli = cli_plan(site, snap, "--to", "1.37.2", "--via", "1.36.3", "--batch-size", "2")
    proc, book = playbook_plan(
        site, snap, "-e", "upgrade_kubernetes_version=1.37.2", "-e", '{"upgrade_via": ["1.36.3"]}',
        "-e", "upgrade_batch_size=2",
    )  # fmt: skip
    assert (rc, proc.returncode) == (0, 0), proc.stdout[-3000:]
    assert cli == book
    assert cli["path"] == ["1.36.3", "1.37.2"]
    assert [s["worker_serial"] for s in cli["steps"]] == [[2, 1], [2, 1]]


def test_a_blocked_plan_is_the_same_plan_and_refused(site: Path) -> None:
    # CSIMigration: no release of the model registers it, 1.38 refuses to start with it
    snap = site / "snap.json"
    snap.write_text(json.dumps(_snapshot("1.37.2", {"CSIMigration": True})))
    rc, cli = cli_plan(site, snap, "--to", "1.38.0")
    proc, book = playbook_plan(site, snap, "-e", "upgrade_kubernetes_version=1.38.0")
    assert rc == 1
    assert proc.returncode != 0
    assert "is blocked, nothing was changed" in proc.stdout
    assert cli == book
    assert [(b["component"], b["entry"]) for b in cli["blocking"]] == [
        ("kubelet", "CSIMigration=true")
    ]


def test_the_plan_names_the_local_repository_when_there_is_one(site: Path) -> None:
    snap = site / "snap.json"
    snap.write_text(json.dumps(_snapshot("1.36.3")))
    extra = ("-e", "upgrade_local_repo_dir=/srv/k8s", "-e", "upgrade_local_repo_remote_src=true")
    rc, cli = cli_plan(site, snap, "--to", "1.37.2", *extra)
    assert rc == 0
    assert cli["steps"][0]["repo_url"] == "file:/srv/k8s/core:/stable:/v1.37/deb/"
    rc, plain = cli_plan(site, snap, "--to", "1.37.2")
    assert plain["steps"][0]["repo_url"] == "https://pkgs.k8s.io/core:/stable:/v1.37/deb/"
