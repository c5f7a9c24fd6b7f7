"""Kubernetes quantities (plugins/module_utils/kube/quantity.py): parsed exactly, and
refused as ``resource.ParseQuantity`` refuses them."""

from __future__ import annotations

from fractions import Fraction

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import quantity as kq

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("16Gi", Fraction(16 * 2**30)),
        ("143771Mi", Fraction(143771 * 2**20)),
        ("500m", Fraction(1, 2)),
        ("1k", Fraction(1000)),
        ("1e3", Fraction(1000)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("16", Fraction(16)),
        ("2E", Fraction(2 * 10**18)),
    ],
)
def test_quantity_parses_kubernetes_suffixes(text: str, value: Fraction) -> None:
    assert kq.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["16GB", "Gi", "", "1.2.3", "ten"])
def test_quantity_refuses_what_parse_quantity_refuses(text: str) -> None:
    with pytest.raises(kq.QuantityError, match="not a Kubernetes quantity"):
        kq.parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [("8", 8), ("1k", 1000), ("1Ki", 1024), ("1000m", None), ("2E", 2 * 10**18), ("10E", None)],
)
def test_as_int64_is_what_kubernetes_gives(text: str, value: int | None) -> None:
    assert kq.quantity_int64(text) == value


def test_a_boolean_is_no_quantity() -> None:
    with pytest.raises(kq.QuantityError):
        kq.parse_quantity(True)


@pytest.mark.parametrize(
    ("text", "value"), [("10Ei", 10 * 2**60), ("3E", 3 * 10**18), ("1e3", 1000)]
)
def test_an_exa_suffix_is_no_exponent(text: str, value: int) -> None:
    assert kq.parse_quantity(text) == value
