# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The templates every refusal of the collection and the CLI is written in.

Two shapes, one owner:

* a sentence and its fix, ``"<reason> Fix: <fix>"`` (``with_fix``; the reason is a
  sentence that names the value), raised as ``Refused`` (attributes ``reason``, ``fix``);
* a value and what is wrong with it, ``"<subject>: <reason>; fix: <fix>"`` (``refusal``),
  where the subject is usually ``assignment(variable, value)`` (``"name=value"``).

``split_fix`` reads either shape back into ``(reason, fix)``, for callers that re-render
a refusal (preflight problems, the CLI's error lines).
"""

from __future__ import annotations

from typing import Any

FIX_SENTENCE = " Fix: "
FIX_CLAUSE = "; fix: "


def show(value: Any) -> str:
    """A value as a message quotes it: text bare (``""`` when empty), anything else as
    Python writes it (``None``, ``[1, 2]``)."""
    if isinstance(value, str):
        return value if value else '""'
    return repr(value)


def assignment(variable: str, value: Any) -> str:
    """``"dra_driver_namespace=kube-system"``."""
    return f"{variable}={show(value)}"


def with_fix(reason: str, fix: str = "") -> str:
    """``"<reason> Fix: <fix>"``; the reason alone when there is no fix."""
    return reason + (FIX_SENTENCE + fix if fix else "")


def refusal(subject: str, reason: str, fix: str = "") -> str:
    """``"<subject>: <reason>; fix: <fix>"``; without the fix clause when there is none."""
    return f"{subject}: {reason}" + (FIX_CLAUSE + fix if fix else "")


def split_fix(text: str) -> tuple[str, str]:
    """``(reason, fix)`` of a message in either shape (``fix`` is ``""`` when it names
    none); the reason keeps its subject."""
    for marker in (FIX_CLAUSE, FIX_SENTENCE):
        reason, found, fix = text.partition(marker)
        if found:
            return reason, fix
    return text, ""


class Refused(ValueError):
    """Input that cannot be used, with the reason and the fix.

    Attributes: ``reason`` (what is wrong, naming the value), ``fix`` (what to do).
    ``str(error)`` is ``with_fix(reason, fix)``."""

    def __init__(self, reason: str, fix: str = "") -> None:
        self.reason = reason
        self.fix = fix
        super().__init__(with_fix(reason, fix))


class RefusedValue(ValueError):
    """A refused value of a named variable: ``variable``, ``value``, ``reason``, ``fix``;
    ``str()`` is ``refusal(assignment(variable, value), reason, fix)``."""

    def __init__(self, variable: str, value: Any, reason: str, fix: str) -> None:
        self.variable = variable
        self.value = value
        self.reason = reason
        self.fix = fix
        super().__init__(refusal(assignment(variable, value), reason, fix))
