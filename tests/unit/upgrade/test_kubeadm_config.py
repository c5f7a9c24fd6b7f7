"""kubeadm's side of the upgrade: the UpgradeConfiguration and the settings the kubeadm
ConfigMaps hold (plugins/module_utils/upgrade/kubeadm_config.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import kubeadm_config as ukc

pytestmark = pytest.mark.unit


def test_upgrade_configuration_document():
    doc = ukc.upgrade_configuration(
        "1.37.2", ignore_preflight_errors=["Swap"], image_pull_policy="Never"
    )
    assert doc["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert doc["kind"] == "UpgradeConfiguration"
    assert doc["apply"]["kubernetesVersion"] == "v1.37.2"
    assert doc["apply"]["imagePullPolicy"] == "Never"
    assert doc["node"]["ignorePreflightErrors"] == ["Swap"]
    assert "kubernetesVersion" not in doc["node"]
    assert ukc.upgrade_configuration("1.30.14") is None


def test_v1beta3_extra_args_map_is_read_too():
    current = ukc.settings_from_configmaps(
        {"scheduler": {"extraArgs": {"feature-gates": "DynamicResourceAllocation=true"}}}, None
    )
    assert current["kube-scheduler"]["feature_gates"] == {"DynamicResourceAllocation": True}
    assert current["kubelet"]["feature_gates"] == {}


def test_kubelet_gates_of_the_configmap_are_yaml_booleans() -> None:
    kubelet = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "featureGates": {"DRAA": False}}
    current = ukc.settings_from_configmaps(None, kubelet)
    assert current["kubelet"]["feature_gates"] == {"DRAA": False}


@pytest.mark.parametrize("value", ["false", "true", 0, None])
def test_a_kubelet_gate_that_is_not_a_boolean_is_refused(value: object) -> None:
    # the kubelet decodes featureGates as map[string]bool: "false" does not start it, and
    # bool("false") would have read it as on
    kubelet = {"featureGates": {"DRAPartitionableDevices": value}}
    with pytest.raises(dra_core.VersionParseError) as err:
        ukc.settings_from_configmaps(None, kubelet)
    assert f"featureGates.DRAPartitionableDevices = {value!r} is not a boolean" in str(err.value)
    assert "kubeadm ConfigMap kubelet-config" in str(err.value)
