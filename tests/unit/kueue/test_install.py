"""Kueue's release manifests prepared for the cluster: image, gates, device-class mappings and
placement (``plugins/module_utils/kueue/install.py``).
"""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import install as ki
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq

from tests.unit.kueue.kueue_manifests import RELEASE, _module_manifests

pytestmark = pytest.mark.unit


def test_manifests_get_image_gate_mappings_and_placement() -> None:
    docs, config = _module_manifests()
    mappings = kq.device_class_mappings(["gpu.nvidia.com", "mig.nvidia.com"])
    out = ki.prepare_manifests(
        docs,
        RELEASE,
        image="registry.example:5000/kueue/kueue:v0.17.0",
        config=config,
        mappings=mappings,
        host_network=True,
        api_server="10.89.72.10:6443",
        node_selector={"node-role.kubernetes.io/control-plane": ""},
    )
    assert [d["kind"] for d in out] == ["Deployment", "ConfigMap"]  # APIService dropped
    pod = out[0]["spec"]["template"]["spec"]
    manager = pod["containers"][0]
    assert manager["image"] == "registry.example:5000/kueue/kueue:v0.17.0"
    assert manager["args"][-1] == "--feature-gates=DynamicResourceAllocation=true"
    assert {"name": "KUBERNETES_SERVICE_HOST", "value": "10.89.72.10"} in manager["env"]
    assert pod["hostNetwork"] is True
    written = json.loads(out[1]["data"]["controller_manager_config.yaml"])
    assert written["resources"]["deviceClassMappings"] == mappings
    assert written["integrations"] == config["integrations"]  # the rest kept
    assert docs[0]["spec"]["template"]["spec"]["containers"][0]["image"] != manager["image"]


def test_manifests_of_another_config_api_are_refused() -> None:
    docs, config = _module_manifests()
    config["apiVersion"] = "config.kueue.x-k8s.io/v1beta1"
    with pytest.raises(ki.KueueManifestError, match=r"reads config\.kueue\.x-k8s\.io/v1beta2"):
        ki.prepare_manifests(docs, RELEASE, image="i", config=config, mappings=[])
