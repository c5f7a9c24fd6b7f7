"""Judging existing gates and runtime config against a release
(``plugins/module_utils/dra/sanitize.py``).

Expected values are facts read from the Kubernetes source of each release and the
outcomes the field cases call for.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import sanitize as dra_sanitize
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    transition as dra_transition,
)

from tests.unit.dra.model_checks import DRA

pytestmark = pytest.mark.unit


def test_field_case_5_dra_gate_carried_into_138() -> None:
    report = dra_sanitize.sanitize({DRA: True, "DRAAdminAccess": True}, [], "1.38.0")
    fatal = {f.entry: f.reason for f in report.must_remove}
    assert list(fatal) == ["DynamicResourceAllocation=true"]
    assert "unrecognized feature gate: DynamicResourceAllocation" in fatal[DRA + "=true"]
    assert report.gates == {"DRAAdminAccess": True}
    with pytest.raises(dra_core.VersionModelError):
        dra_transition.plan_transition("1.37.2", "1.38.0", gates={DRA: True})


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
