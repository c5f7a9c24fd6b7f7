"""``playbooks/validate.yml`` around a command that changes the cluster (``gpufleet
upgrade``, ``gpufleet migrate``): run before and after, its report shown as ``gpufleet up``
shows it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console

from gpufleet.commands._output import report_path
from gpufleet.exit import EXIT_FAILED, EXIT_OK


def warned_checks(doc: Mapping[str, Any]) -> list[str]:
    """Ids of the checks of a validate report (``{checks: [{id, status}]}``) that
    warned."""
    return [
        str(c.get("id"))
        for c in doc.get("checks") or []
        if isinstance(c, Mapping) and c.get("status") == "warn"
    ]


def run_validate(
    inventory: list[str],
    job: str,
    when: str,
    console: Console,
    *,
    refuse_warnings: bool = False,
    extravars: Mapping[str, Any] | None = None,
) -> int:
    """``playbooks/validate.yml`` with its report written to
    ``$GPUFLEET_CACHE/reports/validate-<job>-<when>.json`` and shown as ``gpufleet up``
    shows it (``job``: the command that runs it, ``upgrade`` or ``migrate``; ``when``:
    ``before`` or ``after``). Returns 0 when the run and every check passed, else 1; with
    ``refuse_warnings`` (the validation before an upgrade, unless the warnings are
    accepted explicitly: ``--accept-warnings``, ``upgrade_accept_warnings``) a check that
    warned counts as failed too. ``extravars``: more extra variables of the playbook (such
    as ``validate_gpu_path_moves`` after a move), passed as data as every extra variable
    is (``runner.write_extravars``); the report file is the command's own."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr

    from gpufleet.render import validation
    from gpufleet.runner import run_playbook

    path = report_path().with_name(f"validate-{job}-{when}.json")
    path.parent.mkdir(parents=True, exist_ok=True)  # a fresh machine has no reports/ yet
    started = time.time()
    console.rule(f"validate {when} the {job}")
    status = run_playbook(
        "validate",
        inventory,
        extravars={**(extravars or {}), "validate_report_file": str(path)},
        console=console,
    ).status
    doc = validation.read_report(path, float(int(started)))
    if doc is not None:
        validation.render_report(console, doc, str(path))
        status = max(status, EXIT_FAILED if vr.exit_code(doc) else EXIT_OK)
        warned = warned_checks(doc)
        if refuse_warnings and warned and not status:
            console.print(
                f"[red]validate warned before the {job} ({', '.join(warned)}): fix the "
                "cause, or accept the warnings explicitly with --accept-warnings "
                "(-e upgrade_accept_warnings=true)[/red]"
            )
            status = EXIT_FAILED
    return EXIT_FAILED if status else EXIT_OK
