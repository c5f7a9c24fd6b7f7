"""``gpufleet mig plan``/``mig apply`` with a ``--layout`` that is neither JSON nor a file
the system can look up (a name longer than a path may be, a NUL byte), for the newest
GPU models of ``mig.tables``: exit 2 naming ``--layout``, nothing run (the tripwires of
``conftest``). ``mig apply`` reads a bare word as a mig-configs entry name: one that no
such name can be is refused too, and so is a JSON layout that names a profile twice."""

from __future__ import annotations

import pytest

from tests.unit.hostile.inputs import assert_refused, invoke

pytestmark = pytest.mark.unit

LAYOUTS = {
    "deep-list": "[" * 5000 + "]" * 5000,
    "long-name": "@" + "a" * 5000,
    "long-bare-name": "x" * 5000,
    "nul-byte": "@lay\x00out.yaml",
}


@pytest.mark.parametrize("model", ["NVIDIA B300", "gb300", "NVIDIA GB200", "PG506-96GB"])
@pytest.mark.parametrize("layout", list(LAYOUTS.values()), ids=list(LAYOUTS))
def test_mig_plan_refuses_a_layout_no_file_can_be_named_by(
    hostile: dict[str, str], model: str, layout: str
) -> None:
    result = invoke(hostile, ["mig", "plan", "--gpu-model", model, "--layout", layout])
    assert_refused(result, ("--layout",))
    assert len(result.output) < 2000, result.output


@pytest.mark.parametrize("layout", [LAYOUTS["long-name"], LAYOUTS["nul-byte"]], ids=["long", "nul"])
def test_mig_apply_refuses_a_layout_no_file_can_be_named_by(
    hostile: dict[str, str], layout: str
) -> None:
    result = invoke(hostile, ["mig", "apply", "-i", hostile["inventory"], "--layout", layout])
    assert_refused(result, ("--layout",))


@pytest.mark.parametrize(
    "layout",
    ["all 1g; rm -rf /", "x" * 300, "-dash-first", "ünïcode", '{"1g.18gb": 3, "1g.18gb": 4}'],
    ids=["shell", "too-long", "dash-first", "non-ascii", "duplicate-profile"],
)
def test_mig_apply_refuses_a_word_no_config_entry_can_be_named(
    hostile: dict[str, str], layout: str
) -> None:
    result = invoke(hostile, ["mig", "apply", "-i", hostile["inventory"], "--layout", layout])
    assert_refused(result, ("--layout",))
    assert len(result.output) < 2000, result.output


@pytest.mark.parametrize("model", ["NVIDIA H200", "NVIDIA B300"])
def test_mig_plan_refuses_a_layout_that_names_a_profile_twice(
    hostile: dict[str, str], model: str
) -> None:
    result = invoke(
        hostile,
        ["mig", "plan", "--gpu-model", model, "--layout", '{"1g.18gb": 3, "1g.18gb": 4}'],
    )
    assert_refused(result, ("--layout", "twice"))
