"""Options shared by the commands: ``-e`` extra variables, and what reading ``--layout``
needs (``mig plan``, ``mig apply``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig

#: An Ansible variable name (ansible.utils.vars.isidentifier: a Python identifier).
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def _var_name(key: Any, where: str) -> str:
    if not isinstance(key, str) or not _VAR_NAME.match(key):
        raise click.BadParameter(
            f"{where}: {key!r} is not an Ansible variable name; fix: use letters, digits and "
            "'_', not starting with a digit (e.g. -e mig_layout=...)"
        )
    return key


def _value(key: str, value: str) -> Any:
    """The YAML value of ``-e key=value``. Text that is not YAML stays a string (``*.local``,
    ``{{ template }}``), except a list or mapping left open (``[1, 2``), which is refused."""
    if not value.strip():
        return ""
    try:
        return ig.load_yaml(value, f"-e {key}")
    except ig.ShapeError as exc:
        raise click.BadParameter(str(exc)) from None
    except ig.InputError as exc:
        start = value.lstrip()
        if start.startswith("[") or (start.startswith("{") and not start.startswith("{{")):
            raise click.BadParameter(
                f"{exc} (value {value[:80]!r}); or, to pass the text as a string, quote it: "
                f"-e '{key}=\"{value[:40]}\"'"
            ) from None
        return value


def extra_vars_option(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, Any]:
    """``-e KEY=VALUE`` (the value read as YAML, so ``true``, ``[a, b]`` and ``{k: v}`` keep
    their types) or ``-e @FILE`` (a YAML mapping); later ones win. Exit 2 (click's
    BadParameter) for a malformed one: no ``=``, a key that is not a variable name, a list
    or mapping left open, a file that is missing, binary, not YAML or not a mapping."""
    out: dict[str, Any] = {}
    for raw in values:
        if raw.startswith("@"):
            what = f"-e {raw}"
            try:
                data = ig.load_yaml(ig.read_text(raw[1:], what) or "", what)
            except ig.InputError as exc:
                raise click.BadParameter(str(exc)) from None
            if not isinstance(data, dict):
                raise click.BadParameter(
                    f"{raw}: the file must hold a YAML mapping of variables (it holds "
                    f"{type(data).__name__}); fix: write 'name: value' lines"
                )
            out.update({_var_name(k, raw): v for k, v in data.items()})
            continue
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(
                f"{raw!r} is not KEY=VALUE or @FILE; write e.g. -e name=value or -e @vars.yml"
            )
        name = _var_name(key.strip(), f"-e {raw[:80]!r}")
        out[name] = _value(name, value)
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


#: A MIG layout as ``--layout`` takes it (profile -> count).
LAYOUT_EXAMPLE = '{"1g.18gb": 7}'


def path_exists(path: Path) -> bool:
    """``path.exists()``, False for a name the system cannot look up (too long, a NUL)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def shown(text: str, limit: int = 60) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters (``...`` marks the cut), for
    messages that quote an option's value."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def existing_paths(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """Callback of an option of paths that must exist (``validate -i``): click.BadParameter
    (exit 2) for one that names nothing the system can look up (missing, too long, a NUL
    byte), shown escaped and cut (:func:`shown`)."""
    for raw in values:
        if not raw.strip() or not path_exists(Path(raw)):
            raise click.BadParameter(
                f"{shown(raw)} does not exist; fix: give an existing inventory file or "
                "directory (e.g. -i inventory/hosts.yml)"
            )
    return values


def inventory_flag(dest: str = "inventories") -> Any:
    """``-i``/``--inventory``: the Ansible inventory, a file or a directory; required,
    repeat for several (a tuple in ``dest``). ``runner`` judges the paths (and what they
    hold) before a run: exit 2 for one that is empty, missing or cannot be named."""
    return click.option(
        "-i",
        "--inventory",
        dest,
        multiple=True,
        required=True,
        metavar="INVENTORY",
        help="Ansible inventory (file or directory); repeat for several.",
    )
