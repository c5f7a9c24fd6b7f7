"""Output files of the commands: the checks on ``--json``/``--junit``/``--markdown``/``--html``
paths before anything runs, the JSON writer, and where validation reports are kept."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

#: File name of the report of the last ``gpufleet up`` (under ``$GPUFLEET_CACHE/reports``).
REPORT_NAME = "validate-latest.json"


def write_json(doc: Mapping[str, Any], target: str) -> None:
    """Write ``doc`` as indented JSON to the file ``target`` (``-``: standard output)."""
    text = json.dumps(doc, indent=2) + "\n"
    if target == "-":
        sys.stdout.write(text)
    else:
        Path(target).write_text(text)


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


def report_path() -> Path:
    """``$GPUFLEET_CACHE/reports/validate-latest.json`` (default cache ``~/.cache/gpufleet``)."""
    cache = os.environ.get("GPUFLEET_CACHE") or str(Path.home() / ".cache" / "gpufleet")
    return Path(cache) / "reports" / REPORT_NAME
