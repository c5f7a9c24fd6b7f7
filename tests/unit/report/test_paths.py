"""GPU use per path and per pool (``plugins/module_utils/report/paths.py``, through
``report.fleet.build_report``) on a small fleet in the middle of a move from NVIDIA's
device plugin to DRA, every figure computed by hand below:

- pool NVIDIA-H100 on the device plugin: ``dp-1`` and ``dp-2``, 8 ``nvidia.com/gpu`` each;
- pool NVIDIA-A100 on the device plugin with the mixed MIG strategy: ``mig-1``, 1
  ``nvidia.com/gpu`` and 7 ``nvidia.com/mig-1g.10gb``;
- pool NVIDIA-H200 on DRA: ``dra-1`` publishes 2 whole GPUs and 2 ``1g.18gb``; ``both-1``
  publishes 1 GPU and still lists ``nvidia.com/gpu: 1`` (its device plugin not removed);
- ``cpu-1``: no GPU, no pool label."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import paths as rp

from tests.unit.report.test_fleet import POOL_LABEL, claim, device, rslice

pytestmark = pytest.mark.unit

H100, A100, H200 = "NVIDIA-H100", "NVIDIA-A100", "NVIDIA-H200"


def node(name: str, pool: str | None, allocatable: dict[str, Any] | None = None) -> dict:
    labels = {POOL_LABEL: pool} if pool else {}
    res = {"cpu": "63", "memory": "2113424940Ki", **(allocatable or {})}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": dict(res), "allocatable": res},
    }


def container(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources = {}
    if requests is not None:
        resources["requests"] = {"cpu": "1", **requests}
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def pod(
    name: str,
    node_name: str | None,
    containers: list[dict[str, Any]],
    phase: str = "Running",
    init: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if node_name:
        spec["nodeName"] = node_name
    if init:
        spec["initContainers"] = init
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": phase},
    }


GPU, MIG10 = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
NODES = [
    node("dp-1", H100, {GPU: "8"}),
    node("dp-2", H100, {GPU: 8}),
    node("mig-1", A100, {GPU: "1", MIG10: "7"}),
    node("dra-1", H200),
    node("both-1", H200, {GPU: "1"}),
    node("cpu-1", None),
]
PODS = [
    pod("p1", "dp-1", [container({GPU: "4"})]),  # 4
    pod("p2", "dp-1", [container(limits={GPU: "2"})]),  # the limit stands for the request: 2
    pod("p3", "dp-2", [container({GPU: "8"})], phase="Succeeded"),  # done: 0
    pod("p4", "dp-2", [container({GPU: 1}), container({GPU: "1"})], phase="Pending"),  # bound: 2
    pod("p5", "dp-2", [container({GPU: "1"})], init=[container({GPU: "3"})]),  # max(1, 3) = 3
    pod(  # a sidecar runs beside the container: 1 + 1 = 2
        "p6", "dp-2", [container({GPU: "1"})], init=[container({GPU: "1"}, restartPolicy="Always")]
    ),
    pod("p7", "mig-1", [container({MIG10: "2"})]),  # 2 MIG slices
    pod("p8", None, [container({GPU: "1"})]),  # not scheduled: 0
    pod("p9", "dra-1", [container({GPU: "1"})]),  # a DRA node: its claim counts, not this
    pod("p10", "both-1", [container({GPU: "1"})]),  # 1 on both-1's device plugin side
]
SLICES = [
    rslice(
        "dra-1",
        [
            device("gpu-0", "NVIDIA H200", "140Gi"),
            device("gpu-1", "NVIDIA H200", "140Gi"),
            device("mig-0", "NVIDIA H200", "18Gi", "1g.18gb"),
            device("mig-1", "NVIDIA H200", "18Gi", "1g.18gb"),
        ],
    ),
    rslice("both-1", [device("gpu-0", "NVIDIA H200", "140Gi")]),
]
CLAIMS = [
    claim("whole", allocated=[("dra-1", "gpu-0")], reserved=["p9"]),
    claim("slice", "mig.nvidia.com", allocated=[("dra-1", "mig-0")]),
]


@pytest.fixture(scope="module")
def paths() -> dict[str, Any]:
    return fr.build_report(SLICES, CLAIMS, PODS, NODES)["paths"]


def test_cluster_figures_per_path(paths: dict[str, Any]) -> None:
    dp, dra = paths["cluster"]
    # capacity: 8 + 8 + 1 + 1 whole GPUs and 7 MIG slices; allocated: dp-1 4+2, dp-2 2+3+2,
    # both-1 1, mig-1 2 slices
    assert dp == {
        "path": "device-plugin",
        "nodes": 4,
        "devices": 25,
        "allocated": 16,
        "free": 9,
        "utilization": 0.64,
        "profiles": {
            "1g.10gb": {"devices": 7, "allocated": 2},
            "gpu": {"devices": 18, "allocated": 14},
        },
    }
    # 4 devices on dra-1 and 1 on both-1; gpu-0 and mig-0 of dra-1 allocated
    assert dra == {
        "path": "dra",
        "nodes": 2,
        "devices": 5,
        "allocated": 2,
        "free": 3,
        "utilization": 0.4,
        "profiles": {
            "1g.18gb": {"devices": 2, "allocated": 1},
            "gpu": {"devices": 3, "allocated": 1},
        },
    }


def test_pool_figures_per_path(paths: dict[str, Any]) -> None:
    rows = {(r["pool"], r["path"]): r for r in paths["pools"]}
    assert list(rows) == [
        (A100, "device-plugin"),
        (H100, "device-plugin"),
        (H200, "device-plugin"),
        (H200, "dra"),
    ]
    a100 = rows[(A100, "device-plugin")]
    assert (a100["nodes"], a100["devices"], a100["allocated"], a100["utilization"]) == (
        1,
        8,
        2,
        0.25,
    )
    assert a100["profiles"] == {
        "1g.10gb": {"devices": 7, "allocated": 2},
        "gpu": {"devices": 1, "allocated": 0},
    }
    h100 = rows[(H100, "device-plugin")]
    assert (h100["nodes"], h100["devices"], h100["allocated"], h100["free"]) == (2, 16, 13, 3)
    assert h100["utilization"] == 0.8125  # 13 / 16
    assert rows[(H200, "device-plugin")]["utilization"] == 1.0  # both-1: 1 of 1
    h200 = rows[(H200, "dra")]
    assert (h200["nodes"], h200["devices"], h200["allocated"], h200["utilization"]) == (
        2,
        5,
        2,
        0.4,
    )


def test_nodes_per_advertised_path_and_the_ones_on_both(paths: dict[str, Any]) -> None:
    assert paths["nodes"] == {"device-plugin": 3, "dra": 1, "both": 1, "none": 1}
    assert paths["nodes_both"] == ["both-1"]


def test_the_dra_figures_are_the_reports_devices() -> None:
    report = fr.build_report(SLICES, CLAIMS, PODS, NODES)
    dra = report["paths"]["cluster"][1]
    c = report["cluster"]
    assert (dra["devices"], dra["allocated"]) == (c["devices_published"], c["devices_allocated"])


def test_a_cluster_without_gpus_reports_both_paths_empty() -> None:
    paths = fr.build_report([], [], [], [node("cpu-1", None)])["paths"]
    assert [(r["path"], r["devices"], r["utilization"]) for r in paths["cluster"]] == [
        ("device-plugin", 0, None),
        ("dra", 0, None),
    ]
    assert paths["pools"] == [] and paths["nodes"]["none"] == 1


def test_without_a_pool_label_every_node_is_in_one_pool() -> None:
    paths = fr.build_report(SLICES, CLAIMS, PODS, NODES, pool_label="")["paths"]
    assert [(r["pool"], r["path"], r["devices"], r["allocated"]) for r in paths["pools"]] == [
        ("(none)", "device-plugin", 25, 16),
        ("(none)", "dra", 5, 2),
    ]


def test_allocations_above_a_shrunk_allocatable_show_above_one() -> None:
    # a GPU of dp-1 turned unhealthy: allocatable 5, the pods holding 6 keep running
    nodes = [node("dp-1", H100, {GPU: "5"})]
    paths = fr.build_report([], [], PODS[:2], nodes)["paths"]
    assert paths["cluster"][0]["utilization"] == 1.2
    assert paths["cluster"][0]["free"] == 0


# ------------------------------------------------------------------ the rules


def test_a_pod_requests_the_larger_of_its_containers_and_each_init_step() -> None:
    # containers 1; init: sidecar 1, then a plain init container 4 (runs beside the first
    # sidecar: 5), then a sidecar 2. Running: 1 + 1 + 2 = 4; largest init step 5.
    p = pod(
        "x",
        "dp-1",
        [container({GPU: "1"})],
        init=[
            container({GPU: "1"}, restartPolicy="Always"),
            container({GPU: "4"}),
            container({GPU: "2"}, restartPolicy="Always"),
        ],
    )
    assert rp.pod_requests(p) == {GPU: 5}


@pytest.mark.parametrize(
    ("resources", "want"),
    [
        (container({GPU: "2"}, limits={GPU: "3"}), {GPU: 2}),  # the request wins
        (container(limits={GPU: "3", MIG10: 1}), {GPU: 3, MIG10: 1}),
        (container({GPU: "500m"}), {}),  # not a whole count
        (container({GPU: "abc", "example.com/fpga": "1"}), {}),  # not a GPU of the plugin
        (container({GPU: "1k"}), {GPU: 1000}),
        ({"name": "c", "resources": "big"}, {}),
        ({"name": "c"}, {}),
    ],
)
def test_a_container_requests_its_gpu_resources(resources: dict, want: dict) -> None:
    assert rp.pod_requests(pod("x", "n", [resources])) == want


@pytest.mark.parametrize(
    ("quantity", "count"),
    [("8", 8), (8, 8), ("1k", 1000), ("0", 0), ("500m", 0), ("-1", 0), ("x", 0), (True, 0)],
)
def test_device_plugin_capacity_counts_whole_quantities_above_zero(
    quantity: Any, count: int
) -> None:
    got = rp.device_plugin_capacity(node("n", None, {GPU: quantity}))
    assert got == ({GPU: count} if count else {})


def test_capacity_comes_from_allocatable_only() -> None:
    n = node("n", None)
    n["status"]["capacity"][GPU] = "8"  # listed in capacity, not (yet) in allocatable
    assert rp.device_plugin_capacity(n) == {}
    assert rp.device_plugin_capacity({"metadata": {"name": "n"}}) == {}


def test_the_device_plugins_profiles_are_the_reports() -> None:
    assert rp.profile_of(GPU, fr.WHOLE_GPU) == "gpu"
    assert rp.profile_of("nvidia.com/mig-3g.71gb", fr.WHOLE_GPU) == "3g.71gb"


def test_a_pod_whose_containers_are_not_a_list_is_skipped_and_counted() -> None:
    odd = pod("odd", "dp-1", [container({GPU: "8"})])
    odd["spec"]["containers"] = {"name": "c"}
    report = fr.build_report([], [], [*PODS[:2], odd], [NODES[0]])
    assert report["cluster"]["objects_skipped"] == {"pods": 1}
    assert report["paths"]["cluster"][0]["allocated"] == 6


def test_a_blocked_placement_of_a_dynamic_gpu_is_no_dra_capacity() -> None:
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, device_names, slices

    held = [n for n in device_names(H200_NODE) if n.startswith("gpu-0-mig-1g18gb-19-")]
    claims = [allocated_claim(f"c{i}", H200_NODE, n) for i, n in enumerate(held)]
    report = fr.build_report(slices(H200_NODE), claims, [], [node(H200_NODE, H200)])
    c, dra = report["cluster"], report["paths"]["cluster"][1]
    assert c["devices_blocked"] > 0
    # capacity: the devices allocated or free; blocked profiles are not listed at all
    assert (dra["devices"], dra["allocated"], dra["free"]) == (
        c["devices_allocated"] + c["devices_free"],
        c["devices_allocated"],
        c["devices_free"],
    )
    assert dra["utilization"] == 1.0 and dra["free"] == 0
    assert dra["profiles"] == {"1g.18gb": {"devices": len(held), "allocated": len(held)}}
