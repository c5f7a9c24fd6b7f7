"""The pod index: which live pods use a claim, done pods, and the small pods it keeps."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pods as cpods

from tests.unit.validate_objects import pod

pytestmark = pytest.mark.unit


def test_a_claim_is_used_only_by_live_pods() -> None:
    running = pod("trainer", claims=["train"])
    finished = pod("eval", phase="Succeeded", claims=["train"])
    index = cpods.PodIndex([running, finished])
    assert len(index) == 2
    assert [cpods.key(p) for p in index.users[("default", "train")]] == ["default/trainer"]
    assert ("default", "missing") not in index.users


def test_an_index_of_some_claims_keeps_only_their_live_pods() -> None:
    trainer = pod("trainer", claims=["train"])
    done = pod("old", phase="Failed", claims=["train"])
    other = pod("serve", claims=["serve"])
    generated = pod("gen")
    generated["status"]["resourceClaimStatuses"] = [
        {"name": "gpu", "resourceClaimName": "gen-gpu-x1"}
    ]
    pods = [trainer, done, other, generated]

    index = cpods.PodIndex(pods, claims={("default", "train"), ("default", "gen-gpu-x1")})

    assert len(index) == 2  # trainer and gen; the done pod and the other claim's are left out
    assert [cpods.key(p) for p in index.users[("default", "train")]] == ["default/trainer"]
    assert [cpods.key(p) for p in index.users[("default", "gen-gpu-x1")]] == ["default/gen"]
    assert ("default", "serve") not in index.users
    assert index.get("default", "serve") is None
    # the whole index knows all four pods and the same users of the claims asked for
    whole = cpods.PodIndex(pods)
    assert len(whole) == 4
    for key in (("default", "train"), ("default", "gen-gpu-x1")):
        assert index.users[key] == whole.users[key]
    assert cpods.PodIndex(pods, claims=set()).users == {}


def test_a_pod_deleted_before_it_was_scheduled_is_done() -> None:
    deleted = pod("w", phase="Pending")
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert cpods.pod_done(deleted)
    deleted["spec"]["nodeName"] = "gpu-1"
    assert not cpods.pod_done(deleted)


def test_the_index_keeps_the_fields_the_checks_read() -> None:
    index = cpods.PodIndex([pod("w", phase="Pending", node_name="gpu-1", scheduled_message="no")])
    assert index.get("default", "w") == {
        "metadata": {"name": "w", "namespace": "default", "uid": "uid-w"},
        "spec": {"nodeName": "gpu-1"},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "no"}],
        },
    }
    assert index.get("default", "other") is None


def test_key_of_a_cluster_scoped_object_is_its_name() -> None:
    assert cpods.key({"metadata": {"name": "gpu.nvidia.com"}}) == "gpu.nvidia.com"


def test_pods_share_their_phase_and_node_strings_and_a_claim_may_have_several_users() -> None:
    """Pods decoded from one answer each hold their own strings: the index keeps one
    object per phase and per node name, whatever text or value a pod has there."""
    first = pod("a", node_name="".join(["gpu-", "1"]), claims=["shared"])
    second = pod("b", node_name="".join(["gpu-", "1"]), claims=["shared"])
    third = pod("c", claims=["own"])
    second["status"]["phase"] = "".join(["Run", "ning"])
    odd = pod("d", node_name="gpu-2")
    odd["status"]["phase"] = 3  # not text: kept as it is
    index = cpods.PodIndex([first, second, third, odd])
    a, b = index.get("default", "a"), index.get("default", "b")
    assert a["spec"]["nodeName"] is b["spec"]["nodeName"]
    assert a["status"]["phase"] is b["status"]["phase"] == "Running"
    assert index.get("default", "d")["status"]["phase"] == 3
    assert [cpods.key(p) for p in index.users[("default", "shared")]] == [
        "default/a",
        "default/b",
    ]
    assert [cpods.key(p) for p in index.users[("default", "own")]] == ["default/c"]
    assert len(index.users) == 2
