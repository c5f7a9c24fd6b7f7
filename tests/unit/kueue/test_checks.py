"""Kueue quotas checked against the GPUs and MIG devices the fleet publishes
(``plugins/module_utils/kueue/checks.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import checks as kc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq

pytestmark = pytest.mark.unit


def _fleet() -> kc.FleetDevices:
    # two H200 nodes of one GPU: one carved 1g.18gb x7, one 3g.71gb + 2g.35gb x2
    return kc.fleet_devices(
        [
            kc.host_devices(1, {0: {"1g.18gb": 7}}),
            kc.host_devices(1, {0: {"3g.71gb": 1, "2g.35gb": 2}}),
            kc.host_devices(2, {}),
        ]
    )


def test_fleet_counts_whole_gpus_and_mig_devices() -> None:
    fleet = _fleet()
    assert (fleet.whole, fleet.mig, fleet.hosts) == (2, 10, 3)
    assert fleet.profiles["2g.35gb"] == 2


def test_quota_on_a_class_or_profile_never_published_is_an_error() -> None:
    teams = kq.parse_teams(
        [
            {"name": "a", "quotas": {"mig.nvidia.co": 2, "cpu": 8}},
            {"name": "b", "quotas": {"mig-4g.71gb.gpufleet.io": 1}},
        ]
    )
    found = kc.check_quotas(teams, _fleet(), ["gpu.nvidia.com", "mig.nvidia.com"], ["4g.71gb"])
    errors = {(f[1], f[0]) for f in found}
    assert ("kueue_profile_classes[0]", "error") in errors
    assert ("kueue_teams[0].quotas.mig.nvidia.co", "error") in errors
    assert ("kueue_teams[1].quotas.mig-4g.71gb.gpufleet.io", "error") in errors
    assert not any("cpu" in f[1] for f in found)
    bad_class = next(f for f in found if f[1] == "kueue_teams[0].quotas.mig.nvidia.co")
    assert "team a" in bad_class[3]


def test_whole_gpu_quota_on_an_all_mig_fleet_is_an_error() -> None:
    fleet = kc.fleet_devices([kc.host_devices(1, {0: {"1g.18gb": 7}})])
    teams = kq.parse_teams([{"name": "a", "quotas": {"gpu.nvidia.com": 1}}])
    (found,) = kc.check_quotas(teams, fleet, ["gpu.nvidia.com", "mig.nvidia.com"], [])
    assert found[0] == "error" and "publish no device of gpu.nvidia.com" in found[3]


def test_quota_above_the_fleet_warns_naming_team_and_resource() -> None:
    teams = kq.parse_teams(
        [
            {"name": "a", "quotas": {"mig.nvidia.com": 11}},
            {"name": "b", "quotas": {"mig.nvidia.com": 4, "mig-1g.18gb.gpufleet.io": 7}},
        ]
    )
    found = kc.check_quotas(teams, _fleet(), ["gpu.nvidia.com", "mig.nvidia.com"], ["1g.18gb"])
    assert [f[0] for f in found] == ["warning", "warning"]
    assert "team a: nominal quota 11 of mig.nvidia.com is more than the 10" in found[0][3]
    assert found[1][2] == {"a": 11, "b": 4}
    assert "add up to 15" in found[1][3]
