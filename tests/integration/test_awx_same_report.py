"""``gpufleet validate`` and the same playbook run as AWX/AAP run it (ansible-runner over a
private data directory whose project is docs/examples/awx, the job template's extra
variables in env/extravars) give the same report for the same inventory: the JSON and the
JUnit files, and the job artifacts (``set_stats``) that AWX keeps.

The cluster is a real kube-apiserver with a KWOK GPU node, its ResourceSlice and the
DeviceClasses; the inventory's control-plane host is this machine (connection local),
read by the role as it reads any host."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gpufleet.cli import main
from gpufleet.lab import gpusim_plugin
from tests.integration.conftest import StartControlPlane
from tests.integration.test_validate_claims import DRIVER, apply, device

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
#: What differs between two runs of the same checks: how long they took, and the
#: playbook's end status that only the CLI sees (it adds it after the run).
VOLATILE_META = ("timings_s", "duration_s", "playbook_status")


#: The host read is this machine's own process table, which other work on the machine
#: changes between the two runs: how many kube-apiserver/kubelet processes run, and their
#: pids, are not the report's to keep equal.
_PROCESSES = re.compile(r"\d+ ([\w-]+) processes run \(pids [\d, ]+\)")


def _same_processes(text: str) -> str:
    return _PROCESSES.sub(r"N \1 processes run (pids ...)", text)


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(_same_processes(json.dumps(report)))
    for key in VOLATILE_META:
        out.get("meta", {}).pop(key, None)
    return out


def comparable_junit(text: str) -> str:
    return _same_processes(re.sub(r' time="[0-9.]+"', "", text))


def test_cli_and_awx_runs_give_the_same_report(
    start_control_plane: StartControlPlane, tmp_path: Path
) -> None:
    import ansible_runner

    cp = start_control_plane()
    (node,) = cp.start_kwok(1, labels={"nvidia.com/gpu.present": "true"}, name_prefix="gpu-")
    cp.wait_nodes_ready([node])
    rslice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [device("gpu-0", "GPU-0"), device("gpu-1", "GPU-1")],
        },
    }
    apply(cp, [*gpusim_plugin.device_classes(), rslice])
    empty_proc = tmp_path / "proc"
    empty_proc.mkdir()
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {
                        "validate_become": False,
                        "validate_kubeconfig": str(cp.kubeconfig),
                        # the process table of a machine that runs other tests (a lab of
                        # containers beside this one) changes between the two runs: both
                        # read an empty one
                        "validate_proc_root": str(empty_proc),
                        "ansible_python_interpreter": sys.executable,
                    },
                    "children": {
                        "kube_control_plane": {"hosts": {"cp-1": {"ansible_connection": "local"}}},
                        "kube_node": {"hosts": {}},
                    },
                }
            }
        )
    )

    cli_json, cli_junit = tmp_path / "cli.json", tmp_path / "cli.xml"
    result = CliRunner().invoke(
        main,
        ["validate", "-i", str(inventory), "--json", str(cli_json), "--junit", str(cli_junit)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code in (0, 1), result.output
    cli_report = json.loads(cli_json.read_text())
    assert cli_report["meta"]["objects"]["nodes"] == 1
    # the checks judged the listing the playbook made in the background (tasks/list.yml),
    # whose requests are counted with the module's own
    timings = cli_report["meta"]["timings_s"]
    assert "list_wait" in timings and timings["list"] > 0, timings
    log = cli_report["meta"]["api_request_log"]
    assert any("/api/v1/pods" in line for line in log), log
    assert cli_report["meta"]["api_requests"] == len(log)

    # AWX's layout: project/ (the SCM project), inventory/, env/extravars (the job
    # template's extra variables); the collection comes from the execution environment,
    # here from this Python's path as for the CLI.
    private = tmp_path / "awx"
    shutil.copytree(REPO / "docs" / "examples" / "awx", private / "project")
    (private / "inventory").mkdir()
    shutil.copy(inventory, private / "inventory" / "hosts.yml")
    awx_json, awx_junit = tmp_path / "awx.json", tmp_path / "awx.xml"
    (private / "env").mkdir()
    (private / "env" / "extravars").write_text(
        yaml.safe_dump(
            {
                "validate_artifacts": True,
                "validate_report_file": str(awx_json),
                "validate_junit_file": str(awx_junit),
            }
        )
    )
    stats: list[dict[str, Any]] = []
    done: dict[str, Any] = {}  # task name -> its result on the control host

    def event(ev: dict[str, Any]) -> bool:
        data = ev.get("event_data") or {}
        if ev.get("event") == "playbook_on_stats":
            stats.append(data)
        elif ev.get("event") == "runner_on_ok":
            done[str(data.get("task"))] = data.get("res")
        return True

    run = ansible_runner.run(
        private_data_dir=str(private),
        playbook="validate.yml",
        quiet=True,
        envvars={
            "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "True",
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        },
        event_handler=event,
    )
    assert run.status == "successful", run.stdout.read()[-3000:]
    # the background listing was taken by the checks, and its process ended with the
    # removal of its directory (not at the end of validate_listing_timeout)
    (job,) = [res for task, res in done.items() if task.endswith("background listing's job to end")]
    assert job["finished"] and job["taken"] is True, job

    awx_report = json.loads(awx_json.read_text())
    assert comparable(awx_report) == comparable(cli_report)
    assert comparable_junit(awx_junit.read_text()) == comparable_junit(cli_junit.read_text())
    # the job artifacts: what AWX/AAP show and hand to the next job of a workflow
    (final,) = stats
    artifacts = final["artifact_data"]
    assert comparable(artifacts["gpufleet_validate_report"]) == comparable(cli_report)
    assert artifacts["gpufleet_validate_junit"] == awx_junit.read_text()  # the same run
    assert int(artifacts["gpufleet_validate_exit_code"]) == result.exit_code
