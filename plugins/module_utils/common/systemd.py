# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Values written into systemd unit files as data: one quoted word of a command line
(``ExecStart=``) or one ``Environment=`` assignment.

Rules (systemd.syntax(7) "Quoting", systemd.service(5) "Command lines", systemd.unit(5)
"Specifiers"): a word in double quotes takes C-style escapes, so ``\\`` and ``"`` are
escaped; ``%`` starts a specifier in both settings and is written ``%%``; in a command line
``$`` expands an environment variable and is written ``$$``. A line break ends a setting in
a unit file and no quoting keeps one inside it: a value with a control character is
refused.
"""

from __future__ import annotations

import re

#: Characters no unit file value may hold: the C0 controls (a line break ends the setting),
#: DEL, and the Unicode line and paragraph separators.
CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


class UnitValueError(ValueError):
    """A value that cannot be written into a unit file; the message names it."""


def _checked(value: object, what: str) -> str:
    text = str(value)
    found = CONTROL.search(text)
    if found:
        raise UnitValueError(
            f"{what} {text[:80]!r} holds the control character {found.group()!r} "
            "(a line break would add a setting to the unit); fix: remove it"
        )
    return text


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")


def exec_word(value: object, what: str = "value") -> str:
    """``value`` as one double-quoted word of ``ExecStart=`` (``\\``, ``"``, ``%`` and
    ``$`` escaped). Raises UnitValueError naming ``what`` for a control character."""
    return '"' + _escaped(_checked(value, what)).replace("$", "$$") + '"'


def environment(name: str, value: object, what: str = "value") -> str:
    """``"NAME=value"``, one double-quoted assignment of ``Environment=`` (``\\``, ``"`` and
    ``%`` escaped). Raises UnitValueError naming ``what`` for a control character or a
    ``name`` that is not an environment variable name."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise UnitValueError(f"{name!r} is not an environment variable name")
    return '"' + name + "=" + _escaped(_checked(value, what)) + '"'
