"""Deep merge of values (``plugins/module_utils/common/merge.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import merge

pytestmark = pytest.mark.unit


def test_mappings_merge_key_by_key_and_lists_are_replaced() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    over = {"a": {"c": [3], "e": 3}, "f": {"g": 1}}
    assert merge.deep_merge(base, over) == {
        "a": {"b": 1, "c": [3], "e": 3},
        "d": 1,
        "f": {"g": 1},
    }


def test_a_scalar_replaces_a_mapping_and_a_mapping_a_scalar() -> None:
    assert merge.deep_merge({"a": {"b": 1}}, {"a": 2}) == {"a": 2}
    assert merge.deep_merge({"a": 2}, {"a": {"b": 1}}) == {"a": {"b": 1}}


def test_neither_input_is_changed() -> None:
    base = {"a": {"b": 1}}
    over = {"a": {"c": 2}}
    merged = merge.deep_merge(base, over)
    merged["a"]["d"] = 3
    assert base == {"a": {"b": 1}}
    assert over == {"a": {"c": 2}}
