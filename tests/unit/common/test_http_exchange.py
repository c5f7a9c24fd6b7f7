"""One HTTP exchange under one deadline (``plugins/module_utils/common/http_exchange.py``), against
a real local server that sends what each test gives it."""

from __future__ import annotations

import base64
import socket
import time

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import http_exchange as web

from tests.unit.hostile.raw_server import Script, http_answer, serve

pytestmark = pytest.mark.unit


def test_an_answer_is_read_whole_with_its_status_and_content_type() -> None:
    script = Script(http_answer(b'{"a": 1}', "application/json; charset=utf-8", 404))
    with serve(script) as url:
        answer = web.exchange(url + "/prefix/", "/api?x=1", deadline_s=5)
    assert (answer.status, answer.content_type, answer.body) == (
        404,
        "application/json",
        b'{"a": 1}',
    )
    assert script.requests[0].startswith(b"GET /prefix/api?x=1 HTTP/1.1\r\n")


def test_a_chunked_answer_is_decoded() -> None:
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    with serve(Script(raw)) as url:
        assert web.exchange(url, "/", deadline_s=5).body == b"abcde"


def test_a_server_that_sends_one_byte_at_a_time_is_given_up_at_the_deadline() -> None:
    with serve(Script(http_answer(b"{}" * 100), drip=0.2)) as url:
        start = time.monotonic()
        with pytest.raises(web.HttpError, match=r"within 1 s"):
            web.exchange(url, "/", deadline_s=1)
    assert time.monotonic() - start < 2


def test_userinfo_is_sent_as_basic_authentication_and_never_shown() -> None:
    script = Script(http_answer(b"{}"))
    with serve(script) as url:
        with_user = url.replace("http://", "http://ops:p%40ss@")
        web.exchange(with_user, "/", deadline_s=5)
        target = web.parse_url(with_user)
    expected = base64.b64encode(b"ops:p@ss").decode()
    assert f"Authorization: Basic {expected}".encode() in script.requests[0]
    assert (target.host, target.user) == ("127.0.0.1", "ops")
    assert "p%40ss" not in target.shown and "p@ss" not in target.shown
    assert target.shown.startswith("http://ops:***@127.0.0.1:")


@pytest.mark.parametrize(
    "url", ["ftp://h/", "h:9090", "", "http://:9090", "http://h:0/", "http://h:99999/"]
)
def test_urls_that_are_not_http_with_a_host_are_refused(url: str) -> None:
    with pytest.raises(web.HttpError, match="not an http"):
        web.parse_url(url)


def test_shown_url_hides_the_password_of_a_url_that_does_not_parse() -> None:
    assert web.shown_url("http://u:secret@h:port/x?token=t") == "http://***@h:port/x"


def test_an_answer_larger_than_the_cap_is_refused() -> None:
    with (
        serve(Script(http_answer(b"x" * 5000))) as url,
        pytest.raises(web.HttpError, match="more than 1,000 bytes"),
    ):
        web.exchange(url, "/", deadline_s=5, max_bytes=1000)


def test_a_cut_answer_is_refused() -> None:
    with (
        serve(Script(http_answer(b"{}" * 50)[:-10])) as url,
        pytest.raises(web.HttpError, match="cut short"),
    ):
        web.exchange(url, "/", deadline_s=5)


def test_a_closed_port_is_named_without_credentials() -> None:
    with pytest.raises(web.HttpError) as info:
        web.exchange("http://u:secret@127.0.0.1:9/", "/", deadline_s=2, what="Prometheus")
    assert "cannot reach Prometheus at http://u:***@127.0.0.1:9" in str(info.value)
    assert "secret" not in str(info.value)


def _resolver(monkeypatch: pytest.MonkeyPatch, answers: dict[str, object]) -> None:
    """socket.getaddrinfo answers ``answers[host]`` for the names given (a callable is
    called first: it may sleep, as a resolver that does not answer would); others go to
    the real resolver."""
    real = socket.getaddrinfo

    def getaddrinfo(host: str, port: object, *args: object, **kwargs: object) -> object:
        if host not in answers:
            return real(host, port, *args, **kwargs)
        answer = answers[host]
        return answer() if callable(answer) else answer

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_name_that_does_not_resolve_in_time_is_given_up_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _resolver(monkeypatch, {"slow.example": lambda: time.sleep(5) or []})
    start = time.monotonic()
    with pytest.raises(web.HttpError, match=r"the name slow.example did not resolve within 0.5 s"):
        web.exchange("http://slow.example:9090", "/", deadline_s=0.5)
    assert time.monotonic() - start < 2


def test_each_address_of_a_name_is_tried_within_the_one_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = Script(http_answer(b"{}"))
    with serve(script) as url:
        port = int(url.rsplit(":", 1)[1].strip("/"))
        closed = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 9))
        listening = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))
        _resolver(monkeypatch, {"two.example": [closed, listening]})
        answer = web.exchange(f"http://two.example:{port}", "/", deadline_s=5)
    assert answer.status == 200
    assert script.requests[0].startswith(b"GET / HTTP/1.1\r\nHost: two.example:")


def test_a_name_that_resolves_to_nothing_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    _resolver(monkeypatch, {"none.example": fail})
    with pytest.raises(web.HttpError) as info:
        web.exchange("http://u:pw@none.example/", "/", deadline_s=2, what="Prometheus")
    assert "cannot reach Prometheus at http://u:***@none.example: Name or service not known" in (
        str(info.value)
    )
