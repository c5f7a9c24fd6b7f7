"""The built-in MIG tables: every model says where its facts come from, same-layout
variants share one table, PCI device IDs find their model, unsourced facts are flagged."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mig_placement
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import tables as mt

pytestmark = pytest.mark.unit

# Every MIG-capable data-center GPU the issue names, by NVML name.
WANTED = [
    "NVIDIA B200", "NVIDIA GB200", "NVIDIA B300", "NVIDIA GB300",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA GH200 96GB HBM3",
    "NVIDIA GH200 144G HBM3e", "NVIDIA H20", "NVIDIA H100 94GB", "NVIDIA H100 96GB",
    "NVIDIA H200 NVL", "NVIDIA H800", "NVIDIA H800 PCIe", "NVIDIA H800 NVL",
    "NVIDIA A800 40GB PCIe", "NVIDIA A800-SXM4-80GB", "NVIDIA A800 80GB PCIe",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    "NVIDIA RTX PRO 5000 Blackwell", "NVIDIA RTX PRO 4500 Blackwell",
]  # fmt: skip


@pytest.mark.parametrize("name", WANTED)
def test_every_named_gpu_has_a_model_with_source_and_note(name: str) -> None:
    m = mp.model(name)
    assert m.name == name and m.source and m.note
    assert m.architecture in {"Ampere", "Hopper", "Blackwell"}


@pytest.mark.parametrize(
    ("variant", "same_as"),
    [
        ("NVIDIA H200 NVL", "NVIDIA H200"),
        ("NVIDIA H800", "NVIDIA H100 80GB HBM3"),
        ("NVIDIA H800 PCIe", "NVIDIA H100 80GB HBM3"),
        ("NVIDIA H800 NVL", "NVIDIA H100 NVL"),
        ("NVIDIA H100 94GB", "NVIDIA H100 NVL"),
        ("NVIDIA A800-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
        ("NVIDIA A800 80GB PCIe", "NVIDIA A100-SXM4-80GB"),
        ("NVIDIA A800 40GB PCIe", "NVIDIA A100-PCIE-40GB"),
        ("NVIDIA H20", "NVIDIA GH200 96GB HBM3"),
    ],
)
def test_same_layout_variants_are_named_as_such(variant: str, same_as: str) -> None:
    v, base = mp.model(variant), mp.model(same_as)
    assert v.layout == base.layout and v.profiles == base.profiles
    assert f"same layout as {same_as}" in v.note


def test_pci_device_ids_are_unique_and_find_their_model() -> None:
    ids = [d.lower() for m in mp.MODELS.values() for d in m.pci_device_ids]
    assert len(ids) == len(set(ids))
    assert mp.model_by_device_id("0x233b10de").name == "NVIDIA H200 NVL"
    assert mp.model_by_device_id("0x290110DE").name == "NVIDIA B200"
    assert mp.model_by_device_id("0x232410DE").name == "NVIDIA H800"
    assert mp.model_by_device_id("0xDEADBEEF") is None


def test_a_model_without_a_device_id_says_so() -> None:
    for m in mp.MODELS.values():
        if not m.pci_device_ids:
            assert "PCI device ID" in m.note, m.name


def test_unsourced_memory_is_flagged_derived() -> None:
    for key, layout in mt.LAYOUTS.items():
        for row in layout["rows"]:
            if row[3] is None:
                prof = next(
                    p
                    for m in mp.MODELS.values()
                    if m.layout == key
                    for p in m.profiles
                    if p.name == row[0]
                )
                assert "gib" in prof.derived, (key, row[0])


def test_b200_table_as_the_guide_and_the_capture_give_it() -> None:
    b200 = mp.model("b200")
    assert [(p.name, p.max_instances, p.slices) for p in b200.profiles] == [
        ("1g.23gb", 7, 1), ("1g.23gb+me", 1, 1), ("1g.45gb", 4, 2), ("2g.45gb", 3, 2),
        ("3g.90gb", 2, 4), ("4g.90gb", 1, 4), ("7g.180gb", 1, 8),
    ]  # fmt: skip
    one = b200.profile("1g.23gb")
    assert (one.profile_id, one.memory_mib, one.multiprocessors, one.derived) == (
        19,
        22528,
        18,
        ("placements",),
    )
    assert "id" in b200.profile("7g.180gb").derived
    plan = pl.plan(b200, {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1})
    assert [(p.profile, p.start) for p in plan.placements] == [
        ("2g.45gb", 0), ("1g.23gb", 2), ("1g.23gb", 3), ("3g.90gb", 4)
    ]  # fmt: skip


def test_rtx_pro_6000_has_four_slices_and_one_media_extension() -> None:
    rtx = mp.model("rtx-pro-6000")
    assert rtx.total_slices == 4 and rtx.compute_capability == "12.0"
    pl.plan(rtx, {"1g.24gb": 4})
    with pytest.raises(mig_placement.LayoutDoesNotFit) as exc:
        pl.plan(rtx, {"1g.24gb+me": 1, "1g.24gb+me.all": 1})
    assert exc.value.causes == ("media-extension-budget", "engine-budget")
    assert exc.value.over_engine_budget["ofa_engines"] == (2, 1)


@pytest.mark.parametrize(
    ("name", "device_id", "shapes"),
    [
        (
            "NVIDIA B300",
            "0x318210DE",
            [("1g.34gb", 7, 1), ("1g.34gb+me", 1, 1), ("1g.67gb", 4, 2), ("2g.67gb", 3, 2),
             ("3g.135gb", 2, 4), ("4g.135gb", 1, 4), ("7g.269gb", 1, 8)],
        ),
        (
            "NVIDIA GB300",
            "0x31C210DE",
            [("1g.35gb", 7, 1), ("1g.35gb+me", 1, 1), ("1g.70gb", 4, 2), ("2g.70gb", 3, 2),
             ("3g.139gb", 2, 4), ("4g.139gb", 1, 4), ("7g.278gb", 1, 8)],
        ),
    ],
)  # fmt: skip
def test_b300_and_gb300_names_and_counts_from_mig_parted_the_rest_derived(
    name: str, device_id: str, shapes: list
) -> None:
    m = mp.model(name)
    assert mp.model_by_device_id(device_id.lower()) is m
    assert [(p.name, p.max_instances, p.slices) for p in m.profiles] == shapes
    assert "mig-parted" in m.source and "derived" in m.source
    for p in m.profiles:
        # no NVIDIA source gives an ID, a placement, GiB, SMs or engines of these GPUs
        assert set(p.derived) == {"id", "gib", "sm", "engines", "placements"}, p.name


def test_gb200_table_has_the_production_board_names() -> None:
    gb200 = mp.model("gb200")
    assert mp.model_by_device_id("0x294110DE") is gb200
    assert [p.name for p in gb200.profiles] == [
        "1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb",
    ]  # fmt: skip
    one = gb200.profile("1g.23gb")
    assert (one.profile_id, one.memory_mib, one.multiprocessors) == (19, 22528, 18)
    assert "id" in gb200.profile("3g.93gb").derived
    assert "1g.24gb" in gb200.source  # the earlier boards' names, planned from -lgip


def test_pg506_has_the_mig_parted_names_and_derived_ampere_geometry() -> None:
    pg = mp.model_by_device_id("0x20b610de")
    assert pg is not None and pg.name == "NVIDIA PG506-96GB" and pg.architecture == "Ampere"
    assert [(p.name, p.max_instances) for p in pg.profiles] == [
        ("1g.12gb", 7), ("2g.24gb", 3), ("3g.48gb", 2), ("4g.48gb", 1), ("7g.96gb", 1),
    ]  # fmt: skip
    assert all({"id", "placements"} <= set(p.derived) for p in pg.profiles)
    pl.plan(pg, {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1})


def test_gb300_1g35gb_is_not_h200_1g35gb() -> None:
    gb300, h200 = mp.model("gb300"), mp.model("h200")
    assert (gb300.profile("1g.35gb").slices, gb300.profile("1g.35gb").max_instances) == (1, 7)
    assert (h200.profile("1g.35gb").slices, h200.profile("1g.35gb").max_instances) == (2, 4)
    assert len(pl.plan(gb300, {"1g.35gb": 7}).placements) == 7
    with pytest.raises(mig_placement.LayoutDoesNotFit):
        pl.plan(h200, {"1g.35gb": 7})


def test_every_model_has_a_profile_table() -> None:
    assert [n for n, m in mp.MODELS.items() if not m.profiles] == []


# NVIDIA MIG user guide, "Supported MIG Profiles": (NVDEC, JPEG, OFA, copy engines, instances)
GUIDE_ENGINES = {
    "a100-40gb": {
        "1g.5gb": (0, 0, 0, 1, 7),
        "1g.5gb+me": (1, 1, 1, 1, 1),
        "1g.10gb": (1, 0, 0, 1, 4),
        "2g.10gb": (1, 0, 0, 2, 3),
        "3g.20gb": (2, 0, 0, 3, 2),
    },
    "a30": {
        "1g.6gb+me": (1, 1, 1, 1, 1),
        "2g.12gb": (2, 0, 0, 2, 2),
        "2g.12gb+me": (2, 1, 1, 2, 1),
        "4g.24gb": (4, 1, 1, 4, 1),
    },
}


@pytest.mark.parametrize(
    ("model", "profile"), [(m, p) for m, rows in GUIDE_ENGINES.items() for p in rows]
)
def test_engines_per_profile_are_the_guides(model: str, profile: str) -> None:
    p = mp.model(model).profile(profile)
    got = (p.decoders, p.jpeg_engines, p.ofa_engines, p.copy_engines, p.max_instances)
    assert got == GUIDE_ENGINES[model][profile]


def test_a30_1g6gb_decoder_is_the_captures_not_the_guides() -> None:
    # The guide's A30 table gives 1g.6gb 0 NVDECs; nvidia-smi mig -lgip on an A30 prints
    # DEC 1 (public/a30-24gb/lgip-all-used.txt), and 4 x 1g.6gb use the 4 of 4g.24gb.
    p = mp.model("a30").profile("1g.6gb")
    assert (p.decoders, p.jpeg_engines, p.ofa_engines) == (1, 0, 0)
    assert pl.plan(mp.model("a30"), {"1g.6gb": 4}).counts == {"1g.6gb": 4}


def test_rtx_pro_6000_engines_and_their_budget() -> None:
    rtx = mp.model("rtx-pro-6000")
    engines = {
        p.name: (p.copy_engines, p.decoders, p.encoders, p.jpeg_engines, p.ofa_engines)
        for p in rtx.profiles
    }
    assert engines["4g.96gb"] == (4, 4, 4, 4, 1)  # the whole GPU
    assert engines["1g.24gb+me.all"] == (1, 4, 4, 4, 1)  # every media engine
    assert engines["1g.24gb"] == (1, 1, 1, 1, 0)
    assert engines["1g.24gb-me"] == (1, 0, 0, 0, 0)
    with pytest.raises(mig_placement.LayoutDoesNotFit) as exc:
        pl.plan(rtx, {"1g.24gb+me.all": 1, "1g.24gb": 3})
    assert exc.value.over_engine_budget == {
        "decoders": (7, 4),
        "encoders": (7, 4),
        "jpeg_engines": (7, 4),
    }
    assert exc.value.causes == ("engine-budget",)
    assert pl.plan(rtx, {"1g.24gb+me.all": 1, "1g.24gb-me": 3}).counts == {
        "1g.24gb+me.all": 1,
        "1g.24gb-me": 3,
    }


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    ],
)
def test_rtx_pro_6000_workstation_editions_share_the_server_table(name: str) -> None:
    m, server = mp.model(name), mp.model("rtx-pro-6000")
    assert m.layout == server.layout and m.profiles == server.profiles
    assert m.compute_capability == "12.0" and m.total_slices == 4
    assert "guide Supported GPUs" in m.note and "pci.ids" in m.note
    assert mp.model_by_device_id(m.pci_device_ids[0]) is m


def test_every_printed_name_has_its_source() -> None:
    b300, gh200 = mp.model("b300"), mp.model("gh200")
    assert dict(b300.other_names)["NVIDIA B300 SXM6 AC"].startswith("NVIDIA/cosmos-framework")
    assert "pci.ids 2342" in dict(gh200.other_names)["NVIDIA GH200 480GB"]
    assert mp.model_by_device_id("0x233910DE") is mp.model("NVIDIA H100 94GB")


# The guide's RTX PRO Blackwell tables: (NVDEC, NVENC, JPEG, OFA, copy engines, instances)
GUIDE_RTX_ENGINES = {
    "rtx-pro-6000": {
        "1g.24gb": (1, 1, 1, 0, 1, 4),
        "1g.24gb+me": (1, 1, 1, 1, 1, 1),
        "1g.24gb+gfx": (1, 1, 1, 0, 1, 4),
        "1g.24gb+me.all": (4, 4, 4, 1, 1, 1),
        "1g.24gb-me": (0, 0, 0, 0, 1, 4),
        "2g.48gb": (2, 2, 2, 0, 2, 2),
        "2g.48gb+gfx": (2, 2, 2, 0, 2, 2),
        "2g.48gb+me.all": (4, 4, 4, 1, 2, 1),
        "2g.48gb-me": (0, 0, 0, 0, 2, 2),
        "4g.96gb": (4, 4, 4, 1, 4, 1),
        "4g.96gb+gfx": (4, 4, 4, 1, 4, 1),
    },
    "rtx-pro-5000": {
        "1g.24gb": (1, 1, 0, 0, 1, 2),
        "1g.24gb+me": (1, 1, 1, 1, 1, 1),
        "1g.24gb+gfx": (1, 1, 0, 0, 1, 2),
        "1g.24gb+me.all": (3, 3, 1, 1, 1, 1),
        "1g.24gb-me": (0, 0, 0, 0, 1, 2),
        "2g.48gb": (3, 3, 1, 1, 4, 1),
        "2g.48gb+gfx": (3, 3, 1, 1, 4, 1),
    },
    "rtx-pro-4500": {
        "1g.16gb": (1, 1, 1, 0, 1, 2),
        "1g.16gb+gfx": (1, 1, 1, 0, 1, 2),
        "1g.16gb+me.all": (3, 3, 2, 1, 1, 1),
        "1g.16gb-me": (0, 0, 0, 0, 1, 2),
        "2g.32gb": (3, 3, 2, 1, 2, 1),
        "2g.32gb+gfx": (3, 3, 2, 1, 2, 1),
    },
}


@pytest.mark.parametrize("model", sorted(GUIDE_RTX_ENGINES))
def test_rtx_pro_profiles_and_engines_are_the_guides(model: str) -> None:
    m = mp.model(model)
    got = {
        p.name: (
            p.decoders,
            p.encoders,
            p.jpeg_engines,
            p.ofa_engines,
            p.copy_engines,
            p.max_instances,
        )
        for p in m.profiles
    }
    assert got == GUIDE_RTX_ENGINES[model]


@pytest.mark.parametrize(
    ("model", "device_id", "slices"),
    [("rtx-pro-5000", "0x2BB310DE", 2), ("rtx-pro-4500", "0x2C3110DE", 2)],
)
def test_rtx_pro_5000_and_4500_from_the_guide_the_rest_flagged(
    model: str, device_id: str, slices: int
) -> None:
    m = mp.model(model)
    assert mp.model_by_device_id(device_id.lower()) is m
    assert m.total_slices == slices and m.compute_capability == "12.0"
    # no capture: IDs (110+/120+), GiB, SMs and placements are flagged, never used by apply
    assert all({"id", "gib", "sm", "placements"} <= set(p.derived) for p in m.profiles)
    assert all(p.profile_id > 100 for p in m.profiles)


def test_thor_igpu_is_not_modelled() -> None:
    # the guide's Thor iGPU profiles have no memory slices (3g.0gb) and allow one compute
    # and one +gfx instance at most, a rule the placement model does not hold
    assert "Thor iGPU is not modelled" in mt.__doc__
    for name in ("NVIDIA Thor", "NVIDIA Jetson AGX Thor", "Thor iGPU"):
        with pytest.raises(mp.UnknownGpuModel):
            mp.model(name)
