"""Hostile peers that never finish: an exec credential plugin that keeps its output open,
a Prometheus that sends one byte at a time or nothing, an output option that names a
named pipe nobody reads. Each must end within its (small, for the test) deadline with a
clear error, and leave no process behind."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import activity as fa
from click.testing import CliRunner

from gpufleet.cli import main
from gpufleet.commands import _output
from tests.unit.hostile.inputs import assert_refused
from tests.unit.hostile.raw_server import Script, http_answer, serve

pytestmark = pytest.mark.unit

#: Seconds the tests give a peer; a case passes when it ends well within BOUND.
DEADLINE = 1
BOUND = 4

EXEC_CREDENTIAL = (
    '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
    '"status":{"token":"t"}}'
)

# ------------------------------------------------------------------ exec credential plugin

#: name -> shell script of an exec credential plugin that never ends its exchange.
HANGING_PLUGINS = {
    "child-keeps-stdout-open": f"sleep 30 &\necho '{EXEC_CREDENTIAL}'\n",
    "grandchild-keeps-stdout-open": "sh -c 'sleep 30' &\necho '{\"apiVersion\":'\n",
    "sleeps-before-answering": "sleep 30\n",
    "ignores-sigterm": "trap '' TERM\nsleep 30\n",
    "half-an-answer-then-silence": "printf '{\"apiVersion\": '\nsleep 30\n",
    "daemon-in-its-own-session": "setsid sleep 30 &\nsleep 30\n",
    "dribbles-output-forever": "while true; do echo x; sleep 0.1; done\n",
}


def _kubeconfig(tmp_path: Path, script: str, marker: str) -> Path:
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(f"#!/bin/sh\n# {marker}\n{script}")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
        f"command: {plugin}, interactiveMode: Never}}}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return kubeconfig


def _left_running(marker: str) -> list[str]:
    """Processes whose command line names ``marker`` (the plugin's own file)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            out.append(pid)
    return out


@pytest.mark.parametrize("name", list(HANGING_PLUGINS))
def test_an_exec_plugin_that_never_finishes_is_ended_at_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    monkeypatch.setattr(vk, "EXEC_TIMEOUT", DEADLINE)
    kubeconfig = _kubeconfig(tmp_path, HANGING_PLUGINS[name], f"plugin-{name}")
    start = time.monotonic()
    with caplog.at_level(logging.ERROR):
        vk.api_client(str(kubeconfig))
    assert time.monotonic() - start < BOUND
    said = " ".join(caplog.text.split())
    assert f"did not finish within {DEADLINE} s" in said, said
    assert "run it yourself" in said
    assert _left_running(str(tmp_path / "plugin.sh")) == []


def test_report_with_a_hanging_exec_plugin_ends_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vk, "EXEC_TIMEOUT", DEADLINE)
    kubeconfig = _kubeconfig(tmp_path, HANGING_PLUGINS["child-keeps-stdout-open"], "report")
    start = time.monotonic()
    result = CliRunner().invoke(
        main, ["report", "--kubeconfig", str(kubeconfig)], env={"KUBECONFIG": ""}
    )
    assert time.monotonic() - start < BOUND + vk.CONNECT_TIMEOUT
    assert_refused(result, ("127.0.0.1:9",))


# ------------------------------------------------------------------ Prometheus

BODY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'

#: name -> what a Prometheus that never finishes sends.
SLOW_PROMETHEUS = {
    "body-one-byte-at-a-time": Script(http_answer(BODY), drip=0.3),
    "headers-one-byte-at-a-time": Script(http_answer(BODY)[:60], drip=0.05, hold=30),
    "accepts-and-says-nothing": Script(b"", hold=30),
    "headers-then-silence": Script(http_answer(BODY)[:-5], hold=30),
    "chunked-never-ending": Script(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * 400, drip=0.01
    ),
}


@pytest.mark.parametrize("name", list(SLOW_PROMETHEUS))
def test_a_prometheus_that_never_finishes_is_given_up_at_the_deadline(name: str) -> None:
    with serve(SLOW_PROMETHEUS[name]) as url:
        start = time.monotonic()
        with pytest.raises(fa.ActivityError, match=f"within {DEADLINE} s"):
            fa.fetch(url, "1h", timeout_s=DEADLINE)
        assert time.monotonic() - start < DEADLINE + 1


# ------------------------------------------------------------------ outputs


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return str(path)


OUTPUT_OPTIONS = [
    ("report", "--json"),
    ("report", "--markdown"),
    ("report", "--html"),
    ("report", "--metrics"),
    ("validate", "--json"),
    ("validate", "--junit"),
    ("validate", "--markdown"),
    ("mig advise", "--json"),
]


@pytest.mark.parametrize(("command", "option"), OUTPUT_OPTIONS)
def test_an_output_that_is_a_named_pipe_is_refused_before_anything_runs(
    fifo: str, command: str, option: str
) -> None:
    start = time.monotonic()
    result = CliRunner().invoke(main, [*command.split(), option, fifo], env={"KUBECONFIG": ""})
    assert time.monotonic() - start < BOUND
    assert_refused(result, (option,))
    assert "named pipe" in result.output


def test_a_named_pipe_swapped_in_after_the_check_is_not_waited_for(fifo: str) -> None:
    start = time.monotonic()
    with pytest.raises(_output.OutputError, match=r"--json .*cannot open it"):
        _output.write_json({"a": 1}, fifo)
    assert time.monotonic() - start < BOUND


WRITERS: dict[str, Callable[[str], None]] = {
    "json": lambda target: _output.write_json({"a": 1}, target),
    "text": lambda target: _output.write_output("text\n", target, "--markdown"),
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_named_pipe_with_a_reader_is_still_refused(fifo: str, writer: str) -> None:
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(_output.OutputError, match="named pipe"):
            WRITERS[writer](fifo)
    finally:
        os.close(reader)


# ------------------------------------------------------------------ the Kubernetes API

VERSION = b'{"major": "1", "minor": "36", "gitVersion": "v1.36.0"}'

#: name -> what an API server whose answers never finish sends.
SLOW_API_SERVERS = {
    "body-one-byte-at-a-time": Script(http_answer(VERSION * 20), drip=0.1),
    "chunked-never-ending": Script(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"1\r\n \r\n" * 400,
        drip=0.01,
    ),
    "body-shorter-than-said-then-slow": Script(http_answer(VERSION)[:-5], hold=30, drip=0.001),
}


@pytest.mark.parametrize("name", list(SLOW_API_SERVERS))
def test_an_api_server_whose_answer_never_finishes_is_given_up_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    from tests.integration.test_hostile_input_servers import write_kubeconfig

    monkeypatch.setattr(vk, "REQUEST_DEADLINE", DEADLINE)
    with serve(SLOW_API_SERVERS[name]) as url:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
        start = time.monotonic()
        result = CliRunner().invoke(
            main, ["report", "--kubeconfig", str(kubeconfig)], env={"KUBECONFIG": ""}
        )
        took = time.monotonic() - start
    assert took < BOUND, took
    assert_refused(result, ("127.0.0.1",))
    assert f"within {DEADLINE} s" in " ".join(result.output.split())
