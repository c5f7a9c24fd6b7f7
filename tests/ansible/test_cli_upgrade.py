"""``gpufleet upgrade --plan`` from a saved cluster snapshot (real ansible-playbook in check
mode: the role plans, the command renders)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import main
from tests.unit.cluster_snapshot import apiserver_pod, node, resource_slice

pytestmark = pytest.mark.ansible


@pytest.fixture
def site(tmp_path):
    inv = tmp_path / "hosts.yml"
    inv.write_text(
        """
all:
  vars:
    upgrade_batch_size: "50%"
    upgrade_min_gpu_available_percent: 40
  children:
    kube_control_plane:
      hosts:
        cp-a: {kubernetes_node_name: node-cp-a}
    kube_node:
      hosts:
        gpu-a: {kubernetes_node_name: node-gpu-a}
        gpu-b: {kubernetes_node_name: node-gpu-b}
        gpu-c: {kubernetes_node_name: node-gpu-c}
        gpu-d: {kubernetes_node_name: node-gpu-d}
"""
    )
    snap = {
        "schema": 1,
        "nodes": [node("node-cp-a", "1.36.3")] + [node(f"node-gpu-{x}", "1.36.3") for x in "abcd"],
        "pods": [apiserver_pod("node-cp-a", "1.36.3")],
        "resourceslices": [resource_slice(f"node-gpu-{x}", 8) for x in "abcd"],
        "kubeadm_versions": {h: "v1.36.3" for h in ["cp-a", "gpu-a", "gpu-b", "gpu-c", "gpu-d"]},
        "cluster_configuration": {
            "apiServer": {
                "extraArgs": [{"name": "feature-gates", "value": "DRAControlPlaneController=true"}]
            }
        },
        "kubelet_configuration": {"featureGates": {}},
    }
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snap))
    return inv, path


def test_plan_json_uses_inventory_variables(site):
    inv, snap = site
    result = CliRunner().invoke(
        main,
        ["upgrade", "-i", str(inv), "--to", "1.37.2", "--plan", "--json", "--snapshot", str(snap)],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["path"] == ["1.37.2"]
    assert doc["batch_size"] == 2  # 50% of 4 workers
    step = doc["steps"][0]
    # 32 GPU devices, floor 40% -> at most 19 drained -> 2 nodes (16) per batch
    assert step["worker_serial"] == [2, 2]
    assert [w["hosts"] for w in step["waves"]] == [["cp-a"], ["gpu-a", "gpu-b"], ["gpu-c", "gpu-d"]]
    assert step["packages"]["kubelet"] == "1.37.2-1.1"
    assert [f["entry"] for f in step["sanitize"]["kube-apiserver"]["remove"]] == [
        "DRAControlPlaneController=true"
    ]
    assert [n["name"] for n in doc["nodes"]] == [
        "node-cp-a",
        "node-gpu-a",
        "node-gpu-b",
        "node-gpu-c",
        "node-gpu-d",
    ]


def test_options_override_inventory_variables(site):
    inv, snap = site
    result = CliRunner().invoke(
        main,
        ["upgrade", "-i", str(inv), "--to", "1.37.2", "--plan", "--json", "--snapshot", str(snap),
         "--batch-size", "1", "--min-gpu-available-percent", "0"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["steps"][0]["worker_serial"] == [1, 1, 1, 1]


def test_table_names_the_step_and_the_removed_gate(site):
    inv, snap = site
    result = CliRunner().invoke(
        main, ["upgrade", "-i", str(inv), "--to", "1.37.2", "--plan", "--snapshot", str(snap)]
    )
    assert result.exit_code == 0, result.output
    assert "step 1: 1.36.3 -> 1.37.2" in result.output
    assert "DRAControlPlaneController=true" in result.output
    assert "kubeadm upgrade apply v1.37.2" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to", "1.36.1"], "downgrades"),
        (["--to", "1.39.0"], "outside the releases"),
        (["--to", "1.37.2", "--batch-size", "0"], "--batch-size='0'"),
        (["--to", "1.37.2", "--min-gpu-available-percent", "90"], "draining node-gpu-a alone"),
    ],
)
def test_refused_plans_exit_2_with_reason_and_fix(site, args, message):
    inv, snap = site
    result = CliRunner().invoke(
        main, ["upgrade", "-i", str(inv), "--plan", "--snapshot", str(snap), *args]
    )
    assert result.exit_code == 2
    assert message in result.output
    assert "Fix:" in result.output


def test_missing_inventory_exits_2(tmp_path):
    result = CliRunner().invoke(
        main, ["upgrade", "-i", str(tmp_path / "nope"), "--to", "1.37.2", "--plan"]
    )
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_beta_to_ga_table_removes_the_gate_and_keeps_the_served_beta_api(tmp_path):
    # 1.33 -> 1.34: the run removes DynamicResourceAllocation=true (GA, on by default) and
    # keeps resource.k8s.io/v1beta1=true (still served): the table says so, once per entry
    inv = tmp_path / "hosts.yml"
    inv.write_text(
        "all:\n  children:\n    kube_control_plane:\n      hosts:\n        cp-a: {}\n"
        "    kube_node:\n      hosts:\n        gpu-a: {}\n"
    )
    gates = "DynamicResourceAllocation=true"
    rc = "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
    snap = {
        "schema": 1,
        "nodes": [node("cp-a", "1.33.13"), node("gpu-a", "1.33.13")],
        "pods": [apiserver_pod("cp-a", "1.33.13")],
        "resourceslices": [resource_slice("gpu-a", 1)],
        "kubeadm_versions": {"cp-a": "v1.33.13", "gpu-a": "v1.33.13"},
        "cluster_configuration": {
            "apiServer": {
                "extraArgs": [
                    {"name": "feature-gates", "value": gates},
                    {"name": "runtime-config", "value": rc},
                ]
            }
        },
        "kubelet_configuration": {"featureGates": {"DynamicResourceAllocation": True}},
    }
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snap))
    result = CliRunner().invoke(
        main,
        ["upgrade", "-i", str(inv), "--to", "1.34.4", "--plan", "--snapshot", str(path)],
        env={"COLUMNS": "250"},
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "│" in line]
    dra = [r for r in rows if "DynamicResourceAllocation" in r]
    assert dra and all("remove true -> -" in r for r in dra), dra
    beta = [r for r in rows if "resource.k8s.io/v1beta1=true" in r]
    assert len(beta) == 1 and "advise drop (kept)" in beta[0], beta


def _report(path, cluster_uid, host="gpu-a"):
    path.write_text(
        json.dumps(
            {
                "cluster_uid": cluster_uid,
                "target": "1.37.2",
                "nodes": {
                    host: {
                        "node": f"node-{host}",
                        "state": "failed",
                        "phase": "kubelet-restart",
                        "cordoned": True,
                        "cordoned_by_upgrade": True,
                    }
                },
            }
        )
    )


@pytest.mark.parametrize(("theirs", "resumed"), [("uid-a", True), ("uid-other", False)])
def test_a_report_of_another_cluster_is_not_resumed(site, tmp_path, theirs, resumed):
    inv, snap = site
    doc = json.loads(snap.read_text())
    doc["cluster_uid"] = "uid-a"
    # gpu-a: at the target, left cordoned by the failed run the report describes
    doc["nodes"] = [n for n in doc["nodes"] if n["metadata"]["name"] != "node-gpu-a"]
    doc["nodes"].append(node("node-gpu-a", "1.37.2", unschedulable=True))
    doc["kubeadm_versions"]["gpu-a"] = "v1.37.2"
    snap.write_text(json.dumps(doc))
    report = tmp_path / "report.json"
    _report(report, theirs)
    result = CliRunner().invoke(
        main,
        ["upgrade", "-i", str(inv), "--to", "1.37.2", "--plan", "--json", "--snapshot", str(snap),
         "-e", f"upgrade_report_path={report}"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    resume = [n["host"] for n in plan["steps"][0]["nodes"] if n["resume"]]
    assert resume == (["gpu-a"] if resumed else [])
    assert ("another cluster's" in result.stderr) is not resumed


def test_own_report_moves_another_clusters_report_aside_and_stamps(tmp_path):
    from gpufleet.commands.upgrade_report import own_report

    report = tmp_path / "upgrade-report.json"
    _report(report, "uid-other")
    note = own_report(report, "uid-a")
    assert "another cluster's" in note
    assert json.loads(report.read_text()) == {"cluster_uid": "uid-a"}
    aside = tmp_path / "upgrade-report.cluster-uid-othe.json"
    assert json.loads(aside.read_text())["nodes"]["gpu-a"]["cordoned_by_upgrade"] is True
    # this cluster's report (or one without a UID) is kept, stamped
    _report(report, None)
    assert own_report(report, "uid-a") == ""
    doc = json.loads(report.read_text())
    assert doc["cluster_uid"] == "uid-a" and "gpu-a" in doc["nodes"]


def test_json_without_plan_is_refused_before_anything_runs(site):
    inv, snap = site
    result = CliRunner().invoke(
        main, ["upgrade", "-i", str(inv), "--to", "1.37.2", "--json", "--snapshot", str(snap)]
    )
    assert result.exit_code == 2
    assert "--json prints the plan only" in result.stderr and "add --plan" in result.stderr
    assert result.stdout == ""


def test_warnings_before_an_upgrade_are_named_and_accepted_only_explicitly():
    from gpufleet.commands import _validate as validate_cmd

    doc = {
        "checks": [
            {"id": "gates.model", "status": "warn"},
            {"id": "nodes.gpu-labels", "status": "pass"},
        ]
    }
    assert validate_cmd.warned_checks(doc) == ["gates.model"]
    assert validate_cmd.warned_checks({"checks": [{"id": "a", "status": "pass"}]}) == []
    result = CliRunner().invoke(main, ["upgrade", "--help"])
    assert "--accept-warnings" in result.output


@pytest.mark.parametrize(("value", "accepted"), [("yes", True), ("false", False), (None, False)])
def test_the_run_reads_upgrade_accept_warnings_as_ansible_does(site, tmp_path, value, accepted):
    import io

    from rich.console import Console

    from gpufleet.commands import upgrade as cmd

    inv, snap = site
    extra = {"upgrade_report_path": str(tmp_path / "r.json")}
    if value is not None:
        extra["upgrade_accept_warnings"] = value
    run = cmd.get_plan(
        [str(inv)], cmd.plan_vars(extra, "1.37.2", snapshot=str(snap)), Console(file=io.StringIO())
    )
    assert run.settings == {"report_path": str(tmp_path / "r.json"), "accept_warnings": accepted}


def test_validate_around_an_upgrade_creates_the_reports_directory(tmp_path, monkeypatch) -> None:
    # A fresh machine has no <cache>/reports yet; the validate module writes its report
    # there, so the directory must exist before the playbook runs.
    from rich.console import Console

    import gpufleet.runner
    from gpufleet.commands import _validate as validate_cmd

    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path / "cache"))
    seen = {}

    class Result:
        status = 0

    def fake_run(name, inventory, *, extravars, console):
        seen["dir_exists"] = Path(extravars["validate_report_file"]).parent.is_dir()
        return Result()

    monkeypatch.setattr(gpufleet.runner, "run_playbook", fake_run)
    with open(os.devnull, "w") as sink:
        validate_cmd.run_validate(["inventory/lab"], "upgrade", "after", Console(file=sink))
    assert seen == {"dir_exists": True}
