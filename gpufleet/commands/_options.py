"""Options shared by the commands that run playbooks."""

from __future__ import annotations

from typing import Any

import click


def extra_vars_option(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, Any]:
    """``-e KEY=VALUE`` (the value read as YAML, so ``true``, ``[a, b]`` and ``{k: v}`` keep
    their types) or ``-e @FILE`` (a YAML mapping); later ones win. Exit 2 when malformed."""
    import yaml

    out: dict[str, Any] = {}
    for raw in values:
        if raw.startswith("@"):
            path = raw[1:]
            try:
                with open(path, encoding="utf-8") as fh:
                    data = yaml.safe_load(fh)
            except (OSError, yaml.YAMLError) as exc:
                raise click.BadParameter(f"{raw}: cannot read a YAML file: {exc}") from None
            if not isinstance(data, dict):
                raise click.BadParameter(f"{raw}: the file must hold a YAML mapping of variables")
            out.update(data)
            continue
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(
                f"{raw!r} is not KEY=VALUE or @FILE; write e.g. -e name=value or -e @vars.yml"
            )
        try:
            out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError:
            out[key.strip()] = value
    return out


def extra_vars_flag(
    help_text: str = "Extra variable (repeat); the value is read as YAML.",
    dest: str = "extra_vars",
) -> Any:
    """The ``-e/--extra-vars KEY=VALUE|@FILE`` option (repeatable, parsed by
    :func:`extra_vars_option` into a dict passed as ``dest``) with ``help_text``."""
    return click.option(
        "-e",
        "--extra-vars",
        dest,
        multiple=True,
        metavar="KEY=VALUE|@FILE",
        callback=extra_vars_option,
        help=help_text,
    )
