"""The scale fleet's writer (``tests/bench/writes.py``) against a local HTTP server: every
body sent once as JSON on kept-alive connections, a 429 asked again, a refusal raised
with its request and answer and no further write taken."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.bench import writes
from tests.bench.writes import Write
from tests.unit.hostile.api_server import running

pytestmark = pytest.mark.unit


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-apiserver
    seen: list[tuple[str, str, str, Any]]
    busy: dict[str, int]
    connections: set[tuple[str, int]]
    lock = threading.Lock()

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        with self.lock:
            self.seen.append((self.command, self.path, self.headers["Content-Type"], body))
            self.connections.add(self.client_address)
            left = self.busy.get(self.path, 0)
            if left:
                self.busy[self.path] = left - 1
        if left:
            status, answer = 429, {"reason": "TooManyRequests"}
        elif self.path.endswith("/refuse"):
            status, answer = 422, {"reason": "Invalid", "message": "spec.devices: Required"}
        else:
            status, answer = 201, {"metadata": {**(body or {}).get("metadata", {}), "uid": "u"}}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_PATCH = _answer


@pytest.fixture
def server() -> Iterator[tuple[str, type[Recorder]]]:
    handler = type("Handler", (Recorder,), {"seen": [], "busy": {}, "connections": set()})
    with running(handler) as url:
        yield url, handler


def pods(n: int) -> list[Write]:
    return [
        Write("POST", "/api/v1/namespaces/team-0/pods", {"metadata": {"name": f"p-{i}"}})
        for i in range(n)
    ]


def test_every_write_arrives_once_as_json_on_kept_connections(server) -> None:
    url, handler = server
    answers: list[str] = []
    lock = threading.Lock()

    def keep(w: Write, body: bytes) -> None:
        if w.method == "POST":
            with lock:
                answers.append(json.loads(body)["metadata"]["name"])

    patch = Write("PATCH", "/x/status", {"status": {"a": 1}}, writes.MERGE_PATCH)
    sent = writes.send_all(url, None, iter([*pods(60), patch]), workers=4, answer=keep)

    assert sent == 61
    names = sorted(b["metadata"]["name"] for m, _, _, b in handler.seen if m == "POST")
    assert names == sorted(f"p-{i}" for i in range(60))
    assert sorted(answers) == names
    assert ("PATCH", "/x/status", writes.MERGE_PATCH, {"status": {"a": 1}}) in handler.seen
    # 61 requests on at most 4 connections: each worker keeps its own open
    assert 1 <= len(handler.connections) <= 4


def test_a_429_is_asked_again_until_the_server_takes_it(server) -> None:
    url, handler = server
    handler.busy["/api/v1/namespaces/team-0/pods"] = 3

    assert writes.send_all(url, None, pods(2), workers=1) == 2
    assert len(handler.seen) == 5  # 3 answered 429, then both taken


def test_a_refusal_names_the_request_and_the_answer_and_stops_the_writes(server) -> None:
    url, _ = server
    taken: list[int] = []

    def lazily() -> Iterator[Write]:
        for i in range(1000):
            taken.append(i)
            yield Write("POST", "/refuse" if i == 3 else "/ok", {"metadata": {"name": str(i)}})

    with pytest.raises(writes.WriteFailed, match=r"POST /refuse: 422 .*spec.devices: Required"):
        writes.send_all(url, None, lazily(), workers=2)
    # the generator was read as the workers went, and not after the refusal
    assert len(taken) < 10
