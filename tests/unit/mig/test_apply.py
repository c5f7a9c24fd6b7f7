"""Planning the MIG apply of one GPU (``plugins/module_utils/mig/apply.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import apply as ma
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import gpu_state as mgs
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import request as mrq

pytestmark = pytest.mark.unit


def _gpu(name: str) -> mgs.GpuState:
    return mgs.GpuState(0, "GPU-0", name, None, 0, True, "Enabled", "Enabled")


def test_derived_ids_are_refused_naming_the_profiles_and_the_fix() -> None:
    req = mrq.Request(layout={"3g.90gb": 2})
    target = mrq.Target(True, {"3g.90gb": 2})
    with pytest.raises(mgs.MigApplyError) as exc:
        ma.plan_gpu(_gpu("NVIDIA B200"), target, mp.model("b200"), req)
    assert "3g.90gb" in str(exc.value) and "derived, not sourced" in str(exc.value)
    assert "nvidia-smi mig -lgip" in str(exc.value)


@pytest.mark.parametrize(
    ("name", "layout"),
    [("NVIDIA B300", {"1g.34gb": 7}), ("NVIDIA GB300", {"7g.278gb": 1})],
)
def test_b300_and_gb300_tables_never_carve_without_the_node_answer(
    name: str, layout: dict[str, int]
) -> None:
    with pytest.raises(mgs.MigApplyError) as exc:
        ma.plan_gpu(
            _gpu(name), mrq.Target(True, layout), mp.model(name), mrq.Request(layout=layout)
        )
    assert f"{next(iter(layout))} in the built-in table are derived" in str(exc.value)


def test_a_sourced_table_still_plans() -> None:
    req = mrq.Request(layout={"1g.18gb": 7})
    out = ma.plan_gpu(_gpu("NVIDIA H200"), mrq.Target(True, {"1g.18gb": 7}), mp.model("h200"), req)
    assert [p.start for p in out.plan.placements] == list(range(7))


def test_the_dynamic_mig_clear_destroys_every_instance_and_keeps_mig_on() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla

    gis = [mpla.GpuInstance("1g.18gb", 19, s, 1, instance_id=s + 1) for s in range(3)]
    gpu = mgs.GpuState(0, "GPU-0", "NVIDIA H200", None, 0, True, "Enabled", "Enabled", gis=gis)
    req = mrq.Request(layout={}, dynamic_mig=True)
    plan = ma.plan_gpu(gpu, mrq.Target(True, {}), mp.model("h200"), req)
    assert plan.destroy == gis and plan.create == [] and plan.mode_change is None
    assert plan.after() == {
        "mig_mode_current": "Enabled",
        "mig_mode_pending": "Enabled",
        "instances": [],
    }


@pytest.mark.parametrize("dynamic", [True, False])
def test_a_gpu_left_with_mig_on_and_no_instance_verifies_only_for_dynamic_mig(dynamic) -> None:
    gpu = mgs.GpuState(0, "GPU-0", "NVIDIA H200", None, 0, True, "Enabled", "Enabled", gis=[])
    req = mrq.Request(layout={}, dynamic_mig=True)
    plan = ma.plan_gpu(gpu, mrq.Target(True, {}), mp.model("h200"), req)
    outcome = ma.Outcome(0, "NVIDIA H200", True, {}, {})
    check = mrq.Request(layout={}, dynamic_mig=dynamic)
    if dynamic:
        ma._verify(plan, gpu, outcome, check)
        assert outcome.after == gpu.layout()
    else:
        with pytest.raises(mgs.MigApplyError, match="after the change the GPU shows"):
            ma._verify(plan, gpu, outcome, check)
