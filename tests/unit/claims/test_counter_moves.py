"""What to move on dynamic MIG GPUs (``plugins/module_utils/claims/counter_moves.py``), on
the ResourceSlices the lab's GPU simulator publishes (``tests/unit/dynamic_mig_slices.py``:
one H200 and one B200, every placement of every profile a device consuming the GPU's
CounterSet) with claims allocated at chosen placements.

The expectations come from NVIDIA's H200 placement table as ``mig.tables`` holds it
(``h200-141gb``): ``1g.18gb`` takes 1 memory slice at 0..6; ``1g.35gb`` and ``2g.35gb``
2 slices at 0, 2, 4, (6); ``3g.71gb`` 4 slices at 0 or 4; ``4g.71gb`` 4 slices at 0 only;
``7g.141gb`` all 8 at 0."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counter_moves as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr

from tests.unit.dynamic_mig_slices import B200_NODE, H200_NODE, allocated_claim, slices

pytestmark = pytest.mark.unit

H200 = mpr.model("NVIDIA H200")


def counter_set(node: str, *claims: dict[str, Any]) -> cc.CounterSet:
    """The one CounterSet of ``node`` with ``claims`` allocated."""
    sets = cc.counter_sets(slices(node), list(claims))
    (cs,) = sets.values()
    return cs


def h200_at(*placements: int) -> cc.CounterSet:
    """The H200 with one claim ``at-<start>`` holding the 1g.18gb at each start."""
    return counter_set(
        H200_NODE,
        *(allocated_claim(f"at-{i}", H200_NODE, f"gpu-0-mig-1g18gb-19-{i}") for i in placements),
    )


def slices_of(profile: str, start: int) -> list[int]:
    return list(H200.profile(profile).slots(start))


def test_placements_are_the_published_mig_devices_by_size() -> None:
    found = cm.placements(h200_at())
    assert [(p.profile, p.start) for p in found if p.profile == "3g.71gb"] == [
        ("3g.71gb", s) for s in H200.profile("3g.71gb").placements
    ]
    # every MIG profile of the table is published, the whole GPU (gpu-0) is no placement
    assert {p.profile for p in found} == set(H200.profile_names)
    assert all(p.device != "gpu-0" for p in found)
    for p in found:
        assert list(p.slices) == slices_of(p.profile, p.start)
    sizes = cm.profile_sizes(h200_at())
    assert sizes["4g.71gb"] == (4, H200.profile("4g.71gb").multiprocessors)
    assert sizes["3g.71gb"] < sizes["4g.71gb"] < sizes["7g.141gb"]


def test_two_small_claims_at_0_and_4_block_every_four_slice_profile() -> None:
    """1g.18gb held at 0 and 4: the free slices are 1-3 and 5-7. A 4-slice profile starts
    at 0 or 4 (3g.71gb) or 0 only (4g.71gb), each start's run holds one claim; the largest
    fitting profile is the biggest 2-slice one, 2g.35gb (32 SMs; 1g.35gb has 26) at 2 (or
    6 for 1g.35gb). Moving the claim at 0 frees 0-3: the 3g.71gb and the 4g.71gb at 0;
    moving the claim at 4 frees 4-7: only the 3g.71gb at 4; the 7g.141gb needs both."""
    cs = h200_at(0, 4)
    largest, blocked = cm.blocked_profiles(cs)
    assert largest == "2g.35gb"
    assert [b["profile"] for b in blocked] == ["3g.71gb", "4g.71gb", "7g.141gb"]
    by = {b["profile"]: b for b in blocked}
    assert [
        (p["start"], p["memory_slices"], [m["claim"] for m in p["moves"]])
        for p in by["3g.71gb"]["placements"]
    ] == [
        (0, slices_of("3g.71gb", 0), ["default/at-0"]),
        (4, slices_of("3g.71gb", 4), ["default/at-4"]),
    ]
    assert [
        (p["device"], [(m["claim"], m["memory_slices"]) for m in p["moves"]])
        for p in by["4g.71gb"]["placements"]
    ] == [("gpu-0-mig-4g71gb-5-0", [("default/at-0", [0])])]
    assert [m["claim"] for m in by["7g.141gb"]["placements"][0]["moves"]] == [
        "default/at-0",
        "default/at-4",
    ]


def test_target_is_the_largest_profile_a_pending_claim_asks_for() -> None:
    cs = h200_at(0, 4)
    t = cm.target(cs, {"4g.71gb": ["ns/big"], "1g.18gb": ["ns/small"]})
    assert t is not None
    assert (t["profile"], t["start"], t["asked_by"]) == ("4g.71gb", 0, ["ns/big"])
    assert [m["claim"] for m in t["moves"]] == ["default/at-0"]
    # a profile this GPU does not publish (a B200's) is not its target: the largest is
    t = cm.target(cs, {"3g.90gb": ["ns/b200"]})
    assert t is not None
    assert (t["profile"], t["asked_by"]) == ("7g.141gb", [])
    assert len(t["moves"]) == 2


def test_a_wanted_profile_that_fits_now_needs_no_move() -> None:
    t = cm.target(h200_at(0, 4), {"2g.35gb": ["ns/p"]})
    assert t is not None
    assert (t["profile"], t["start"], t["moves"]) == ("2g.35gb", 2, [])


def test_counters_other_than_memory_slices_need_their_holders_moved() -> None:
    """Only one instance takes the media extensions (+me): the one OFA engine counter.
    With a 1g.18gb+me held at 0, the 1g.18gb+me at 5 has its memory slice free but no
    OFA engine left: the claim at 0 must move though it holds no slice of it."""
    holder = allocated_claim("me", H200_NODE, "gpu-0-mig-1g18gb-me-20-0")
    other = allocated_claim("plain", H200_NODE, "gpu-0-mig-1g18gb-19-3")
    cs = counter_set(H200_NODE, holder, other)
    assert not cm.fits_without(cs, "gpu-0-mig-1g18gb-me-20-5", [])
    moves = cm.moves_for(cs, "gpu-0-mig-1g18gb-me-20-5")
    assert [m.claim for m in moves or []] == ["default/me"]
    assert cm.moves_for(cs, "gpu-0-mig-1g18gb-19-5") == []


def test_seven_small_claims_exhaust_the_decoders() -> None:
    """Seven 1g.18gb hold slices 0-6 and all 7 decoders: slice 7 is free but nothing fits.
    The 1g.35gb at 6 (slices 6, 7) needs the claim at 6 moved, which frees a decoder."""
    cs = h200_at(*range(7))
    largest, blocked = cm.blocked_profiles(cs)
    assert largest is None
    # nothing fits, so every profile of the table is blocked
    assert sorted(b["profile"] for b in blocked) == sorted(H200.profile_names)
    by = {b["profile"]: b for b in blocked}
    at6 = next(p for p in by["1g.35gb"]["placements"] if p["start"] == 6)
    assert [m["claim"] for m in at6["moves"]] == ["default/at-6"]
    # 1g.18gb at 0: its own holder moves; no cheaper placement exists
    assert [len(p["moves"]) for p in by["1g.18gb"]["placements"]] == [1] * 7


def test_drain_order_frees_the_gpu_with_the_fewest_smallest_claims_first() -> None:
    h200 = h200_at(0, 4)
    b200 = counter_set(B200_NODE, allocated_claim("train", B200_NODE, "gpu-0-mig-3g90gb-9-4"))
    # another GPU on the B200's node with two claims: drained after the one with one
    second = counter_set(
        B200_NODE,
        allocated_claim("x", B200_NODE, "gpu-0-mig-1g23gb-19-0"),
        allocated_claim("y", B200_NODE, "gpu-0-mig-1g23gb-19-1"),
    )
    second.name = "gpu-1-counter-set"
    idle = counter_set(B200_NODE)
    idle.name = "gpu-2-counter-set"
    order = cm.drain_order([h200, second, b200, idle])
    assert [n["node"] for n in order] == [B200_NODE, H200_NODE]
    b200_node = order[0]
    assert b200_node["gpus_free"] == ["gpu-2"]
    assert [(g["gpu"], [m["claim"] for m in g["moves"]]) for g in b200_node["order"]] == [
        ("gpu-0", ["default/train"]),
        ("gpu-1", ["default/x", "default/y"]),
    ]
    assert b200_node["order"][0]["moves"][0]["memory_slices"] == [4, 5, 6, 7]
    assert [m["claim"] for m in order[1]["order"][0]["moves"]] == ["default/at-0", "default/at-4"]


def test_advice_names_the_gpu_and_its_free_slices() -> None:
    a = cm.advice(h200_at(0, 4), {})
    assert (a["node"], a["gpu"], a["model"]) == (H200_NODE, "gpu-0", "NVIDIA H200")
    assert a["memory_slices_free"] == [1, 2, 3, 5, 6, 7]
    assert a["claims"] == ["default/at-0", "default/at-4"]
    assert a["target"]["profile"] == "7g.141gb"
