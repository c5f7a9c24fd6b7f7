"""Reading fields of objects whose shape is not trusted
(``plugins/module_utils/common/fields.py``)."""

from __future__ import annotations

from collections import OrderedDict
from types import MappingProxyType

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import fields

pytestmark = pytest.mark.unit


class _Dict(dict):
    """A dict subclass, as Ansible hands over its tagged values."""


@pytest.mark.parametrize(
    "value", [{}, {"a": 1}, _Dict(a=1), OrderedDict(a=1), MappingProxyType({"a": 1})]
)
def test_a_mapping_is_read_as_it_is(value: object) -> None:
    assert fields.is_map(value)
    assert fields.as_map(value) is value


@pytest.mark.parametrize("value", [None, "spec", b"{}", [("a", 1)], 3, 1.5, True, {1, 2}])
def test_anything_else_reads_as_an_empty_mapping(value: object) -> None:
    assert not fields.is_map(value)
    got = fields.as_map(value)
    assert got == {} and got is not value


def test_a_list_is_read_as_it_is_and_anything_else_as_an_empty_list() -> None:
    items = [1, {"a": 2}]
    assert fields.as_list(items) is items
    for value in (None, "ab", (1, 2), {"a": 1}, 3, {1}):
        assert fields.as_list(value) == []
