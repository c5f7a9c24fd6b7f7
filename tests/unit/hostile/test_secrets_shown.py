"""Credentials never shown: an exec credential plugin's own standard error (which may
hold a token) is not repeated when it fails, and the password of a ``--prometheus`` URL
(``http://user:password@host``) is sent as basic authentication, never looked up as a
host name and never printed, whatever goes wrong."""

from __future__ import annotations

import base64
import logging
import stat
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import activity as fa
from click.testing import CliRunner, Result

from gpufleet.cli import main
from tests.integration.test_hostile_input_servers import write_kubeconfig
from tests.unit.hostile import api_server
from tests.unit.hostile.inputs import assert_refused
from tests.unit.hostile.raw_server import Script, http_answer, serve

pytestmark = pytest.mark.unit

TOKEN = "eyJhbGciOiJSUzI1NiJ9.s3cr3t-token"
PASSWORD = "pa55-w0rd-s3cr3t"

# ------------------------------------------------------------------ exec plugin stderr

#: name -> shell script of a plugin that fails after printing a token on stderr.
FAILING_PLUGINS = {
    "exit-1": f"echo 'token: {TOKEN}' >&2\nexit 1\n",
    "exit-2-after-partial-stdout": f"echo '{{\"apiVersion\"'\necho '{TOKEN}' >&2\nexit 2\n",
    "exit-127-multiline-stderr": (
        f"printf 'line one\\nAuthorization: Bearer {TOKEN}\\n' >&2\nexit 127\n"
    ),
    "killed-by-signal": f"echo '{TOKEN}' >&2\nkill -9 $$\n",
}


def _kubeconfig(tmp_path: Path, script: str, server: str = "https://127.0.0.1:9") -> Path:
    plugin = tmp_path / "get-token"
    plugin.write_text(f"#!/bin/sh\n{script}")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
        f"command: {plugin}, interactiveMode: Never}}}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return kubeconfig


@pytest.mark.parametrize("name", list(FAILING_PLUGINS))
def test_a_failing_exec_plugin_is_named_without_its_stderr(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    kubeconfig = _kubeconfig(tmp_path, FAILING_PLUGINS[name])
    with caplog.at_level(logging.ERROR):
        vk.api_client(str(kubeconfig))
    said = " ".join(caplog.text.split())
    assert "s3cr3t" not in said, said
    assert "credential plugin" in said and "failed (exit status" in said, said
    assert "run it yourself" in said and "get-token" in said


def test_report_with_a_failing_exec_plugin_prints_no_token(tmp_path: Path) -> None:
    with api_server.serve(api_server.answers()) as (url, _):
        kubeconfig = _kubeconfig(tmp_path, FAILING_PLUGINS["exit-1"], url)
        result = CliRunner().invoke(
            main, ["report", "--kubeconfig", str(kubeconfig)], env={"KUBECONFIG": ""}
        )
    assert "s3cr3t" not in result.output
    assert "Traceback" not in result.output


# ------------------------------------------------------------------ --prometheus userinfo

VECTOR = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


def _report(tmp_path: Path, server: str, prometheus: str) -> Result:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server)
    argv = ["report", "--kubeconfig", str(kubeconfig), "--prometheus", prometheus]
    return CliRunner().invoke(main, argv, env={"COLUMNS": "2000", "KUBECONFIG": ""})


def _with_password(url: str, password: str = PASSWORD) -> str:
    return url.replace("http://", f"http://ops:{password}@")


def test_userinfo_is_sent_as_basic_authentication(tmp_path: Path) -> None:
    script = Script(http_answer(VECTOR))
    with api_server.serve(api_server.answers()) as (url, _), serve(script) as prometheus:
        result = _report(tmp_path, url, _with_password(prometheus))
    assert result.exit_code == 0, result.output
    expected = base64.b64encode(f"ops:{PASSWORD}".encode()).decode()
    assert f"Authorization: Basic {expected}".encode() in script.requests[0]
    assert PASSWORD not in result.output


#: name -> what the Prometheus behind a URL with a password answers.
FAILURES = {
    "unauthorized": Script(http_answer(b"Unauthorized", "text/plain", 401)),
    "not-json": Script(http_answer(b"<html>", "text/html")),
    "closes-at-once": Script(b""),
    "query-error": Script(http_answer(b'{"status":"error","error":"bad"}')),
}


@pytest.mark.parametrize("name", list(FAILURES))
def test_the_password_of_a_prometheus_url_is_never_printed(tmp_path: Path, name: str) -> None:
    with api_server.serve(api_server.answers()) as (url, _), serve(FAILURES[name]) as prometheus:
        result = _report(tmp_path, url, _with_password(prometheus))
    assert_refused(result, ("--prometheus",))
    assert PASSWORD not in result.output
    assert "ops:***@127.0.0.1" in result.output


@pytest.mark.parametrize(
    "password", ["p@ss:w/rd", "p%40ss", "with space", "colon:in:it"], ids=lambda p: p[:8]
)
def test_a_password_with_url_characters_is_not_read_as_a_host(
    tmp_path: Path, password: str
) -> None:
    quoted = password.replace("%", "%25").replace("@", "%40").replace("/", "%2F")
    quoted = quoted.replace(" ", "%20").replace(":", "%3A")
    with serve(Script(b"")) as prometheus:
        url = _with_password(prometheus, quoted)
        with pytest.raises(fa.ActivityError) as info:
            fa.fetch(url, "1h", timeout_s=2)
    said = str(info.value)
    assert "127.0.0.1" in said and "ops:***@" in said, said
    assert quoted not in said and password not in said


def test_a_closed_port_with_a_password_in_the_url_prints_no_password(tmp_path: Path) -> None:
    with api_server.serve(api_server.answers()) as (url, _):
        result = _report(tmp_path, url, f"http://ops:{PASSWORD}@127.0.0.1:9")
    assert_refused(result, ("--prometheus",))
    assert PASSWORD not in result.output and "cannot reach Prometheus" in result.output


@pytest.mark.parametrize(
    "url",
    [f"ftp://ops:{PASSWORD}@h/", f"http://ops:{PASSWORD}@h:port/", f"http://ops:{PASSWORD}@/"],
    ids=["ftp", "bad-port", "no-host"],
)
def test_a_refused_prometheus_url_is_shown_without_its_password(url: str) -> None:
    result = CliRunner().invoke(main, ["report", "--prometheus", url], env={"KUBECONFIG": ""})
    assert_refused(result, ("--prometheus",))
    assert PASSWORD not in result.output
