"""Exit codes of every ``gpufleet`` command, one contract a CI job can gate on.

- ``EXIT_OK`` (0): the run passed, the plan or report was written, nothing to do.
- ``EXIT_FAILED`` (1): a check, a host or a step failed (the command ran and judged).
- ``EXIT_CANNOT_RUN`` (2): the input is refused or the command could not run (bad option,
  missing inventory or playbook, kubeconfig or API server unreachable); click's own usage
  errors exit 2 as well.

The same contract as DeepOps' ``validate_k8s.py`` (0 pass, 1 checks failed, 2 could not
run); module ``dra_validate`` returns the same 0/1 as its ``exit_code``
(``plugins/module_utils/validate/report.exit_code``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar

import click

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CANNOT_RUN = 2

T = TypeVar("T")


def exit_with(status: int) -> NoReturn:
    """End the command with ``status`` (one of the ``EXIT_*`` codes)."""
    raise SystemExit(status)


def status_of(failed: bool) -> int:
    """``EXIT_FAILED`` when ``failed``, else ``EXIT_OK``."""
    return EXIT_FAILED if failed else EXIT_OK


def _say_error(exc: BaseException) -> None:
    click.echo(f"Error: {exc}", err=True)


def run_or_exit(
    call: Callable[[], T],
    refused: type[BaseException] | tuple[type[BaseException], ...],
    say: Callable[[BaseException], object] = _say_error,
) -> T:
    """``call()``'s value; when it raises one of ``refused`` (``runner.RunError``: the
    playbook, an inventory or a limit cannot be used), ``say`` it (default ``Error: <exc>``
    on stderr) and exit ``EXIT_CANNOT_RUN``."""
    try:
        return call()
    except refused as exc:
        say(exc)
        exit_with(EXIT_CANNOT_RUN)
