"""Commands and modules against an API server that accepts TCP connections and never
answers: a real socket server on 127.0.0.1 (an ephemeral port) whose thread accept()s and
holds every connection without reading or writing a byte, and a kubeconfig that points
at it (plain HTTP, and HTTPS whose TLS handshake never comes).

Each must end at the connect or read timeout of its Kubernetes API call (a read that timed
out not retried), exit 2 (a module: fail) and name the server's URL, the timeout and a fix.
The cases give the client short timeouts (``REQUEST_TIMEOUT`` of ``kube/client.py``), so
each waits a few seconds; ``gpufleet upgrade --plan``, whose module runs in a real
ansible-playbook, keeps the defaults and shows them holding end to end within 30 s.
``gpufleet validate`` and ``gpufleet gates audit`` run their module in this process where
the playbook would run it (no playbook, no host touched).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.modules import (
    dra_gate_audit,
    dra_validate,
    gpu_node_labels,
    kubeadm_config_gates,
    upgrade_plan,
)
from click.testing import CliRunner, Result

from gpufleet import runner
from gpufleet.cli import main
from gpufleet.commands import validate as validate_cmd
from tests.harness.ansible_module import run_module

pytestmark = pytest.mark.integration

#: The bound of the input contract: a command against a silent server ends within it.
BOUND_S = 30
#: (connect, read) seconds the cases give the client in place of its defaults.
SHORT_TIMEOUT = (1, 4)
#: Seconds a case may take past the timeout that ended it: no more than the read timeout,
#: so a timed-out read that was retried takes too long.
MARGIN_S = 4


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> tuple[float, float]:
    """The client's (connect, read) timeouts for this test: ``SHORT_TIMEOUT``."""
    monkeypatch.setattr(vk, "REQUEST_TIMEOUT", SHORT_TIMEOUT)
    return SHORT_TIMEOUT


@pytest.fixture
def silent_server() -> Iterator[tuple[str, int]]:
    """(host, port) of a server that accepts connections and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # accepted; never read from, never written to

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield "127.0.0.1", sock.getsockname()[1]
    stop.set()
    thread.join(timeout=2)
    for conn in held:
        conn.close()
    sock.close()


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: silent\n"
        f"clusters: [{{name: silent, cluster: {{server: '{server}', "
        "insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: silent, context: {cluster: silent, user: u}}]\n"
    )
    return path


@pytest.fixture(params=["http", "https"])
def server(request: pytest.FixtureRequest, silent_server: tuple[str, int]) -> str:
    host, port = silent_server
    return f"{request.param}://{host}:{port}"


@pytest.fixture
def kubeconfig(tmp_path: Path, server: str) -> str:
    return str(write_kubeconfig(tmp_path / "kubeconfig", server))


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.monotonic()
    out = fn(*args, **kwargs)
    return out, time.monotonic() - start


def timed_out(server: str, timeout: tuple[float, float]) -> tuple[float, str]:
    """The timeout that ends a request to the silent ``server`` and what the error says of
    it: the connect timeout over HTTPS (the TLS handshake never comes), else the read
    timeout (the answer never comes)."""
    if server.startswith("https"):
        return timeout[0], f"sent no answer within {timeout[0]:g} s (not even the TLS handshake)"
    return timeout[1], f"sent no answer within {timeout[1]:g} s"


def assert_ended_at_timeout(
    said: str, server: str, elapsed: float, timeout: tuple[float, float], bound: float = 0
) -> None:
    """``said`` names ``server``, the timeout that ended the request and a fix, and
    ``elapsed`` is no less than that timeout and less than ``bound`` (default: that
    timeout + ``MARGIN_S``)."""
    said = " ".join(said.split())
    seconds, phrase = timed_out(server, timeout)
    bound = bound or seconds + MARGIN_S
    assert seconds <= elapsed < bound, f"took {elapsed:.2f} s, not [{seconds:g}, {bound:g}): {said}"
    assert server in said, said
    assert phrase in said, said
    assert "fix:" in said, said


def assert_names_refusing_server(result: Result, server: str, elapsed: float) -> None:
    """A command against a ``server`` that refuses the connection (nothing listens): exit 2
    within ``BOUND_S``, no traceback, the server and a fix named."""
    out = " ".join(result.output.split())
    assert result.exception is None or isinstance(result.exception, SystemExit), out
    assert "Traceback" not in out, out
    assert elapsed < BOUND_S, f"took {elapsed:.1f} s: {out}"
    assert result.exit_code == 2, out
    assert server in out, out
    assert "fix:" in out, out


def assert_names_server(
    result: Result, server: str, elapsed: float, timeout: tuple[float, float], bound: float = 0
) -> None:
    out = " ".join(result.output.split())
    assert result.exception is None or isinstance(result.exception, SystemExit), out
    assert "Traceback" not in out, out
    assert result.exit_code == 2, out
    assert_ended_at_timeout(out, server, elapsed, timeout, bound)


def module_in_place_of_playbook(module: Any, action: str, task: str, args_of: Any) -> Any:
    """A stand-in for ``runner.run_playbook`` that runs ``module`` with the parameters the
    playbook would give it and feeds its result to the command as the playbook's event."""

    def run(playbook: str, inventory: Any, **kw: Any) -> runner.RunResult:
        res = run_module(module, args_of(kw.get("extravars") or {}))
        event = {
            "event": "runner_on_failed" if res.get("failed") else "runner_on_ok",
            "event_data": {
                "host": "localhost",
                "task": task,
                "resolved_action": action,
                "res": res,
            },
        }
        progress = runner.RunProgress()
        progress.feed(event)
        if kw.get("on_event"):
            kw["on_event"](event)
        return runner.RunResult(1 if res.get("failed") else 0, progress, Path("."), 2)

    return run


# --------------------------------------------------------------------------- the CLI


def test_claims_gc_ends_naming_the_server(
    kubeconfig: str, server: str, short_timeout: tuple[float, float]
) -> None:
    result, elapsed = timed(
        CliRunner().invoke,
        main,
        ["claims", "gc", "--kubeconfig", kubeconfig],
        env={"COLUMNS": "2000"},
    )
    assert_names_server(result, server, elapsed, short_timeout)


def test_claims_explain_ends_naming_the_server(
    kubeconfig: str, server: str, short_timeout: tuple[float, float]
) -> None:
    argv = ["claims", "explain", "team-a/claim-1", "--kubeconfig", kubeconfig]
    result, elapsed = timed(CliRunner().invoke, main, argv, env={"COLUMNS": "2000"})
    assert_names_server(result, server, elapsed, short_timeout)


def test_validate_ends_naming_the_server(
    kubeconfig: str,
    server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    short_timeout: tuple[float, float],
) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[kube_control_plane]\ncp-1\n[kube_node]\ngpu-1\n")
    fake = module_in_place_of_playbook(
        dra_validate,
        "gpufleet.cluster.dra_validate",
        validate_cmd.MODULE_TASK,
        lambda ev: {"kubeconfig": ev["validate_kubeconfig"], "report_file": None},
    )
    monkeypatch.setattr(runner, "run_playbook", fake)
    argv = ["validate", "-i", str(inventory), "--kubeconfig", kubeconfig]
    result, elapsed = timed(CliRunner().invoke, main, argv, env={"COLUMNS": "2000"})
    assert_names_server(result, server, elapsed, short_timeout)
    assert "validation could not run" in result.output


def test_gates_audit_ends_naming_the_server(
    kubeconfig: str,
    server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    short_timeout: tuple[float, float],
) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[kube_control_plane]\ncp-1\n")
    fake = module_in_place_of_playbook(
        dra_gate_audit,
        "gpufleet.cluster.dra_gate_audit",
        "DRA gate audit | Compare processes, files, ConfigMaps, hosts and the version model",
        lambda ev: {"facts": [], "hosts": [], "kubeconfig": ev["dra_gate_audit_kubeconfig"]},
    )
    monkeypatch.setattr(runner, "run_playbook", fake)
    argv = ["gates", "audit", "-i", str(inventory), "-e", f"dra_gate_audit_kubeconfig={kubeconfig}"]
    result, elapsed = timed(CliRunner().invoke, main, argv, env={"COLUMNS": "2000"})
    assert_names_server(result, server, elapsed, short_timeout)
    assert "the audit did not produce a result" in result.output


@pytest.mark.slow
def test_upgrade_plan_ends_naming_the_server_at_the_default_timeouts(
    kubeconfig: str, server: str, tmp_path: Path
) -> None:
    """The client's own timeouts, end to end: the planner runs in a real ansible-playbook
    (a process of its own, which no test setting reaches) and waits out the default
    connect (HTTPS) or read (HTTP) timeout, within the contract's bound."""
    assert vk.REQUEST_TIMEOUT == (vk.CONNECT_TIMEOUT, vk.READ_TIMEOUT) == (5, 15)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[kube_control_plane]\ncp-1\n[kube_node]\ngpu-1\n")
    argv = ["upgrade", "-i", str(inventory), "--to", "1.37.2", "--plan", "--kubeconfig", kubeconfig]
    result, elapsed = timed(CliRunner().invoke, main, argv, env={"COLUMNS": "2000"})
    assert_names_server(result, server, elapsed, vk.REQUEST_TIMEOUT, bound=BOUND_S)
    assert "--snapshot FILE" in result.output


# ----------------------------------------------------------------- modules and module_utils


@pytest.mark.parametrize(
    ("module", "args"),
    [
        (kubeadm_config_gates, {"kubelet": {"feature_gates": {"DRAAdminAccess": True}}}),
        (gpu_node_labels, {"nodes": ["gpu-1"]}),
        (dra_gate_audit, {"facts": [], "version": "1.35.0"}),
        (
            upgrade_plan,
            {"target": "1.37.2", "hosts": [{"name": "cp-1", "role": "control_plane"}]},
        ),
    ],
    ids=["kubeadm_config_gates", "gpu_node_labels", "dra_gate_audit-configmaps", "upgrade_plan"],
)
def test_a_module_fails_naming_the_server(
    kubeconfig: str,
    server: str,
    module: Any,
    args: dict[str, Any],
    short_timeout: tuple[float, float],
) -> None:
    res, elapsed = timed(run_module, module, {**args, "kubeconfig": kubeconfig})
    assert res.get("failed"), res
    assert_ended_at_timeout(str(res["msg"]), server, elapsed, short_timeout)


def test_one_request_ends_within_its_timeouts(
    kubeconfig: str, server: str, short_timeout: tuple[float, float]
) -> None:
    kube = vk.Kube(kubeconfig)
    assert kube.timeout == short_timeout
    start = time.monotonic()
    with pytest.raises(vk.KubeError) as err:
        kube.get("/version")
    elapsed = time.monotonic() - start
    assert err.value.status is None, err.value
    assert_ended_at_timeout(err.value.message, server, elapsed, short_timeout)


def test_an_exec_plugin_that_never_ends_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The client waited for ``users[].user.exec`` (here a real ``sleep``) without a limit:
    every command hung."""
    import time

    monkeypatch.setattr(vk, "EXEC_TIMEOUT", 0.5)
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://192.0.2.1:6443'}}]\n"
        "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
        "command: sleep, args: ['60'], interactiveMode: Never}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    start = time.monotonic()
    vk.Kube(str(path))
    assert time.monotonic() - start < 10
    assert "credential plugin 'sleep' did not finish" in caplog.text and "fix:" in caplog.text
