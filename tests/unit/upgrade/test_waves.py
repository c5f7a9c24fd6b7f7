"""Waves of an upgrade step: control planes one at a time, workers in batches that keep the
GPU floor schedulable (``plugins/module_utils/upgrade/waves.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import nodes as un
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import waves as uw

pytestmark = pytest.mark.unit

V137 = dra_core.parse_version("1.37.2")
AT_136 = {"kubelet": "1.36.3", "apiserver": "1.36.3", "kubeadm": "1.36.3"}


def control_plane(host: str, **kw: object) -> un.NodeState:
    return un.NodeState(host, host, True, **{**AT_136, **kw})


def worker(host: str, kubelet: str = "1.36.3", gpus: int = 8, **kw: object) -> un.NodeState:
    return un.NodeState(host, host, False, kubelet, gpu_devices=gpus, **kw)


WORKERS = [worker("w-1"), worker("w-2"), worker("w-3", kubelet="1.37.2")]


def test_gpu_budget_rounds_the_floor_up_and_counts_cordoned_devices() -> None:
    budget = uw.gpu_budget([*WORKERS, worker("w-4", gpus=3, unschedulable=True)], 50.0, "floor")
    assert (budget.total, budget.cordoned, budget.required) == (27, 3, 14)
    assert budget.name == "floor"


def test_the_first_control_plane_applies_and_the_others_upgrade_node() -> None:
    nodes = [control_plane("cp-1"), control_plane("cp-2"), *WORKERS]
    steps, waves, apply_host, warnings = uw.control_plane_waves(
        V137, nodes, set(), uw.gpu_budget(nodes, 0.0, "floor"), "1.37.2-1.1"
    )
    assert apply_host == "cp-1" and warnings == []
    assert [(s.host, s.role, s.wave) for s in steps] == [
        ("cp-1", "first-control-plane", 0),
        ("cp-2", "control-plane", 1),
    ]
    assert "kubeadm upgrade apply v1.37.2" in steps[0].actions
    assert "kubeadm upgrade node" in steps[1].actions
    assert [w.hosts for w in waves] == [["cp-1"], ["cp-2"]]


def test_workers_at_the_release_are_skipped_and_the_rest_batched() -> None:
    budget = uw.gpu_budget(WORKERS, 0.0, "floor")
    steps, waves, serial = uw.worker_waves(V137, WORKERS, set(), budget, 5, "pkg", 1)
    skipped = [s for s in steps if s.skip]
    assert [(s.host, s.reason) for s in skipped] == [("w-3", "at 1.37.2")]
    assert [(w.index, w.hosts) for w in waves] == [(1, ["w-1", "w-2"])]
    assert serial == [2]
    assert waves[0].gpu_available_percent == pytest.approx(33.3)


def test_the_gpu_floor_cuts_batches_short() -> None:
    budget = uw.gpu_budget(WORKERS, 50.0, "floor")
    _, waves, serial = uw.worker_waves(V137, WORKERS, set(), budget, 5, "pkg", 1)
    assert [(w.index, w.hosts) for w in waves] == [(1, ["w-1"]), (2, ["w-2"])]
    assert serial == [1, 1]
    assert all(w.gpu_available_percent >= 50.0 for w in waves)
