"""Hostile input to ``gpufleet report --serve HOST:PORT --refresh N`` and the page it serves
at ``/``: cluster text holding markup, ``</style>``, ``</script>``, terminal escape
sequences, lone surrogates, a megabyte; 100,000 devices; an API server that repeats the
bearer token in its errors; hostile requests (a long path, ``/../``, a query holding a
script, methods other than GET, half a request that never ends); and ``--serve`` and
``--refresh`` values that cannot be served.

The page stays text under its Content-Security-Policy (no element, style or script from the
cluster, valid UTF-8, no escape sequence), the server keeps answering other clients, a
failure is one line with no traceback and no credential, and an option that cannot be
served exits 2 naming it before anything is listed."""

from __future__ import annotations

import html
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from click.testing import CliRunner, Result

from gpufleet.cli import main
from gpufleet.commands import report_serve as rs
from gpufleet.render import fleet_report as rp
from tests.unit.cli.test_report_serve import (
    cluster,  # noqa: F401 - a fixture
    fake_listing,
    get,
    serve,  # noqa: F401 - a fixture
)
from tests.unit.hostile.api_server import answers
from tests.unit.hostile.api_server import serve as api_server
from tests.unit.report.test_fleet import device, rslice

pytestmark = pytest.mark.unit

#: Text a ResourceSlice or a Node may carry: each form of breaking out of the page.
HOSTILE = (
    "</style></script><script>alert(1)</script><style>*{display:none}</style>"
    '"><img src=x onerror=alert(1)><!--'
)
ESCAPES = "\x1b]52;c;aWQ=\x07\x1b[2J\x9b31m"
SURROGATE = "\ud800"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LWJlYXJlci10b2tlbg"


def empty_page(reload_seconds: int) -> str:
    """The page of a cluster without slices, claims or pods."""
    return rp.render_html({**fr.build_report([], [], [], []), "meta": {}}, reload_seconds)


def assert_text_only(body: str) -> None:
    """The page holds the cluster's text only as text: one style sheet (the page's own), no
    script, no element from the cluster, no escape sequence."""
    low = body.lower()
    assert low.count("<style>") == 1 and low.count("</style>") == 1
    assert "<script" not in low and "<img" not in low and "<!--" not in low
    assert "\x1b" not in body and "\x9b" not in body


@pytest.mark.parametrize(
    "text",
    [HOSTILE, ESCAPES, f"H100{SURROGATE}", "m" * 1_000_000],
    ids=["markup", "terminal-escapes", "lone-surrogate", "a-megabyte"],
)
def test_hostile_cluster_text_is_served_as_text(
    cluster: SimpleNamespace,  # noqa: F811 - the fixture
    serve: Callable,  # noqa: F811
    text: str,
) -> None:
    cluster.answer = fake_listing(
        [rslice(f"node{text[:40]}", [device("gpu-0", text, "80Gi", text)])]
    )
    url = serve(lambda: (200, "up 1\n"), page=lambda: rs.page(rs.Source(), 30))
    status, headers, body = get(f"{url}/")  # decoded as UTF-8, strictly
    assert status == 200 and headers["Content-Security-Policy"] == rp.CONTENT_SECURITY_POLICY
    assert_text_only(body)
    if text == HOSTILE:
        assert html.escape(HOSTILE, quote=True) in body
    if text == ESCAPES:
        assert "\\x1b]52;c;aWQ=\\x07\\x1b[2J\\x9b31m" in body
    if text.endswith(SURROGATE):
        assert "H100\\ud800" in body
    assert get(f"{url}/metrics")[0] == 200  # and the server answers on


def test_a_page_of_100000_devices_is_served(
    cluster: SimpleNamespace,  # noqa: F811
    serve: Callable,  # noqa: F811
) -> None:
    slices = [
        rslice(
            f"node-{i}",
            [device(f"gpu-{j}", f"H100 {HOSTILE}", "80Gi", "1g.10gb") for j in range(100)],
        )
        for i in range(1000)
    ]
    cluster.answer = fake_listing(slices)
    url = serve(lambda: (200, "up 1\n"), page=lambda: rs.page(rs.Source(), 30))
    status, _, body = get(f"{url}/")
    assert status == 200 and "100000 free of 100000" in body
    assert_text_only(body)
    assert len(body) < 1_000_000  # rows per model and profile, not per device


def test_an_error_of_the_renderer_is_one_line_and_the_server_answers_on(
    serve: Callable,  # noqa: F811
    capfd: pytest.CaptureFixture[str],
) -> None:
    def broken() -> tuple[int, str]:
        raise KeyError("cluster")

    url = serve(lambda: (200, "up 1\n"), page=broken)
    status, headers, body = get(f"{url}/?x=%1b")
    assert (status, headers["Content-Type"]) == (500, rs.TEXT_TYPE)
    assert body == "cannot build the answer: KeyError: 'cluster'\n"
    assert get(f"{url}/metrics")[:3:2] == (200, "up 1\n")
    err = capfd.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err


def raw(url: str, request: bytes) -> bytes:
    """The server's whole answer to ``request`` sent as it is."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        (b"GET /../../../etc/passwd HTTP/1.0", b"404"),
        (b"GET /..%2f..%2fetc%2fpasswd HTTP/1.0", b"404"),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.0", b"414"),
        (b"GET /?x=<script>alert(1)</script> HTTP/1.0", b"200"),
        (b"GET /\x1b]0;owned\x07 HTTP/1.0", b"404"),
        (b"HEAD / HTTP/1.0", b"501"),
        (b"POST / HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc", b"501"),
        (b"PUT /metrics HTTP/1.0", b"501"),
        (b"DELETE / HTTP/1.0", b"501"),
        (b"\x00\xff garbage", b"400"),
    ],
    ids=["traversal", "encoded-traversal", "long-path", "script-in-query", "escape-in-path",
         "head", "post", "put", "delete", "garbage"],
)  # fmt: skip
def test_a_hostile_request_gets_its_status_and_the_server_answers_on(
    serve: Callable,  # noqa: F811
    request_line: bytes,
    status: bytes,
) -> None:
    page = empty_page(30)
    url = serve(lambda: (200, "up 1\n"), page=lambda: (200, page))
    answer = raw(url, request_line + b"\r\n\r\n")
    # a request line that is no HTTP gets the error page alone (HTTP/0.9 has no status line)
    head = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/") else answer
    assert head == status or b"<p>Error code: " + status in head, answer[:200]
    assert b"root:" not in answer and b"<script>alert" not in answer
    assert get(f"{url}/")[0] == 200


def test_half_a_request_is_dropped_and_never_holds_other_clients(
    monkeypatch: pytest.MonkeyPatch,
    serve: Callable,  # noqa: F811
) -> None:
    monkeypatch.setattr(rs, "CLIENT_TIMEOUT", 0.5)
    url = serve(lambda: (200, "up 1\n"))
    host, port = url.removeprefix("http://").split(":")
    slow = socket.create_connection((host, int(port)), timeout=10)
    slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    start = time.monotonic()
    assert get(f"{url}/metrics")[:3:2] == (200, "up 1\n")
    assert time.monotonic() - start < 2
    assert slow.recv(1024) == b""  # closed by the server after CLIENT_TIMEOUT
    assert time.monotonic() - start < 5
    slow.close()


def kubeconfig(path: Path, server: str) -> str:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u, user: {{token: {TOKEN}}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return str(path)


@pytest.mark.parametrize(
    "over",
    [
        {"version": (401, json.dumps({"message": f"token {TOKEN} is not valid"}).encode())},
        {"nodes": (403, f"forbidden: Authorization: Bearer {TOKEN}".encode())},
        {"pods": (500, json.dumps({"message": f"Bearer {TOKEN}\x1b[2J"}).encode())},
    ],
    ids=["version-401", "nodes-403-plain", "pods-500-escape"],
)
def test_a_server_repeating_the_token_gets_a_503_without_it(
    tmp_path: Path,
    serve: Callable,  # noqa: F811
    over: dict[str, tuple[int, bytes]],
) -> None:
    with api_server(answers(**over)) as (api, _):
        source = rs.Source(kubeconfig(tmp_path / "kc", api))
        url = serve(lambda: rs.metrics(source), page=lambda: rs.page(source))
        status, headers, body = get(f"{url}/")
        metrics = get(f"{url}/metrics")[2]
    assert (status, headers["Content-Type"]) == (503, rs.TEXT_TYPE)
    assert body.startswith("cannot read the cluster: ") and body.count("\n") == 1, body
    for text in (body, metrics):
        assert TOKEN not in text and "c2VjcmV0" not in text and "\x1b" not in text, text
        assert "***" in text


def report(*args: str) -> Result:
    return CliRunner().invoke(
        main, ["report", *args], env={"KUBECONFIG": "/nonexistent/kubeconfig", "COLUMNS": "300"}
    )


@pytest.mark.parametrize(
    "value",
    ["", ":", ":0", "[::1]:x", "host:99999", "host:-1", "x:\u00b2", "x:\u0663\u0663",
     "a\x00b:9477", "\x1b[31m:9477", "\u00fc" * 70 + ":9477", "host name:9477", "9477"],
    ids=["empty", "colon", "port-0", "port-x", "port-99999", "port-negative",
         "superscript-port", "arabic-indic-port", "nul-host", "escape-host", "idna-host",
         "space-host", "no-colon"],
)  # fmt: skip
def test_a_serve_address_that_cannot_be_served_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setattr(rs, "make_server", lambda *_a, **_k: pytest.fail("it served"))
    result = report("--serve", value)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "\x1b[31m" not in result.output
    assert "'--serve'" in result.output and "for example 0.0.0.0:9477" in result.output


@pytest.mark.parametrize("value", ["0", "-1", "nan", "1e9", "", "inf", "3.5"])
def test_a_refresh_that_is_no_positive_whole_number_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setattr(rs, "make_server", lambda *_a, **_k: pytest.fail("it served"))
    result = report("--serve", "127.0.0.1:9477", "--refresh", value)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "'--refresh'" in result.output


def test_a_huge_refresh_is_kept_as_a_whole_number_in_the_page() -> None:
    page = empty_page(10**30)
    assert f'<meta http-equiv="refresh" content="{10**30}">' in page
