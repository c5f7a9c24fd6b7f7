"""``gpufleet validate``: one command against a staging cluster, a report CI can gate on.

``gpufleet validate -i INVENTORY [--json FILE] [--junit FILE] [--markdown FILE] [--smoke]
[--kubeconfig PATH] [-e KEY=VALUE]`` runs ``playbooks/validate.yml`` (module
``dra_validate``): versions, feature gates, the DRA API, GPU nodes, hosts and
ResourceClaims, plus a smoke test with ``--smoke``. The report is JSON first (``--json``,
``-`` for stdout), rendered as a rich table per area (failures first), JUnit XML and
Markdown.

Exit codes: 0 no check failed, 1 a check failed, 2 validation could not run (bad
inventory, the cluster could not be read, the playbook stopped before judging).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils import input_guard as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_kube as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_report as vr
from rich.console import Console
from rich.table import Table

from gpufleet import runner
from gpufleet.commands import claims_gc  # noqa: F401  (registers claims gc and claims explain)
from gpufleet.commands._options import extra_vars_flag

STYLE = {vr.FAIL: "bold red", vr.WARN: "yellow", vr.SKIP: "dim", vr.PASS: "green"}
MODULE_TASK = "Validate | Run the checks"


def render_tables(console: Console, report: Mapping[str, Any]) -> None:
    """One table per area, failures first, with the problems and fix of each failed or
    warned check under its summary."""
    checks = list(report.get("checks") or [])
    for area in vr.AREAS + tuple(sorted({c["area"] for c in checks} - set(vr.AREAS))):
        items = vr.sort_checks(c for c in checks if c["area"] == area)
        if not items:
            continue
        table = Table(title=area, title_justify="left", expand=False, show_lines=False)
        table.add_column("status", no_wrap=True)
        table.add_column("check", no_wrap=True)
        table.add_column("summary", overflow="fold")
        for c in items:
            lines = [c["summary"]]
            if c["status"] in (vr.FAIL, vr.WARN):
                lines += [
                    f"- {p['subject'] or '(cluster)'}: {p['message']}" for p in c["problems"][:20]
                ]
                if len(c["problems"]) > 20:
                    lines.append(f"... {len(c['problems']) - 20} more (see --json)")
                if c.get("fix"):
                    lines.append(f"fix: {c['fix']}")
            table.add_row(
                f"[{STYLE[c['status']]}]{c['status'].upper()}[/]",
                c["id"],
                "\n".join(lines),
            )
        console.print(table)
    counts = report.get("counts") or {}
    meta = report.get("meta") or {}
    console.print(
        f"[{STYLE[vr.FAIL] if report.get('status') == vr.FAIL else STYLE[vr.PASS]}]"
        f"{str(report.get('status')).upper()}[/]: {counts.get(vr.FAIL, 0)} failed, "
        f"{counts.get(vr.WARN, 0)} warnings, {counts.get(vr.SKIP, 0)} skipped, "
        f"{counts.get(vr.PASS, 0)} passed; Kubernetes {meta.get('kubernetes_version', '?')}, "
        f"{meta.get('api_requests', '?')} API requests, checks in {meta.get('duration_s', '?')}s"
    )


def write_outputs(
    report: Mapping[str, Any], json_file: str | None, junit: str | None, markdown: str | None
) -> None:
    if json_file:
        text = json.dumps(report, indent=2) + "\n"
        if json_file == "-":
            sys.stdout.write(text)
        else:
            Path(json_file).write_text(text)
    if junit:
        Path(junit).write_text(vr.render_junit(report))
    if markdown:
        Path(markdown).write_text(vr.render_markdown(report))


def check_outputs(paths: Mapping[str, str | None]) -> None:
    """Refuse (click.BadParameter, exit 2) before anything runs an output path that is a
    directory or whose directory does not exist (``-`` is standard output)."""
    for option, value in paths.items():
        if not value or value == "-":
            continue
        path = Path(value)
        if path.is_dir():
            raise click.BadParameter(
                f"{value} is a directory; fix: give a file path, e.g. {path / 'report.out'}",
                param_hint=f"'{option}'",
            )
        if not path.parent.is_dir():
            raise click.BadParameter(
                f"{value}: the directory {path.parent} does not exist; fix: create it first "
                "(mkdir -p) or give a path in an existing directory",
                param_hint=f"'{option}'",
            )


def usable_report(doc: Any) -> bool:
    """Whether ``doc`` is a report the tables and the renderers can show: ``checks`` of a
    known status with a string ``id``, ``area`` and ``summary`` and a list of problem
    mappings; ``counts`` and ``meta`` mappings when present."""
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


def _read_report(path: Path) -> dict[str, Any] | None:
    """The report file the validate playbook wrote, or None when it is not a report."""
    try:
        doc = ig.load_json(ig.read_text(path, f"report {path}") or "", f"report {path}")
    except ig.InputError:
        return None
    return doc if usable_report(doc) else None


@click.command("validate")
@click.option(
    "-i",
    "--inventory",
    "inventories",
    multiple=True,
    type=click.Path(exists=True),
    help="Inventory (repeatable; default: the embedded lab inventory).",
)
@click.option("--json", "json_file", metavar="FILE", help="Write the JSON report ('-': stdout).")
@click.option("--junit", metavar="FILE", help="Write the report as JUnit XML.")
@click.option("--markdown", metavar="FILE", help="Write the report as Markdown.")
@click.option(
    "--smoke",
    is_flag=True,
    help="Also run the smoke test: a pod per device kind in a throwaway namespace, deleted "
    "afterwards (kept when the smoke fails; the report names it).",
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig on this host.")
@extra_vars_flag("Extra variable for the playbook (repeat); the value is read as YAML.", "extra")
@click.option("--limit", default=None, help="Limit the hosts read (as ansible-playbook).")
@click.option("-v", "--verbose", count=True, help="ansible-playbook verbosity.")
def validate(
    inventories: tuple[str, ...],
    json_file: str | None,
    junit: str | None,
    markdown: str | None,
    smoke: bool,
    kubeconfig: str | None,
    extra: dict[str, Any],
    limit: str | None,
    verbose: int,
) -> None:
    """Validate a DRA GPU cluster; exit 0 pass, 1 a check failed, 2 could not run."""
    err = Console(stderr=True)
    out = Console(stderr=json_file == "-")
    check_outputs({"--json": json_file, "--junit": junit, "--markdown": markdown})
    if kubeconfig:
        try:
            vk.check_kubeconfig(kubeconfig)
        except vk.KubeError as exc:
            raise click.BadParameter(exc.message, param_hint="'--kubeconfig'") from None
    extravars = dict(extra)
    with tempfile.TemporaryDirectory(prefix="gpufleet-validate-") as tmp:
        report_path = Path(tmp) / "report.json"
        extravars.setdefault("validate_report_file", str(report_path))
        extravars["validate_smoke"] = smoke
        if kubeconfig:
            extravars["validate_kubeconfig"] = str(Path(kubeconfig).resolve())
        captured: dict[str, Any] = {}

        def on_event(event: Mapping[str, Any]) -> None:
            data = event.get("event_data") or {}
            if data.get("task") != MODULE_TASK:
                return
            res = data.get("res") or {}
            if event.get("event") == "runner_on_ok" and isinstance(res.get("report"), dict):
                captured["report"] = res["report"]
            elif event.get("event") == "runner_on_failed":
                captured["error"] = str(res.get("msg") or "the validation task failed")

        try:
            result = runner.run_playbook(
                "validate",
                list(inventories) or [str(runner.default_inventory())],
                extravars=extravars,
                limit=limit,
                verbosity=verbose,
                console=err,
                on_event=on_event,
            )
        except runner.RunError as e:
            err.print(f"[red]error:[/red] {e}")
            sys.exit(runner.EXIT_CANNOT_RUN)
        report = captured.get("report")
        if report is not None and not usable_report(report):
            report, captured["error"] = None, "the module returned a report of another shape"
        report_file = Path(str(extravars["validate_report_file"]))
        if report is None and report_file.is_file():
            report = _read_report(report_file)
            if report is None and "error" not in captured:
                captured["error"] = (
                    f"validate_report_file={report_file} is not a validation report; fix: "
                    "give a new file path (the playbook writes the report there)"
                )
    if report is None:
        why = captured.get("error") or (
            "; ".join(f"{h} | {t}: {m}" for h, t, m in result.progress.failures)
            or f"the playbook ended with status {result.status} before the checks ran"
        )
        err.print(f"[red]validation could not run:[/red] {why}")
        sys.exit(runner.EXIT_CANNOT_RUN)
    report = dict(report)
    report.setdefault("meta", {})["playbook_status"] = result.status
    render_tables(out, report)
    write_outputs(report, json_file, junit, markdown)
    sys.exit(vr.exit_code(report))
