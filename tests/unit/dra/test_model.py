"""Unit tests of the DRA version model (plugins/module_utils/dra_versions.py).

Expected values are facts read from the Kubernetes source of each release (see the
module docstring) and the outcomes the field cases call for.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import features as dra_features
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import sanitize as dra_sanitize
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    transition as dra_transition,
)
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.unit

DRA = "DynamicResourceAllocation"
ALL4 = set(dra_core.COMPONENTS)


# ----------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.35.0", dra_core.KubeVersion(1, 35, 0)),
        ("v1.35.0", dra_core.KubeVersion(1, 35, 0)),
        ("1.35", dra_core.KubeVersion(1, 35, None)),
        (" v1.33.13 ", dra_core.KubeVersion(1, 33, 13)),
        ("v1.36.0-rc.1", dra_core.KubeVersion(1, 36, 0, "rc.1")),
    ],
)
def test_parse_version_accepts_release_forms(text: str, expected: dra_core.KubeVersion) -> None:
    assert dra_core.parse_version(text) == expected


@pytest.mark.parametrize("bad", ["", "1", "one.two", "1.35.x", "2.1.0", "v1..3", "1.35.0.1"])
def test_parse_version_names_the_bad_value(bad: str) -> None:
    with pytest.raises(dra_core.VersionParseError) as err:
        dra_core.parse_version(bad, name="kubernetes_version")
    assert "kubernetes_version" in str(err.value)
    assert repr(bad) in str(err.value)
    assert err.value.fix


def test_versions_outside_the_model_are_refused_not_malformed() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components("1.25.3")
    assert not isinstance(err.value, dra_core.VersionParseError)
    assert "1.26 to 1.38" in str(err.value)


@given(st.integers(0, 60), st.one_of(st.none(), st.integers(0, 40)), st.booleans())
def test_parse_version_round_trips(minor: int, patch: int | None, v_prefix: bool) -> None:
    version = dra_core.KubeVersion(1, minor, patch)
    text = ("v" if v_prefix else "") + str(version)
    assert dra_core.parse_version(text) == version


# ----------------------------------------------------------------------------- gate states


@pytest.mark.parametrize(
    ("minor", "status", "stage", "default", "locked"),
    [
        (26, "present", "alpha", False, False),
        (31, "present", "alpha", False, False),
        (32, "present", "beta", False, False),
        (33, "present", "beta", False, False),
        (34, "present", "ga", True, False),
        (35, "present", "ga", True, True),
        (37, "present", "ga", True, True),
        (38, "removed", None, False, False),
    ],
)
def test_dynamic_resource_allocation_lifecycle(
    minor: int, status: str, stage: str | None, default: bool, locked: bool
) -> None:
    state = dra_gates.gate_state(DRA, f"1.{minor}.0")
    assert (state.status, state.stage, state.default, state.locked) == (
        status,
        stage,
        default,
        locked,
    )


@pytest.mark.parametrize(
    ("gate", "minor", "expected"),
    [
        ("DRAControlPlaneController", 30, ("not-yet", None, False, False)),
        ("DRAControlPlaneController", 31, ("present", "alpha", False, False)),
        ("DRAControlPlaneController", 32, ("removed", None, False, False)),
        ("DRAAdminAccess", 34, ("present", "beta", True, False)),
        ("DRAAdminAccess", 36, ("present", "ga", True, True)),
        ("DRAPrioritizedList", 36, ("present", "ga", True, False)),
        ("DRAPrioritizedList", 37, ("present", "ga", True, True)),
        ("DRAExtendedResource", 35, ("present", "alpha", False, False)),
        ("DRAExtendedResource", 37, ("present", "ga", True, True)),
        ("DRADeviceTaintRules", 36, ("present", "beta", False, False)),
        ("DRADeviceTaints", 37, ("present", "ga", True, False)),
        ("DRADeviceTaints", 38, ("present", "ga", True, True)),
        ("DRASchedulerFilterTimeout", 34, ("present", "beta", True, False)),
        ("DRAResourceClaimDeviceStatus", 33, ("present", "beta", True, False)),
        # Beta, on by default only with --min-compatibility-version >= 1.37.
        ("DRAFractionalCapacityRange", 37, ("present", "beta", False, False)),
        ("KubeletPodResourcesDynamicResources", 37, ("present", "ga", True, True)),
        ("KubeletPodResourcesDynamicResources", 38, ("present", "ga", True, True)),
    ],
)
def test_gate_states_from_source(gate: str, minor: int, expected: tuple) -> None:
    state = dra_gates.gate_state(gate, f"1.{minor}")
    assert (state.status, state.stage, state.default, state.locked) == expected


def test_unknown_gate_suggests_the_close_name() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_gates.gate_state("DRAPrioritisedList", "1.35.0")
    assert "DRAPrioritizedList" in str(err.value)


def test_declared_dependencies() -> None:
    assert dra_gates.GATES["DRAAdminAccess"].depends_on == (DRA,)
    assert set(dra_gates.GATES["DRADeviceBindingConditions"].depends_on) == {
        DRA,
        "DRAResourceClaimDeviceStatus",
    }
    assert dra_gates.GATES["DRADeviceTaintRules"].depends_on == ("DRADeviceTaints",)
    assert dra_gates.GATES["DRAResourceClaimDeviceStatus"].depends_on == ()


def test_every_dependency_is_a_model_gate() -> None:
    for gate in dra_gates.GATES.values():
        for dep in gate.depends_on:
            assert dep in dra_gates.GATES, (gate.name, dep)


# ----------------------------------------------------------------------------- API versions


def _served(minor: int) -> dict[str, bool]:
    return {a.version: a.enabled_by_default for a in dra_api.served_api_versions(f"1.{minor}")}


@pytest.mark.parametrize(
    ("minor", "expected"),
    [
        (30, {"v1alpha2": False}),
        (31, {"v1alpha3": False}),
        (32, {"v1alpha3": False, "v1beta1": False}),
        (33, {"v1alpha3": False, "v1beta1": False, "v1beta2": False}),
        (34, {"v1": True, "v1alpha3": False, "v1beta1": False, "v1beta2": False}),
        (37, {"v1": True, "v1alpha3": False, "v1beta1": False, "v1beta2": False}),
        (38, {"v1": True, "v1alpha3": False, "v1beta2": False}),
    ],
)
def test_served_resource_api_versions(minor: int, expected: dict[str, bool]) -> None:
    assert _served(minor) == expected


def test_device_taint_rule_moves_from_alpha_to_v1() -> None:
    def versions_with(minor: int) -> list[str]:
        return [
            a.version
            for a in dra_api.served_api_versions(f"1.{minor}")
            if "DeviceTaintRule" in a.kinds
        ]

    assert versions_with(33) == ["v1alpha3"]
    assert versions_with(36) == ["v1beta2", "v1alpha3"]
    assert versions_with(37) == ["v1", "v1beta2", "v1alpha3"]


# ----------------------------------------------------------------------------- kubeadm


@pytest.mark.parametrize(
    ("minor", "preferred", "shape", "v1beta3_accepted"),
    [
        (30, "kubeadm.k8s.io/v1beta3", "map", True),
        (31, "kubeadm.k8s.io/v1beta4", "list", True),
        (36, "kubeadm.k8s.io/v1beta4", "list", True),
        (37, "kubeadm.k8s.io/v1beta4", "list", False),
    ],
)
def test_kubeadm_config_api(minor: int, preferred: str, shape: str, v1beta3_accepted: bool) -> None:
    api = dra_api.kubeadm_config_api(f"1.{minor}.0")
    assert api.preferred == preferred
    assert api.extra_args_shape == shape
    assert ("kubeadm.k8s.io/v1beta3" in api.accepted) is v1beta3_accepted


def test_kubeadm_v1_is_experimental_in_137() -> None:
    api = dra_api.kubeadm_config_api("1.37.2")
    assert api.experimental == ("kubeadm.k8s.io/v1",)
    assert api.registered == ("kubeadm.k8s.io/v1", "kubeadm.k8s.io/v1beta4")


# ----------------------------------------------------------------------------- core plans


def _gates(plan: dra_settings.ComponentPlan) -> dict[str, dict[str, bool]]:
    return plan.emitted()


@pytest.mark.parametrize(
    ("version", "runtime_config"),
    [
        ("1.31.4", ["resource.k8s.io/v1alpha3=true"]),
        ("1.32.0", ["resource.k8s.io/v1beta1=true"]),
        ("1.33.0", ["resource.k8s.io/v1beta1=true", "resource.k8s.io/v1beta2=true"]),
    ],
)
def test_core_dra_before_ga_sets_gate_on_every_component(
    version: str, runtime_config: list[str]
) -> None:
    # Field cases 1 and 5: the gate on all four components (kubelet included), the
    # alpha/beta API enabled on kube-apiserver.
    plan = dra_plan.plan_components(version)
    assert _gates(plan) == {c: {DRA: True} for c in dra_core.COMPONENTS}
    assert plan.runtime_config == runtime_config


@pytest.mark.parametrize("version", ["1.34.0", "1.35.0", "1.36.3", "1.37.2", "1.38.0"])
def test_core_dra_from_ga_sets_nothing(version: str) -> None:
    # Field case 5: omit DynamicResourceAllocation once GA and on by default.
    plan = dra_plan.plan_components(version)
    assert _gates(plan) == {c: {} for c in dra_core.COMPONENTS}
    assert plan.runtime_config == []


def test_ga_policy_omits_ga_on_by_default_and_locked_gates() -> None:
    plan = dra_plan.plan_components("1.34.0", gates={DRA: True})
    assert DRA not in plan.components[dra_core.APISERVER].feature_gates
    assert "GA" in plan.omitted[DRA]
    plan = dra_plan.plan_components("1.36.0", ["admin-access", "prioritized-list"])
    assert _gates(plan) == {c: {} for c in dra_core.COMPONENTS}
    assert "locked" in plan.omitted["DRAAdminAccess"]
    assert "GA" in plan.omitted["DRAPrioritizedList"]


def test_ga_policy_pins_beta_gates_that_are_on_by_default() -> None:
    plan = dra_plan.plan_components("1.34.0", ["prioritized-list"])
    for component in (dra_core.APISERVER, dra_core.CONTROLLER_MANAGER, dra_core.SCHEDULER):
        assert plan.components[component].feature_gates == {"DRAPrioritizedList": True}
    assert plan.components[dra_core.KUBELET].feature_gates == {}


def test_ga_policy_emits_false_for_an_unlocked_gate_on_by_default() -> None:
    plan = dra_plan.plan_components("1.34.0", gates={DRA: False})
    assert _gates(plan) == {c: {DRA: False} for c in dra_core.COMPONENTS}


# ----------------------------------------------------------------------------- field cases


def test_field_case_5_dra_false_on_135_is_refused() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components("1.35.0", gates={DRA: False})
    assert "locked to true" in err.value.reason
    assert "remove DynamicResourceAllocation=false" in err.value.fix


def test_field_case_5_dra_gate_carried_into_138() -> None:
    report = dra_sanitize.sanitize({DRA: True, "DRAAdminAccess": True}, [], "1.38.0")
    fatal = {f.entry: f.reason for f in report.must_remove}
    assert list(fatal) == ["DynamicResourceAllocation=true"]
    assert "unrecognized feature gate: DynamicResourceAllocation" in fatal[DRA + "=true"]
    assert report.gates == {"DRAAdminAccess": True}
    with pytest.raises(dra_core.VersionModelError):
        dra_transition.plan_transition("1.37.2", "1.38.0", gates={DRA: True})


def test_field_case_3_removed_gate_is_rejected_and_removed() -> None:
    # BlockVolume-style: a gate the target release removed stops every component.
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components("1.32.0", gates={"DRAControlPlaneController": True})
    assert "unrecognized feature gate: DRAControlPlaneController" in err.value.reason
    report = dra_sanitize.sanitize(
        {"DRAControlPlaneController": True, DRA: True}, ["resource.k8s.io/v1beta1=true"], "1.32.0"
    )
    assert [f.entry for f in report.must_remove] == ["DRAControlPlaneController=true"]
    assert report.gates == {DRA: True}
    assert report.runtime_config == ["resource.k8s.io/v1beta1=true"]


def test_field_case_3_transition_into_the_removal_is_refused() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_transition.plan_transition("1.31.0", "1.32.0", features=["control-plane-controller"])
    assert "DRAControlPlaneController" in str(err.value)


def test_every_gate_is_judged_against_the_release_table() -> None:
    # A gate long gone from Kubernetes (removed before the oldest generated release).
    report = dra_sanitize.sanitize({"BlockVolume": True, "CSIMigration": True}, [], "1.34.0")
    assert sorted(f.entry for f in report.must_remove) == ["BlockVolume=true", "CSIMigration=true"]
    assert "registers no feature gate CSIMigration" in report.must_remove[1].reason
    assert report.gates == {}
    # A gate outside DRA that a generated release removed: named with its removal.
    report = dra_sanitize.sanitize({"CSIMigrationPortworx": True}, [], "1.36.0")
    assert [f.entry for f in report.must_remove] == ["CSIMigrationPortworx=true"]
    assert "removed in 1.36" in report.must_remove[0].reason
    # Still registered on 1.35: kept, with GA advice.
    report = dra_sanitize.sanitize({"CSIMigrationPortworx": True}, [], "1.35.0")
    assert report.ok and report.gates == {"CSIMigrationPortworx": True}


def test_a_locked_gate_outside_dra_is_refused_at_the_other_value() -> None:
    locked = [
        name
        for name, st in dra_gates.release_gates_at("1.37.2").items()
        if st.locked and st.default and name not in dra_gates.GATES
    ]
    assert locked, "1.37.2 locks some non-DRA gate to true"
    report = dra_sanitize.sanitize({locked[0]: False}, [], "1.37.2")
    assert [f.entry for f in report.must_remove] == [f"{locked[0]}=false"]
    assert "locked to true" in report.must_remove[0].reason


def test_unknown_dra_named_gate_on_a_source_checked_minor_is_fatal() -> None:
    report = dra_sanitize.sanitize({"DRAPartitionableDevicez": True}, [], "1.36.0")
    assert [f.entry for f in report.must_remove] == ["DRAPartitionableDevicez=true"]


@pytest.mark.parametrize(
    ("entry", "version"),
    [
        ("resource.k8s.io/v1alpha3=true", "1.30.2"),
        ("resource.k8s.io/v1alpha2=true", "1.31.0"),
        ("resource.k8s.io/v1beta1=true", "1.38.0"),
        ("resource.k8s.io/v1alpha1", "1.27.0"),
    ],
)
def test_field_case_6_unserved_runtime_config_is_fatal(entry: str, version: str) -> None:
    report = dra_sanitize.sanitize({}, [entry, "api/all=true"], version)
    assert [f.entry for f in report.must_remove] == [entry if "=" in entry else entry + "=true"]
    assert "does not serve" in report.must_remove[0].reason
    assert report.runtime_config == ["api/all=true"]


def test_field_case_6_transition_drops_unserved_runtime_config() -> None:
    t = dra_transition.plan_transition("1.30.14", "1.31.0")
    drops = {c.entry: c for c in t.runtime_config_changes if c.action == "drop"}
    adds = {c.entry for c in t.runtime_config_changes if c.action == "add"}
    assert drops["resource.k8s.io/v1alpha2=true"].required is True
    assert adds == {"resource.k8s.io/v1alpha3=true"}


def test_served_but_unneeded_beta_api_is_advice_only() -> None:
    report = dra_sanitize.sanitize({}, ["resource.k8s.io/v1beta1=true"], "1.35.0")
    assert report.ok
    assert [f.action for f in report.findings] == ["advise-remove"]
    assert "removal in 1.38" in report.findings[0].reason


def test_locked_gate_at_other_value_is_fatal_and_at_default_is_advice() -> None:
    report = dra_sanitize.sanitize({DRA: False}, [], "1.36.0")
    assert [f.entry for f in report.must_remove] == ["DynamicResourceAllocation=false"]
    report = dra_sanitize.sanitize({DRA: True}, [], "1.36.0")
    assert report.ok
    assert report.findings[0].action == "advise-remove"
    assert "1.38" in report.findings[0].reason


def test_sanitize_reports_broken_dependencies_from_135() -> None:
    # 1.36: DRADeviceBindingConditions is on by default and depends on the device status.
    report = dra_sanitize.sanitize({"DRAResourceClaimDeviceStatus": False}, [], "1.36.0")
    assert [f.entry for f in report.must_remove] == ["DRAResourceClaimDeviceStatus=false"]
    assert "DRADeviceBindingConditions" in report.must_remove[0].reason


@pytest.mark.parametrize("version", ["1.35.0", "1.36.3"])
def test_field_case_27_extended_resource_reaches_the_controller_manager(version: str) -> None:
    plan = dra_plan.plan_components(version, ["extended-resource"])
    for component in dra_core.COMPONENTS:
        assert plan.components[component].feature_gates.get("DRAExtendedResource") is True


def test_field_case_27_extended_resource_needs_134() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components("1.33.0", ["extended-resource"])
    assert "introduced in 1.34" in err.value.reason
    assert "1.34" in err.value.fix


def test_field_case_27_sanitize_sees_kcm_without_the_gate_is_not_an_error() -> None:
    # Missing on one component is not a start-up failure; the plan is what puts it there.
    assert dra_gates.GATES["DRAExtendedResource"].components == frozenset(dra_core.COMPONENTS)


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


# ----------------------------------------------------------------------------- wishes


def test_gate_without_its_dependency_is_refused() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components("1.37.0", gates={"DRAWorkloadResourceClaims": True})
    assert "GenericWorkload=true" in err.value.reason
    assert "GenericWorkload=true" in err.value.fix


def test_feature_brings_its_dependencies_onto_the_same_components() -> None:
    plan = dra_plan.plan_components("1.37.0", ["workload-resource-claims"])
    for component in dra_core.COMPONENTS:
        gates = plan.components[component].feature_gates
        assert gates == {"DRAWorkloadResourceClaims": True, "GenericWorkload": True}


def test_gate_needing_dra_is_refused_when_dra_is_off() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components("1.33.0", gates={DRA: False, "DRAPrioritizedList": True})
    assert "DynamicResourceAllocation=true" in err.value.reason


def test_disabling_a_dependency_of_a_default_on_gate_is_refused() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components("1.36.0", gates={"DRAResourceClaimDeviceStatus": False})
    assert "DRADeviceBindingConditions" in err.value.reason
    plan = dra_plan.plan_components(
        "1.36.0",
        gates={
            "DRAResourceClaimDeviceStatus": False,
            "DRADeviceBindingConditions": False,
            "DRAResourceClaimGranularStatusAuthorization": False,
        },
    )
    # Disabled on the scheduler too, so the dependents go =false there as well.
    for component in (dra_core.APISERVER, dra_core.SCHEDULER):
        assert plan.components[component].feature_gates == {
            "DRAResourceClaimDeviceStatus": False,
            "DRADeviceBindingConditions": False,
            "DRAResourceClaimGranularStatusAuthorization": False,
        }


def test_feature_with_api_kind_enables_its_api_version() -> None:
    assert dra_plan.plan_components("1.35.0", ["device-taint-rules"]).runtime_config == [
        "resource.k8s.io/v1alpha3=true"
    ]
    assert dra_plan.plan_components("1.36.0", ["device-taint-rules"]).runtime_config == [
        "resource.k8s.io/v1beta2=true"
    ]
    assert dra_plan.plan_components("1.37.0", ["device-taint-rules"]).runtime_config == []


def test_unknown_feature_is_malformed_input() -> None:
    with pytest.raises(dra_core.VersionParseError) as err:
        dra_plan.plan_components("1.35.0", ["prioritised-list"])
    assert "prioritized-list" in str(err.value)


def test_feature_conflicting_with_an_explicit_gate_is_refused() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components(
            "1.34.0", ["binding-conditions"], {"DRAResourceClaimDeviceStatus": False}
        )
    assert "DRAResourceClaimDeviceStatus=false" in err.value.reason


# ----------------------------------------------------------------------------- transitions


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


def test_provision_support() -> None:
    assert dra_skew.supported_for_provision("1.32.0").ok
    assert dra_skew.supported_for_provision("1.37.2").ok
    verdict = dra_skew.supported_for_provision("1.31.9")
    assert not verdict.ok and "1.32 to 1.38" in verdict.reason
    assert dra_skew.supported_for_provision("1.38.0").ok
    assert not dra_skew.supported_for_provision("1.39.0").ok
    # Older minors still answer.
    assert dra_plan.plan_components("1.31.9").runtime_config == ["resource.k8s.io/v1alpha3=true"]


# ----------------------------------------------------------------------------- properties

MINORS = st.integers(dra_core.MIN_MINOR, dra_core.MAX_MINOR)
FEATURE_SETS = st.lists(st.sampled_from(dra_features.ALL_FEATURES), max_size=5, unique=True)
GATE_WISHES = st.dictionaries(st.sampled_from(sorted(dra_gates.GATES)), st.booleans(), max_size=4)


def _effective(plan: dra_settings.ComponentPlan, component: str) -> dict[str, bool]:
    out = {}
    for name in dra_gates.GATES:
        state = dra_gates.gate_state(name, plan.version)
        if state.known:
            out[name] = state.default
        elif state.status == "removed" and dra_gates.GATES[name].specs[-1].locked:
            out[name] = dra_gates.GATES[name].specs[-1].default
        else:
            out[name] = False
    out.update(plan.components[component].feature_gates)
    return out


def _assert_plan_is_startable(plan: dra_settings.ComponentPlan) -> None:
    v = plan.version
    served = {a.version for a in dra_api.served_api_versions(v)}
    for component in dra_core.COMPONENTS:
        settings_ = plan.components[component]
        effective = _effective(plan, component)
        for name, value in settings_.feature_gates.items():
            state = dra_gates.gate_state(name, v)
            assert state.known, (component, name, state)
            assert not state.locked, (component, name)
            if value:
                for dep in dra_gates.GATES[name].depends_on:
                    assert effective[dep], (component, name, dep)
            forbidden = settings_.forbidden_gates.get(name)
            assert forbidden is None or value not in forbidden.values
        if v.minor >= dra_core.DEPENDENCIES_DECLARED_SINCE:
            for name, on in effective.items():
                if on and dra_gates.gate_state(name, v).known:
                    for dep in dra_gates.GATES[name].depends_on:
                        assert effective[dep], (component, name, dep)
        report = dra_sanitize.sanitize(settings_.feature_gates, settings_.runtime_config, v)
        assert report.must_remove == [], report.must_remove
    for entry in plan.runtime_config:
        assert entry.split("=")[0].split("/")[1] in served


@settings(max_examples=400, deadline=None)
@given(MINORS, FEATURE_SETS, GATE_WISHES)
def test_any_valid_plan_can_start_every_component(
    minor: int, features: list[str], wishes: dict[str, bool]
) -> None:
    try:
        plan = dra_plan.plan_components(f"1.{minor}.0", features, wishes)
    except dra_core.VersionModelError:
        return
    _assert_plan_is_startable(plan)
    if minor >= 35:
        assert all(g.get(DRA) is not False for g in plan.emitted().values())
    if minor >= 38:
        assert all(DRA not in g for g in plan.emitted().values())
    for name, value in wishes.items():
        state = dra_gates.gate_state(name, plan.version)
        assert state.known and not (state.locked and value != state.default)


@settings(max_examples=200, deadline=None)
@given(MINORS, FEATURE_SETS)
def test_features_alone_fail_only_for_reasons_of_the_version(
    minor: int, features: list[str]
) -> None:
    version = f"1.{minor}.0"
    try:
        plan = dra_plan.plan_components(version, features)
    except dra_core.VersionModelError as err:
        assert str(err)
        unavailable = [
            f
            for f in features
            if not (
                dra_features.FEATURES[f].core_before
                and minor < dra_features.FEATURES[f].core_before
            )
            and any(
                not dra_gates.gate_state(g, version).known for g in dra_features.FEATURES[f].gates
            )
        ]
        assert unavailable, (features, str(err))
        return
    _assert_plan_is_startable(plan)
    for f in features:
        for gate in dra_features.FEATURES[f].gates:
            state = dra_gates.gate_state(gate, version)
            if minor >= (dra_features.FEATURES[f].core_before or 0):
                on = state.default if state.locked else plan.wishes.get(gate)
                assert on is True, (f, gate)


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


@st.composite
def _possible_wishes(draw: st.DrawFn) -> tuple[int, list[str], dict[str, bool]]:
    """A minor, features its gates exist for, and gate wishes each possible on its own."""
    minor = draw(MINORS)
    version = f"1.{minor}"
    known = sorted(n for n in dra_gates.GATES if dra_gates.gate_state(n, version).known)
    features = draw(
        st.lists(
            st.sampled_from(
                [
                    f
                    for f in dra_features.ALL_FEATURES
                    if all(
                        dra_gates.gate_state(g, version).known
                        for g in dra_features.FEATURES[f].gates
                    )
                ]
                or ["admin-access"]
            ),
            max_size=4,
            unique=True,
        )
    )
    wishes = {}
    for name in draw(st.lists(st.sampled_from(known), max_size=4, unique=True)) if known else []:
        state = dra_gates.gate_state(name, version)
        wishes[name] = state.default if state.locked else draw(st.booleans())
    return minor, features, wishes


@settings(max_examples=400, deadline=None)
@given(_possible_wishes())
def test_possible_wishes_plan_or_name_a_dependency(case: tuple) -> None:
    minor, features, wishes = case
    try:
        plan = dra_plan.plan_components(f"1.{minor}.0", features, wishes)
    except dra_core.VersionModelError as err:
        # Each wish is possible alone: a refusal is about how they combine.
        assert "depends on" in err.reason or "needs" in err.reason, err.reason
        return
    _assert_plan_is_startable(plan)
    for name, value in wishes.items():
        if not (name == DRA and value is False):
            assert plan.wishes.get(name) == value or dra_gates.gate_state(name, plan.version).locked
