"""The floor of the scale benchmark (``tests/bench/floor.py``): the lists of a run read
from its audit-log lines, the concurrency they had, and the paging loop that finds each
answer's ``continue`` in its first bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.bench import floor
from tests.bench.floor import ListRequest

pytestmark = pytest.mark.unit

ADMIN = "kubernetes-admin"
APISERVER = "system:apiserver"


def event(
    uri: str,
    verb: str = "list",
    user: str = ADMIN,
    code: int = 200,
    at: str = "10:00:00.000000",
    done: str = "10:00:00.100000",
) -> str:
    """One audit event (``--audit-log-format json``, level Metadata) as its log line."""
    return json.dumps(
        {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "stage": "ResponseComplete",
            "requestURI": uri,
            "verb": verb,
            "user": {"username": user, "groups": ["kubeadm:cluster-admins"]},
            "objectRef": {"resource": uri.split("?")[0].rsplit("/", 1)[-1]},
            "responseStatus": {"metadata": {}, "code": code},
            "requestReceivedTimestamp": f"2026-12-03T{at}Z",
            "stageTimestamp": f"2026-12-03T{done}Z",
        }
    )


def test_the_lists_of_a_run_are_read_from_its_audit_log() -> None:
    selector = "labelSelector=nvidia.com%2Fgpu.present%3Dtrue"
    claims = "/apis/resource.k8s.io/v1/resourceclaims?fieldSelector=status.allocation%21%3D"
    lines = [
        event("/api/v1/pods?limit=2000", at="10:00:01.000000", done="10:00:01.500000"),
        event("/api/v1/nodes?limit=1000", user=APISERVER),  # kube-apiserver's own
        event("/api/v1/pods?watch=true", verb="watch"),
        event("/version", verb="get"),
        event(f"/api/v1/nodes?{selector}&limit=1000", at="10:00:00.500000"),
        event("/api/v1/pods?limit=2000&continue=abc", at="10:00:01.600000", done="10:00:02.0"),
        event("/apis/resource.k8s.io/v1beta1/resourceslices?limit=500", code=404),
        '{"kind":"Event","verb":"li',  # a line still being written
        event("/api/v1/pods?limit=2000&continue=def", at="10:00:02.100000", done="10:00:02.5"),
        event(f"{claims}&limit=2000", at="10:00:01.200000", done="10:00:01.300000"),
    ]
    got = floor.lists_from_audit(lines, (APISERVER,))
    assert [(r.name, r.pages) for r in got] == [
        (f"/api/v1/nodes?{selector}&limit=1000", 1),
        ("/api/v1/pods?limit=2000", 3),
        (f"{claims}&limit=2000", 1),
    ]
    pods = got[1]
    assert pods.query == (("limit", "2000"),) and pods.user == ADMIN
    assert pods.end - pods.start == pytest.approx(1.5)
    assert got[2].query == (("fieldSelector", "status.allocation!="), ("limit", "2000"))
    # the first page of a list again is another list; kube-apiserver's own are kept when asked
    again = floor.lists_from_audit([lines[0], lines[0], lines[5]])
    assert [r.pages for r in again] == [1, 2]
    assert len(floor.lists_from_audit([lines[1]])) == 1


def test_a_continue_page_without_its_first_begins_a_list() -> None:
    got = floor.lists_from_audit([event("/api/v1/pods?limit=5&continue=x")])
    assert [(r.uri(), r.pages) for r in got] == [("/api/v1/pods?limit=5", 1)]


def test_the_concurrency_is_the_most_lists_in_flight() -> None:
    def span(start: float, end: float) -> ListRequest:
        return ListRequest("/api/v1/pods", (), 1, ADMIN, start, end)

    assert floor.concurrency([]) == 1
    assert floor.concurrency([span(0, 1), span(1, 2), span(2, 3)]) == 1
    assert floor.concurrency([span(0, 10), span(1, 5), span(2, 3), span(6, 9)]) == 3


def test_a_list_request_round_trips_and_builds_its_pages_uris() -> None:
    req = ListRequest("/api/v1/nodes", (("labelSelector", "a=b"), ("limit", "1000")), 3)
    assert req.uri() == "/api/v1/nodes?labelSelector=a%3Db&limit=1000"
    assert req.uri("t/1=") == "/api/v1/nodes?labelSelector=a%3Db&limit=1000&continue=t%2F1%3D"
    assert ListRequest.from_dict(json.loads(json.dumps(req.to_dict()))) == req
    assert ListRequest("/api/v1/namespaces", ()).uri() == "/api/v1/namespaces"


#: A page as kube-apiserver writes it: kind, apiVersion, metadata, then items (one of
#: which has a metadata of its own, with a field named continue).
PAGE = (
    b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"812",'
    b'"continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6ODEyfQ","remainingItemCount":4},'
    b'"items":[{"metadata":{"name":"p-0","annotations":{"continue":"no"}}}]}\n'
)
LAST = b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"812"},"items":[]}'


def test_the_continue_token_is_read_from_the_answers_metadata() -> None:
    assert floor.continue_token(PAGE) == "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6ODEyfQ"
    assert floor.continue_token(PAGE[: PAGE.index(b'"items"') + 3]) == (
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6ODEyfQ"
    )
    assert floor.continue_token(LAST) is None
    assert floor.continue_token(LAST.replace(b'"812"}', b'"812","continue":""}')) is None


def test_an_answer_cut_before_its_metadata_ends_needs_more_bytes() -> None:
    cut = PAGE[: PAGE.index(b"remainingItemCount")]
    assert floor.list_metadata(cut) is None
    assert floor.list_metadata(b'{"kind":"PodList"') is None
    with pytest.raises(ValueError, match="ended before its list metadata"):
        floor.continue_token(cut)


def test_an_answer_with_items_first_or_no_metadata_is_refused() -> None:
    with pytest.raises(ValueError, match="items come before its metadata"):
        floor.list_metadata(b'{"items":[{"metadata":{"name":"a"}}],"metadata":{}}')
    with pytest.raises(ValueError, match="no list metadata in the first"):
        floor.list_metadata(b'{"kind":"PodList","x":"' + b"a" * (floor.HEAD_MAX + 1))
    with pytest.raises(ValueError, match="not an object"):
        floor.list_metadata(b'{"metadata":"x","items":[]}')


class FakeResponse:
    """An answer whose body arrives ``step`` bytes per read."""

    def __init__(self, status: int, body: bytes, step: int) -> None:
        self.status, self.body, self.step, self.at = status, body, step, 0

    def readinto(self, view: memoryview) -> int:
        n = min(self.step, len(view), len(self.body) - self.at)
        view[:n] = self.body[self.at : self.at + n]
        self.at += n
        return n

    def read(self) -> bytes:
        rest, self.at = self.body[self.at :], len(self.body)
        return rest


class FakeConnection:
    """Serves ``pages`` (status, body) in order and records the URIs asked for."""

    def __init__(self, pages: list[tuple[int, bytes]], step: int = 7) -> None:
        self.pages, self.step, self.asked = list(pages), step, []
        self.headers: list[dict[str, str]] = []

    def request(self, method: str, uri: str, headers: dict[str, str]) -> None:
        assert method == "GET"
        self.asked.append(uri)
        self.headers.append(headers)

    def getresponse(self) -> Any:
        status, body = self.pages.pop(0)
        return FakeResponse(status, body, self.step)


def test_the_paging_loop_follows_each_answers_continue_to_the_last_page() -> None:
    second = PAGE.replace(b"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6ODEyfQ", b"next/2=")
    conn = FakeConnection([(200, PAGE), (200, second), (200, LAST)])
    pager = floor.Pager(conn)  # type: ignore[arg-type]
    req = ListRequest("/api/v1/pods", (("limit", "2"),))
    assert pager.walk(req) == (3, len(PAGE) + len(second) + len(LAST))
    assert conn.asked == [
        "/api/v1/pods?limit=2",
        "/api/v1/pods?limit=2&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6ODEyfQ",
        "/api/v1/pods?limit=2&continue=next%2F2%3D",
    ]
    assert conn.headers[0] == {"Accept": "application/json"}
    assert conn.pages == []


def test_the_paging_loop_stops_on_an_answer_other_than_200() -> None:
    conn = FakeConnection([(200, PAGE), (410, b'{"kind":"Status","reason":"Expired"}')])
    with pytest.raises(RuntimeError, match="410"):
        floor.Pager(conn).walk(ListRequest("/api/v1/pods", ()))  # type: ignore[arg-type]


def patch_event(
    uri: str,
    body: Any,
    user: str = ADMIN,
    code: int = 200,
    at: str = "10:00:00.000000",
    level: str = "Request",
) -> str:
    """One patch's audit event as its log line: with its body at level Request."""
    doc = json.loads(event(uri, verb="patch", user=user, code=code, at=at, done=at))
    doc["level"] = level
    if level == "Request":
        doc["requestObject"] = body
    return json.dumps(doc)


def test_the_patches_of_a_run_are_read_with_their_bodies() -> None:
    merge = {"metadata": {"labels": {"nvidia.com/gpu.present": "true"}}}
    ops = [{"op": "add", "path": "/metadata/labels/a", "value": "b"}]
    lines = [
        patch_event("/api/v1/nodes/n2", merge, at="10:00:02.000000"),
        patch_event("/api/v1/nodes/n1", ops, at="10:00:01.000000"),
        patch_event("/api/v1/nodes/n3", merge, user=APISERVER),  # kube-apiserver's own
        patch_event("/api/v1/nodes/n4", merge, code=409),
        patch_event("/api/v1/nodes/n5/status", merge, level="Metadata"),  # no body kept
        event("/api/v1/nodes?limit=500"),
        '{"kind":"Event","verb":"pa',  # a line still being written
    ]
    got = floor.patches_from_audit(lines, (APISERVER,))

    assert [(p.uri, p.body, p.user) for p in got] == [
        ("/api/v1/nodes/n1", ops, ADMIN),
        ("/api/v1/nodes/n2", merge, ADMIN),
    ]
    assert got[0].write().content_type == "application/json-patch+json"
    assert got[1].write() == floor.bench_writes.Write(
        "PATCH", "/api/v1/nodes/n2", merge, "application/merge-patch+json"
    )
    assert [floor.PatchRequest.from_dict(p.to_dict()) for p in got] == got
    assert floor.concurrency(got) == 1


def test_the_floor_sends_the_patches_after_paging_the_lists() -> None:
    import http.server

    from tests.unit.hostile.api_server import running

    seen: list[tuple[str, str, str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_PATCH(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.command, self.path, self.headers["Content-Type"], body))
            data = b"{}"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    patches = [
        floor.PatchRequest(f"/api/v1/nodes/n{i}", {"metadata": {"labels": {"x": str(i)}}})
        for i in range(12)
    ]
    with running(Handler) as url:
        got = floor.floor_of(url, None, [], 1, patches, 3)  # type: ignore[arg-type]

    assert (got.patches, got.patch_workers, got.pages) == (12, 3, 0)
    assert got.seconds == got.patch_seconds > 0
    assert sorted(seen, key=lambda s: int(s[1].rsplit("n", 1)[1])) == [
        ("PATCH", p.uri, "application/merge-patch+json", p.body) for p in patches
    ]
    assert floor.Floor(**{**got.to_dict(), "lists": []}) == got
