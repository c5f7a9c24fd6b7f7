"""The kueue area of the validation report (plugins/module_utils/validate/kueue.py and the
validate functions of kueue/checks.py), and the preflight Kueue rule
(plugins/module_utils/preflight/kueue.py through preflight.check_inventory).

Kueue objects are shaped as Kueue v0.17.0 writes them (apis/kueue/v1beta2; condition
types QuotaReserved and Admitted, its "couldn't assign flavors" message)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import checks as kc
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    rules as preflight,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.report.fleet import Device
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import kueue as vq

from tests.unit.dynamic_mig_slices import H200_NODE, slices

pytestmark = pytest.mark.unit

OPTIONS = {"namespace": "kueue-system", "version": "0.17.0", "profiles": ["1g.18gb"]}
QUOTA_MSG = (
    "couldn't assign flavors to pod set main: insufficient unused quota for mig.nvidia.com "
    "in flavor gpu, 1 more needed"
)


def _dev(kind: str, profile: str, n: int) -> Device:
    return Device(
        id=f"gpu.nvidia.com/p/{kind}-{n}",
        node="gpu-1",
        pool="p",
        model="NVIDIA H200",
        profile=profile,
        memory=0,
        claim=None,
        kind=kind,
    )


def _cq(name: str, nominal: int) -> dict:
    res = [{"name": "mig.nvidia.com", "nominalQuota": nominal}]
    return {
        "metadata": {"name": name},
        "spec": {"resourceGroups": [{"flavors": [{"name": "gpu", "resources": res}]}]},
    }


def _wl(name: str, conditions: list[dict], job: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "team-a"}
    if job:
        meta["ownerReferences"] = [{"kind": "Job", "name": job}]
    return {"metadata": meta, "status": {"conditions": conditions}}


def _listing(**over) -> kc.KueueListing:
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "resources": {
            "deviceClassMappings": [
                {"name": c, "deviceClassNames": [c]}
                for c in ("gpu.nvidia.com", "mig.nvidia.com", "mig-1g.18gb.gpufleet.io")
            ]
        },
    }
    base = dict(
        deployment={"spec": {"replicas": 1}, "status": {"readyReplicas": 1}},
        config=kc.parse_config(json.dumps(config)),
        device_classes=["gpu.nvidia.com", "mig.nvidia.com", "mig-1g.18gb.gpufleet.io"],
        devices=[_dev("mig", "1g.18gb", i) for i in range(7)] + [_dev("gpu", "gpu", 9)],
        cluster_queues=[_cq("team-a", 3), _cq("team-b", 3)],
        local_queues=[
            {
                "metadata": {"name": "team-a", "namespace": "team-a"},
                "spec": {"clusterQueue": "team-a"},
            }
        ],
        workloads=[],
        pods=[],
    )
    base.update(over)
    return kc.KueueListing(**base)


def _by_id(checks) -> dict:
    return {c.id: c for c in checks}


def test_a_sound_set_up_passes_every_check() -> None:
    checks = _by_id(vq.kueue_checks(_listing(), OPTIONS))
    assert {k: c.status for k, c in checks.items()} == {
        "kueue.controller": "pass",
        "kueue.mappings": "pass",
        "kueue.local-queues": "pass",
        "kueue.quota-vs-devices": "pass",
        "kueue.pending": "pass",
    }
    assert checks["kueue.quota-vs-devices"].data["published"]["mig.nvidia.com"] == 7


def test_controller_not_ready_and_unmapped_class_fail() -> None:
    config = {
        "resources": {
            "deviceClassMappings": [{"name": "x", "deviceClassNames": ["gone.example.com"]}]
        }
    }
    checks = _by_id(
        vq.kueue_checks(
            _listing(deployment={"spec": {"replicas": 1}, "status": {}}, config=config), OPTIONS
        )
    )
    assert checks["kueue.controller"].status == "fail"
    assert "0 of 1 replicas" in checks["kueue.controller"].summary
    msgs = [p.message for p in checks["kueue.mappings"].problems]
    assert "resource x maps DeviceClass gone.example.com, which does not exist" in msgs
    assert any(m.startswith("DeviceClass mig.nvidia.com is published but not mapped") for m in msgs)


def test_local_queue_without_its_cluster_queue_fails() -> None:
    lq = {"metadata": {"name": "q", "namespace": "ml"}, "spec": {"clusterQueue": "nope"}}
    check = _by_id(vq.kueue_checks(_listing(local_queues=[lq]), OPTIONS))["kueue.local-queues"]
    assert check.status == "fail"
    assert check.problems[0].subject == "ml/q"


def test_quotas_above_the_published_devices_warn() -> None:
    check = _by_id(
        vq.kueue_checks(_listing(cluster_queues=[_cq("team-a", 5), _cq("team-b", 4)]), OPTIONS)
    )["kueue.quota-vs-devices"]
    assert check.status == "warn"
    assert "add up to 9 (team-a 5, team-b 4), the cluster publishes 7" in check.problems[0].message


def test_quotas_on_a_dynamic_mig_gpu_are_judged_against_its_devices_at_once() -> None:
    """One H200 with dynamic MIG publishes 25 MIG placements on one CounterSet; at most
    7 (its 1g.18gb max_instances) are allocatable together: a quota of 8 warns, 7 fits."""
    devices, at_once = vq.published_devices(slices(H200_NODE))
    most = mprof.model("NVIDIA H200").profile("1g.18gb").max_instances
    assert len([d for d in devices if d.kind == "mig"]) == 25 and most == 7

    def quota_check(nominal: int):
        listing = _listing(devices=devices, at_once=at_once, cluster_queues=[_cq("a", nominal)])
        return _by_id(vq.kueue_checks(listing, OPTIONS))["kueue.quota-vs-devices"]

    over = quota_check(most + 1)
    assert over.status == "warn"
    assert over.data["published"] == {
        "gpu.nvidia.com": 1,
        "mig.nvidia.com": most,
        "mig-1g.18gb.gpufleet.io": most,
    }
    assert f"add up to {most + 1} (a {most + 1}), the cluster publishes {most} at once" in (
        over.problems[0].message
    )
    assert "allocatable at once" in over.evidence[0].detail
    assert quota_check(most).status == "pass"


def test_pending_on_quota_is_not_a_fault_pending_on_devices_is() -> None:
    waiting = _wl(
        "job-a3",
        [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": QUOTA_MSG}],
    )
    admitted = _wl(
        "job-a1",
        [{"type": "Admitted", "status": "True"}, {"type": "QuotaReserved", "status": "True"}],
        "a1",
    )
    pod = {
        "metadata": {"namespace": "team-a", "labels": {"batch.kubernetes.io/job-name": "a1"}},
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 2 cannot allocate all claims.",
                }
            ]
        },
    }
    on_quota, inadmissible, on_devices = kc.pending_workloads([waiting, admitted], [pod])
    assert on_quota == [("team-a/job-a3", QUOTA_MSG)]
    assert inadmissible == []
    assert on_devices == [
        ("team-a/job-a1", "0/3 nodes are available: 2 cannot allocate all claims.")
    ]
    check = _by_id(vq.kueue_checks(_listing(workloads=[waiting], pods=[]), OPTIONS))[
        "kueue.pending"
    ]
    assert check.status == "pass" and check.data["pending_on_quota"] == ["team-a/job-a3"]
    check = _by_id(vq.kueue_checks(_listing(workloads=[admitted], pods=[pod]), OPTIONS))[
        "kueue.pending"
    ]
    assert check.status == "fail"
    assert check.data["pending_on_devices"] == ["team-a/job-a1"]


def test_unmapped_device_class_makes_a_workload_inadmissible() -> None:
    msg = "DeviceClass vfio.gpu.nvidia.com is not mapped in DRA configuration for podset main"
    wl = _wl(
        "w",
        [{"type": "QuotaReserved", "status": "False", "reason": "Inadmissible", "message": msg}],
    )
    _, inadmissible, _ = kc.pending_workloads([wl], [])
    assert inadmissible == [("team-a/w", msg)]


# ------------------------------------------------------------------ preflight


def _hosts(**kueue) -> dict:
    cp = {"groups": ["kube_control_plane"], "variables": {"site_kueue": True, **kueue}}
    gpu = {
        "groups": ["gpu_nodes"],
        "variables": {"mig_layout": {"1g.18gb": 7}, "kueue_node_gpu_count": 1},
    }
    whole = {"groups": ["gpu_nodes"], "variables": {"kueue_node_gpu_count": 2}}
    return {"cp-1": cp, "gpu-1": gpu, "gpu-2": whole}


def test_preflight_refuses_a_profile_the_layouts_never_carve() -> None:
    teams = [{"name": "a", "quotas": {"mig-2g.35gb.gpufleet.io": 1}}]
    problems = preflight.check_inventory(
        _hosts(kueue_teams=teams, kueue_profile_classes=["2g.35gb"])
    )
    kueue = [p for p in problems if p.rule == "kueue-quota"]
    assert {(p.severity, p.variable) for p in kueue} == {
        ("error", "kueue_profile_classes[0]"),
        ("error", "kueue_teams[0].quotas.mig-2g.35gb.gpufleet.io"),
    }


def test_preflight_warns_on_a_quota_above_the_fleet_naming_team_and_resource() -> None:
    teams = [{"name": "team-a", "quotas": {"mig.nvidia.com": 8, "gpu.nvidia.com": 2}}]
    problems = preflight.check_inventory(_hosts(kueue_teams=teams))
    (warn,) = [p for p in problems if p.rule == "kueue-quota"]
    assert warn.severity == "warning"
    assert warn.variable == "kueue_teams[0].quotas.mig.nvidia.com"
    assert "team team-a: nominal quota 8 of mig.nvidia.com is more than the 7" in warn.message


def test_preflight_names_bad_team_input() -> None:
    problems = preflight.check_inventory(_hosts(kueue_teams=[{"name": "A", "quotas": {"x": 1}}]))
    (bad,) = [p for p in problems if p.rule == "kueue-input"]
    assert bad.variable == "kueue_teams[0].name" and bad.severity == "error"


def test_preflight_ignores_kueue_when_the_switch_is_off() -> None:
    hosts = _hosts(kueue_teams=[{"name": "A", "quotas": {"x": 1}}])
    hosts["cp-1"]["variables"]["site_kueue"] = False
    assert not [p for p in preflight.check_inventory(hosts) if p.rule.startswith("kueue")]
