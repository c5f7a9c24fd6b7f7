# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The result of the DRA gate audit: ``Finding`` (one disagreement, with a stable id),
``AuditResult``, the per-host summary table data (``build_summary``) and its rendering as
text lines (``format_table``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.facts import (
    FlagSet,
    HostFacts,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.terms import (
    COMPONENTS,
    FAIL,
    FILE,
    PROCESS,
    SEVERITY_ORDER,
    WARN,
    bool_text,
    configmap_for,
)

__all__ = [
    "AuditResult",
    "Finding",
    "format_table",
]


# ------------------------------------------------------------------ findings


@dataclass(frozen=True)
class Finding:
    """One disagreement.

    ``id``: stable identifier (``gates.node-drift``); ``severity``: ``fail`` or ``warn``;
    ``host``: inventory host (None: cluster-wide, e.g. a ConfigMap); ``component``;
    ``kind``: ``feature-gate`` or ``runtime-config`` (None for component-level findings);
    ``name``: the gate or runtime-config key; ``values``: what each source says (source ->
    value text, None: absent); ``message``; ``fix``.
    """

    id: str
    severity: str
    host: str | None
    component: str | None
    kind: str | None
    name: str | None
    values: dict[str, str | None]
    message: str
    fix: str

    def sort_key(self) -> tuple:
        comp = COMPONENTS.index(self.component) if self.component in COMPONENTS else 9
        return (
            SEVERITY_ORDER[self.severity],
            self.id,
            comp,
            self.host or "",
            self.kind or "",
            self.name or "",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "host": self.host,
            "component": self.component,
            "kind": self.kind,
            "name": self.name,
            "values": dict(self.values),
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class AuditResult:
    """``version`` judged against, ``features``/``gates`` asked for, ``findings`` (fail
    first), ``summary`` (table data, see ``audit``) and ``plan`` (what the version model
    wants per component)."""

    version: str
    features: list[str]
    gates: dict[str, bool]
    findings: list[Finding]
    summary: dict[str, Any]
    plan: dict[str, Any]

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == FAIL]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARN]

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "features": list(self.features),
            "gates": dict(sorted(self.gates.items())),
            "ok": self.ok,
            "counts": {FAIL: len(self.failed), WARN: len(self.warnings)},
            "findings": [f.to_dict() for f in self.findings],
            "summary": self.summary,
            "plan": self.plan,
        }


def dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out = []
    for f in findings:
        key = (f.id, f.host, f.component, f.kind, f.name, tuple(sorted(f.values.items())))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def build_summary(
    hosts: Mapping[str, HostFacts],
    components: Sequence[str],
    findings: Sequence[Finding],
    cm_flags: Mapping[str, FlagSet] | None,
) -> dict[str, Any]:
    cells: dict[str, dict[str, Any]] = {c: {} for c in components}
    for host, hf in sorted(hosts.items()):
        for c in components:
            cf = hf.components.get(c)
            if cf is None:
                continue
            if cf.running and cf.process is not None:
                state, source, flags = "running", PROCESS, cf.process
            elif cf.file_flags is not None:
                state, source, flags = "not running", FILE, cf.file_flags
            else:
                state, source, flags = "absent", None, FlagSet()
            if state == "absent" and not cf.errors:
                continue
            mine = [f for f in findings if f.host == host and f.component == c]
            metrics = None
            if cf.metrics is not None:
                metrics = (
                    "read"
                    if cf.metrics.read
                    else f"skipped: {cf.metrics.skipped}"
                    if cf.metrics.skipped
                    else f"error: {cf.metrics.error}"
                )
            flagged: dict[str, str] = {}
            for f in mine:
                if f.name is not None and flagged.get(f.name) != FAIL:
                    flagged[f.name] = f.severity
            cells[c][host] = {
                "state": state,
                "pid": cf.pid,
                "source": source,
                **flags.to_dict(),
                "metrics": metrics,
                "flagged": dict(sorted(flagged.items())),
                FAIL: sum(1 for f in mine if f.severity == FAIL),
                WARN: sum(1 for f in mine if f.severity == WARN),
            }
    return {
        "hosts": sorted(hosts),
        "components": list(components),
        "cells": cells,
        "configmaps": {c: cm_flags[c].to_dict() for c in components if c in cm_flags}
        if cm_flags is not None
        else None,
    }


# ------------------------------------------------------------------ text rendering


def _cell_entries(cell: Mapping[str, Any]) -> list[str]:
    flagged = cell.get("flagged") or {}
    marks = {FAIL: "!", WARN: "~"}
    out = []
    for name, value in (cell.get("feature_gates") or {}).items():
        out.append(f"{name}={bool_text(value)}{marks.get(flagged.get(name, ''), '')}")
    for key, value in (cell.get("runtime_config") or {}).items():
        out.append(f"{key}={value}{marks.get(flagged.get(key, ''), '')}")
    return out


def format_table(result: Mapping[str, Any]) -> list[str]:
    """Plain-text lines for a terminal or an Ansible debug message: one line per host and
    component (entries with a failed finding end in ``!``, with a warning in ``~``), the
    ConfigMaps, then the findings, failures first. ``result``: ``AuditResult.to_dict()``."""
    summary = result.get("summary") or {}
    counts = result.get("counts") or {}
    lines = [
        f"DRA gate audit against Kubernetes {result.get('version')}: "
        f"{counts.get(FAIL, 0)} failed, {counts.get(WARN, 0)} warnings "
        "(! failed, ~ warning)"
    ]
    rows = []
    for c in summary.get("components") or []:
        for host, cell in sorted((summary.get("cells") or {}).get(c, {}).items()):
            entries = _cell_entries(cell)
            state = cell.get("state", "")
            if cell.get("metrics") == "read":
                state += ", /metrics read"
            rows.append((host, c, state, " ".join(entries) or "-"))
    for c, flags in sorted((summary.get("configmaps") or {}).items()):
        entries = _cell_entries(flags)
        rows.append(("(configmap)", c, configmap_for(c), " ".join(entries) or "-"))
    if rows:
        header = ("host", "component", "state", "feature-gates / runtime-config")
        widths = [max(len(r[i]) for r in [*rows, header]) for i in (0, 1, 2)]
        for r in [header, *rows]:
            lines.append(
                f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip()
            )
    for f in result.get("findings") or []:
        where = " ".join(x for x in (f.get("host") or "(cluster)", f.get("component") or "") if x)
        subject = f" {f['name']}" if f.get("name") else ""
        lines.append(f"{f['severity'].upper()} {f['id']} {where}{subject}: {f['message']}")
        lines.append(f"  fix: {f['fix']}")
    return lines
