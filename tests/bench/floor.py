"""The floor of a measured command: how long the lists it read take to page through with
a client that only receives the bytes.

A fleet-wide command (validate, report, claims gc, mig advise, labels) reads a few paged
lists and then works on what it read. Its floor is the time the same lists take when the
client does nothing else: the same request URIs (path, ``labelSelector``,
``fieldSelector``, ``limit``, any other parameter but ``continue``), against the same
kube-apiserver with the same credentials, each answer read to its end and dropped. The
only thing decoded is the list's ``metadata`` at the start of each answer, for its
``continue`` token (kube-apiserver writes ``kind``, ``apiVersion`` and ``metadata``
before ``items``). ``wall / floor`` is then what the command costs beyond reading its
answers off the wire and sending its writes: its decoding, trimming, checks and process
start.

Writes: a command that patches nodes (``gpu_node_labels``) must make those writes
whatever it is written in, so its floor also sends them, after the lists, as the
command does: the same patch bodies (from the audit log, where
``tests.bench.cluster.AUDIT_POLICY`` keeps the request body of node patches) to the same
request URIs, as a JSON merge patch (an object) or a JSON patch (an array; the audit log
does not keep the content type), on as many connections as the command had patches in
flight, with ``tests.bench.writes.send_all``. The objects must be as they were before the
command ran, or the patches change nothing: the benchmark puts them back first
(``tests.bench.cluster.measure_floor``'s ``reset``).

The lists are not written down here: ``lists_from_audit`` reads them from the audit log
of the command's run (``LIST`` requests at level Metadata, see
``tests.bench.cluster.AUDIT_POLICY``), so the floor follows the code when it lists
something else.

Concurrency: the floor mirrors the command's. ``concurrency`` is the most lists the
command had in flight at once (each list from its first page's arrival to its last
page's answer, by the audit log's timestamps); the floor pages the lists, in the order
the command began them, on that many connections, each list page by page on one
connection. So the floor is no slower than the command could be with the parallelism it
chose.

Run as ``python -m tests.bench.floor SPEC.json`` (a child process, measured like the
command): ``SPEC`` holds ``server``, ``ca``, ``cert``, ``key``, ``workers``, ``lists``
(``ListRequest.to_dict``) and, optionally, ``patches`` (``PatchRequest.to_dict``) and
``patch_workers``; prints one JSON object, ``Floor.to_dict``.
"""

from __future__ import annotations

import http.client
import json
import queue
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.bench import writes as bench_writes

#: Bytes read per ``readinto`` of an answer.
CHUNK = 1 << 20
#: The most bytes of an answer kept to find its ``metadata``; an answer whose list
#: ``metadata`` does not end within them is refused (``ValueError``).
HEAD_MAX = 1 << 20
#: The most bytes of the list's ``metadata`` decoded (its ``continue`` token is a few
#: hundred).
META_MAX = 1 << 16
_DECODER = json.JSONDecoder()


@dataclass
class ListRequest:
    """One paged list a command read: its ``path`` (``/api/v1/pods``), its query without
    ``continue`` (pairs in the order sent), the ``pages`` it took, the user who listed,
    and when its first page arrived and its last page was answered (``start``, ``end``:
    seconds since the epoch, from the audit log)."""

    path: str
    query: tuple[tuple[str, str], ...]
    pages: int = 1
    user: str = ""
    start: float = 0.0
    end: float = 0.0

    def uri(self, token: str | None = None) -> str:
        """The request URI of a page: the first (``token`` None) or the one after."""
        query = [*self.query, *([("continue", token)] if token else [])]
        return self.path + (f"?{urllib.parse.urlencode(query)}" if query else "")

    @property
    def name(self) -> str:
        """``/api/v1/pods?limit=2000``: the list as printed."""
        return self.uri()

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "query": [list(q) for q in self.query],
            "pages": self.pages,
            "user": self.user,
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ListRequest:
        return cls(
            doc["path"],
            tuple((str(k), str(v)) for k, v in doc["query"]),
            int(doc.get("pages", 1)),
            str(doc.get("user", "")),
            float(doc.get("start", 0.0)),
            float(doc.get("end", 0.0)),
        )


@dataclass
class PatchRequest:
    """One patch a command sent: its request URI, the patch ``body`` as sent (decoded
    JSON: an object for a merge patch, an array for a JSON patch), the user, and when it
    arrived and was answered (``start``, ``end``: seconds since the epoch)."""

    uri: str
    body: dict[str, Any] | list[Any]
    user: str = ""
    start: float = 0.0
    end: float = 0.0

    def write(self) -> bench_writes.Write:
        """The request that sends it again (``tests.bench.writes.send_all``)."""
        kind = bench_writes.JSON_PATCH if isinstance(self.body, list) else bench_writes.MERGE_PATCH
        return bench_writes.Write("PATCH", self.uri, self.body, kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "body": self.body,
            "user": self.user,
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> PatchRequest:
        return cls(
            str(doc["uri"]),
            doc["body"],
            str(doc.get("user", "")),
            float(doc.get("start", 0.0)),
            float(doc.get("end", 0.0)),
        )


def _epoch(stamp: Any) -> float:
    """An audit timestamp (RFC 3339, microseconds) as seconds since the epoch; 0.0 when
    missing or not one."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _answered(
    lines: Iterable[bytes | str], verb: str, exclude_users: Sequence[str]
) -> Iterator[tuple[dict[str, Any], str]]:
    """The audit events of ``verb`` among ``lines`` at stage ``ResponseComplete`` with a
    2xx answer, by none of ``exclude_users``, each with its user; lines that are not JSON
    (one still being written) are skipped."""
    for raw in lines:
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("verb") != verb:
            continue
        if event.get("stage", "ResponseComplete") != "ResponseComplete":
            continue
        code = (event.get("responseStatus") or {}).get("code", 200)
        if not 200 <= int(code) < 300:
            continue
        user = str((event.get("user") or {}).get("username", ""))
        if user not in exclude_users:
            yield event, user


def lists_from_audit(
    lines: Iterable[bytes | str], exclude_users: Sequence[str] = ()
) -> list[ListRequest]:
    """The paged lists of a run, from audit-log lines (JSON events, ``--audit-log-format
    json``), in the order they began.

    Only ``list`` events at stage ``ResponseComplete`` with a 2xx answer count, and none
    of ``exclude_users`` (kube-apiserver's own). A request without ``continue`` begins a
    list; one with ``continue`` is the next page of the open list of the same user, path
    and other parameters (or begins one, if none is open). Lines that are not JSON (one
    still being written) are skipped.
    """
    out: list[ListRequest] = []
    open_lists: dict[tuple[str, str, tuple[tuple[str, str], ...]], ListRequest] = {}
    for event, user in _answered(lines, "list", exclude_users):
        parts = urllib.parse.urlsplit(str(event.get("requestURI", "")))
        pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        query = tuple((k, v) for k, v in pairs if k != "continue")
        token = any(k == "continue" and v for k, v in pairs)
        key = (user, parts.path, query)
        start = _epoch(event.get("requestReceivedTimestamp"))
        end = _epoch(event.get("stageTimestamp"))
        current = open_lists.get(key) if token else None
        if current is None:
            current = ListRequest(parts.path, query, 0, user, start, end)
            out.append(current)
            open_lists[key] = current
        current.pages += 1
        current.end = max(current.end, end)
    return sorted(out, key=lambda r: r.start)


def patches_from_audit(
    lines: Iterable[bytes | str], exclude_users: Sequence[str] = ()
) -> list[PatchRequest]:
    """The patches of a run that the audit log kept with their body (``requestObject``),
    in the order they arrived: ``patch`` events at stage ``ResponseComplete`` with a 2xx
    answer, by none of ``exclude_users``. A patch logged without its body (a resource the
    audit policy logs at level Metadata) is not one of them."""
    out: list[PatchRequest] = []
    for event, user in _answered(lines, "patch", exclude_users):
        body = event.get("requestObject")
        if not isinstance(body, dict | list):
            continue
        out.append(
            PatchRequest(
                str(event.get("requestURI", "")),
                body,
                user,
                _epoch(event.get("requestReceivedTimestamp")),
                _epoch(event.get("stageTimestamp")),
            )
        )
    return sorted(out, key=lambda r: r.start)


def concurrency(requests: Sequence[ListRequest | PatchRequest]) -> int:
    """The most requests (lists, or patches) in flight at once (``start`` to ``end`` of
    each; one that ends as another starts does not overlap it); 1 for none."""
    edges = sorted([(r.start, 1) for r in requests] + [(r.end, -1) for r in requests])
    most = now = 0
    for _at, step in edges:  # at equal times -1 sorts first
        now += step
        most = max(most, now)
    return max(1, most)


def list_metadata(head: bytes) -> dict[str, Any] | None:
    """The list's ``metadata`` object from the first bytes of a list answer, or None when
    ``head`` ends before it does. Raises ``ValueError`` when the answer's ``items`` come
    before its ``metadata``, or ``head`` holds more than ``HEAD_MAX`` bytes without it.

    Only the ``metadata`` object is decoded: the first ``"metadata":`` of the answer is
    the list's own, as kube-apiserver writes it before ``items``
    (``k8s.io/apimachinery`` ``ListMeta`` is the list type's second field, and the
    streaming list encoder writes the items last)."""
    at = head.find(b'"metadata":')
    items = head.find(b'"items":')
    if items >= 0 and (at < 0 or items < at):
        raise ValueError("the answer's items come before its metadata")
    if at >= 0:
        start = at + len(b'"metadata":')
        text = head[start : start + META_MAX].decode("utf-8", "replace").lstrip()
        try:
            meta, _end = _DECODER.raw_decode(text)
        except ValueError:
            meta = None
        if isinstance(meta, dict):
            return meta
        if meta is not None:
            raise ValueError("the answer's metadata is not an object")
    if len(head) > HEAD_MAX:
        raise ValueError(f"no list metadata in the first {HEAD_MAX} bytes of the answer")
    return None


def continue_token(head: bytes) -> str | None:
    """The ``metadata.continue`` of a list answer's first bytes (None for the last page).
    Raises ``ValueError`` when the metadata is not in ``head`` (see ``list_metadata``)."""
    meta = list_metadata(head)
    if meta is None:
        raise ValueError("the answer ended before its list metadata")
    token = meta.get("continue")
    return token if isinstance(token, str) and token else None


@dataclass
class Floor:
    """What paging through the lists and sending the patches took: ``seconds`` from the
    first request to the last answer (both), the ``pages`` (requests) and ``bytes``
    received, the ``workers`` (connections) used, the lists paged; the ``patches`` sent,
    on ``patch_workers`` connections, in ``patch_seconds`` of the ``seconds``."""

    seconds: float
    pages: int
    bytes: int
    workers: int
    lists: list[ListRequest] = field(default_factory=list)
    patches: int = 0
    patch_workers: int = 0
    patch_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "pages": self.pages,
            "bytes": self.bytes,
            "workers": self.workers,
            "lists": [r.to_dict() for r in self.lists],
            "patches": self.patches,
            "patch_workers": self.patch_workers,
            "patch_seconds": self.patch_seconds,
        }


class Pager:
    """Pages through lists on one keep-alive connection to kube-apiserver
    (``http.client.HTTPSConnection``), reading each answer to its end into one reused
    buffer."""

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        self.buf = bytearray(CHUNK)

    def page(self, uri: str) -> tuple[str | None, int]:
        """GET one page: (its continue token or None, bytes received). Raises
        ``RuntimeError`` for an answer other than 200."""
        self.conn.request("GET", uri, headers={"Accept": "application/json"})
        resp = self.conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"GET {uri}: {resp.status} {resp.read()[:300]!r}")
        view = memoryview(self.buf)
        head = b""
        meta: dict[str, Any] | None = None
        size = 0
        while True:
            n = resp.readinto(view)
            if not n:
                break
            size += n
            if meta is None:
                head += view[:n]
                meta = list_metadata(head)
        token = continue_token(head)
        return token, size

    def walk(self, req: ListRequest) -> tuple[int, int]:
        """Every page of ``req``: (pages, bytes)."""
        token, pages, size = None, 0, 0
        while True:
            token, n = self.page(req.uri(token))
            pages, size = pages + 1, size + n
            if token is None:
                return pages, size

    def close(self) -> None:
        self.conn.close()


def page_through(
    server: str, ctx: ssl.SSLContext, lists: Sequence[ListRequest], workers: int
) -> Floor:
    """Page through ``lists`` on ``workers`` connections (a list on one connection, the
    next list to the next free connection, in order); the connections are opened before
    the clock starts."""
    parts = urllib.parse.urlsplit(server)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    workers = max(1, min(workers, len(lists) or 1))
    pagers = [
        Pager(http.client.HTTPSConnection(host, port, context=ctx, timeout=600))
        for _ in range(workers)
    ]
    for p in pagers:
        p.conn.connect()
    todo: queue.Queue[ListRequest] = queue.Queue()
    for req in lists:
        todo.put(req)
    totals = [0, 0]
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(pager: Pager) -> None:
        while True:
            try:
                req = todo.get_nowait()
            except queue.Empty:
                return
            try:
                pages, size = pager.walk(req)
            except BaseException as err:  # re-raised in the caller, after the join
                errors.append(err)
                return
            with lock:
                totals[0] += pages
                totals[1] += size

    start = time.monotonic()
    threads = [threading.Thread(target=work, args=(p,)) for p in pagers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - start
    for p in pagers:
        p.close()
    if errors:
        raise errors[0]
    return Floor(seconds, totals[0], totals[1], workers, list(lists))


def send_patches(
    server: str, ctx: ssl.SSLContext, patches: Sequence[PatchRequest], workers: int
) -> float:
    """Send ``patches`` again on ``workers`` connections (``tests.bench.writes.send_all``):
    the seconds they took. Raises ``tests.bench.writes.WriteFailed`` for an answer outside
    2xx."""
    start = time.monotonic()
    bench_writes.send_all(server, ctx, (p.write() for p in patches), workers=max(1, workers))
    return time.monotonic() - start


def floor_of(
    server: str,
    ctx: ssl.SSLContext,
    lists: Sequence[ListRequest],
    workers: int,
    patches: Sequence[PatchRequest] = (),
    patch_workers: int = 1,
) -> Floor:
    """The lists paged through (``page_through``), then the patches sent (``send_patches``),
    as a command lists before it patches."""
    floor = page_through(server, ctx, lists, workers) if lists else Floor(0.0, 0, 0, 0, [])
    if patches:
        floor.patch_seconds = send_patches(server, ctx, patches, patch_workers)
        floor.patches = len(patches)
        floor.patch_workers = max(1, patch_workers)
        floor.seconds += floor.patch_seconds
    return floor


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.bench.floor SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    ctx = ssl.create_default_context(cafile=spec["ca"])
    ctx.load_cert_chain(spec["cert"], spec["key"])
    lists = [ListRequest.from_dict(d) for d in spec["lists"]]
    patches = [PatchRequest.from_dict(d) for d in spec.get("patches", [])]
    floor = floor_of(
        spec["server"],
        ctx,
        lists,
        int(spec["workers"]),
        patches,
        int(spec.get("patch_workers", 1)),
    )
    print(json.dumps(floor.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
