"""Text from a cluster, a host or a command line as the renderers show it: never as
markup, never as a terminal's escape sequence."""

from __future__ import annotations

import re

from rich.markup import escape

#: What such text may hold that a page or a terminal must not receive as it is: C0 and C1
#: control characters (a terminal's escape sequences) and lone surrogates (no UTF-8).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with each control character and lone surrogate written as its escape
    (``\\x1b``, ``\\ud800``), so that it shows and cannot act on the reader's terminal."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def shown(value: object) -> str:
    """``value`` as text for ``rich`` (a table cell, a printed line): ``printable``, and
    its ``[`` escaped so that ``[/bold]`` in a node name shows as it is instead of ending
    the output with a MarkupError."""
    return escape(printable(str(value)))
