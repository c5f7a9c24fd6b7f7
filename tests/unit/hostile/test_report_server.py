"""``gpufleet report`` against a hostile API server (a real HTTP server on 127.0.0.1,
``api_server``) and with kubeconfigs whose server is not a URL or holds a credential:
exit 2 with one line naming the server, within bounded time and requests; objects of
odd shapes skipped and counted; nothing written on failure; no credential printed."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gpufleet.cli import main
from tests.integration.test_hostile_input_servers import (
    assert_names_server,
    short_timeout,  # noqa: F401 - a fixture
    silent_server,  # noqa: F401 - a fixture
    timed,
    write_kubeconfig,
)
from tests.unit.hostile.api_server import answers, listing, serve

pytestmark = pytest.mark.unit
SECRET = "s3cr3t-in-the-url"


def _report(kubeconfig: Path, *extra: str) -> Result:
    argv = ["report", "--kubeconfig", str(kubeconfig), *extra]
    return CliRunner().invoke(main, argv, env={"COLUMNS": "2000", "KUBECONFIG": ""})


def _one_line_refusal(result: Result, server: str) -> None:
    out = " ".join(result.output.split())
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )
    assert "Traceback" not in result.output, result.output
    assert result.exit_code == 2, out
    assert server in out and "fix:" in out, out


@pytest.mark.parametrize(
    "over",
    [
        {"version": (200, b"<html>a proxy's login page</html>")},
        {"version": (200, b"[1, 2]")},
        {"version": (200, b"\xff\xfe\x00")},
        {"version": (200, b"[" * 100_000 + b"]" * 100_000)},
        {"nodes": (200, b"not json")},
        {"nodes": (200, b"[]")},
        {"pods": listing([], **{"continue": "again"})},
        {"pods": listing([], **{"continue": 5})},
    ],
    ids=[
        "version-html",
        "version-a-list",
        "version-binary",
        "version-deep",
        "nodes-not-json",
        "nodes-a-list",
        "continue-repeats",
        "continue-a-number",
    ],
)
def test_a_server_answering_garbage_ends_with_exit_2_naming_it(
    tmp_path: Path, over: dict[str, Any]
) -> None:
    out = tmp_path / "r.json"
    with serve(answers(**over)) as (url, seen):
        result = _report(write_kubeconfig(tmp_path / "kc", url), "--json", str(out))
    _one_line_refusal(result, url)
    assert len(seen) <= 8, seen  # a repeating continue token is not followed
    assert not out.exists()


def test_objects_of_odd_shapes_from_the_server_are_skipped_and_counted(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    over = {
        "nodes": (200, b'{"metadata": "x", "items": [1, null, "x", {"metadata": "x"}]}'),
        "resourceslices": listing([{"spec": {"devices": "x"}}, {"spec": "x"}]),
        "pods": listing([{"metadata": {"name": "p"}, "spec": "x", "status": 3}]),
    }
    with serve(answers(**over)) as (url, _):
        result = _report(write_kubeconfig(tmp_path / "kc", url), "--json", str(out))
    assert result.exit_code == 0, result.output
    assert "objects not read" in result.output
    doc = json.loads(out.read_text())
    assert doc["cluster"]["objects_skipped"] == {"nodes": 4, "resourceslices": 2, "pods": 1}


def test_report_ends_when_the_server_never_answers(
    tmp_path: Path,
    silent_server: tuple[str, int],  # noqa: F811 - the fixture
    short_timeout: tuple[float, float],  # noqa: F811 - the fixture
) -> None:
    server = "http://{}:{}".format(*silent_server)
    out = tmp_path / "r.json"
    result, elapsed = timed(_report, write_kubeconfig(tmp_path / "kc", server), "--json", str(out))
    assert_names_server(result, server, elapsed, short_timeout)
    assert not out.exists()


@pytest.mark.parametrize(
    "server",
    ["127.0.0.1:{port}", "", "file:///etc/passwd", "ht!tp://[::1", "https://h:99999", "ftp://h"],
)
def test_a_server_that_is_not_an_http_url_is_refused_before_any_request(
    tmp_path: Path, server: str
) -> None:
    with serve(answers()) as (url, seen):
        text = server.format(port=url.rpartition(":")[2])
        result = _report(write_kubeconfig(tmp_path / "kc", text))
    out = " ".join(result.output.split())
    assert result.exit_code == 2, out
    assert "Traceback" not in result.output and "Warning" not in out, out
    assert "--kubeconfig" in out and "cluster.server" in out and "fix:" in out, out
    assert seen == []


def test_a_credential_in_the_server_url_is_never_printed(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kc = write_kubeconfig(tmp_path / "kc", f"http://admin:{SECRET}@127.0.0.1:{port}/?t={SECRET}")
    result = _report(kc)
    assert result.exit_code == 2, result.output
    assert SECRET not in result.output
    assert f"http://***@127.0.0.1:{port}" in " ".join(result.output.split())


def test_a_credential_in_the_server_url_is_not_in_the_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    with serve(answers()) as (url, _):
        kc = write_kubeconfig(tmp_path / "kc", url.replace("http://", f"http://u:{SECRET}@"))
        result = _report(kc, "--json", str(out))
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output and SECRET not in out.read_text()
    assert json.loads(out.read_text())["meta"]["server"].startswith("http://***@127.0.0.1:")


def test_an_output_on_a_full_device_ends_with_exit_2_and_one_line(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():  # pragma: no cover - Linux has it
        pytest.skip("/dev/full: this system has no such device")
    with serve(answers()) as (url, _):
        result = _report(write_kubeconfig(tmp_path / "kc", url), "--markdown", "/dev/full")
    out = " ".join(result.output.split())
    assert result.exit_code == 2, out
    assert "Traceback" not in result.output
    assert "/dev/full" in out or "No space" in out, out


def _advise(kubeconfig: Path, *extra: str) -> Result:
    argv = ["mig", "advise", "--kubeconfig", str(kubeconfig), *extra]
    return CliRunner().invoke(main, argv, env={"COLUMNS": "2000", "KUBECONFIG": ""})


def test_advise_on_objects_of_odd_shapes_proposes_nothing_without_a_traceback(
    tmp_path: Path,
) -> None:
    out = tmp_path / "p.json"
    over = {
        "resourceslices": listing(
            [{"spec": {"devices": [{"name": "gpu-0-mig-x", "attributes": 3}]}}]
        ),
        "resourceclaims": listing([{"spec": {"devices": {"requests": "x"}}}]),
    }
    with serve(answers(**over)) as (url, _):
        result = _advise(write_kubeconfig(tmp_path / "kc", url), "--json", str(out))
    assert result.exit_code == 0, result.output
    assert "nothing to propose" in result.output
    assert json.loads(out.read_text())["changes"] == []


def test_advise_against_a_server_answering_garbage_ends_with_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    with serve(answers(nodes=(200, b"not json"))) as (url, _):
        result = _advise(write_kubeconfig(tmp_path / "kc", url), "--json", str(out))
    _one_line_refusal(result, url)
    assert not out.exists()
