"""MIG profiles NVIDIA's DRA driver cannot serve: the rule (``mig.profiles``), and the
planner, preflight and the ``mig`` role's module asking it on nodes that run the driver.

The rule's fact: NVIDIA's DRA kubelet plugin exits at start on a compute instance narrower
than its GPU instance (``1c.3g.71gb``), in every release (``cmd/gpu-kubelet-plugin/
nvlib.go``); the GPU simulator's kubelet plugin does the same (its Go tests).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mp
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    problem as preflight_problem,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

H200 = mprof.model("NVIDIA H200")
GPU_HOST = ["k8s_cluster", "kube_node", "gpu_nodes", "gpu_h200"]
NARROW = {"1c.3g.71gb": 2}


# --- the rule ------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("profile", "slices"),
    [("1c.3g.71gb", (1, 3, "3g.71gb")), ("MIG 2c.4g.71gb", (2, 4, "4g.71gb")), ("3g.71gb", None)],
)
def test_compute_instance_slices(profile: str, slices: tuple | None) -> None:
    assert mprof.compute_instance_slices(profile) == slices


@pytest.mark.unit
def test_rule_refuses_a_compute_instance_narrower_than_its_gpu_instance() -> None:
    reason, fix = mprof.dra_driver_refusal("1c.3g.71gb")
    assert reason.startswith("MIG profile 1c.3g.71gb is a compute instance of 1 compute slice")
    assert "exits at start" in reason and "crash-loops" in reason
    assert fix == "use the GPU-instance profile 3g.71gb (one compute instance spanning it)"


@pytest.mark.unit
@pytest.mark.parametrize("profile", ["1g.18gb", "3g.71gb", "1g.18gb+me", "7g.141gb", "3c.3g.71gb"])
def test_rule_serves_full_compute_instances(profile: str) -> None:
    assert mprof.dra_driver_refusal(profile) is None


# --- planner -------------------------------------------------------------------------------


@pytest.mark.unit
def test_planner_names_the_variable_the_profile_and_why() -> None:
    with pytest.raises(mp.DraDriverCannotServe) as exc:
        mp.check_dra_driver({"1g.18gb": 1, "1c.3g.71gb": 0}, name="mig_layout")
    assert exc.value.profile == "1c.3g.71gb"
    assert str(exc.value).startswith("mig_layout['1c.3g.71gb']: MIG profile 1c.3g.71gb is")
    assert str(exc.value).endswith("fix: use the GPU-instance profile 3g.71gb (one compute "
                                   "instance spanning it)")  # fmt: skip
    mp.check_dra_driver({"1g.18gb": 7}, name="mig_layout")  # servable: no exception


@pytest.mark.unit
def test_check_config_gives_the_dra_driver_reason_on_dra_nodes() -> None:
    config = mig_config.load_mig_config(
        {"version": "v1", "mig-configs": {"narrow": [
            {"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.71gb": 2}}
        ]}}
    )  # fmt: skip
    with_driver = mp.check_config(config, H200, dra_driver=True)
    without = mp.check_config(config, H200)
    assert [(p.key, p.severity) for p in with_driver] == [
        ("mig-configs.narrow[0].mig-devices.1c.3g.71gb", "error")
    ]
    assert "NVIDIA's DRA kubelet plugin" in with_driver[0].message
    assert with_driver[0].message.endswith("Fix: use the GPU-instance profile 3g.71gb (one "
                                           "compute instance spanning it)")  # fmt: skip
    # without the driver the planner still refuses it, for its own reason
    assert len(without) == 1 and "DRA" not in without[0].message
    assert "gpufleet plans GPU instances" in without[0].message


# --- preflight -----------------------------------------------------------------------------


def _preflight(variables: dict, groups: list[str]) -> dict[str, preflight_problem.Problem]:
    problems = pf.check_host("gpu-1", groups, {"kubeadm_kubernetes_version": "1.37.2", **variables})
    return {p.rule: p for p in problems}


@pytest.mark.unit
def test_preflight_refuses_the_profile_on_a_node_of_the_dra_driver_group() -> None:
    problems = _preflight({"gpu_model": "NVIDIA H200", "mig_layout": NARROW}, GPU_HOST)
    p = problems["mig-dra-driver-profile"]
    assert p.severity == "error" and p.variable == "mig_layout" and p.value == NARROW
    assert "MIG profile 1c.3g.71gb" in p.message and "crash-loops" in p.message
    assert "3g.71gb" in p.fix and "mig_dra_driver: false" in p.fix
    assert "mig-layout-fit" not in problems  # one report per cause


@pytest.mark.unit
def test_preflight_asks_the_rule_only_where_the_dra_driver_runs() -> None:
    off = _preflight(
        {"gpu_model": "NVIDIA H200", "mig_layout": NARROW, "mig_dra_driver": False}, GPU_HOST
    )
    assert "mig-dra-driver-profile" not in off
    assert "mig-layout-fit" in off  # still no GPU-instance profile of the H200
    other_group = _preflight(
        {"gpu_model": "NVIDIA H200", "mig_layout": NARROW, "dra_driver_group": "dra_nodes"},
        GPU_HOST,
    )
    assert "mig-dra-driver-profile" not in other_group
    servable = _preflight({"gpu_model": "NVIDIA H200", "mig_layout": {"3g.71gb": 2}}, GPU_HOST)
    assert "mig-dra-driver-profile" not in servable and "mig-layout-fit" not in servable


@pytest.mark.unit
def test_preflight_config_on_a_dra_node_carries_the_reason() -> None:
    config = {"version": "v1", "mig-configs": {"narrow": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.71gb": 2}}
    ]}}  # fmt: skip
    problems = _preflight(
        {"gpu_model": "NVIDIA H200", "mig_config": config, "mig_config_name": "narrow"},
        GPU_HOST,
    )
    p = problems["mig-layout-fit"]
    assert "NVIDIA's DRA kubelet plugin" in p.message
    assert p.fix == "use the GPU-instance profile 3g.71gb (one compute instance spanning it)"
