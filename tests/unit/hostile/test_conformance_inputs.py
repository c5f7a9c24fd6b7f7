"""Hostile input to ``gpufleet validate --conformance``: focus expressions the suite (Go's
RE2) refuses or Python's backtracking matcher cannot finish, a NUL, durations of other
digits or with spaces, report directories under a file or of no path, a Ginkgo report of
another shape and namespaces listed with odd names.

Each option is refused before anything runs (exit 2, naming the option, the value and a
fix); the report is read as far as it holds what Ginkgo writes, never raised on; only a
namespace or pod name the API server allows reaches a DELETE's path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import conformance as vc
from click.testing import CliRunner

from gpufleet.cli import main

pytestmark = pytest.mark.unit


def refused(*args: str) -> str:
    result = CliRunner().invoke(main, ["validate", "--conformance-only", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


#: A focus refused -> what the refusal says.
FOCUSES = {
    "nul": ("claim\x00", "NUL"),
    "lookahead": ("(?=claim)", "RE2"),
    "lookbehind": ("(?<!x)claim", "RE2"),
    "backref": (r"(a)\1", "RE2"),
    "atomic": ("(?>claim)", "RE2"),
    "possessive": ("claim*+", "RE2"),
    "nested-repeat": ("(a+)+$", "exponential"),
    "words-repeated": (r"(\w+\s?)+$", "exponential"),
    "overlapping-choice": ("(a|aa)+$", "exponential"),
    "many-repeats": (".*.*.*.*.*.*x", "repeats"),
}


@pytest.mark.parametrize("case", list(FOCUSES))
def test_a_focus_the_suite_or_the_report_cannot_take_is_refused(case: str) -> None:
    focus, said = FOCUSES[case]
    out = refused("--conformance-focus", focus)
    assert "--conformance-focus" in out and said in out and "fix: give words" in out


@pytest.mark.parametrize("focus", ["supports simple ResourceClaim", "claim.*device", "DRA|x"])
def test_a_plain_focus_is_taken(focus: str) -> None:
    assert vc.duration_seconds("1h") == 3600
    from gpufleet.commands import _conformance as c

    assert c._focus_unfit(focus) == ""


#: A timeout refused (Go's ParseDuration reads the value as given).
TIMEOUTS = {
    "leading-space": " 1h",
    "trailing-space": "1h ",
    "newline": "1h\n",
    "arabic-digit": "\u0661h",
    "fullwidth-digit": "\uff11h",
    "nul": "1h\x00",
    "huge": "9" * 5000 + "h",
    "exponent": "1e9h",
    "negative": "-1s",
    "zero": "0",
}


@pytest.mark.parametrize("case", list(TIMEOUTS))
def test_a_timeout_go_would_not_read_is_refused(case: str) -> None:
    out = refused("--conformance-timeout", TIMEOUTS[case])
    assert "--conformance-timeout" in out and "fix: give" in out


def test_a_report_dir_under_a_file_or_of_no_path_is_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("")
    out = refused("--conformance-report-dir", str(a_file / "reports"))
    assert "--conformance-report-dir" in out and f"{a_file} is one" in out
    out = refused("--conformance-report-dir", "re\x00ports")
    assert "is no path; fix: give a directory path" in out


def _spec(**over: Any) -> dict[str, Any]:
    return {"LeafNodeType": "It", "LeafNodeText": "claim", "State": "passed", **over}


#: A Ginkgo report of another shape -> the case's id.
REPORTS = {
    "spec-text": [{"SpecReports": ["x"]}],
    "spec-reports-mapping": [{"SpecReports": {"a": 1}}],
    "run-time-text": [{"SpecReports": [_spec(RunTime="abc")]}],
    "run-time-huge": [{"SpecReports": [_spec(RunTime=1e308)]}],
    "failure-list": [{"SpecReports": [_spec(State="failed", Failure=[1])]}],
    "location-text": [{"SpecReports": [_spec(State="failed", Failure={"Location": "x"})]}],
    "texts-number": [{"SpecReports": [_spec(ContainerHierarchyTexts=5)]}],
    "labels-number": [{"SpecReports": [_spec(State="skipped", LeafNodeLabels=5)]}],
    "container-labels-numbers": [
        {"SpecReports": [_spec(State="skipped", ContainerHierarchyLabels=[5, None])]}
    ],
    "state-mapping": [{"SpecReports": [_spec(State={})]}],
}


@pytest.mark.parametrize("case", list(REPORTS))
def test_a_report_of_another_shape_is_read_not_raised(case: str) -> None:
    report = REPORTS[case]
    vc.summarise(report)
    for check in vc.spec_checks(report):
        assert check.id.startswith("conformance.")


#: Namespaces listed -> the case's id; none of them is the suite's to delete.
NAMESPACES = {
    "item-text": ["x"],
    "metadata-text": [{"metadata": "x"}],
    "labels-text": [{"metadata": {"name": "e2e-a", "labels": "e2e-run e2e-framework"}}],
    "name-path": [
        {"metadata": {"name": "../../apis/x", "labels": dict.fromkeys(vc.NAMESPACE_LABELS)}}
    ],
    "name-none": [{"metadata": {"labels": dict.fromkeys(vc.NAMESPACE_LABELS)}}],
    "name-query": [{"metadata": {"name": "a?x=1", "labels": dict.fromkeys(vc.NAMESPACE_LABELS)}}],
}


@pytest.mark.parametrize("case", list(NAMESPACES))
def test_a_namespace_of_another_shape_is_not_the_suites(case: str) -> None:
    assert vc.suite_namespaces(NAMESPACES[case]) == set()
