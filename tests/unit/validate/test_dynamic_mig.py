"""``nodes.dynamic-mig-counters`` and ``nodes.dynamic-mig-leftover-gi`` on the ResourceSlices
the lab's DRA kubelet plugin publishes with dynamic MIG (``tests/unit/dynamic_mig_slices``)
and host GPU facts built by the collection's own nvidia-smi parsers."""

from __future__ import annotations

from fractions import Fraction

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.gpu import GpuInfo
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.smi import (
    assemble_mig_devices,
    parse_mig_lci,
    parse_mig_lgi,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import dynamic_mig as dm
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import nodes as vn

from tests.unit import dynamic_mig_slices as dms
from tests.unit.validate.listed_cluster import by_id, healthy
from tests.unit.validate_objects import node

pytestmark = pytest.mark.unit

#: The H200 of the fixture: its UUID is the one of the real H200 capture
#: (tests/unit/data/gpu/h200-single/smi-L.txt).
H200_UUID = "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90"
H200 = mprof.model("NVIDIA H200")
GI = "| GPU   Name             Profile  Instance   Placement  |"


def settings(facts: dict | None = None) -> vli.Settings:
    return vli.Settings(
        driver=ddc.NVIDIA_DRIVER,
        device_classes=[],
        gpu_nodes=[dms.H200_NODE, dms.B200_NODE],
        gpu_facts=facts or {},
    )


def h200_facts(*instances: tuple[int, str, int, int, int]) -> dict:
    """GPU facts of the H200 node holding ``instances`` (GI ID, GI profile, GI profile ID,
    placement start, size), each with its full-size compute instance (CI ID 0), through
    ``nvidia-smi mig -lgi`` and ``-lci`` as NVIDIA prints them and the collection's parsers,
    as ``host.gpu_facts`` reads a host."""
    gis = [
        f"|   0  MIG {profile:<14} {pid:>4} {gi:>8} {start:>9}:{size}     |"
        for gi, profile, pid, start, size in instances
    ]
    cis = [
        f"|   0  {gi:>4}   MIG {profile:<14} {H200.profile(profile).ci_profile_id:>4} {0:>6}  "
        f"{0}:{size} |"
        for gi, profile, _pid, _start, size in instances
    ]
    lgi = parse_mig_lgi("\n".join(["+---+", "| GPU instances: |", GI, "|===|", *gis, "+--+"]))
    lci = parse_mig_lci("\n".join(["+---+", "| Compute instances: |", "|===|", *cis, "+--+"]))
    assert len(lgi) == len(lci) == len(instances)
    gpu = GpuInfo(0, H200_UUID, "NVIDIA H200", memory_mib=143771, mig_capable=True)
    gpu.mig_mode_current = "Enabled" if instances else "Disabled"
    gpu.mig_devices = assemble_mig_devices(gpu, None, lgi, lci)
    return {dms.H200_NODE: {"gpufleet_gpus": [gpu.to_dict()]}}


def checks(slices: list, claims: list = (), facts: dict | None = None) -> dict:
    return by_id(
        dm.dynamic_mig_checks(vli.Listing(slices=slices, claims=list(claims)), settings(facts))
    )


def messages(check) -> list[tuple[str | None, str, str]]:
    return [(p.subject, p.status, p.message) for p in check.problems]


def counter_set(slices: list, node: str) -> dict:
    return next(
        c
        for s in slices
        if s["spec"]["pool"]["name"] == node
        for c in s["spec"].get("sharedCounters") or []
    )


def device(slices: list, name: str, node: str = dms.H200_NODE) -> dict:
    return next(
        d
        for s in slices
        if s["spec"]["pool"]["name"] == node
        for d in s["spec"].get("devices") or []
        if d["name"] == name
    )


# ------------------------------------------------------------------ counters


def test_the_plugins_own_slices_are_consistent_with_the_tables() -> None:
    c = checks(dms.slices())[dm.COUNTERS_ID]
    assert (c.status, c.problems) == ("pass", [])
    assert c.title == "counters published and consistent"
    assert c.summary == "2 GPU(s) on 2 node(s) publish counters as their MIG table"


def test_expected_counters_of_the_h200_are_what_nvidias_driver_derives() -> None:
    want = dm.expected_counters(mprof.model("NVIDIA H200"))
    assert want["multiprocessors"] == 132
    assert want["memory"] == 140 * 2**30
    assert sorted(k for k in want if k.startswith("memory-slice-")) == [
        f"memory-slice-{i}" for i in range(8)
    ]


def test_a_tampered_counter_fails_naming_gpu_counter_published_and_expected() -> None:
    slices = dms.slices()
    counter_set(slices, dms.H200_NODE)["counters"]["multiprocessors"]["value"] = "130"
    c = checks(slices)[dm.COUNTERS_ID]
    assert c.status == "fail"
    assert messages(c) == [
        (
            dms.H200_NODE,
            "fail",
            "GPU gpu-0 (NVIDIA H200): counter multiprocessors of gpu-0-counter-set is 130, "
            "expected 132 (MIG table of NVIDIA H200)",
        )
    ]
    assert c.fix and "republishes" in c.fix


def test_a_mismatch_on_a_derived_table_value_warns() -> None:
    # The B200's multiprocessors are derived in the tables (GIProfile.derived has "sm").
    assert "sm" in mprof.model("NVIDIA B200").profile("7g.180gb").derived
    slices = dms.slices()
    counter_set(slices, dms.B200_NODE)["counters"]["multiprocessors"]["value"] = "148"
    c = checks(slices)[dm.COUNTERS_ID]
    assert messages(c) == [
        (
            dms.B200_NODE,
            "warn",
            "GPU gpu-0 (NVIDIA B200): counter multiprocessors of gpu-0-counter-set is 148, "
            f"expected 126 (MIG table of NVIDIA B200); {dm.DERIVED}",
        )
    ]


def test_a_missing_memory_slice_counter_fails() -> None:
    slices = dms.slices()
    del counter_set(slices, dms.B200_NODE)["counters"]["memory-slice-7"]
    assert messages(checks(slices)[dm.COUNTERS_ID]) == [
        (
            dms.B200_NODE,
            "fail",
            "GPU gpu-0 (NVIDIA B200): counter memory-slice-7 of gpu-0-counter-set is not "
            "published, expected 1 (MIG table of NVIDIA B200)",
        )
    ]


def test_a_mig_device_consuming_another_placement_fails_naming_the_device() -> None:
    slices = dms.slices()
    used = device(slices, "gpu-0-mig-1g18gb-19-0")["consumesCounters"][0]["counters"]
    used["memory-slice-1"] = used.pop("memory-slice-0")
    assert messages(checks(slices)[dm.COUNTERS_ID]) == [
        (
            dms.H200_NODE,
            "fail",
            "GPU gpu-0 (NVIDIA H200): device gpu-0-mig-1g18gb-19-0 (1g.18gb at placement 0:1) "
            "consumes from gpu-0-counter-set: memory-slice-0 is not published, expected 1; "
            "memory-slice-1 is 1, expected none",
        )
    ]


def test_a_placement_the_table_lacks_fails() -> None:
    slices = dms.slices()
    device(slices, "gpu-0-mig-1g18gb-19-0")["name"] = "gpu-0-mig-1g18gb-19-7"
    assert messages(checks(slices)[dm.COUNTERS_ID]) == [
        (
            dms.H200_NODE,
            "fail",
            "GPU gpu-0 (NVIDIA H200): device gpu-0-mig-1g18gb-19-7: placement 7 is not one of "
            "1g.18gb's in the MIG table of NVIDIA H200 (0, 1, 2, 3, 4, 5, 6)",
        )
    ]


def test_a_gpu_without_its_counter_set_fails() -> None:
    slices = dms.slices()
    for s in slices:
        if s["spec"]["pool"]["name"] == dms.H200_NODE:
            s["spec"].pop("sharedCounters", None)
    assert messages(checks(slices)[dm.COUNTERS_ID]) == [
        (
            dms.H200_NODE,
            "fail",
            "GPU gpu-0 (NVIDIA H200): CounterSet gpu-0-counter-set is not published in pool "
            "h200-node, though its devices are",
        )
    ]


def test_a_product_without_a_mig_table_warns_and_is_not_compared() -> None:
    slices = dms.slices(dms.H200_NODE)
    for s in slices:
        for d in s["spec"].get("devices") or []:
            d["attributes"]["productName"] = {"string": "NVIDIA X9000"}
    c = checks(slices)[dm.COUNTERS_ID]
    assert c.status == "warn"
    assert messages(c)[0][2].startswith("GPU gpu-0 (NVIDIA X9000): product 'NVIDIA X9000' has")


def test_attributes_of_another_type_are_read_as_absent() -> None:
    slices = dms.slices(dms.H200_NODE)
    device(slices, "gpu-0-mig-1g18gb-19-0")["attributes"] = ["not", "an", "object"]
    c = checks(slices)[dm.COUNTERS_ID]
    assert [m for _s, _st, m in messages(c)] == [
        "GPU gpu-0 (NVIDIA H200): device gpu-0-mig-1g18gb-19-0: attribute profile is '', "
        "GI profile ID 19 is 1g.18gb in the MIG table of NVIDIA H200"
    ]


def test_nodes_without_counters_skip_both_checks() -> None:
    listing, s = healthy()
    found = by_id(dm.dynamic_mig_checks(listing, s))
    assert [found[i].status for i in (dm.COUNTERS_ID, dm.LEFTOVER_ID)] == ["skip", "skip"]


def test_all_checks_run_the_dynamic_mig_checks() -> None:
    listing, s = healthy()
    ids = [c.id for c in vc.all_checks(listing, s)]
    assert dm.COUNTERS_ID in ids and dm.LEFTOVER_ID in ids


# ------------------------------------------------------------------ leftover GPU instances


def test_a_gi_no_claim_owns_fails_naming_gpu_profile_placement_and_fix() -> None:
    facts = h200_facts((7, "1g.18gb", 19, 3, 1))
    c = checks(dms.slices(), [], facts)[dm.LEFTOVER_ID]
    assert c.status == "fail"
    assert c.title == "no leftover GPU instance"
    assert messages(c) == [
        (
            dms.H200_NODE,
            "fail",
            f"GPU 0 ({H200_UUID}, NVIDIA H200): GPU instance 7 (1g.18gb, GI profile ID 19, "
            "placement 3:1) is owned by no allocated ResourceClaim; after checking that no pod "
            "uses it: nvidia-smi mig -i 0 -gi 7 -dci && nvidia-smi mig -i 0 -gi 7 -dgi",
        )
    ]
    assert "-dgi" in c.fix and "no process" in c.fix


def test_a_gi_owned_by_an_allocated_claim_passes() -> None:
    facts = h200_facts((7, "1g.18gb", 19, 3, 1))
    claim = dms.allocated_claim("train", dms.H200_NODE, "gpu-0-mig-1g18gb-19-3")
    c = checks(dms.slices(), [claim], facts)[dm.LEFTOVER_ID]
    assert (c.status, c.problems) == ("pass", [])
    assert c.summary == "every GPU instance on 1 dynamic-MIG node(s) is owned by a claim"


def test_a_claim_at_another_placement_does_not_own_the_gi() -> None:
    facts = h200_facts((7, "1g.18gb", 19, 3, 1), (9, "3g.71gb", 9, 4, 4))
    claims = [
        dms.allocated_claim("a", dms.H200_NODE, "gpu-0-mig-1g18gb-19-2"),
        dms.allocated_claim("b", dms.H200_NODE, "gpu-0-mig-3g71gb-9-4"),
    ]
    c = checks(dms.slices(), claims, facts)[dm.LEFTOVER_ID]
    assert [m.split(":")[0] for _s, _st, m in messages(c)] == [f"GPU 0 ({H200_UUID}, NVIDIA H200)"]
    assert "GPU instance 7 " in c.problems[0].message


def test_a_gi_without_placement_warns() -> None:
    facts = h200_facts((7, "1g.18gb", 19, 3, 1))
    facts[dms.H200_NODE]["gpufleet_gpus"][0]["mig_devices"][0]["placement_start"] = None
    c = checks(dms.slices(), [], facts)[dm.LEFTOVER_ID]
    assert c.status == "warn"
    assert "owner cannot be told" in c.problems[0].message


def test_no_gpu_facts_skips_the_leftover_check() -> None:
    c = checks(dms.slices())[dm.LEFTOVER_ID]
    assert c.status == "skip"
    assert c.reason == "no dynamic-MIG node gave GPU facts (gpu_facts)"


def test_expected_consumption_of_a_placement() -> None:
    p = mprof.model("NVIDIA H200").profile("3g.71gb")
    used = dm.expected_consumption(p, 4)
    assert {k for k in used if k.startswith("memory-slice-")} == {
        f"memory-slice-{i}" for i in range(4, 4 + p.placement_size)
    }
    assert used["multiprocessors"] == Fraction(p.multiprocessors)


# ------------------------------------------------------------------ nodes.resourceslices


def slices_check(slices: list, facts: dict) -> object:
    listing = vli.Listing(
        slices=slices, nodes=[node(dms.H200_NODE, {"nvidia.com/gpu.present": "true"})]
    )
    s = settings(facts)
    s.gpu_nodes = [dms.H200_NODE]
    return by_id(vn.nodes_checks(listing, s))["nodes.resourceslices"]


def test_resourceslices_compares_only_full_gpus_on_a_dynamic_mig_node() -> None:
    # A GPU instance on the host and every placement published: no MIG device to match.
    c = slices_check(dms.slices(dms.H200_NODE), h200_facts((7, "1g.18gb", 19, 3, 1)))
    assert (c.status, c.problems) == ("pass", [])


def test_resourceslices_fails_a_dynamic_mig_gpu_the_host_lacks() -> None:
    facts = h200_facts()
    facts[dms.H200_NODE]["gpufleet_gpus"][0]["uuid"] = "GPU-other"
    c = slices_check(dms.slices(dms.H200_NODE), facts)
    assert messages(c) == [
        (dms.H200_NODE, "fail", "GPU 0 GPU-other is not published (nvidia-smi shows it)"),
        (
            dms.H200_NODE,
            "fail",
            f"device gpu-0 ({H200_UUID}) is published but the host has no such GPU",
        ),
        (
            dms.H200_NODE,
            "fail",
            f"MIG devices of GPU {H200_UUID} are published but the host has no such GPU",
        ),
    ]
