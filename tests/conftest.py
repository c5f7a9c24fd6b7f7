"""Every skip is reported, and with ``GPUFLEET_STRICT_SKIPS=1`` (scripts/test sets it) a
skip that ``tests/expected_skips.txt`` does not list fails the run: a skip hides what it
would have tested, so it passes only when it is known and reviewed.

Every test carries one marker that says what it starts (``KIND_MARKERS``, defined in
pyproject.toml), so that ``-m unit`` runs no process; a test without one, or marked
``unit`` together with another kind, stops the collection naming it."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest

EXPECTED = Path(__file__).with_name("expected_skips.txt")

#: Markers that say what a test starts: ``unit`` nothing (pure Python), ``integration``
#: local processes or servers, ``ansible`` ansible-playbook, ``molecule`` a scenario on
#: podman hosts, ``lab`` a lab cluster, ``bench`` benchmarks.
KIND_MARKERS = frozenset({"unit", "integration", "ansible", "molecule", "lab", "bench"})


def expected_skips(path: Path = EXPECTED) -> list[tuple[str, str]]:
    """(node id pattern, why) of every line of the list; comments and blanks ignored."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, why = line.partition(" -- ")
        out.append((pattern.strip(), why.strip()))
    return out


def unexpected(skipped: list[str], patterns: list[tuple[str, str]]) -> list[str]:
    """The node ids of ``skipped`` that no pattern matches."""
    return [n for n in skipped if not any(fnmatch.fnmatchcase(n, p) for p, _ in patterns)]


_skipped: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, reason))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _skipped:
        return
    patterns = expected_skips()
    bad = set(unexpected([n for n, _ in _skipped], patterns))
    terminalreporter.section(f"skips: {len(_skipped)} ({len(bad)} not on tests/expected_skips.txt)")
    for nodeid, reason in _skipped:
        mark = "UNEXPECTED " if nodeid in bad else ""
        terminalreporter.write_line(f"{mark}SKIP {nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("GPUFLEET_STRICT_SKIPS") != "1" or not _skipped:
        return
    if unexpected([n for n, _ in _skipped], expected_skips()) and exitstatus == 0:
        session.exitstatus = 1


def marker_problems(items: list[pytest.Item]) -> list[str]:
    """``<node id>: <problem>`` for each item without a kind marker, marked ``unit``
    together with another kind (``unit`` promises that nothing is started), or under
    ``tests/unit/`` without being ``unit`` (a test that starts a process belongs in
    ``tests/ansible/``, ``tests/integration/`` or ``tests/lab/``)."""
    out = []
    for item in items:
        kinds = {m.name for m in item.iter_markers()} & KIND_MARKERS
        if not kinds:
            out.append(f"{item.nodeid}: no marker of {', '.join(sorted(KIND_MARKERS))}")
        elif "unit" in kinds and len(kinds) > 1:
            others = ", ".join(sorted(kinds - {"unit"}))
            out.append(f"{item.nodeid}: marked unit and {others}")
        elif item.nodeid.startswith("tests/unit/") and "unit" not in kinds:
            out.append(f"{item.nodeid}: under tests/unit but marked {', '.join(sorted(kinds))}")
    return out


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    problems = marker_problems(items)
    if problems:
        raise pytest.UsageError(
            "tests must carry one kind marker (tests/conftest.py KIND_MARKERS):\n  "
            + "\n  ".join(problems)
        )
