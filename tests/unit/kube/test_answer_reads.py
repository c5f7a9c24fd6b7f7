"""How the API client reads an answer's body (``kube.client._body``) from a real socket: a
list answer in chunks of a few bytes, as kube-apiserver writes them (about 2 KiB each),
is read whole in far fewer reads than chunks; a server that pauses longer than one wait
(the read timeout) and then goes on gives the whole answer; one that stops until the
deadline is given up with the deadline's message."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import (
    http_exchange as web,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

from tests.unit.hostile.raw_server import Script, serve

pytestmark = pytest.mark.unit

ITEMS = [{"metadata": {"name": f"pod-{i}"}, "spec": {"nodeName": f"n{i}"}} for i in range(300)]
BODY = json.dumps({"kind": "PodList", "metadata": {}, "items": ITEMS}).encode() + b"\n"
CHUNK = 64


def chunked(body: bytes, size: int) -> list[bytes]:
    """``body`` in HTTP/1.1 chunks of ``size`` bytes, the last chunk included."""
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return [b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces] + [b"0\r\n\r\n"]


def script(pause_after: int = 0, pause_s: float = 0.0) -> Script:
    """``BODY`` in chunks of ``CHUNK`` bytes, a pause of ``pause_s`` seconds after
    ``pause_after`` chunks."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    pieces = chunked(BODY, CHUNK)
    at = len(head) + sum(len(p) for p in pieces[:pause_after])
    return Script(head + b"".join(pieces), hold=1, pause_at=at, pause=pause_s)


def kube(tmp_path: Path, url: str, read_timeout: float) -> vk.Kube:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{url}'}}}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return vk.Kube(str(config), timeout=(1.0, read_timeout))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every read ``read_within`` made of an answer."""
    sizes: list[int] = []
    real = web.read_within

    def counting(read, *args, **kwargs):  # type: ignore[no-untyped-def]
        def counted(n: int) -> bytes:
            data = read(n)
            sizes.append(len(data))
            return data

        return real(counted, *args, **kwargs)

    monkeypatch.setattr(web, "read_within", counting)
    return sizes


def test_an_answer_in_small_chunks_is_read_in_few_reads(tmp_path: Path, reads: list[int]) -> None:
    with serve(script()) as url:
        got = kube(tmp_path, url, 5.0).list("/api/v1/pods")
    assert got == ITEMS
    chunks = len(chunked(BODY, CHUNK)) - 1
    assert sum(reads) == len(BODY)
    # on an armed socket one read gathers the chunks that have come; one per chunk before
    assert len(reads) < chunks / 10, (len(reads), chunks)


def test_a_pause_longer_than_one_wait_but_within_the_deadline_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[int]
) -> None:
    monkeypatch.setattr(vk, "REQUEST_DEADLINE", 5)
    with serve(script(40, 1.0)) as url:
        got = kube(tmp_path, url, 0.3).list("/api/v1/pods")
    assert got == ITEMS
    assert sum(reads) == len(BODY)


def test_a_server_that_stops_mid_answer_is_given_up_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vk, "REQUEST_DEADLINE", 1)
    with serve(script(40, 30)) as url, pytest.raises(vk.KubeError) as err:
        kube(tmp_path, url, 0.3).list("/api/v1/pods")
    assert "did not finish its answer within 1 s" in str(err.value)


def test_only_an_armed_socket_counts_as_armed() -> None:
    plain = socket.socket()
    try:
        assert not web.armed(plain)
        assert web.armed(web.arm(plain))
        assert not web.armed(object())
    finally:
        plain.close()
