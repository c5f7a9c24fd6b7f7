"""A hostile HTTP server on 127.0.0.1 that answers every connection with raw bytes a
test gives it, optionally one byte at a time with a pause (a server that never finishes
its answer), and keeps each request it received (to check what a client sent)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Script:
    """What the server sends: ``raw`` bytes, ``drip`` seconds between single bytes (0:
    all at once), ``hold`` seconds to keep the connection open after sending; with
    ``pause_at`` (a byte offset), ``raw`` up to it, a pause of ``pause`` seconds, then the
    rest."""

    raw: bytes = b""
    drip: float = 0.0
    hold: float = 0.0
    requests: list[bytes] = field(default_factory=list)
    pause_at: int | None = None
    pause: float = 0.0


def http_answer(body: bytes, content_type: str = "application/json", status: int = 200) -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _serve_one(conn: socket.socket, script: Script, stop: threading.Event) -> None:
    with conn:
        conn.settimeout(2)
        with contextlib.suppress(OSError):
            script.requests.append(conn.recv(65536))
        try:
            if script.drip:
                for i in range(len(script.raw)):
                    if stop.wait(script.drip):
                        return
                    conn.sendall(script.raw[i : i + 1])
            elif script.pause_at is not None:
                conn.sendall(script.raw[: script.pause_at])
                if stop.wait(script.pause):
                    return
                conn.sendall(script.raw[script.pause_at :])
            else:
                conn.sendall(script.raw)
            stop.wait(script.hold)
        except OSError:
            return


@contextlib.contextmanager
def serve(script: Script) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a server that plays ``script`` to every connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=_serve_one, args=(conn, script, stop), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()
        time.sleep(0)
