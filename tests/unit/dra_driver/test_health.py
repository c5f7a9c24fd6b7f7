"""The installed driver's health: its kubelet-plugin DaemonSet and the ResourceSlices it
publishes against the GPU facts (``plugins/module_utils/dra_driver/health.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import health as ddh

from tests.unit.dra_driver.driver_inputs import GPU_LABEL
from tests.unit.kube import api_objects
from tests.unit.kube.api_objects import node

pytestmark = pytest.mark.unit


def daemonset(desired: int, ready: int, *, gen: int = 2, seen: int = 2) -> dict[str, Any]:
    return api_objects.daemonset(
        "nvidia-dra-driver-gpu-kubelet-plugin",
        "nvidia-dra-driver-gpu",
        {"nodeSelector": GPU_LABEL},
        desired=desired,
        ready=ready,
        updated=ready,
        generation=gen,
        observed=seen,
    )


def test_zero_of_zero_daemonset_fails_naming_node_and_label() -> None:
    # kubernetes-sigs/dra-driver-nvidia-gpu#1084: 0 == 0 must not pass
    nodes = [node("gpu-1", {})]
    verdict = ddh.daemonset_verdict(daemonset(0, 0), ["gpu-1"], nodes, namespace="ns")
    assert verdict["ok"] is False and verdict["final"] is True
    assert verdict["message"] == (
        "DaemonSet ns/nvidia-dra-driver-gpu-kubelet-plugin is scheduled on 0 node(s) but there "
        "are 1 GPU node(s) (desiredNumberScheduled 0, numberReady 0, updated 0); a DaemonSet "
        "with 0 of 0 pods ready runs nowhere; gpu-1 lacks the label(s) "
        "nvidia.com/gpu.present=true that kubeletPlugin.nodeSelector requires; fix: label the "
        "GPU nodes (playbooks/gpu_node_labels.yml, nvidia.com/gpu.present=true) or set "
        "dra_driver_node_selector or dra_driver_extra_values.kubeletPlugin to match them"
    )


def test_the_live_pod_template_is_judged_by_the_kubelet_plugins_values() -> None:
    tainted = node("gpu-2", GPU_LABEL, taints=[{"key": "dedicated", "effect": "NoSchedule"}])
    verdict = ddh.daemonset_verdict(daemonset(1, 1), ["gpu-1", "gpu-2"], [node("gpu-1"), tainted])
    assert (
        "gpu-1 lacks the label(s) nvidia.com/gpu.present=true that kubeletPlugin"
        in (verdict["message"])
    )
    assert (
        "gpu-2 has the taint dedicated:NoSchedule that kubeletPlugin.tolerations"
        in (verdict["message"])
    )


def test_find_daemonset_by_release_annotation() -> None:
    other = daemonset(1, 1)
    other["metadata"]["annotations"] = {"meta.helm.sh/release-name": "other"}
    controller = daemonset(1, 1)
    controller["metadata"]["name"] = "nvidia-dra-driver-gpu-controller"
    mine = daemonset(1, 1)
    assert (
        ddh.find_kubelet_plugin_daemonset([other, controller, mine], "nvidia-dra-driver-gpu")
        is mine
    )
    assert ddh.find_kubelet_plugin_daemonset([other], "nvidia-dra-driver-gpu") is None
    assert ddh.daemonset_verdict(None, ["gpu-1"], [], release="r", namespace="n") == {
        "ok": False,
        "final": False,
        "message": "no kubelet-plugin DaemonSet of release 'r' in namespace 'n' yet",
    }


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
