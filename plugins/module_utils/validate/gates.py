# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Validation checks from the gate audit's result (``gate_report.AuditResult.to_dict()``):
``gates.component-drift``, ``gates.model`` and ``gates.coverage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = [
    "gates_checks",
]


# ------------------------------------------------------------------ gates

_DRIFT = {
    "gates.process-file-drift",
    "gates.configmap-drift",
    "gates.node-drift",
    "gates.metric-drift",
    "gates.kubelet-flag-override",
    "gates.restart-pending",
    "gates.process-absent",
}


_COVERAGE = {
    "gates.facts-missing",
    "gates.component-not-found",
    "gates.configmap-absent",
    "gates.source-unreadable",
}


def gates_checks(audit: Mapping[str, Any] | None, reason: str = "") -> list[Check]:
    """The gate audit (``gate_report.AuditResult.to_dict()``) as three checks:
    ``gates.component-drift``, ``gates.model`` and ``gates.coverage``; each finding keeps
    its own id in the problem text. ``audit`` None: all three skipped with ``reason``."""
    titles = {
        "gates.component-drift": "feature gates: processes = files = ConfigMaps, hosts alike",
        "gates.model": "feature gates and runtime-config as the DRA version model requires",
        "gates.coverage": "every host and component was audited",
    }
    if audit is None:
        return [skipped(i, t, reason or "the gate audit did not run") for i, t in titles.items()]
    ev = Evidence(
        "gate audit (dra_gate_audit_facts on every node, kube-system ConfigMaps)",
        f"version {audit.get('version')}, {len((audit.get('summary') or {}).get('hosts') or [])} "
        f"host(s), {(audit.get('counts') or {}).get('fail', 0)} failed and "
        f"{(audit.get('counts') or {}).get('warn', 0)} warning finding(s)",
    )
    checks = {i: Check(i, t, evidence=[ev]) for i, t in titles.items()}
    fixes: dict[str, list[str]] = {i: [] for i in titles}
    for f in audit.get("findings") or []:
        fid = f.get("id", "")
        target = (
            "gates.component-drift"
            if fid in _DRIFT
            else "gates.coverage"
            if fid in _COVERAGE
            else "gates.model"
        )
        subject = " ".join(x for x in (f.get("host") or "(cluster)", f.get("component") or "") if x)
        checks[target].problem(subject, f.get("severity", FAIL), f"[{fid}] {f.get('message', '')}")
        if f.get("fix"):
            fixes[target].append(f["fix"])
    oks = {
        "gates.component-drift": "processes, files and ConfigMaps agree on every host",
        "gates.model": f"every component as the version model requires for {audit.get('version')}",
        "gates.coverage": "every host and component was read",
    }
    out = []
    for i, c in checks.items():
        c.fix = "; ".join(dict.fromkeys(fixes[i])) or None
        out.append(finish(c, oks[i]))
    return out
