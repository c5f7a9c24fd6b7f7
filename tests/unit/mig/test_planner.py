"""The placement-aware MIG planner and its check of mig-parted configs
(``plugins/module_utils/mig/planner.py``)."""

from __future__ import annotations

import itertools

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.mig.mig_data import CONFIG, DATA

pytestmark = pytest.mark.unit


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
    assert within_engines(model, [model.profile(p.profile) for p in plan.placements])


ENGINES = ("copy_engines", "decoders", "encoders", "jpeg_engines", "ofa_engines")


def within_engines(model: mp.GpuModel, items: list[mp.GIProfile]) -> bool:
    """Each engine's sum over ``items`` at most the full-GPU profile's (the guide's
    engines per profile; the full-GPU profile holds all of the GPU's)."""
    full = [p for p in model.profiles if p.slices == model.total_slices]
    return all(
        sum(getattr(p, e) for p in items) <= max(getattr(p, e) for p in full) for e in ENGINES
    )


def mask_search_fits(model: mp.GpuModel, wanted: dict[str, int]) -> bool:
    """A plain depth-first search over slice bitmasks, independent of the planner's
    left-to-right search: counts, engines, then every start of every instance."""
    if any(c > model.profile(n).max_instances for n, c in wanted.items()):
        return False
    items = sorted(
        (model.profile(n) for n, c in wanted.items() for _ in range(c)), key=lambda p: -p.slices
    )
    if not within_engines(model, items):
        return False

    def rec(i: int, mask: int) -> bool:
        if i == len(items):
            return True
        p = items[i]
        for s in p.placements:
            bits = ((1 << p.slices) - 1) << s
            if s + p.slices <= model.total_slices and not mask & bits and rec(i + 1, mask | bits):
                return True
        return False

    return rec(0, 0)


def all_layouts(model: mp.GpuModel) -> list[dict[str, int]]:
    """Every layout of the model's profiles whose memory slices fit the GPU (and one
    slice over, so that refusals are there too), counts up to each instance limit."""
    out: list[dict[str, int]] = []

    def rec(i: int, layout: dict[str, int], used: int) -> None:
        if i == len(model.profiles):
            if layout:
                out.append(dict(layout))
            return
        p = model.profiles[i]
        for c in range(p.max_instances + 1):
            if used + c * p.slices > model.total_slices + 1:
                break
            rec(i + 1, {**layout, p.name: c} if c else layout, used + c * p.slices)

    rec(0, {}, 0)
    return out


@pytest.mark.parametrize("name", sorted(mp.MODELS))
def test_every_layout_of_every_table_agrees_with_a_mask_search(name: str) -> None:
    model = mp.MODELS[name]
    layouts = all_layouts(model)
    assert len(layouts) > len(model.profiles)
    for wanted in layouts:
        try:
            plan = pl.plan(model, wanted)
            found = True
        except mpla.LayoutDoesNotFit:
            found = False
        assert found == mask_search_fits(model, wanted), (name, wanted)
        if found:
            assert_valid(model, plan)
            assert plan.counts == wanted


def brute_force_fits(model: mp.GpuModel, wanted: dict[str, int]) -> bool:
    """Every assignment of allowed starts, checked independently of the planner."""
    items = [model.profile(n) for n, c in wanted.items() for _ in range(c)]
    if any(c > model.profile(n).max_instances for n, c in wanted.items()):
        return False
    if not within_engines(model, items):
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
    assert exc.value.over_engine_budget == {"jpeg_engines": (2, 1), "ofa_engines": (2, 1)}
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


def test_plan_prefers_current_placements() -> None:
    model = mp.model("a100-40gb")
    current = [{"profile": "1g.5gb", "profile_id": 19, "start": 6, "size": 1, "instance_id": 13}]
    fresh = pl.plan(model, {"1g.5gb": 1})
    kept = pl.plan(model, {"1g.5gb": 1}, current=current)
    assert starts_of(fresh, "1g.5gb") == [0]
    assert starts_of(kept, "1g.5gb") == [6]
    assert not mpla.diff(current, kept).changed


# --- mig-parted config ---------------------------------------------------------------


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
