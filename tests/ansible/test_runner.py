"""The playbook runner: real ansible-runner runs of small playbooks against local hosts."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from gpufleet import cli, runner  # cli adds the lab's inventory check to the runner
from gpufleet.exit import EXIT_FAILED, EXIT_OK

pytestmark = pytest.mark.ansible

DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "runner"


def _run(tmp_path: Path, limit: str | None = None) -> tuple[runner.RunResult, list[dict], str]:
    events: list[dict] = []
    out = io.StringIO()
    result = runner.run_playbook(
        str(DATA / "mixed.yml"),
        str(DATA / "inventory.ini"),
        extravars={"marker_dir": str(tmp_path)},
        limit=limit,
        console=Console(file=out, width=200),
        on_event=events.append,
        artifact_root=tmp_path / "artifacts",
    )
    return result, events, out.getvalue()


def test_failed_and_unreachable_hosts_give_exit_1_and_a_recap(tmp_path: Path) -> None:
    result, events, printed = _run(tmp_path)
    assert result.status == EXIT_FAILED
    recap = result.progress.recap()
    assert recap["good"]["changed"] == 1 and recap["good"]["failed"] == 0
    assert recap["bad"]["failed"] == 1
    assert recap["gone"]["unreachable"] == 1
    assert ("bad", "Runner | Fail on the host named bad", "host bad refuses") in (
        result.progress.failures
    )
    # the marker proves the task really ran on the local host
    assert (tmp_path / "good.txt").read_text() == "good\n"
    assert not (tmp_path / "gone.txt").exists()
    kinds = {e["event"] for e in events}
    assert {
        "playbook_on_task_start",
        "runner_on_ok",
        "runner_on_failed",
        "runner_on_unreachable",
        "playbook_on_stats",
    } <= kinds
    assert "recap" in printed and "host bad refuses" in printed


def test_all_hosts_ok_gives_exit_0(tmp_path: Path) -> None:
    result, _, _ = _run(tmp_path, limit="good")
    assert result.status == EXIT_OK
    assert result.progress.recap() == {
        "good": {
            "ok": 2,
            "changed": 1,
            "failed": 0,
            "unreachable": 0,
            "skipped": 1,
            "rescued": 0,
            "ignored": 0,
        }
    }


def test_missing_playbook_and_inventory_are_refused_before_running(tmp_path: Path) -> None:
    with pytest.raises(runner.RunError, match="no playbook named 'nosuch'"):
        runner.run_playbook("nosuch", str(DATA / "inventory.ini"))
    with pytest.raises(runner.RunError, match=r"inventory .*does not exist"):
        runner.run_playbook(str(DATA / "mixed.yml"), str(tmp_path / "missing"))


def test_a_log_gets_one_line_per_play_and_failure_and_the_log_path(tmp_path: Path) -> None:
    _, _, printed = _run(tmp_path)  # Console(file=StringIO) is not a terminal
    lines = printed.splitlines()
    assert any(line.startswith("play: ") for line in lines)
    assert "failed: bad | Runner | Fail on the host named bad: host bad refuses" in lines
    (log,) = [line.split(": ", 1)[1] for line in lines if line.startswith("ansible log: ")]
    assert Path(log).is_file() and "host bad refuses" in Path(log).read_text()


def test_the_lab_inventory_is_refused_when_its_lab_does_not_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    monkeypatch.setenv("GPUFLEET_LAB_NAME", "nope")
    with pytest.raises(runner.RunError, match=r"lab 'nope' does not exist .*gpufleet lab up"):
        runner.run_playbook("validate", str(runner.default_inventory()))
    # a lab whose node container is gone (a reboot, a podman rm)
    from gpufleet.lab import cluster

    cluster.state_path().parent.mkdir(parents=True)
    cluster.state_path().write_text(
        '{"spec": {}, "nodes": [{"name": "nope-control-plane", "role": "control-plane", '
        '"ip": "10.0.0.1"}]}'
    )
    with pytest.raises(runner.RunError, match="nope-control-plane is not running"):
        cli.check_lab_inventory("validate", [str(runner.default_inventory())])
    # another inventory is not the lab's business, nor the lab's own playbook
    cli.check_lab_inventory("validate", [str(DATA / "inventory.ini")])
    cli.check_lab_inventory("lab", [str(runner.default_inventory())])


def test_collection_root_is_the_installed_collection() -> None:
    root = runner.collection_root()
    assert (root / "galaxy.yml").is_file()
    assert (root / "meta" / "runtime.yml").is_file()
