"""The plan of moving a GPU pool between the device plugin and DRA
(``plugins/module_utils/migrate/plan.py``), on hand-made cluster objects."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.migrate import plan as mp

pytestmark = pytest.mark.unit

HOSTS = [mp.PoolHost(f"gpu-{x}", f"node-gpu-{x}", "device-plugin") for x in "abc"]


def node(name: str, gpus: Any = None) -> dict[str, Any]:
    status = {"allocatable": {"cpu": "8", "nvidia.com/gpu": str(gpus)}} if gpus is not None else {}
    return {"metadata": {"name": name}, "status": status}


def pod(name: str, node_name: str, gpus: int = 1, **extra: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    spec = {"nodeName": node_name, "containers": [{"name": "c", "resources": {"limits": limits}}]}
    spec.update(extra.pop("spec", {}))
    return {
        "metadata": {
            "name": name,
            "namespace": "train",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": spec,
        "status": {"phase": extra.pop("phase", "Running")},
    }


GPU_CLASS = {
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"extendedResourceName": "nvidia.com/gpu"},
}


def rslice(node_name: str) -> dict[str, Any]:
    return {
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node_name, "devices": [{"name": "gpu-0"}]}
    }


def plan(**kwargs: Any) -> mp.PoolMove:
    args: dict[str, Any] = {
        "pool": "gpu_h200",
        "to_path": "dra",
        "hosts": HOSTS,
        "nodes": [node(h.node, 8) for h in HOSTS],
        "pods": [],
        "slices": [],
        "device_classes": [GPU_CLASS],
    }
    args.update(kwargs)
    return mp.build_plan(**args)


def test_nodes_go_in_batches_fewest_gpu_pods_first() -> None:
    pods = [pod("p1", "node-gpu-a"), pod("p2", "node-gpu-a"), pod("p3", "node-gpu-c")]
    p = plan(pods=pods, batch_size=2)
    assert p.batches == [["node-gpu-b", "node-gpu-c"], ["node-gpu-a"]]
    doc = p.to_dict()
    assert (doc["from"], doc["to"], doc["blocked"], doc["evicted_pods"]) == (
        "device-plugin",
        "dra",
        False,
        3,
    )
    a = next(n for n in doc["nodes"] if n["node"] == "node-gpu-a")
    assert a["advertises"] == "device-plugin"
    assert a["pods"][0] == {
        "namespace": "train",
        "name": "p1",
        "owner": "ReplicaSet/rs",
        "requests": {"nvidia.com/gpu": 1},
        "claims": [],
    }
    assert doc["served_by"] == {"nvidia.com/gpu": "gpu.nvidia.com"}


def test_pods_without_gpus_or_done_are_not_evicted() -> None:
    pods = [
        pod("cpu", "node-gpu-a", gpus=0),
        pod("done", "node-gpu-a", phase="Succeeded"),
        pod("elsewhere", "node-cpu-a"),
    ]
    assert plan(pods=pods).to_dict()["evicted_pods"] == 0


def test_a_resource_no_deviceclass_names_blocks_with_the_pods() -> None:
    mig = pod("m", "node-gpu-b", gpus=0)
    mig["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.18gb": "2"}}
    p = plan(pods=[mig])
    assert p.served_by == {"nvidia.com/mig-1g.18gb": ""}
    [b] = p.blockers
    assert b.rule == "extended-resource-unmapped"
    assert "nvidia.com/mig-1g.18gb, which 1 pod(s) of pool gpu_h200 ask for (train/m)" in b.message
    assert "extendedResourceName: nvidia.com/mig-1g.18gb" in b.fix


def test_a_release_that_does_not_serve_extended_resources_blocks_only_with_askers() -> None:
    why = "DRAExtendedResource is off in 1.33"
    assert not plan(extended_resource_served=(False, why)).blocked
    p = plan(pods=[pod("p", "node-gpu-a")], extended_resource_served=(False, why))
    assert [b.rule for b in p.blockers] == ["extended-resource-not-served"]
    assert why in p.blockers[0].message


def test_moving_to_dra_without_the_driver_blocks() -> None:
    p = plan(device_classes=[])
    assert [b.rule for b in p.blockers] == ["no-dra-driver"]


def test_a_missing_node_and_a_dual_node_block_by_name() -> None:
    nodes = [node("node-gpu-a", 8), node("node-gpu-b", 8)]
    p = plan(nodes=nodes, slices=[rslice("node-gpu-b")])
    rules = {(b.rule, b.node) for b in p.blockers}
    assert rules == {("node-missing", "node-gpu-c"), ("node-dual", "node-gpu-b")}


def test_moving_back_is_blocked_by_pods_holding_claims() -> None:
    hosts = [mp.PoolHost("gpu-a", "node-gpu-a", "dra")]
    claimed = pod("c", "node-gpu-a", gpus=0, spec={"resourceClaims": [{"name": "gpu"}]})
    p = plan(hosts=hosts, to_path="device-plugin", nodes=[node("node-gpu-a")], pods=[claimed],
             slices=[rslice("node-gpu-a")])  # fmt: skip
    assert p.from_path == "dra"
    assert [b.rule for b in p.blockers] == ["claims-on-device-plugin"]
    assert "train/c" in p.blockers[0].message


def test_a_pool_already_there_says_so() -> None:
    hosts = [mp.PoolHost("gpu-a", "node-gpu-a", "dra")]
    p = plan(hosts=hosts, nodes=[node("node-gpu-a", 0)], slices=[rslice("node-gpu-a")])
    assert p.notes == ["pool gpu_h200 is on dra already and every node advertises it"]


@pytest.mark.parametrize(
    ("allocatable", "devices", "expected"),
    [
        ({"nvidia.com/gpu": "8"}, 0, "device-plugin"),
        ({"nvidia.com/gpu": "0", "cpu": "8"}, 4, "dra"),
        ({"nvidia.com/mig-1g.18gb": "2"}, 4, "both"),
        ({"nvidia.com/gpu": "abc"}, 0, "device-plugin"),  # not a count: fail closed
        ({}, 0, "none"),
        (None, 0, "none"),
    ],
)
def test_what_a_node_advertises(allocatable: Any, devices: int, expected: str) -> None:
    assert mp.advertises(allocatable, devices) == expected


@pytest.mark.parametrize(("field", "value"), [("to_path", "gpu"), ("hosts", []), ("batch_size", 0)])
def test_input_the_caller_should_have_refused_raises(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field if field != "hosts" else "no hosts"):
        plan(**{field: value})


def daemonset(selector: dict[str, str] | None = None, affinity_value: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeSelector": selector or {}}
    if affinity_value:
        term = {
            "matchExpressions": [
                {"key": "gpufleet.io/gpu-path", "operator": "In", "values": [affinity_value]}
            ]
        }
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    return {"spec": {"template": {"spec": spec}}}  # fmt: skip


def test_both_advertisers_must_follow_the_path_label() -> None:
    by_path = [
        daemonset(affinity_value="device-plugin"),
        daemonset({"nvidia.com/gpu.present": "true", "gpufleet.io/gpu-path": "dra"}),
    ]
    assert not plan(daemonsets=by_path).blocked
    # the DRA kubelet plugin of an inventory with no device-plugin pool selects GPU nodes
    # only: moving a pool to the device plugin could not stop it
    dra_only = [daemonset({"nvidia.com/gpu.present": "true"})]
    hosts = [mp.PoolHost("gpu-a", "node-gpu-a", "dra")]
    p = plan(hosts=hosts, to_path="device-plugin", nodes=[node("node-gpu-a")],
             slices=[rslice("node-gpu-a")], daemonsets=dra_only)  # fmt: skip
    assert [b.rule for b in p.blockers] == ["no-new-advertiser", "old-advertiser-not-by-path"]
    assert "gpufleet.io/gpu-path=device-plugin" in p.blockers[0].message
    assert "role device_plugin" in p.blockers[0].fix
