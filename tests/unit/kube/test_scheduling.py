"""Where a DaemonSet's pod can run, by the DaemonSet controller's rules, and the tolerations
for the taints of its nodes (plugins/module_utils/kube/scheduling.py)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import RefusedValue
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import scheduling as ksc

from tests.unit.kube.api_objects import node

pytestmark = pytest.mark.unit

GPU = {"nvidia.com/gpu.present": "true"}


def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    """A required node affinity of ``terms``, each a list of match expressions."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
            }
        }
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


# ----------------------------------------------------------------------------- node selector


def test_a_node_with_every_selected_label_fits() -> None:
    pod = {"nodeSelector": GPU | {"pool": "a"}}
    assert ksc.scheduling_problem(node("n", GPU | {"pool": "a", "zone": "x"}), pod) == ""


def test_missing_labels_are_named_with_the_values_that_set_them() -> None:
    pod = {"nodeSelector": GPU | {"pool": "a"}}
    bare = node("n", {"pool": "b"})
    assert ksc.scheduling_problem(bare, pod) == (
        "lacks the label(s) nvidia.com/gpu.present=true, pool=a that nodeSelector requires"
    )
    assert ksc.scheduling_problem(bare, pod, values="kubeletPlugin.").endswith(
        "that kubeletPlugin.nodeSelector requires"
    )


# ----------------------------------------------------------------------------- node affinity


@pytest.mark.parametrize(
    ("expression", "labels", "fits"),
    [
        (expr("gpu", "In", "h100", "h200"), {"gpu": "h200"}, True),
        (expr("gpu", "In", "h100"), {"gpu": "h200"}, False),
        (expr("gpu", "NotIn", "h100"), {"gpu": "h200"}, True),
        (expr("gpu", "NotIn", "h100"), {}, True),
        (expr("gpu", "Exists"), {"gpu": ""}, True),
        (expr("gpu", "DoesNotExist"), {"gpu": "h200"}, False),
        (expr("gpus", "Gt", "4"), {"gpus": "8"}, True),
        (expr("gpus", "Lt", "4"), {"gpus": "8"}, False),
        (expr("gpus", "Gt", "4"), {"gpus": "eight"}, False),
        (expr("gpu", "Unknown", "x"), {"gpu": "x"}, False),
    ],
)
def test_match_expression_operators(expression: dict, labels: dict, fits: bool) -> None:
    pod = {"affinity": required([expression])}
    assert (ksc.scheduling_problem(node("n", labels), pod) == "") is fits


def test_any_one_term_fits_and_a_miss_names_every_term() -> None:
    pod = {
        "affinity": required(
            [expr("a", "In", "1")], [expr("b", "Exists"), expr("c", "In", "x", "y")]
        )
    }
    assert ksc.scheduling_problem(node("n", {"b": "", "c": "y"}), pod) == ""
    assert ksc.scheduling_problem(node("n", {}), pod, owner="the device plugin's") == (
        "matches none of the device plugin's required node affinity terms: it needs one of "
        "a=1; b (any value) and c=x|y"
    )


def test_preferred_affinity_does_not_count() -> None:
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{}]}}
    assert ksc.scheduling_problem(node("n"), {"affinity": preferred}) == ""


# ----------------------------------------------------------------------------- taints


def test_an_untolerated_taint_is_named() -> None:
    tainted = node("n", taints=[{"key": "dedicated", "value": "ml", "effect": "NoExecute"}])
    assert ksc.scheduling_problem(tainted, {}, values="kubeletPlugin.") == (
        "has the taint dedicated=ml:NoExecute that kubeletPlugin.tolerations do not tolerate"
    )


def test_prefer_no_schedule_and_node_condition_taints_do_not_stop_a_daemonset() -> None:
    taints = [
        {"key": "dedicated", "effect": "PreferNoSchedule"},
        *({"key": k, "effect": "NoSchedule"} for k in sorted(ksc.DAEMONSET_TOLERATED_TAINTS)),
    ]
    assert ksc.scheduling_problem(node("n", taints=taints), {}) == ""


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "dedicated", "value": "ml"}, True),
        ({"key": "dedicated", "operator": "Equal", "value": "cv"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),
        ({"value": "ml"}, False),
    ],
)
def test_toleration_matching(toleration: dict, tolerated: bool) -> None:
    tainted = node("n", taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}])
    problem = ksc.scheduling_problem(tainted, {"tolerations": [toleration]})
    assert (problem == "") is tolerated


def test_node_name_of() -> None:
    assert ksc.node_name_of(node("gpu-1")) == "gpu-1"
    assert ksc.node_name_of({}) == ""


# ----------------------------------------------------------------------------- tolerations


def test_each_taint_is_tolerated_by_key_and_effect_after_the_kept_ones() -> None:
    kept = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
    taints = [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
        {"key": "dedicated", "value": "cv", "effect": "NoExecute"},
        {"key": "pool"},
    ]
    tolerations = ksc.tolerations_for(taints, kept, variable="x_node_taints")
    assert tolerations == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
        {"key": "pool", "operator": "Exists"},
    ]
    assert tolerations[0] is not kept[0]


def test_tolerations_for_tolerate_the_taints_they_came_from() -> None:
    taints = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    pod = {"tolerations": ksc.tolerations_for(taints, variable="x_node_taints")}
    assert ksc.scheduling_problem(node("n", taints=taints), pod) == ""


class RoleError(RefusedValue):
    """A role's own refusal class."""


@pytest.mark.parametrize("taint", [{"effect": "NoSchedule"}, "dedicated", {"key": ""}])
def test_a_taint_without_a_key_is_refused_in_the_callers_class(taint: Any) -> None:
    with pytest.raises(RoleError) as err:
        ksc.tolerations_for([taint], variable="role_node_taints", error=RoleError)
    assert (err.value.variable, err.value.value) == ("role_node_taints", taint)
    assert err.value.reason == "each taint needs a key (and an effect)"
    assert err.value.fix
