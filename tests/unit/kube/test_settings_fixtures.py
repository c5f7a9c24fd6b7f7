"""The kubeadm fixtures that ``tests/integration/test_dra_settings_boot.py`` boots carry the
faults the dra_feature_gates role must repair, and the role's edits (the filter's plan
applied with the modules' editor functions, in this process) remove them."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.filter.dra import MODULE_KEYS
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.manifests import (
    static_pod_flags,
)

from tests.integration.test_dra_settings_boot import (
    FIXTURES,
    STATIC_POD_COMPONENTS,
    VERSIONS,
    apply_role,
)

pytestmark = pytest.mark.unit


def test_role_edits_remove_the_faults_kubeadm_files_carry() -> None:
    """The fixtures start from a broken state, so the boot test below proves the role
    repairs it (not that kubeadm's defaults boot)."""
    for version in VERSIONS:
        fixture = FIXTURES / version / "dra"
        planned = apply_role(version)
        for component in STATIC_POD_COMPONENTS:
            before = static_pod_flags(
                (fixture / "manifests" / f"{component}.yaml").read_text(), component
            )
            after = static_pod_flags(planned.manifests[component], component)
            assert "DRAControlPlaneController" in before.feature_gates, (version, component)
            entry = planned.settings[MODULE_KEYS[component]]
            assert after.feature_gates.items() >= entry["feature_gates"].items()
            assert not set(after.feature_gates) & set(entry["absent_feature_gates"])
            assert not set(after.runtime_config) & set(entry.get("absent_runtime_config", []))
        kubelet = yaml.safe_load(planned.kubelet_config)
        assert "DRAControlPlaneController" not in kubelet.get("featureGates", {})
