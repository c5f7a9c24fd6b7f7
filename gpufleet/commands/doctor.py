"""``gpufleet doctor``: check the local prerequisites and print how to fix each."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from gpufleet import doctor as checks
from gpufleet.exit import exit_with, status_of


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(as_json: bool) -> None:
    """Check Python, Ansible, collections, podman, Go and the cached binaries.

    Exit 0 when every check passes, 1 otherwise.
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
            table.add_row(
                c.name, "[green]pass[/green]" if c.ok else "[red]FAIL[/red]", c.detail, c.fix
            )
        console = Console()
        console.print(table)
        console.print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    exit_with(status_of(bool(failed)))
