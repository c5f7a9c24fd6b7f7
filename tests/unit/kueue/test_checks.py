"""Kueue quotas checked against the GPUs and MIG devices the fleet publishes
(``plugins/module_utils/kueue/checks.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import checks as kc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr

from tests.unit.dynamic_mig_slices import B200_NODE, slices

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


def test_dynamic_mig_gpus_count_the_devices_allocatable_at_once() -> None:
    """The simulator's H200 and B200 publish 26 devices each on one CounterSet; per GPU
    that is 1 whole GPU, per profile its most at once, and as mig.nvidia.com the largest
    of those (a 1g profile's 7), not the 25 MIG placements."""
    sets = cc.counter_sets(slices(), [])
    at_once = {set_id: cc.profiles_at_once(cs) for set_id, cs in sets.items()}
    devices = fr.devices_of(slices(), [], {}, sets=sets)
    assert len([d for d in devices if d.kind == "mig"]) == 50
    classes = {"mig-1g.18gb.gpufleet.io": "1g.18gb", "mig-1g.45gb.gpufleet.io": "1g.45gb"}
    counts = kc.published_counts(devices, classes, at_once)
    largest = sum(max(n for p, n in per.items() if p != "gpu") for per in at_once.values())
    assert counts == {
        "gpu.nvidia.com": len(sets),
        "mig.nvidia.com": largest,
        "mig-1g.18gb.gpufleet.io": mprof.model("NVIDIA H200").profile("1g.18gb").max_instances,
        "mig-1g.45gb.gpufleet.io": at_once[f"gpu.nvidia.com/{B200_NODE}/gpu-0-counter-set"][
            "1g.45gb"
        ],
    }
    assert (counts["gpu.nvidia.com"], counts["mig.nvidia.com"]) == (2, 14)
    # a device without counters counts once beside them; a CounterSet its pool does not
    # publish (absent from at_once) counts nothing
    static = fr.Device("gpu.nvidia.com/n/gpu-1", "n", "p", "NVIDIA H200", "1g.18gb", 0, kind="mig")
    counts = kc.published_counts([*devices, static], classes, {})
    assert counts == {
        "gpu.nvidia.com": 0,
        "mig.nvidia.com": 1,
        "mig-1g.18gb.gpufleet.io": 1,
        "mig-1g.45gb.gpufleet.io": 0,
    }


def test_a_dynamic_mig_host_counts_each_gpu_whole_and_per_profile_at_once() -> None:
    h200 = {p.name: p.max_instances for p in mprof.model("NVIDIA H200").profiles}
    host = kc.host_devices(2, {0: {"3g.71gb": 2}}, h200)  # a layout is not read there
    assert (host.whole, host.mig, host.mig_unknown) == (2, 2 * max(h200.values()), 0)
    assert host.profiles == {p: 2 * n for p, n in h200.items()}
    fleet = kc.fleet_devices([host, kc.host_devices(1, {0: {"1g.18gb": 7}})])
    assert (fleet.whole, fleet.mig, fleet.hosts) == (2, 2 * 7 + 7, 2)
    assert fleet.profiles["1g.18gb"] == 2 * 7 + 7 and fleet.profiles["3g.71gb"] == 2 * 2
    profile_classes = {"mig-3g.71gb.gpufleet.io": "3g.71gb"}
    assert fleet.count("mig-3g.71gb.gpufleet.io", profile_classes) == 4
    teams = kq.parse_teams(
        [{"name": "a", "quotas": {"mig.nvidia.com": 21, "mig-3g.71gb.gpufleet.io": 4}}]
    )
    assert kc.check_quotas(teams, fleet, ["gpu.nvidia.com", "mig.nvidia.com"], ["3g.71gb"]) == []


def test_a_dynamic_mig_host_of_unknown_model_leaves_mig_classes_unjudged() -> None:
    fleet = kc.fleet_devices([kc.host_devices(4, {}, {})])
    assert (fleet.whole, fleet.mig, fleet.mig_unknown) == (4, 0, 4)
    teams = kq.parse_teams([{"name": "a", "quotas": {"mig.nvidia.com": 9, "gpu.nvidia.com": 5}}])
    found = kc.check_quotas(teams, fleet, ["gpu.nvidia.com", "mig.nvidia.com"], ["1g.18gb"])
    assert [(f[0], f[1]) for f in found] == [("warning", "kueue_teams[0].quotas.gpu.nvidia.com")]
