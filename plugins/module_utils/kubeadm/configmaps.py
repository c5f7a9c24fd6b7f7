# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The ConfigMaps kubeadm keeps in ``kube-system``, read (and replaced) in one place.

``kubeadm-config`` (key ``ClusterConfiguration``: the ClusterConfiguration every
``kubeadm upgrade`` and ``kubeadm join --control-plane`` renders the control plane from)
and ``kubelet-config`` (key ``kubelet``: the KubeletConfiguration every ``kubeadm join`` and
``kubeadm upgrade node`` writes to the node). Clusters made before kubeadm 1.24 name the
second ``kubelet-config-1.X`` (X the minor of ``kubernetesVersion``); it is read when
``kubelet-config`` is absent. Source: kubeadm's ``cmd/kubeadm/app/constants/constants.go``
(``KubeadmConfigConfigMap``, ``KubeletBaseConfigurationConfigMap``) and the
``UnversionedKubeletConfigMap`` change of 1.24.

Objects are the API's JSON (``metadata``, ``data``) through ``kube.client.Kube``, whose
requests have connect and read timeouts. Errors: ``kube.client.KubeError`` (a status
other than 404, or no answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

NAMESPACE = "kube-system"
KUBEADM_CONFIG = "kubeadm-config"
CLUSTER_CONFIGURATION = "ClusterConfiguration"
KUBELET_CONFIG = "kubelet-config"
KUBELET_KEY = "kubelet"


def configmap_path(name: str, namespace: str = NAMESPACE) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps/{name}"


def read_configmap(kube: vk.Kube, name: str) -> dict[str, Any] | None:
    """ConfigMap ``kube-system/<name>`` as the API's JSON, or None when it does not exist.
    Raises KubeError for any other failure."""
    try:
        return kube.get(configmap_path(name))
    except vk.KubeError as err:
        if err.status == 404:
            return None
        raise


def replace_configmap(kube: vk.Kube, cm: dict[str, Any]) -> dict[str, Any]:
    """PUT ``cm`` back (its ``metadata.resourceVersion`` makes a concurrent change a 409).
    Raises KubeError."""
    meta = cm.get("metadata") or {}
    return kube.request(
        "PUT", configmap_path(meta["name"], meta.get("namespace") or NAMESPACE), body=cm
    )


def ref(cm: dict[str, Any]) -> str:
    """``kube-system/kubelet-config``."""
    meta = cm.get("metadata") or {}
    return f"{meta.get('namespace') or NAMESPACE}/{meta.get('name')}"


def kubernetes_version_of(cluster_configuration: str | None) -> str | None:
    """``kubernetesVersion`` of a ClusterConfiguration document (None when absent or
    unreadable)."""
    if not cluster_configuration:
        return None
    try:
        docs = ig.load_yaml_documents(cluster_configuration, CLUSTER_CONFIGURATION)
    except ig.InputError:
        return None
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == CLUSTER_CONFIGURATION:
            return str(doc.get("kubernetesVersion") or "") or None
    return None


@dataclass
class KubeadmConfigMaps:
    """What :func:`read_kubeadm_configmaps` found; None where a ConfigMap is absent."""

    kubeadm: dict[str, Any] | None
    kubelet: dict[str, Any] | None

    @property
    def cluster_configuration(self) -> str | None:
        return ((self.kubeadm or {}).get("data") or {}).get(CLUSTER_CONFIGURATION)

    @property
    def kubelet_configuration(self) -> str | None:
        return ((self.kubelet or {}).get("data") or {}).get(KUBELET_KEY)

    @property
    def kubelet_ref(self) -> str:
        return ref(self.kubelet) if self.kubelet else f"{NAMESPACE}/{KUBELET_CONFIG}"


def read_kubeadm_configmaps(
    kube: vk.Kube, version: str | None = None, *, kubelet: bool = True
) -> KubeadmConfigMaps:
    """``kubeadm-config`` and (unless ``kubelet`` is false) ``kubelet-config``, else
    ``kubelet-config-1.X`` for the minor of ``version`` or, without it, of the
    ClusterConfiguration's ``kubernetesVersion`` (the name kubeadm gave it before 1.24;
    not looked for on a cluster without ``kubeadm-config``, which kubeadm did not make).
    Raises KubeError."""
    kubeadm = read_configmap(kube, KUBEADM_CONFIG)
    found = KubeadmConfigMaps(kubeadm, None)
    if not kubelet:
        return found
    found.kubelet = read_configmap(kube, KUBELET_CONFIG)
    if found.kubelet is None and kubeadm is not None:
        try:
            minor = dra_core.parse_version(
                version or kubernetes_version_of(found.cluster_configuration) or ""
            ).minor_version
        except dra_core.VersionModelError:
            return found
        found.kubelet = read_configmap(kube, f"{KUBELET_CONFIG}-{minor}")
    return found
