"""``gpufleet mig mode`` (gpufleet/commands/mig_mode.py): the target and batch reach
playbooks/mig_mode.yml as its variables, a bad batch or target is refused before any run
(exit 2), and a refusal of the playbook's input checks exits 2, a failed node 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gpufleet import runner
from gpufleet.cli import main
from gpufleet.commands import mig_mode as mode_cmd

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


class _Progress:
    def __init__(self, failures: list[tuple[str, str, str]]) -> None:
        self.failures = failures


class _Result:
    def __init__(self, status: int, failures: list[tuple[str, str, str]]) -> None:
        self.status = status
        self.progress = _Progress(failures)


def _run(monkeypatch: pytest.MonkeyPatch, argv: list[str], result: _Result) -> tuple[Any, list]:
    calls: list[tuple[str, dict[str, Any], Any]] = []

    def run_playbook(name: str, inventory: Any, *, extravars: Any, limit: Any) -> _Result:
        calls.append((name, extravars, limit))
        return result

    monkeypatch.setattr(runner, "run_playbook", run_playbook)
    return CliRunner().invoke(main, ["mig", "mode", *argv]), calls


def test_the_target_batch_and_limit_reach_the_playbook(monkeypatch: pytest.MonkeyPatch) -> None:
    out, calls = _run(
        monkeypatch,
        ["--to", "dynamic", "-i", "inv", "--limit", "gpu_h200", "--batch", "25%"],
        _Result(0, []),
    )
    assert out.exit_code == 0, out.output
    assert calls == [("mig_mode", {"mig_mode_to": "dynamic", "mig_mode_batch": "25%"}, "gpu_h200")]
    assert mode_cmd.mode_extravars("static", "2") == {"mig_mode_to": "static", "mig_mode_batch": 2}
    assert mode_cmd.mode_extravars("static", None) == {"mig_mode_to": "static"}


@pytest.mark.parametrize("argv", [["--to", "partitioned"], ["--to", "static", "--batch", "0"],
                                  ["--to", "static", "--batch", "150%"]])  # fmt: skip
def test_bad_input_exits_2_before_any_run(monkeypatch: pytest.MonkeyPatch, argv: list) -> None:
    out, calls = _run(monkeypatch, [*argv, "-i", "inv"], _Result(0, []))
    assert out.exit_code == 2 and calls == [], out.output


def test_a_refused_input_exits_2_and_a_failed_node_1(monkeypatch: pytest.MonkeyPatch) -> None:
    msg = 'mig_layout={} and mig_config_name="" on gpu-1: moving it to static MIG ...'
    task = mode_cmd.REFUSING_TASKS[1]
    out, _ = _run(monkeypatch, ["--to", "static", "-i", "inv"], _Result(2, [("gpu-1", task, msg)]))
    assert out.exit_code == 2 and msg in out.output, out.output
    failed = [("gpu-1", "MIG mode | Stop the run", "gpu-1 did not move to static MIG")]
    out, _ = _run(monkeypatch, ["--to", "static", "-i", "inv"], _Result(1, failed))
    assert out.exit_code == 1, out.output


def test_the_refusing_tasks_are_the_playbooks_input_checks() -> None:
    plays = yaml.safe_load((ROOT / "playbooks" / "mig_mode.yml").read_text())
    first = [t["name"] for t in plays[0]["tasks"]]
    assert first[: len(mode_cmd.REFUSING_TASKS)] == list(mode_cmd.REFUSING_TASKS)
