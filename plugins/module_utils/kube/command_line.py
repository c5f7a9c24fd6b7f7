# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""A component's command line edited for the flags this collection manages
(``--feature-gates``, ``--runtime-config``): ``edit_command``. A flag given twice is
applied in order (both values are ``Set`` on the same map), so duplicates are merged into
the last occurrence and the earlier ones dropped; every other argument is kept as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    FEATURE_GATES,
    RUNTIME_CONFIG,
    Change,
    ComponentFlags,
    ConfigEditError,
    FlagEdit,
    merge_feature_gates,
    merge_runtime_config,
    parse_feature_gates,
    parse_go_bool,
    parse_runtime_config,
)

__all__ = [
    "edit_command",
]


# ------------------------------------------------------------------ argument lists


@dataclass
class CommandArg:
    """One argument: ``name`` is the flag name for the flags this module manages, else
    ``None``; ``origin`` is the untouched original (returned as is when unchanged)."""

    name: str | None
    value: str
    origin: Any = None
    edited: bool = False


def edit_args(
    args: list[CommandArg], edit: FlagEdit, where: Callable[[str], str]
) -> tuple[list[CommandArg], list[Change]]:
    """Apply ``edit`` to an argument list: merge all occurrences of a managed flag into
    its last one, add a missing flag at the end, drop a flag left without entries."""
    out = list(args)
    changes: list[Change] = []
    for flag, touched in (
        (FEATURE_GATES, edit.touches_feature_gates),
        (RUNTIME_CONFIG, edit.touches_runtime_config),
    ):
        if not touched:
            continue
        place = where(flag)
        index = [i for i, a in enumerate(out) if a.name == flag]
        combined = ",".join(out[i].value for i in index) if index else None
        if flag == FEATURE_GATES:
            merged = merge_feature_gates(
                combined, edit.feature_gates, edit.absent_feature_gates, place
            )
        else:
            merged = merge_runtime_config(
                combined, edit.runtime_config, edit.absent_runtime_config, place
            )
        changes.extend(merged.changes)
        if not merged.changed and len(index) <= 1:
            continue
        for i in index[:-1]:
            changes.append(
                Change(
                    place,
                    f"--{flag}",
                    out[i].value,
                    None,
                    f"duplicate --{flag} (the component applies each in turn); merged into "
                    "the last one",
                )
            )
        drop = set(index[:-1])
        parse = parse_feature_gates if flag == FEATURE_GATES else parse_runtime_config
        if not merged.new or not parse(merged.new, place):
            if index:
                changes.append(
                    Change(place, f"--{flag}", combined, None, "no entry left; flag removed")
                )
                drop.add(index[-1])
        elif index:
            last = out[index[-1]]
            if merged.new != last.value:
                out[index[-1]] = CommandArg(flag, merged.new, last.origin, edited=True)
        else:
            out.append(CommandArg(flag, merged.new, None, edited=True))
        out = [a for i, a in enumerate(out) if i not in drop]
    return out, changes


def _command_to_args(argv: Sequence[str], where: str) -> list[CommandArg]:
    args: list[CommandArg] = []
    i = 0
    while i < len(argv):
        item = argv[i]
        if not isinstance(item, str):
            args.append(CommandArg(None, "", ("other", item)))
            i += 1
            continue
        matched = False
        for flag in (FEATURE_GATES, RUNTIME_CONFIG):
            if item.startswith(f"--{flag}="):
                args.append(CommandArg(flag, item[len(flag) + 3 :], ("eq", item)))
                matched = True
            elif item == f"--{flag}":
                if i + 1 >= len(argv) or not isinstance(argv[i + 1], str):
                    raise ConfigEditError(
                        f"{where}: --{flag} is the last command item and has no value; fix: "
                        f"write --{flag}=<value> or remove it"
                    )
                args.append(CommandArg(flag, argv[i + 1], ("sep", item, argv[i + 1])))
                i += 1
                matched = True
        if not matched:
            args.append(CommandArg(None, item, ("other", item)))
        i += 1
    return args


def _args_to_command(args: Sequence[CommandArg]) -> list[str]:
    argv: list[str] = []
    for a in args:
        kind = a.origin[0] if a.origin else "eq"
        if not a.edited:
            argv.extend(a.origin[1:])
        elif kind == "sep":
            argv.extend([f"--{a.name}", a.value])
        else:
            argv.append(f"--{a.name}={a.value}")
    return argv


def edit_command(
    argv: Sequence[str], edit: FlagEdit, where: str = "command"
) -> tuple[list[str], tuple[Change, ...]]:
    """Apply ``edit`` to a component command line (``["kube-apiserver", "--a=b", ...]``).

    Both ``--flag=value`` and ``--flag value`` are understood (the value is rewritten in
    the form found); a missing flag is appended as ``--flag=value``. Returns the new argv
    and the changes. Raises ConfigEditError/FlagValueError for malformed input.
    """
    args, changes = edit_args(_command_to_args(argv, where), edit, lambda flag: f"{where} --{flag}")
    return _args_to_command(args), tuple(changes)


def command_flags(argv: Sequence[str], where: str) -> ComponentFlags:
    args = _command_to_args(argv, where)
    return flags_from_values(
        [a.value for a in args if a.name == FEATURE_GATES],
        [a.value for a in args if a.name == RUNTIME_CONFIG],
        where,
    )


def flags_from_values(gates: Sequence[str], runtime: Sequence[str], where: str) -> ComponentFlags:
    fg: dict[str, bool] = {}
    for value in gates:
        for e in parse_feature_gates(value, f"{where} --feature-gates"):
            fg[e.key] = bool(parse_go_bool(e.value))
    rc: dict[str, str] = {}
    for value in runtime:
        for e in parse_runtime_config(value, f"{where} --runtime-config"):
            rc[e.key] = e.value
    return ComponentFlags(fg, rc)
