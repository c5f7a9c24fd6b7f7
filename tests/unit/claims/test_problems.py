"""Findings of the claim checker (``plugins/module_utils/claims/problems.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import problems as cprob

pytestmark = pytest.mark.unit


def test_problems_by_severity_always_has_errors_and_warnings() -> None:
    assert cprob.problems_by_severity([]) == {"error": [], "warning": []}
    error = cprob.Problem("spec", "bad")
    warning = cprob.Problem("spec.x", "odd", cprob.WARNING)
    unjudged = cprob.Problem("spec.y", "?", cprob.UNJUDGED)
    assert cprob.problems_by_severity([warning, error, unjudged]) == {
        "error": [error],
        "warning": [warning],
        "cannot-judge": [unjudged],
    }


def test_a_problem_reads_as_severity_path_message() -> None:
    problem = cprob.Problem("spec.devices", "no requests")
    assert str(problem) == "error: spec.devices: no requests"
    assert problem.to_dict() == {
        "path": "spec.devices",
        "severity": "error",
        "message": "no requests",
    }
