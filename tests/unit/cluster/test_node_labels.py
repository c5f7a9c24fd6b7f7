"""Patch computation for GPU node labels and taints (module_utils node_labels)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.node_labels import (
    DEFAULT_LABELS,
    NodeLabelError,
    apply_patches,
    normalize_labels,
    normalize_node_labels,
    normalize_taints,
    plan_labels,
)

pytestmark = pytest.mark.unit

GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}


def node(name: str, labels: dict | None = None, taints: list | None = None, rv: str = "7") -> dict:
    out: dict = {"metadata": {"name": name, "labels": labels or {}, "resourceVersion": rv}}
    out["spec"] = {"taints": taints} if taints is not None else {}
    return out


def test_default_label_is_the_dra_plugin_affinity_label() -> None:
    assert DEFAULT_LABELS == {"nvidia.com/gpu.present": "true"}


def test_only_nodes_that_differ_get_a_patch() -> None:
    nodes = [
        node("a"),
        node("b", {"nvidia.com/gpu.present": "true"}),
        node("c", {"nvidia.com/gpu.present": "false", "x": "1"}),
        node("d"),
    ]
    plan = plan_labels(nodes, ["a", "b", "c"])
    assert [p.name for p in plan.patches] == ["a", "c"]
    assert plan.unchanged == ["b"]
    assert plan.nodes_seen == 4
    assert plan.patches[0].patch == {"metadata": {"labels": {"nvidia.com/gpu.present": "true"}}}
    assert plan.patches[1].labels == {"nvidia.com/gpu.present": ["false", "true"]}


def test_second_plan_after_applying_is_empty() -> None:
    nodes = [node(f"n{i}") for i in range(5)]
    plan = plan_labels(nodes, ["n0", "n1"], taints=[GPU_TAINT])
    assert len(plan.patches) == 2
    applied = [
        node(n["metadata"]["name"], {"nvidia.com/gpu.present": "true"}, [dict(GPU_TAINT)])
        if n["metadata"]["name"] in ("n0", "n1")
        else n
        for n in nodes
    ]
    again = plan_labels(applied, ["n0", "n1"], taints=[GPU_TAINT])
    assert again.patches == []
    assert again.unchanged == ["n0", "n1"]


def test_taint_patch_keeps_other_taints_and_carries_resource_version() -> None:
    other = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    plan = plan_labels([node("a", taints=[other], rv="42")], ["a"], labels={}, taints=[GPU_TAINT])
    (patch,) = plan.patches
    assert patch.patch == {
        "metadata": {"resourceVersion": "42"},
        "spec": {"taints": [other, GPU_TAINT]},
    }
    assert patch.taints_added == [GPU_TAINT]


def test_taint_with_other_value_is_replaced() -> None:
    old = {"key": "nvidia.com/gpu", "value": "old", "effect": "NoSchedule"}
    new = {"key": "nvidia.com/gpu", "value": "h200", "effect": "NoSchedule"}
    plan = plan_labels([node("a", taints=[old])], ["a"], labels={}, taints=[new])
    (patch,) = plan.patches
    assert patch.patch["spec"]["taints"] == [new]
    assert patch.taints_removed == [old]


def test_label_only_patch_has_no_resource_version() -> None:
    plan = plan_labels([node("a")], ["a"])
    assert "resourceVersion" not in plan.patches[0].patch["metadata"]
    assert "spec" not in plan.patches[0].patch


def test_remove_from_others() -> None:
    nodes = [
        node("gpu", {"nvidia.com/gpu.present": "true"}, [dict(GPU_TAINT)]),
        node("old", {"nvidia.com/gpu.present": "true", "keep": "me"}, [dict(GPU_TAINT)]),
        node("cpu", {"keep": "me"}),
    ]
    plan = plan_labels(nodes, ["gpu"], taints=[GPU_TAINT], remove_from_others=True)
    (patch,) = plan.patches
    assert patch.name == "old"
    assert patch.role == "other"
    assert patch.patch == {
        "metadata": {"labels": {"nvidia.com/gpu.present": None}, "resourceVersion": "7"},
        "spec": {"taints": []},
    }
    assert plan_labels(nodes, ["gpu"], taints=[GPU_TAINT]).patches == []


def test_missing_nodes_are_reported() -> None:
    plan = plan_labels([node("a")], ["a", "ghost-1", "ghost-2"])
    assert plan.missing == ["ghost-1", "ghost-2"]


def test_diff_shows_only_touched_keys() -> None:
    plan = plan_labels([node("a", {"other": "x"})], ["a"])
    assert plan.diff() == {
        "before": {"a": {"labels": {}, "taints": []}},
        "after": {"a": {"labels": {"nvidia.com/gpu.present": "true"}, "taints": []}},
    }


def test_yaml_boolean_becomes_a_string() -> None:
    assert normalize_labels({"nvidia.com/gpu.present": True}) == {"nvidia.com/gpu.present": "true"}


@pytest.mark.parametrize(
    ("labels", "named"),
    [
        ({"bad key!": "x"}, "'bad key!'"),
        ({"nvidia.com/gpu.present": "not valid"}, "'not valid'"),
        ({"a": "x" * 64}, "not a valid label value"),
        ({"Nvidia.COM/x": "y"}, "qualified name"),
    ],
)
def test_bad_labels_are_refused_with_the_key(labels: dict, named: str) -> None:
    with pytest.raises(NodeLabelError, match=named.replace("(", r"\(")):
        normalize_labels(labels, "gpu_node_labels_extra")


@pytest.mark.parametrize(
    ("taints", "named"),
    [
        ([{"key": "nvidia.com/gpu", "effect": "NoScheduling"}], "effect='NoScheduling'"),
        ([{"effect": "NoSchedule"}], "key None"),
        ([GPU_TAINT, GPU_TAINT], "repeats key"),
        ([{"key": "a", "effect": "NoSchedule", "operator": "Exists"}], "operator"),
    ],
)
def test_bad_taints_are_refused(taints: list, named: str) -> None:
    with pytest.raises(NodeLabelError, match=named):
        normalize_taints(taints)


def test_duplicate_node_names_are_refused() -> None:
    with pytest.raises(NodeLabelError, match="a more than once"):
        plan_labels([node("a")], ["a", "a"])


def test_nothing_to_set_is_refused() -> None:
    with pytest.raises(NodeLabelError, match="both empty"):
        plan_labels([node("a")], ["a"], labels={}, taints=[])


# ------------------------------------------------------------------ applying patches


class Conflict(Exception):
    pass


def test_patches_are_all_sent_and_returned_in_plan_order() -> None:
    nodes = [node(f"gpu-{i:03d}") for i in range(50)]
    plan = plan_labels(nodes, [f"gpu-{i:03d}" for i in range(50)])
    sent: list[str] = []
    done, failure = apply_patches(
        plan.patches,
        lambda name, body: sent.append(name),
        lambda name: {},
        DEFAULT_LABELS,
        [],
        is_conflict=lambda err: False,
        workers=8,
    )
    assert failure is None
    assert sorted(sent) == [f"gpu-{i:03d}" for i in range(50)]
    assert [p.name for p in done] == [f"gpu-{i:03d}" for i in range(50)]


def test_conflict_rereads_the_node_and_sends_the_recomputed_patch() -> None:
    stale = node("gpu-1", taints=[], rv="7")
    plan = plan_labels([stale], ["gpu-1"], taints=[GPU_TAINT])
    # meanwhile someone added a taint of their own: rv 8
    fresh = node("gpu-1", taints=[{"key": "other", "effect": "NoExecute"}], rv="8")
    bodies: list[dict] = []

    def send(name: str, body: dict) -> None:
        bodies.append(body)
        if body["metadata"].get("resourceVersion") == "7":
            raise Conflict()

    done, failure = apply_patches(
        plan.patches,
        send,
        lambda name: fresh,
        DEFAULT_LABELS,
        normalize_taints([GPU_TAINT]),
        is_conflict=lambda err: isinstance(err, Conflict),
    )
    assert failure is None
    assert len(bodies) == 2
    assert bodies[1]["metadata"]["resourceVersion"] == "8"
    assert bodies[1]["spec"]["taints"] == [{"key": "other", "effect": "NoExecute"}, GPU_TAINT]
    assert [p.patch for p in done] == [bodies[1]]


def test_a_failure_stops_the_patches_not_yet_started() -> None:
    plan = plan_labels([node(f"gpu-{i}") for i in range(20)], [f"gpu-{i}" for i in range(20)])
    sent: list[str] = []

    def send(name: str, body: dict) -> None:
        sent.append(name)
        if name == "gpu-0":
            raise PermissionError("403 Forbidden")

    done, failure = apply_patches(
        plan.patches,
        send,
        lambda name: {},
        DEFAULT_LABELS,
        [],
        is_conflict=lambda err: False,
        workers=1,
    )
    assert failure is not None and failure.patch.name == "gpu-0"
    assert isinstance(failure.error, PermissionError)
    assert sent == ["gpu-0"] and done == []


# ----------------------------------------------------------------------------- per-node labels

PATH = "gpufleet.io/gpu-path"


def test_node_labels_are_merged_over_the_labels_of_their_node_only() -> None:
    nodes = [node("h100-01"), node("h200-01", {"nvidia.com/gpu.present": "true"})]
    plan = plan_labels(
        nodes,
        ["h100-01", "h200-01"],
        node_labels={"h100-01": {PATH: "device-plugin"}, "h200-01": {PATH: "dra"}},
    )
    assert {p.name: p.patch for p in plan.patches} == {
        "h100-01": {
            "metadata": {"labels": {"nvidia.com/gpu.present": "true", PATH: "device-plugin"}}
        },
        "h200-01": {"metadata": {"labels": {PATH: "dra"}}},
    }


def test_a_pool_that_moves_gets_the_new_path_and_keeps_the_rest() -> None:
    moved = node("h100-01", {"nvidia.com/gpu.present": "true", PATH: "device-plugin"})
    plan = plan_labels([moved], ["h100-01"], node_labels={"h100-01": {PATH: "dra"}})
    (patch,) = plan.patches
    assert patch.labels == {PATH: ["device-plugin", "dra"]}
    assert patch.patch == {"metadata": {"labels": {PATH: "dra"}}}


def test_a_node_label_wins_over_the_same_key_in_labels() -> None:
    plan = plan_labels(
        [node("a")], ["a"], labels={PATH: "dra"}, node_labels={"a": {PATH: "device-plugin"}}
    )
    assert plan.patches[0].patch == {"metadata": {"labels": {PATH: "device-plugin"}}}


def test_removal_from_others_removes_the_node_label_keys_too() -> None:
    left = node("old-gpu", {"nvidia.com/gpu.present": "true", PATH: "dra", "keep": "1"})
    plan = plan_labels(
        [node("gpu", {"nvidia.com/gpu.present": "true", PATH: "dra"}), left],
        ["gpu"],
        node_labels={"gpu": {PATH: "dra"}},
        remove_from_others=True,
    )
    (patch,) = plan.patches
    assert patch.name == "old-gpu" and patch.role == "other"
    assert patch.patch == {"metadata": {"labels": {"nvidia.com/gpu.present": None, PATH: None}}}


def test_node_labels_of_a_node_not_listed_are_refused() -> None:
    with pytest.raises(NodeLabelError) as info:
        plan_labels([node("a")], ["a"], node_labels={"b": {PATH: "dra"}})
    assert str(info.value) == (
        "node_labels names node(s) b that are not in nodes; fix: give labels only for the "
        "nodes listed"
    )


def test_a_bad_node_label_value_names_the_node() -> None:
    with pytest.raises(NodeLabelError, match=r"node_labels\['a'\]\[.gpufleet.io/gpu-path.\]"):
        normalize_node_labels({"a": {PATH: "device plugin"}}, ["a"])


def test_only_node_labels_is_something_to_set() -> None:
    plan = plan_labels([node("a")], ["a"], labels={}, node_labels={"a": {PATH: "dra"}})
    assert plan.patches[0].patch == {"metadata": {"labels": {PATH: "dra"}}}


def test_conflict_recomputes_with_the_node_labels_of_that_node() -> None:
    plan = plan_labels(
        [node("gpu-1", rv="7")],
        ["gpu-1"],
        labels={},
        node_labels={"gpu-1": {PATH: "device-plugin"}},
        taints=[GPU_TAINT],
    )
    fresh = node("gpu-1", {PATH: "dra"}, taints=[], rv="8")
    bodies: list[dict] = []

    def send(name: str, body: dict) -> None:
        bodies.append(body)
        if body["metadata"].get("resourceVersion") == "7":
            raise Conflict()

    done, failure = apply_patches(
        plan.patches,
        send,
        lambda name: fresh,
        {},
        normalize_taints([GPU_TAINT]),
        is_conflict=lambda err: isinstance(err, Conflict),
        node_labels={"gpu-1": {PATH: "device-plugin"}},
    )
    assert failure is None
    assert bodies[1]["metadata"]["labels"] == {PATH: "device-plugin"}
    assert done[0].labels == {PATH: ["dra", "device-plugin"]}
