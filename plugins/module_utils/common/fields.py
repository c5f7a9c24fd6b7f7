# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Reading the fields of a decoded object whose shape is not trusted (an API answer, a
report file, a hand-made or hostile object): a field of another type than the one
expected is read as empty, never followed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["as_list", "as_map", "is_map"]


def is_map(obj: Any) -> bool:
    """``isinstance(obj, Mapping)``, a decoded object (a dict) told without the slower
    abstract check: the listing's trims ask it about every field they keep."""
    return type(obj) is dict or isinstance(obj, Mapping)  # pylint: disable=unidiomatic-typecheck


def as_map(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if is_map(value) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []
