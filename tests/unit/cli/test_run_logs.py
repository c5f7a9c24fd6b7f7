"""The run logs (``$GPUFLEET_CACHE/runs``) that several gpufleet commands share when they run at
once on one machine: each prunes them to the newest ended runs, never removes a run still in
progress, and does not fail when another command removes a directory first."""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import shutil
import time
from pathlib import Path

import pytest
from rich.console import Console

from gpufleet import runner

pytestmark = pytest.mark.unit

NOW = 2_000_000_000.0


def make_run(root: Path, name: str, age_s: float, ended: bool = True, files: int = 1) -> Path:
    run = root / name
    (run / "job_events").mkdir(parents=True)
    for i in range(files):
        (run / "job_events" / f"{i}.json").write_text("{}")
    if ended:
        (run / "rc").write_text("0")
        os.utime(run / "rc", (NOW - age_s, NOW - age_s))
    os.utime(run, (NOW - age_s, NOW - age_s))
    return run


def test_keeps_the_newest_ended_runs_and_the_runs_in_progress(tmp_path: Path) -> None:
    for i in range(6):
        make_run(tmp_path, f"ended-{i}", age_s=100 * (i + 1))
    make_run(tmp_path, "in-progress", age_s=10_000, ended=False)
    make_run(tmp_path, "abandoned", age_s=runner.RUN_IN_PROGRESS_S + 1, ended=False)
    (tmp_path / "not-a-run").write_text("kept: only directories are runs")
    # the oldest run, whose files another command is removing: its directory's time is now
    os.utime(tmp_path / "ended-5", (NOW, NOW))

    runner.prune_runs(tmp_path, keep=3, now=NOW)

    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ended-0",
        "ended-1",
        "ended-2",
        "in-progress",
        "not-a-run",
    ]


def test_a_directory_another_command_removed_first_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        make_run(tmp_path, f"ended-{i}", age_s=100 * (i + 1))
    # a link whose target is gone: what a removed directory looks like to stat()
    (tmp_path / "dangling").symlink_to(tmp_path / "removed")
    listing = os.scandir
    removed: list[str] = []

    def listed_then_removed(path: object) -> object:
        entries = list(listing(path))  # type: ignore[arg-type]
        if not removed:  # another command removes two runs after this one listed them
            removed.extend(["ended-4", "ended-3"])
            for name in removed:
                shutil.rmtree(tmp_path / name)
        return contextlib.nullcontext(iter(entries))

    monkeypatch.setattr(runner.os, "scandir", listed_then_removed)
    runner.prune_runs(tmp_path, keep=2, now=NOW)

    assert removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "ended-0", "ended-1"]


def test_a_missing_log_directory_is_nothing_to_prune(tmp_path: Path) -> None:
    runner.prune_runs(tmp_path / "absent", keep=2, now=NOW)
    assert not (tmp_path / "absent").exists()


def _prune(root: str) -> None:
    runner.prune_runs(Path(root), keep=20)


def test_commands_pruning_at_once_all_succeed(tmp_path: Path) -> None:
    now = time.time()
    for i in range(300):
        run = make_run(tmp_path, f"ended-{i:03}", age_s=0, files=20)
        os.utime(run / "rc", (now - 1000 - i, now - 1000 - i))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(6) as pool:
        pool.map(_prune, [str(tmp_path)] * 6)  # an exception in one is raised here
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"ended-{i:03}" for i in range(20)]


def test_a_playbook_run_prunes_the_logs_it_shares(tmp_path: Path) -> None:
    """A real ansible-runner run with a log directory that holds a link to a removed run (what
    another command's pruning leaves for an instant): the run ends well and prunes."""
    logs = tmp_path / "runs"
    logs.mkdir()
    old = time.time() - 10_000
    for i in range(runner.ARTIFACTS_KEPT + 3):
        run = make_run(logs, f"ended-{i:02}", age_s=0)
        os.utime(run / "rc", (old - i, old - i))
    (logs / "dangling").symlink_to(logs / "removed")
    in_progress = make_run(logs, "in-progress", age_s=0, ended=False)
    os.utime(in_progress, (old - 100, old - 100))
    book = tmp_path / "noop.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.debug:\n        msg: ok\n"
    )
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("localhost ansible_connection=local\n")

    result = runner.run_playbook(
        str(book),
        [str(inventory)],
        console=Console(file=io.StringIO(), force_terminal=False),
        artifact_root=logs,
    )

    assert result.status == 0
    kept = sorted(p.name for p in logs.iterdir() if p.is_dir() and not p.is_symlink())
    assert result.artifact_dir.name in kept
    assert "in-progress" in kept
    ended = [f"ended-{i:02}" for i in range(runner.ARTIFACTS_KEPT - 1)]
    assert kept == sorted([*ended, "in-progress", result.artifact_dir.name])


def _runner_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: str | None) -> dict:
    """The environment ansible-runner gives ansible-playbook for gpufleet's arguments."""
    from ansible_runner.config.runner import RunnerConfig

    if cache is None:
        monkeypatch.delenv("ANSIBLE_CACHE_PLUGIN", raising=False)
    else:
        monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", cache)
    book = tmp_path / "project" / "site.yml"
    book.parent.mkdir(exist_ok=True)
    book.write_text("[]\n")
    kwargs = runner._runner_kwargs(
        book,
        [],
        tmp_path / "private",
        tmp_path / "artifacts",
        extravars=None,
        limit=None,
        tags=None,
        check=False,
        diff=False,
        verbosity=0,
        event_handler=lambda _event: True,
    )
    config = RunnerConfig(
        **{k: v for k, v in kwargs.items() if k not in ("quiet", "event_handler", "cmdline")}
    )
    config.prepare()
    return dict(config.env)


def test_runs_keep_facts_in_the_configured_cache_not_a_file_per_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ansible-runner's default fact cache (jsonfile, under each run's own artifacts, which
    no later run reads) looks up a file per host whenever a host's variables are read: a
    run leaves the cache to Ansible's configuration, the user's own plugin included."""
    env = _runner_env(tmp_path, monkeypatch, None)
    assert "ANSIBLE_CACHE_PLUGIN" not in env
    assert "ANSIBLE_CACHE_PLUGIN_CONNECTION" not in env
    assert not (tmp_path / "artifacts" / "fact_cache").exists()
    assert _runner_env(tmp_path, monkeypatch, "redis")["ANSIBLE_CACHE_PLUGIN"] == "redis"
