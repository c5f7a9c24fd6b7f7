"""A Helm release's DaemonSet and whether it has rolled out a ready pod to exactly the wanted
nodes (plugins/module_utils/kube/daemonsets.py)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import daemonsets as kds
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import scheduling as ksc

from tests.unit.kube import api_objects
from tests.unit.kube.api_objects import node

pytestmark = pytest.mark.unit

SELECTOR = {"pool": "gpu"}
WORDS = {"what": "agent", "wanted_as": "pool", "fix": "label the pool"}


def daemonset(name: str = "agent", release: str = "rel", **status: int) -> dict[str, Any]:
    return api_objects.daemonset(name, release, {"nodeSelector": SELECTOR}, **status)


def verdict(ds: Any, wanted: list[str], nodes: list[dict], **over: Any) -> dict[str, Any]:
    return kds.rollout_verdict(
        ds, wanted, nodes, why_not_here=ksc.scheduling_problem, **(WORDS | over)
    )


# ----------------------------------------------------------------------------- the DaemonSet


def test_the_release_daemonset_is_found_by_annotation_and_name() -> None:
    found = [
        daemonset("agent-helper"),
        daemonset("agent", release="other"),
        daemonset("agent"),
    ]

    def is_agent(name: str) -> bool:
        return name == "agent"

    assert kds.release_daemonset(found, "rel", is_it=is_agent) is found[2]
    assert kds.release_daemonset(found[:2], "rel", is_it=is_agent) is None
    # a name given picks that DaemonSet, whatever its release and whether is_it takes it
    assert kds.release_daemonset(found, "rel", "agent-helper", is_it=is_agent) is found[0]
    assert kds.release_daemonset(found, "rel", "missing", is_it=is_agent) is None


# ----------------------------------------------------------------------------- the rollout


def test_ready_on_every_wanted_node_passes() -> None:
    assert verdict(daemonset(), ["n1", "n2"], [], namespace="ns") == {
        "ok": True,
        "final": True,
        "message": "DaemonSet ns/agent: 2 of 2 pods ready",
    }


@pytest.mark.parametrize(
    ("ds", "said"),
    [
        (daemonset(observed=2), "DaemonSet agent: rollout not observed yet"),
        (daemonset(desired=0, observed=2), "rollout not observed yet"),
        (daemonset(ready=1), "DaemonSet agent: 1 of 2 pods ready, 2 updated"),
        (daemonset(updated=1), "DaemonSet agent: 2 of 2 pods ready, 1 updated"),
        (None, "no agent DaemonSet of release 'rel' in namespace 'ns' yet"),
    ],
)
def test_a_rollout_under_way_is_waited_for(ds: Any, said: str) -> None:
    found = verdict(ds, ["n1", "n2"], [], release="rel", namespace="ns" if ds is None else "")
    assert (found["ok"], found["final"]) == (False, False)
    assert said in found["message"]


def test_zero_of_zero_is_final() -> None:
    # kubernetes-sigs/dra-driver-nvidia-gpu#1084: 0 == 0 must not pass
    nodes = [node("n1", {})]
    found = verdict(daemonset(desired=0, ready=0, updated=0), ["n1"], nodes)
    assert found == {
        "ok": False,
        "final": True,
        "message": "DaemonSet agent is scheduled on 0 node(s) but there are 1 pool node(s) "
        "(desiredNumberScheduled 0, numberReady 0, updated 0); a DaemonSet with 0 of 0 pods "
        "ready runs nowhere; n1 lacks the label(s) pool=gpu that nodeSelector requires; "
        "fix: label the pool",
    }


def test_no_wanted_node_is_final_too() -> None:
    found = verdict(daemonset(desired=0, ready=0, updated=0), [], [])
    assert (found["ok"], found["final"]) == (False, True)


def test_fewer_pods_than_wanted_nodes_names_the_misfits() -> None:
    nodes = [node("n1", SELECTOR), node("n2", {})]
    found = verdict(daemonset(desired=1, ready=1, updated=1), ["n1", "n2", "n3"], nodes)
    assert (found["ok"], found["final"]) == (False, True)
    assert "; n2 lacks the label(s) pool=gpu" in found["message"]
    assert "; n3 has no Node object; fix:" in found["message"]
    assert "n1 " not in found["message"]


def test_the_other_nodes_it_fits_are_named() -> None:
    nodes = [node("n1", SELECTOR), node("z9", SELECTOR), node("a0", SELECTOR), node("cpu", {})]
    found = verdict(daemonset(desired=3, ready=3, updated=3), ["n1"], nodes)
    assert (found["ok"], found["final"]) == (False, True)
    assert found["message"].endswith("; it also fits other node(s) a0, z9; fix: label the pool")


def test_the_pod_spec_goes_to_the_callers_judge() -> None:
    seen = []

    def why_not_here(n: dict, pod_spec: dict) -> str:
        seen.append((ksc.node_name_of(n), pod_spec))
        return "is the wrong kind"

    found = kds.rollout_verdict(
        daemonset(desired=1), ["n1", "n2"], [node("n1")], why_not_here=why_not_here, **WORDS
    )
    assert seen == [("n1", {"nodeSelector": SELECTOR})]
    assert "; n1 is the wrong kind; n2 has no Node object; fix:" in found["message"]
