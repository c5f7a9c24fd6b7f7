"""Values marked as data for Ansible (``plugins/module_utils/common/unsafe.py``): the shape
written, the refusals, and Ansible's own reading of the result (``tests/unit/ansible_vars``)
leaving a template as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import unsafe

from tests.unit.ansible_vars import as_ansible_sees_it, pipe_template

pytestmark = pytest.mark.unit


def test_every_string_is_marked_and_other_scalars_stay() -> None:
    value = {"a": ["x", 1, 2.5, True, None], "b": {"c": "y"}, "t": ("z",)}
    assert unsafe.mark_unsafe(value) == {
        "a": [{"__ansible_unsafe": "x"}, 1, 2.5, True, None],
        "b": {"c": {"__ansible_unsafe": "y"}},
        "t": [{"__ansible_unsafe": "z"}],
    }


def test_keys_become_strings_as_json_writes_them() -> None:
    assert unsafe.mark_unsafe({1: "a", None: "b"}) == {
        "1": {"__ansible_unsafe": "a"},
        "null": {"__ansible_unsafe": "b"},
    }


@pytest.mark.parametrize("key", unsafe.RESERVED_KEYS)
def test_a_key_of_ansibles_own_markers_is_refused_with_its_path(key: str) -> None:
    with pytest.raises(unsafe.UnsafeDataError, match=rf"^mig_proposal\['n1'\]: key '{key}'"):
        unsafe.mark_unsafe({"n1": {key: "x"}}, "mig_proposal")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (b"bytes", "is a bytes"),
        ({"a": {1, 2}}, r"v\['a'\] is a set"),
        ("caf\udce9", "is not UTF-8 text"),
    ],
    ids=["bytes", "set", "surrogate"],
)
def test_values_that_are_not_data_are_refused(value: object, fragment: str) -> None:
    with pytest.raises(unsafe.UnsafeDataError, match=fragment):
        unsafe.mark_unsafe(value, "v")


def test_nesting_is_bounded() -> None:
    deep: list = []
    for _ in range(unsafe.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(unsafe.UnsafeDataError, match="nested deeper than"):
        unsafe.mark_unsafe(deep)


def test_ansible_reads_the_marked_values_as_text(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    template = pipe_template(marker)
    value = {"layout": {"1g.18gb": template}, "list": [template, 7, None], "n": 2}
    path = tmp_path / "extravars"
    path.write_text(unsafe.unsafe_json({"v": value}))
    assert as_ansible_sees_it(path) == {"v": value}
    assert not marker.exists()


def test_without_the_marking_ansible_runs_the_template(tmp_path: Path) -> None:
    """The reading of tests/unit/ansible_vars can fail: the same value unmarked runs."""
    marker = tmp_path / "ran"
    path = tmp_path / "extravars"
    path.write_text(json.dumps({"v": pipe_template(marker)}))
    assert as_ansible_sees_it(path) == {"v": ""}
    assert marker.exists()
