"""The utilization report (``report.fleet.build_report`` plus ``meta``) as Markdown and as
a self-contained HTML page (one inline style sheet and inline SVG bar charts, no script,
no style attribute and no external request, so it can be mailed or attached to a CI run
as it is, and served under ``CONTENT_SECURITY_POLICY``), and the lines the terminal
shares with them."""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.render.text import printable

GIB = 2**30
#: Columns of the per profile tables: (key, heading, bytes or not).
COLUMNS = (
    ("devices_published", "published", False),
    ("devices_allocated", "allocated", False),
    ("devices_free", "free", False),
    ("memory_published", "memory GiB", True),
    ("memory_allocated", "allocated GiB", True),
    ("memory_free", "free GiB", True),
    ("memory_stranded", "stranded GiB", True),
)
#: Pending claims and leaked claims listed in a page (all of them are in the JSON).
LISTED = 50


def gib(value: int | float) -> str:
    """Bytes as GiB with one decimal (``143771Mi`` -> ``140.4``); exact for integers too
    large for a float (a capacity of ``1e400``)."""
    if isinstance(value, int) and value >= 0:
        tenths, rest = divmod(value * 10, GIB)
        tenths += 2 * rest > GIB or (2 * rest == GIB and tenths % 2)  # half to even, as .1f
        return f"{tenths // 10}.{tenths % 10}"
    return f"{value / GIB:.1f}"


def percent(value: float | None) -> str:
    """A fraction as a percentage, ``-`` for None (nothing free)."""
    return "-" if value is None else f"{value * 100:.1f}%"


def cell(row: Mapping[str, Any], key: str, as_bytes: bool) -> str:
    return gib(row[key]) if as_bytes else str(row[key])


def source_line(meta: Mapping[str, Any]) -> str:
    """Where and when the report was read: server, versions, time, API requests."""
    get = meta.get
    return (
        f"Cluster {get('server', '?')}, Kubernetes {get('kubernetes_version', '?')}, "
        f"resource.k8s.io/{get('resource_version', '?')}; read {get('generated_at', '?')} in "
        f"{get('api_requests', '?')} API requests."
    )


def headline(report: Mapping[str, Any]) -> list[str]:
    """One-line facts of the cluster, shared by the terminal, Markdown and HTML."""
    c = report["cluster"]
    reasons = ", ".join(f"{n} {r}" for r, n in c["pending_by_reason"].items() if n)
    skipped = c.get("objects_skipped") or {}
    unread = (
        [
            "objects not read (a field of another type than the API's): "
            + ", ".join(f"{n} {k}" for k, n in skipped.items())
        ]
        if skipped
        else []
    )
    return [
        *unread,
        f"{c['devices_published']} devices published on {_publishing(c)} node(s), "
        f"{c['devices_allocated']} allocated, {c['devices_free']} free" + _blocked(c),
        f"GPU memory: {gib(c['memory_published'])} GiB published, "
        f"{gib(c['memory_allocated'])} GiB allocated, {gib(c['memory_free'])} GiB free, "
        f"{gib(c['memory_stranded'])} GiB stranded",
        f"fragmentation: {percent(c['fragmentation'])}",
        f"claims pending: {c['claims_pending']}" + (f" ({reasons})" if reasons else ""),
        f"claims allocated with no running consumer: {c['claims_leaked']} holding "
        f"{gib(c['memory_leaked'])} GiB",
        activity_line(report),
    ]


def _blocked(cluster: Mapping[str, Any]) -> str:
    """``, N blocked by shared counters`` (placements of dynamic MIG GPUs that allocated
    devices leave too few counters for); empty when none is, or for a report without the
    count."""
    n = cluster.get("devices_blocked") or 0
    return f", {n} blocked by shared counters" if n else ""


def activity_line(report: Mapping[str, Any]) -> str:
    """What the GPU activity says of the allocated devices, or why it was not measured
    (``activity_error``: the Prometheus query failed; or it was not asked)."""
    a = report.get("activity")
    if not a and report.get("activity_error"):
        return f"GPU activity: {report['activity_error']}"
    if not a:
        return "GPU activity: not measured (--prometheus URL of a Prometheus with DCGM metrics)"
    return (
        f"allocated devices idle (below {a['idle_below_percent']:g}% over {a['window']}): "
        f"{a['devices_idle']} of {a['devices_measured']} measured "
        f"({a['devices_allocated']} allocated)"
    )


def idle_items(report: Mapping[str, Any]) -> list[str]:
    """One line per idle allocated device (the first ``LISTED``)."""
    return [
        f"{item['claim']} holds {item['device']} ({item['profile']}) on {item['node']}: "
        f"{item['percent']:g}%"
        for item in (report.get("idle") or [])[:LISTED]
    ]


#: Columns of the per team and per namespace tables: (key, heading, bytes or not).
TEAM_COLUMNS = (
    ("devices_allocated", "allocated", False),
    ("memory_allocated", "allocated GiB", True),
    ("devices_idle", "idle", False),
    ("memory_idle", "idle GiB", True),
    ("devices_leaked", "leaked", False),
    ("memory_leaked", "leaked GiB", True),
)


def team_cells(row: Mapping[str, Any], idle_measured: bool) -> list[str]:
    """The ``TEAM_COLUMNS`` of a team or namespace row, ``-`` for idle when not measured."""
    return [
        "-" if "idle" in k and not idle_measured else cell(row, k, b) for k, _, b in TEAM_COLUMNS
    ]


def _held(row: Mapping[str, Any], what: str) -> str:
    n = row[f"devices_{what}"]
    return f"{row['team']} {n} device{'s' * (n != 1)} {gib(row[f'memory_{what}'])} GiB"


def team_lines(report: Mapping[str, Any]) -> list[str]:
    """Who holds idle and leaked GPUs: one line for the idle devices per team (most idle
    memory first), one for the leaked ones, and a note when the Namespaces (and so
    their team labels) could not be listed; none for a report without ``teams``."""
    t = report.get("teams")
    if not isinstance(t, Mapping):
        return []
    label = t.get("label", "")
    rows = t.get("teams") or []
    if t.get("idle_measured"):
        idle = ", ".join(_held(r, "idle") for r in rows if r["devices_idle"]) or "none"
    else:
        idle = "not measured (--prometheus)"
    ranked = sorted(rows, key=lambda r: (-r["memory_leaked"], r["team"]))
    leaked = ", ".join(_held(r, "leaked") for r in ranked if r["devices_leaked"]) or "none"
    lines = [f"idle GPUs by team ({label}): {idle}", f"leaked GPUs by team ({label}): {leaked}"]
    if not t.get("namespaces_listed", True):
        why = f": {t['namespaces_error']}" if t.get("namespaces_error") else ""
        lines.append(
            f"namespaces not listed{why}; every team is (no team) (fix: allow list on namespaces)"
        )
    return lines


#: Columns of the per path tables: the pool and path, then these keys.
PATH_COLUMNS = ("nodes", "devices", "allocated", "free", "utilization")


def path_cells(row: Mapping[str, Any]) -> list[str]:
    """The ``PATH_COLUMNS`` of one row of ``paths`` (utilization as a percentage), then
    its profiles as ``allocated/devices`` (``gpu 14/18, 1g.10gb 2/7``)."""
    cells = [str(row[k]) for k in PATH_COLUMNS[:-1]] + [percent(row["utilization"])]
    profiles = ", ".join(
        f"{p} {v['allocated']}/{v['devices']}" for p, v in (row.get("profiles") or {}).items()
    )
    return [*cells, profiles or "-"]


def path_lines(report: Mapping[str, Any]) -> list[str]:
    """One line per GPU path for the cluster (``device-plugin: 16 of 25 devices allocated
    (64.0%) on 4 node(s)``) and one naming the nodes on both paths; none for a report
    without ``paths`` (written before the figures existed)."""
    paths = report.get("paths")
    if not isinstance(paths, Mapping):
        return []
    lines = [
        f"{r['path']}: {r['allocated']} of {r['devices']} devices allocated "
        f"({percent(r['utilization'])}) on {r['nodes']} node(s)"
        for r in paths.get("cluster") or []
    ]
    both = paths.get("nodes_both") or []
    if both:
        lines.append(
            f"{len(both)} node(s) advertise their GPUs through both paths and count on both: "
            + ", ".join(both[:LISTED])
            + " (gpufleet validate: nodes.gpu-path-dual)"
        )
    return lines


#: Headings of the per GPU table of shared counters (``counter_cells``).
COUNTER_COLUMNS = (
    "node",
    "GPU",
    "model",
    "memory slices free",
    "stranded slices",
    "stranded GiB",
    "SMs free",
    "SMs stranded",
    "profiles that fit",
    "claims",
)


def _slices(indexes: Sequence[int], total: int | None = None) -> str:
    listed = ", ".join(map(str, indexes)) or "none"
    return listed if total is None else f"{len(indexes)}/{total}: {listed}"


def counter_cells(row: Mapping[str, Any]) -> list[str]:
    """The ``COUNTER_COLUMNS`` of one row of ``gpus`` (``report.fleet.counter_gpus``)."""
    return [
        str(row["node"]),
        str(row["gpu"]),
        str(row["model"]),
        _slices(row["memory_slices_free"], row["memory_slices"]),
        _slices(row["memory_slices_stranded"]) if row["memory_slices_stranded"] else "0",
        gib(row["memory_stranded"]),
        f"{row['multiprocessors_free']}/{row['multiprocessors']}",
        str(row["multiprocessors_stranded"]),
        ", ".join(row["profiles_fitting"]) or "none",
        ", ".join(row["claims"][:LISTED]) or "-",
    ]


def counter_lines(report: Mapping[str, Any]) -> list[str]:
    """One line of the GPUs published with shared counters (dynamic MIG): memory slices
    and multiprocessors free and stranded; none for a report without such GPUs."""
    sums = (report.get("cluster") or {}).get("shared_counters") or {}
    if not sums.get("gpus"):
        return []
    return [
        f"GPUs with shared counters (dynamic MIG): {sums['gpus']}, memory slices "
        f"{sums['memory_slices_free']} of {sums['memory_slices']} free, "
        f"{sums['memory_slices_stranded']} stranded ({gib(sums['memory_stranded'])} GiB), "
        f"multiprocessors {sums['multiprocessors_free']} of {sums['multiprocessors']} free, "
        f"{sums['multiprocessors_stranded']} stranded"
    ]


def _md_counters(report: Mapping[str, Any]) -> list[str]:
    """The section of GPUs published with shared counters, none without such GPUs."""
    lines = counter_lines(report)
    if not lines:
        return []
    out = ["## GPUs with shared counters (dynamic MIG)", "", *(f"- {line}" for line in lines), ""]
    out += ["| " + " | ".join(COUNTER_COLUMNS) + " |", "|" + "---|" * len(COUNTER_COLUMNS)]
    for row in report.get("gpus") or []:
        out.append("| " + " | ".join(_md_cell(c) for c in counter_cells(row)) + " |")
    return [*out, ""]


def _md_table(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[str]:
    heads = [*keys, *(h for _, h, _ in COLUMNS)]
    out = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for row in rows:
        cells = [str(row[k]) for k in keys] + [cell(row, k, b) for k, _, b in COLUMNS]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return out


def _md_paths(report: Mapping[str, Any]) -> list[str]:
    """The section of GPU use per path (NVIDIA's device plugin and DRA) and pool."""
    lines = path_lines(report)
    if not lines:
        return []
    heads = ["pool", "path", *PATH_COLUMNS, "allocated/devices per profile"]
    out = ["## GPUs per path and pool", "", *(f"- {line}" for line in lines), ""]
    out += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for row in report["paths"].get("pools") or []:
        cells = [str(row["pool"]), row["path"], *path_cells(row)]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return [*out, ""]


def _md_teams(report: Mapping[str, Any]) -> list[str]:
    """The section of devices and memory held per team and per namespace."""
    lines = team_lines(report)
    if not lines:
        return []
    t = report["teams"]
    measured = bool(t.get("idle_measured"))
    out = ["## Waste by team", "", *(f"- {_md_cell(line)}" for line in lines), ""]
    for key, rows in (("team", t.get("teams") or []), ("namespace", t.get("namespaces") or [])):
        keys = (key,) if key == "team" else ("namespace", "team")
        heads = [*keys, *(h for _, h, _ in TEAM_COLUMNS)]
        out += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        for row in rows:
            cells = [str(row[k]) for k in keys] + team_cells(row, measured)
            out.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
        out.append("")
    return out


def _md_cell(text: str) -> str:
    """A table cell: ``|`` escaped, ``<``, ``>`` and ``&`` as entities, no line break."""
    text = html.escape(" ".join(text.split()), quote=False)
    return text.replace("|", "\\|")


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown: headline, per pool and per model fragmentation, the per
    pool, model and profile table, the GPUs per path and pool, the GPUs with shared
    counters, pending and leaked claims (the first ``LISTED``)."""
    meta = report.get("meta") or {}
    out = [
        "# GPU fleet utilization",
        "",
        source_line(meta) + " Definitions: docs/report.md.",
        "",
        *(f"- {line}" for line in headline(report)),
        "",
        "## Fragmentation",
        "",
        "| pool | fragmentation | free GiB |",
        "|---|---|---|",
        *(
            f"| {p['pool']} | {percent(p['fragmentation'])} | {gib(p['memory_free'])} |"
            for p in report["pools"]
        ),
        "",
        f"## Devices per pool ({report.get('pool_label') or 'no pool label'}), model and profile",
        "",
        *_md_table(report["rows"], ("pool", "model", "profile")),
        "",
        *_md_paths(report),
        *_md_counters(report),
        *_md_teams(report),
        "## Pending claims",
        "",
    ]
    pending = report["pending"]
    out += [
        f"- `{p['claim']}`: {p['reason']}: "
        + "; ".join(
            f"{r['request']}: {', '.join(r['shapes'])} ({r['reason']})" for r in p["requests"]
        )
        for p in pending[:LISTED]
    ] or ["none"]
    out += ["", "## Claims allocated with no running consumer", ""]
    out += [
        f"- `{item['claim']}` ({item['kind']}, {gib(item['memory'])} GiB): {item['reason']}"
        for item in report["leaked"][:LISTED]
    ] or ["none"]
    if report.get("activity"):
        out += ["", "## Allocated devices idle", ""]
        out += [f"- {line}" for line in idle_items(report)] or ["none"]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ HTML

ALLOCATED, FREE, STRANDED = "#2271b1", "#9ec2e6", "#dba617"
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#1d2327}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.9em}
th,td{border:1px solid #ccd0d4;padding:.25em .6em;text-align:right}
th:first-child,td:first-child,th.t,td.t{text-align:left}
.big{font-size:2.2em;font-weight:600}.dim{color:#646970}
.legend span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:middle}
ul{padding-left:1.2em}code{font-size:.9em}
""" + "".join(
    f".legend .{name}{{background:{color}}}"
    for name, color in (("allocated", ALLOCATED), ("free", FREE), ("stranded", STRANDED))
)
#: The Content-Security-Policy a server sends with the page: nothing is loaded (no script,
#: image, font, frame, form target or base URL), and the one style sheet applied is the
#: page's own ``CSS``, named by its SHA-256 (so an injected ``<style>`` would not apply).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"style-src 'sha256-{base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()}'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
BAR_W, ROW_H, LABEL_W = 420, 26, 250


def _esc(value: Any) -> str:
    return html.escape(printable(str(value)), quote=True)


def profile_chart(profiles: Sequence[Mapping[str, Any]]) -> str:
    """An SVG of one bar per (model, profile): allocated, then free devices, the bar
    length proportional to devices published; the stranded share of free memory as a
    strip under the free part."""
    most = max((p["devices_published"] for p in profiles), default=0) or 1
    height = ROW_H * len(profiles) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL_W + BAR_W + 240}" '
        f'height="{height}" role="img" aria-label="devices per MIG profile">'
    ]
    for i, p in enumerate(profiles):
        y = 5 + i * ROW_H
        alloc = BAR_W * p["devices_allocated"] / most
        free = BAR_W * p["devices_free"] / most
        share = p["memory_stranded"] / p["memory_free"] if p["memory_free"] else 0
        parts += [
            f'<text x="0" y="{y + 15}" font-size="12">{_esc(p["model"])} '
            f'<tspan font-weight="600">{_esc(p["profile"])}</tspan></text>',
            f'<rect x="{LABEL_W}" y="{y}" width="{alloc:.1f}" height="18" fill="{ALLOCATED}">'
            f"<title>{p['devices_allocated']} allocated</title></rect>",
            f'<rect x="{LABEL_W + alloc:.1f}" y="{y}" width="{free:.1f}" height="18" '
            f'fill="{FREE}"><title>{p["devices_free"]} free</title></rect>',
            f'<rect x="{LABEL_W + alloc:.1f}" y="{y + 18}" width="{free * share:.1f}" height="4" '
            f'fill="{STRANDED}"><title>{gib(p["memory_stranded"])} GiB stranded</title></rect>',
            f'<text x="{LABEL_W + alloc + free + 6:.1f}" y="{y + 14}" font-size="12">'
            f"{p['devices_allocated']} allocated, {p['devices_free']} free of "
            f"{p['devices_published']}</text>",
        ]
    parts.append("</svg>")
    return "".join(parts)


def fragmentation_chart(groups: Sequence[Mapping[str, Any]], key: str) -> str:
    """An SVG of one bar per group (pool or model): its fragmentation, 0 to 100%."""
    height = ROW_H * len(groups) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL_W + BAR_W + 80}" '
        f'height="{height}" role="img" aria-label="fragmentation per {key}">'
    ]
    for i, g in enumerate(groups):
        y = 5 + i * ROW_H
        value = g["fragmentation"] or 0.0
        parts += [
            f'<text x="0" y="{y + 14}" font-size="12">{_esc(g[key])}</text>',
            f'<rect x="{LABEL_W}" y="{y}" width="{BAR_W}" height="18" fill="#f0f0f1"/>',
            f'<rect x="{LABEL_W}" y="{y}" width="{BAR_W * value:.1f}" height="18" '
            f'fill="{STRANDED}"/>',
            f'<text x="{LABEL_W + BAR_W + 6}" y="{y + 14}" font-size="12">'
            f"{percent(g['fragmentation'])}</text>",
        ]
    parts.append("</svg>")
    return "".join(parts)


def _html_table(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> str:
    heads = "".join(f'<th class="t">{_esc(h)}</th>' for h in keys)
    heads += "".join(f"<th>{_esc(h)}</th>" for _, h, _ in COLUMNS)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="t">{_esc(row[k])}</td>' for k in keys)
        + "".join(f"<td>{cell(row, k, b)}</td>" for k, _, b in COLUMNS)
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{heads}</tr>{body}</table>"


def _html_paths(report: Mapping[str, Any]) -> str:
    """The section of GPU use per path and pool, empty for a report without it."""
    lines = path_lines(report)
    if not lines:
        return ""
    heads = "".join(f'<th class="t">{h}</th>' for h in ("pool", "path")) + "".join(
        f"<th>{h}</th>" for h in PATH_COLUMNS
    )
    heads += '<th class="t">allocated/devices per profile</th>'
    body = "".join(
        "<tr>"
        + "".join(f'<td class="t">{_esc(row[k])}</td>' for k in ("pool", "path"))
        + "".join(f"<td>{_esc(c)}</td>" for c in path_cells(row)[:-1])
        + f'<td class="t">{_esc(path_cells(row)[-1])}</td></tr>'
        for row in report["paths"].get("pools") or []
    )
    items = "".join(f"<li>{_esc(line)}</li>" for line in lines)
    return f"\n<h2>GPUs per path and pool</h2><ul>{items}</ul><table><tr>{heads}</tr>{body}</table>"


def _html_counters(report: Mapping[str, Any]) -> str:
    """The section of GPUs published with shared counters, empty without such GPUs."""
    lines = counter_lines(report)
    if not lines:
        return ""
    heads = "".join(f'<th class="t">{_esc(h)}</th>' for h in COUNTER_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f'<td class="t">{_esc(c)}</td>' for c in counter_cells(row)) + "</tr>"
        for row in report.get("gpus") or []
    )
    items = "".join(f"<li>{_esc(line)}</li>" for line in lines)
    return (
        f"\n<h2>GPUs with shared counters (dynamic MIG)</h2><ul>{items}</ul>"
        f"<table><tr>{heads}</tr>{body}</table>"
    )


def _html_teams(report: Mapping[str, Any]) -> str:
    """The section of devices and memory held per team and per namespace, empty for a
    report without it."""
    lines = team_lines(report)
    if not lines:
        return ""
    t = report["teams"]
    measured = bool(t.get("idle_measured"))
    tables = []
    for key, rows in (("team", t.get("teams") or []), ("namespace", t.get("namespaces") or [])):
        keys = (key,) if key == "team" else ("namespace", "team")
        heads = "".join(f'<th class="t">{k}</th>' for k in keys)
        heads += "".join(f"<th>{_esc(h)}</th>" for _, h, _ in TEAM_COLUMNS)
        body = "".join(
            "<tr>"
            + "".join(f'<td class="t">{_esc(row[k])}</td>' for k in keys)
            + "".join(f"<td>{_esc(c)}</td>" for c in team_cells(row, measured))
            + "</tr>"
            for row in rows
        )
        tables.append(f"<table><tr>{heads}</tr>{body}</table>")
    items = "".join(f"<li>{_esc(line)}</li>" for line in lines)
    return f"\n<h2>Waste by team</h2><ul>{items}</ul>" + "<p></p>".join(tables)


def render_html(report: Mapping[str, Any], reload_seconds: int | None = None) -> str:
    """The report as one HTML page: headline and fragmentation figure, a bar chart per
    MIG profile (allocated, free, stranded), fragmentation per pool, the per pool, model
    and profile table, the GPUs per path and pool, the GPUs with shared counters, pending
    and leaked claims (the first ``LISTED``). ``reload_seconds``: the browser loads the
    page again after that many seconds (``<meta http-equiv="refresh">``, no script), for
    the page a server keeps fresh."""
    meta = report.get("meta") or {}
    c = report["cluster"]
    pending = "".join(
        f"<li><code>{_esc(p['claim'])}</code>: <b>{_esc(p['reason'])}</b> - "
        f"{_esc(p['message'])}; "
        + _esc("; ".join(f"{r['request']}: {', '.join(r['shapes'])}" for r in p["requests"]))
        + "</li>"
        for p in report["pending"][:LISTED]
    )
    leaked = "".join(
        f"<li><code>{_esc(item['claim'])}</code> ({_esc(item['kind'])}, "
        f"{gib(item['memory'])} GiB): {_esc(item['reason'])}</li>"
        for item in report["leaked"][:LISTED]
    )
    idle = ""
    if report.get("activity"):
        items = "".join(f"<li>{_esc(line)}</li>" for line in idle_items(report))
        idle = f"\n<h2>Allocated devices idle</h2><ul>{items or '<li>none</li>'}</ul>"
    legend = (
        '<p class="legend"><span class="allocated"></span>allocated'
        '<span class="free"></span>free'
        '<span class="stranded"></span>stranded share of free memory</p>'
    )
    reload = ""
    if reload_seconds:
        reload = f'<meta http-equiv="refresh" content="{int(reload_seconds)}">'
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">{reload}
<title>GPU fleet utilization</title><style>{CSS}</style></head><body>
<h1>GPU fleet utilization</h1>
<p class="dim">{_esc(source_line(meta))}</p>
<p><span class="big">{percent(c["fragmentation"])}</span> fragmentation
<span class="dim">(1 - sum over nodes of the largest free device memory / free memory)</span></p>
<ul>{"".join(f"<li>{_esc(line)}</li>" for line in headline(report))}</ul>
<h2>Devices per MIG profile</h2>{legend}
{profile_chart(report["profiles"])}
<h2>Fragmentation per pool ({_esc(report.get("pool_label") or "no pool label")})</h2>
{fragmentation_chart(report["pools"], "pool")}
<h2>Per pool, model and profile</h2>
{_html_table(report["rows"], ("pool", "model", "profile"))}{_html_paths(report)}
{_html_counters(report)}{_html_teams(report)}
<h2>Pending claims ({c["claims_pending"]})</h2><ul>{pending or "<li>none</li>"}</ul>
<h2>Claims allocated with no running consumer ({c["claims_leaked"]})</h2>
<ul>{leaked or "<li>none</li>"}</ul>{idle}
</body></html>
"""


def _publishing(cluster: Mapping[str, Any]) -> str:
    """``N`` when every node publishes devices, else ``N of M`` (the nodes that publish of
    all the cluster's nodes); a report without the count says ``M``."""
    nodes = cluster["nodes"]
    publishing = cluster.get("nodes_publishing", nodes)
    return str(nodes) if publishing == nodes else f"{publishing} of {nodes}"
