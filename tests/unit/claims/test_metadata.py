"""Names, labels, counts, memory sizes, MIG profiles and metadata of claim templates as the
API server accepts them (``plugins/module_utils/claims/metadata.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import metadata as md

pytestmark = pytest.mark.unit


def test_names_are_dns_subdomains_or_labels() -> None:
    assert md.check_name("gpu-40g.v1", "name") == "gpu-40g.v1"
    with pytest.raises(md.ClaimTemplateError, match="name='Bad_Name' is not a valid DNS subdomain"):
        md.check_name("Bad_Name", "name")
    with pytest.raises(md.ClaimTemplateError, match=r"label='a\.b' is not a valid DNS label"):
        md.check_name("a.b", "label", subdomain=False)


def test_labels_become_strings_and_bad_keys_are_named() -> None:
    assert md.check_labels({"a": True, "b": 1}) == {"a": "true", "b": "1"}
    assert md.check_labels(None) == {}
    with pytest.raises(md.ClaimTemplateError, match="labels key 'bad key!'"):
        md.check_labels({"bad key!": "x"})


def test_count_is_a_whole_number_up_to_the_allocation_maximum() -> None:
    assert md.check_count(3) == 3
    assert md.check_count(md.ALLOCATION_RESULTS_MAX) == md.ALLOCATION_RESULTS_MAX
    for bad in (0, "3", md.ALLOCATION_RESULTS_MAX + 1):
        with pytest.raises(md.ClaimTemplateError, match=f"count={bad}"):
            md.check_count(bad)


def test_memory_quantity_bounds() -> None:
    assert md.check_memory_quantity("10Gi", "memory") == "10Gi"
    with pytest.raises(md.ClaimTemplateError, match="memory='0Gi'"):
        md.check_memory_quantity("0Gi", "memory")


def test_mig_profiles_known_possible_and_impossible() -> None:
    known = md.known_mig_profiles()
    assert known == sorted(known) and "1g.18gb" in known
    assert md.mig_profile_note("1g.18gb") is None
    with pytest.raises(md.ClaimTemplateError, match="not a MIG profile any GPU has"):
        md.mig_profile_note("9g.1gb")


def test_check_metadata_reports_unknown_fields_and_bad_names() -> None:
    found: list[tuple[str, str]] = []
    md.check_metadata(
        {"apiVersion": "v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "Bad_"}, "x": 1},
        "ResourceClaimTemplate",
        lambda path, message: found.append((path, message)),
    )
    assert [path for path, _ in found] == ["x", "metadata.name"]
    assert "unknown field 'x'" in found[0][1]
