"""``gpufleet up``: provision DRA end to end with ``playbooks/site.yml``.

``gpufleet up -i INVENTORY [--check] [--diff] [--limit PATTERN] [-e KEY=VALUE|@FILE]``
runs the site playbook through :func:`gpufleet.runner.run_playbook` (live progress, recap),
then shows the validation report when this run's validate playbook wrote one to
``$GPUFLEET_CACHE/reports/validate-latest.json`` (``~/.cache/gpufleet/reports/...``).

Exit status: 0 every host succeeded and no validation check failed; 1 a host failed or
was unreachable, or a validation check failed; 2 the run could not start (no inventory, a
malformed ``-e``, the collection not installed).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpufleet.commands._options import extra_vars_flag

SITE_PLAYBOOK = "site"
REPORT_NAME = "validate-latest.json"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CANNOT_RUN = 2

_STYLE = {"fail": "red", "warn": "yellow", "skip": "dim", "pass": "green"}
_ORDER = {"fail": 0, "warn": 1, "skip": 2, "pass": 3}


def report_path() -> Path:
    """``$GPUFLEET_CACHE/reports/validate-latest.json`` (default cache ``~/.cache/gpufleet``)."""
    cache = os.environ.get("GPUFLEET_CACHE") or str(Path.home() / ".cache" / "gpufleet")
    return Path(cache) / "reports" / REPORT_NAME


def read_report(path: Path, since: float) -> dict[str, Any] | None:
    """The report at ``path`` if it was written at or after ``since`` (epoch seconds) and
    is a JSON object with a ``checks`` list; else None (no report from this run)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils import input_guard as ig

    try:
        if path.stat().st_mtime < since:
            return None
        doc = ig.load_json(ig.read_text(path) or "", str(path))
    except (OSError, ig.InputError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("checks"), list):
        return None
    return doc


def report_status(doc: Mapping[str, Any]) -> int:
    """1 when a check of the report failed, else 0 (the report contract of validate)."""
    failed = any(
        isinstance(c, Mapping) and c.get("status") == "fail" for c in doc.get("checks") or []
    )
    return EXIT_FAILED if failed or doc.get("status") == "fail" else EXIT_OK


def render_report(doc: Mapping[str, Any], console: Console, path: Path | None = None) -> None:
    """A headline with the counts, then one row per check (failures first) and, under the
    table, the problems and fix of every check that failed or warned."""
    checks = [c for c in doc.get("checks") or [] if isinstance(c, Mapping)]
    counts = {s: sum(1 for c in checks if c.get("status") == s) for s in _ORDER}
    status = "FAIL" if report_status(doc) else "PASS"
    head = Text(f"validation: {status}", style="bold " + ("red" if status == "FAIL" else "green"))
    head.append(
        f"  {counts['fail']} failed, {counts['warn']} warnings, {counts['skip']} skipped, "
        f"{counts['pass']} passed",
        style="",
    )
    console.print(head)
    table = Table(title=str(path) if path else None, expand=False)
    table.add_column("status")
    table.add_column("check")
    table.add_column("summary", overflow="fold")
    ordered = sorted(checks, key=lambda c: (_ORDER.get(str(c.get("status")), 9), str(c.get("id"))))
    for c in ordered:
        st = str(c.get("status", "?"))
        table.add_row(
            Text(st.upper(), style=_STYLE.get(st, "")),
            str(c.get("id", "?")),
            str(c.get("summary", "")),
        )
    console.print(table)
    for c in ordered:
        if c.get("status") not in ("fail", "warn"):
            continue
        console.print(Text(f"{c.get('id')}:", style=_STYLE[str(c["status"])]))
        problems = c.get("problems") if isinstance(c.get("problems"), list) else []
        for p in (p for p in problems if isinstance(p, Mapping)):
            subject = p.get("subject") or "(cluster)"
            console.print(Text(f"  {subject}: {p.get('message', '')}"))
        if c.get("fix"):
            console.print(Text(f"  fix: {c['fix']}", style="cyan"))


@click.command("up")
@click.option(
    "-i",
    "--inventory",
    "inventories",
    multiple=True,
    required=True,
    metavar="INVENTORY",
    help="Ansible inventory (file or directory); repeat for several.",
)
@click.option("--check", is_flag=True, help="Report what would change; change nothing.")
@click.option("--diff", is_flag=True, help="Show the changes to files and objects.")
@click.option("-l", "--limit", metavar="PATTERN", help="Run on these hosts only (as Ansible).")
@extra_vars_flag("Extra variable (repeat); the value is read as YAML.")
@click.option("-v", "--verbose", count=True, help="More Ansible output (repeat).")
@click.option(
    "--playbook",
    default=SITE_PLAYBOOK,
    show_default=True,
    hidden=True,
    help="Another playbook of the collection, or a playbook file.",
)
def up(
    inventories: tuple[str, ...],
    check: bool,
    diff: bool,
    limit: str | None,
    extra_vars: dict[str, Any],
    verbose: int,
    playbook: str,
) -> None:
    """Provision a GPU cluster with DRA end to end (playbooks/site.yml): preflight, NVIDIA
    driver and container toolkit, kubeadm (site_bootstrap=true), DRA feature gates, GPU
    node labels, the NVIDIA DRA driver, MIG (mig_layout), then validate with a smoke test
    and its report. Try it on the lab: gpufleet up -i inventory/lab

    Exit 0 when every host succeeded and no check failed, 1 when a host or a check failed,
    2 when it could not run."""
    from gpufleet import runner

    console = Console()
    path = report_path()
    # the validate playbook (last play of site.yml) writes its report where this command
    # reads it, and runs the smoke pod, unless the caller says otherwise
    extra_vars = {"validate_report_file": str(path), "validate_smoke": True, **extra_vars}
    path = Path(str(extra_vars["validate_report_file"])).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        click.echo(f"Error: cannot create {path.parent}: {exc}", err=True)
        sys.exit(EXIT_CANNOT_RUN)
    started = time.time()
    try:
        result = runner.run_playbook(
            playbook,
            list(inventories),
            extravars=extra_vars,
            limit=limit,
            check=check,
            diff=diff,
            verbosity=verbose,
            console=console,
        )
    except runner.RunError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_CANNOT_RUN)
    status = result.status
    doc = read_report(path, float(int(started)))
    if doc is not None:
        render_report(doc, console, path)
        status = max(status, report_status(doc))
    elif status == EXIT_OK and not check:
        console.print(f"[dim]no validation report from this run at {path}[/dim]")
    sys.exit(status)
