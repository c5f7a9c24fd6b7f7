"""Hostile input to ``gpufleet mig advise``'s dynamic advice (``claims.counter_moves``):
ResourceSlices whose counters are of other types, negative or huge, devices consuming a
CounterSet no slice publishes, and a CounterSet of thousands of allocated devices whose
large placements need many claims moved.

The advice is given or the device left out, never raised on; its time grows with the
devices and the claims, not with their product (each placement's moves are found from
one index of the CounterSet, not by reading every allocation again)."""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counter_moves as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as cc

pytestmark = pytest.mark.unit

#: CPU seconds the advice of a hostile CounterSet may take (the process's own time: a
#: loaded machine does not stretch it).
QUICK = 5.0


def _device(name: str, profile: str, counters: Any, counter_set: Any = "gpu-0") -> dict:
    return {
        "name": name,
        "attributes": {"profile": {"string": profile}},
        "consumesCounters": [{"counterSet": counter_set, "counters": counters}],
    }


def _slice(shared: Any, devices: list[Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "s-1"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "gpu-1",
            "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1},
            "sharedCounters": shared,
            "devices": devices,
        },
    }


#: Counters of another shape -> the case's id.
COUNTERS = {
    "value-number": {"memory-slice-0": {"value": 1}, "multiprocessors": {"value": 16}},
    "value-list": {"memory-slice-0": {"value": [1]}},
    "value-negative": {"memory-slice-0": {"value": "-1"}, "multiprocessors": {"value": "-16"}},
    "value-huge": {"memory-slice-0": {"value": "9" * 5000}},
    "value-text": {"memory-slice-0": {"value": "lots"}},
    "entry-text": {"memory-slice-0": "1"},
    "counters-list": [{"memory-slice-0": {"value": "1"}}],
    "counters-none": None,
}


@pytest.mark.parametrize("case", list(COUNTERS))
def test_counters_of_another_shape_are_advised_on_not_raised(case: str) -> None:
    counters = COUNTERS[case]
    shared = [
        {"name": "gpu-0", "counters": counters},
        {"name": ["gpu-0"]},
        "gpu-0",
        {"name": "gpu-0", "counters": counters},  # twice
    ]
    devices = [
        _device("gpu-0-mig-1g", "1g.18gb", counters),
        _device("gpu-0-mig-7g", "7g.141gb", counters),
        _device("gpu-0-mig-x", "1g.18gb", counters, counter_set="no-such-set"),
        _device("gpu-0-mig-y", "1g.18gb", counters, counter_set=["gpu-0"]),
        "x",
    ]
    sets = cc.counter_sets([_slice(shared, devices)], [])
    for cs in sets.values():
        cm.advice(cs, {"1g.18gb": ["ns/c"], "[red]": ["x"]})
    cm.drain_order(sets.values())


def test_slices_of_other_node_names_and_shapes_are_ordered_not_raised() -> None:
    counters = {"memory-slice-0": {"value": "1"}, "multiprocessors": {"value": "16"}}
    shared = [{"name": "gpu-0", "counters": counters}]
    odd = []
    for node in (["gpu-1"], 5, None, "gpu-2"):
        s = _slice(shared, [_device("gpu-0-mig-1g", "1g.18gb", counters)])
        s["spec"]["nodeName"] = node
        s["spec"]["pool"]["name"] = f"pool-{node!s}"
        odd.append(s)
    odd += ["x", {"spec": "x"}, {"spec": {"pool": ["p"], "driver": ["d"], "devices": "x"}}]
    sets = cc.counter_sets(odd, [])
    assert {cs.node for cs in sets.values()} == {"(node selector)", "gpu-2"}
    cm.drain_order(sets.values())


def _crowded(small: int, large: int) -> cc.CounterSet:
    """``small`` allocated one-slice placements holding every multiprocessor, and
    ``large`` free placements that need half of them: each needs ``small / 2`` moves."""
    cs = cc.CounterSet("gpu.nvidia.com", "gpu-1", "gpu-1", "gpu-0")
    cs.capacity = {f"memory-slice-{i}": Fraction(1) for i in range(small + large)}
    cs.capacity[cc.MULTIPROCESSORS] = Fraction(16 * small)
    for d in range(small):
        name = f"gpu-0-mig-1g-{d}"
        cs.devices[name] = {f"memory-slice-{d}": Fraction(1), cc.MULTIPROCESSORS: Fraction(16)}
        cs.objects[name] = {"attributes": {"profile": {"string": "1g.18gb"}}}
        cs.allocated[name] = [f"ns/c{d}"]
        for counter, value in cs.devices[name].items():
            cs.consumed[counter] = cs.consumed.get(counter, Fraction(0)) + value
    for j in range(large):
        name = f"gpu-0-mig-7g-{j}"
        cs.devices[name] = {
            f"memory-slice-{small + j}": Fraction(1),
            cc.MULTIPROCESSORS: Fraction(8 * small),
        }
        cs.objects[name] = {"attributes": {"profile": {"string": "7g.141gb"}}}
    return cs


def test_thousands_of_claims_are_advised_on_at_once() -> None:
    cs = _crowded(1000, 50)
    start = time.process_time()
    got = cm.advice(cs, {})
    assert time.process_time() - start < QUICK
    assert got["target"]["profile"] == "7g.141gb"
    assert len(got["target"]["moves"]) == 500
