"""The validation report on the terminal, and read back from the file the validate
playbook writes: one reader and one renderer for ``gpufleet validate``, ``gpufleet up``
and ``gpufleet upgrade``. The report is the model of
``plugins/module_utils/validate/report.py`` (``Report.to_dict()``); its file renderers
(JUnit, Markdown, plain text) live there too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr
from rich.console import Console
from rich.table import Table
from rich.text import Text

STYLE = {vr.FAIL: "bold red", vr.WARN: "yellow", vr.SKIP: "dim", vr.PASS: "green"}
#: Problems listed under a check on the terminal (all of them are in --json).
PROBLEMS_SHOWN = 20


def usable_report(doc: Any) -> bool:
    """Whether ``doc`` is a report the renderers can show: ``checks`` of a known status
    with a string ``id``, ``area`` and ``summary`` and a list of problem mappings;
    ``counts`` and ``meta`` mappings when present."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("checks"), list):
        return False
    if not all(isinstance(doc.get(k, {}), Mapping) for k in ("counts", "meta")):
        return False
    for c in doc["checks"]:
        if not isinstance(c, Mapping) or c.get("status") not in STYLE:
            return False
        if not all(isinstance(c.get(k), str) for k in ("id", "area", "summary")):
            return False
        problems = c.get("problems")
        if not isinstance(problems, list) or not all(isinstance(p, Mapping) for p in problems):
            return False
    return True


def read_report(path: Path, since: float | None = None) -> dict[str, Any] | None:
    """The report at ``path``, or None when the file is missing, older than ``since``
    (epoch seconds: written by an earlier run), unreadable (``common.limits``'s limits) or
    not a report (:func:`usable_report`)."""
    try:
        if since is not None and path.stat().st_mtime < since:
            return None
        doc = ig.load_json(ig.read_text(path, f"report {path}") or "", f"report {path}")
    except (OSError, ig.InputError):
        return None
    return dict(doc) if usable_report(doc) else None


def render_report(console: Console, report: Mapping[str, Any], title: str | None = None) -> None:
    """The headline (``validation: PASS  0 failed, ...``), then one table per area
    (failures first) with each check's ``details`` lines, and the problems and fix of each
    failed or warned check, under its summary, then the run's figures when the report has
    them. ``report`` must be usable
    (:func:`usable_report`)."""
    checks = list(report["checks"])
    counts = vr.counts(checks)
    status = vr.FAIL if vr.exit_code(report) else vr.PASS
    head = Text(f"validation: {status.upper()}", style=STYLE[status])
    head.append(
        f"  {counts[vr.FAIL]} failed, {counts[vr.WARN]} warnings, {counts[vr.SKIP]} skipped, "
        f"{counts[vr.PASS]} passed",
        style="",
    )
    console.print(head)
    if title:
        console.print(Text(title, style="dim"))
    for area in vr.AREAS + tuple(sorted({c["area"] for c in checks} - set(vr.AREAS))):
        items = vr.sort_checks(c for c in checks if c["area"] == area)
        if items:
            console.print(_area_table(area, items))
    meta = report.get("meta") or {}
    if "kubernetes_version" in meta:
        console.print(
            f"[{STYLE[status]}]{status.upper()}[/]: {counts[vr.FAIL]} failed, "
            f"{counts[vr.WARN]} warnings, {counts[vr.SKIP]} skipped, {counts[vr.PASS]} passed; "
            f"Kubernetes {meta.get('kubernetes_version', '?')}, "
            f"{meta.get('api_requests', '?')} API requests, checks in "
            f"{meta.get('duration_s', '?')}s"
        )


def _area_table(area: str, items: list[Mapping[str, Any]]) -> Table:
    table = Table(title=area, title_justify="left", expand=False, show_lines=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("summary", overflow="fold")
    for c in items:
        lines = [c["summary"], *(f"  {line}" for line in vr.details_of(c))]
        if c["status"] in (vr.FAIL, vr.WARN):
            problems = c["problems"]
            lines += [
                f"- {p.get('subject') or '(cluster)'}: {p.get('message', '')}"
                for p in problems[:PROBLEMS_SHOWN]
            ]
            if len(problems) > PROBLEMS_SHOWN:
                lines.append(f"... {len(problems) - PROBLEMS_SHOWN} more (see --json)")
            if c.get("fix"):
                lines.append(f"fix: {c['fix']}")
        # ids and summaries are data (a spec's focus holds "\\["), never rich markup
        status = f"[{STYLE[c['status']]}]{c['status'].upper()}[/]"
        table.add_row(status, Text(c["id"]), Text("\n".join(lines)))
    return table
