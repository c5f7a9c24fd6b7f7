"""Hostile input to ``upgrade_uncordon``'s ``driver_version`` and to the ResourceSlices
``node_state`` counts against it: releases of other digits (``²``, Arabic-Indic), of
thousands of digits, of one part, with a NUL; ResourceSlices whose devices, attributes and
``driverVersion`` are of other types.

A release is refused as ValueError naming ``driver_version``, the value and the fix (the
module's ``fail_json``), never another exception; ``semver`` of a value that is none is
None; a device of another shape counts as no device of the release."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_state as ns
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import driver as nvd
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import gpu

pytestmark = pytest.mark.unit

#: ``driver_version`` values that are no NVIDIA release.
RELEASES = {
    "superscript": "580.\u00b2",
    "arabic-digits": "\u0665\u0668\u0660.159.04",
    "huge": "9" * 5000,
    "one-part": "580",
    "nul": "580.159.04\x00",
    "four-parts": "580.159.04.1",
    "markup": "[red]580.159.04",
}


@pytest.mark.parametrize("case", list(RELEASES))
def test_a_driver_version_that_is_no_release_is_refused(case: str) -> None:
    with pytest.raises(nvd.PlanError, match=r"driver_version=.*fix: give the full release"):
        nvd.published_driver_version(RELEASES[case])


def test_a_release_is_published_as_the_dra_driver_writes_it() -> None:
    assert nvd.published_driver_version("580.159.04") == "580.159.4"
    assert nvd.published_driver_version("") == ""


@pytest.mark.parametrize("value", ["580.\u00b2", "9" * 5000, "1." + "9" * 5000, "\u00b9\u00b2"])
def test_semver_of_no_version_is_none(value: str) -> None:
    assert gpu.semver(value) is None


def _device(version: Any) -> dict[str, Any]:
    return {"name": "gpu-0", "attributes": {"driverVersion": version}}


#: Devices of other shapes: none of them is a device at 580.159.4.
DEVICES = [
    "x",
    None,
    5,
    {"attributes": [1]},
    {"basic": "x"},
    {"basic": {"attributes": "x"}},
    _device("580.159.4"),
    _device({"version": ["580.159.4"]}),
    _device({"version": {"v": 1}}),
    _device({"string": "580.159.4"}),
    _device([{"version": "580.159.4"}]),
]


def test_devices_of_another_shape_count_as_none_of_the_release() -> None:
    slices = [{"spec": {"devices": DEVICES}}, "x", {"spec": {"devices": {"a": 1}}}, {"spec": 5}]
    got = ns.node_state(
        lambda _path: {"spec": {}},
        lambda _path, _query: slices,
        "gpu-1",
        "gpu.nvidia.com",
        driver_version="580.159.4",
    )
    assert (got["devices"], got["slices"]) == (0, 4)
