"""Leaked and pending ResourceClaims, the gc plan, and the explanation of a claim that
matches no device, over small listed objects."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import usage as vcl

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

NOW = 1767225600.0 + 3600  # 2026-01-01T01:00:00Z


def mig_node(name: str, gpus: int = 2, per_gpu: int = 7, profile: str = "1g.18gb") -> dict:
    devices = []
    for g in range(gpus):
        parent = f"GPU-{name}-{g}"
        devices += [
            mig_device(g, parent, f"MIG-{name}-{g}-{s}", profile, s) for s in range(per_gpu)
        ]
    return resource_slice(name, devices)


# ------------------------------------------------------------------ leaks


def test_claim_reserved_for_a_deleted_pod_is_a_leak_naming_pod_and_devices() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-1")])
    leaks = vcl.find_leaks([c], [])
    assert [(x.claim, x.kind, x.status) for x in leaks] == [
        ("default/train", "dead-reservation", "fail")
    ]
    assert "pod default/trainer (uid u-1) no longer exists" in leaks[0].reason
    assert leaks[0].devices == ["gpu.nvidia.com/gpu-1/gpu-0"]


def test_reservation_for_a_replaced_pod_is_dead() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-old")])
    leaks = vcl.find_leaks([c], [pod("trainer", uid="u-new")])
    assert leaks[0].kind == "dead-reservation"
    assert "was replaced (reserved uid u-old, now u-new)" in leaks[0].reason


def test_reservation_for_a_finished_pod_is_dead() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-1")])
    leaks = vcl.find_leaks([c], [pod("trainer", uid="u-1", phase="Succeeded")])
    assert leaks[0].kind == "dead-reservation"
    assert "is done (phase Succeeded)" in leaks[0].reason


def test_claim_of_a_running_pod_is_not_a_leak() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-1")])
    assert vcl.find_leaks([c], [pod("trainer", uid="u-1", claims=["train"])]) == []


def test_generated_claim_whose_pod_is_gone_is_orphaned() -> None:
    c = claim("trainer-gpu-x7k", owner_pod=("trainer", "u-1"))
    leaks = vcl.find_leaks([c], [])
    assert [(x.kind, x.status, x.owner) for x in leaks] == [("orphaned", "fail", "default/trainer")]


def test_stale_entry_beside_a_live_one_is_only_a_warning() -> None:
    c = claim("shared", allocated=[("gpu-1", "gpu-0")], reserved_for=[("a", "u-a"), ("b", "u-b")])
    leaks = vcl.find_leaks([c], [pod("b", uid="u-b", claims=["shared"])])
    assert [(x.kind, x.status) for x in leaks] == [("stale-entries", "warn")]


def test_allocated_claim_reserved_for_nobody_is_a_warning() -> None:
    c = claim("idle", allocated=[("gpu-1", "gpu-0")])
    assert [(x.kind, x.status) for x in vcl.find_leaks([c], [])] == [("unreserved", "warn")]


# ------------------------------------------------------------------ gc plan


def test_gc_releases_a_dead_reservation_and_clears_the_allocation() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-1")])
    (action,) = vcl.plan_gc([c], [])
    assert action.action == "release"
    assert action.status_patch == {"reservedFor": []}
    assert action.remove_finalizer is True
    assert action.delete is False


def test_gc_deletes_an_orphaned_generated_claim() -> None:
    c = claim(
        "trainer-gpu",
        owner_pod=("trainer", "u-1"),
        allocated=[("gpu-1", "gpu-0")],
        reserved_for=[("trainer", "u-1")],
    )
    (action,) = vcl.plan_gc([c], [])
    assert action.delete is True
    assert action.action == "delete"


def test_gc_never_touches_a_claim_a_live_pod_reserves_or_uses() -> None:
    reserved = claim(
        "shared", allocated=[("gpu-1", "gpu-0")], reserved_for=[("a", "u-a"), ("b", "u-b")]
    )
    used = claim("idle", allocated=[("gpu-1", "gpu-1")])
    pods = [
        pod("b", uid="u-b", claims=["shared"]),
        pod("waiting", phase="Pending", claims=["idle"]),
    ]
    actions = {a.claim: a for a in vcl.plan_gc([reserved, used], pods)}
    assert actions["default/shared"].action == "skip"
    assert "b" in actions["default/shared"].reason
    # 'idle' is used by a pending pod: not a leak at all
    assert "default/idle" not in actions
    assert all(a.status_patch is None and not a.delete for a in actions.values())


# ------------------------------------------------------------------ explain


def test_explain_counts_devices_and_names_the_failing_selector() -> None:
    slices = [mig_node("gpu-1"), mig_node("gpu-2")]
    c = claim("inference", requests=[mig_request("1g.10gb")])
    ex = vcl.explain_claim(c, [GPU_CLASS, MIG_CLASS], slices, [c], [node("gpu-1"), node("gpu-2")])
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
    ex = vcl.explain_claim(c, [GPU_CLASS, MIG_CLASS], slices, [c], [node("gpu-1"), node("gpu-2")])
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
    ex = vcl.explain_claim(c, [GPU_CLASS, MIG_CLASS], slices, [c], [node("gpu-1")])
    assert ex["requests"][0]["reasons"] == [["class mig.nvidia.com: type is gpu, wanted mig", 2]]


def test_explain_sees_devices_taken_by_other_claims() -> None:
    slices = [resource_slice("gpu-1", [gpu_device(0, "GPU-a")])]
    mine = claim("mine")
    other = claim("other", allocated=[("gpu-1", "gpu-0")], reserved_for=[("p", "u-p")])
    ex = vcl.explain_claim(mine, [GPU_CLASS], slices, [mine, other], [node("gpu-1")])
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
    ex = vcl.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])
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
    ex = vcl.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])
    assert ex["verdict"] == "cannot-judge"
    assert "optional syntax" in ex["summary"] and "does not compile" not in ex["summary"]


def test_explain_missing_device_class() -> None:
    c = claim("c", requests=[{"name": "gpu", "exactly": {"deviceClassName": "nope"}}])
    ex = vcl.explain_claim(c, [GPU_CLASS], [], [c], [])
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
    ex = vcl.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])
    assert ex["verdict"] == "constraint"
    assert "matchAttribute gpu.nvidia.com/productName" in ex["summary"]


def test_explain_would_fit_and_quotes_the_scheduler() -> None:
    slices = [resource_slice("gpu-1", [gpu_device(0, "GPU-a")])]
    c = claim("ok")
    waiting = pod("w", phase="Pending", claims=["ok"], scheduled_message="0/3 nodes are available")
    ex = vcl.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")], [waiting])
    assert ex["verdict"] == "would-fit"
    assert ex["pods"] == [{"pod": "default/w", "scheduler": "0/3 nodes are available"}]


def test_only_the_newest_pool_generation_counts() -> None:
    old = resource_slice("gpu-1", [gpu_device(0, "GPU-old")], generation=1, name="old")
    new = resource_slice("gpu-1", [gpu_device(0, "GPU-new")], generation=2, name="new")
    assert [
        d.device["attributes"]["uuid"]["string"] for d in vcl.published_devices([old, new])
    ] == ["GPU-new"]


# ------------------------------------------------------------------ pending


def test_pending_claim_with_a_waiting_pod_fails_with_the_explanation() -> None:
    c = claim("inference", requests=[mig_request("1g.10gb")], created="2026-01-01T00:00:00Z")
    waiting = pod("server", phase="Pending", claims=["inference"])
    (p,) = vcl.find_pending(
        [c], [waiting], [mig_node("gpu-1")], [MIG_CLASS], [node("gpu-1")], NOW, 300
    )
    assert p.status == "fail"
    assert p.users == ["default/server"]
    assert "not allocated for 60m" in p.reason
    assert "0 of 14 devices match: profile is 1g.18gb, wanted 1g.10gb (14)" in p.reason


def test_young_or_unused_claims() -> None:
    young = claim("young", created="2026-01-01T00:59:00Z")
    unused = claim("unused", created="2026-01-01T00:00:00Z")
    found = vcl.find_pending([young, unused], [], [], [GPU_CLASS], [], NOW, 300)
    assert [(p.claim, p.status) for p in found] == [("default/unused", "warn")]
    assert "no pod uses it" in found[0].reason
