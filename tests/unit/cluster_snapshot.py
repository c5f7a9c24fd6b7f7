"""Cluster snapshots for the upgrade tests, in the shape ``upgrade.cluster.read_cluster``
returns and ``upgrade_plan`` reads (``snapshot``/``upgrade_snapshot``, schema 1).

``node``/``apiserver_pod``/``resource_slice`` build one API object each; ``snapshot``
builds a whole cluster from a control-plane host and GPU hosts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

GPU_DRIVER = "gpu.nvidia.com"


def node(
    name: str, version: str, unschedulable: bool = False, ready: bool | str = True
) -> dict[str, Any]:
    """A Node whose kubelet runs ``version`` (``"1.37.2"``); ``ready`` True/False or the
    condition's status text (``"Unknown"``)."""
    status = ready if isinstance(ready, str) else ("True" if ready else "False")
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "nodeInfo": {"kubeletVersion": f"v{version}"},
            "conditions": [{"type": "Ready", "status": status}],
        },
    }


def apiserver_pod(node_name: str, version: str) -> dict[str, Any]:
    """kube-apiserver's static pod on ``node_name``, running the image of ``version``."""
    return {
        "metadata": {"labels": {"component": "kube-apiserver"}},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {"name": "kube-apiserver", "image": f"registry.k8s.io/kube-apiserver:v{version}"}
            ],
        },
    }


def resource_slice(node_name: str, devices: int, driver: str = GPU_DRIVER) -> dict[str, Any]:
    """A ResourceSlice of ``driver`` on ``node_name`` with ``devices`` devices."""
    return {"spec": {"driver": driver, "nodeName": node_name, "devices": [{}] * devices}}


def snapshot(
    version: str,
    control_plane: str,
    gpu_hosts: Sequence[str],
    *,
    node_names: Mapping[str, str] | None = None,
    devices: int = 4,
    kubelet_gates: Mapping[str, bool] | None = None,
    cluster_uid: str | None = None,
) -> dict[str, Any]:
    """Every host at ``version``: ``control_plane`` runs kube-apiserver, each of
    ``gpu_hosts`` publishes one slice of ``devices`` devices; ``node_names`` maps an
    inventory host to its Node name (the host's own name when absent); ``kubelet_gates``
    are the kubelet-config ConfigMap's featureGates."""
    names = dict(node_names or {})
    hosts = [control_plane, *gpu_hosts]
    snap: dict[str, Any] = {
        "schema": 1,
        "nodes": [node(names.get(h, h), version) for h in hosts],
        "pods": [apiserver_pod(names.get(control_plane, control_plane), version)],
        "resourceslices": [resource_slice(names.get(h, h), devices) for h in gpu_hosts],
        "kubeadm_versions": {h: f"v{version}" for h in hosts},
        "cluster_configuration": {},
        "kubelet_configuration": {"featureGates": dict(kubelet_gates or {})},
    }
    if cluster_uid is not None:
        snap["cluster_uid"] = cluster_uid
    return snap
