"""Feature gates read from kubeadm's ConfigMaps (``plugins/module_utils/gate_audit/checks.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import checks as gc
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf

pytestmark = pytest.mark.unit


V1BETA3_INPUT = (
    Path(__file__).resolve().parents[1] / "data" / "kubeadm" / "1.33.13" / "input" / "v1beta3.yaml"
)


def test_v1beta3_extra_args_map_is_read() -> None:
    text = V1BETA3_INPUT.read_text()
    flags, problems = gc.configmap_flags(gf.ConfigMapFacts(text, text))
    assert problems == []
    assert flags["kube-apiserver"].feature_gates == {"DynamicResourceAllocation": True}
    assert flags["kube-apiserver"].runtime_config == {"resource.k8s.io/v1beta1": "true"}
    assert flags["kube-scheduler"].feature_gates == {"DynamicResourceAllocation": True}
    assert flags["kubelet"].feature_gates == {"DynamicResourceAllocation": True}


def test_unparseable_configmap_is_reported_not_raised() -> None:
    flags, problems = gc.configmap_flags(gf.ConfigMapFacts("kind: [", "apiVersion: v1\n"))
    assert flags == {}
    assert [p.id for p in problems] == ["gates.source-unreadable"] * 2
