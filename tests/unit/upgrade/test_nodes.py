"""The nodes of an upgrade read from API objects (plugins/module_utils/upgrade/nodes.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import input as upgrade_input
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import nodes as un

from tests.unit.cluster_snapshot import node as api_node

pytestmark = pytest.mark.unit


def test_nodes_from_objects_reads_versions_devices_and_cordon():
    hosts = [
        {"host": "cp", "name": "lab-cp", "control_plane": True},
        {"host": "gpu1", "name": "lab-gpu-1", "control_plane": False},
    ]
    nodes = [api_node("lab-cp", "1.36.3"), api_node("lab-gpu-1", "1.36.3", True, "False")]
    pods = [
        {
            "metadata": {"labels": {"component": "kube-apiserver"}},
            "spec": {
                "nodeName": "lab-cp",
                "containers": [
                    {"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.36.3"}
                ],
            },
        }
    ]
    slices = [
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "lab-gpu-1", "devices": [{}, {}]}},
        {"spec": {"driver": "other.example.com", "nodeName": "lab-gpu-1", "devices": [{}]}},
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "lab-gpu-1", "devices": [{}]}},
    ]
    states = un.nodes_from_objects(hosts, nodes, pods, slices, {"cp": "v1.36.3", "gpu1": None})
    assert states[0] == un.NodeState("cp", "lab-cp", True, "1.36.3", "1.36.3", "1.36.3", 0)
    assert states[1].gpu_devices == 3
    assert states[1].unschedulable and not states[1].ready
    assert states[1].kubeadm is None and states[1].apiserver is None


def test_host_without_a_node_object_is_refused():
    with pytest.raises(upgrade_input.UpgradePlanError, match="kubernetes_node_name"):
        un.nodes_from_objects([{"host": "x", "name": "x", "control_plane": True}], [], [])
