"""CEL selectors of the objects that ``claims check`` and ``claims explain`` judge, and the
judge for them (``gpufleet.build.celcheck.judge_for``, imported when a command judges)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def selector_expressions(obj: Any) -> list[str]:
    """Every ``cel.expression`` string inside ``obj`` (a DeviceClass, ResourceClaim(Template)
    or Pod dict, or a list of them), depth first, in document order."""
    out: list[str] = []
    if isinstance(obj, dict):
        cel = obj.get("cel")
        if isinstance(cel, dict) and isinstance(cel.get("expression"), str):
            out.append(cel["expression"])
        for value in obj.values():
            out.extend(selector_expressions(value))
    elif isinstance(obj, list):
        for value in obj:
            out.extend(selector_expressions(value))
    return out


def judge_for(objects: Any, kubernetes_version: str | None) -> tuple[Callable[[str], Any], str]:
    """The CEL judge for the selectors of ``objects`` at ``kubernetes_version`` (``1.37.2``;
    None: the default pinned release) and what judges (``celJudgedBy``): Kubernetes' own
    environment when its ``gpufleet-celcheck`` is cached, else the Python one. Never
    raises."""
    from gpufleet.build import celcheck

    return celcheck.judge_for(selector_expressions(objects), kubernetes_version)
