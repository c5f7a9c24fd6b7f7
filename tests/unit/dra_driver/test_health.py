"""The installed driver's health: its kubelet-plugin DaemonSet and the ResourceSlices it
publishes against the GPU facts (``plugins/module_utils/dra_driver/health.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import health as ddh

from tests.unit.dra_driver.driver_inputs import GPU_LABEL, node

pytestmark = pytest.mark.unit


def daemonset(
    desired: int, ready: int, *, gen: int = 2, seen: int = 2, selector: dict | None = None
) -> dict:
    return {
        "metadata": {
            "name": "nvidia-dra-driver-gpu-kubelet-plugin",
            "generation": gen,
            "annotations": {"meta.helm.sh/release-name": "nvidia-dra-driver-gpu"},
        },
        "spec": {
            "template": {"spec": {"nodeSelector": selector if selector is not None else GPU_LABEL}}
        },
        "status": {
            "desiredNumberScheduled": desired,
            "numberReady": ready,
            "updatedNumberScheduled": ready,
            "observedGeneration": seen,
        },
    }


def test_zero_of_zero_daemonset_fails_naming_node_and_label() -> None:
    # kubernetes-sigs/dra-driver-nvidia-gpu#1084: 0 == 0 must not pass
    nodes = [node("gpu-1", {})]
    verdict = ddh.daemonset_verdict(daemonset(0, 0), ["gpu-1"], nodes, namespace="ns")
    assert verdict["ok"] is False and verdict["final"] is True
    assert "0 of 0" in verdict["message"]
    assert "gpu-1 lacks the label(s) nvidia.com/gpu.present=true" in verdict["message"]


def test_daemonset_ready_on_every_gpu_node() -> None:
    nodes = [node("gpu-1", GPU_LABEL), node("gpu-2", GPU_LABEL)]
    verdict = ddh.daemonset_verdict(daemonset(2, 2), ["gpu-1", "gpu-2"], nodes)
    assert verdict == {"ok": True, "final": True, "message": verdict["message"]}
    assert "2 of 2" in verdict["message"]


def test_daemonset_not_ready_yet_keeps_waiting() -> None:
    nodes = [node("gpu-1", GPU_LABEL)]
    assert ddh.daemonset_verdict(daemonset(1, 0), ["gpu-1"], nodes) == {
        "ok": False,
        "final": False,
        "message": "DaemonSet nvidia-dra-driver-gpu-kubelet-plugin: 0 of 1 pods ready, 0 updated",
    }
    unseen = ddh.daemonset_verdict(daemonset(0, 0, gen=3, seen=2), ["gpu-1"], nodes)
    assert unseen["final"] is False


def test_daemonset_on_fewer_nodes_than_gpu_nodes() -> None:
    nodes = [node("gpu-1", GPU_LABEL), node("gpu-2", {})]
    verdict = ddh.daemonset_verdict(daemonset(1, 1), ["gpu-1", "gpu-2"], nodes)
    assert verdict["final"] and not verdict["ok"]
    assert "gpu-2 lacks" in verdict["message"] and "gpu-1 lacks" not in verdict["message"]


def test_daemonset_on_a_non_gpu_node_is_named() -> None:
    nodes = [node("gpu-1", GPU_LABEL), node("cpu-1", GPU_LABEL)]
    verdict = ddh.daemonset_verdict(daemonset(2, 2), ["gpu-1"], nodes)
    assert not verdict["ok"] and "non-GPU node(s) cpu-1" in verdict["message"]


def test_find_daemonset_by_release_annotation() -> None:
    other = daemonset(1, 1)
    other["metadata"]["annotations"] = {"meta.helm.sh/release-name": "other"}
    mine = daemonset(1, 1)
    assert ddh.find_kubelet_plugin_daemonset([other, mine], "nvidia-dra-driver-gpu") is mine
    assert ddh.find_kubelet_plugin_daemonset([other], "nvidia-dra-driver-gpu") is None
    assert ddh.daemonset_verdict(None, ["gpu-1"], [], release="r", namespace="n")["final"] is False


def gpu(mig: str = "Disabled", devices: int = 0) -> dict[str, Any]:
    return {"mig_mode_current": mig, "mig_devices": [{"profile": "1g.18gb"}] * devices}


def rslice(
    node_name: str, devices: int, *, gen: int = 1, count: int = 1, driver: str = "gpu.nvidia.com"
) -> dict:
    return {
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": gen, "resourceSliceCount": count},
            "devices": [{"name": f"gpu-{i}"} for i in range(devices)],
        }
    }


def test_expected_devices_from_gpu_facts() -> None:
    assert ddh.expected_devices([gpu(), gpu()]) == 2
    assert ddh.expected_devices([gpu("Enabled", 3), gpu()]) == 4
    assert ddh.expected_devices([gpu("Enabled", 0)]) == 0
    assert ddh.expected_devices([{"mig_mode_current": None}]) == 1
    assert ddh.expected_devices(None) is None


def test_slices_match_gpu_facts() -> None:
    slices = [
        rslice("gpu-1", 2),
        rslice("gpu-2", 4),
        rslice("cpu-1", 1, driver="other.example.com"),
    ]
    verdict = ddh.slice_verdict(slices, {"gpu-1": 2, "gpu-2": 4})
    assert verdict == {"ok": True, "devices": {"gpu-1": 2, "gpu-2": 4}, "problems": []}


def test_slice_count_mismatch_and_missing_node() -> None:
    verdict = ddh.slice_verdict([rslice("gpu-1", 1)], {"gpu-1": 3, "gpu-2": None})
    assert verdict["problems"] == [
        "GPU node gpu-1 publishes 1 device(s) of driver gpu.nvidia.com, its GPU facts say 3 "
        "(one per GPU, one per MIG device of a MIG-enabled GPU)",
        "GPU node gpu-2 has no ResourceSlice of driver gpu.nvidia.com",
    ]


def test_only_newest_pool_generation_counts() -> None:
    slices = [rslice("gpu-1", 1, gen=1), rslice("gpu-1", 3, gen=2)]
    assert ddh.slice_verdict(slices, {"gpu-1": 3})["ok"]


def test_incomplete_pool_is_not_ok() -> None:
    verdict = ddh.slice_verdict([rslice("gpu-1", 2, count=2)], {"gpu-1": 2})
    assert verdict["problems"] == ["GPU node gpu-1: its ResourceSlice pool is incomplete"]


def test_dynamic_mig_needs_only_some_devices() -> None:
    assert ddh.slice_verdict([rslice("gpu-1", 12)], {"gpu-1": 1}, dynamic_mig=True)["ok"]
    assert not ddh.slice_verdict([rslice("gpu-1", 12)], {"gpu-1": 1})["ok"]
