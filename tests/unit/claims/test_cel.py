"""CEL for claim selectors: quoting, MIG profiles, memory sizes, made-up attribute maps and
the offline check of an expression (``plugins/module_utils/claims/cel.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import cel as ccel
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    metadata as claims_metadata,
)

pytestmark = pytest.mark.unit

MEMORY_40 = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"


def test_cel_string_quotes_and_escapes() -> None:
    assert ccel.cel_string("it's") == "'it\\'s'"


@pytest.mark.parametrize("profile", ["1g.18gb", "1g.18gb+me", "3g.71gb"])
def test_mig_profile_selector(profile: str) -> None:
    assert ccel.cel_mig_profile(profile) == (
        f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
    )


def test_a_name_that_is_no_mig_profile_is_refused_with_examples() -> None:
    with pytest.raises(claims_metadata.ClaimTemplateError, match=r"profile='big'.*1g\.18gb"):
        ccel.cel_mig_profile("big")


@pytest.mark.parametrize(("gib", "quantity"), [(40, "40Gi"), (40.5, "41472Mi"), ("80", "80Gi")])
def test_memory_quantity_is_binary(gib: float | str, quantity: str) -> None:
    assert ccel.memory_quantity(gib) == quantity


@pytest.mark.parametrize("bad", [0, -1, "x", 10_000])
def test_memory_that_is_no_positive_size_is_refused_naming_the_parameter(bad: object) -> None:
    with pytest.raises(claims_metadata.ClaimTemplateError, match=f"min_gib={bad}"):
        ccel.memory_quantity(bad)


def test_memory_at_least_compares_quantities() -> None:
    assert ccel.cel_memory_at_least(40) == MEMORY_40


def test_made_up_attribute_maps_become_cel() -> None:
    assert ccel.suggest_cel({"memoryGB": ">=40"}) == MEMORY_40
    assert ccel.suggest_cel({"productName": "NVIDIA H200"}) == (
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
    )


def test_selectors_text_is_the_yaml_to_write() -> None:
    assert ccel.selectors_text("device.driver == 'x'") == (
        "selectors: [{cel: {expression: \"device.driver == 'x'\"}}]"
    )


def test_check_cel_passes_good_cel_and_names_what_does_not_parse() -> None:
    assert ccel.check_cel("device.driver == 'gpu.nvidia.com'") == []
    [(severity, message)] = ccel.check_cel("device.driver = 'x'")
    assert severity == "error" and "does not parse" in message
    [(severity, message)] = ccel.check_cel(5)
    assert severity == "error" and "not a non-empty CEL string" in message


def test_cel_memory_compare_writes_both_bounds() -> None:
    assert ccel.cel_memory_compare("33280Mi", "<=") == (
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('33280Mi')) <= 0"
    )
    assert ccel.cel_memory_compare("20Gi", ">=").endswith("compareTo(quantity('20Gi')) >= 0")
    with pytest.raises(ValueError, match="op='<' is not >= or <="):
        ccel.cel_memory_compare("20Gi", "<")
