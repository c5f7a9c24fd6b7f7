# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What the ResourceClaim checkers report: ``Problem`` (path, message, severity
``error`` or ``warning``) and ``problems_by_severity``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "Problem",
]


# --------------------------------------------------------------------------------------
# Checker
# --------------------------------------------------------------------------------------

ERROR = "error"


WARNING = "warning"


#: A CEL selector that cannot be judged without Kubernetes' own CEL environment: neither a
#: pass nor a fail (``cel.verdicts.CANNOT_JUDGE``).
UNJUDGED = "cannot-judge"


@dataclass(frozen=True)
class Problem:
    """One finding of ``check_claim_spec``: ``path`` (``spec.spec.devices.requests[0]``),
    ``message`` (what is wrong and the shape to write instead), ``severity``: ``"error"``
    (the API refuses it, or strict field validation as kubectl uses it does) or
    ``"warning"`` (the API takes it but it cannot do what it looks like) or
    ``"cannot-judge"`` (a CEL selector this checker cannot judge offline)."""

    path: str
    message: str
    severity: str = ERROR

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "severity": self.severity, "message": self.message}

    def __str__(self) -> str:
        return f"{self.severity}: {self.path}: {self.message}"


def problems_by_severity(problems: Iterable[Problem]) -> dict[str, list[Problem]]:
    """``{"error": [...], "warning": [...]}``."""
    out: dict[str, list[Problem]] = {ERROR: [], WARNING: []}
    for p in problems:
        out.setdefault(p.severity, []).append(p)
    return out
