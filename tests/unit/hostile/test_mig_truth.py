"""Hostile input to the MIG model: captures of ``nvidia-smi mig -lgip``/``-lgipp`` that no
GPU prints, GPU names near the real ones, layouts over a GPU's engine budget, and huge
captures. Each case is one test id and has one expected verdict:

* ``REFUSED`` (clear refusal): exit 2 naming the option (``--lgip``, ``--lgipp``,
  ``--gpu-model``), no traceback, or the module's own error naming the input;
* ``HANDLED`` (correct handling): the real name is accepted, the over-budget layout is
  refused as a failed check (exit 1) naming the engine, the huge capture is planned or
  refused within its time bound.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp

from tests.unit.hostile.inputs import assert_refused, invoke
from tests.unit.mig import mig_captures as mc
from tests.unit.preflight.hosts import _host, _rules

pytestmark = pytest.mark.unit

H200_ROWS = [
    mc.Row("1g.18gb", 19, 7, 1, (0, 1, 2, 3, 4, 5, 6), 16.0, dec=1, jpeg=1),
    mc.Row("2g.35gb", 14, 3, 2, (0, 2, 4), 32.5, dec=2, ce=2, jpeg=2),
    mc.Row("7g.141gb", 0, 1, 8, (0,), 140.0, dec=7, ce=8, jpeg=7, ofa=1),
]


def _with(rows: list[mc.Row], **change: object) -> list[mc.Row]:
    """``rows`` with the first row changed."""
    first = rows[0]
    return [mc.Row(**{**first.__dict__, **change}), *rows[1:]]


# name -> (lgip text, lgipp text, words the refusal names)
BAD_CAPTURES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "zero-slice-profile": (
        mc.lgip(H200_ROWS),
        mc.lgipp(_with(H200_ROWS, size=0)),
        ("--lgip", "0 memory slices wide"),
    ),
    "placement-past-64-slices": (
        mc.lgip(H200_ROWS),
        mc.lgipp(_with(H200_ROWS, starts=(0, 1_000_000))),
        ("--lgip", "past the 64 memory slices"),
    ),
    "placement-start-of-40-digits": (
        mc.lgip(H200_ROWS),
        mc.lgipp(_with(H200_ROWS, starts=(10**40,))),
        ("--lgip", "past the 64 memory slices"),
    ),
    "profile-65-slices-wide": (
        mc.lgip(H200_ROWS),
        mc.lgipp(_with(H200_ROWS, size=65)),
        ("--lgip", "65 memory slices wide"),
    ),
    "65-profiles": (
        mc.lgip(mc.hostile_rows(kinds=64)),
        mc.lgipp(mc.hostile_rows(kinds=64)),
        ("--lgip", "65 GPU-instance profiles"),
    ),
    "profile-name-twice": (
        mc.lgip([*H200_ROWS, mc.Row("1g.18gb", 33, 7, 1, (7,))]),
        mc.lgipp([*H200_ROWS, mc.Row("1g.18gb", 33, 7, 1, (7,))]),
        ("--lgip", "profile name 1g.18gb twice"),
    ),
    "profile-id-twice": (
        mc.lgip([*H200_ROWS, mc.Row("1g.20gb", 19, 7, 1, (7,))]),
        mc.lgipp([*H200_ROWS, mc.Row("1g.20gb", 19, 7, 1, (7,))]),
        ("--lgip", "profile ID 19 twice"),
    ),
    "five-compute-slices": (
        mc.lgip(_with(H200_ROWS, name="5g.50gb")),
        mc.lgipp(_with(H200_ROWS, name="5g.50gb")),
        ("--lgip", "5g.50gb"),
    ),
    "no-placement-anywhere": (
        mc.lgip(H200_ROWS[:1]),
        mc.lgipp(_with(H200_ROWS[:1], starts=())),
        ("--lgip", "no placement for any profile"),
    ),
    "header-without-rows": (
        mc.lgip([]),
        mc.lgipp(H200_ROWS),
        ("--lgip", "header but no profile row"),
    ),
    "row-without-engine-line": (
        "\n".join(mc.lgip(H200_ROWS).splitlines()[:6]) + "\n",
        mc.lgipp(H200_ROWS),
        ("--lgip", "CE/JPEG/OFA"),
    ),
    "placements-of-another-profile-only": (
        mc.lgip([mc.Row("1g.11gb", 41, 7, 1, (0,))]),
        mc.lgipp([mc.Row("1g.11gb", 42, 7, 1, (0,))]),
        ("--lgipp", "no placements for profile 1g.11gb"),
    ),
    "placements-line-mangled": (
        mc.lgip(H200_ROWS),
        "GPU  0 Profile ID 19 Placements: {0,1,2}\n",
        ("--lgipp", "not GPU/Profile/placements"),
    ),
    "not-a-profile-name": (
        mc.lgip(_with(H200_ROWS, name="banana")),
        mc.lgipp(_with(H200_ROWS, name="banana")),
        ("--lgip", "banana"),
    ),
}


@pytest.mark.parametrize("case", list(BAD_CAPTURES))
def test_REFUSED_a_capture_no_gpu_prints(
    hostile: dict[str, str], tmp_path: Path, case: str
) -> None:
    lgip, lgipp, words = BAD_CAPTURES[case]
    (tmp_path / "lgip.txt").write_text(lgip)
    (tmp_path / "lgipp.txt").write_text(lgipp)
    argv = ["mig", "plan", "--lgip", str(tmp_path / "lgip.txt")]
    argv += ["--lgipp", str(tmp_path / "lgipp.txt"), "--layout", '{"1g.18gb": 1}']
    result = invoke(hostile, argv)
    assert_refused(result, words[:1])
    flat = " ".join(result.output.split())
    assert all(w in flat for w in words[1:]), result.output
    assert len(result.output) < 4000


def test_REFUSED_a_gpu_index_the_capture_lacks(hostile: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "lgip.txt").write_text(mc.lgip(H200_ROWS))
    (tmp_path / "lgipp.txt").write_text(mc.lgipp(H200_ROWS))
    argv = ["mig", "plan", "--lgip", str(tmp_path / "lgip.txt"), "--lgipp"]
    argv += [str(tmp_path / "lgipp.txt"), "--gpu-index", "3", "--layout", '{"1g.18gb": 1}']
    assert_refused(invoke(hostile, argv), ("no rows for GPU 3",))


WRONG_NAMES = {
    "b300-without-ac": "NVIDIA B300 SXM6",
    "b300-extra-suffix": "NVIDIA B300 SXM6 AC2",
    "gh200-without-size": "NVIDIA GH200",
    "gh200-480-without-gb": "NVIDIA GH200 480",
    "rtx-pro-5000-72gb-no-table": "NVIDIA RTX PRO 5000 72GB Blackwell",
    "rtx-pro-4000-not-mig-capable": "NVIDIA RTX PRO 4000 Blackwell",
    "thor-not-modelled": "NVIDIA Jetson AGX Thor",
    "glob": "NVIDIA B300*",
    "two-names-on-two-lines": "NVIDIA B300 SXM6 AC\nNVIDIA H200",
    "ten-thousand-chars": "NVIDIA " + "B" * 10_000,
}


@pytest.mark.parametrize("case", list(WRONG_NAMES))
def test_REFUSED_a_name_near_a_real_one(hostile: dict[str, str], case: str) -> None:
    argv = ["mig", "plan", "--gpu-model", WRONG_NAMES[case], "--layout", '{"1g.34gb": 1}']
    result = invoke(hostile, argv)
    assert_refused(result, ("--gpu-model",))
    assert "has no MIG profile data" in result.output
    assert len(result.output) < 8000


REAL_NAMES = {
    "b300-as-nvidia-smi-prints-it": ("NVIDIA B300 SXM6 AC", "NVIDIA B300", '{"1g.34gb": 7}'),
    "b300-lower-case": ("nvidia b300 sxm6 ac", "NVIDIA B300", '{"1g.34gb": 7}'),
    "b300-without-prefix": ("B300 SXM6 AC", "NVIDIA B300", '{"1g.34gb": 7}'),
    "gh200-480gb": ("NVIDIA GH200 480GB", "NVIDIA GH200 96GB HBM3", '{"1g.12gb": 7}'),
    "gh200-480gb-spaced": ("NVIDIA  GH200   480GB", "NVIDIA GH200 96GB HBM3", '{"1g.12gb": 7}'),
    "rtx-pro-6000-workstation": (
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        '{"1g.24gb": 4}',
    ),
    "rtx-pro-5000": (
        "NVIDIA RTX PRO 5000 Blackwell",
        "NVIDIA RTX PRO 5000 Blackwell",
        '{"1g.24gb": 2}',
    ),
    "rtx-pro-4500": (
        "NVIDIA RTX PRO 4500 Blackwell",
        "NVIDIA RTX PRO 4500 Blackwell",
        '{"1g.16gb-me": 2}',
    ),
    "rtx-pro-6000-max-q": (
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        '{"2g.48gb": 2}',
    ),
}


@pytest.mark.parametrize("case", list(REAL_NAMES))
def test_HANDLED_the_name_a_node_prints(hostile: dict[str, str], case: str) -> None:
    name, listed_as, layout = REAL_NAMES[case]
    argv = ["mig", "plan", "--gpu-model", name, "--layout", layout, "--json"]
    result = invoke(hostile, argv)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["gpu_model"] == listed_as and doc["fits"] is True


@pytest.mark.parametrize("name", ["NVIDIA B300 SXM6 AC", "NVIDIA GH200 480GB"])
def test_HANDLED_preflight_takes_the_printed_name(name: str) -> None:
    layout = {"1g.34gb": 7} if "B300" in name else {"1g.12gb": 7}
    rules = _rules(_host({"gpu_model": name, "mig_layout": layout}))
    assert "mig-gpu-model" not in rules and "mig-layout-fit" not in rules
    bad = _rules(_host({"gpu_model": name, "mig_layout": {"1g.18gb": 7}}))["mig-layout-fit"]
    assert "does not exist" in bad.message


@pytest.mark.parametrize("name", ["NVIDIA B300 SXM6 AC", "NVIDIA GH200 480GB"])
def test_HANDLED_preflight_takes_the_name_a_node_reported(name: str) -> None:
    # no gpu_model: the name gathered from the node (gpu_facts) picks the table
    gpus = [{"name": name}]
    layout = {"1g.34gb": 7} if "B300" in name else {"1g.12gb": 7}
    rules = _rules(_host({"mig_layout": layout}, gpus=gpus))
    assert "mig-gpu-model" not in rules and "mig-layout-fit" not in rules
    bad = _rules(_host({"mig_layout": {"1g.34gb": 8}}, gpus=gpus))["mig-layout-fit"]
    expected = "1g.34gb allows at most 7" if "B300" in name else "'1g.34gb' does not exist"
    assert expected in bad.message, bad.message


# model, layout, cause, words of the reason
OVER_BUDGET = {
    "rtx-me-all-and-three-1g": (
        "rtx-pro-6000",
        {"1g.24gb+me.all": 1, "1g.24gb": 3},
        "engine-budget",
        "7 video decoder(s) (NVDEC) but the GPU has 4",
    ),
    "rtx-workstation-me-all-and-three-1g": (
        "rtx-pro-6000-workstation",
        {"1g.24gb+me.all": 1, "1g.24gb": 3},
        "engine-budget",
        "7 video encoder(s) (NVENC) but the GPU has 4",
    ),
    "rtx-max-q-me-all-and-three-gfx": (
        "rtx-pro-6000-max-q",
        {"1g.24gb+me.all": 1, "1g.24gb+gfx": 3},
        "engine-budget",
        "7 JPEG decoder(s) (NVJPG) but the GPU has 4",
    ),
    "rtx-2g-me-all-and-2g": (
        "rtx-pro-6000",
        {"2g.48gb+me.all": 1, "2g.48gb": 1},
        "engine-budget",
        "6 video decoder(s) (NVDEC) but the GPU has 4",
    ),
    "rtx-5000-me-all-and-1g": (
        "rtx-pro-5000",
        {"1g.24gb+me.all": 1, "1g.24gb": 1},
        "engine-budget",
        "4 video decoder(s) (NVDEC) but the GPU has 3",
    ),
    "rtx-4500-me-all-and-1g": (
        "rtx-pro-4500",
        {"1g.16gb+me.all": 1, "1g.16gb": 1},
        "engine-budget",
        "3 JPEG decoder(s) (NVJPG) but the GPU has 2",
    ),
    "rtx-me-all-and-me": (
        "rtx-pro-6000",
        {"1g.24gb+me.all": 1, "1g.24gb+me": 1},
        "media-extension-budget",
        "2 optical-flow engine(s) (OFA) but the GPU has 1",
    ),
    "a30-two-me": (
        "a30",
        {"2g.12gb+me": 1, "1g.6gb+me": 1},
        "media-extension-budget",
        "2 JPEG decoder(s) (NVJPG) but the GPU has 1",
    ),
    "a100-eight-1g": (
        "a100-40gb",
        {"1g.5gb": 8},
        "instance-limit",
        "8 copy engine(s) (CE) but the GPU has 7",
    ),
    "h200-two-me": (
        "h200",
        {"1g.18gb+me": 2},
        "instance-limit",
        "1g.18gb+me allows at most 1 instance per GPU",
    ),
}


@pytest.mark.parametrize("case", list(OVER_BUDGET))
def test_HANDLED_a_layout_over_the_engine_budget(hostile: dict[str, str], case: str) -> None:
    model, layout, cause, words = OVER_BUDGET[case]
    argv = ["mig", "plan", "--gpu-model", model, "--layout", json.dumps(layout), "--json"]
    result = invoke(hostile, argv)
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["gpus"][0]["error"]
    assert cause in error["causes"]
    assert words in error["reason"], error["reason"]


def test_HANDLED_the_me_all_profile_with_engineless_instances_fits() -> None:
    plan = pl.plan(mp.model("rtx-pro-6000"), {"1g.24gb+me.all": 1, "1g.24gb-me": 3})
    assert plan.counts == {"1g.24gb+me.all": 1, "1g.24gb-me": 3}


HOSTILE = mc.hostile_rows()
HOSTILE_MODEL = mp.model_from_nvidia_smi("GPU of 64 slices", 0, mc.lgip(HOSTILE), mc.lgipp(HOSTILE))

HUGE = {
    "40-kinds-over-the-slices": ({r.name: 1 for r in HOSTILE[:40]}, "refused"),
    "20-kinds-twice": ({r.name: 2 for r in HOSTILE[:20]}, "refused"),
    "21-three-slice-on-fragments": ({HOSTILE[2].name: 21}, "refused"),
    "30-kinds-fit": ({r.name: 1 for r in HOSTILE[:30]}, "fit"),
    "a-trillion-of-one": ({HOSTILE[0].name: 10**12}, "refused"),
}


@pytest.mark.parametrize("case", list(HUGE))
def test_HANDLED_a_huge_capture_in_bounded_time(case: str) -> None:
    layout, verdict = HUGE[case]
    t0 = time.perf_counter()
    try:
        plan = pl.plan(HOSTILE_MODEL, layout)
    except mpla.LayoutDoesNotFit as exc:
        got = "refused"
        assert exc.reason
    else:
        got = "fit"
        assert plan.counts == layout
    assert got == verdict
    assert time.perf_counter() - t0 < 5.0


def test_HANDLED_a_search_past_its_budget_is_refused_as_not_shown_to_fit() -> None:
    # 40 one-slice kinds that may start on even slices only: 32 places for 40 instances,
    # no engines and no full-GPU profile, so only the search can tell.
    rows = [mc.Row(f"1g.{10 + k}gb", 20 + k, 1, 1, tuple(range(0, 64, 2)), ce=0) for k in range(40)]
    rows.append(mc.Row("1g.99gb", 99, 1, 1, (63,), ce=0))
    model = mp.model_from_nvidia_smi("GPU of 64 slices", 0, mc.lgip(rows), mc.lgipp(rows))
    t0 = time.perf_counter()
    with pytest.raises(pl.PlanTooLarge) as exc:
        pl.plan(model, {r.name: 1 for r in rows[:40]})
    assert time.perf_counter() - t0 < 5.0
    assert exc.value.causes == ("search-limit",)
    assert "not shown to fit" in exc.value.reason and "Fix:" in exc.value.reason
    assert isinstance(exc.value, mpla.LayoutDoesNotFit)
    assert exc.value.to_dict()["causes"] == ["search-limit"]


def test_HANDLED_a_huge_capture_through_the_cli(hostile: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "lgip.txt").write_text(mc.lgip(HOSTILE))
    (tmp_path / "lgipp.txt").write_text(mc.lgipp(HOSTILE))
    layout = json.dumps({r.name: 2 for r in HOSTILE[:20]})
    argv = ["mig", "plan", "--lgip", str(tmp_path / "lgip.txt"), "--lgipp"]
    argv += [str(tmp_path / "lgipp.txt"), "--layout", layout, "--json"]
    t0 = time.perf_counter()
    result = invoke(hostile, argv)
    assert time.perf_counter() - t0 < 10.0
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["gpus"][0]["fits"] is False
