"""Judging one component's feature gates and runtime config against the version model
(``plugins/module_utils/gate_audit/model_checks.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import (
    model_checks as gmc,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import terms as gt

pytestmark = pytest.mark.unit

V137 = dra_core.parse_version("1.37.2")


def test_default_value_comes_from_the_model() -> None:
    assert gmc.default_value(gt.FEATURE_GATE, "DRAPrioritizedList", V137) == "true"
    assert gmc.default_value(gt.FEATURE_GATE, "NoSuchGate", V137) is None
    assert gmc.default_value(gt.RUNTIME_CONFIG, "resource.k8s.io/v1", V137) == "true"
    assert gmc.default_value(gt.RUNTIME_CONFIG, "resource.k8s.io/v1beta1", V137) == "false"
    assert gmc.default_value(gt.RUNTIME_CONFIG, "apps/v1", V137) is None


@pytest.mark.parametrize(
    ("a", "b", "default", "severity"),
    [
        ("true", "true", None, "warn"),
        ("true", "false", None, "fail"),
        (None, "true", "true", "warn"),
        (None, "false", "true", "fail"),
        (None, "true", None, "fail"),
    ],
)
def test_values_in_force_that_differ_fail(a, b, default, severity) -> None:
    assert gmc.severity_of(a, b, default) == severity


def test_entry_text_and_flag_name() -> None:
    assert gmc.entry_text(gt.FEATURE_GATE, "A", "true") == "A=true"
    assert gmc.entry_text(gt.RUNTIME_CONFIG, "x/y", None) == "no x/y"
    assert gmc.flag_name(gt.FEATURE_GATE) == "--feature-gates"
    assert gmc.flag_name(gt.RUNTIME_CONFIG) == "--runtime-config"


def test_model_actions_remove_what_stops_the_component() -> None:
    flags = gf.FlagSet({"DRAControlPlaneController": True, "DRAAdminAccess": True}, {})
    actions = gmc.model_actions(flags, V137, "kube-apiserver")
    assert actions[(gt.FEATURE_GATE, "DRAControlPlaneController")] == "remove"
    assert actions[(gt.FEATURE_GATE, "DRAAdminAccess")] == "advise-remove"


def test_a_removed_gate_on_a_process_fails_naming_host_component_and_fix() -> None:
    plan = dra_plan.plan_components("1.37.2")
    sources = {gt.PROCESS: gf.FlagSet({"DRAControlPlaneController": True}, {})}
    [finding] = gmc.model_checks("cp-1", "kube-apiserver", sources, plan, V137, {}, {})
    assert (finding.id, finding.severity, finding.host) == ("gates.model-forbidden", "fail", "cp-1")
    assert finding.name == "DRAControlPlaneController"
    assert "unrecognized feature gate: DRAControlPlaneController" in finding.message
    assert "remove DRAControlPlaneController from --feature-gates" in finding.fix


def test_a_clean_process_has_no_finding() -> None:
    plan = dra_plan.plan_components("1.37.2")
    sources = {gt.PROCESS: gf.FlagSet({}, {})}
    assert gmc.model_checks("cp-1", "kube-apiserver", sources, plan, V137, {}, {}) == []
