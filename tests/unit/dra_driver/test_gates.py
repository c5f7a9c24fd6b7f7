"""The DRA driver's own feature gates for what the user asked: sharing, DynamicMIG and
explicit gates (``plugins/module_utils/dra_driver/gates.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gates as ddg

pytestmark = pytest.mark.unit

CHART_25_8 = ddc.parse_chart_version("25.8.0")
CHART_25_12 = ddc.parse_chart_version("25.12.0")


def test_only_asked_for_gates_are_returned() -> None:
    assert ddg.driver_feature_gates(CHART_25_12) == {}
    assert ddg.driver_feature_gates(CHART_25_12, sharing=["time-slicing"]) == {
        "TimeSlicingSettings": True
    }
    assert ddg.driver_feature_gates(CHART_25_12, dynamic_mig=True) == {"DynamicMIG": True}


def test_mps_with_dynamic_mig_is_refused_as_the_driver_refuses_it() -> None:
    with pytest.raises(ddc.DraDriverError, match="DynamicMIG together with MPSSupport"):
        ddg.driver_feature_gates(CHART_25_12, sharing=["mps"], dynamic_mig=True)


def test_a_gate_the_chart_predates_names_the_first_release() -> None:
    with pytest.raises(
        ddc.DraDriverError, match=r"does not know the feature gate DynamicMIG.*25\.12"
    ):
        ddg.driver_feature_gates(CHART_25_8, dynamic_mig=True)


def test_unknown_and_contradicting_gates_are_refused() -> None:
    with pytest.raises(ddc.DraDriverError, match="'Nope' is not a feature gate"):
        ddg.driver_feature_gates(CHART_25_12, gates={"Nope": True})
    with pytest.raises(
        ddc.DraDriverError, match="contradicts dra_driver_sharing item time-slicing"
    ):
        ddg.driver_feature_gates(
            CHART_25_12, sharing=["time-slicing"], gates={"TimeSlicingSettings": False}
        )


def test_dynamic_mig_needs_its_kubernetes_release() -> None:
    assert ddc.DYNAMIC_MIG_KUBERNETES_MIN == (1, 34)
    ddg.check_dynamic_mig_release((1, 34), "dra_driver_dynamic_mig", True)
    with pytest.raises(ddc.DraDriverError, match=r"the cluster is 1\.33"):
        ddg.check_dynamic_mig_release((1, 33), "dra_driver_dynamic_mig", True)


def test_gate_origin_names_the_variable_or_the_default() -> None:
    why = {"DynamicMIG": "dra_driver_dynamic_mig=true"}
    assert ddg.variable_for(why, "MPSSupport", "DynamicMIG") == "dra_driver_dynamic_mig"
    assert ddg.variable_for(why, "MPSSupport") == "dra_driver_feature_gates"
    assert ddg.gate_origin(why, "DynamicMIG") == "dra_driver_dynamic_mig=true"
    assert ddg.gate_origin({}, "MPSSupport") == "the driver default MPSSupport=true"
