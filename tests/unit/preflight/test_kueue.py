"""The preflight rule of Kueue quotas over the inventory
(``plugins/module_utils/preflight/kueue.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import kueue as pk
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp

pytestmark = pytest.mark.unit

GPU = ["k8s_cluster", "kube_node", "gpu_nodes"]


def one_gpu_host(**variables: Any) -> dict[str, Any]:
    return {"gpu-1": {"groups": GPU, "variables": variables}}


def quota(count: int) -> list[dict[str, Any]]:
    return [{"name": "a", "quotas": {"gpu.nvidia.com": count}}]


def test_no_finding_without_kueue_or_within_the_fleet() -> None:
    assert pk.kueue_problems(one_gpu_host(kueue_teams=quota(100))) == []
    assert pk.kueue_problems(one_gpu_host(site_kueue=True, kueue_teams=quota(4))) == []


def test_quota_above_what_the_fleet_publishes_warns_naming_the_team() -> None:
    [found] = pk.kueue_problems(one_gpu_host(site_kueue=True, kueue_teams=quota(100)))
    assert (found.rule, found.severity) == ("kueue-quota", pp.WARNING)
    assert found.variable == "kueue_teams[0].quotas.gpu.nvidia.com" and found.value == 100
    assert "team a" in found.message and "the 8 the fleet can ever publish" in found.message


def test_whole_gpu_quota_on_an_all_mig_inventory_is_an_error() -> None:
    hosts = one_gpu_host(
        site_kueue=True, gpu_model="h200", mig_layout={"1g.18gb": 7}, kueue_teams=quota(1)
    )
    [found] = pk.kueue_problems(hosts)
    assert (found.rule, found.severity) == ("kueue-quota", pp.ERROR)
    assert "publish no device of gpu.nvidia.com" in found.message


def test_malformed_teams_are_an_input_error() -> None:
    [found] = pk.kueue_problems(one_gpu_host(site_kueue=True, kueue_teams="bad"))
    assert (found.rule, found.severity, found.variable) == ("kueue-input", pp.ERROR, "kueue_teams")


def mig_quota(count: int, resource: str = "mig.nvidia.com") -> list[dict[str, Any]]:
    return [{"name": "a", "quotas": {resource: count}}]


def test_a_dynamic_mig_host_publishes_mig_devices_without_a_layout() -> None:
    """No layout on a dynamic-MIG host (the mig role refuses one): its H200s publish MIG
    devices all the same, up to the largest max_instances per GPU at once."""
    h200 = mprof.model("NVIDIA H200")
    most = max(p.max_instances for p in h200.profiles)
    dynamic = {"site_kueue": True, "dra_driver_dynamic_mig": True, "gpu_model": "h200"}
    hosts = one_gpu_host(**dynamic, kueue_node_gpu_count=2, kueue_teams=mig_quota(2 * most))
    assert pk.kueue_problems(hosts) == []
    per_profile = h200.profile("3g.71gb").max_instances
    hosts = one_gpu_host(
        **dynamic,
        kueue_node_gpu_count=2,
        kueue_profile_classes=["3g.71gb"],
        kueue_teams=mig_quota(2 * per_profile, "mig-3g.71gb.gpufleet.io"),
    )
    assert pk.kueue_problems(hosts) == []
    [found] = pk.kueue_problems(
        one_gpu_host(**dynamic, kueue_node_gpu_count=2, kueue_teams=mig_quota(2 * most + 1))
    )
    assert (found.severity, found.variable) == (pp.WARNING, "kueue_teams[0].quotas.mig.nvidia.com")
    assert f"the {2 * most} the fleet can ever publish" in found.message
    # the same host without dynamic MIG has no MIG devices: the error stands
    static = {**dynamic, "dra_driver_dynamic_mig": False}
    [found] = pk.kueue_problems(one_gpu_host(**static, kueue_teams=mig_quota(1)))
    assert "publish no device of mig.nvidia.com" in found.message


@pytest.mark.parametrize("gpu_model", [None, "NVIDIA Z9000"])
def test_a_dynamic_mig_host_of_unknown_model_warns_on_gpu_model(gpu_model: str | None) -> None:
    """Its MIG devices are unknown: no false error on mig.nvidia.com, one warning naming
    gpu_model; whole GPUs are still judged (1 fits the 8 GPUs)."""
    dynamic = {"site_kueue": True, "dra_driver_dynamic_mig": "true", "gpu_model": gpu_model}
    teams = [{"name": "a", "quotas": {"mig.nvidia.com": 3, "gpu.nvidia.com": 1}}]
    [found] = pk.kueue_problems(one_gpu_host(**dynamic, kueue_teams=teams))
    assert (found.rule, found.severity) == ("kueue-quota", pp.WARNING)
    assert (found.variable, found.value) == ("gpu_model", gpu_model)
    assert "gpu-1" in found.message and "not checked" in found.message
    assert "gpufleet mig models" in found.fix
    # no MIG class asked for: nothing to warn about
    assert pk.kueue_problems(one_gpu_host(**dynamic, kueue_teams=quota(1))) == []
