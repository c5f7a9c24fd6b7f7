"""Published devices: only the newest generation of a pool counts."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices

from tests.unit.validate_objects import (
    gpu_device,
    resource_slice,
)

pytestmark = pytest.mark.unit


def test_only_the_newest_pool_generation_counts() -> None:
    old = resource_slice("gpu-1", [gpu_device(0, "GPU-old")], generation=1, name="old")
    new = resource_slice("gpu-1", [gpu_device(0, "GPU-new")], generation=2, name="new")
    assert [
        d.device["attributes"]["uuid"]["string"] for d in cslices.published_devices([old, new])
    ] == ["GPU-new"]
