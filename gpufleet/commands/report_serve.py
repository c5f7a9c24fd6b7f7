"""``gpufleet report --serve HOST:PORT``: the report's object state as Prometheus metrics,
listed again for every scrape of ``/metrics`` (``report.metrics.render``), for the
monitoring role's rules on leaked and pending claims and GPU nodes without devices.

A listing that fails answers 503 with the error on one line and
``gpufleet_report_up 0``, so Prometheus keeps scraping and the target shows the fault.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import (
    listing as cluster_listing,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import activity as fa
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import metrics as fm
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import teams as ft

from gpufleet.commands._cluster import KINDS


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (all addresses) as (host, port); raises
    ``click.BadParameter`` naming ``--serve`` otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(
            f"{text!r} is not HOST:PORT; pass for example 0.0.0.0:9477 or :9477",
            param_hint="'--serve'",
        )
    return host.strip("[]") or "0.0.0.0", int(port)


def scrape(
    kubeconfig: str | None,
    context: str | None,
    pool_label: str,
    team_label: str = ft.DEFAULT_TEAM_LABEL,
    prometheus: str | None = None,
    idle_window: str = fa.DEFAULT_WINDOW,
    idle_below: float = fa.DEFAULT_IDLE_PERCENT,
) -> tuple[int, str]:
    """(HTTP status, exposition text) of one listing of the cluster (its Namespaces too,
    for the teams; the figures per namespace stand without them) and, with
    ``prometheus``, of the allocated devices' activity (a query that fails leaves the idle
    series out, with the error as a comment)."""
    try:
        kube = vk.Kube(kubeconfig, context)
        listing = cluster_listing.list_cluster(kube, kinds=(*KINDS, "namespaces"))
    except vk.KubeError as err:
        return 503, f"# {err.message.splitlines()[0]}\ngpufleet_report_up 0\n"
    failed = {k: v for k, v in listing.errors.items() if k in KINDS}
    if not listing.resource_version or failed:
        why = "; ".join(f"{k}: {v}" for k, v in failed.items()) or "resource.k8s.io not served"
        return 503, f"# cannot list {why.splitlines()[0]}\ngpufleet_report_up 0\n"
    activity, note = None, ""
    if prometheus:
        try:
            activity = fa.fetch(prometheus, idle_window)
        except fa.ActivityError as exc:
            note = f"# idle not measured: {str(exc).splitlines()[0][:200]}\n"
    doc = fr.build_report(
        listing.slices,
        listing.claims,
        listing.pods,
        listing.nodes,
        pool_label=pool_label,
        namespaces=None if "namespaces" in listing.errors else listing.namespaces,
        team_label=team_label,
        activity=activity,
        activity_window=idle_window,
        idle_below=idle_below,
    )
    return 200, note + fm.render(doc, listing.nodes) + "gpufleet_report_up 1\n"


def make_server(
    address: tuple[str, int], collect: Callable[[], tuple[int, str]]
) -> ThreadingHTTPServer:
    """A server that answers ``GET /metrics`` with ``collect()`` (one at a time) and 404
    elsewhere. Raises ``OSError`` when the address cannot be bound."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics")
                return
            with lock:
                status, text = collect()
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", fm.CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    return ThreadingHTTPServer(address, Handler)
