"""Feature gate states and dependencies per release (``plugins/module_utils/dra/gates.py``).

Expected values are facts read from the Kubernetes source of each release and the
outcomes the field cases call for.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates

from tests.unit.dra.model_checks import DRA

pytestmark = pytest.mark.unit


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


def test_field_case_27_sanitize_sees_kcm_without_the_gate_is_not_an_error() -> None:
    # Missing on one component is not a start-up failure; the plan is what puts it there.
    assert dra_gates.GATES["DRAExtendedResource"].components == frozenset(dra_core.COMPONENTS)
