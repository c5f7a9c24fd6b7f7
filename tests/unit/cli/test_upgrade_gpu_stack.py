"""``gpufleet upgrade-gpu-stack`` (gpufleet/commands/upgrade_gpu_stack.py): the options
reach the playbook as the roles' variables and name themselves in its messages; the plan
renders as tables or JSON; a refused plan or a failed read exit 2 (gpufleet/exit.py);
without ``--plan`` the plan runs, its report is printed, and a failed node exits 1. The
run itself is tested on the lab (tests/integration/test_upgrade_gpu_stack_lab.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import gpu_stack as gs
from click.testing import CliRunner

from gpufleet import runner
from gpufleet.cli import main
from gpufleet.commands import upgrade_gpu_stack as cmd
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK

pytestmark = pytest.mark.unit

STATE = gs.StackState(
    "1.36.3",
    "nvidia-dra-driver-gpu-25.12.0",
    (gs.StackNode("w-1", "gpu-1", "570.172.08", "1.18.0", ("Hopper",), 8),
     gs.StackNode("w-2", "gpu-2", "580.159.04", "1.20.2", ("Volta",), 4)),
)  # fmt: skip


def planned(driver: str = "580.159.04", chart: str = "0.4.0") -> dict[str, Any]:
    targets = gs.StackTargets(driver, "1.20.2", chart)
    return gs.plan_gpu_stack(STATE, targets, input_names={"driver": "--driver"}).to_dict()


@pytest.fixture
def playbook(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """In place of ansible-runner: the planning run sets fact gpu_stack_plan to
    ``seen["plan"]`` (or fails a task with ``seen["failed"]``); keeps the run's arguments."""
    seen: dict[str, Any] = {"plan": planned(), "calls": []}

    def run_playbook(name: str, inventory: list[str], **kw: Any) -> SimpleNamespace:
        seen["calls"].append((name, bool(kw.get("check"))))
        if name == "validate":
            return SimpleNamespace(status=0)
        if not kw.get("check"):
            facts = {"ansible_facts": {"gpu_stack_report_path": seen["report"]}}
            kw["on_event"]({"event": "runner_on_ok", "event_data": {"res": facts}})
            if "run_failed" in seen:
                kw["on_event"]({"event": "runner_on_failed", "event_data": {
                    "host": "w-1", "task": "GPU stack | Node | Stop the run",
                    "res": {"msg": seen["run_failed"]}}})  # fmt: skip
                return SimpleNamespace(status=2)
            return SimpleNamespace(status=0)
        seen.update(name=name, inventory=inventory, **kw)
        if "failed" in seen:
            kw["on_event"]({"event": "runner_on_failed", "event_data": {
                "host": "localhost", "task": "GPU stack | Read the cluster's release",
                "res": {"msg": seen["failed"]}}})  # fmt: skip
            return SimpleNamespace(status=2)
        facts = {"ansible_facts": {"gpu_stack_plan": seen["plan"]}}
        kw["on_event"]({"event": "runner_on_ok", "event_data": {"res": facts}})
        return SimpleNamespace(status=0)

    monkeypatch.setattr(runner, "run_playbook", run_playbook)
    return seen


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, ["upgrade-gpu-stack", "-i", "hosts.yml", *args])


def _report(path: Any, state: str, phase: str, cause: str = "") -> None:
    entry = {"node": "gpu-1", "state": state, "phase": phase, "cause": cause,
             "cordoned": state == "failed", "updated": "2999-01-01T00:00:00Z",
             "timings_s": {"drain_s": 1.5, "driver_s": 4.25, "node_total_s": 9.0}}  # fmt: skip
    path.write_text(json.dumps({"target": "t", "nodes": {"w-1": entry}}))


def test_without_plan_the_plan_runs_and_each_node_is_reported(
    playbook: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "report.json"
    _report(report, "upgraded", "done")
    playbook["report"] = str(report)
    monkeypatch.setattr("gpufleet.commands._validate.run_validate", lambda *a, **k: 0, raising=True)
    result = invoke("--driver", "580.159.04", "--no-validate")
    assert result.exit_code == EXIT_OK, result.output
    assert playbook["calls"] == [("upgrade_gpu_stack", True), ("upgrade_gpu_stack", False)]
    assert "upgraded" in result.output and "4.2" in result.output  # driver_s of the report


def test_a_node_that_fails_stops_the_run_with_its_phase_and_cause(
    playbook: dict[str, Any], tmp_path: Any
) -> None:
    report = tmp_path / "report.json"
    _report(report, "failed", "driver", "rmmod: ERROR: Module nvidia is in use")
    playbook.update(report=str(report), run_failed="gpu-1 failed in phase driver")
    result = invoke("--driver", "580.159.04", "--no-validate")
    assert result.exit_code == EXIT_FAILED
    assert (
        "gpu-1: failed in phase driver (left cordoned): rmmod: ERROR: Module nvidia is in use"
        in (" ".join(result.output.split()))
    )
    assert "run the same command again to resume" in " ".join(result.output.split())


@pytest.mark.parametrize("value", ["", "driver,driver", "kernel", "driver, gpu"])
def test_components_outside_the_three_are_refused_before_any_run(
    playbook: dict[str, Any], value: str
) -> None:
    result = invoke("--plan", "--components", value)
    assert result.exit_code == EXIT_CANNOT_RUN
    assert "--components=" in result.stderr and "Fix: give one or more of driver" in result.stderr
    assert playbook["calls"] == []


def test_components_reach_the_playbook_as_a_list(playbook: dict[str, Any]) -> None:
    result = invoke("--plan", "--components", "driver, toolkit")
    assert result.exit_code == EXIT_OK, result.output
    assert playbook["extravars"]["upgrade_gpu_stack_components"] == ["driver", "toolkit"]


def test_options_become_the_roles_variables_and_name_themselves(
    playbook: dict[str, Any],
) -> None:
    result = invoke("--plan", "--driver", "590.44.01", "--dra-driver-chart", "0.5.0",
                    "--batch-size", "25%", "-e", "nvidia_driver_reboot=true")  # fmt: skip
    assert result.exit_code == EXIT_OK, result.output
    assert (playbook["name"], playbook["check"]) == ("upgrade_gpu_stack", True)
    extravars = playbook["extravars"]
    assert extravars == {
        "nvidia_driver_reboot": True,
        "nvidia_driver_version": "590.44.01",
        "nvidia_driver_branch": "590",
        "dra_driver_chart_version": "0.5.0",
        "upgrade_batch_size": "25%",
        "gpu_stack_input_names": {
            "driver": "--driver", "chart": "--dra-driver-chart", "batch_size": "--batch-size"
        },
    }  # fmt: skip


def test_the_table_shows_order_changes_stops_and_load(playbook: dict[str, Any]) -> None:
    result = invoke("--plan")
    assert result.exit_code == EXIT_OK, result.output
    out = result.stdout
    assert "chart: nvidia-dra-driver-gpu 25.12.0 -> dra-driver-nvidia-gpu 0.4.0" in out
    assert "apply the CRDs of dra-driver-nvidia-gpu 0.4.0" in out
    assert "570.172.08 -> 580.159.04" in out and "1.18.0 -> 1.20.2" in out
    assert "reload" in out and "GPU pods (drain)" in out
    assert "warning: the chart goes" not in " ".join(out.split())  # the chart goes first


def test_json_prints_the_plan_alone_on_stdout(playbook: dict[str, Any]) -> None:
    result = invoke("--plan", "--json")
    assert result.exit_code == EXIT_OK
    assert json.loads(result.stdout) == playbook["plan"]


def test_a_refused_plan_exits_2_with_each_refusal_and_its_source(
    playbook: dict[str, Any],
) -> None:
    playbook["plan"] = planned(driver="590.44.01")  # w-2 has a Volta GPU
    result = invoke("--plan", "--json")
    assert result.exit_code == EXIT_CANNOT_RUN
    assert json.loads(result.stdout)["refused"][0]["node"] == "w-2"
    said = " ".join(result.stderr.split())
    assert "Error: w-2: --driver=590.44.01: Volta GPUs are supported up to branch 580" in said
    assert "(source: NVIDIA R580 data-center release notes)" in said
    assert "fix: give a release of branch 580 or older" in said


def test_the_rename_rolled_back_is_refused(playbook: dict[str, Any]) -> None:
    playbook["plan"] = gs.plan_gpu_stack(
        gs.StackState("1.36.3", "dra-driver-nvidia-gpu-0.4.0"),
        gs.StackTargets("580.159.04", "1.20.2", "25.12.0"),
    ).to_dict()
    result = invoke("--plan")
    assert result.exit_code == EXIT_CANNOT_RUN
    assert "refused: the plan cannot run" in result.stdout
    assert "docs/upgrade.md" in result.stderr


def test_a_failed_read_exits_2_with_the_tasks_message_and_fix(playbook: dict[str, Any]) -> None:
    playbook["failed"] = "Failed to load kubeconfig. Fix: pass --kubeconfig FILE."
    result = invoke("--plan")
    assert result.exit_code == EXIT_CANNOT_RUN
    assert "Error: localhost: GPU stack | Read the cluster's release: Failed to load" in (
        result.stderr
    )
    assert "Fix: pass --kubeconfig FILE." in result.stderr


def test_plan_vars_sets_the_branch_with_the_driver() -> None:
    out = cmd.plan_vars({"nvidia_driver_branch": "570"}, {"--driver": "580.159.04"})
    assert out["nvidia_driver_branch"] == "580"
    assert out["gpu_stack_input_names"] == {"driver": "--driver"}
