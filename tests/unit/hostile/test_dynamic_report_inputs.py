"""The report on dynamic MIG (``report.fleet``, ``claims.counters``) fed ResourceSlices
with shared counters of odd shape and size: counter values that are negative, not
quantities or beyond what is computed; counters, consumesCounters and attributes of other
types than the API's; claims allocating devices nobody publishes; one device consuming
thousands of CounterSets; ten thousand devices and claims on one CounterSet. No figure
goes negative, nothing raises, and the report stays linear in the listing."""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet

pytestmark = pytest.mark.unit

DRIVER = "gpu.nvidia.com"
SET = "gpu-0-counter-set"
H200 = {
    "memory": {"value": "140Gi"},
    "multiprocessors": {"value": "132"},
    **{f"memory-slice-{i}": {"value": "1"} for i in range(8)},
}


def _slice(devices: list[Any], shared: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "gpu-1-slice"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "gpu-1",
            "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1},
            "sharedCounters": shared,
            "devices": devices,
        },
    }


def _device(name: str, consumes: Any, profile: str = "1g.18gb", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "profile": {"string": profile},
            "type": {"string": "mig"},
            "productName": {"string": "NVIDIA H200"},
        },
        "capacity": {"memory": {"value": "16Gi"}},
        "consumesCounters": consumes,
        **fields,
    }


def _uses(slice_index: int, counter_set: str = SET) -> list[dict[str, Any]]:
    return [
        {
            "counterSet": counter_set,
            "counters": {
                "memory": {"value": "16Gi"},
                "multiprocessors": {"value": "16"},
                f"memory-slice-{slice_index % 8}": {"value": "1"},
            },
        }
    ]


def _claim(name: str, *devices: str) -> dict[str, Any]:
    results = [{"driver": DRIVER, "pool": "gpu-1", "device": d, "request": "gpu"} for d in devices]
    return {
        "metadata": {"namespace": "team-a", "name": name},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com"}}]
            }
        },
        "status": {"allocation": {"devices": {"results": results}}},
    }


@pytest.mark.parametrize("value", ["-5", "-1Gi", -3, "-0.5"])
def test_a_negative_counter_value_is_unreadable_and_no_figure_goes_negative(value: Any) -> None:
    counters = {**H200, "memory": {"value": value}, "memory-slice-0": {"value": value}}
    slices = [_slice([_device("gpu-0-mig-1g-0", _uses(1))], [{"name": SET, "counters": counters}])]
    report = fleet.build_report(slices, [_claim("c", "gpu-0-mig-1g-0")], [], [])
    sums = report["cluster"]["shared_counters"]
    assert all(v >= 0 for v in sums.values()), sums
    [gpu] = report["gpus"]
    assert sorted(gpu["unreadable"]) == ["memory", "memory-slice-0"]
    assert all(row["memory_free"] >= 0 for row in report["nodes"]), report["nodes"]


@pytest.mark.parametrize(
    "value", ["1e400", "NaN", "1Ei", "9" * 2000, "1e999999999", "0", True, None, [1], {"a": 1}]
)
def test_counter_values_of_odd_size_or_type_do_not_raise(value: Any) -> None:
    counters = {**H200, "memory": {"value": value}}
    slices = [_slice([_device("gpu-0-mig-1g-0", _uses(0))], [{"name": SET, "counters": counters}])]
    report = fleet.build_report(slices, [_claim("c", "gpu-0-mig-1g-0")], [], [])
    assert report["cluster"]["shared_counters"]["gpus"] == 1
    assert report["cluster"]["shared_counters"]["memory_stranded"] >= 0


@pytest.mark.parametrize(
    "consumes",
    [
        SET,
        {"counterSet": SET},
        [{"counterSet": SET, "counters": ["memory"]}],
        [{"counterSet": 5, "counters": {}}],
        [None, "x", 3],
    ],
    ids=["text", "map", "counters-a-list", "set-a-number", "items-odd"],
)
def test_consumes_counters_of_another_shape_consumes_nothing(consumes: Any) -> None:
    slices = [_slice([_device("gpu-0-mig-1g-0", consumes)], [{"name": SET, "counters": H200}])]
    [device] = fleet.devices_of(slices, [], {})
    assert device.free and not device.blocked
    # a set named with counters of another type: consumed, with no counter
    assert device.counter_set == (
        f"{DRIVER}/gpu-1/{SET}"
        if isinstance(consumes, list) and consumes[0] and consumes[0].get("counterSet") == SET
        else None
    )


@pytest.mark.parametrize("field", ["attributes", "capacity"])
@pytest.mark.parametrize("odd", ["x", 5, ["profile"], None])
def test_attributes_and_capacity_of_another_type_are_read_as_absent(field: str, odd: Any) -> None:
    device = _device("gpu-0-mig-1g-0", _uses(0))
    device[field] = odd
    [read] = fleet.devices_of([_slice([device], [{"name": SET, "counters": H200}])], [], {})
    assert read.counter_set == f"{DRIVER}/gpu-1/{SET}"
    if field == "attributes":
        assert (read.model, read.profile) == (fleet.UNKNOWN_MODEL, "gpu")
    else:
        assert read.memory == 0


def test_claims_on_devices_nobody_publishes_hold_no_counter() -> None:
    slices = [_slice([_device("gpu-0-mig-1g-0", _uses(0))], [{"name": SET, "counters": H200}])]
    claims = [
        _claim("ghost", "gpu-0-mig-9g-0"),
        _claim("twice", "gpu-0-mig-1g-0", "gpu-0-mig-1g-0"),
    ]
    sets = cc.counter_sets(slices, claims)
    cs = sets[f"{DRIVER}/gpu-1/{SET}"]
    assert cs.consumed["memory-slice-0"] == Fraction(1)  # the device listed twice counts once
    assert cs.holders["memory"] == ["team-a/twice"]


def test_a_set_the_pool_does_not_publish_is_a_shortfall_not_an_error() -> None:
    device = _device("gpu-0-mig-1g-0", _uses(0, "no-such-set"))
    slices = [_slice([device], [{"name": SET, "counters": H200}])]
    [read] = fleet.devices_of(slices, [], {})
    assert read.blocked and not read.free
    [short] = cc.shortfalls(cc.counter_sets(slices, []), DRIVER, "gpu-1", device)
    assert short.counter == "" and "not published" in short.text()


def test_one_device_consuming_thousands_of_sets_is_judged_once() -> None:
    """Each CounterSet's figures judge its devices; a device consuming every set was judged
    once per set, each time over every set: 5,000 sets took minutes."""
    n = 5000
    shared = [{"name": f"s{i}", "counters": {"memory": {"value": "0"}}} for i in range(n)]
    uses = [{"counterSet": f"s{i}", "counters": {"memory": {"value": "1"}}} for i in range(n)]
    start = time.process_time()
    report = fleet.build_report([_slice([_device("d", uses)], shared)], [], [], [])
    assert time.process_time() - start < 5
    assert report["cluster"]["shared_counters"]["gpus"] == n


def test_ten_thousand_devices_and_claims_on_one_set_stay_linear() -> None:
    n = 10_000
    big = {k: {"value": "1e6"} for k in H200}
    devices = [_device(f"gpu-0-mig-1g-{i}", _uses(i)) for i in range(n)]
    claims = [_claim(f"c{i}", f"gpu-0-mig-1g-{i}") for i in range(n)]
    start = time.process_time()
    report = fleet.build_report([_slice(devices, [{"name": SET, "counters": big}])], claims, [], [])
    assert time.process_time() - start < 5
    cs = cc.counter_sets([_slice(devices, [{"name": SET, "counters": big}])], claims)
    holders = cs[f"{DRIVER}/gpu-1/{SET}"].holders["memory"]
    assert holders == [f"team-a/c{i}" for i in range(n)]  # each once, in listing order
    sums = report["cluster"]["shared_counters"]
    assert (sums["memory_free"], sums["memory_stranded"]) == (0, 0)  # 16Gi each: overdrawn
