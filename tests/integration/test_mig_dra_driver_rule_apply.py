"""MIG profiles NVIDIA's DRA driver cannot serve: the rule (``mig.profiles``), and the
planner, preflight and the ``mig`` role's module asking it on nodes that run the driver.

The rule's fact: NVIDIA's DRA kubelet plugin exits at start on a compute instance narrower
than its GPU instance (``1c.3g.71gb``), in every release (``cmd/gpu-kubelet-plugin/
nvlib.go``); the GPU simulator's kubelet plugin does the same (its Go tests).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import apply as ma
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import gpu_state as mgs
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    problem as preflight_problem,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

from tests.ansible.test_mig_apply import Sim, apply

H200 = mprof.model("NVIDIA H200")
GPU_HOST = ["k8s_cluster", "kube_node", "gpu_nodes", "gpu_h200"]
NARROW = {"1c.3g.71gb": 2}


# --- the rule ------------------------------------------------------------------------------


# --- planner -------------------------------------------------------------------------------


# --- preflight -----------------------------------------------------------------------------


def _preflight(variables: dict, groups: list[str]) -> dict[str, preflight_problem.Problem]:
    problems = pf.check_host("gpu-1", groups, {"kubeadm_kubernetes_version": "1.37.2", **variables})
    return {p.rule: p for p in problems}


# --- the module's logic on the GPU simulator ------------------------------------------------


@pytest.mark.integration
def test_apply_refuses_before_any_change_on_a_dra_node(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    before = sim.state.read_bytes()
    with pytest.raises(mgs.MigApplyError) as exc:
        apply(sim, layout=NARROW, dra_driver=True, var_prefix="mig_")
    text = str(exc.value)
    assert text.startswith("mig_layout['1c.3g.71gb']: MIG profile 1c.3g.71gb is a compute")
    assert "(the node runs the DRA driver: mig_dra_driver=true)" in text
    assert sim.state.read_bytes() == before


@pytest.mark.integration
def test_apply_refuses_a_config_entry_on_a_dra_node(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    config = {"version": "v1", "mig-configs": {"narrow": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.71gb": 2}}
    ]}}  # fmt: skip
    with pytest.raises(mgs.MigApplyError, match=r"config 'narrow' GPU 0 mig-devices\['1c"):
        apply(sim, config=config, config_name="narrow", dra_driver=True)


@pytest.mark.integration
def test_a_gpu_instance_holding_a_narrower_compute_instance_is_recreated(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    apply(sim, layout={"3g.71gb": 2}, dra_driver=True)
    # By hand: GI 1 gets its full compute instance replaced by a 1-slice one.
    smi = [str(sim.smi), "mig"]
    for argv in (["-dci", "-gi", "1"], ["-cci", "0", "-gi", "1"]):
        rc, out, err = ma.subprocess_runner(smi + argv)
        assert rc == 0, (argv, out, err)
    narrowed = {gi["id"]: [ci["profile"] for ci in gi["compute_instances"]]
                for gi in sim.gpus()[0]["gpu_instances"]}  # fmt: skip
    assert narrowed[1] == ["1c.3g.71gb"]
    res = apply(sim, layout={"3g.71gb": 2}, dra_driver=True)
    assert res.changed
    after = {gi["placement_start"]: [ci["profile"] for ci in gi["compute_instances"]]
             for gi in sim.gpus()[0]["gpu_instances"]}  # fmt: skip
    assert after == {0: ["3g.71gb"], 4: ["3g.71gb"]}
