"""The scale fleet's writes: prepared JSON bodies sent on keep-alive HTTPS connections.

Building 10,000 nodes' worth of objects is some 400,000 requests. Sent through the
``kubernetes`` client each costs the client a model round trip and a new request setup,
a few milliseconds of Python per request on the two cores the API server needs; here a
body is encoded once with ``json`` and sent on a connection that each worker thread
keeps open, so the API server and etcd are what the build waits on.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the floor's client imports this module, and nothing of the harness
    from tests.harness.controlplane import ControlPlane


MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
#: An answer of 429 (the API server's max-in-flight limit) is asked again, this many
#: times, a second apart at most; a dropped connection is opened again and the request
#: sent again once.
RETRIES_429 = 30


@dataclass(frozen=True)
class Write:
    """One request: ``method`` on ``path`` (``/api/v1/namespaces/x/pods``) with ``body``
    (JSON-able) as ``content_type``."""

    method: str
    path: str
    body: Mapping[str, Any] | list[Any]
    content_type: str = "application/json"


class WriteFailed(RuntimeError):
    """A write the API server refused: the request and its answer."""


def admin_context(cp: ControlPlane) -> ssl.SSLContext:
    """TLS to ``cp``'s kube-apiserver as its admin (the control plane's CA and admin
    certificate)."""
    ctx = ssl.create_default_context(cafile=str(cp.layout.pki / "ca.crt"))
    ctx.load_cert_chain(str(cp.layout.root / "admin.crt"), str(cp.layout.root / "admin.key"))
    return ctx


def send_all(
    server: str,
    ctx: ssl.SSLContext | None,
    writes: Iterable[Write],
    *,
    workers: int = 8,
    answer: Callable[[Write, bytes], None] | None = None,
    timeout_s: float = 120.0,
) -> int:
    """Send every write of ``writes`` to ``server`` on ``workers`` connections of their
    own: ``https://host:port`` with ``ctx``, the client's TLS (``admin_context``), or
    ``http://``. ``writes`` is read as the workers take them, so a generator of 100,000
    bodies is never held whole. ``answer(write, body)`` is called with each 2xx answer's
    body, on the worker's thread. Returns the writes sent. Raises ``WriteFailed`` for
    the first answer outside 2xx (the other workers stop after their current write),
    ``OSError`` or ``http.client.HTTPException`` when a connection fails twice in a row;
    ``timeout_s`` bounds each exchange."""
    parts = urllib.parse.urlsplit(server)
    host = parts.hostname or "127.0.0.1"
    source: Iterator[Write] = iter(writes)
    take = threading.Lock()
    errors: list[BaseException] = []
    sent = [0]

    def next_write() -> Write | None:
        with take:
            if errors:
                return None
            item = next(source, None)
            if item is not None:
                sent[0] += 1
            return item

    def work() -> None:
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(host, parts.port, context=ctx, timeout=timeout_s)
        else:
            conn = http.client.HTTPConnection(host, parts.port, timeout=timeout_s)
        try:
            while (w := next_write()) is not None:
                body = _exchange(conn, w)
                if answer is not None:
                    answer(w, body)
        except BaseException as exc:  # handed to the caller below
            with take:
                errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sent[0]


def _exchange(conn: http.client.HTTPConnection, w: Write) -> bytes:
    payload = json.dumps(w.body, separators=(",", ":")).encode() if w.method != "GET" else None
    headers = {"Content-Type": w.content_type, "Accept": "application/json"}
    reconnected = False
    for attempt in range(RETRIES_429 + 1):
        try:
            conn.request(w.method, w.path, body=payload, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
        except (http.client.HTTPException, ConnectionError):
            if reconnected:
                raise
            reconnected = True
            conn.close()
            continue
        if 200 <= resp.status < 300:
            return body
        if resp.status == 409 and reconnected and w.method == "POST":
            # the first try was taken before its connection dropped: the object's answer
            return _exchange(conn, Write("GET", f"{w.path}/{w.body['metadata']['name']}", {}))
        if resp.status == 429 and attempt < RETRIES_429:
            time.sleep(min(1.0, 0.05 * (attempt + 1)))
            continue
        text = body[:500].decode(errors="replace")
        raise WriteFailed(f"{w.method} {w.path}: {resp.status} {text}")
    raise WriteFailed(f"{w.method} {w.path}: still 429 after {RETRIES_429} tries")
