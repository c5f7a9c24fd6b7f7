# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Whether paths of a host exist and what they are (module ``path_stat``)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import Any

__all__ = ["stat_items"]


def stat_items(root: str, items: Iterable[str]) -> list[dict[str, Any]]:
    """``root`` and paths relative to it -> ``[{item, stat: {exists, path, ...}}]``, one
    per item in order, the shape a loop of ``ansible.builtin.stat`` (``follow: true``)
    registers: ``exists``, ``path`` (``<root>/<item>``, the root without its trailing
    slash) and, for a path that exists, ``isdir``, ``isreg``, ``islnk`` and ``mode`` (octal
    string, permission bits) of what the path resolves to (so ``islnk`` is false, as
    stat's with ``follow``). A path that cannot be reached (missing, a dangling link, no
    search permission) has ``exists: false``. Never raises for a path."""
    prefix = root.rstrip("/")
    out: list[dict[str, Any]] = []
    for item in items:
        path = f"{prefix}/{item}"
        try:
            st = os.stat(path)
        except OSError:
            out.append({"item": item, "stat": {"exists": False, "path": path}})
            continue
        out.append(
            {
                "item": item,
                "stat": {
                    "exists": True,
                    "path": path,
                    "isdir": stat.S_ISDIR(st.st_mode),
                    "isreg": stat.S_ISREG(st.st_mode),
                    "islnk": stat.S_ISLNK(st.st_mode),
                    "mode": f"{stat.S_IMODE(st.st_mode):04o}",
                },
            }
        )
    return out
