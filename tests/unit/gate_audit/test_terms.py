"""The gate audit's words: values as the components read them and where kubeadm keeps each
component's configuration (``plugins/module_utils/gate_audit/terms.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import terms as gt

pytestmark = pytest.mark.unit


def test_bool_text() -> None:
    assert (gt.bool_text(True), gt.bool_text(False)) == ("true", "false")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", "true"), ("1", "true"), ("F", "false"), ("TRUE", "true"), ("v1beta1", "v1beta1")],
)
def test_runtime_config_values_as_kube_apiserver_reads_them(value: str, expected: str) -> None:
    assert gt.rc_value(value) == expected


def test_the_kubelet_has_its_own_configmap() -> None:
    assert gt.configmap_for(gt.KUBELET) == "kube-system/kubelet-config"
    for component in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert gt.configmap_for(component) == "kube-system/kubeadm-config"
