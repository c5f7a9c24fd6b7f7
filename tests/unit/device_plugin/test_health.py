"""Whether NVIDIA's device plugin works once installed: its DaemonSet and what the nodes
advertise (``plugins/module_utils/device_plugin/health.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import health as dph

from tests.unit.device_plugin.plugin_inputs import GPU_LABEL, ON_DRA, ON_PLUGIN
from tests.unit.kube import api_objects
from tests.unit.kube.api_objects import node

pytestmark = pytest.mark.unit

RELEASE = "nvidia-device-plugin"
SELECTOR = GPU_LABEL | ON_PLUGIN


def daemonset(name: str = "nvidia-device-plugin", release: str = RELEASE, **status: int) -> dict:
    return api_objects.daemonset(name, release, {"nodeSelector": SELECTOR}, **status)


# ----------------------------------------------------------------------------- the DaemonSet


def test_the_plugin_daemonset_is_found_among_the_charts_others() -> None:
    found = [
        daemonset("nvidia-device-plugin-mps-control-daemon"),
        daemonset("nvidia-device-plugin-gpu-feature-discovery"),
        daemonset("nvidia-device-plugin", release="other"),
        daemonset("nvidia-device-plugin"),
    ]
    assert dph.find_daemonset(found, RELEASE) is found[3]
    sim = daemonset("nvdp-gpufleet-gpu-simulator-device-plugin", release="nvdp")
    assert dph.find_daemonset([sim], "nvdp") is sim
    assert dph.find_daemonset(found, RELEASE, "nvidia-device-plugin-mps-control-daemon") is found[0]
    assert dph.find_daemonset(found[:3], RELEASE) is None


def test_zero_of_zero_is_final_and_names_the_nodes_it_misses() -> None:
    nodes = [node("h100-01", GPU_LABEL), node("h200-01", GPU_LABEL | ON_DRA)]
    ds = daemonset(desired=0, ready=0, updated=0)
    verdict = dph.daemonset_verdict(ds, ["h100-01"], nodes, namespace="nvdp")
    assert (verdict["ok"], verdict["final"]) == (False, True)
    assert verdict["message"] == (
        "DaemonSet nvdp/nvidia-device-plugin is scheduled on 0 node(s) but there are 1 "
        "device-plugin node(s) (desiredNumberScheduled 0, numberReady 0, updated 0); a "
        "DaemonSet with 0 of 0 pods ready runs nowhere; h100-01 lacks the label(s) "
        "gpufleet.io/gpu-path=device-plugin that nodeSelector requires; fix: label the nodes "
        "with the gpu_node_labels role (gpufleet.io/gpu-path=device-plugin on the "
        "device-plugin pools, gpufleet.io/gpu-path=dra on the others) or set "
        "device_plugin_node_selector to match them"
    )


def test_a_pod_on_a_dra_node_is_final_and_named() -> None:
    nodes = [node("h100-01", SELECTOR), node("h200-01", SELECTOR)]
    verdict = dph.daemonset_verdict(daemonset(), ["h100-01"], nodes)
    assert verdict["final"] is True and verdict["ok"] is False
    assert "; it also fits other node(s) h200-01; fix:" in verdict["message"]


def test_no_daemonset_yet_is_waited_for() -> None:
    verdict = dph.daemonset_verdict(None, ["h100-01"], [], release=RELEASE, namespace="nvdp")
    assert verdict == {
        "ok": False,
        "final": False,
        "message": "no device-plugin DaemonSet of release 'nvidia-device-plugin' in namespace "
        "'nvdp' yet",
    }


# ----------------------------------------------------------------------------- advertised GPUs


def test_each_device_plugin_node_advertises_its_gpus() -> None:
    nodes = [
        node("h100-01", SELECTOR, allocatable={"cpu": "96", "nvidia.com/gpu": "8"}),
        node("h200-01", GPU_LABEL | ON_DRA, allocatable={"cpu": "96"}),
    ]
    verdict = dph.advertised_verdict(nodes, ["h100-01"], ["h200-01"])
    assert verdict == {"ok": True, "gpus": {"h100-01": 8}, "problems": []}


@pytest.mark.parametrize("quantity", ["0", None, "abc"])
def test_a_device_plugin_node_without_gpus_is_named(quantity: Any) -> None:
    allocatable = {} if quantity is None else {"nvidia.com/gpu": quantity}
    verdict = dph.advertised_verdict(
        [node("h100-01", SELECTOR, allocatable=allocatable)], ["h100-01"], []
    )
    assert verdict["ok"] is False and verdict["gpus"] == {"h100-01": 0}
    (problem,) = verdict["problems"]
    shown = (
        "none listed" if quantity is None else f"nvidia.com/gpu={quantity} in status.allocatable"
    )
    assert problem.startswith(f"device-plugin node h100-01 advertises no nvidia.com/gpu ({shown})")


def test_mig_profiles_count_with_the_mixed_strategy_only() -> None:
    mig = node(
        "h100-01", SELECTOR, allocatable={"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "7"}
    )
    assert dph.advertised_verdict([mig], ["h100-01"], [], "mixed")["gpus"] == {"h100-01": 7}
    single = dph.advertised_verdict([mig], ["h100-01"], [], "single")
    assert single["ok"] is False and single["gpus"] == {"h100-01": 0}


def test_a_dra_node_that_advertises_is_two_advertisers() -> None:
    nodes = [
        node("h100-01", SELECTOR, allocatable={"nvidia.com/gpu": "8"}),
        node("h200-01", GPU_LABEL | ON_DRA, allocatable={"nvidia.com/gpu": "8"}),
    ]
    verdict = dph.advertised_verdict(nodes, ["h100-01"], ["h200-01"])
    assert verdict["ok"] is False
    assert verdict["problems"] == [
        "DRA node h200-01 advertises nvidia.com/gpu=8 in status.allocatable: a device plugin "
        "runs there besides the DRA driver, and one GPU can go to two pods; fix: label it with "
        "the gpu_node_labels role (gpufleet.io/gpu-path=dra) and remove any other device plugin "
        "from it (GPU Operator devicePlugin.enabled=false)"
    ]


@pytest.mark.parametrize(
    ("quantity", "bad"), [("0", False), ("2", True), ("1k", True), ("-1", True)]
)
def test_a_dra_node_fails_closed_on_a_quantity_that_is_no_count(quantity: str, bad: bool) -> None:
    dra = node("h200-01", ON_DRA, allocatable={"nvidia.com/gpu": quantity})
    verdict = dph.advertised_verdict([dra], [], ["h200-01"])
    assert verdict["ok"] is not bad


def test_a_device_plugin_host_without_a_node_is_named() -> None:
    verdict = dph.advertised_verdict([], ["h100-01"], ["h200-01"])
    assert verdict["problems"] == ["device-plugin node h100-01 has no Node object"]
