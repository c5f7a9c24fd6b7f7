"""The ``gpufleet`` command: one entry point, one subcommand per capability.

Exit codes follow one contract across subcommands (gpufleet/exit.py): 0 success, 1 a check or a host
failed, 2 the command could not run (bad input, missing prerequisite).
"""

from __future__ import annotations

import os
import sys

import click

from gpufleet import __version__
from gpufleet.commands.claims import claims
from gpufleet.commands.doctor import doctor
from gpufleet.commands.gates import gates
from gpufleet.commands.lab import lab
from gpufleet.commands.mig import mig
from gpufleet.commands.mig_advise import advise as mig_advise
from gpufleet.commands.report import report
from gpufleet.commands.up import up
from gpufleet.commands.upgrade import upgrade
from gpufleet.commands.validate import validate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpufleet")
def main() -> None:
    """Provision, upgrade and validate Kubernetes GPU fleets that use DRA."""


main.add_command(doctor)
main.add_command(gates)
main.add_command(claims)
mig.add_command(mig_advise)
main.add_command(mig)
main.add_command(lab)
main.add_command(validate)
main.add_command(report)
main.add_command(upgrade)
main.add_command(up)


#: Width of tables written to a file or a pipe (a CI log, ``| tee``): rich falls back to
#: 80 columns there, which cuts host names and check ids; ``COLUMNS`` still wins.
LOG_COLUMNS = "160"


def entry() -> None:
    """The ``gpufleet`` console script: :func:`main` with wide tables when stdout is not a
    terminal."""
    if not sys.stdout.isatty():
        os.environ.setdefault("COLUMNS", LOG_COLUMNS)
    main()
