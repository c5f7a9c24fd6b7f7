"""Preflight judges a MIG layout against the profiles the node reports (the gathered GPU
facts' mig_profiles), also for a GPU model the built-in tables lack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils import mig_profiles as mp
from ansible_collections.gpufleet.cluster.plugins.module_utils import preflight as pf

pytestmark = pytest.mark.unit

DATA = Path(__file__).parent / "data" / "gpu"
GPU = ["k8s_cluster", "kube_node", "gpu_nodes"]
GOOD = {"kubeadm_kubernetes_version": "1.37.2"}


def _a30_reported() -> list[dict]:
    """The profiles of a real A30 capture, as the gpu_facts module publishes them."""
    facts = mp.profile_facts(
        (DATA / "public/a30-24gb/lgip-all-used.txt").read_text(),
        (DATA / "public/a30-24gb/lgipp.txt").read_text(),
    )
    return facts[0]


def _rules(layout: dict[str, int], gpus: list[dict[str, Any]]) -> dict[str, pf.Problem]:
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
    assert bad.severity == pf.ERROR
    assert "does not fit on NVIDIA Future GPU" in bad.message
    unknown = _rules({"1g.18gb": 1}, gpus)["mig-layout-fit"]
    assert "'1g.18gb' does not exist on NVIDIA Future GPU" in unknown.message


def test_without_reported_profiles_an_unknown_gpu_is_an_error_naming_the_way_out() -> None:
    gpus = [{"name": "NVIDIA Future GPU", "memory_mib": 24576}]
    p = _rules({"2g.12gb": 1}, gpus)["mig-gpu-model"]
    assert p.severity == pf.ERROR and p.value == "NVIDIA Future GPU"
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
