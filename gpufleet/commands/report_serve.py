"""``gpufleet report --serve HOST:PORT``: the report's object state as Prometheus metrics,
listed again for every scrape of ``/metrics`` (``report.metrics.render``), for the
monitoring role's rules on leaked and pending claims and GPU nodes without devices; and
the report's HTML page (``render.fleet_report.render_html``) at ``/``, built from a new
listing when a request comes and the page in hand is ``--refresh`` seconds old or older.

A listing that fails answers 503: ``/metrics`` with the error on one line and
``gpufleet_report_up 0``, so Prometheus keeps scraping and the target shows the fault;
``/`` with the error on one line of plain text, and the next request lists again. Every
request to the API server (and to Prometheus) has its own deadline (``kube.client``,
``report.activity``), so a request to this server waits for at most one listing.
"""

from __future__ import annotations

import datetime as _dt
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import (
    listing as cluster_listing,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import activity as fa
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import metrics as fm
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import teams as ft

from gpufleet.commands._cluster import KINDS, readable_kinds
from gpufleet.render import fleet_report as rp
from gpufleet.render.text import printable

#: Seconds a served page is answered again before the cluster is listed anew (--refresh).
DEFAULT_REFRESH = 30
#: The longest error line a 503 answers with (the client's lines, cause and fix, are shorter).
MAX_ERROR = 500
#: Content-Type of the page and of the plain answers (an error, 404).
HTML_TYPE = "text/html; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
#: Seconds a connection may keep the server waiting for its request, or for reading the
#: answer, before it is closed (a client that sends half a request holds a thread no longer).
CLIENT_TIMEOUT = 30


#: A host to listen on: an IPv4 or IPv6 address (a zone after ``%``) or a host name.
_HOST = re.compile(r"[A-Za-z0-9._:%-]*", re.ASCII)


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (all addresses) as (host, port), ``[::1]:PORT`` for an
    IPv6 address; raises ``click.BadParameter`` naming ``--serve`` otherwise (a port of
    other than ASCII digits or outside 1-65535, a host of other characters than an
    address or a host name has)."""
    host, sep, port = text.rpartition(":")
    ok = port.isascii() and port.isdigit() and _HOST.fullmatch(host.strip("[]"))
    if not sep or not ok or not 0 < int(port) < 65536:
        raise click.BadParameter(
            f"{text!r} is not HOST:PORT; pass for example 0.0.0.0:9477 or :9477",
            param_hint="'--serve'",
        )
    return host.strip("[]") or "0.0.0.0", int(port)


class ListingFailed(Exception):
    """The cluster could not be listed; the message is one line, cut to ``MAX_ERROR``."""


@dataclass(frozen=True)
class Source:
    """What each listing reads and how the report counts it (``gpufleet report``'s
    options): the kubeconfig and context, the pool and team labels, and with
    ``prometheus`` the activity window and the idle threshold (percent)."""

    kubeconfig: str | None = None
    context: str | None = None
    pool_label: str = fr.DEFAULT_POOL_LABEL
    team_label: str = ft.DEFAULT_TEAM_LABEL
    prometheus: str | None = None
    idle_window: str = fa.DEFAULT_WINDOW
    idle_below: float = fa.DEFAULT_IDLE_PERCENT


def _line(text: str) -> str:
    """The first line of ``text``, cut to ``MAX_ERROR``, its control characters and lone
    surrogates escaped (``render.text.printable``): a server's message is served to any client."""
    return printable(text.splitlines()[0][:MAX_ERROR]) if text else "?"


def read_report(source: Source) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """(report with ``meta``, Nodes, note) of one listing of the cluster (its Namespaces
    too, for the teams; the figures per namespace stand without them) and, with
    ``source.prometheus``, of the allocated devices' activity (a query that fails leaves
    the idle figures out and says why in ``note``, one line; else ``note`` is "").
    Raises ``ListingFailed`` when the API server does not answer, refuses a kind of
    ``KINDS`` or serves no resource.k8s.io version the report reads."""
    try:
        kube = vk.Kube(source.kubeconfig, source.context)
        kinds = (*KINDS, "namespaces")
        listing = cluster_listing.list_cluster(kube, kinds=kinds, keep=readable_kinds(kinds))
    except vk.KubeError as err:
        raise ListingFailed(_line(err.message)) from None
    failed = {k: v for k, v in listing.errors.items() if k in KINDS}
    if not listing.resource_version or failed:
        why = "; ".join(f"{k}: {v}" for k, v in failed.items()) or "resource.k8s.io not served"
        raise ListingFailed(_line(f"cannot list {why}"))
    activity, note = None, ""
    if source.prometheus:
        try:
            activity = fa.fetch(source.prometheus, source.idle_window)
        except fa.ActivityError as exc:
            note = f"idle not measured: {_line(str(exc))[:200]}"
    return report_of(kube, listing, source, activity), listing.nodes, note


def report_of(
    kube: vk.Kube,
    listing: cluster_listing.Listing,
    source: Source,
    activity: dict[str, float] | None,
) -> dict[str, Any]:
    """The report document of one listing, counted as ``source`` says, with ``activity``
    (``activity.fetch``'s answer, or None) and ``meta`` (:func:`report_meta`). Namespaces
    that could not be listed leave the teams without their namespace labels and say why in
    ``teams.namespaces_error`` (one line)."""
    namespaces_error = listing.errors.get("namespaces")
    with vk.gc_paused():  # the pages walked make millions of objects, no cycles
        doc = fr.build_report(
            listing.slices,
            listing.claims,
            listing.pods,
            listing.nodes,
            pool_label=source.pool_label,
            namespaces=None if namespaces_error else listing.namespaces,
            team_label=source.team_label,
            activity=activity,
            activity_window=source.idle_window,
            idle_below=source.idle_below,
        )
    if namespaces_error:
        doc["teams"]["namespaces_error"] = namespaces_error.splitlines()[0][:200]
    doc["meta"] = report_meta(kube, listing)
    return doc


def report_meta(kube: vk.Kube, listing: cluster_listing.Listing) -> dict[str, Any]:
    """Where and when the report was read (``render.fleet_report.source_line``): the API
    server, its Kubernetes and resource.k8s.io versions, the API requests made, the
    version each kind was read in and the time (UTC, seconds)."""
    return {
        "server": kube.server,
        "kubernetes_version": (listing.version or {}).get("gitVersion", "?"),
        "resource_version": listing.resource_version,
        "api_requests": kube.requests,
        "sources": dict(listing.sources),
        "generated_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def scrape(
    kubeconfig: str | None,
    context: str | None,
    pool_label: str,
    team_label: str = ft.DEFAULT_TEAM_LABEL,
    prometheus: str | None = None,
    idle_window: str = fa.DEFAULT_WINDOW,
    idle_below: float = fa.DEFAULT_IDLE_PERCENT,
) -> tuple[int, str]:
    """``metrics`` of the ``Source`` of these fields."""
    return metrics(
        Source(kubeconfig, context, pool_label, team_label, prometheus, idle_window, idle_below)
    )


def metrics(source: Source) -> tuple[int, str]:
    """(HTTP status, exposition text) of one listing (``read_report``): 503 with the error
    as a comment and ``gpufleet_report_up 0`` when it fails; a Prometheus query that fails
    leaves the idle series out, with the error as a comment."""
    try:
        doc, nodes, note = read_report(source)
    except ListingFailed as err:
        return 503, f"# {err}\ngpufleet_report_up 0\n"
    comment = f"# {note}\n" if note else ""
    return 200, comment + fm.render(doc, nodes) + "gpufleet_report_up 1\n"


def page(source: Source, reload_seconds: int | None = None) -> tuple[int, str]:
    """(HTTP status, body) of the HTML page of one listing (``read_report``), the page
    ``--html`` writes (reloaded by the browser after ``reload_seconds``); 503 and one
    line of plain text when the listing fails."""
    try:
        doc, _, note = read_report(source)
    except ListingFailed as err:
        return 503, f"cannot read the cluster: {err}\n"
    if note:
        doc["activity_error"] = note
    return 200, rp.render_html(doc, reload_seconds)


class LivePage:
    """The answer of ``build`` (status, body), kept for ``refresh`` seconds after it was
    built when it is a 200: a request within that time gets it as it is, the first
    request after it builds it again; a failed build is not kept (the next request
    builds again). ``clock``: seconds, monotonic. Safe to call from several threads
    (one build at a time, the others wait for it)."""

    def __init__(
        self,
        build: Callable[[], tuple[int, str]],
        refresh: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.build, self.refresh, self.clock = build, refresh, clock
        self.builds = 0
        self._lock = threading.Lock()
        self._kept: tuple[float, str] | None = None

    def __call__(self) -> tuple[int, str]:
        with self._lock:
            if self._kept and self.clock() - self._kept[0] < self.refresh:
                return 200, self._kept[1]
            self.builds += 1
            status, body = self.build()
            self._kept = (self.clock(), body) if status == 200 else None
            return status, body


def make_server(
    address: tuple[str, int],
    collect: Callable[[], tuple[int, str]],
    page: Callable[[], tuple[int, str]] | None = None,
) -> ThreadingHTTPServer:
    """A server that answers ``GET /metrics`` with ``collect()`` (one at a time), ``GET
    /`` with ``page()`` (an HTML page when 200, under ``rp.CONTENT_SECURITY_POLICY``;
    plain text otherwise) and 404 elsewhere (and at ``/`` without ``page``); 500 and one
    line when building an answer raises. A connection that sends no full request within
    ``CLIENT_TIMEOUT`` seconds is closed. Raises ``OSError`` when the address cannot be
    bound."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        timeout = CLIENT_TIMEOUT

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path == "/metrics":
                with lock:
                    status, text = self._built(collect)
                self._answer(status, fm.CONTENT_TYPE, text)
            elif path == "/" and page is not None:
                status, text = self._built(page)
                self._answer(status, HTML_TYPE if status == 200 else TEXT_TYPE, text)
            else:
                self._answer(404, TEXT_TYPE, "not found: the pages are / and /metrics\n")

        def _built(self, build: Callable[[], tuple[int, str]]) -> tuple[int, str]:
            """``build()``; an error it raises (a report of a shape the renderer does not
            expect) costs this answer, a 500 of one line, never the server or a traceback."""
            try:
                return build()
            except Exception as err:
                line = _line(f"{type(err).__name__}: {err}")
                sys.stderr.write(f"error: GET {printable(self.path[:80])}: {line}\n")
                return 500, f"cannot build the answer: {line}\n"

        def _answer(self, status: int, content_type: str, text: str) -> None:
            body = text.encode("utf-8", "replace")  # a lone surrogate as "?"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            if content_type == HTML_TYPE:
                self.send_header("Content-Security-Policy", rp.CONTENT_SECURITY_POLICY)
                self.send_header("Referrer-Policy", "no-referrer")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return ThreadingHTTPServer(address, Handler)
