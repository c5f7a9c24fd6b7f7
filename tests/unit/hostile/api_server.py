"""A hostile API server for the report's hostile-input tests: a real HTTP server on
127.0.0.1 that answers each path with what a test gives it (garbage, objects of odd
shapes, a list whose ``continue`` never ends), and counts the requests it served."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

#: What a well-formed DRA cluster answers to the requests ``gpufleet report`` makes.
VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.0"}
GROUP = {
    "kind": "APIGroup",
    "name": "resource.k8s.io",
    "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}],
}

Answer = tuple[int, bytes]


def listing(items: list[Any], **meta: Any) -> Answer:
    return 200, json.dumps({"kind": "List", "metadata": meta, "items": items}).encode()


def answers(**over: Answer | Callable[[str], Answer]) -> dict[str, Any]:
    """Path -> answer of a healthy empty cluster, with ``over`` (keys: ``version``,
    ``group``, ``nodes``, ``pods``, ``resourceslices``, ``resourceclaims``) replacing
    some; an answer is ``(status, body)`` or a function of the query string."""
    base: dict[str, Any] = {
        "version": (200, json.dumps(VERSION).encode()),
        "group": (200, json.dumps(GROUP).encode()),
        "nodes": listing([]),
        "pods": listing([]),
        "resourceslices": listing([]),
        "resourceclaims": listing([]),
    }
    base.update(over)
    return {
        "/version": base["version"],
        "/apis/resource.k8s.io": base["group"],
        "/api/v1/nodes": base["nodes"],
        "/api/v1/pods": base["pods"],
        "/apis/resource.k8s.io/v1/resourceslices": base["resourceslices"],
        "/apis/resource.k8s.io/v1/resourceclaims": base["resourceclaims"],
    }


@contextmanager
def serve(paths: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """(server URL, the paths requested so far) of a server answering ``paths``."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the name http.server calls
            url = urlsplit(self.path)
            seen.append(self.path)
            answer = paths.get(url.path, (404, b'{"kind":"Status","code":404}'))
            status, body = answer(url.query) if callable(answer) else answer
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with running(Handler) as url:
        yield url, seen


@contextmanager
def running(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """The URL of a threaded HTTP server on a free local port answering with ``handler``,
    shut down when the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
