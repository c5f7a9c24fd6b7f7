"""Version skew, known-bad releases and provision support (``plugins/module_utils/dra/skew.py``).

Expected values are facts read from the Kubernetes source of each release and the
outcomes the field cases call for.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    transition as dra_transition,
)

pytestmark = pytest.mark.unit


def test_field_case_2_known_bad_kubeadm_release() -> None:
    bad = dra_skew.known_bad_releases("v1.30.0")
    assert [b.fixed_in for b in bad] == ["1.30.1"]
    assert dra_skew.known_bad_releases("1.30.1") == ()
    assert dra_skew.known_bad_releases("1.30") == ()
    t = dra_transition.plan_transition("1.29.6", "1.30.0")
    assert any("known-bad" in w and "featureGates" in w for w in t.warnings)


def test_field_case_9_kubelet_newer_than_an_apiserver_is_refused() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_skew.kubelet_upgrade_allowed("1.31.0", ["1.31.0", "1.30.5"])
    assert "1.30.5" in err.value.reason
    dra_skew.kubelet_upgrade_allowed("1.31.0", ["1.31.0", "1.31.2"])


def test_check_skew() -> None:
    ok = dra_skew.check_skew(
        {
            "kube-apiserver": ["1.36.1", "1.37.0"],
            "kubelet": ["1.34.0", "1.36.1"],
            "kube-scheduler": ["1.36.1"],
        }
    )
    assert ok == []
    bad = dra_skew.check_skew(
        {
            "kube-apiserver": ["1.35.0", "1.37.0"],
            "kubelet": ["1.38.0", "1.33.0"],
            "kube-controller-manager": ["1.35.0"],
        }
    )
    reasons = {(v.component, v.version) for v in bad}
    assert (dra_core.APISERVER, "1.35.0") in reasons  # HA apiservers two minors apart
    assert (dra_core.KUBELET, "1.38.0") in reasons  # newer than the apiservers
    assert (dra_core.KUBELET, "1.33.0") in reasons  # four minors older than 1.37
    assert (dra_core.CONTROLLER_MANAGER, "1.35.0") in reasons  # two older than 1.37


def test_provision_support() -> None:
    assert dra_skew.supported_for_provision("1.32.0").ok
    assert dra_skew.supported_for_provision("1.37.2").ok
    verdict = dra_skew.supported_for_provision("1.31.9")
    assert not verdict.ok and "1.32 to 1.38" in verdict.reason
    assert dra_skew.supported_for_provision("1.38.0").ok
    assert not dra_skew.supported_for_provision("1.39.0").ok
    # Older minors still answer.
    assert dra_plan.plan_components("1.31.9").runtime_config == ["resource.k8s.io/v1alpha3=true"]
