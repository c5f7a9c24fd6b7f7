"""Shared counters of partitionable devices, on the ResourceSlices the lab's GPU simulator
publishes with dynamic MIG: capacity, consumption by allocated claims, who holds what,
what keeps a device from being allocated and what is stranded on a GPU."""

from __future__ import annotations

from fractions import Fraction

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.tables import LAYOUTS

from tests.unit.dynamic_mig_slices import (
    B200_NODE,
    H200_NODE,
    allocated_claim,
    device_names,
    slices,
)

pytestmark = pytest.mark.unit

GIB = 2**30
H200_SET = f"gpu.nvidia.com/{H200_NODE}/gpu-0-counter-set"
B200_SET = f"gpu.nvidia.com/{B200_NODE}/gpu-0-counter-set"


def device(node: str, name: str) -> dict:
    return next(
        d for s in slices(node) for d in s["spec"].get("devices") or [] if d["name"] == name
    )


def seven_1g() -> list[dict]:
    """Seven claims, each holding the 1g.18gb of one placement of the H200 (0 to 6)."""
    return [allocated_claim(f"c{i}", H200_NODE, f"gpu-0-mig-1g18gb-19-{i}") for i in range(7)]


def test_the_counter_set_of_an_h200_as_the_simulator_publishes_it() -> None:
    sets = cc.counter_sets(slices(), [])
    assert sorted(sets) == [B200_SET, H200_SET]
    h200 = sets[H200_SET]
    assert (h200.node, h200.gpu, h200.memory_slices()) == (H200_NODE, "gpu-0", list(range(8)))
    assert h200.capacity["multiprocessors"] == 132
    assert h200.capacity["memory"] == 140 * GIB
    # the full GPU and 7 + 7 + 4 + 3 + 2 + 1 + 1 MIG placements, all consuming the set
    assert len(h200.devices) == 26 == len(device_names(H200_NODE))
    assert h200.devices["gpu-0-mig-3g71gb-9-4"]["memory-slice-7"] == 1
    assert "memory-slice-3" not in h200.devices["gpu-0-mig-3g71gb-9-4"]
    assert h200.free_memory_slices() == list(range(8)) and not h200.consumed


def test_allocated_claims_consume_and_hold_counters() -> None:
    sets = cc.counter_sets(slices(H200_NODE), seven_1g())
    h200 = sets[H200_SET]
    assert h200.consumed["multiprocessors"] == 7 * 16
    assert h200.free("multiprocessors") == 20
    assert h200.free("memory") == 140 * GIB - 7 * 16 * GIB
    assert h200.holders["memory-slice-3"] == ["default/c3"]
    assert h200.holders["multiprocessors"] == [f"default/c{i}" for i in range(7)]
    assert h200.free_memory_slices() == [7]
    assert h200.allocated["gpu-0-mig-1g18gb-19-6"] == ["default/c6"]


def test_counter_sets_claims_walk_serves_other_folds_and_is_skipped_without_consumers() -> None:
    claims = vk.PagedList(seven_1g(), page_size=3)

    class Holders:
        def __init__(self) -> None:
            self.names: list[str] = []

        def add(self, claim: dict) -> None:
            self.names.append(claim["metadata"]["name"])

        def result(self) -> list[str]:
            return self.names

    sets = cc.counter_sets(slices(H200_NODE), claims, {"holders": Holders})
    # the same accounting as without the other fold, which is kept in the claims' list
    alone = cc.counter_sets(slices(H200_NODE), seven_1g())
    assert sets[H200_SET].consumed == alone[H200_SET].consumed
    assert sets[H200_SET].holders == alone[H200_SET].holders
    assert claims.derived("holders", lambda _: []) == [f"c{i}" for i in range(7)]

    def unread():
        raise AssertionError("claims walked with no device consuming counters")
        yield  # pragma: no cover

    no_counters = [
        {**s, "spec": {**s["spec"], "sharedCounters": [], "devices": []}} for s in slices(H200_NODE)
    ]
    sets = cc.counter_sets(no_counters, unread(), {"holders": Holders})
    assert all(not cs.consumed for cs in sets.values())


def test_an_eighth_1g_is_short_of_the_memory_slice_its_placement_needs() -> None:
    sets = cc.counter_sets(slices(H200_NODE), seven_1g())
    me = device(H200_NODE, "gpu-0-mig-1g18gb-me-20-3")
    short, *engines = cc.shortfalls(sets, "gpu.nvidia.com", H200_NODE, me)
    assert (short.counter, short.capacity, short.consumed, short.needed) == (
        "memory-slice-3",
        1,
        1,
        1,
    )
    assert short.holders == ("default/c3",)
    assert short.text() == (
        "memory-slice-3 of gpu-0-counter-set on h200-node: 1 of 1 consumed, needs 1 "
        "(held by default/c3)"
    )
    # and the seven 1g.18gb hold all 7 decoders and JPEG engines of the H200
    assert [(e.counter, e.capacity, e.consumed) for e in engines] == [
        ("decoders", 7, 7),
        ("jpeg-engines", 7, 7),
    ]
    # the full GPU needs every memory slice and more multiprocessors than are left
    full = cc.shortfalls(sets, "gpu.nvidia.com", H200_NODE, device(H200_NODE, "gpu-0"))
    assert [s.counter for s in full][:7] == [f"memory-slice-{i}" for i in range(7)]
    assert "multiprocessors" in [s.counter for s in full]
    assert "memory-slice-7" not in [s.counter for s in full]


def test_a_free_device_consuming_nothing_held_has_no_shortfall() -> None:
    sets = cc.counter_sets(slices(H200_NODE), seven_1g()[:3])
    assert (
        cc.shortfalls(sets, "gpu.nvidia.com", H200_NODE, device(H200_NODE, "gpu-0-mig-3g71gb-9-4"))
        == []
    )


def test_seven_1g_strand_the_eighth_memory_slice_and_the_multiprocessors_left() -> None:
    sets = cc.counter_sets(slices(H200_NODE), seven_1g())
    fig = cc.gpu_figures(sets[H200_SET], sets)
    assert fig["memory_slices_free"] == [7] and fig["memory_slices_stranded"] == [7]
    # 140 GiB in 8 slices: 17.5 GiB per slice
    assert fig["memory_stranded"] == 140 * GIB // 8
    assert (fig["multiprocessors_free"], fig["multiprocessors_stranded"]) == (20, 20)
    assert (fig["devices"], fig["devices_allocated"], fig["devices_fitting"]) == (26, 7, 0)
    assert fig["claims"] == [f"default/c{i}" for i in range(7)]


def test_a_3g_needs_four_aligned_free_memory_slices() -> None:
    """1g.18gb at 1 and at 5: six slices are free, but each 3g.71gb placement (0-3, 4-7)
    contains a held one."""
    claims = [
        allocated_claim("a", H200_NODE, "gpu-0-mig-1g18gb-19-1"),
        allocated_claim("b", H200_NODE, "gpu-0-mig-1g18gb-19-5"),
    ]
    sets = cc.counter_sets(slices(H200_NODE), claims)
    at0 = cc.shortfalls(
        sets, "gpu.nvidia.com", H200_NODE, device(H200_NODE, "gpu-0-mig-3g71gb-9-0")
    )
    at4 = cc.shortfalls(
        sets, "gpu.nvidia.com", H200_NODE, device(H200_NODE, "gpu-0-mig-3g71gb-9-4")
    )
    assert [(s.counter, s.holders) for s in at0] == [("memory-slice-1", ("default/a",))]
    assert [(s.counter, s.holders) for s in at4] == [("memory-slice-5", ("default/b",))]
    fig = cc.gpu_figures(sets[H200_SET], sets)
    assert fig["memory_slices_free"] == [0, 2, 3, 4, 6, 7]
    assert fig["memory_slices_stranded"] == []  # 1g.35gb at 6 uses 6-7
    assert "3g.71gb" not in fig["profiles_fitting"]
    assert {"1g.18gb", "1g.35gb", "2g.35gb"} <= set(fig["profiles_fitting"])
    assert fig["multiprocessors_stranded"] == 0


def test_the_free_slices_a_set_of_devices_leaves_unused_and_a_slices_memory() -> None:
    """A 3g.71gb at 0 leaves slices 4-7 free; the 2g.35gb at 4 takes 4 and 5 of them."""
    sets = cc.counter_sets(
        slices(H200_NODE), [allocated_claim("a", H200_NODE, "gpu-0-mig-3g71gb-9-0")]
    )
    cs = sets[H200_SET]
    assert cc.unused_memory_slices(cs, []) == cs.free_memory_slices() == [4, 5, 6, 7]
    assert cc.unused_memory_slices(cs, ["gpu-0-mig-2g35gb-14-4"]) == [6, 7]
    # a device already allocated takes no free slice; a name the set lacks takes none
    assert cc.unused_memory_slices(cs, ["gpu-0-mig-3g71gb-9-0", "nic-0"]) == [4, 5, 6, 7]
    assert cc.slice_memory(cs) == Fraction(140 * GIB, 8)
    assert cc.slice_memory(cc.CounterSet("d", "p", "n", "s")) == 0


def test_two_3g_on_a_b200_strand_one_of_seven_compute_slices() -> None:
    """B200 (the MIG tables' b200-180gb): 3g.90gb at 0 and 4 hold all 8 memory slices;
    126 - 2 x 54 multiprocessors are left and no profile can use them."""
    rows = {r[0]: r for r in LAYOUTS["b200-180gb"]["rows"]}
    sm_3g, sm_7g, sm_1g = rows["3g.90gb"][4], rows["7g.180gb"][4], rows["1g.23gb"][4]
    assert sm_7g - 2 * sm_3g == sm_1g == 18
    claims = [
        allocated_claim("left", B200_NODE, "gpu-0-mig-3g90gb-9-0", namespace="team-a"),
        allocated_claim("right", B200_NODE, "gpu-0-mig-3g90gb-9-4", namespace="team-b"),
    ]
    sets = cc.counter_sets(slices(B200_NODE), claims)
    fig = cc.gpu_figures(sets[B200_SET], sets)
    assert fig["memory_slices_free"] == [] and fig["memory_slices_stranded"] == []
    assert fig["memory_stranded"] == 0
    assert fig["multiprocessors"] == sm_7g
    assert (fig["multiprocessors_free"], fig["multiprocessors_stranded"]) == (sm_1g, sm_1g)
    assert fig["devices_fitting"] == 0 and fig["profiles_fitting"] == []
    short = cc.shortfalls(
        sets, "gpu.nvidia.com", B200_NODE, device(B200_NODE, "gpu-0-mig-1g23gb-19-2")
    )
    assert [(s.counter, s.holders) for s in short] == [
        ("memory-slice-2", ("team-a/left",)),
        ("memory", ("team-a/left", "team-b/right")),
    ]


def test_only_the_newest_generation_and_no_admin_access_counts() -> None:
    old = slices(H200_NODE)
    for s in old:
        s["spec"]["pool"]["generation"] = 0
        s["metadata"]["name"] += "-old"
        for cs in s["spec"].get("sharedCounters") or []:
            cs["counters"]["multiprocessors"]["value"] = "1"
    admin = allocated_claim("admin", H200_NODE, "gpu-0")
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    sets = cc.counter_sets(old + slices(H200_NODE), [admin])
    assert sets[H200_SET].capacity["multiprocessors"] == 132
    assert not sets[H200_SET].consumed


def test_v1beta1_devices_consume_under_basic() -> None:
    beta = slices(H200_NODE)
    for s in beta:
        s["spec"]["devices"] = [
            {"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
            for d in s["spec"].get("devices") or []
        ]
    sets = cc.counter_sets(beta, seven_1g())
    assert sets[H200_SET].free_memory_slices() == [7]


def test_a_device_of_a_set_its_pool_does_not_publish_cannot_be_allocated() -> None:
    only_devices = [s for s in slices(H200_NODE) if s["spec"].get("devices")]
    sets = cc.counter_sets(only_devices, [])
    (short,) = cc.shortfalls(sets, "gpu.nvidia.com", H200_NODE, device(H200_NODE, "gpu-0"))
    assert short.counter == "" and "is not published" in short.text()


def test_a_value_that_is_not_a_quantity_counts_as_zero_and_is_named() -> None:
    odd = slices(H200_NODE)
    odd[0]["spec"]["sharedCounters"][0]["counters"]["multiprocessors"]["value"] = "lots"
    sets = cc.counter_sets(odd, [])
    assert sets[H200_SET].capacity["multiprocessors"] == 0
    assert sets[H200_SET].unreadable == ["multiprocessors"]


def test_amounts_read_as_people_do() -> None:
    assert cc.format_amount("memory", Fraction(279, 4) * GIB) == "69.75Gi"
    assert cc.format_amount("memory", Fraction(140 * GIB)) == "140Gi"
    assert cc.format_amount("multiprocessors", Fraction(132)) == "132"
    assert cc.memory_slice("memory-slice-12") == 12
    assert cc.memory_slice("memory-slice-01") is None
    assert cc.memory_slice("memory") is None


@pytest.mark.parametrize("odd", [5, "memory-slice-0", {"name": "x"}, [5, None, "x"]])
def test_fields_of_another_type_are_not_read(odd: object) -> None:
    """A hand-made or hostile object (the explanation reads slices as listed): a
    ``sharedCounters``, ``consumesCounters`` or allocation of another type is skipped."""
    bad = slices(H200_NODE)
    bad[0]["spec"]["sharedCounters"] = odd
    bad[1]["spec"]["devices"][0]["consumesCounters"] = odd
    claim = allocated_claim("x", H200_NODE, "gpu-0")
    claim["status"]["allocation"]["devices"]["results"] = odd
    assert cc.counter_sets(bad, [claim]) == {}
    assert cc.consumption(bad[1]["spec"]["devices"][0]) == {}


def test_most_at_once_on_the_h200_is_each_profiles_max_instances() -> None:
    """Differential: what the published counters let the scheduler allocate together on
    the empty H200 is, per MIG profile, the ``-lgip`` Total of the MIG table
    (7 x 1g.18gb, 1 x 1g.18gb+me, 4 x 1g.35gb, 3 x 2g.35gb, 2 x 3g.71gb, 1 x 4g.71gb,
    1 x 7g.141gb); the whole GPU once."""
    cs = cc.counter_sets(slices(H200_NODE), [])[H200_SET]
    table = {p.name: p.max_instances for p in mprof.model("NVIDIA H200").profiles}
    assert cc.profiles_at_once(cs) == {"gpu": 1, **table}
    assert (table["1g.18gb"], table["1g.35gb"], table["3g.71gb"]) == (7, 4, 2)
    one_g = [n for n in device_names(H200_NODE) if "-mig-1g18gb-19-" in n]
    assert cc.most_at_once(cs, one_g) == len(one_g) == 7


def test_most_at_once_on_the_b200_is_the_table_unless_memory_binds() -> None:
    """Differential on the B200: per profile, the table's max_instances or, where fewer
    fit the ``memory`` counter, that many. The simulator publishes the GPU's memory as its
    largest profile's (NVIDIA's driver: per dimension the largest profile), and the
    table's 7g.180gb memory is derived from its name (``mig.tables``: 167.6 GiB), less
    than 4 x 1g.45gb (4 x 44.25 GiB): three fit at once, not the -lgip Total of 4."""
    cs = cc.counter_sets(slices(B200_NODE), [])[B200_SET]
    memory = cs.capacity["memory"]
    at_once = cc.profiles_at_once(cs)
    table = mprof.model("NVIDIA B200").profiles
    for p in table:
        used = next(
            cs.devices[n]["memory"] for n in sorted(cs.devices) if n.endswith(f"-{p.profile_id}-0")
        )
        assert at_once[p.name] == min(p.max_instances, memory // used), p.name
    bound = sorted(p.name for p in table if at_once[p.name] < p.max_instances)
    assert bound == ["1g.45gb"] and at_once["1g.45gb"] == 3 and at_once["gpu"] == 1


def test_most_at_once_counts_every_counter_and_not_the_allocations() -> None:
    sets = cc.counter_sets(slices(H200_NODE), seven_1g())
    cs = sets[H200_SET]
    one_g = [n for n in device_names(H200_NODE) if "-mig-1g18gb-19-" in n]
    # the claims holding all seven now do not count: the quota is of the empty GPU
    assert cc.most_at_once(cs, one_g + one_g + ["nic-0"]) == 7
    # the whole GPU consumes every counter: nothing fits beside it
    assert cc.most_at_once(cs, ["gpu-0", *one_g]) == 1
    cs.capacity["multiprocessors"] = Fraction(100)
    assert cc.most_at_once(cs, one_g) == 100 // 16
    del cs.capacity["ofa-engines"]
    assert cc.most_at_once(cs, [n for n in device_names(H200_NODE) if "1g18gb-me" in n]) == 0


def test_counter_sets_read_pages_as_lists_and_find_sets_published_after_their_devices() -> None:
    """A pool may publish its CounterSets in another slice than the devices that consume
    them, before or after them; the slices are read in one pass, page by page."""
    listed = slices()
    split = []
    for s in listed:
        devices_only = {**s, "spec": {k: v for k, v in s["spec"].items() if k != "sharedCounters"}}
        sets_only = {**s, "spec": {k: v for k, v in s["spec"].items() if k != "devices"}}
        split += [devices_only, sets_only]  # the devices first

    def figures(sets: dict) -> dict:
        return {k: (cs.devices, cs.consumed, cs.holders, cs.allocated) for k, cs in sets.items()}

    whole = figures(cc.counter_sets(listed, seven_1g()))
    assert whole[H200_SET][1]["multiprocessors"] == 7 * 16
    assert figures(cc.counter_sets(split, seven_1g())) == whole
    assert figures(cc.counter_sets(vk.PagedList(split, page_size=1), seven_1g())) == whole
