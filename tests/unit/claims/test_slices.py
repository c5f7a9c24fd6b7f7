"""Published devices: only the newest generation of a pool counts."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

from tests.unit.validate_objects import (
    gpu_device,
    resource_slice,
)

pytestmark = pytest.mark.unit


def test_only_the_newest_pool_generation_counts() -> None:
    old = resource_slice("gpu-1", [gpu_device(0, "GPU-old")], generation=1, name="old")
    new = resource_slice("gpu-1", [gpu_device(0, "GPU-new")], generation=2, name="new")
    assert [
        d.device["attributes"]["uuid"]["string"] for d in cslices.PublishedDevices([old, new])
    ] == ["GPU-new"]


def test_published_devices_are_read_again_on_each_walk() -> None:
    """The view holds no device between walks; slices that can be walked once (an
    iterator) are kept, so that a second walk sees the same devices."""
    slices = [resource_slice(f"gpu-{n}", [gpu_device(i, f"GPU-{n}-{i}") for i in range(2)],
                             name=f"s{n}") for n in range(3)]  # fmt: skip
    for given in (slices, iter(slices), vk.PagedList(slices, page_size=1)):
        view = cslices.PublishedDevices(given)
        first = [d.id for d in view]
        assert first == [f"gpu.nvidia.com/gpu-{n}/gpu-{i}" for n in range(3) for i in range(2)]
        assert [d.id for d in view] == first


@pytest.mark.parametrize("odd", ["two", "1.5", -3, True, None, [], {"n": 1}, "٣"])
def test_a_generation_no_api_server_serves_counts_as_zero(odd: object) -> None:
    """The API server holds ``pool.generation`` as an int64; a slice with anything else
    (a hand-made object, a hostile answer) is read as generation 0 instead of stopping
    every check that reads slices."""
    odd_slice = resource_slice("gpu-1", [gpu_device(0, "GPU-odd")], generation=0, name="odd")
    odd_slice["spec"]["pool"]["generation"] = odd
    newer = resource_slice("gpu-1", [gpu_device(1, "GPU-new")], generation=1, name="new")
    names = [s["metadata"]["name"] for s in cslices.latest_slices([odd_slice, newer])]
    assert names == ["new"]
    assert [s["metadata"]["name"] for s in cslices.latest_slices([odd_slice])] == ["odd"]
