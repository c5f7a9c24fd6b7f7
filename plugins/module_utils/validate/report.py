# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The validation report: checks with stable ids, their status, evidence and fix, and the
renderings CI reads (JSON, JUnit XML, Markdown).

Data first: ``Report.to_dict()`` is the JSON document (``schema`` 1); the renderers take
that dict, so a report read back from a file renders the same as one built in memory.

A check::

    {"id": "nodes.gpu-labels", "area": "nodes", "title": "...", "status": "fail",
     "summary": "1 of 2 GPU nodes lacks nvidia.com/gpu.present=true",
     "problems": [{"subject": "gpu-2", "status": "fail", "message": "..."}],
     "evidence": [{"source": "GET /api/v1/nodes", "detail": "2 nodes listed"}],
     "fix": "gpufleet ... ", "reason": null, "data": {...},
     "details": ["gpu_h100: declares device-plugin; 2 node(s) advertise device-plugin 2"]}

``details`` are lines of what the check found, shown under its summary whatever its
status (a report section, such as the GPU path per pool); ``data`` the same as JSON.
``status`` is ``pass``, ``warn``, ``fail`` or ``skip`` (``reason`` says why it was
skipped). The report's exit code follows the CLI contract: 0 when no check failed, 1
when one did (2, validation could not run, never comes from a report).

Standard library only.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AREAS",
    "FAIL",
    "PASS",
    "SKIP",
    "STATUSES",
    "WARN",
    "Check",
    "Evidence",
    "Problem",
    "Report",
    "details_of",
    "exit_code",
    "render_junit",
    "render_markdown",
    "render_text",
    "sort_checks",
    "worst",
]

SCHEMA = 1
PASS = "pass"
WARN = "warn"
FAIL = "fail"
SKIP = "skip"
STATUSES = (FAIL, WARN, SKIP, PASS)
#: Order of severity for "worst of" (fail beats warn beats pass; skip counts as pass).
_RANK = {FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}
#: Display order: failures first.
_ORDER = {FAIL: 0, WARN: 1, SKIP: 2, PASS: 3}
#: Areas in the order the report shows them.
AREAS = (
    "versions",
    "gates",
    "api",
    "nodes",
    "hosts",
    "claims",
    "kueue",
    "smoke",
    "conformance",
)


def worst(statuses: Iterable[str]) -> str:
    """The most severe of ``statuses`` (``pass`` for none; ``skip`` only when all skip)."""
    items = list(statuses)
    if not items:
        return PASS
    return max(items, key=lambda s: _RANK[s])


@dataclass
class Evidence:
    """What was read, where: ``source`` (``GET /api/v1/nodes``, ``gpu-1: containerd config
    dump``) and ``detail`` (what it said)."""

    source: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "detail": self.detail}


@dataclass
class Problem:
    """One finding of a check about one ``subject`` (a node, host, claim; None for the
    cluster): its own ``status`` (``fail`` or ``warn``) and ``message``."""

    subject: str | None
    status: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "status": self.status, "message": self.message}


@dataclass
class Check:
    """One check. ``status`` defaults to the worst of ``problems`` (``pass`` without any)
    unless given; ``skip`` needs ``reason``. ``details``: lines the renderings show under
    the summary whatever the status."""

    id: str
    title: str
    status: str = ""
    summary: str = ""
    problems: list[Problem] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    fix: str | None = None
    reason: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.status:
            self.status = worst(p.status for p in self.problems)
        if self.status not in STATUSES:
            raise ValueError(f"check {self.id}: status {self.status!r} is not one of {STATUSES}")
        if self.status == SKIP and not self.reason:
            raise ValueError(f"check {self.id}: a skipped check needs a reason")
        if self.status == PASS:
            self.fix = None

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]

    def problem(self, subject: str | None, status: str, message: str) -> None:
        self.problems.append(Problem(subject, status, message))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "area": self.area,
            "title": self.title,
            "status": self.status,
            "summary": self.summary,
            "problems": [p.to_dict() for p in self.problems],
            "evidence": [e.to_dict() for e in self.evidence],
            "fix": self.fix,
            "reason": self.reason,
            "data": self.data,
            "details": list(self.details),
        }


def check_from_dict(d: Mapping[str, Any]) -> Check:
    """A Check from its ``to_dict`` form (a check an earlier run returned)."""
    return Check(
        str(d["id"]),
        str(d.get("title") or d["id"]),
        str(d.get("status") or ""),
        str(d.get("summary") or ""),
        problems=[
            Problem(p.get("subject"), p["status"], p["message"]) for p in d.get("problems") or []
        ],
        evidence=[Evidence(e["source"], e["detail"]) for e in d.get("evidence") or []],
        fix=d.get("fix"),
        reason=d.get("reason"),
        data=dict(d.get("data") or {}),
        details=list(d.get("details") or []),
    )


def skipped(check_id: str, title: str, reason: str, evidence: Sequence[Evidence] = ()) -> Check:
    """A skipped check with its reason."""
    return Check(
        check_id, title, SKIP, f"skipped: {reason}", evidence=list(evidence), reason=reason
    )


def finish(check: Check, ok_summary: str, bad_summary: str | None = None) -> Check:
    """Recompute ``status`` from the problems and set the summary: ``ok_summary`` when none
    failed or warned, else ``bad_summary`` (default: the first problem's message and the
    count of the others)."""
    check.status = worst(p.status for p in check.problems)
    if check.status == PASS:
        check.summary = ok_summary
        check.fix = None
    elif bad_summary is not None:
        check.summary = bad_summary
    else:
        first = next(p for p in check.problems if p.status == check.status)
        more = len(check.problems) - 1
        where = f"{first.subject}: " if first.subject else ""
        check.summary = where + first.message + (f" (and {more} more)" if more else "")
    return check


def sort_checks(checks: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Checks (dicts) failures first, then warnings, skips and passes; by area then id."""
    area = {a: i for i, a in enumerate(AREAS)}
    return sorted(
        checks,
        key=lambda c: (_ORDER.get(c["status"], 9), area.get(c.get("area", ""), 99), c["id"]),
    )


def counts(checks: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    out = dict.fromkeys(STATUSES, 0)
    for c in checks:
        out[c["status"]] = out.get(c["status"], 0) + 1
    return out


def exit_code(report: Mapping[str, Any]) -> int:
    """0 when no check of ``report`` (a ``Report.to_dict()``) failed, else 1."""
    return 1 if any(c["status"] == FAIL for c in report.get("checks", [])) else 0


@dataclass
class Report:
    """All checks of one validation run and what it ran against (``meta``: cluster version,
    inventory, timings in seconds, API requests made)."""

    checks: list[Check] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        checks = [c.to_dict() for c in self.checks]
        return {
            "schema": SCHEMA,
            "status": FAIL if any(c["status"] == FAIL for c in checks) else PASS,
            "counts": counts(checks),
            "meta": dict(self.meta),
            "checks": sort_checks(checks),
        }


def merge(*reports: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One report dict from several (a later check with the same id replaces an earlier
    one); ``meta`` entries are merged in order, then ``meta`` on top."""
    by_id: dict[str, Mapping[str, Any]] = {}
    merged_meta: dict[str, Any] = {}
    for r in reports:
        merged_meta.update(r.get("meta") or {})
        for c in r.get("checks") or []:
            by_id[c["id"]] = c
    merged_meta.update(meta or {})
    checks = list(by_id.values())
    return {
        "schema": SCHEMA,
        "status": FAIL if any(c["status"] == FAIL for c in checks) else PASS,
        "counts": counts(checks),
        "meta": merged_meta,
        "checks": sort_checks(checks),
    }


# ------------------------------------------------------------------ renderings


def _problem_lines(check: Mapping[str, Any]) -> list[str]:
    return [
        f"{p['status'].upper()} {p['subject'] or '(cluster)'}: {p['message']}"
        for p in check.get("problems") or []
    ]


def details_of(check: Mapping[str, Any]) -> list[str]:
    """The check's ``details`` lines (none for a report written before they existed, or
    a member that is not a list of lines)."""
    details = check.get("details")
    return [str(x) for x in details] if isinstance(details, list) else []


def render_text(report: Mapping[str, Any]) -> list[str]:
    """Plain lines: one per check (failures first), its details, problems and fix
    indented."""
    c = report.get("counts") or {}
    lines = [
        f"validation: {report.get('status', '?').upper()} - {c.get(FAIL, 0)} failed, "
        f"{c.get(WARN, 0)} warnings, {c.get(SKIP, 0)} skipped, {c.get(PASS, 0)} passed"
    ]
    for check in report.get("checks") or []:
        lines.append(f"{check['status'].upper():<4} {check['id']}: {check['summary']}")
        lines += [f"       {x}" for x in details_of(check)]
        if check["status"] in (FAIL, WARN):
            lines += [f"       {x}" for x in _problem_lines(check)]
            if check.get("fix"):
                lines.append(f"       fix: {check['fix']}")
    return lines


def render_junit(report: Mapping[str, Any], name: str = "gpufleet validate") -> str:
    """JUnit XML: one ``testsuite`` per area, one ``testcase`` per check (classname
    ``gpufleet.validate.<area>``, name the check id); ``fail`` -> ``<failure>``, ``skip``
    -> ``<skipped message=reason>``, ``warn`` passes with its text in ``<system-out>``.
    Evidence goes to ``<system-out>`` of every test case."""
    checks = list(report.get("checks") or [])
    root = ET.Element(
        "testsuites",
        name=name,
        tests=str(len(checks)),
        failures=str(sum(1 for c in checks if c["status"] == FAIL)),
        skipped=str(sum(1 for c in checks if c["status"] == SKIP)),
        errors="0",
        time=f"{float((report.get('meta') or {}).get('duration_s') or 0):.3f}",
    )
    by_area: dict[str, list[Mapping[str, Any]]] = {}
    for c in checks:
        by_area.setdefault(c.get("area") or c["id"].split(".", 1)[0], []).append(c)
    area_rank = {a: i for i, a in enumerate(AREAS)}
    for area in sorted(by_area, key=lambda a: area_rank.get(a, 99)):
        items = by_area[area]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"gpufleet.validate.{area}",
            tests=str(len(items)),
            failures=str(sum(1 for c in items if c["status"] == FAIL)),
            skipped=str(sum(1 for c in items if c["status"] == SKIP)),
            errors="0",
        )
        for c in sorted(items, key=lambda x: x["id"]):
            case = ET.SubElement(
                suite, "testcase", classname=f"gpufleet.validate.{area}", name=c["id"]
            )
            body = [c["summary"], *details_of(c), *_problem_lines(c)]
            if c.get("fix"):
                body.append(f"fix: {c['fix']}")
            if c["status"] == FAIL:
                failure = ET.SubElement(case, "failure", message=c["summary"], type="fail")
                failure.text = "\n".join(body)
            elif c["status"] == SKIP:
                ET.SubElement(case, "skipped", message=c.get("reason") or c["summary"])
            out = [*(body if c["status"] == WARN else details_of(c))]
            out += [f"evidence: {e['source']}: {e['detail']}" for e in c.get("evidence") or []]
            if out:
                ET.SubElement(case, "system-out").text = "\n".join(out)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


_ICON = {FAIL: "FAIL", WARN: "WARN", SKIP: "SKIP", PASS: "PASS"}


def render_markdown(report: Mapping[str, Any]) -> str:
    """Markdown: a headline, a table per area (failures first), then the details (problems,
    evidence, fix) of every check that failed or warned, and the ``details`` lines of
    every check that has them."""
    c = report.get("counts") or {}
    meta = report.get("meta") or {}
    out = [
        f"# gpufleet validate: {report.get('status', '?').upper()}",
        "",
        f"{c.get(FAIL, 0)} failed, {c.get(WARN, 0)} warnings, {c.get(SKIP, 0)} skipped, "
        f"{c.get(PASS, 0)} passed"
        + (f" (Kubernetes {meta['kubernetes_version']})" if meta.get("kubernetes_version") else ""),
        "",
    ]
    checks = list(report.get("checks") or [])
    for area in AREAS + tuple(sorted({x.get("area", "") for x in checks} - set(AREAS))):
        items = [x for x in checks if x.get("area") == area]
        if not items:
            continue
        out += [f"## {area}", "", "| status | check | summary |", "|---|---|---|"]
        for x in sort_checks(items):
            out.append(f"| {_ICON[x['status']]} | `{x['id']}` | {_md(x['summary'])} |")
        out.append("")
    bad = [x for x in checks if x["status"] in (FAIL, WARN) or details_of(x)]
    if bad:
        out += ["## details", ""]
        for x in bad:
            out.append(f"### {_ICON[x['status']]} `{x['id']}`: {x['title']}")
            out.append("")
            out += [f"- {_md(line)}" for line in details_of(x)]
            for p in x.get("problems") or []:
                out.append(
                    f"- **{p['status']}** {_md(p['subject'] or '(cluster)')}: {_md(p['message'])}"
                )
            for e in x.get("evidence") or [] if x["status"] in (FAIL, WARN) else []:
                out.append(f"- evidence: {_md(e['source'])}: {_md(e['detail'])}")
            if x.get("fix"):
                out.append(f"- fix: {_md(x['fix'])}")
            out.append("")
    return "\n".join(out).rstrip() + "\n"
