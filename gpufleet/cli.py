"""The ``gpufleet`` command: one entry point, one subcommand per capability.

Exit codes follow one contract across subcommands (gpufleet/exit.py): 0 success, 1 a
check or a host failed, 2 the command could not run (bad input, missing prerequisite).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from gpufleet import __version__, runner
from gpufleet.commands import (
    claims,
    claims_gc,
    doctor,
    gates,
    lab,
    mig,
    mig_advise,
    mig_apply,
    mig_mode,
    migrate,
    report,
    up,
    upgrade,
    upgrade_gpu_stack,
    validate,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpufleet")
def main() -> None:
    """Provision, upgrade and validate Kubernetes GPU fleets that use DRA."""


# Every command, registered here and nowhere else. The lab's modules (gpufleet.lab) are
# imported by the lab's commands when they run, not by registering them.
claims.claims.add_command(claims_gc.gc)
claims.claims.add_command(claims_gc.explain)
mig.mig.add_command(mig_apply.apply_command)
mig.mig.add_command(mig_advise.advise)
mig.mig.add_command(mig_mode.mode_command)
main.add_command(doctor.doctor)
main.add_command(gates.gates)
main.add_command(claims.claims)
main.add_command(mig.mig)
main.add_command(lab.lab)
main.add_command(validate.validate)
main.add_command(report.report)
main.add_command(upgrade.upgrade)
main.add_command(upgrade_gpu_stack.upgrade_gpu_stack)
main.add_command(migrate.migrate)
main.add_command(up.up)


def check_lab_inventory(playbook: str, inventories: Sequence[str]) -> None:
    """Refuse (runner.RunError) a run on the lab's embedded inventory (``inventory/lab``)
    while the lab is not up (``gpufleet.lab.cluster.check_running``), except the lab's own
    playbook; any other inventory is not the lab's business (the lab is not imported)."""
    lab_inventory = runner.default_inventory().resolve()
    if playbook == "lab" or not any(Path(i).resolve() == lab_inventory for i in inventories):
        return
    from gpufleet.lab import cluster as lab_cluster

    try:
        lab_cluster.check_running()
    except lab_cluster.LabError as err:
        raise runner.RunError(str(err)) from None


runner.INVENTORY_CHECKS.append(check_lab_inventory)


#: Width of tables written to a file or a pipe (a CI log, ``| tee``): rich falls back to
#: 80 columns there, which cuts host names and check ids; ``COLUMNS`` still wins.
LOG_COLUMNS = "160"


def entry() -> None:
    """The ``gpufleet`` console script: :func:`main` with wide tables when stdout is not a
    terminal."""
    if not sys.stdout.isatty():
        os.environ.setdefault("COLUMNS", LOG_COLUMNS)
    main()
