"""Feature-gate and runtime-config values as the components read them, and the per-component
settings of a plan (``plugins/module_utils/dra/settings.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings

pytestmark = pytest.mark.unit


def test_feature_gates_parse_and_write_back_sorted() -> None:
    gates = dra_settings.parse_feature_gates("B=0,A=true")
    assert gates == {"B": False, "A": True}
    assert dra_settings.feature_gates_string(gates) == "A=true,B=false"


def test_malformed_feature_gates_name_the_flag_and_the_entry() -> None:
    with pytest.raises(dra_core.VersionParseError) as err:
        dra_settings.parse_feature_gates("A=maybe", "kubeadm_feature_gates")
    assert "kubeadm_feature_gates" in str(err.value) and "'A=maybe'" in str(err.value)


@pytest.mark.parametrize(("value", "expected"), [("TRUE", True), ("f", False), (True, True)])
def test_gate_values_are_go_booleans(value: str | bool, expected: bool) -> None:
    assert dra_settings.parse_gate_bool(value, "gate X") is expected


def test_a_gate_value_that_is_no_boolean_names_it() -> None:
    with pytest.raises(dra_core.VersionParseError, match="gate X has value 'maybe'"):
        dra_settings.parse_gate_bool("maybe", "gate X")


def test_runtime_config_entries_without_a_value_are_true() -> None:
    assert dra_settings.parse_runtime_config("a/b=true,c/d") == [("a/b", "true"), ("c/d", "true")]
    assert dra_settings.parse_runtime_config(["x/y=false"]) == [("x/y", "false")]


def test_a_plan_carries_all_four_components_and_their_flags() -> None:
    plan = dra_plan.plan_components("1.33.0", gates={"DynamicResourceAllocation": True})
    assert isinstance(plan, dra_settings.ComponentPlan)
    assert set(plan.emitted()) == set(dra_core.COMPONENTS)
    apiserver = plan.components["kube-apiserver"]
    assert apiserver.feature_gates_flag == dra_settings.feature_gates_string(
        apiserver.feature_gates
    )
    assert plan.runtime_config_flag == ",".join(sorted(apiserver.runtime_config))
    as_dict = plan.to_dict()
    assert as_dict["version"] == "1.33.0"
    assert as_dict["components"]["kube-apiserver"]["feature_gates_flag"] == (
        apiserver.feature_gates_flag
    )
    assert as_dict["runtime_config_flag"] == plan.runtime_config_flag
