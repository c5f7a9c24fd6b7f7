"""GPU nodes the driver's kubelet plugin would miss: labels, affinity, taints, the device plugin
(``plugins/module_utils/dra_driver/nodes.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import nodes as ddn
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

from tests.unit.dra_driver.driver_inputs import GPU_LABEL, inputs
from tests.unit.kube.api_objects import node

pytestmark = pytest.mark.unit


def test_unlabelled_gpu_node_is_named() -> None:
    nodes = [node("gpu-1", GPU_LABEL), node("gpu-2", {}), node("cpu-1", {})]
    values = ddv.plan(inputs()).values
    problems = ddn.node_problems(nodes, ["gpu-1", "gpu-2"], values)
    assert len(problems) == 1
    assert problems[0].startswith("GPU node gpu-2 lacks the label(s) nvidia.com/gpu.present=true")
    assert "gpu_node_labels" in problems[0]


def test_chart_default_affinity_applies_without_node_selector() -> None:
    values = ddv.plan(inputs(node_selector={})).values
    nfd = node("gpu-1", {"feature.node.kubernetes.io/pci-10de.present": "true"})
    bare = node("gpu-2", {"kubernetes.io/os": "linux"})
    problems = ddn.node_problems([nfd, bare], ["gpu-1", "gpu-2"], values)
    assert len(problems) == 1 and "gpu-2" in problems[0]
    assert "nvidia.com/gpu.present=true" in problems[0] and "required node affinity" in problems[0]


def test_pci_0302_label_counts_only_for_semver_chart() -> None:
    values = ddv.plan(inputs(node_selector={})).values
    n = node("gpu-1", {"feature.node.kubernetes.io/pci-0302_10de.present": "true"})
    assert ddn.node_problems([n], ["gpu-1"], values) == []
    assert ddn.node_problems([n], ["gpu-1"], values, legacy_chart=True) != []


def test_untolerated_taint_is_named() -> None:
    values = ddv.plan(inputs()).values
    n = node(
        "gpu-1", GPU_LABEL, taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    )
    problems = ddn.node_problems([n], ["gpu-1"], values)
    assert "taint dedicated=ml:NoSchedule" in problems[0]
    tolerant = ddv.plan(inputs(node_taints=[{"key": "dedicated", "effect": "NoSchedule"}])).values
    assert ddn.node_problems([n], ["gpu-1"], tolerant) == []


def test_device_plugin_on_gpu_node_is_refused_unless_coexisting() -> None:
    values = ddv.plan(inputs()).values
    n = node("gpu-1", GPU_LABEL, allocatable={"cpu": "8", "nvidia.com/gpu": "8"})
    problems = ddn.node_problems([n], ["gpu-1"], values)
    assert len(problems) == 1 and "nvidia.com/gpu=8" in problems[0]
    assert "dra_driver_coexist_with_device_plugin" in problems[0]
    assert ddn.node_problems([n], ["gpu-1"], values, coexist_with_device_plugin=True) == []


def test_gpu_host_without_node_is_named() -> None:
    problems = ddn.node_problems([], ["gpu-9"], ddv.plan(inputs()).values)
    assert problems and problems[0].startswith("GPU node gpu-9: no Node object")


# ----------------------------------------------------------------------------- GPU paths

DP = {"gpufleet.io/gpu-path": "device-plugin"}
DRA = {"gpufleet.io/gpu-path": "dra"}


def test_with_a_device_plugin_pool_the_plugin_stays_off_its_nodes() -> None:
    values = ddv.plan(inputs(device_plugin_pool=True)).values
    nodes = [node("h200-01", GPU_LABEL | DRA), node("h100-01", GPU_LABEL | DP)]
    assert ddn.node_problems(nodes, ["h200-01"], values, device_plugin_nodes=["h100-01"]) == []


def test_a_device_plugin_node_the_kubelet_plugin_would_reach_is_refused() -> None:
    # the node still carries the path of the pool it left (gpu_node_labels has not run)
    values = ddv.plan(inputs(device_plugin_pool=True)).values
    unlabelled = node("h100-01", GPU_LABEL | DRA)
    problems = ddn.node_problems(
        [unlabelled], [], values, coexist_with_device_plugin=True, device_plugin_nodes=["h100-01"]
    )
    assert problems == [
        "GPU node h100-01 is on the device-plugin path (group gpu_path_device_plugin) but the "
        "kubelet plugin would run there too, and both would hand out its GPUs; fix: label it "
        "with the gpu_node_labels role (gpufleet.io/gpu-path=device-plugin) and keep "
        "gpufleet.io/gpu-path out of dra_driver_node_selector and "
        "dra_driver_extra_values.kubeletPlugin"
    ]


def test_the_device_plugin_refusal_looks_at_dra_nodes_only() -> None:
    values = ddv.plan(inputs(device_plugin_pool=True)).values
    advertising = node("h100-01", GPU_LABEL | DP, allocatable={"nvidia.com/gpu": "8"})
    dra = node("h200-01", GPU_LABEL | DRA, allocatable={"nvidia.com/gpu": "0"})
    assert (
        ddn.node_problems([advertising, dra], ["h200-01"], values, device_plugin_nodes=["h100-01"])
        == []
    )
    dra["status"]["allocatable"]["nvidia.com/gpu"] = "8"
    (problem,) = ddn.node_problems(
        [advertising, dra], ["h200-01"], values, device_plugin_nodes=["h100-01"]
    )
    assert problem.startswith("GPU node h200-01 advertises nvidia.com/gpu=8 in status.allocatable")
