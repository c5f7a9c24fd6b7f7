"""``gpufleet upgrade``: resume from the report (the role's planner reads it), unreachable
hosts, timings (gpufleet/commands/upgrade.py), the lab's additions (gpufleet/lab/upgrade.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpufleet.cli import main
from tests.unit.cluster_snapshot import node

TARGET = "1.37.2"


@pytest.fixture
def site(tmp_path):
    """Control plane and gpu-a at 1.37.2, gpu-b at 1.37.2 but cordoned by a failed run."""
    inv = tmp_path / "hosts.yml"
    inv.write_text(
        "all:\n  children:\n"
        "    kube_control_plane: {hosts: {cp: {}}}\n"
        "    kube_node: {hosts: {gpu-a: {}, gpu-b: {}}}\n"
    )
    snap = {
        "schema": 1,
        "nodes": [node("cp", TARGET), node("gpu-a", TARGET), node("gpu-b", TARGET, True)],
        "pods": [
            {
                "metadata": {"labels": {"component": "kube-apiserver"}},
                "spec": {
                    "nodeName": "cp",
                    "containers": [
                        {
                            "name": "kube-apiserver",
                            "image": f"registry.k8s.io/kube-apiserver:v{TARGET}",
                        }
                    ],
                },
            }
        ],
        "resourceslices": [],
        "kubeadm_versions": dict.fromkeys(("cp", "gpu-a", "gpu-b"), f"v{TARGET}"),
    }
    (tmp_path / "snapshot.json").write_text(json.dumps(snap))
    report = {
        "target": TARGET,
        "nodes": {
            "cp": {"state": "skipped", "cordoned_by_upgrade": False},
            "gpu-a": {"state": "upgraded", "cordoned_by_upgrade": False},
            "gpu-b": {
                "node": "gpu-b",
                "state": "failed",
                "phase": "kubelet-restart",
                "cordoned": True,
                "cordoned_by_upgrade": True,
            },
        },
    }
    (tmp_path / "report.json").write_text(json.dumps(report))
    return tmp_path


def _plan(site, report):
    return CliRunner().invoke(
        main,
        ["upgrade", "-i", str(site / "hosts.yml"), "--to", TARGET, "--plan", "--json",
         "--snapshot", str(site / "snapshot.json"), "-e", f"upgrade_report_path={report}"],
    )  # fmt: skip


@pytest.mark.ansible
def test_a_node_the_report_left_cordoned_is_resumed_though_at_the_target(site):
    result = _plan(site, site / "report.json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["up_to_date"] is False and doc["path"] == [TARGET]
    nodes = {n["host"]: n for n in doc["steps"][0]["nodes"]}
    assert nodes["gpu-b"]["resume"] is True and not nodes["gpu-b"]["skip"]
    assert nodes["gpu-a"]["skip"] and nodes["cp"]["skip"]


@pytest.mark.ansible
def test_without_the_report_the_same_cluster_is_up_to_date(site):
    result = _plan(site, site / "missing.json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["up_to_date"] is True


def _event(kind, host, res, **data):
    return {"event": kind, "event_data": {"host": host, "res": res, **data}}
