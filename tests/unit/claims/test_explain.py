"""Why a claim matches no device: counts, failing selectors, devices in use, CEL errors,
matchAttribute constraints, over small listed objects."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import explain as cexplain

from tests.unit.validate_objects import (
    GPU_CLASS,
    MIG_CLASS,
    claim,
    gpu_device,
    mig_device,
    mig_request,
    node,
    pod,
    resource_slice,
)

pytestmark = pytest.mark.unit


def mig_node(name: str, gpus: int = 2, per_gpu: int = 7, profile: str = "1g.18gb") -> dict:
    devices = []
    for g in range(gpus):
        parent = f"GPU-{name}-{g}"
        devices += [
            mig_device(g, parent, f"MIG-{name}-{g}-{s}", profile, s) for s in range(per_gpu)
        ]
    return resource_slice(name, devices)


def test_explain_counts_devices_and_names_the_failing_selector() -> None:
    slices = [mig_node("gpu-1"), mig_node("gpu-2")]
    c = claim("inference", requests=[mig_request("1g.10gb")])
    ex = cexplain.explain_claim(
        c, [GPU_CLASS, MIG_CLASS], slices, [c], [node("gpu-1"), node("gpu-2")]
    )
    assert ex["verdict"] == "no-device"
    (req,) = ex["requests"]
    assert (req["total"], req["matching"], req["free"]) == (28, 0, 0)
    assert req["reasons"] == [["profile is 1g.18gb, wanted 1g.10gb", 28]]
    assert "0 of 28 devices match: profile is 1g.18gb, wanted 1g.10gb (28)" in ex["summary"]
    per_node = {n["node"]: n for n in req["nodes"]}
    assert per_node["gpu-1"]["reasons"] == [["profile is 1g.18gb, wanted 1g.10gb", 14]]


def test_explain_names_each_rejecting_selector_with_its_expression() -> None:
    slices = [
        resource_slice("gpu-1", [gpu_device(0, "GPU-a")]),
        mig_node("gpu-2", gpus=1, per_gpu=2),
    ]
    request = mig_request("1g.10gb")
    c = claim("inference", requests=[request])
    ex = cexplain.explain_claim(
        c, [GPU_CLASS, MIG_CLASS], slices, [c], [node("gpu-1"), node("gpu-2")]
    )
    (req,) = ex["requests"]
    wanted = request["exactly"]["selectors"][0]["cel"]["expression"]
    klass = MIG_CLASS["spec"]["selectors"][0]["cel"]["expression"]
    assert req["selectors"] == [
        {"selector": "class mig.nvidia.com selector #0", "expression": klass, "rejects": 1},
        {"selector": "request selector #0", "expression": wanted, "rejects": 2},
    ]
    assert f"rejected by class mig.nvidia.com selector #0 {klass!r} (1)" in ex["summary"]
    assert f"request selector #0 {wanted!r} (2)" in ex["summary"]


def test_explain_names_the_device_class_selector_first() -> None:
    slices = [resource_slice("gpu-1", [gpu_device(0, "GPU-a"), gpu_device(1, "GPU-b")])]
    c = claim("inference", requests=[mig_request("1g.18gb")])
    ex = cexplain.explain_claim(c, [GPU_CLASS, MIG_CLASS], slices, [c], [node("gpu-1")])
    assert ex["requests"][0]["reasons"] == [["class mig.nvidia.com: type is gpu, wanted mig", 2]]


def test_explain_sees_devices_taken_by_other_claims() -> None:
    slices = [resource_slice("gpu-1", [gpu_device(0, "GPU-a")])]
    mine = claim("mine")
    other = claim("other", allocated=[("gpu-1", "gpu-0")], reserved_for=[("p", "u-p")])
    ex = cexplain.explain_claim(mine, [GPU_CLASS], slices, [mine, other], [node("gpu-1")])
    assert ex["verdict"] == "in-use"
    assert ex["requests"][0]["reasons"] == [["allocated to claim default/other", 1]]


def test_explain_reports_a_cel_runtime_error_as_fatal_for_the_claim() -> None:
    slices = [resource_slice("gpu-1", [gpu_device(0, "GPU-a")])]
    req = {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [
                {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == 'x'"}}
            ],
        },
    }
    c = claim("bad", requests=[req])
    ex = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])
    assert ex["verdict"] == "cel-error"
    assert "no such key: profile" in ex["summary"]


def test_explain_says_when_a_selector_cannot_be_judged_offline() -> None:
    # Kubernetes 1.36.3 and 1.37.2 accept the optional syntax (tests/data/cel_verdicts.json);
    # cel-python does not parse it: neither a compile error nor a mismatch.
    slices = [resource_slice("gpu-1", [gpu_device(0, "GPU-a")])]
    expression = "device.attributes['gpu.nvidia.com'].?profile.orValue('') == '1g.18gb'"
    req = {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression": expression}}],
        },
    }
    c = claim("opt", requests=[req])
    ex = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])
    assert ex["verdict"] == "cannot-judge"
    assert "optional syntax" in ex["summary"] and "does not compile" not in ex["summary"]


def test_explain_missing_device_class() -> None:
    c = claim("c", requests=[{"name": "gpu", "exactly": {"deviceClassName": "nope"}}])
    ex = cexplain.explain_claim(c, [GPU_CLASS], [], [c], [])
    assert ex["verdict"] == "class-missing"
    assert "DeviceClass 'nope' does not exist" in ex["summary"]


def test_explain_matchattribute_constraint_across_mixed_products() -> None:
    h200 = gpu_device(0, "GPU-a")
    h100 = gpu_device(1, "GPU-b")
    h100["attributes"]["productName"] = {"string": "NVIDIA H100"}
    slices = [resource_slice("gpu-1", [h200, h100])]
    req = {
        "name": "gpus",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 2,
        },
    }
    c = claim(
        "pair",
        requests=[req],
        constraints=[{"requests": ["gpus"], "matchAttribute": "gpu.nvidia.com/productName"}],
    )
    ex = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])
    assert ex["verdict"] == "constraint"
    assert "matchAttribute gpu.nvidia.com/productName" in ex["summary"]


def test_explain_would_fit_and_quotes_the_scheduler() -> None:
    slices = [resource_slice("gpu-1", [gpu_device(0, "GPU-a")])]
    c = claim("ok")
    waiting = pod("w", phase="Pending", claims=["ok"], scheduled_message="0/3 nodes are available")
    ex = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")], [waiting])
    assert ex["verdict"] == "would-fit"
    assert ex["pods"] == [{"pod": "default/w", "scheduler": "0/3 nodes are available"}]


# ------------------------------------------------------------ shared counters (dynamic MIG)


def _counter_claims() -> list[dict]:
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim

    return [allocated_claim(f"c{i}", H200_NODE, f"gpu-0-mig-1g18gb-19-{i}") for i in range(7)]


def test_explain_names_the_memory_slices_seven_1g_hold_from_an_eighth() -> None:
    """Seven 1g.18gb on an H200 of the simulator's dynamic MIG slices: an eighth 1g (the
    +me profile, placed at 0 to 6 only) matches 7 devices that no claim holds, and each is
    short of its memory slice, held by the claim on that placement."""
    from tests.unit.dynamic_mig_slices import H200_NODE, slices

    mine = claim("eighth", requests=[mig_request("1g.18gb+me")])
    ex = cexplain.explain_claim(
        mine, [GPU_CLASS, MIG_CLASS], slices(H200_NODE), [mine, *_counter_claims()],
        [node(H200_NODE)],
    )  # fmt: skip
    assert ex["verdict"] == "counters"
    (req,) = ex["requests"]
    assert (req["matching"], req["free"]) == (7, 0)
    (cs,) = req["counter_sets"]
    assert (cs["node"], cs["counter_set"], cs["gpu"]) == (H200_NODE, "gpu-0-counter-set", "gpu-0")
    assert cs["memory_slices_free"] == [7]
    slice3 = next(e for e in cs["exhausted"] if e["counter"] == "memory-slice-3")
    assert slice3 == {
        "counter": "memory-slice-3", "capacity": 1, "consumed": 1, "needed": 1,
        "holders": ["default/c3"], "devices": 1,
    }  # fmt: skip
    decoders = next(e for e in cs["exhausted"] if e["counter"] == "decoders")
    assert (decoders["capacity"], decoders["consumed"], decoders["devices"]) == (7, 7, 7)
    assert "memory-slice-3 1 of 1 consumed, needs 1 (held by default/c3)" in ex["summary"]
    assert "gpu-0-counter-set on h200-node" in ex["summary"]
    assert "memory slices free: 7" in ex["summary"]
    assert [
        "shared counter exhausted: memory-slice-3 of gpu-0-counter-set on h200-node: 1 of 1 "
        "consumed, needs 1 (held by default/c3) and 2 more counters",
        1,
    ] in req["reasons"]


def test_explain_any_mig_device_after_seven_1g_is_short_of_counters() -> None:
    from tests.unit.dynamic_mig_slices import H200_NODE, slices

    any_mig = {"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com"}}
    mine = claim("eighth", requests=[any_mig])
    ex = cexplain.explain_claim(
        mine, [GPU_CLASS, MIG_CLASS], slices(H200_NODE), [mine, *_counter_claims()],
        [node(H200_NODE)],
    )  # fmt: skip
    assert ex["verdict"] == "counters"
    (req,) = ex["requests"]
    # 25 MIG placements: 7 allocated, the other 18 short of counters
    assert (req["matching"], req["free"]) == (25, 0)
    assert ["allocated to claim default/c0", 1] in req["reasons"]
    assert (
        "25 of 26 devices match: 7 allocated to other claims, 18 not allocated but short of "
        "shared counters, 0 free (need 1 on one node): gpu-0-counter-set on h200-node: "
        "memory-slice-0 1 of 1 consumed, needs 1 (held by default/c0); "
    ) in ex["summary"]


def test_explain_a_3g_without_four_aligned_free_memory_slices() -> None:
    """1g.18gb at 1 and 5: six slices are free, but each 3g.71gb placement (slices 0-3 and
    4-7) has one that a claim holds."""
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, slices

    held = [
        allocated_claim("a", H200_NODE, "gpu-0-mig-1g18gb-19-1"),
        allocated_claim("b", H200_NODE, "gpu-0-mig-1g18gb-19-5"),
    ]
    mine = claim("big", requests=[mig_request("3g.71gb")])
    ex = cexplain.explain_claim(
        mine, [GPU_CLASS, MIG_CLASS], slices(H200_NODE), [mine, *held], [node(H200_NODE)]
    )
    assert ex["verdict"] == "counters"
    (cs,) = ex["requests"][0]["counter_sets"]
    assert [(e["counter"], e["holders"]) for e in cs["exhausted"]] == [
        ("memory-slice-1", ["default/a"]),
        ("memory-slice-5", ["default/b"]),
    ]
    assert cs["memory_slices_free"] == [0, 2, 3, 4, 6, 7]
    assert (
        "memory-slice-1 1 of 1 consumed, needs 1 (held by default/a); memory-slice-5 1 of 1 "
        "consumed, needs 1 (held by default/b); memory slices free: 0, 2, 3, 4, 6, 7"
    ) in ex["summary"]


def test_explain_a_free_placement_of_shared_counters_would_fit() -> None:
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, slices

    held = [allocated_claim("a", H200_NODE, "gpu-0-mig-1g18gb-19-1")]
    mine = claim("big", requests=[mig_request("3g.71gb")])
    ex = cexplain.explain_claim(
        mine, [GPU_CLASS, MIG_CLASS], slices(H200_NODE), [mine, *held], [node(H200_NODE)]
    )
    assert ex["verdict"] == "would-fit"
    (req,) = ex["requests"]
    assert req["free"] == 1 and req["nodes"][0]["fits"] is True
    assert req["counter_sets"][0]["exhausted"][0]["counter"] == "memory-slice-1"
