"""Commands a host-read module runs (``plugins/module_utils/host/commands.py``); the process
is a stand-in for ``subprocess.run``."""

from __future__ import annotations

import subprocess

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import commands

pytestmark = pytest.mark.unit


def test_check_commands_names_the_first_bad_entry() -> None:
    assert commands.check_commands([{"argv": ["containerd", "--version"]}]) == ""
    assert commands.check_commands([]) == ""
    message = commands.check_commands([{"argv": ["true"]}, {"argv": []}])
    assert message.startswith("commands[1]=")
    assert "argv, a non-empty list of strings" in message
    assert commands.check_commands(["x"]).startswith("commands[0]='x'")


def test_run_one_strips_trailing_newlines_and_splits_lines(monkeypatch) -> None:
    seen = {}

    def run(argv, **kwargs):
        seen.update(kwargs, argv=argv)
        return subprocess.CompletedProcess(argv, 3, b"one\ntwo\n", b"err\r\n")

    monkeypatch.setattr(subprocess, "run", run)
    item = {"name": "version", "argv": ["containerd", "--version"]}
    out = commands.run_one(item, timeout=7)
    assert out == {
        "item": item,
        "cmd": ["containerd", "--version"],
        "rc": 3,
        "stdout": "one\ntwo",
        "stderr": "err",
        "stdout_lines": ["one", "two"],
        "stderr_lines": ["err"],
    }
    assert seen["timeout"] == 7 and seen["argv"] == ["containerd", "--version"]
    assert "shell" not in seen or not seen["shell"]


def test_a_program_that_cannot_start_has_its_errno_and_no_output(monkeypatch) -> None:
    def run(argv, **kwargs):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(subprocess, "run", run)
    out = commands.run_one({"argv": ["nvidia-ctk"]}, timeout=5)
    assert (out["rc"], out["stdout"], out["stderr"]) == (2, "", "")


def test_a_command_past_its_timeout_is_killed(monkeypatch) -> None:
    def run(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"], output=b"partial\n")

    monkeypatch.setattr(subprocess, "run", run)
    out = commands.run_one({"argv": ["sleep", "60"]}, timeout=1)
    assert out["rc"] == -9 and out["stdout"] == "partial"
