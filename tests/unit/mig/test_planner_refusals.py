"""The planner's refusals: from the counts first (bounded time and memory), naming the real
cause, and a profile the GPU lacks refused whatever its count."""

from __future__ import annotations

import dataclasses
import time
import tracemalloc

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp

pytestmark = pytest.mark.unit


def _refusal(model: str, wanted: dict[str, int]) -> tuple[mpla.LayoutDoesNotFit, float, int]:
    """The refusal, its wall time in seconds and the peak traced memory in bytes."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(mpla.LayoutDoesNotFit) as exc:
            pl.plan(mp.model(model), wanted)
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return exc.value, elapsed, peak


@pytest.mark.parametrize(
    "wanted",
    [
        {"1g.5gb": 10_000_000},
        {"1g.5gb": 10**12, "2g.10gb": 10**12, "1g.5gb+me": 10**9},
    ],
)
def test_huge_counts_are_refused_from_the_counts_in_bounded_time_and_memory(wanted) -> None:
    err, elapsed, peak = _refusal("a100-40gb", wanted)
    # Expanding 10 million instances took 26 s and 950 MB; the counts alone refuse it.
    assert elapsed < 2.0, elapsed
    assert peak < 5 * 1024 * 1024, peak
    assert err.over_max_instances["1g.5gb"] == (wanted["1g.5gb"], 7)
    assert err.causes[0] == "instance-limit"
    assert f"1g.5gb allows at most 7 instances per GPU (asked {wanted['1g.5gb']})" in err.reason
    assert err.slices_requested == sum(
        mp.model("a100-40gb").profile(n).slices * c for n, c in wanted.items()
    )
    assert err.max_counts.get("1g.5gb", 7) <= 7


def test_instance_limit_is_the_cause_not_placement_rules() -> None:
    # 8 x 1g.5gb asks for exactly the 8 slices the GPU has; the 7-instance limit refuses it.
    # (8 copy engines against the 7 of 7g.40gb: the engine budget refuses it too)
    err, _, _ = _refusal("a100-40gb", {"1g.5gb": 8})
    assert err.causes == ("instance-limit", "engine-budget")
    assert err.over_engine_budget == {"copy_engines": (8, 7)}
    assert "placement rules" not in err.reason
    assert "slices asked 8 of 8 (the per-profile instance limit, not the total" in err.reason
    assert err.to_dict()["causes"] == ["instance-limit", "engine-budget"]


def test_media_extension_budget_is_the_cause_not_placement_rules() -> None:
    # A30: 1g.6gb+me and 2g.12gb+me each allow one instance, but the GPU has one OFA.
    err, _, _ = _refusal("a30", {"1g.6gb+me": 1, "2g.12gb+me": 1})
    assert err.over_max_instances == {}
    # (each holds one of the GPU's one JPEG decoder too)
    assert err.over_engine_budget == {"jpeg_engines": (2, 1), "ofa_engines": (2, 1)}
    assert err.causes == ("media-extension-budget", "engine-budget")
    assert "placement rules" not in err.reason
    assert "the media-extension budget is exceeded" in err.reason
    assert "(the media-extension budget, not the total, refuses it)" in err.reason


def test_placement_rules_are_named_only_when_they_are_the_cause() -> None:
    # A100: 4g.20gb takes 0-3; 2g.10gb may start at 0, 2 or 4 only, so a second one has no
    # place on 6-7 (8 slices of 8, every count within its limit). On the real table the
    # copy-engine budget refuses it first (4 + 2 + 2 of 7); a GPU that reports no engines
    # leaves the placement rules as the one cause.
    a100 = mp.model("a100-40gb")
    bare = dataclasses.replace(
        a100,
        profiles=tuple(
            dataclasses.replace(
                p, copy_engines=0, decoders=0, encoders=0, jpeg_engines=0, ofa_engines=0
            )
            for p in a100.profiles
        ),
    )
    with pytest.raises(mpla.LayoutDoesNotFit) as exc:
        pl.plan(bare, {"4g.20gb": 1, "2g.10gb": 2})
    err = exc.value
    assert err.causes == ("placement",)
    real, _, _ = _refusal("a100-40gb", {"4g.20gb": 1, "2g.10gb": 2})
    assert real.over_engine_budget == {"copy_engines": (8, 7)}
    assert "(the placement rules, not the total, refuses it)" in err.reason


def test_too_many_slices_is_named() -> None:
    err, _, _ = _refusal("h200", {"3g.71gb": 2, "1g.18gb": 1})
    assert err.causes == ("memory-slices",)
    assert "the layout asks for 9 memory slices, the GPU has 8" in err.reason


def test_profile_the_gpu_lacks_is_refused_with_count_zero() -> None:
    with pytest.raises(mp.UnknownProfile, match=r"'1g\.5gb' does not exist on NVIDIA H200"):
        pl.plan(mp.model("h200"), {"1g.18gb": 7, "1g.5gb": 0})
    with pytest.raises(mp.UnknownProfile, match=r"'9g\.1gb' does not exist"):
        pl.plan(mp.model("h200"), {"9g.1gb": 0})


def test_check_config_refuses_a_zero_count_profile_the_gpu_lacks() -> None:
    cfg = mcfg.load_mig_config(
        {
            "version": "v1",
            "mig-configs": {
                "typo": [
                    {
                        "devices": "all",
                        "mig-enabled": True,
                        "mig-devices": {"1g.18gb": 7, "1g.10gb": 0},
                    }
                ]
            },
        }
    )
    [problem] = pl.check_config(cfg, mp.model("h200"))
    assert problem.severity == "error"
    assert problem.key == "mig-configs.typo[0].mig-devices.1g.10gb"
    assert "'1g.10gb' does not exist on NVIDIA H200" in problem.message
