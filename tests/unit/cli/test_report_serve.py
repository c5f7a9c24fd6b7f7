"""``gpufleet report --serve``: the HTML page at ``/`` (the page ``--html`` writes, under a
Content-Security-Policy that admits only its own style sheet), kept ``--refresh`` seconds,
503 and one plain line when the listing fails, ``/metrics`` beside it, 404 elsewhere.
The server runs in a thread of the test on a port of 127.0.0.1; the listing is a fake."""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as cl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

from gpufleet.commands import report_serve as rs
from gpufleet.render import fleet_report as rp
from tests.unit.report.test_fleet import CLAIMS, NODES, PODS, SLICES, device, rslice

pytestmark = pytest.mark.unit

META = {
    "server": "https://10.0.0.1:6443",
    "kubernetes_version": "v1.37.2",
    "resource_version": "v1",
    "api_requests": 7,
    "sources": {},
    "generated_at": "2026-12-05T09:00:00Z",
}
#: A GPU model name as a ResourceSlice may carry it (a string attribute, any characters).
HOSTILE_MODEL = '<img src=x onerror="alert(1)">'


def fake_listing(slices: list[dict[str, Any]] = SLICES) -> cl.Listing:
    listing = cl.Listing(resource_version="v1", nodes=NODES, pods=PODS)
    listing.slices, listing.claims = slices, CLAIMS
    return listing


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The cluster the server lists: ``state.answer`` is the Listing each listing returns,
    or a KubeError it raises; ``state.lists`` counts the listings."""
    state = SimpleNamespace(answer=fake_listing(), lists=0)

    def list_cluster(*_a: object, **_k: object) -> cl.Listing:
        state.lists += 1
        if isinstance(state.answer, Exception):
            raise state.answer
        return state.answer

    monkeypatch.setattr(rs.vk, "Kube", lambda *_: SimpleNamespace(server="s", requests=7))
    monkeypatch.setattr(rs.cluster_listing, "list_cluster", list_cluster)
    monkeypatch.setattr(rs, "report_meta", lambda *_: dict(META))
    return state


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """Start a server (``rs.make_server`` on 127.0.0.1, a free port) in a thread; returns
    its URL. Every server started is stopped after the test."""
    servers = []

    def start(collect: Callable[[], tuple[int, str]], page: Any = None) -> str:
        server = rs.make_server(("127.0.0.1", 0), collect, page=page)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


#: Seconds a request waits for its answer: a page of 100,000 devices is built on request,
#: which a loaded machine stretches past 10 s; a server that does not answer still fails.
ANSWER_TIMEOUT_S = 60


def get(url: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(url, timeout=ANSWER_TIMEOUT_S) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


def test_the_page_is_the_html_file_of_the_same_listing(cluster: SimpleNamespace) -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr

    status, page = rs.page(rs.Source(), reload_seconds=30)
    doc = fr.build_report(SLICES, CLAIMS, PODS, NODES, namespaces=[])
    doc["meta"] = META
    assert status == 200
    assert page == rp.render_html(doc, 30)
    # the file's page and the served one differ only by the reload instruction
    assert page.replace('<meta http-equiv="refresh" content="30">', "") == rp.render_html(doc)
    assert "28.8%" in page and "0 allocated, 3 free of 3" in page  # figures of test_fleet


def test_the_csp_admits_the_pages_own_style_sheet_and_nothing_else(
    cluster: SimpleNamespace,
) -> None:
    _, page = rs.page(rs.Source())
    (sheet,) = re.findall(r"<style>(.*?)</style>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(sheet.encode()).digest()).decode()
    directives = dict(d.strip().split(" ", 1) for d in rp.CONTENT_SECURITY_POLICY.split(";"))
    assert directives == {
        "default-src": "'none'",
        "style-src": f"'sha256-{digest}'",
        "base-uri": "'none'",
        "form-action": "'none'",
        "frame-ancestors": "'none'",
    }
    # a style attribute would need 'unsafe-inline': the page has none
    assert not re.search(r"\sstyle=", page)


def test_a_model_name_from_a_slice_is_text_in_the_page(cluster: SimpleNamespace) -> None:
    cluster.answer = fake_listing([rslice("a", [device("gpu-0", HOSTILE_MODEL, "141Gi")])])
    _, page = rs.page(rs.Source())
    assert "<img" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page


def test_serves_the_page_metrics_and_404(cluster: SimpleNamespace, serve: Callable) -> None:
    live = rs.LivePage(lambda: rs.page(rs.Source(), 30), refresh=30)
    url = serve(lambda: rs.metrics(rs.Source()), page=live)

    status, headers, body = get(f"{url}/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Content-Security-Policy"] == rp.CONTENT_SECURITY_POLICY
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert body.startswith("<!DOCTYPE html>") and "<h2>Pending claims (" in body
    assert get(f"{url}/?from=bookmark")[2] == body  # kept: not listed again
    assert (cluster.lists, live.builds) == (1, 1)

    status, headers, body = get(f"{url}/metrics")
    assert status == 200 and body.endswith("gpufleet_report_up 1\n")
    assert "Content-Security-Policy" not in headers
    assert cluster.lists == 2  # the metrics are listed per scrape, as before

    for path in ("/index.html", "/metrics/x", "/..%2f"):
        status, headers, body = get(url + path)
        assert (status, headers["Content-Type"]) == (404, "text/plain; charset=utf-8"), path
        assert body == "not found: the pages are / and /metrics\n"


def test_without_a_page_the_root_is_not_found(serve: Callable) -> None:
    url = serve(lambda: (200, "gpufleet_report_up 1\n"))
    assert get(f"{url}/")[0] == 404


def test_a_failed_listing_answers_503_in_one_line_and_the_next_request_lists_again(
    cluster: SimpleNamespace, serve: Callable
) -> None:
    cluster.answer = vk.KubeError(
        None,
        "the API server https://10.0.0.1:6443 did not answer GET /api/v1/nodes within 10s\n"
        'Traceback (most recent call last):\n  File "client.py", line 1\nBearer sekrit-token',
    )
    url = serve(lambda: rs.metrics(rs.Source()), page=rs.LivePage(lambda: rs.page(rs.Source()), 30))
    status, headers, body = get(f"{url}/")
    assert status == 503
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert "Content-Security-Policy" not in headers
    assert body == (
        "cannot read the cluster: the API server https://10.0.0.1:6443 did not answer "
        "GET /api/v1/nodes within 10s\n"
    )
    cluster.answer = fake_listing()
    status, _, body = get(f"{url}/")
    assert status == 200 and "28.8%" in body
    assert cluster.lists == 2


def test_a_cluster_without_dra_or_a_refused_kind_is_503() -> None:
    def source(listing: cl.Listing) -> tuple[int, str]:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rs.vk, "Kube", lambda *_: SimpleNamespace(server="s", requests=1))
            mp.setattr(rs.cluster_listing, "list_cluster", lambda *_a, **_k: listing)
            return rs.page(rs.Source())

    assert source(cl.Listing()) == (503, "cannot read the cluster: cannot list "
                                          "resource.k8s.io not served\n")  # fmt: skip
    refused = fake_listing()
    refused.errors = {"pods": "403 Forbidden: pods is forbidden\nmore"}
    assert source(refused) == (
        503,
        "cannot read the cluster: cannot list pods: 403 Forbidden: pods is forbidden\n",
    )


def test_the_page_is_kept_for_refresh_seconds_and_a_failure_is_not_kept() -> None:
    now = [100.0]
    answers = iter([(200, "one"), (200, "two"), (503, "down\n"), (200, "three")])
    live = rs.LivePage(lambda: next(answers), refresh=30, clock=lambda: now[0])
    assert live() == (200, "one")
    now[0] += 29.9
    assert live() == (200, "one")
    now[0] += 0.1  # 30 s after it was built
    assert live() == (200, "two")
    now[0] += 30
    assert live() == (503, "down\n")
    assert live() == (200, "three")  # at once: the failure was not kept
    assert live.builds == 4


def test_a_prometheus_that_fails_is_named_on_the_page(
    cluster: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(*_: object) -> dict:
        raise rs.fa.ActivityError("http://p:9090 does not answer\nsecond line")

    monkeypatch.setattr(rs.fa, "fetch", down)
    status, page = rs.page(rs.Source(prometheus="http://p:9090"))
    assert status == 200
    assert "<li>GPU activity: idle not measured: http://p:9090 does not answer</li>" in page


def test_report_of_says_why_the_namespaces_are_missing(monkeypatch) -> None:
    """Both the page and ``gpufleet report`` build the document with ``report_of``: a
    namespaces list that failed leaves the teams without namespace labels and names the
    error's first line."""
    monkeypatch.setattr(rs, "report_meta", lambda *_: dict(META))
    listing = fake_listing()
    listing.errors["namespaces"] = 'namespaces is forbidden: User "viewer"\nsecond line'
    doc = rs.report_of(SimpleNamespace(), listing, rs.Source(), None)
    assert doc["teams"]["namespaces_error"] == 'namespaces is forbidden: User "viewer"'
    assert doc["meta"] == META
    clean = rs.report_of(SimpleNamespace(), fake_listing(), rs.Source(), None)
    assert "namespaces_error" not in clean["teams"]
