"""Preflight judges a MIG layout against the profiles the node reports (the gathered GPU
facts' mig_profiles), also for a GPU model the built-in tables lack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    problem as preflight_problem,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"
GPU = ["k8s_cluster", "kube_node", "gpu_nodes"]
GOOD = {"kubeadm_kubernetes_version": "1.37.2"}


def _a30_reported() -> list[dict]:
    """The profiles of a real A30 capture, as the gpu_facts module publishes them."""
    facts = mp.profile_facts(
        (DATA / "public/a30-24gb/lgip-all-used.txt").read_text(),
        (DATA / "public/a30-24gb/lgipp.txt").read_text(),
    )
    return facts[0]


def _rules(
    layout: dict[str, int], gpus: list[dict[str, Any]]
) -> dict[str, preflight_problem.Problem]:
    problems = pf.check_host("gpu-1", GPU, {**GOOD, "mig_layout": layout}, gpus=gpus)
    return {p.rule: p for p in problems}


def test_reported_profiles_are_the_shape_the_planner_reads() -> None:
    rows = [
        (r["name"], r["profile_id"], r["max_instances"], r["placements"]) for r in _a30_reported()
    ]
    assert rows == [
        ("1g.6gb", 14, 4, [0, 1, 2, 3]), ("1g.6gb+me", 21, 1, [0, 1, 2, 3]),
        ("2g.12gb", 5, 2, [0, 2]), ("4g.24gb", 0, 1, [0]),
    ]  # fmt: skip


def test_a_gpu_the_tables_lack_is_judged_by_what_it_reports() -> None:
    gpus = [{"name": "NVIDIA Future GPU", "memory_mib": 24576, "mig_profiles": _a30_reported()}]
    assert _rules({"2g.12gb": 1, "1g.6gb": 2}, gpus) == {}
    bad = _rules({"2g.12gb": 2, "1g.6gb": 1}, gpus)["mig-layout-fit"]
    assert bad.severity == preflight_problem.ERROR
    assert "does not fit on NVIDIA Future GPU" in bad.message
    unknown = _rules({"1g.18gb": 1}, gpus)["mig-layout-fit"]
    assert "'1g.18gb' does not exist on NVIDIA Future GPU" in unknown.message


def test_without_reported_profiles_an_unknown_gpu_is_an_error_naming_the_way_out() -> None:
    gpus = [{"name": "NVIDIA Future GPU", "memory_mib": 24576}]
    p = _rules({"2g.12gb": 1}, gpus)["mig-gpu-model"]
    assert p.severity == preflight_problem.ERROR and p.value == "NVIDIA Future GPU"
    assert "mig_profiles: true" in p.message


def test_reported_profiles_win_over_the_builtin_table() -> None:
    # An A30 table cut to what this node reports: 1g.6gb only (as a driver could list).
    only_1g = [r for r in _a30_reported() if r["name"] == "1g.6gb"]
    gpus = [{"name": "NVIDIA A30", "memory_mib": 24576, "mig_profiles": only_1g}]
    assert _rules({"1g.6gb": 4}, gpus) == {}
    p = _rules({"2g.12gb": 1}, gpus)["mig-layout-fit"]
    assert "'2g.12gb' does not exist on NVIDIA A30" in p.message


def test_malformed_reported_profiles_are_named() -> None:
    broken = [{**_a30_reported()[0], "placements": "0,1"}]
    p = _rules({"1g.6gb": 1}, [{"name": "NVIDIA A30", "mig_profiles": broken}])["mig-gpu-model"]
    assert "mig_profiles[0].placements is '0,1'" in p.message


def _record(name: str, pid: int, slices: int, most: int, starts: list[int]) -> dict:
    """One mig_profiles record of a made-up 8-slice GPU, in the gpu_facts shape."""
    return {
        "name": name, "profile_id": pid, "slices": slices, "memory_mib": 1000 * slices,
        "multiprocessors": 10 * slices, "copy_engines": slices, "decoders": 0,
        "encoders": 0, "jpeg_engines": 0, "ofa_engines": 0, "max_instances": most,
        "placements": starts,
    }  # fmt: skip


SMALL = [_record("1g.1gb", 19, 1, 7, list(range(7))), _record("4g.4gb", 5, 4, 1, [0])]
UNTABLED = "NVIDIA Lab GPU 8S"


def _with_model(layout: dict, gpus: list[dict], extra: dict | None = None) -> dict:
    settings = {**GOOD, "gpu_model": UNTABLED, "mig_layout": layout, **(extra or {})}
    return {p.rule: p for p in pf.check_host("gpu-1", GPU, settings, gpus=gpus)}


def test_gpu_model_the_tables_lack_is_judged_by_the_reported_profiles() -> None:
    gpus = [{"name": UNTABLED, "memory_mib": 8000, "mig_profiles": SMALL}]
    assert _with_model({"1g.1gb": 3, "4g.4gb": 1}, gpus) == {}
    bad = _with_model({"4g.4gb": 2}, gpus)
    assert "mig-gpu-model" not in bad
    assert bad["mig-layout-fit"].severity == preflight_problem.ERROR
    assert f"on {UNTABLED}" in bad["mig-layout-fit"].message


def test_gpu_model_the_tables_lack_judges_a_mig_parted_config_too() -> None:
    gpus = [{"name": UNTABLED, "memory_mib": 8000, "mig_profiles": SMALL}]
    config = {
        "version": "v1",
        "mig-configs": {
            "ok": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.1gb": 7}}],
            "big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.1gb": 8}}],
        },
    }
    extra = {"mig_config": config}
    ok = _with_model({}, gpus, {**extra, "mig_config_name": "ok"})
    assert "mig-gpu-model" not in ok and "mig-layout-fit" not in ok
    big = _with_model({}, gpus, {**extra, "mig_config_name": "big"})
    assert "mig-gpu-model" not in big
    assert "mig_config_name=big on " + UNTABLED in big["mig-layout-fit"].message


@pytest.mark.parametrize(
    "gpus",
    [[], [{"name": UNTABLED, "memory_mib": 8000}]],
    ids=["no-facts", "facts-without-mig-profiles"],
)
def test_gpu_model_with_neither_table_nor_reported_profiles_is_refused(gpus: list) -> None:
    p = _with_model({"1g.1gb": 1}, gpus)["mig-gpu-model"]
    assert (p.severity, p.variable, p.value) == (preflight_problem.ERROR, "gpu_model", UNTABLED)
    assert f"GPU model {UNTABLED!r} has no MIG profile data" in p.message
    assert "the node reported no MIG profiles" in p.message
    assert "preflight_gather_gpu_facts: true" in p.fix
    assert "nvidia-smi mig -lgip/-lgipp capture" in p.fix and "mig/tables.py" in p.fix


def test_gathered_gpu_without_table_or_profiles_names_the_variable_and_fix() -> None:
    gpus = [{"name": UNTABLED, "memory_mib": 8000}]
    p = _rules({"1g.1gb": 1}, gpus)["mig-gpu-model"]
    assert (p.variable, p.value) == ("gpufleet_gpus", UNTABLED)
    assert "preflight_gather_gpu_facts: true" in p.fix and "mig/tables.py" in p.fix
