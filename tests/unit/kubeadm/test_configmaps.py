"""kubeadm's ConfigMaps read and written through the API
(``plugins/module_utils/kubeadm/configmaps.py``), against a stand-in for the client; the
real API server is used in ``tests/integration/test_kubeadm_configmaps.py``."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import configmaps as kcm

pytestmark = pytest.mark.unit

CLUSTER_CONFIGURATION = (
    "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\n"
)


class FakeKube:
    """ConfigMaps by API path; a missing one is a 404."""

    def __init__(self, **configmaps: dict[str, Any]) -> None:
        self.objects = {
            kcm.configmap_path(name.replace("_", "-")): cm for name, cm in configmaps.items()
        }
        self.asked: list[str] = []
        self.requests: list[tuple[str, str, Any]] = []

    def get(self, path: str) -> dict[str, Any]:
        self.asked.append(path)
        if path not in self.objects:
            raise vk.KubeError(404, "not found")
        return self.objects[path]

    def request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        self.requests.append((method, path, body))
        return body


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "kube-system"}, "data": data}


def test_paths_refs_and_the_version_of_a_cluster_configuration() -> None:
    assert kcm.configmap_path("kubeadm-config") == (
        "/api/v1/namespaces/kube-system/configmaps/kubeadm-config"
    )
    assert kcm.ref(configmap("kubelet-config")) == "kube-system/kubelet-config"
    assert kcm.kubernetes_version_of(CLUSTER_CONFIGURATION) == "v1.36.3"
    assert kcm.kubernetes_version_of(None) is None
    assert kcm.kubernetes_version_of(": :") is None


def test_a_missing_configmap_is_none_and_other_failures_raise() -> None:
    assert kcm.read_configmap(FakeKube(), "kubeadm-config") is None

    class Refusing(FakeKube):
        def get(self, path: str) -> dict[str, Any]:
            raise vk.KubeError(403, "forbidden")

    with pytest.raises(vk.KubeError, match="forbidden"):
        kcm.read_configmap(Refusing(), "kubeadm-config")


def test_a_cluster_without_kubeadm_config_is_not_asked_for_the_old_kubelet_name() -> None:
    kube = FakeKube()
    found = kcm.read_kubeadm_configmaps(kube, "1.37.2")
    assert found.kubeadm is None and found.kubelet is None
    asked = [kcm.configmap_path(name) for name in ("kubeadm-config", "kubelet-config")]
    assert kube.asked == asked


def test_kubelet_config_falls_back_to_the_old_name_of_the_cluster_minor() -> None:
    kube = FakeKube(
        kubeadm_config=configmap("kubeadm-config", ClusterConfiguration=CLUSTER_CONFIGURATION),
        **{
            "kubelet_config_1.36": configmap(
                "kubelet-config-1.36", kubelet="kind: KubeletConfiguration"
            )
        },
    )
    found = kcm.read_kubeadm_configmaps(kube)
    assert found.cluster_configuration == CLUSTER_CONFIGURATION
    assert found.kubelet_configuration == "kind: KubeletConfiguration"
    assert found.kubelet_ref == "kube-system/kubelet-config-1.36"


def test_without_the_kubelet_only_kubeadm_config_is_read() -> None:
    kube = FakeKube(kubeadm_config=configmap("kubeadm-config"))
    found = kcm.read_kubeadm_configmaps(kube, kubelet=False)
    assert found.kubelet is None and found.kubelet_ref == "kube-system/kubelet-config"
    assert kube.asked == [kcm.configmap_path("kubeadm-config")]


def test_replace_puts_the_configmap_back_at_its_path() -> None:
    kube = FakeKube()
    cm = configmap("kubeadm-config", ClusterConfiguration=CLUSTER_CONFIGURATION)
    kcm.replace_configmap(kube, cm)
    assert kube.requests == [("PUT", kcm.configmap_path("kubeadm-config"), cm)]
