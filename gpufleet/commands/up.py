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

import time
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr
from rich.console import Console

from gpufleet.commands._options import extra_vars_flag, inventory_flag
from gpufleet.commands._output import report_path
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK, exit_with, run_or_exit
from gpufleet.render import validation

SITE_PLAYBOOK = "site"


@click.command("up")
@inventory_flag()
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
        exit_with(EXIT_CANNOT_RUN)
    started = time.time()
    result = run_or_exit(
        lambda: runner.run_playbook(
            playbook,
            list(inventories),
            extravars=extra_vars,
            limit=limit,
            check=check,
            diff=diff,
            verbosity=verbose,
            console=console,
        ),
        runner.RunError,
    )
    status = result.status
    since = float(int(started))
    doc = validation.read_report(path, since)
    if doc is not None:
        validation.render_report(console, doc, str(path))
        status = max(status, vr.exit_code(doc))
    elif path.is_file() and path.stat().st_mtime >= since:
        console.print(f"[red]{path} (written by this run) is not a validation report[/red]")
        status = max(status, EXIT_FAILED)
    elif status == EXIT_OK and not check:
        console.print(f"[dim]no validation report from this run at {path}[/dim]")
    exit_with(status)
