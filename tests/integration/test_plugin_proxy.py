"""lab/go/plugin-proxy, the stand-in for hostpathplugin's proxy mode that carries the
kubelet's connections to the DRA e2e suite's in-process kubelet plugin.

The suite opens TCP connections ahead of time and treats each as a client of its gRPC
server (test/e2e/storage/drivers/proxy); the proxy must join each connection on the
plugin socket to one of them, carry bytes both ways, close one side when the other
closes, and replace a stale socket file.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.build import binaries
from gpufleet.lab import e2e_images

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect_tcp(port: int) -> socket.socket:
    deadline = time.monotonic() + 10
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _recv(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    binary = binaries.build_local_program("plugin-proxy", e2e_images.PROXY_SOURCE)
    sock = tmp_path / "plugins" / "dra.sock"
    sock.parent.mkdir()
    sock.write_text("stale socket file of a killed proxy")
    port = _free_port()
    proc = subprocess.Popen(
        [str(binary), "--v=5", f"--endpoint={sock}", f"--proxy-endpoint=tcp://127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        yield sock, port
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_socket_connection_is_joined_to_the_oldest_remote_connection(proxy) -> None:
    sock, port = proxy
    first, second = _connect_tcp(port), _connect_tcp(port)
    # the remote side speaks first, as a gRPC server sends its settings frame
    first.sendall(b"server-1")
    second.sendall(b"server-2")
    time.sleep(0.2)
    with socket.socket(socket.AF_UNIX) as kubelet:
        kubelet.settimeout(5)
        kubelet.connect(str(sock))
        assert _recv(kubelet, 8) == b"server-1"
        kubelet.sendall(b"client")
        first.settimeout(5)
        assert _recv(first, 6) == b"client"
    # the kubelet closed its connection: the joined remote connection is closed too
    assert first.recv(1) == b""
    with socket.socket(socket.AF_UNIX) as again:
        again.settimeout(5)
        again.connect(str(sock))
        assert _recv(again, 8) == b"server-2"
    first.close()
    second.close()


def test_a_remote_close_closes_the_socket_connection(proxy) -> None:
    sock, port = proxy
    remote = _connect_tcp(port)
    with socket.socket(socket.AF_UNIX) as kubelet:
        kubelet.settimeout(5)
        kubelet.connect(str(sock))
        time.sleep(0.2)
        remote.close()
        assert kubelet.recv(1) == b""
