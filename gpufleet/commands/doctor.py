"""``gpufleet doctor``: check the local prerequisites and print how to fix each."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpufleet import doctor as checks
from gpufleet.exit import exit_with, status_of

RESULT_STYLE = {
    "pass": "[green]pass[/green]",
    "fail": "[red]FAIL[/red]",
    "skip": "[yellow]skip[/yellow]",
}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(as_json: bool) -> None:
    """Check Python, Ansible, collections, podman, Go and the cached binaries.

    The lab and development checks (Go, podman, binaries, lab) are skipped for an
    installed package. Exit 0 when no check fails, 1 otherwise.
    """
    results = checks.run_checks()
    failed = [c for c in results if not c.ok]
    if as_json:
        click.echo(
            json.dumps({"ok": not failed, "checks": [c.as_dict() for c in results]}, indent=2)
        )
    else:
        table = Table(title="gpufleet doctor")
        for col in ("check", "result", "found", "fix"):
            table.add_column(col, overflow="fold")
        for c in results:
            # fixes hold brackets (pip install 'gpufleet[bundle]'): not rich markup
            table.add_row(c.name, RESULT_STYLE[c.result], escape(c.detail), escape(c.fix))
        skipped = sum(c.skipped for c in results)
        console = Console()
        console.print(table)
        console.print(
            f"{len(results) - len(failed) - skipped} passed, {len(failed)} failed, "
            f"{skipped} skipped"
        )
    exit_with(status_of(bool(failed)))
