"""The MIG re-carving advisor (``plugins/module_utils/report/mig_advice.py``) on small fleets
whose ResourceSlices are shaped as NVIDIA's DRA driver and the GPU simulator publish them
(device names ``gpu-<minor>-mig-<profile>-<GI ID>-<start>``, ``parentUUID``,
``memorySlice<N>`` capacities)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mpl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import mig_advice as ma

pytestmark = pytest.mark.unit

DRIVER = "gpu.nvidia.com"
H200 = "NVIDIA H200"
PROFILE_IDS = {"1g.18gb": 19, "2g.35gb": 14, "3g.71gb": 9, "4g.71gb": 5, "7g.141gb": 0}
SIZES = {"1g.18gb": 1, "2g.35gb": 2, "3g.71gb": 4, "4g.71gb": 4, "7g.141gb": 8}
MIG_CEL = "device.attributes['gpu.nvidia.com'].profile == '{}'"


def uuid(node: str, minor: int) -> str:
    return f"GPU-{node}-{minor}"


def whole(node: str, minor: int) -> dict[str, Any]:
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": uuid(node, minor)},
            "productName": {"string": H200},
        },
        "capacity": {"memory": {"value": "143771Mi"}},
    }


def mig(node: str, minor: int, profile: str, start: int) -> dict[str, Any]:
    pid, size = PROFILE_IDS[profile], SIZES[profile]
    capacity: dict[str, Any] = {"memory": {"value": "16Gi"}}
    capacity.update({f"memorySlice{s}": {"value": "1"} for s in range(start, start + size)})
    return {
        "name": f"gpu-{minor}-mig-{profile.replace('.', '')}-{pid}-{start}",
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": f"MIG-{node}-{minor}-{start}"},
            "parentUUID": {"string": uuid(node, minor)},
            "profile": {"string": profile},
            "productName": {"string": H200},
        },
        "capacity": capacity,
    }


def rslice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-gpu.nvidia.com"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim(
    name: str,
    profiles: list[str] | None = None,
    allocated: list[tuple[str, str]] | None = None,
    pod: str | None = None,
    cls: str = "mig.nvidia.com",
) -> dict[str, Any]:
    requests = []
    for n, profile in enumerate(profiles or [None]):
        exactly: dict[str, Any] = {"deviceClassName": cls}
        if profile:
            exactly["selectors"] = [{"cel": {"expression": MIG_CEL.format(profile)}}]
        requests.append({"name": f"r{n}", "exactly": exactly})
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": requests}},
        "status": {},
    }
    if allocated:
        obj["status"]["allocation"] = {
            "devices": {
                "results": [
                    {"request": "r0", "driver": DRIVER, "pool": node, "device": dev}
                    for node, dev in allocated
                ]
            }
        }
        if pod:
            obj["status"]["reservedFor"] = [{"resource": "pods", "name": pod, "uid": f"p-{pod}"}]
    return obj


def running(name: str, claim_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"p-{name}"},
        "spec": {
            "nodeName": "gpu-a",
            "resourceClaims": [{"name": "g", "resourceClaimName": claim_name}],
        },
        "status": {"phase": "Running"},
    }


def fleet_a() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """gpu-a: GPU 0 3g.71gb@0 (held by ml/train) + 2g.35gb@4 free; GPU 1 seven free
    1g.18gb; GPU 2 whole and free; GPU 3 whole, held by ml/big. gpu-b: GPU 0 two
    3g.71gb, both held. Pending: three 1g.18gb claims, three 3g.71gb claims, one claim of
    another DeviceClass."""
    a = [mig("gpu-a", 0, "3g.71gb", 0), mig("gpu-a", 0, "2g.35gb", 4)]
    a += [mig("gpu-a", 1, "1g.18gb", s) for s in range(7)]
    a += [whole("gpu-a", 2), whole("gpu-a", 3)]
    b = [mig("gpu-b", 0, "3g.71gb", 0), mig("gpu-b", 0, "3g.71gb", 4)]
    slices = [rslice("gpu-a", a), rslice("gpu-b", b)]
    claims = [
        claim("train", allocated=[("gpu-a", "gpu-0-mig-3g71gb-9-0")], pod="trainer"),
        claim("big", cls="gpu.nvidia.com", allocated=[("gpu-a", "gpu-3")], pod="bigpod"),
        claim("left", allocated=[("gpu-b", "gpu-0-mig-3g71gb-9-0")], pod="lefty"),
        claim("right", allocated=[("gpu-b", "gpu-0-mig-3g71gb-9-4")], pod="righty"),
        *(claim(f"small-{i}", ["1g.18gb"]) for i in range(3)),
        *(claim(f"half-{i}", ["3g.71gb"]) for i in range(3)),
        claim("other", cls="example.com-fpga"),
    ]
    pods = [
        running("trainer", "train"),
        running("bigpod", "big"),
        running("lefty", "left"),
        running("righty", "right"),
    ]
    return slices, claims, pods


def test_gpus_read_from_the_slices() -> None:
    slices, claims, _ = fleet_a()
    gpus, skipped = ma.gpus_of(slices, claims)
    assert skipped == []
    by = {(g.node, g.index): g for g in gpus}
    assert sorted(by) == [("gpu-a", 0), ("gpu-a", 1), ("gpu-a", 2), ("gpu-a", 3), ("gpu-b", 0)]
    g0 = by[("gpu-a", 0)]
    assert g0.mig and g0.uuid == "GPU-gpu-a-0"
    assert [(i.place, i.profile_id, i.claims) for i in g0.instances] == [
        (("3g.71gb", 0, 4), 9, ("ml/train",)),
        (("2g.35gb", 4, 2), 14, ()),
    ]
    assert by[("gpu-a", 3)].claim == "ml/big" and not by[("gpu-a", 3)].mig
    assert by[("gpu-a", 1)].layout == {"1g.18gb": 7}


def test_placement_start_comes_from_memory_slices_before_the_name() -> None:
    dev = mig("n", 0, "2g.35gb", 2)
    dev["name"] = "gpu-0-mig-2g35gb-14-0"  # a name that disagrees: the capacities win
    gpus, _ = ma.gpus_of([rslice("n", [dev])], [])
    assert [i.start for i in gpus[0].instances] == [2]


def test_advice_prefers_idle_gpus_then_keeps_allocations_in_place() -> None:
    slices, claims, pods = fleet_a()
    doc = ma.advise(slices, claims, pods, []).to_dict()
    # the three 1g.18gb claims are served by GPU 1's free instances as they are
    assert [s["claim"] for s in doc["servable_now"]] == [f"ml/small-{i}" for i in range(3)]
    first, second = doc["changes"]
    # round 1: the idle whole GPU 2 becomes two 3g.71gb and serves two claims
    assert (first["node"], first["gpu"], first["tier"]) == ("gpu-a", 2, "idle")
    assert first["current"]["mig_enabled"] is False
    assert first["proposed"]["layout"] == {"3g.71gb": 2}
    assert first["serves"] == ["ml/half-0", "ml/half-1"] and first["disturbs"] == []
    # round 2: GPU 0 keeps ml/train's 3g.71gb at 0 and replaces the free 2g.35gb; GPU 1
    # would have to destroy three free 1g.18gb instead of one 2g.35gb
    assert (second["node"], second["gpu"], second["tier"]) == ("gpu-a", 0, "keep")
    assert second["proposed"]["placements"] == [
        {"profile": "3g.71gb", "profile_id": 9, "start": 0, "size": 4},
        {"profile": "3g.71gb", "profile_id": 9, "start": 4, "size": 4},
    ]
    assert second["serves"] == ["ml/half-2"] and second["disturbs"] == []
    s = doc["summary"]
    assert (s["pending_claims"], s["pending_mig"], s["servable_now"]) == (7, 6, 3)
    assert (s["served"], s["unserved"], s["gpus_changed"], s["claims_disturbed"]) == (3, 0, 2, 0)
    assert doc["not_considered"][0]["claim"] == "ml/other"
    assert "example.com-fpga" in doc["not_considered"][0]["reason"]


def test_every_proposed_layout_is_the_planners_placement() -> None:
    slices, claims, pods = fleet_a()
    doc = ma.advise(slices, claims, pods, []).to_dict()
    model = mpr.model(H200)
    for change in doc["changes"]:
        kept = [p for p in change["current"]["placements"] if p["claims"]]
        replanned = mpl.plan(model, change["proposed"]["layout"], current=kept)
        assert [p.to_dict() for p in replanned.placements] == change["proposed"]["placements"]


def test_max_gpus_bounds_the_changes() -> None:
    slices, claims, pods = fleet_a()
    doc = ma.advise(slices, claims, pods, [], max_gpus=1).to_dict()
    assert len(doc["changes"]) == 1
    assert [u["claim"] for u in doc["unserved"]] == ["ml/half-2"]
    assert "max GPUs" in doc["unserved"][0]["reason"]


def fleet_full() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """gpu-b only: GPU 0 two 3g.71gb both held; a claim waits for a 7g.141gb."""
    slices, claims, pods = fleet_a()
    slices = [s for s in slices if s["spec"]["nodeName"] == "gpu-b"]
    claims = [c for c in claims if c["metadata"]["name"] in ("left", "right")]
    claims.append(claim("whole-card", ["7g.141gb"]))
    return slices, claims, [p for p in pods if p["metadata"]["name"] in ("lefty", "righty")]


def test_no_disturbance_without_allow_disturb() -> None:
    doc = ma.advise(*fleet_full(), []).to_dict()
    assert doc["changes"] == []
    (unserved,) = doc["unserved"]
    assert unserved["claim"] == "ml/whole-card"
    assert "without disturbing running claims" in unserved["reason"]


def test_allow_disturb_names_the_claims_and_their_pods() -> None:
    doc = ma.advise(*fleet_full(), [], allow_disturb=True).to_dict()
    (change,) = doc["changes"]
    assert (change["tier"], change["proposed"]["layout"]) == ("disturb", {"7g.141gb": 1})
    assert change["serves"] == ["ml/whole-card"]
    assert change["disturbs"] == [
        {
            "claim": "ml/left",
            "pods": ["ml/lefty"],
            "devices": ["gpu.nvidia.com/gpu-b/gpu-0-mig-3g71gb-9-0"],
        },
        {
            "claim": "ml/right",
            "pods": ["ml/righty"],
            "devices": ["gpu.nvidia.com/gpu-b/gpu-0-mig-3g71gb-9-4"],
        },
    ]
    assert doc["summary"]["claims_disturbed"] == 2


def test_a_free_whole_gpu_that_a_pending_claim_wants_is_not_carved() -> None:
    slices = [rslice("n", [whole("n", 0)])]
    claims = [claim("wants-gpu", cls="gpu.nvidia.com"), claim("wants-mig", ["1g.18gb"])]
    doc = ma.advise(slices, claims, [], []).to_dict()
    assert doc["changes"] == []
    assert [u["claim"] for u in doc["unserved"]] == ["ml/wants-mig"]


def test_a_claim_of_several_requests_lands_on_one_gpu() -> None:
    slices = [rslice("n", [whole("n", 0)])]
    claims = [claim("pair", ["3g.71gb", "1g.18gb"])]
    (change,) = ma.advise(slices, claims, [], []).to_dict()["changes"]
    assert change["proposed"]["layout"] == {"1g.18gb": 1, "3g.71gb": 1}
    assert change["serves_profiles"] == {"ml/pair": {"1g.18gb": 1, "3g.71gb": 1}}


def test_nothing_pending_proposes_nothing() -> None:
    slices, claims, pods = fleet_a()
    claims = [c for c in claims if c["status"].get("allocation")]
    doc = ma.advise(slices, claims, pods, []).to_dict()
    assert doc["changes"] == [] and doc["summary"]["pending_claims"] == 0


def test_stale_when_the_gpu_changed_since() -> None:
    slices, claims, pods = fleet_a()
    doc = ma.advise(slices, claims, pods, []).to_dict()
    gpus, _ = ma.gpus_of(slices, claims)
    assert ma.stale_reasons(doc["changes"], gpus) == []
    # GPU 2 was carved by someone else meanwhile
    slices[0]["spec"]["devices"] = [
        d for d in slices[0]["spec"]["devices"] if d["name"] != "gpu-2"
    ] + [mig("gpu-a", 2, "7g.141gb", 0)]
    gpus, _ = ma.gpus_of(slices, claims)
    (reason,) = ma.stale_reasons(doc["changes"], gpus)
    assert reason == (
        "node gpu-a GPU 2: the proposal was made for MIG disabled, the GPU now has {'7g.141gb': 1}"
    )


def test_disturbed_recomputed_from_the_cluster() -> None:
    slices, claims, _ = fleet_full()
    gpus, _ = ma.gpus_of(slices, claims)
    keep_left = [{"profile": "3g.71gb", "start": 0, "size": 4}]
    assert ma.disturbed_by(gpus[0], keep_left) == ["ml/right"]


def test_host_vars_per_node() -> None:
    changes = [
        {"node": "a", "gpu": 2, "proposed": {"layout": {"3g.71gb": 2}}},
        {"node": "a", "gpu": 0, "proposed": {"layout": {"3g.71gb": 2}}},
        {"node": "b", "gpu": 1, "proposed": {"layout": {"1g.18gb": 7}}},
        {"node": "b", "gpu": 0, "proposed": {"layout": {"7g.141gb": 1}}},
    ]
    out = ma.host_vars(changes)
    assert out["a"] == {
        "mig_enabled": True,
        "mig_devices": [0, 2],
        "mig_config_file": "",
        "mig_layout": {"3g.71gb": 2},
        "mig_config": {},
        "mig_config_name": "",
    }
    b = out["b"]
    assert (b["mig_layout"], b["mig_devices"], b["mig_config_name"]) == ({}, [0, 1], ma.CONFIG_NAME)
    assert b["mig_config"]["mig-configs"][ma.CONFIG_NAME] == [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"7g.141gb": 1}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.18gb": 7}},
    ]


def test_gpus_of_dynamic_mig_are_skipped_once_each() -> None:
    """The simulator's dynamic MIG slices: every placement of every profile is a device
    consuming the GPU's CounterSet; the scheduler carves at allocation, so the advisor has
    no layout to change and skips each GPU once."""
    from tests.unit.dynamic_mig_slices import B200_NODE, H200_NODE, slices

    gpus, skipped = ma.gpus_of(slices(), [])
    assert gpus == []
    assert [(s["node"], s["device"]) for s in skipped] == [
        (H200_NODE, "gpu-0"),
        (B200_NODE, "gpu-0"),
    ]
    assert all("dynamic MIG" in s["reason"] for s in skipped)


def test_dynamic_mig_gpus_get_moves_for_the_profile_a_pending_claim_asks_for() -> None:
    """On the simulator's H200, 1g.18gb held at 0 and 4 and a claim pending for a
    4g.71gb: the H200 table places a 4g.71gb at 0 only (slices 0-3), so the claim at 0
    moves; the B200 has no claim and nothing asked of its model: no move, nothing to
    drain."""
    from tests.unit.dynamic_mig_slices import B200_NODE, H200_NODE, allocated_claim, slices

    held = [
        allocated_claim("left", H200_NODE, "gpu-0-mig-1g18gb-19-0", namespace="ml"),
        allocated_claim("right", H200_NODE, "gpu-0-mig-1g18gb-19-4", namespace="ml"),
    ]
    doc = ma.advise(slices(), [*held, claim("big", ["4g.71gb"])], [], []).to_dict()
    assert doc["summary"]["gpus_dynamic"] == 2 and doc["changes"] == []
    b200, h200 = doc["dynamic"]
    assert (b200["node"], b200["largest_fitting"], b200["blocked"]) == (B200_NODE, "7g.180gb", [])
    assert h200["largest_fitting"] == "2g.35gb"
    start = mpr.model(H200).profile("4g.71gb").placements
    assert (h200["target"]["profile"], (h200["target"]["start"],)) == ("4g.71gb", start)
    assert h200["target"]["asked_by"] == ["ml/big"]
    assert [(m["claim"], m["memory_slices"]) for m in h200["target"]["moves"]] == [("ml/left", [0])]
    assert [(n["node"], n["gpus_free"], len(n["order"])) for n in doc["drain"]] == [
        (B200_NODE, ["gpu-0"], 0),
        (H200_NODE, [], 1),
    ]
