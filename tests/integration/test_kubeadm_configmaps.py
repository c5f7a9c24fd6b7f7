"""The kubeadm ConfigMap reader (``kubeadm.configmaps``) against a real kube-apiserver:
the ConfigMaps are made here, the reader's answers are checked against what was made."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import configmaps as kcm

from tests.harness.controlplane import ControlPlane

pytestmark = pytest.mark.integration

StartControlPlane = Callable[..., ControlPlane]

CLUSTER = (
    "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.23.17\n"
)
KUBELET = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def _make(kube: vk.Kube, name: str, key: str, text: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {key: text},
    }
    kube.request("POST", "/api/v1/namespaces/kube-system/configmaps", body=body)


def test_reader_finds_the_old_kubelet_configmap_and_refuses_a_stale_replace(
    start_control_plane: StartControlPlane,
) -> None:
    cp = start_control_plane(with_controllers=False)
    kube = vk.Kube(str(cp.kubeconfig))
    empty = kcm.read_kubeadm_configmaps(kube)
    assert empty.kubeadm is None and empty.kubelet is None
    assert empty.cluster_configuration is None
    _make(kube, "kubeadm-config", "ClusterConfiguration", CLUSTER)
    _make(kube, "kubelet-config-1.23", "kubelet", KUBELET)
    found = kcm.read_kubeadm_configmaps(kube)
    assert found.cluster_configuration == CLUSTER
    assert found.kubelet_configuration == KUBELET
    assert found.kubelet_ref == "kube-system/kubelet-config-1.23"
    # the minor given wins over the ClusterConfiguration's
    assert kcm.read_kubeadm_configmaps(kube, "1.24.0").kubelet is None
    assert kcm.read_kubeadm_configmaps(kube, kubelet=False).kubelet is None

    stale = kcm.read_configmap(kube, "kubeadm-config")
    fresh = kcm.read_configmap(kube, "kubeadm-config")
    fresh["data"]["ClusterConfiguration"] = CLUSTER + "clusterName: a\n"
    kcm.replace_configmap(kube, fresh)
    stale["data"]["ClusterConfiguration"] = CLUSTER + "clusterName: b\n"
    with pytest.raises(vk.KubeError) as err:
        kcm.replace_configmap(kube, stale)
    assert err.value.status == 409
    assert kcm.read_kubeadm_configmaps(kube).cluster_configuration.endswith("clusterName: a\n")
