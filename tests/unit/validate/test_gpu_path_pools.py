"""GPU paths by pool in a listed cluster (``plugins/module_utils/validate/gpu_paths.py``,
``nodes.py``): the path each GPU node's pool declares in the inventory
(``declared_paths``), the DRA checks leaving the device-plugin pools out, the device
plugin's own check (``nodes.device-plugin-gpus``) and the path report per pool
(``nodes.gpu-paths``), in the JSON and text reports; a pool ``gpufleet migrate`` moved
before the inventory was (``Settings.gpu_path_moves``, module option ``gpu_path_moves``).

The fleet: pool ``gpu_h100`` on the device plugin (group ``gpu_path_device_plugin``), pool
``gpu_h200`` on DRA (group ``gpu_path_dra``), both inside the node group ``gpus``; a CPU
node in ``kube_node`` with them."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import gpu_paths as vgp
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import nodes as vno
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import run as vrun

from tests.unit.validate.listed_cluster import LABELS, PLUGIN, apiserver_pod, by_id
from tests.unit.validate_objects import GPU_CLASS, MIG_CLASS, gpu_device, node, pod, resource_slice

pytestmark = pytest.mark.unit

H100 = ["h100-1", "h100-2"]
H200 = ["h200-1", "h200-2"]
GROUPS = {
    "gpus": [*H100, *H200],
    "gpu_h100": list(H100),
    "gpu_h200": list(H200),
    "gpu_path_device_plugin": list(H100),
    "gpu_path_dra": list(H200),
    "kube_node": ["cpu-1", *H100, *H200],
}


def plugin_node(name: str, resources: dict[str, Any] | None = None) -> dict[str, Any]:
    """A GPU node where NVIDIA's device plugin registered its resources (the kubelet lists
    them in capacity and allocatable)."""
    n = node(name, LABELS)
    res = {"nvidia.com/gpu": "8"} if resources is None else resources
    n["status"]["capacity"] = {"cpu": "64", **res}
    n["status"]["allocatable"] = {"cpu": "63", **res}
    return n


def fleet() -> tuple[vli.Listing, vli.Settings]:
    listing = vli.Listing(
        version={"gitVersion": "v1.37.2"},
        resource_group={"versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]},
        resource_version="v1",
        nodes=[
            node("cp"),
            node("cpu-1"),
            *(plugin_node(n) for n in H100),
            *(node(n, LABELS) for n in H200),
        ],
        pods=[
            apiserver_pod("cp", "1.37.2"),
            *(pod(f"plugin-{n}", "dra", node_name=n, labels=PLUGIN) for n in H200),
        ],
        slices=[resource_slice(n, [gpu_device(0, f"GPU-{n}")]) for n in H200],
        classes=[GPU_CLASS, MIG_CLASS],
    )
    settings = vli.Settings(
        driver=ddc.NVIDIA_DRIVER,
        device_classes=[*ddc.GPU_DEVICE_CLASSES],
        gpu_nodes=[*H100, *H200],
        node_groups={k: list(v) for k, v in GROUPS.items()},
        now=1767225600.0,
    )
    return listing, settings


def checks(listing: vli.Listing, settings: vli.Settings) -> dict[str, vr.Check]:
    return by_id(vc.all_checks(listing, settings))


# ------------------------------------------------------------------ declared paths


def test_each_node_takes_the_path_of_its_group_and_its_innermost_node_group() -> None:
    _, settings = fleet()
    got = {n: (d.pool, d.path) for n, d in vgp.declared_paths(settings).items()}
    assert got == {
        "h100-1": ("gpu_h100", "device-plugin"),
        "h100-2": ("gpu_h100", "device-plugin"),
        "h200-1": ("gpu_h200", "dra"),
        "h200-2": ("gpu_h200", "dra"),
    }


def test_a_node_in_no_path_group_is_on_dra_and_one_in_no_node_group_has_none() -> None:
    _, settings = fleet()
    settings.node_groups = {"gpu_path_device_plugin": ["h100-1"], "kube_node": ["cpu-1", *H100]}
    got = vgp.declared_paths(settings)
    assert (got["h100-1"].pool, got["h100-1"].path) == (vgp.NO_NODE_GROUP, "device-plugin")
    assert (got["h200-1"].pool, got["h200-1"].path) == (vgp.NO_NODE_GROUP, "dra")
    assert got["h200-1"].source() == "in no gpu_path_* group, the default"


def test_node_groups_that_do_not_nest_make_one_pool_together() -> None:
    _, settings = fleet()
    settings.node_groups = {**GROUPS, "rack_7": ["h100-2", "h200-1"]}
    got = vgp.declared_paths(settings)
    assert got["h100-1"].pool == "gpu_h100"
    assert got["h100-2"].pool == "gpu_h100+rack_7"
    assert got["h200-1"].pool == "gpu_h200+rack_7"


def test_a_node_in_both_path_groups_declares_both() -> None:
    _, settings = fleet()
    settings.node_groups = {**GROUPS, "gpu_path_dra": [*H200, "h100-1"]}
    d = vgp.declared_paths(settings)["h100-1"]
    assert d.path == "both"
    assert d.groups() == "gpu_path_device_plugin and gpu_path_dra"


def test_the_module_options_reach_the_settings() -> None:
    settings = vrun.settings_from(
        {"gpu_nodes": ["a"], "node_groups": {"gpu_path_device_plugin": ["a"], "odd": "a"}}, []
    )
    assert settings.node_groups == {"gpu_path_device_plugin": ["a"]}
    assert vgp.declared_paths(settings)["a"].path == "device-plugin"
    assert vrun.settings_from({}, []).node_groups == {}


# ------------------------------------------------------------------ the DRA checks


def test_a_mixed_fleet_passes_with_the_device_plugin_pool_left_out_of_the_dra_checks() -> None:
    listing, settings = fleet()
    c = checks(listing, settings)
    failed = {k: [p.message for p in v.problems] for k, v in c.items() if v.status == "fail"}
    assert failed == {}
    assert c["nodes.plugin-running"].summary == (
        "plugin pod Running on all 2 GPU node(s) (2 of device-plugin pools left out)"
    )
    assert c["nodes.resourceslices"].summary.endswith("(2 of device-plugin pools left out)")
    left = [e.detail for e in c["nodes.plugin-running"].evidence if "left out" in e.detail]
    assert left == [
        "left out: 2 GPU node(s) of device-plugin pools (h100-1, h100-2); "
        "nodes.device-plugin-gpus judges them"
    ]


def test_without_node_groups_the_device_plugin_nodes_fail_the_dra_checks() -> None:
    listing, settings = fleet()
    settings.node_groups = {}
    c = checks(listing, settings)
    assert [p.subject for p in c["nodes.plugin-running"].problems] == H100
    assert [p.subject for p in c["nodes.resourceslices"].problems] == H100
    assert c["nodes.device-plugin-gpus"].status == "skip"


def test_a_dra_node_of_the_fleet_still_fails_the_dra_checks() -> None:
    listing, settings = fleet()
    listing.pods = [p for p in listing.pods if p["metadata"]["name"] != "plugin-h200-2"]
    listing.slices = [s for s in listing.slices if s["spec"]["nodeName"] != "h200-2"]
    c = by_id(vno.nodes_checks(listing, settings))
    assert [p.subject for p in c["nodes.plugin-running"].problems] == ["h200-2"]
    assert [p.subject for p in c["nodes.resourceslices"].problems] == ["h200-2"]


def test_a_node_declared_on_both_paths_is_still_judged_by_the_dra_checks() -> None:
    listing, settings = fleet()
    settings.node_groups = {**GROUPS, "gpu_path_dra": [*H200, "h100-1"]}
    c = by_id(vno.nodes_checks(listing, settings))
    assert [p.subject for p in c["nodes.plugin-running"].problems] == ["h100-1"]


def test_a_fleet_all_on_the_device_plugin_skips_the_dra_checks_saying_why() -> None:
    listing, settings = fleet()
    settings.node_groups = {**GROUPS, "gpu_path_device_plugin": [*H100, *H200]}
    settings.node_groups.pop("gpu_path_dra")
    c = by_id(vno.nodes_checks(listing, settings))
    for cid in ("nodes.plugin-running", "nodes.resourceslices"):
        assert c[cid].status == "skip"
        assert c[cid].reason == (
            "every GPU node with a Node object is on the device-plugin path "
            "(gpu_path_device_plugin, 4 node(s)): no DRA kubelet plugin or ResourceSlice "
            "is expected"
        )


# ------------------------------------------------------------------ nodes.device-plugin-gpus


def test_device_plugin_nodes_listing_gpus_pass_with_their_resources_in_data() -> None:
    listing, settings = fleet()
    listing.nodes[3] = plugin_node("h100-2", {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.18gb": "7"})
    c = checks(listing, settings)["nodes.device-plugin-gpus"]
    assert c.status == "pass"
    assert c.summary == "2 node(s) of device-plugin pools list nvidia.com/gpu"
    assert c.data["nodes"] == {
        "h100-1": {"nvidia.com/gpu": "8"},
        "h100-2": {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.18gb": "7"},
    }


def test_mig_slices_of_the_mixed_strategy_alone_count_as_advertised() -> None:
    listing, settings = fleet()
    listing.nodes[2] = plugin_node("h100-1", {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.71gb": "2"})
    assert checks(listing, settings)["nodes.device-plugin-gpus"].status == "pass"


@pytest.mark.parametrize(
    ("resources", "member", "message"),
    [
        (
            {},
            "both",
            "no nvidia.com/gpu (nor nvidia.com/mig-*): NVIDIA's device plugin has not "
            "registered with the kubelet, so status.allocatable offers no GPU and pods asking "
            "for nvidia.com/gpu stay Pending",
        ),
        (
            {"nvidia.com/gpu": "0"},
            "both",
            "nvidia.com/gpu=0: NVIDIA's device plugin stopped, so status.allocatable offers no "
            "GPU and pods asking for nvidia.com/gpu stay Pending",
        ),
        (
            {"nvidia.com/gpu": "8"},
            "capacity",
            "nvidia.com/gpu=8 in status.capacity but not in status.allocatable: the scheduler "
            "reads allocatable, so pods asking for nvidia.com/gpu do not land here",
        ),
        (
            {"nvidia.com/gpu": "500m"},
            "both",
            "nvidia.com/gpu=500m in status.allocatable is not a whole count above 0: the "
            "scheduler cannot hand out a GPU of the node",
        ),
    ],
    ids=["absent", "stopped", "capacity-only", "not-whole"],
)
def test_a_device_plugin_node_without_gpus_in_allocatable_fails_naming_why(
    resources: dict[str, str], member: str, message: str
) -> None:
    listing, settings = fleet()
    n = node("h100-2", LABELS)
    n["status"]["capacity"] = {"cpu": "64", **resources}
    n["status"]["allocatable"] = {"cpu": "63", **(resources if member == "both" else {})}
    listing.nodes[3] = n
    c = checks(listing, settings)["nodes.device-plugin-gpus"]
    assert c.status == "fail"
    assert [(p.subject, p.status) for p in c.problems] == [("h100-2", "fail")]
    assert c.problems[0].message == (
        "the inventory puts pool gpu_h100 on device-plugin (group gpu_path_device_plugin): "
        + message
    )
    assert "start NVIDIA's device plugin on the node" in (c.fix or "")
    assert "from gpu_path_device_plugin to gpu_path_dra" in (c.fix or "")


def test_a_device_plugin_node_without_a_node_object_is_left_to_the_labels_check() -> None:
    listing, settings = fleet()
    listing.nodes = [n for n in listing.nodes if n["metadata"]["name"] != "h100-2"]
    c = checks(listing, settings)
    assert c["nodes.device-plugin-gpus"].status == "pass"
    assert "1 without a Node object" in c["nodes.device-plugin-gpus"].evidence[0].detail
    assert [p.subject for p in c["nodes.gpu-labels"].problems] == ["h100-2"]


# ------------------------------------------------------------------ nodes.gpu-paths


def test_the_path_report_lists_each_pool_with_its_declared_and_advertised_paths() -> None:
    listing, settings = fleet()
    c = checks(listing, settings)["nodes.gpu-paths"]
    assert c.status == "pass"
    assert c.summary == "2 pool(s) advertise the path they declare"
    assert c.data["pools"] == [
        {
            "pool": "gpu_h100",
            "declared": "device-plugin",
            "nodes": {
                "h100-1": {"declared": "device-plugin", "advertised": "device-plugin"},
                "h100-2": {"declared": "device-plugin", "advertised": "device-plugin"},
            },
            "agree": True,
        },
        {
            "pool": "gpu_h200",
            "declared": "dra",
            "nodes": {
                "h200-1": {"declared": "dra", "advertised": "dra"},
                "h200-2": {"declared": "dra", "advertised": "dra"},
            },
            "agree": True,
        },
    ]
    assert c.details == [
        "gpu_h100: declares device-plugin; 2 node(s) advertise device-plugin 2",
        "gpu_h200: declares dra; 2 node(s) advertise dra 2",
    ]


def test_a_pool_halfway_through_its_move_to_dra_fails_on_the_nodes_still_behind() -> None:
    listing, settings = fleet()
    settings.node_groups = {**GROUPS, "gpu_path_dra": [*H100, *H200]}
    settings.node_groups.pop("gpu_path_device_plugin")
    listing.nodes[3] = node("h100-2", LABELS)  # moved: device plugin gone, DRA plugin up
    listing.slices.append(resource_slice("h100-2", [gpu_device(0, "GPU-h100-2")]))
    c = checks(listing, settings)["nodes.gpu-paths"]
    assert c.status == "fail"
    assert [(p.subject, p.status) for p in c.problems] == [("h100-1", "fail")]
    assert c.problems[0].message == (
        "the inventory puts pool gpu_h100 on dra (group gpu_path_dra) but the node advertises "
        "nvidia.com/gpu=8 in status.allocatable (NVIDIA device plugin) and no device in a "
        "ResourceSlice of driver gpu.nvidia.com: ResourceClaims cannot be allocated its GPUs"
    )
    assert c.details[0] == (
        "gpu_h100: declares dra; 2 node(s) advertise device-plugin 1, dra 1 "
        "(off path: h100-1 device-plugin)"
    )
    assert c.data["pools"][0]["agree"] is False
    assert "remove NVIDIA's device plugin from the node" in (c.fix or "")


def test_a_dra_node_in_a_device_plugin_pool_fails() -> None:
    listing, settings = fleet()
    listing.nodes[2] = node("h100-1", LABELS)
    listing.slices.append(resource_slice("h100-1", [gpu_device(0, "GPU-h100-1")] * 2))
    c = checks(listing, settings)["nodes.gpu-paths"]
    assert [p.subject for p in c.problems] == ["h100-1"]
    assert c.problems[0].message == (
        "the inventory puts pool gpu_h100 on device-plugin (group gpu_path_device_plugin) but "
        "the node advertises 2 device(s) in ResourceSlice(s) h100-1-gpu.nvidia.com-1 (DRA) "
        "and no nvidia.com/gpu: pods asking for nvidia.com/gpu do not get its GPUs"
    )


def test_a_node_on_both_paths_names_the_side_its_pool_keeps() -> None:
    listing, settings = fleet()
    listing.slices.append(resource_slice("h100-1", [gpu_device(0, "GPU-h100-1")]))
    c = checks(listing, settings)
    assert [p.subject for p in c["nodes.gpu-paths"].problems] == ["h100-1"]
    assert "advertises its GPUs both ways (nodes.gpu-path-dual)" in (
        c["nodes.gpu-paths"].problems[0].message
    )
    dual = c["nodes.gpu-path-dual"].problems[0].message
    assert dual.endswith(
        "; the inventory puts pool gpu_h100 on device-plugin (group gpu_path_device_plugin): "
        "remove the dra advertiser"
    )


def test_a_pool_in_both_path_groups_fails_even_where_the_node_agrees_with_one() -> None:
    listing, settings = fleet()
    settings.node_groups = {**GROUPS, "gpu_path_dra": [*H200, *H100]}
    c = checks(listing, settings)["nodes.gpu-paths"]
    assert [p.subject for p in c.problems] == H100
    assert c.problems[0].message == (
        "pool gpu_h100 is in both gpu_path_device_plugin and gpu_path_dra: a pool declares "
        "one path (preflight's gpu-path-both)"
    )
    assert c.data["pools"][0]["declared"] == "both"


def test_nodes_outside_the_inventory_are_listed_but_not_judged() -> None:
    listing, settings = fleet()
    listing.nodes.append(plugin_node("spare-1"))
    c = checks(listing, settings)["nodes.gpu-paths"]
    assert c.status == "pass"
    assert c.data["pools"][-1] == {
        "pool": "(not in the inventory)",
        "declared": "-",
        "nodes": {"spare-1": {"declared": "-", "advertised": "device-plugin"}},
        "agree": True,
    }
    assert c.details[-1] == (
        "(not in the inventory): declares -; 1 node(s) advertise device-plugin 1"
    )


def test_without_any_gpu_node_the_path_report_is_skipped() -> None:
    listing, settings = fleet()
    listing.nodes, listing.slices = [node("cp")], []
    settings.gpu_nodes, settings.node_groups = [], {}
    c = checks(listing, settings)["nodes.gpu-paths"]
    assert c.status == "skip"
    assert "the inventory group gpu_nodes is empty" in (c.reason or "")


def test_the_path_report_is_in_the_json_and_text_reports_of_a_passing_run() -> None:
    listing, settings = fleet()
    report = vr.Report(vc.all_checks(listing, settings)).to_dict()
    (doc,) = [c for c in report["checks"] if c["id"] == "nodes.gpu-paths"]
    assert doc["status"] == "pass"
    assert doc["details"][1] == "gpu_h200: declares dra; 2 node(s) advertise dra 2"
    assert [p["pool"] for p in doc["data"]["pools"]] == ["gpu_h100", "gpu_h200"]
    text = vr.render_text(report)
    at = text.index("PASS nodes.gpu-paths: 2 pool(s) advertise the path they declare")
    assert text[at + 1 : at + 3] == [
        "       gpu_h100: declares device-plugin; 2 node(s) advertise device-plugin 2",
        "       gpu_h200: declares dra; 2 node(s) advertise dra 2",
    ]


# ------------------------------------------------------------------ a pool gpufleet migrate moved


def moved_to_dra(listing: vli.Listing) -> None:
    """The nodes of ``gpu_h100`` as a move to DRA leaves them: the device plugin's resource
    at 0, the DRA kubelet plugin running and publishing the GPUs."""
    for i, name in enumerate(H100):
        listing.nodes[2 + i] = plugin_node(name, {"nvidia.com/gpu": "0"})
        listing.pods.append(pod(f"plugin-{name}", "dra", node_name=name, labels=PLUGIN))
        listing.slices.append(resource_slice(name, [gpu_device(0, f"GPU-{name}")]))


def test_without_the_move_a_moved_pool_fails_on_the_path_the_inventory_still_declares() -> None:
    listing, settings = fleet()  # gpu_h100 is still a child of gpu_path_device_plugin
    moved_to_dra(listing)
    c = checks(listing, settings)
    assert [p.subject for p in c["nodes.gpu-paths"].problems] == H100
    assert [p.subject for p in c["nodes.device-plugin-gpus"].problems] == H100


def test_a_pool_moved_to_dra_passes_on_its_new_path_with_the_move_in_the_evidence() -> None:
    listing, settings = fleet()
    moved_to_dra(listing)
    settings.gpu_path_moves = {"gpu_h100": "dra"}
    c = checks(listing, settings)
    failed = {k: [p.message for p in v.problems] for k, v in c.items() if v.status == "fail"}
    assert failed == {}
    pools = c["nodes.gpu-paths"]
    assert pools.status == "pass"
    assert pools.details[0] == "gpu_h100: declares dra; 2 node(s) advertise dra 2"
    assert pools.data["pools"][0]["declared"] == "dra"
    moves = [e.detail for e in pools.evidence if e.source.startswith("validate_gpu_path_moves")]
    assert moves == [
        "gpufleet migrate moved pool gpu_h100 to dra; the inventory still declares "
        "device-plugin (group gpu_path_device_plugin) for its 2 node(s), which are judged on "
        "dra until group gpu_h100 is a child of gpu_path_dra"
    ]
    # the DRA checks judge the moved nodes, the device plugin's check has none left
    assert c["nodes.plugin-running"].summary == "plugin pod Running on all 4 GPU node(s)"
    assert c["nodes.resourceslices"].status == "pass"
    assert c["nodes.device-plugin-gpus"].status == "skip"


def test_a_moved_pool_whose_nodes_are_still_on_the_old_path_fails_naming_the_move() -> None:
    listing, settings = fleet()  # the nodes of gpu_h100 still advertise nvidia.com/gpu=8
    settings.gpu_path_moves = {"gpu_h100": "dra"}
    c = checks(listing, settings)
    pools = c["nodes.gpu-paths"]
    assert [(p.subject, p.status) for p in pools.problems] == [(n, "fail") for n in H100]
    assert pools.problems[0].message == (
        "gpufleet migrate moved pool gpu_h100 to dra (validate_gpu_path_moves; the inventory "
        "still declares device-plugin, group gpu_path_device_plugin) but the node advertises "
        "nvidia.com/gpu=8 in status.allocatable (NVIDIA device plugin) and no device in a "
        "ResourceSlice of driver gpu.nvidia.com: ResourceClaims cannot be allocated its GPUs"
    )
    assert "make group gpu_h100 a child of gpu_path_dra in the inventory" in (pools.fix or "")
    assert [p.subject for p in c["nodes.plugin-running"].problems] == H100
    assert [p.subject for p in c["nodes.resourceslices"].problems] == H100


def test_a_pool_moved_to_the_device_plugin_is_judged_by_the_device_plugins_check() -> None:
    listing, settings = fleet()
    for i, name in enumerate(H200):  # DRA gone from gpu_h200, the device plugin up
        listing.nodes[4 + i] = plugin_node(name)
    listing.pods = [p for p in listing.pods if not p["metadata"]["name"].startswith("plugin-")]
    listing.slices = []
    settings.gpu_path_moves = {"gpu_h200": "device-plugin"}
    got = vgp.declared_paths(settings)
    assert {n: got[n].path for n in H200} == {n: "device-plugin" for n in H200}
    assert got["h200-1"].moved_pools == ("gpu_h200",)
    assert got["h200-1"].inventory == ("dra",)
    c = checks(listing, settings)
    assert {k: v.status for k, v in c.items() if v.status == "fail"} == {}
    assert sorted(c["nodes.device-plugin-gpus"].data["nodes"]) == [*H100, *H200]
    for cid in ("nodes.plugin-running", "nodes.resourceslices"):
        assert c[cid].status == "skip"
    (move,) = [e.detail for e in c["nodes.gpu-paths"].evidence if "gpufleet migrate" in e.detail]
    assert move.startswith(
        "gpufleet migrate moved pool gpu_h200 to device-plugin; the inventory still declares "
        "dra (group gpu_path_dra) for its 2 node(s)"
    )


def test_a_move_applies_to_every_gpu_node_of_the_group_moved() -> None:
    _, settings = fleet()
    settings.gpu_path_moves = {"gpus": "device-plugin"}  # the group holding both pools
    got = vgp.declared_paths(settings)
    assert {n: (d.pool, d.path) for n, d in got.items()} == {
        "h100-1": ("gpu_h100", "device-plugin"),
        "h100-2": ("gpu_h100", "device-plugin"),
        "h200-1": ("gpu_h200", "device-plugin"),
        "h200-2": ("gpu_h200", "device-plugin"),
    }
    assert got["h100-1"].moved_pools == ("gpus",)
    assert got["h200-1"].on_path() == (
        "gpufleet migrate moved pool gpus to device-plugin (validate_gpu_path_moves; the "
        "inventory still declares dra, group gpu_path_dra)"
    )


def test_a_move_the_inventory_already_declares_is_named_as_such() -> None:
    listing, settings = fleet()
    settings.gpu_path_moves = {"gpu_h200": "dra"}
    c = checks(listing, settings)["nodes.gpu-paths"]
    assert c.status == "pass"
    assert [e.detail for e in c.evidence if "gpufleet migrate" in e.detail] == [
        "gpufleet migrate moved pool gpu_h200 to dra; the inventory declares dra for its 2 "
        "node(s) already"
    ]


def test_the_moves_reach_the_settings_from_the_module_options() -> None:
    options = {"gpu_nodes": ["a"], "node_groups": {"gpu_a": ["a"], "gpu_path_dra": ["a"]}}
    settings = vrun.settings_from({**options, "gpu_path_moves": {"gpu_a": "device-plugin"}}, [])
    assert settings.gpu_path_moves == {"gpu_a": "device-plugin"}
    assert vgp.declared_paths(settings)["a"].path == "device-plugin"
    assert vrun.settings_from(options, []).gpu_path_moves == {}
    assert vrun.settings_from({**options, "gpu_path_moves": None}, []).gpu_path_moves == {}


LONG = "x" * 5000
MOVE_REFUSALS: dict[str, tuple[Any, str]] = {
    "path-gpu": (
        {"gpu_a": "gpu"},
        "validate_gpu_path_moves['gpu_a']='gpu': names no GPU path; fix: give device-plugin "
        "or dra: the path gpufleet migrate --to moved the pool to",
    ),
    "path-list": (
        {"gpu_a": ["dra"]},
        "validate_gpu_path_moves['gpu_a']=['dra']: names no GPU path; fix: give",
    ),
    "path-long": (
        {"gpu_a": LONG},
        f"validate_gpu_path_moves['gpu_a']={repr(LONG[:81])[:80]}...: names no GPU path",
    ),
    "pool-unknown": (
        {"gpu_b": "dra"},
        "validate_gpu_path_moves['gpu_b']='dra': 'gpu_b' is no inventory group with a GPU node; "
        "fix: name the pool's inventory group, as gpufleet migrate --pool names it, or leave "
        "the pool out",
    ),
    "pool-long": (
        {LONG: "dra"},
        f"validate_gpu_path_moves[{repr(LONG[:81])[:80]}...]='dra': {repr(LONG[:81])[:80]}... "
        "is no inventory group",
    ),
    "not-a-mapping": (
        ["gpu_a"],
        "validate_gpu_path_moves=['gpu_a']: is not a mapping of pool group to GPU path; fix: "
        "give {POOL: PATH} with PATH device-plugin or dra",
    ),
    "one-node-both-paths": (
        {"gpu_a": "dra", "rack_1": "device-plugin"},
        "validate_gpu_path_moves={'gpu_a': 'dra', 'rack_1': 'device-plugin'}: node 'a' is in "
        "pool 'gpu_a' moved to dra and in pool 'rack_1' moved to device-plugin; fix: give "
        "each node one path",
    ),
}


@pytest.mark.parametrize("case", MOVE_REFUSALS)
def test_a_move_of_no_path_or_of_no_pool_is_refused_naming_the_variable(case: str) -> None:
    moves, said = MOVE_REFUSALS[case]
    options = {
        "gpu_nodes": ["a"],
        "node_groups": {"gpu_a": ["a"], "rack_1": ["a"], "gpu_path_dra": ["a"]},
        "gpu_path_moves": moves,
    }
    with pytest.raises(ValueError) as err:
        vrun.settings_from(options, [])
    assert str(err.value).startswith(said)
    assert len(str(err.value)) < 400


def test_the_module_refuses_a_move_before_it_reads_the_kubeconfig(tmp_path: Any) -> None:
    from ansible_collections.gpufleet.cluster.plugins.modules import dra_validate

    from tests.harness.ansible_module import run_module

    res = run_module(
        dra_validate,
        {
            "kubeconfig": str(tmp_path / "missing"),
            "gpu_nodes": ["a"],
            "node_groups": {"gpu_a": ["a"]},
            "gpu_path_moves": {"gpu_a": "gpu"},
        },
    )
    assert res["failed"] is True
    assert res["msg"].startswith("validate_gpu_path_moves['gpu_a']='gpu': names no GPU path")
    assert "missing" not in res["msg"]
