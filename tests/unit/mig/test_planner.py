"""The placement-aware MIG planner, mig-parted config validation and the GI diff."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"


def real_h200() -> mp.GpuModel:
    """The H200 as parsed from the real capture, not the built-in table."""
    return mp.model_from_nvidia_smi(
        "NVIDIA H200",
        143771,
        (DATA / "h200-single/smi-mig-lgip.txt").read_text(),
        (DATA / "h200-single/smi-mig-lgipp.txt").read_text(),
    )


def starts_of(plan: mpla.Plan, profile: str) -> list[int]:
    return [p.start for p in plan.placements if p.profile == profile]


def assert_valid(model: mp.GpuModel, plan: mpla.Plan) -> None:
    used: set[int] = set()
    for p in plan.placements:
        prof = model.profile(p.profile)
        assert p.profile_id == prof.profile_id and p.size == prof.slices
        assert p.start in prof.placements, p
        slots = set(p.slots)
        assert not (slots & used), f"{p} overlaps"
        assert max(slots) < model.total_slices
        used |= slots
    for name, n in plan.counts.items():
        assert n <= model.profile(name).max_instances
    full_ofa = max(p.ofa_engines for p in model.profiles if p.slices == model.total_slices)
    assert sum(model.profile(p.profile).ofa_engines for p in plan.placements) <= full_ofa


def brute_force_fits(model: mp.GpuModel, wanted: dict[str, int]) -> bool:
    """Every assignment of allowed starts, checked independently of the planner."""
    items = [model.profile(n) for n, c in wanted.items() for _ in range(c)]
    if any(c > model.profile(n).max_instances for n, c in wanted.items()):
        return False
    full_ofa = max(p.ofa_engines for p in model.profiles if p.slices == model.total_slices)
    if sum(p.ofa_engines for p in items) > full_ofa:
        return False
    for starts in itertools.product(*(p.placements for p in items)):
        used: set[int] = set()
        ok = True
        for p, s in zip(items, starts, strict=True):
            slots = set(range(s, s + p.slices))
            if slots & used or max(slots) >= model.total_slices:
                ok = False
                break
            used |= slots
        if ok:
            return True
    return False


# --- real H200 data ------------------------------------------------------------------


def test_h200_seven_1g_fit_on_starts_0_to_6() -> None:
    plan = pl.plan(real_h200(), {"1g.18gb": 7})
    assert starts_of(plan, "1g.18gb") == [0, 1, 2, 3, 4, 5, 6]
    assert all(p.profile_id == 19 and p.size == 1 for p in plan.placements)
    assert plan.free_slots == (7,)


def test_h200_4g_plus_3g_fits() -> None:
    plan = pl.plan(real_h200(), {"4g.71gb": 1, "3g.71gb": 1})
    assert [(p.profile, p.profile_id, p.start, p.size) for p in plan.placements] == [
        ("4g.71gb", 5, 0, 4),
        ("3g.71gb", 9, 4, 4),
    ]


def test_h200_two_4g_refused_naming_the_collision() -> None:
    with pytest.raises(mpla.LayoutDoesNotFit) as exc:
        pl.plan(real_h200(), {"4g.71gb": 2})
    err = exc.value
    assert err.unplaceable == {"4g.71gb": 1}
    assert err.over_max_instances == {"4g.71gb": (2, 1)}
    [collision] = err.collisions
    assert (collision.profile, collision.start, collision.slots) == ("4g.71gb", 0, (0, 1, 2, 3))
    assert [str(p) for p in collision.occupied_by] == ["4g.71gb at 0:4"]
    assert (err.slices_requested, err.slices_available) == (8, 8)
    assert err.max_counts == {"4g.71gb": 1}
    assert err.suggestion == {"4g.71gb": 1, "3g.71gb": 1}
    assert "start 0 (slices 0-3) taken by 4g.71gb at 0:4" in str(err)
    assert "at most 1 instance per GPU" in str(err)


def test_h200_mixed_needs_backtracking() -> None:
    # 3g first at start 0 leaves no room for two 2g: the planner must put 3g at 4.
    plan = pl.plan(real_h200(), {"3g.71gb": 1, "2g.35gb": 2})
    assert starts_of(plan, "3g.71gb") == [4]
    assert starts_of(plan, "2g.35gb") == [0, 2]


def test_h200_1g35_takes_two_slices() -> None:
    with pytest.raises(mpla.LayoutDoesNotFit) as exc:
        pl.plan(real_h200(), {"1g.35gb": 4, "1g.18gb": 1})
    assert exc.value.slices_requested == 9
    assert exc.value.max_counts == {"1g.18gb": 0}
    assert exc.value.suggestion == {"1g.35gb": 4}


def test_h200_one_me_instance_only() -> None:
    with pytest.raises(mpla.LayoutDoesNotFit) as exc:
        pl.plan(real_h200(), {"1g.18gb+me": 2})
    assert exc.value.over_max_instances == {"1g.18gb+me": (2, 1)}
    plan = pl.plan(real_h200(), {"1g.18gb+me": 1, "1g.18gb": 6})
    assert plan.counts == {"1g.18gb+me": 1, "1g.18gb": 6}


def test_h200_balanced_layout() -> None:
    plan = pl.plan(real_h200(), {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1})
    assert_valid(real_h200(), plan)
    assert len(plan.free_slots) == 0 or plan.free_slots == (7,)


def test_unknown_profile_names_valid_ones() -> None:
    with pytest.raises(mp.UnknownProfile, match=r"1g\.18gb"):
        pl.plan(real_h200(), {"1g.10gb": 7})


@pytest.mark.parametrize("bad", [-1, 1.5, True, "7"])
def test_bad_count_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match=r"integer >= 0"):
        pl.plan(real_h200(), {"1g.18gb": bad})  # type: ignore[dict-item]


def test_empty_layout_is_an_empty_plan() -> None:
    assert pl.plan(real_h200(), {}).placements == ()
    assert pl.plan(real_h200(), {"1g.18gb": 0}).placements == ()


# --- A100 / A30 layouts from the NVIDIA MIG user guide ---------------------------------


@pytest.mark.parametrize(
    "layout",
    [
        {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2},  # nvdocs-lgi-3211
        {"2g.10gb": 1, "1g.5gb": 5},  # nvdocs-lgi-211111
        {"3g.20gb": 2},  # nvdocs-lgi-2x3g
        {"4g.20gb": 1, "3g.20gb": 1},
        {"2g.10gb": 3, "1g.5gb": 1},
        {"1g.10gb": 4},
        {"7g.40gb": 1},
        {"1g.5gb+me": 1, "1g.5gb": 6},
    ],
)
def test_a100_doc_layouts_fit(layout: dict[str, int]) -> None:
    model = mp.model("NVIDIA A100-SXM4-40GB")
    plan = pl.plan(model, layout)
    assert plan.counts == layout
    assert_valid(model, plan)


def test_a100_4g_3g_and_1g_does_not_fit() -> None:
    with pytest.raises(mpla.LayoutDoesNotFit) as exc:
        pl.plan(mp.model("a100-40gb"), {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1})
    assert exc.value.unplaceable == {"1g.5gb": 1}
    assert exc.value.suggestion == {"4g.20gb": 1, "3g.20gb": 1}


def test_a30_one_me_across_profiles() -> None:
    a30 = mp.model("a30")
    with pytest.raises(mpla.LayoutDoesNotFit) as exc:
        pl.plan(a30, {"2g.12gb+me": 1, "1g.6gb+me": 1})
    assert exc.value.over_engine_budget == {"ofa_engines": (2, 1)}
    assert pl.plan(a30, {"2g.12gb+me": 1, "1g.6gb": 2}).counts == {"2g.12gb+me": 1, "1g.6gb": 2}


def test_doc_lgi_captures_are_valid_plans() -> None:
    """The GI sets the NVIDIA guide shows on a real A100 pass the planner's own rules."""
    model = mp.model("a100-40gb")
    for rel in ("nvdocs-lgi-3211.txt", "nvdocs-lgi-211111.txt", "nvdocs-lgi-2x3g.txt"):
        rows = mp.parse_lgi((DATA / "public/a100-sxm4-40gb" / rel).read_text())
        placements = tuple(
            mpla.Placement(r["profile"], r["profile_id"], r["start"], r["size"]) for r in rows
        )
        assert_valid(model, mpla.Plan(model.name, 8, placements))


# --- properties ------------------------------------------------------------------------

MODEL_NAMES = ["NVIDIA H200", "NVIDIA A100-SXM4-40GB", "NVIDIA A30"]


@st.composite
def layouts(draw, max_total: int):
    model = mp.MODELS[draw(st.sampled_from(MODEL_NAMES))]
    names = draw(
        st.lists(st.sampled_from(model.profile_names), min_size=1, max_size=3, unique=True)
    )
    counts = [draw(st.integers(min_value=0, max_value=3)) for _ in names]
    assume_total = sum(counts)
    if assume_total > max_total:
        counts = [min(c, 1) for c in counts]
    return model, dict(zip(names, counts, strict=True))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts(max_total=9))
def test_every_plan_is_valid(case) -> None:
    model, wanted = case
    try:
        plan = pl.plan(model, wanted)
    except mpla.LayoutDoesNotFit as err:
        assert_valid(model, err.placed)
        if err.suggestion:
            assert_valid(model, pl.plan(model, err.suggestion))
        assert err.unplaceable
        return
    assert plan.counts == {k: v for k, v in wanted.items() if v}
    assert_valid(model, plan)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts(max_total=4))
def test_plan_found_iff_brute_force_finds_one(case) -> None:
    model, wanted = case
    if sum(wanted.values()) > 4:
        wanted = {k: min(v, 1) for k, v in wanted.items()}
    expected = brute_force_fits(model, wanted)
    try:
        pl.plan(model, wanted)
        found = True
    except mpla.LayoutDoesNotFit:
        found = False
    assert found == expected, wanted


def test_exhaustive_small_layouts_agree_with_brute_force() -> None:
    """Every layout of up to 4 instances of the H200 and A30 profiles."""
    for name in ("NVIDIA H200", "NVIDIA A30"):
        model = mp.MODELS[name]
        for combo in itertools.combinations_with_replacement(model.profile_names, 4):
            for k in range(1, 5):
                wanted: dict[str, int] = {}
                for n in combo[:k]:
                    wanted[n] = wanted.get(n, 0) + 1
                try:
                    pl.plan(model, wanted)
                    found = True
                except mpla.LayoutDoesNotFit:
                    found = False
                assert found == brute_force_fits(model, wanted), (name, wanted)


# --- diff and keeping current instances ------------------------------------------------


def a100_pcie_current() -> list[dict]:
    return mp.parse_lgi((DATA / "public/a100-pcie-40gb/lgi.txt").read_text())


def test_diff_same_layout_keeps_everything() -> None:
    model = mp.model("NVIDIA A100-PCIE-40GB")
    current = a100_pcie_current()
    target = pl.plan(model, {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}, current=current)
    d = mpla.diff(current, target)
    assert not d.changed
    assert sorted(g.instance_id for g in d.keep) == [1, 6, 11, 12]


def test_diff_new_layout_keeps_matching_gi() -> None:
    model = mp.model("NVIDIA A100-PCIE-40GB")
    current = a100_pcie_current()
    target = pl.plan(model, {"3g.20gb": 2}, current=current)
    d = mpla.diff(current, target)
    assert [(g.profile, g.start) for g in d.keep] == [("3g.20gb", 4)]
    assert sorted(g.instance_id for g in d.destroy) == [6, 11, 12]
    assert [(p.profile, p.start) for p in d.create] == [("3g.20gb", 0)]
    assert d.changed


def test_plan_prefers_current_placements() -> None:
    model = mp.model("a100-40gb")
    current = [{"profile": "1g.5gb", "profile_id": 19, "start": 6, "size": 1, "instance_id": 13}]
    fresh = pl.plan(model, {"1g.5gb": 1})
    kept = pl.plan(model, {"1g.5gb": 1}, current=current)
    assert starts_of(fresh, "1g.5gb") == [0]
    assert starts_of(kept, "1g.5gb") == [6]
    assert not mpla.diff(current, kept).changed


def test_diff_reads_simulator_state_instances() -> None:
    state_gi = {
        "id": 1,
        "profile": "1g.18gb",
        "profile_id": 19,
        "placement_start": 0,
        "placement_size": 1,
    }
    target = pl.plan(mp.model("h200"), {"1g.18gb": 2})
    d = mpla.diff([state_gi], target)
    assert [g.instance_id for g in d.keep] == [1]
    assert [(p.profile, p.start) for p in d.create] == [("1g.18gb", 1)]


def test_diff_orders_creates_largest_first() -> None:
    target = pl.plan(mp.model("h200"), {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1})
    sizes = [p.size for p in mpla.diff([], target).create]
    assert sizes == sorted(sizes, reverse=True)


def test_diff_refuses_incomplete_instance() -> None:
    with pytest.raises(ValueError, match="start"):
        mpla.diff([{"profile": "1g.18gb", "profile_id": 19}], pl.plan(mp.model("h200"), {}))


# --- mig-parted config ---------------------------------------------------------------

CONFIG = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}],
        "mixed": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.71gb": 2}},
            {"devices": [1], "mig-enabled": False},
        ],
        "by-device": [
            {
                "device-filter": ["0x233510DE"],
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
            },
            {
                "device-filter": "0x20B010DE",
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
            },
        ],
    },
}


def test_load_and_select() -> None:
    cfg = mcfg.load_mig_config(CONFIG)
    assert cfg.names == ("all-disabled", "all-1g", "mixed", "by-device")
    assert mcfg.select_layout(cfg, "all-1g", [0, 1]) == {0: {"1g.18gb": 7}, 1: {"1g.18gb": 7}}
    assert mcfg.select_layout(cfg, "mixed", [0, 1]) == {0: {"3g.71gb": 2}, 1: {}}
    entries = mcfg.select_entries(cfg, "mixed", [0, 1])
    assert (entries[0].mig_enabled, entries[1].mig_enabled) == (True, False)
    assert mcfg.select_layout(cfg, "by-device", [0], "0x233510DE") == {
        0: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    }
    assert mcfg.select_layout(cfg, "by-device", [0, 1], {0: "0x20B010DE", 1: "0x233510DE"}) == {
        0: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        1: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    }


def test_load_yaml_text() -> None:
    text = (
        "version: v1\n"
        "mig-configs:\n"
        "  one:\n"
        "    - devices: [0]\n"
        "      mig-enabled: true\n"
        "      mig-devices:\n"
        '        "1g.18gb": 7\n'
    )
    assert mcfg.select_layout(mcfg.load_mig_config(text), "one", [0]) == {0: {"1g.18gb": 7}}


def test_select_unknown_name_lists_names() -> None:
    with pytest.raises(mcfg.MigConfigError, match="all-1g, mixed"):
        mcfg.select_layout(mcfg.load_mig_config(CONFIG), "all-2g", [0])


def test_select_missing_gpu_index() -> None:
    with pytest.raises(mcfg.MigConfigError) as exc:
        mcfg.select_layout(mcfg.load_mig_config(CONFIG), "mixed", [0])
    assert exc.value.key == "mig-configs.mixed[1].devices"
    assert "GPU index 1 does not exist" in str(exc.value)


def test_select_device_filter_needs_device_id() -> None:
    with pytest.raises(mcfg.MigConfigError, match="device-filter"):
        mcfg.select_layout(mcfg.load_mig_config(CONFIG), "by-device", [0])


def _with(entry: dict, top: dict | None = None) -> dict:
    base = {"version": "v1", "mig-configs": {"c": [entry]}}
    base.update(top or {})
    return base


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        ({"version": "v1", "mig-configs": {}, "extra": 1}, "extra", "allowed keys"),
        ({"version": "v2", "mig-configs": {"c": []}}, "version", "version: v1"),
        ({"version": "v1"}, "mig-configs", "non-empty mapping"),
        (
            _with({"devices": "some", "mig-enabled": True}),
            "mig-configs.c[0].devices",
            "devices: all",
        ),
        (
            _with({"devices": [0, 0], "mig-enabled": True}),
            "mig-configs.c[0].devices",
            "listed twice",
        ),
        (_with({"devices": [-1], "mig-enabled": True}), "mig-configs.c[0].devices", ">= 0"),
        (
            _with({"devices": "all", "mig-enabled": "yes"}),
            "mig-configs.c[0].mig-enabled",
            "boolean",
        ),
        (_with({"devices": "all"}), "mig-configs.c[0].mig-enabled", "required"),
        (_with({"mig-enabled": True}), "mig-configs.c[0].devices", "required"),
        (
            _with({"devices": "all", "mig-enabled": True, "mig_devices": {}}),
            "mig-configs.c[0].mig_devices",
            "'mig-devices'",
        ),
        (
            _with({"devices": "all", "mig-enabled": True, "mig-devices": {"1g18gb": 7}}),
            "mig-configs.c[0].mig-devices.1g18gb",
            "not a MIG profile",
        ),
        (
            _with({"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": -1}}),
            "mig-configs.c[0].mig-devices.1g.18gb",
            "integer >= 0",
        ),
        (
            _with({"devices": "all", "mig-enabled": False, "mig-devices": {"1g.18gb": 7}}),
            "mig-configs.c[0].mig-devices",
            "mig-enabled: false",
        ),
        (
            _with({"devices": "all", "mig-enabled": True, "device-filter": "H200"}),
            "mig-configs.c[0].device-filter",
            "0x233510DE",
        ),
        (
            {
                "version": "v1",
                "mig-configs": {
                    "c": [
                        {"devices": "all", "mig-enabled": False},
                        {"devices": [1], "mig-enabled": True},
                    ]
                },
            },
            "mig-configs.c[1].devices",
            "entries 0 and 1",
        ),
    ],
)
def test_config_errors_name_key_value_and_fix(data: dict, key: str, fragment: str) -> None:
    with pytest.raises(mcfg.MigConfigError) as exc:
        mcfg.load_mig_config(data)
    assert exc.value.key == key
    assert fragment in str(exc.value)
    assert exc.value.fix


def test_config_accepts_mig_parted_profile_forms() -> None:
    entry = {
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"1g.24gb+gfx": 1, "1g.24gb-me": 1, "1g.24gb+me.all": 1, "1c.3g.20gb": 2},
    }
    assert mcfg.load_mig_config(_with(entry)).configs["c"][0].mig_devices["1c.3g.20gb"] == 2


def test_check_config_per_model() -> None:
    cfg = mcfg.load_mig_config(CONFIG)
    h200 = pl.check_config(cfg, mp.model("h200"))
    assert [p.to_dict() for p in h200] == []
    a100 = pl.check_config(cfg, mp.model("a100-40gb"))
    by_config = {(p.config, p.severity) for p in a100}
    # 1g.18gb and 3g.71gb are H200 profiles; the by-device A100 entry is fine.
    assert ("all-1g", "error") in by_config and ("mixed", "error") in by_config
    assert not any(p.config == "by-device" for p in a100)


def test_check_config_reports_layouts_that_do_not_fit_and_empty_mig() -> None:
    data = {
        "version": "v1",
        "mig-configs": {
            "too-big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.71gb": 2}}],
            "mode-only": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
            "ci-form": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.71gb": 3}}],
            "other-gpu": [{"device-filter": "0x20B710DE", "devices": "all", "mig-enabled": False}],
        },
    }
    problems = {p.config: p for p in pl.check_config(mcfg.load_mig_config(data), mp.model("h200"))}
    assert problems["too-big"].severity == "error"
    assert "4g.71gb at 0:4" in problems["too-big"].message
    assert problems["mode-only"].severity == "warning"
    assert "no MIG devices" in problems["mode-only"].message
    assert problems["ci-form"].severity == "error" and "3g.71gb" in problems["ci-form"].message
    assert problems["other-gpu"].severity == "warning"
    assert "no entry applies to NVIDIA H200" in problems["other-gpu"].message
