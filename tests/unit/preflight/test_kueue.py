"""The preflight rule of Kueue quotas over the inventory
(``plugins/module_utils/preflight/kueue.py``)."""

from __future__ import annotations

from typing import Any

import pytest
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
