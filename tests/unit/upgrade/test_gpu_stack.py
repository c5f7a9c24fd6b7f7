"""The GPU-stack upgrade plan (plugins/module_utils/upgrade/gpu_stack.py): per node what
changes, what stops, how the driver loads; the order (chart first or last, node batches
under the GPU floor); every refusal, naming the variable, the value, the fix and the
upstream source of its rule."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import gpu_stack as gs
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.input import (
    UpgradePlanError,
)

pytestmark = pytest.mark.unit

TARGETS = gs.StackTargets(driver="580.159.04", toolkit="1.20.2", chart="0.4.0")


def node(
    host: str,
    driver: str | None = "580.159.04",
    toolkit: str | None = "1.20.2",
    archs: tuple[str, ...] = ("Hopper",),
    gpus: int = 8,
    **kw: Any,
) -> gs.StackNode:
    return gs.StackNode(host, host, driver, toolkit, archs, gpus, **kw)  # fmt: skip


def state(
    *nodes: gs.StackNode, kube: str = "1.36.3", chart: str = "dra-driver-nvidia-gpu-0.4.0"
) -> gs.StackState:
    return gs.StackState(kube, chart, tuple(nodes))  # fmt: skip


def plan(st: gs.StackState, targets: gs.StackTargets = TARGETS, **kw: Any) -> dict[str, Any]:
    return gs.plan_gpu_stack(st, targets, **kw).to_dict()


def refusals(p: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(r["node"], r["variable"], r["source"]) for r in p["refused"]]


# ---------------------------------------------------------------------------- the plan


def test_a_stack_at_its_targets_is_up_to_date() -> None:
    p = plan(state(node("w-1"), node("w-2")))
    assert p["up_to_date"] is True
    assert p["waves"] == [] and p["refused"] == [] and p["chart"]["position"] == "none"
    assert [n["wave"] for n in p["nodes"]] == [-1, -1]


def test_a_driver_change_drains_stops_the_gpu_clients_and_reboots() -> None:
    p = plan(state(node("w-1", driver="570.172.08", toolkit="1.18.0", mig=True)),
             gs.StackTargets("580.159.04", "1.20.2", "0.4.0", reboot=True))  # fmt: skip
    (n,) = p["nodes"]
    assert n["driver"] == {"current": "570.172.08", "target": "580.159.04"}
    assert n["toolkit"] == {"current": "1.18.0", "target": "1.20.2"}
    # another release is loaded: the nvidia_driver role loads the new one by a reboot
    assert n["load"] == "reboot"
    assert n["stop"] == [
        "GPU pods (drain)",
        "DRA kubelet plugin (gpus, compute-domains)",
        "nvidia-persistenced",
        "nvidia-dcgm",
        "dcgm-exporter",
        "nvidia-fabricmanager",
        "nvidia-drm",
    ]
    actions = n["actions"]
    assert actions[:2] == ["cordon", "drain GPU pods"]
    assert actions.index("driver 570.172.08 -> 580.159.04 (nvidia_driver)") < actions.index(
        "reboot"
    )
    assert "MIG layout applied again (mig role)" in actions
    assert actions[-1] == "uncordon"
    assert p["warnings"] == []


def test_a_node_without_a_loaded_driver_loads_it_by_modprobe() -> None:
    (n,) = plan(state(node("w-1", driver=None)))["nodes"]
    assert n["load"] == "modprobe" and "modprobe nvidia" in n["actions"]


def test_without_nvidia_driver_reboot_another_loaded_driver_is_reloaded_in_place() -> None:
    p = plan(state(node("w-1", driver="575.57.08"), node("w-2")))
    n = p["nodes"][0]
    assert n["load"] == "reload"
    assert "unload the NVIDIA modules and load the new driver (no reboot)" in n["actions"]
    assert "reboot" not in n["actions"]
    assert not any("nvidia_driver_reboot" in w for w in p["warnings"])


def test_a_kept_part_is_neither_judged_nor_planned() -> None:
    st = state(node("w-1", driver="575.57.08", toolkit="1.18.0"))
    p = plan(st, gs.StackTargets("580.159.04", "", "", keep=("toolkit", "chart")))
    (n,) = p["nodes"]
    assert n["toolkit"] == {"current": "1.18.0", "target": "1.18.0"}
    assert n["driver"]["target"] == "580.159.04" and n["load"] == "reload"
    assert p["chart"]["position"] == "none"
    assert p["chart"]["current"] == p["chart"]["target"] == "dra-driver-nvidia-gpu 0.4.0"
    assert (p["target"]["toolkit"], p["target"]["kept"]) == (None, ["toolkit", "chart"])
    assert not p["refused"]
    kept = plan(st, gs.StackTargets("", "1.20.2", "", keep=("driver", "chart")))
    (n,) = kept["nodes"]
    assert n["driver"] == {"current": "575.57.08", "target": "575.57.08"}
    assert (n["load"], n["stop"]) == ("none", []) and n["toolkit"]["target"] == "1.20.2"


def test_a_kept_chart_still_sets_the_driver_minimum() -> None:
    st = gs.StackState("1.35.2", "nvidia-dra-driver-gpu-25.12.0", (node("w-1"),))
    p = plan(st, gs.StackTargets("535.274.02", "", "", keep=("toolkit", "chart")))
    assert [r["variable"] for r in p["refused"]] == ["nvidia_driver_version"]
    assert "needs host driver" in p["refused"][0]["reason"]


def test_a_toolkit_change_alone_drains_nothing() -> None:
    p = plan(state(node("w-1", toolkit="1.18.0")))
    (n,) = p["nodes"]
    assert (n["load"], n["stop"]) == ("none", [])
    assert n["actions"] == [
        "toolkit 1.18.0 -> 1.20.2 (nvidia_container_toolkit), CDI spec regenerated"
    ]
    assert p["waves"] == [
        {"index": 0, "kind": "nodes", "hosts": ["w-1"], "gpu_devices_drained": 0,
         "gpu_available_percent": 100.0}
    ]  # fmt: skip


def test_the_rename_puts_crds_and_the_controller_first_with_name_override() -> None:
    p = plan(state(node("w-1", driver="570.172.08"), node("w-2", driver="570.172.08"),
                   chart="nvidia-dra-driver-gpu-25.12.0"), batch_size=1)  # fmt: skip
    assert p["chart"] == {
        "current": "nvidia-dra-driver-gpu 25.12.0",
        "target": "dra-driver-nvidia-gpu 0.4.0",
        "steps": [
            "apply the CRDs of dra-driver-nvidia-gpu 0.4.0 (Helm does not upgrade CRDs)",
            "helm upgrade to dra-driver-nvidia-gpu 0.4.0 with nameOverride="
            "nvidia-dra-driver-gpu: the controller, then the kubelet plugin DaemonSet",
        ],
        "position": "first",
    }
    assert [(w["kind"], w["hosts"]) for w in p["waves"]] == [
        ("chart", []), ("nodes", ["w-1"]), ("nodes", ["w-2"])
    ]  # fmt: skip
    assert [n["wave"] for n in p["nodes"]] == [1, 2]


def test_the_chart_goes_last_while_a_node_runs_a_driver_below_its_minimum() -> None:
    p = plan(state(node("w-1", driver="550.127.05"), chart="dra-driver-nvidia-gpu-0.4.0"),
             gs.StackTargets("580.159.04", "1.20.2", "0.4.1"))  # fmt: skip
    assert p["chart"]["position"] == "last"
    assert [w["kind"] for w in p["waves"]] == ["nodes", "chart"]
    assert any("the chart goes after the node batches" in w for w in p["warnings"])


def test_batches_keep_the_gpu_floor_schedulable() -> None:
    nodes = [node(f"w-{i}", driver="575.57.08") for i in range(1, 5)]
    p = plan(state(*nodes), batch_size=4, min_gpu_available_percent=50)
    # 32 devices, 16 must stay: two nodes of 8 per batch though the batch size is 4
    assert [w["hosts"] for w in p["waves"]] == [["w-1", "w-2"], ["w-3", "w-4"]]
    assert [w["gpu_available_percent"] for w in p["waves"]] == [50.0, 50.0]


def test_a_node_that_alone_breaks_the_floor_is_refused_as_the_upgrade_refuses_it() -> None:
    with pytest.raises(UpgradePlanError, match="upgrade_min_gpu_available_percent=90"):
        plan(state(node("w-1", driver="575.57.08"), node("w-2")), min_gpu_available_percent=90)


def test_the_plan_is_json_and_names_its_targets() -> None:
    p = plan(state(node("w-1", driver="575.57.08")))
    assert json.loads(json.dumps(p)) == p
    assert p["target"] == {"driver": "580.159.04", "driver_branch": "", "toolkit": "1.20.2",
                           "dra_driver_chart": "0.4.0", "reboot": False, "kept": []}  # fmt: skip
    assert set(p) == {
        "kubernetes_version", "target", "up_to_date", "chart", "nodes", "waves", "batch_size",
        "min_gpu_available_percent", "warnings", "refused",
    }  # fmt: skip


# ---------------------------------------------------------------------------- refusals


def test_a_driver_older_than_the_charts_minimum_is_refused_naming_its_source() -> None:
    p = plan(state(node("w-1")), gs.StackTargets("550.127.05", "1.20.2", "0.4.0"))
    (r,) = p["refused"]
    assert (r["variable"], r["value"], r["source"]) == (
        "nvidia_driver_version", "550.127.05", ddc.PREREQUISITES_DOC
    )  # fmt: skip
    assert r["reason"] == "chart dra-driver-nvidia-gpu 0.4.0 needs host driver 565.0 or later"
    assert "docs/prerequisites.md" in r["message"] and "fix:" in r["message"]


def test_compute_domains_raise_the_driver_minimum() -> None:
    targets = gs.StackTargets("570.133.20", "1.20.2", "0.4.0", compute_domains=True)
    (r,) = plan(state(node("w-1")), targets)["refused"]
    assert "needs host driver 570.158.01 or later" in r["reason"]
    assert (
        plan(state(node("w-1")), gs.StackTargets("570.133.20", "1.20.2", "0.4.0"))["refused"] == []
    )


def test_the_option_that_gave_a_value_is_named() -> None:
    p = plan(state(node("w-1")), gs.StackTargets("550.127.05", "1.20.2", "0.4.0"),
             input_names={"driver": "--driver"})  # fmt: skip
    assert p["refused"][0]["variable"] == "--driver"
    assert p["refused"][0]["message"].startswith("--driver=550.127.05: ")


def test_a_driver_that_is_no_release_or_not_of_its_branch_is_refused() -> None:
    bad = plan(state(node("w-1")), gs.StackTargets("580.x", "1.20.2", "0.4.0"))
    assert refusals(bad) == [("", "nvidia_driver_version", gs.SOURCE_RELEASES)]
    assert bad["refused"][0]["message"].startswith(
        "nvidia_driver_version=580.x: not an NVIDIA driver release (source: NVIDIA driver"
    )
    other = plan(state(node("w-1")), gs.StackTargets("580.159.04", "1.20.2", "0.4.0", "590"))
    assert other["refused"][0]["reason"] == "not a release of nvidia_driver_branch=590"
    old = plan(state(node("w-1")), gs.StackTargets("470.256.02", "1.20.2", "0.4.0"))
    assert refusals(old) == [("", "nvidia_driver_version", gs.SOURCE_FLOOR)]
    assert old["refused"][0]["reason"].startswith("older than 525.60.13")
    branch = plan(state(node("w-1")), gs.StackTargets("580.159.04", "1.20.2", "0.4.0", "5x"))
    assert [(r["variable"], r["value"]) for r in branch["refused"]] == [
        ("nvidia_driver_branch", "5x")
    ]


def test_a_chart_newer_than_the_clusters_kubernetes_allows_is_refused() -> None:
    below_kube_version = plan(state(node("w-1"), kube="1.31.4", chart=""))
    assert refusals(below_kube_version) == [("", "dra_driver_chart_version", gs.SOURCE_CHART_YAML)]
    below_docs = plan(state(node("w-1"), kube="1.34.1", chart=""))
    (r,) = below_docs["refused"]
    assert r["source"] == ddc.PREREQUISITES_DOC
    assert "documented minimum 1.34.2" in r["reason"]
    assert "dra_driver_accept_below_documented_minimum=true" in r["fix"]
    accepted = gs.StackTargets(**{**TARGETS.__dict__, "accept_below_documented_minimum": True})
    assert plan(state(node("w-1"), kube="1.34.1", chart=""), accepted)["refused"] == []


def test_a_chart_that_does_not_change_is_not_judged_against_kubernetes() -> None:
    assert plan(state(node("w-1"), kube="1.34.1"))["refused"] == []


def test_the_rename_cannot_be_rolled_back() -> None:
    p = plan(state(node("w-1")), gs.StackTargets("580.159.04", "1.20.2", "25.12.0"))
    (r,) = p["refused"]
    assert (r["variable"], r["value"], r["source"]) == (
        "dra_driver_chart_version", "25.12.0", ddc.UPGRADE_DOC
    )  # fmt: skip
    assert "going back to the calendar releases is not supported" in r["reason"]
    assert r["fix"] == "keep dra_driver_chart_version at 0.4.0 or later"


def test_a_chart_release_that_does_not_exist_is_refused() -> None:
    p = plan(state(node("w-1")), gs.StackTargets("580.159.04", "1.20.2", "0.3.0"))
    assert refusals(p) == [("", "dra_driver_chart_version", ddc.UPGRADE_DOC)]


@pytest.mark.parametrize(
    "arch, driver, fix",
    [
        ("Volta", "590.44.01", "give a release of branch 580 or older"),
        ("Pascal", "590.44.01", "give a release of branch 580 or older"),
        ("Blackwell", "570.124.06", "give 570.133.20 or later"),
    ],
)
def test_a_gpu_the_new_driver_does_not_support_is_refused_per_node(
    arch: str, driver: str, fix: str
) -> None:
    p = plan(state(node("w-1"), node("w-2", archs=(arch,))), gs.StackTargets(driver, "1.20.2",
             "0.4.0"))  # fmt: skip
    (r,) = p["refused"]
    assert (r["node"], r["variable"], r["value"], r["fix"]) == (
        "w-2", "nvidia_driver_version", driver, fix
    )  # fmt: skip
    assert "NVIDIA" in r["source"]
    assert r["message"].startswith(f"w-2: nvidia_driver_version={driver}: {arch} GPUs")


def test_every_refusal_is_listed_not_only_the_first() -> None:
    p = plan(state(node("w-1", archs=("Blackwell",)), kube="1.31.4", chart=""),
             gs.StackTargets("550.127.05", "1.x", "0.4.0"))  # fmt: skip
    assert [r["variable"] for r in p["refused"]] == [
        "dra_driver_chart_version",
        "nvidia_driver_version",
        "nvidia_container_toolkit_version",
        "nvidia_driver_version",
    ]


def test_an_unknown_architecture_is_not_judged_but_said() -> None:
    p = plan(state(node("w-1", archs=("unknown",))))
    assert p["refused"] == []
    assert p["warnings"] == ["GPU architecture unknown on w-1: driver support not judged"]


# ------------------------------------------------------------------- reading the stack


def test_state_from_facts_reads_what_the_playbook_registered() -> None:
    facts = {"loaded_version": "575.57.08", "architectures": ["Hopper"],
             "pci_gpus": [{}, {}], "smi_driver_versions": ["575.57.08", "575.57.08"]}  # fmt: skip
    data = gs.state_from_facts(
        "v1.36.3",
        {"chart": "nvidia-dra-driver-gpu-25.12.0"},
        [{"host": "w-1", "name": "gpu-1", "facts": facts,
          "toolkit": "NVIDIA Container Toolkit CLI version 1.18.0\ncommit: abc"},
         {"host": "w-2", "facts": {"smi_driver_versions": ["580.95.05"]}, "toolkit": ""}],
        [{"metadata": {"name": "gpu-1"}, "spec": {"unschedulable": True}}],
    )  # fmt: skip
    assert data == {
        "kubernetes_version": "v1.36.3",
        "chart": "nvidia-dra-driver-gpu-25.12.0",
        "nodes": [
            {"host": "w-1", "name": "gpu-1", "driver": "575.57.08", "toolkit": "1.18.0",
             "architectures": ["Hopper"], "gpu_devices": 2, "unschedulable": True, "mig": False},
            {"host": "w-2", "name": "w-2", "driver": "580.95.05", "toolkit": None,
             "architectures": [], "gpu_devices": 0, "unschedulable": False, "mig": False},
        ],
    }  # fmt: skip
    st = gs.parse_state(data)
    assert st.nodes[0] == gs.StackNode("w-1", "gpu-1", "575.57.08", "1.18.0", ("Hopper",), 2,
                                       True, False)  # fmt: skip


def test_a_state_without_the_clusters_release_or_a_nodes_host_is_refused() -> None:
    with pytest.raises(gs.GpuStackPlanError, match="no kubernetes_version"):
        gs.parse_state({"nodes": []})
    with pytest.raises(gs.GpuStackPlanError, match=r"nodes\[0\] has no host"):
        gs.parse_state({"kubernetes_version": "1.36.3", "nodes": [{"name": "x"}]})


def test_a_non_nvidia_release_is_not_judged_but_said() -> None:
    p = plan(state(node("w-1"), chart="gpu-simulator-0.1.0"))
    assert "is not NVIDIA's; not judged" in p["warnings"][0]
    assert p["chart"]["current"] == "gpu-simulator-0.1.0"


def test_plan_from_inputs_reads_ansible_booleans_and_refuses_others() -> None:
    inputs = {
        "state": {"kubernetes_version": "1.36.3", "nodes": [{"host": "w-1", "driver": "575.57.08",
                  "toolkit": "1.20.2", "architectures": ["Hopper"]}]},
        "targets": {"driver": "580.159.04", "toolkit": "1.20.2", "chart": "0.4.0",
                    "reboot": "yes"},
        "batch_size": "1",
    }  # fmt: skip
    p = gs.plan_from_inputs(inputs)
    assert p["target"]["reboot"] is True and "reboot" in p["nodes"][0]["actions"]
    inputs["targets"]["reboot"] = "maybe"
    with pytest.raises(gs.GpuStackPlanError, match="nvidia_driver_reboot='maybe'"):
        gs.plan_from_inputs(inputs)


def test_the_parts_kept_must_be_a_list_of_the_three() -> None:
    targets = {"driver": "580.159.04", "toolkit": "1.20.2", "chart": "0.4.0"}
    inputs = {"state": {"kubernetes_version": "1.36.3", "nodes": []}, "targets": targets}
    for bad in ("driver", ["kernel"], [None]):
        inputs["targets"]["keep"] = bad
        with pytest.raises(gs.GpuStackPlanError, match="upgrade_gpu_stack_components"):
            gs.plan_from_inputs(inputs)
    inputs["targets"]["keep"] = ["chart", "chart"]
    assert gs.plan_from_inputs(inputs)["target"]["kept"] == ["chart"]


def test_a_node_with_a_mig_layout_says_so_for_the_run() -> None:
    p = plan(state(node("w-1", driver="575.57.08", mig=True), node("w-2", driver="575.57.08")))
    assert [n["mig"] for n in p["nodes"]] == [True, False]
    assert "MIG layout applied again (mig role)" in p["nodes"][0]["actions"]
