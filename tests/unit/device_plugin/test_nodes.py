"""Where NVIDIA's device plugin DaemonSet would run with the planned values, checked before
the install (``plugins/module_utils/device_plugin/nodes.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import chart as dpc
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import nodes as dpn
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import values as dpv

from tests.unit.device_plugin.plugin_inputs import (
    GPU_LABEL,
    ON_DRA,
    ON_PLUGIN,
    STAND_IN_CHART,
    inputs,
)
from tests.unit.kube.api_objects import node

pytestmark = pytest.mark.unit


def test_each_pool_gets_its_own_path() -> None:
    values = dpv.plan(inputs()).values
    nodes = [node("h100-01", GPU_LABEL | ON_PLUGIN), node("h200-01", GPU_LABEL | ON_DRA)]
    assert dpn.node_problems(nodes, ["h100-01"], ["h200-01"], values) == []


def test_a_device_plugin_node_without_its_path_label_is_named_with_the_fix() -> None:
    values = dpv.plan(inputs()).values
    (problem,) = dpn.node_problems([node("h100-01", GPU_LABEL)], ["h100-01"], [], values)
    assert problem == (
        "device-plugin node h100-01 lacks the label(s) gpufleet.io/gpu-path=device-plugin that "
        "nodeSelector requires, so the device plugin would not run there; fix: label it with "
        "the gpu_node_labels role (playbooks/gpu_node_labels.yml: "
        "gpufleet.io/gpu-path=device-plugin and the GPU labels) or set "
        "device_plugin_node_selector/device_plugin_node_taints to what it carries"
    )


def test_a_device_plugin_host_without_a_node_is_named() -> None:
    values = dpv.plan(inputs()).values
    (problem,) = dpn.node_problems([], ["h100-01"], [], values)
    assert problem.startswith("device-plugin node h100-01: no Node object of that name")


def test_a_dra_node_the_plugin_would_reach_is_refused() -> None:
    # values whose selector and affinity no longer ask for the path (as extra values could
    # make them) reach the DRA pool too
    values = dpv.plan(inputs()).values
    values["nodeSelector"] = dict(GPU_LABEL)
    values["affinity"] = {}
    nodes = [node("h100-01", GPU_LABEL | ON_PLUGIN), node("h200-01", GPU_LABEL | ON_DRA)]
    (problem,) = dpn.node_problems(nodes, ["h100-01"], ["h200-01"], values)
    assert problem.startswith(
        "DRA node h200-01 would get the device plugin too, and both it and the DRA driver would "
        "hand out its GPUs; fix: label it with the gpu_node_labels role "
        "(gpufleet.io/gpu-path=dra)"
    )


def test_the_roles_affinity_decides_where_the_charts_default_would_not() -> None:
    # a pool labelled with its own labels only, no Node Feature Discovery and no
    # nvidia.com/gpu.present: the chart's default affinity would keep the plugin off it
    labels = {"pool": "training"} | ON_PLUGIN
    pool = node("h100-01", labels)
    values = dpv.plan(inputs(node_selector={"pool": "training"})).values
    assert dpn.node_problems([pool], ["h100-01"], [], values) == []
    chart_default = {k: v for k, v in values.items() if k != "affinity"}
    (problem,) = dpn.node_problems([pool], ["h100-01"], [], chart_default)
    assert "matches none of the device plugin's required node affinity terms" in problem
    assert "nvidia.com/gpu.present=true" in problem
    assert dpn.placement(chart_default)["affinity"] == dpc.DEFAULT_AFFINITY


def test_an_untolerated_taint_is_named() -> None:
    values = dpv.plan(inputs()).values
    tainted = node(
        "h100-01",
        GPU_LABEL | ON_PLUGIN,
        taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
    )
    (problem,) = dpn.node_problems([tainted], ["h100-01"], [], values)
    assert "has the taint dedicated=ml:NoSchedule that tolerations do not tolerate" in problem
    gpu_taint = node(
        "h100-01", GPU_LABEL | ON_PLUGIN, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    )
    assert dpn.node_problems([gpu_taint], ["h100-01"], [], values) == []


def test_the_stand_ins_placement_is_read_from_its_own_values() -> None:
    values = dpv.plan(
        inputs(chart_path="/lab/chart", local_chart=STAND_IN_CHART, chart_stand_in=True)
    ).values
    where = dpn.placement(values, stand_in=True)
    assert where["nodeSelector"] == GPU_LABEL | ON_PLUGIN
    nodes = [node("gpu-1", GPU_LABEL | ON_PLUGIN), node("gpu-2", GPU_LABEL | ON_DRA)]
    assert dpn.node_problems(nodes, ["gpu-1"], ["gpu-2"], values, stand_in=True) == []
    (problem,) = dpn.node_problems(nodes, ["gpu-2"], [], values, stand_in=True)
    assert problem.startswith("device-plugin node gpu-2 lacks the label(s) gpufleet.io/gpu-path")
