"""Plans for moving a cluster from one release to the next
(``plugins/module_utils/dra/transition.py``).

Expected values are facts read from the Kubernetes source of each release and the
outcomes the field cases call for.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    transition as dra_transition,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.dra.model_checks import DRA, FEATURE_SETS, _assert_plan_is_startable

pytestmark = pytest.mark.unit


def test_field_case_3_transition_into_the_removal_is_refused() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_transition.plan_transition("1.31.0", "1.32.0", features=["control-plane-controller"])
    assert "DRAControlPlaneController" in str(err.value)


def test_field_case_6_transition_drops_unserved_runtime_config() -> None:
    t = dra_transition.plan_transition("1.30.14", "1.31.0")
    drops = {c.entry: c for c in t.runtime_config_changes if c.action == "drop"}
    adds = {c.entry for c in t.runtime_config_changes if c.action == "add"}
    assert drops["resource.k8s.io/v1alpha2=true"].required is True
    assert adds == {"resource.k8s.io/v1alpha3=true"}


def test_transition_refuses_skipped_minor_with_the_path() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_transition.plan_transition("1.33.0", "1.35.0")
    assert "skips 1 minor" in err.value.reason
    assert "1.33 -> 1.34 -> 1.35" in err.value.fix


def test_transition_refuses_downgrade() -> None:
    with pytest.raises(dra_core.VersionModelError):
        dra_transition.plan_transition("1.35.2", "1.34.4")


def test_transition_133_to_134_drops_the_gate_and_beta_apis() -> None:
    t = dra_transition.plan_transition("1.33.0", "1.34.0")
    removed = {(c.component, c.gate) for c in t.gate_changes if c.action == "remove"}
    assert removed == {(c, DRA) for c in dra_core.COMPONENTS}
    drops = {c.entry: c.required for c in t.runtime_config_changes}
    assert drops == {"resource.k8s.io/v1beta1=true": False, "resource.k8s.io/v1beta2=true": False}
    assert t.target.runtime_config == []


def test_transition_134_to_135_reports_the_lock() -> None:
    t = dra_transition.plan_transition("1.34.0", "1.35.0")
    assert t.gate_changes == []
    locked = [c for c in t.state_changes if c.gate == DRA]
    assert "locked to true" in locked[0].consequence
    assert any("dependencies" in w for w in t.warnings)


def test_transition_136_to_137_reports_kubeadm_v1beta3_rejection() -> None:
    t = dra_transition.plan_transition("1.36.0", "1.37.0")
    assert "no longer reads kubeadm.k8s.io/v1beta3" in str(t.kubeadm_change["note"])
    assert t.kubeadm_change["from_accepted_by_target"] is True


def test_transition_feature_new_in_target() -> None:
    t = dra_transition.plan_transition("1.33.0", "1.34.0", ["extended-resource"])
    added = {(c.component, c.gate) for c in t.gate_changes if c.action == "add"}
    assert added == {(c, "DRAExtendedResource") for c in dra_core.COMPONENTS}


@settings(max_examples=200, deadline=None)
@given(st.integers(dra_core.MIN_MINOR, dra_core.MAX_MINOR - 1), FEATURE_SETS)
def test_any_valid_transition_lands_on_a_startable_plan(minor: int, features: list[str]) -> None:
    try:
        t = dra_transition.plan_transition(f"1.{minor}.0", f"1.{minor + 1}.0", features)
    except dra_core.VersionModelError:
        return
    _assert_plan_is_startable(t.target)
    served = {a.version for a in dra_api.served_api_versions(t.target.version)}
    for change in t.runtime_config_changes:
        version = change.entry.split("=")[0].split("/")[1]
        if change.action == "drop" and change.required:
            assert version not in served
        if change.action == "add":
            assert version in served
