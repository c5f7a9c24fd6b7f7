"""GPU nodes the driver's kubelet plugin would miss: labels, affinity, taints, the device plugin
(``plugins/module_utils/dra_driver/nodes.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import nodes as ddn
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

from tests.unit.dra_driver.driver_inputs import GPU_LABEL, inputs, node

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


def test_node_condition_taints_do_not_stop_a_daemonset() -> None:
    values = ddv.plan(inputs()).values
    pressure = [{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}]
    assert ddn.node_problems([node("gpu-1", GPU_LABEL, taints=pressure)], ["gpu-1"], values) == []


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
