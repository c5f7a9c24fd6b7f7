"""Per-component gate and runtime-config plans (``plugins/module_utils/dra/plan.py``).

Expected values are facts read from the Kubernetes source of each release and the
outcomes the field cases call for.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import features as dra_features
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import sanitize as dra_sanitize
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.dra.model_checks import DRA, FEATURE_SETS, _assert_plan_is_startable

pytestmark = pytest.mark.unit


def test_versions_outside_the_model_are_refused_not_malformed() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components("1.25.3")
    assert not isinstance(err.value, dra_core.VersionParseError)
    assert "1.26 to 1.38" in str(err.value)


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


def test_field_case_5_dra_false_on_135_is_refused() -> None:
    with pytest.raises(dra_core.VersionModelError) as err:
        dra_plan.plan_components("1.35.0", gates={DRA: False})
    assert "locked to true" in err.value.reason
    assert "remove DynamicResourceAllocation=false" in err.value.fix


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


MINORS = st.integers(dra_core.MIN_MINOR, dra_core.MAX_MINOR)

GATE_WISHES = st.dictionaries(st.sampled_from(sorted(dra_gates.GATES)), st.booleans(), max_size=4)


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
