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
