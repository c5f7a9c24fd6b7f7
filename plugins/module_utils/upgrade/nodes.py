# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The nodes of a rolling upgrade as the cluster and their hosts report them.

Pure: no I/O. ``nodes_from_objects`` turns what the API returns (one list of Nodes, one
list of kube-system Pods, one list of ResourceSlices) plus the kubeadm version read on
each host into ``NodeState`` records, the input of ``upgrade.plan.build_plan``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import NVIDIA_DRIVER
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.input import UpgradePlanError


@dataclass(frozen=True)
class NodeState:
    """One node as the cluster and its host report it.

    ``host``: inventory name; ``name``: Kubernetes node name; versions are plain
    (``"1.36.3"``) or None when unknown (``apiserver`` is None on workers);
    ``gpu_devices``: devices of the GPU driver published for the node (ResourceSlices);
    ``unschedulable``: cordoned before the upgrade starts.
    """

    host: str
    name: str
    control_plane: bool
    kubelet: str | None = None
    apiserver: str | None = None
    kubeadm: str | None = None
    gpu_devices: int = 0
    unschedulable: bool = False
    ready: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "name": self.name,
            "control_plane": self.control_plane,
            "kubelet": self.kubelet,
            "apiserver": self.apiserver,
            "kubeadm": self.kubeadm,
            "gpu_devices": self.gpu_devices,
            "unschedulable": self.unschedulable,
            "ready": self.ready,
        }


_TAG_RE = re.compile(r":v?(\d+\.\d+\.\d+[0-9A-Za-z.\-+]*)$")


def _plain(version: str | None) -> str | None:
    if not version:
        return None
    v = dra_core.parse_version(str(version))
    return str(v)


def _image_version(image: str) -> str | None:
    match = _TAG_RE.search(image or "")
    return match.group(1) if match else None


def _count_devices(slices: Iterable[Mapping[str, Any]], driver: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if not node or spec.get("driver") != driver:
            continue
        out[node] = out.get(node, 0) + len(spec.get("devices") or [])
    return out


def nodes_from_objects(
    hosts: Sequence[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]] = (),
    kubeadm_versions: Mapping[str, str | None] | None = None,
    gpu_driver: str = NVIDIA_DRIVER,
) -> list[NodeState]:
    """Build NodeState records in inventory order.

    ``hosts``: ``[{host, name, control_plane}]`` from the inventory (``name`` is the
    Kubernetes node name, host var ``kubernetes_node_name``); ``nodes``: Node objects as
    dicts (``status.nodeInfo.kubeletVersion``, ``spec.unschedulable``, the Ready
    condition); ``pods``: kube-system Pods (the ``kube-apiserver`` static pods, label
    ``component=kube-apiserver``: version from the image tag, node from
    ``spec.nodeName``); ``slices``: ResourceSlices (devices of ``gpu_driver`` per
    ``spec.nodeName``); ``kubeadm_versions``: host -> ``kubeadm version -o short`` output.

    Raises UpgradePlanError when an inventory host has no Node object.
    """
    by_name = {(n.get("metadata") or {}).get("name"): n for n in nodes}
    apiservers: dict[str, str] = {}
    for p in pods:
        meta = p.get("metadata") or {}
        if (meta.get("labels") or {}).get("component") != "kube-apiserver":
            continue
        node = (p.get("spec") or {}).get("nodeName")
        containers = (p.get("spec") or {}).get("containers") or []
        image = next(
            (c.get("image", "") for c in containers if c.get("name") == "kube-apiserver"),
            containers[0].get("image", "") if containers else "",
        )
        version = _image_version(image)
        if node and version:
            apiservers[node] = version
    devices = _count_devices(slices, gpu_driver)
    kubeadm_versions = kubeadm_versions or {}
    out: list[NodeState] = []
    for h in hosts:
        name = h["name"]
        node = by_name.get(name)
        if node is None:
            raise UpgradePlanError(
                f"inventory host {h['host']!r} names Kubernetes node {name!r}, which the "
                "cluster does not have.",
                "set kubernetes_node_name of the host to its node name (kubectl get nodes) "
                "or remove the host from the inventory.",
            )
        status = node.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        out.append(
            NodeState(
                host=h["host"],
                name=name,
                control_plane=bool(h.get("control_plane")),
                kubelet=_plain((status.get("nodeInfo") or {}).get("kubeletVersion")),
                apiserver=_plain(apiservers.get(name)),
                kubeadm=_plain(kubeadm_versions.get(h["host"])),
                gpu_devices=devices.get(name, 0),
                unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
                ready=conditions.get("Ready") == "True",
            )
        )
    return out


def versions_of(node: NodeState) -> list[tuple[str, dra_core.KubeVersion]]:
    """``(component, version)`` of each of kubelet, kube-apiserver and kubeadm that
    ``node`` reports a version for. Raises VersionParseError for a malformed one."""
    out = []
    for component in ("kubelet", "apiserver", "kubeadm"):
        raw = getattr(node, component)
        if raw:
            out.append((component, dra_core.parse_version(raw, f"{node.host} {component} version")))
    return out


def needs(node: NodeState, version: dra_core.KubeVersion) -> bool:
    """Whether a component of ``node`` runs a release older than ``version``."""
    return any(v < version for _unused, v in versions_of(node))
