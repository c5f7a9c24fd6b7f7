"""``gpufleet report``: how the GPUs of a DRA cluster are used, from one listing.

``gpufleet report [--kubeconfig PATH] [--context NAME] [--pool-label LABEL]
[--team-label LABEL] [--json FILE|-] [--markdown FILE] [--html FILE] [--metrics FILE]
[--serve HOST:PORT [--refresh SECONDS]] [--prometheus URL [--idle-window 1h]
[--idle-below 5]]`` lists
Nodes, Pods, ResourceSlices and ResourceClaims once each (paged, every request with a timeout:
``kube.client.list_cluster``) and prints per node pool, GPU model and MIG profile the
devices and GPU memory published, allocated, free and stranded, the fragmentation, the
pending claims and why, the claims allocated with no running consumer and, with
``--prometheus``, the allocated devices idle over the window (``report.activity``); beside
them, per pool, the GPUs NVIDIA's device plugin advertises and its pods hold, so that both
paths are counted (``report.paths``); and per team (the ``--team-label`` label of
the claim's Namespace, listed too) and namespace the devices and GPU memory allocated, idle
and leaked (``report.teams``). The figures and their definitions are
``plugins/module_utils/report/fleet.py`` and ``paths.py`` (docs/report.md).

``--metrics FILE`` writes the leaked and pending claims and the devices of every GPU node
as Prometheus metrics (``report.metrics``); ``--serve HOST:PORT`` lists the cluster again for
every scrape of ``http://HOST:PORT/metrics`` and serves them until interrupted
(``report_serve``, docs/monitoring.md), and serves at ``http://HOST:PORT/`` the page
``--html`` writes, listed again when a request comes and the page is ``--refresh SECONDS``
old (default 30; the page reloads itself as often; docs/report.md).

Exit codes: 0 the report was written, 2 it could not run (kubeconfig, API server
unreachable or refusing, DRA not served, Prometheus not answering, an output path that
cannot be written).
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names as kn
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import activity as fa
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import metrics as fm
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import teams as ft
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpufleet.commands import report_serve as rs
from gpufleet.commands._cluster import read_cluster
from gpufleet.commands._output import check_outputs, stdout_taken, write_json, write_output
from gpufleet.exit import EXIT_CANNOT_RUN, exit_with
from gpufleet.render import fleet_report as rp

#: Pending and leaked claims printed on the terminal (all of them are in --json).
SHOWN = 15
#: Control characters (a line break, the escape that starts a terminal sequence) in a name
#: the cluster gave: shown as ``\xNN``, never sent to the terminal as they are.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _fail(message: str) -> NoReturn:
    Console(stderr=True).print(f"[red]error:[/red] {escape(message)}")
    exit_with(EXIT_CANNOT_RUN)


def _plain(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _shown(text: str) -> str:
    """``text`` as terminal markup: control characters shown (``_plain``), markup escaped."""
    return escape(_plain(text))


def _table(report: dict[str, Any]) -> Table:
    table = Table(
        title=f"devices per pool ({report['pool_label'] or 'no pool label'}), model and profile",
        title_justify="left",
    )
    for name in ("pool", "model", "profile"):
        table.add_column(name, no_wrap=True)
    for _, head, _ in rp.COLUMNS:
        table.add_column(head, justify="right")
    for row in report["rows"]:
        table.add_row(
            *(_shown(str(row[k])) for k in ("pool", "model", "profile")),
            *(rp.cell(row, k, b) for k, _, b in rp.COLUMNS),
        )
    return table


def _paths_table(report: dict[str, Any]) -> Table:
    table = Table(title="GPUs per path (NVIDIA device plugin, DRA) and pool", title_justify="left")
    for name in ("pool", "path"):
        table.add_column(name, no_wrap=True)
    for name in rp.PATH_COLUMNS:
        table.add_column(name, justify="right")
    table.add_column("allocated/devices per profile")
    for row in report["paths"].get("pools") or []:
        table.add_row(_shown(str(row["pool"])), row["path"], *map(_shown, rp.path_cells(row)))
    return table


def _teams_table(report: dict[str, Any]) -> Table:
    teams = report["teams"]
    table = Table(
        title=f"GPUs held per team ({teams['label']} label of the claim's namespace)",
        title_justify="left",
    )
    table.add_column("team", no_wrap=True)
    for _, head, _ in rp.TEAM_COLUMNS:
        table.add_column(head, justify="right")
    table.add_column("namespaces")
    for row in teams["teams"][:SHOWN]:
        table.add_row(
            Text(_plain(row["team"])),
            *rp.team_cells(row, teams["idle_measured"]),
            Text(_plain(", ".join(row["namespaces"]))),
        )
    return table


def _counters_table(report: dict[str, Any]) -> Table:
    table = Table(title="GPUs with shared counters (dynamic MIG)", title_justify="left")
    for i, name in enumerate(rp.COUNTER_COLUMNS):
        table.add_column(name, no_wrap=i < 3, justify="right" if 3 <= i <= 7 else "left")
    for row in report["gpus"][:SHOWN]:
        table.add_row(*(Text(_plain(c)) for c in rp.counter_cells(row)))
    return table


def render_terminal(console: Console, report: dict[str, Any]) -> None:
    """The table per pool, model and profile, the table per GPU path and pool, the
    headline with a line per path, fragmentation per pool, and the first ``SHOWN``
    pending and leaked claims."""
    console.print(_table(report))
    paths = rp.path_lines(report)
    if paths:
        console.print(_paths_table(report))
    if report.get("gpus"):
        console.print(_counters_table(report))
    if (report.get("teams") or {}).get("teams"):
        console.print(_teams_table(report))
    lines = [*rp.headline(report), *paths, *rp.counter_lines(report), *rp.team_lines(report)]
    for line in lines:
        console.print(_shown(line))
    for pool in report["pools"]:
        console.print(
            f"  pool {_shown(pool['pool'])}: fragmentation {rp.percent(pool['fragmentation'])}"
            f" of {rp.gib(pool['memory_free'])} GiB free"
        )
    for p in report["pending"][:SHOWN]:
        shapes = "; ".join(f"{r['request']}: {', '.join(r['shapes'])}" for r in p["requests"])
        console.print(
            f"  pending {_shown(p['claim'])}: [yellow]{p['reason']}[/] ({_shown(shapes)})"
        )
    for item in report["leaked"][:SHOWN]:
        console.print(
            f"  [red]leaked[/] {_shown(item['claim'])} ({item['kind']}, "
            f"{rp.gib(item['memory'])} GiB): {_shown(item['reason'])}"
        )
    for item in (report.get("idle") or [])[:SHOWN]:
        console.print(
            f"  [yellow]idle[/] {_shown(item['claim'])} holds {_shown(item['device'])} on "
            f"{_shown(item['node'])}: {item['percent']}% over {report['activity']['window']}"
        )
    hidden = max(0, len(report["pending"]) - SHOWN) + max(0, len(report["leaked"]) - SHOWN)
    hidden += max(0, len(report.get("idle") or []) - SHOWN)
    if hidden:
        console.print(f"  ... {hidden} more claims (see --json)")
    console.print(f"[dim]{_shown(rp.source_line(report['meta']))}[/]")


def _serve(address: tuple[str, int], source: rs.Source, refresh: int) -> None:
    live = rs.LivePage(lambda: rs.page(source, reload_seconds=refresh), refresh)
    try:
        server = rs.make_server(address, lambda: rs.metrics(source), page=live)
    except OSError as err:
        _fail(f"--serve {address[0]}:{address[1]}: {err.strerror}; fix: pick a free port")
    url = f"http://{address[0]}:{address[1]}"
    Console(stderr=True).print(
        f"serving the report on {url}/ (listed again at most every {refresh}s) and metrics "
        f"on {url}/metrics (listed per scrape); Ctrl-C stops"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def check_team_label(value: str) -> str:
    """``value`` when it is a Kubernetes label key; click.BadParameter (exit 2) otherwise."""
    why = kn.qualified_name(value)
    if why:
        raise click.BadParameter(
            f"{value[:80]!r} {why}; fix: give a label key such as {ft.DEFAULT_TEAM_LABEL} "
            "(the label of your namespaces that names their team)",
            param_hint="'--team-label'",
        )
    return value


@click.command("report")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig.")
@click.option("--context", default=None, help="Kubeconfig context.")
@click.option(
    "--pool-label",
    default=fr.DEFAULT_POOL_LABEL,
    show_default=True,
    help="Node label whose value names the node pool ('': one pool).",
)
@click.option(
    "--team-label",
    default=ft.DEFAULT_TEAM_LABEL,
    show_default=True,
    callback=lambda _ctx, _param, value: check_team_label(value),
    help="Namespace label whose value names the team of the claims in it.",
)
@click.option("--json", "json_file", metavar="FILE", help="Write the report as JSON ('-': stdout).")
@click.option("--markdown", metavar="FILE", help="Write the report as Markdown ('-': stdout).")
@click.option(
    "--html", "html_file", metavar="FILE", help="Write a self-contained HTML page ('-': stdout)."
)
@click.option(
    "--metrics",
    "metrics_file",
    metavar="FILE",
    help="Write claims and GPU node devices as Prometheus metrics (textfile; '-': stdout).",
)
@click.option(
    "--serve",
    metavar="HOST:PORT",
    help="Serve the HTML page on http://HOST:PORT/ and the metrics on /metrics (listed "
    "again per scrape).",
)
@click.option(
    "--refresh",
    type=click.IntRange(min=1),
    default=rs.DEFAULT_REFRESH,
    show_default=True,
    metavar="SECONDS",
    help="With --serve: the page at / is listed again at most this often, and reloads itself.",
)
@click.option(
    "--prometheus",
    metavar="URL",
    help="Prometheus that scrapes the DCGM exporter (DRA labels on): allocated devices' "
    "activity, and the idle ones.",
)
@click.option(
    "--idle-window",
    default=fa.DEFAULT_WINDOW,
    show_default=True,
    help="Window the activity is averaged over (a Prometheus duration).",
)
@click.option(
    "--idle-below",
    type=click.FloatRange(0, 100),
    default=fa.DEFAULT_IDLE_PERCENT,
    show_default=True,
    help="An allocated device below this activity (percent) is idle.",
)
def report(
    kubeconfig: str | None,
    context: str | None,
    pool_label: str,
    team_label: str,
    json_file: str | None,
    markdown: str | None,
    html_file: str | None,
    metrics_file: str | None,
    serve: str | None,
    refresh: int,
    prometheus: str | None,
    idle_window: str,
    idle_below: float,
) -> None:
    """GPU utilization of a DRA cluster; exit 0 report written, 2 could not run."""
    outputs = {
        "--json": json_file,
        "--markdown": markdown,
        "--html": html_file,
        "--metrics": metrics_file,
    }
    check_outputs(outputs)
    try:
        fa.check_window(idle_window)
    except fa.ActivityError as exc:
        raise click.BadParameter(str(exc), param_hint="'--idle-window'") from None
    if prometheus is not None:
        try:
            fa.check_url(prometheus)
        except fa.ActivityError as exc:
            raise click.BadParameter(str(exc), param_hint="'--prometheus'") from None
    address = rs.parse_address(serve) if serve is not None else None
    if kubeconfig:
        try:
            vk.check_kubeconfig(kubeconfig)
        except vk.KubeError as exc:
            raise click.BadParameter(exc.message, param_hint="'--kubeconfig'") from None
    source = rs.Source(
        kubeconfig, context, pool_label, team_label, prometheus, idle_window, idle_below
    )
    if address:
        _serve(address, source, refresh)
        return
    kube, listing = read_cluster(kubeconfig, context, optional=("namespaces",))
    activity = None
    if prometheus:
        try:
            activity = fa.fetch(prometheus, idle_window)
        except fa.ActivityError as exc:
            _fail(f"--prometheus: {exc}")
    doc = rs.report_of(kube, listing, source, activity)
    render_terminal(Console(stderr=stdout_taken(outputs)), doc)
    if json_file:
        write_json(doc, json_file)
    if markdown:
        write_output(rp.render_markdown(doc), markdown, "--markdown")
    if html_file:
        write_output(rp.render_html(doc), html_file, "--html")
    if metrics_file:
        write_output(fm.render(doc, listing.nodes), metrics_file, "--metrics")
