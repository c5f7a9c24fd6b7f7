"""The kind-marker rule of ``tests/conftest.py``: a test without a kind marker, or marked
unit together with another kind, is named; the run's own tests all pass it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.conftest import marker_problems

pytestmark = pytest.mark.unit


@dataclass
class FakeItem:
    nodeid: str
    marks: list[str] = field(default_factory=list)

    def iter_markers(self):
        return [getattr(pytest.mark, name).mark for name in self.marks]


def test_one_kind_marker_is_accepted() -> None:
    items = [
        FakeItem("a.py::t1", ["unit"]),
        FakeItem("b.py::t2", ["integration", "slow"]),
        FakeItem("c.py::t3", ["parametrize", "lab", "slow"]),
        FakeItem("d.py::t4", ["ansible"]),
    ]
    assert marker_problems(items) == []  # type: ignore[arg-type]


def test_missing_and_conflicting_kinds_are_named() -> None:
    items = [
        FakeItem("a.py::none", ["slow", "skipif"]),
        FakeItem("b.py::both", ["unit", "integration"]),
        FakeItem("c.py::unit-ansible", ["ansible", "unit"]),
        FakeItem("d.py::fine", ["integration"]),
    ]
    assert marker_problems(items) == [  # type: ignore[arg-type]
        "a.py::none: no marker of ansible, bench, integration, lab, molecule, unit",
        "b.py::both: marked unit and integration",
        "c.py::unit-ansible: marked unit and ansible",
    ]


def test_a_process_starting_test_under_tests_unit_is_named() -> None:
    items = [
        FakeItem("tests/unit/a.py::starts", ["integration"]),
        FakeItem("tests/unit/b.py::pure", ["unit"]),
        FakeItem("tests/ansible/c.py::plays", ["ansible"]),
    ]
    assert marker_problems(items) == [  # type: ignore[arg-type]
        "tests/unit/a.py::starts: under tests/unit but marked integration"
    ]
