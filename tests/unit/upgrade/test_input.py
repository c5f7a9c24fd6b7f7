"""The upgrade's inputs: batch sizes, the GPU floor, the package repository URL and releases
(``plugins/module_utils/upgrade/input.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import input as upgrade_input

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "workers", "expected"),
    [(2, 10, 2), ("3", 10, 3), ("20%", 10, 2), ("25%", 3, 1), ("100%", 7, 7), ("1%", 5, 1)],
)
def test_batch_size_number_or_percentage(value, workers, expected):
    assert upgrade_input.parse_batch_size(value, workers) == expected


@pytest.mark.parametrize("value", [0, "0", "-1", "abc", "0%", "150%", "x%", True])
def test_bad_batch_size_names_the_variable(value):
    with pytest.raises(upgrade_input.UpgradePlanError, match="upgrade_batch_size="):
        upgrade_input.parse_batch_size(value, 10)


@pytest.mark.parametrize("value", [-1, 101, "half", True])
def test_bad_gpu_floor_names_the_variable(value):
    with pytest.raises(upgrade_input.UpgradePlanError, match="upgrade_min_gpu_available_percent="):
        upgrade_input.parse_min_gpu_percent(value)


def test_repo_url_template_needs_the_minor():
    assert upgrade_input.repo_url("1.37.2", "file:/var/lib/gpufleet/pkgs/v{minor}/") == (
        "file:/var/lib/gpufleet/pkgs/v1.37/"
    )
    with pytest.raises(upgrade_input.UpgradePlanError, match="upgrade_repo_url="):
        upgrade_input.repo_url("1.37.2", "https://mirror/kubernetes/")


def test_a_malformed_release_is_told_to_give_major_minor_patch():
    with pytest.raises(dra_core.VersionParseError) as err:
        upgrade_input.parse_release("1.x", "upgrade_via")
    assert "upgrade_via='1.x'" in err.value.reason
    assert err.value.fix.startswith("give MAJOR.MINOR.PATCH ")
