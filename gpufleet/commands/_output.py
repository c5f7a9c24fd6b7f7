"""Output files of the commands, one owner for every output option (``--json``,
``--junit``, ``--markdown``, ``--html``, ``--metrics``): the checks before anything runs,
the writer, and where validation reports are kept.

One rule for every output option: its value is ``-`` (standard output, at most one option
per command), ``/dev/null``, or the path of a regular file (existing or new) in an
existing directory. A named pipe, a socket or another device is refused before anything
runs (opening a named pipe nobody reads waits forever; a device such as ``/dev/full``
fails at the end of a long run), and the file is opened without waiting
(``O_NONBLOCK``), so one swapped in after the check cannot hang the command either. A
write that fails (no space left, permission) is a clear error, exit 2.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.files import (
    DEV_NULL,
    not_a_regular_file,
)

from gpufleet.exit import EXIT_CANNOT_RUN

#: File name of the report of the last ``gpufleet up`` (under ``$GPUFLEET_CACHE/reports``).
REPORT_NAME = "validate-latest.json"
#: The output value that means standard output.
STDOUT = "-"
#: The one device an output may be: writing to it never blocks and never fails.


class OutputError(click.ClickException):
    """An output that cannot be written: exit 2 with ``Error: <message>``."""

    exit_code = EXIT_CANNOT_RUN


def _not_a_file(option: str, value: str, kind: str) -> click.BadParameter:
    return click.BadParameter(
        f"{value} is {kind}; an output must be a regular file, {DEV_NULL} or '-' (standard "
        f"output); fix: give a file path (e.g. report.out), or {option} - and pipe it",
        param_hint=f"'{option}'",
    )


def check_outputs(paths: Mapping[str, str | None]) -> None:
    """Refuse (click.BadParameter, exit 2) before anything runs an output that breaks the
    module's rule: a directory, a named pipe, socket or device other than ``/dev/null``, a
    path whose directory does not exist, a name the system cannot use, or ``-`` given to
    more than one option."""
    to_stdout = [option for option, value in paths.items() if value == STDOUT]
    if len(to_stdout) > 1:
        raise click.BadParameter(
            f"{' and '.join(to_stdout)} are all '-' (standard output), which would mix "
            "two documents in one stream; fix: give '-' to one of them and a file to the others",
            param_hint=f"'{to_stdout[1]}'",
        )
    for option, value in paths.items():
        if not value or value == STDOUT:
            continue
        path = Path(value)
        try:
            mode = os.stat(value).st_mode
        except FileNotFoundError:
            mode = None
        except (OSError, ValueError) as err:
            reason = getattr(err, "strerror", None) or str(err)
            raise click.BadParameter(
                f"{value[:120]!r}: {reason}; fix: give a shorter file path of plain characters",
                param_hint=f"'{option}'",
            ) from None
        if mode is not None and stat.S_ISDIR(mode):
            raise click.BadParameter(
                f"{value} is a directory; fix: give a file path, e.g. {path / 'report.out'}",
                param_hint=f"'{option}'",
            )
        kind = not_a_regular_file(mode) if mode is not None else None
        if kind and os.path.realpath(value) != DEV_NULL:
            raise _not_a_file(option, value, kind)
        if not path.parent.is_dir():
            raise click.BadParameter(
                f"{value}: the directory {path.parent} does not exist; fix: create it first "
                "(mkdir -p) or give a path in an existing directory",
                param_hint=f"'{option}'",
            )


def stdout_taken(paths: Mapping[str, str | None]) -> bool:
    """Whether one of the outputs is ``-``: the terminal view then goes to standard
    error."""
    return any(value == STDOUT for value in paths.values())


def write_output(text: str, target: str, option: str) -> None:
    """Write ``text`` to ``target`` by the module's rule (``-``: standard output), the file
    opened without waiting and replaced. Raises OutputError (exit 2) naming ``option`` when
    it cannot be opened or written (a named pipe nobody reads, no space left, no
    permission)."""
    if target == STDOUT:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except OSError as err:
            raise OutputError(
                f"{option} -: cannot write to standard output ({err.strerror or err})"
            ) from None
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags, 0o666)
    except OSError as err:
        raise OutputError(
            f"{option} {target}: cannot open it for writing ({err.strerror or err}); fix: give "
            "a writable regular file path"
        ) from None
    try:
        kind = not_a_regular_file(os.fstat(fd).st_mode)
        if kind and os.path.realpath(target) != DEV_NULL:
            raise OutputError(str(_not_a_file(option, target, kind).message))
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as err:
        raise OutputError(
            f"{option} {target}: cannot write it ({err.strerror or err}); fix: give a path "
            "on a file system with free space that this user may write"
        ) from None
    finally:
        os.close(fd)


def write_json(doc: Mapping[str, Any], target: str, option: str = "--json") -> None:
    """Write ``doc`` as indented JSON to ``target`` (:func:`write_output`)."""
    write_output(json.dumps(doc, indent=2) + "\n", target, option)


def report_path() -> Path:
    """``$GPUFLEET_CACHE/reports/validate-latest.json`` (default cache ``~/.cache/gpufleet``)."""
    cache = os.environ.get("GPUFLEET_CACHE") or str(Path.home() / ".cache" / "gpufleet")
    return Path(cache) / "reports" / REPORT_NAME
