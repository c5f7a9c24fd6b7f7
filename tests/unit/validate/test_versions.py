"""Version checks of a listed cluster: skew, lockstep, known-bad releases, runtimes
(``plugins/module_utils/validate/versions.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import versions as vver

from tests.unit.validate.listed_cluster import LABELS, apiserver_pod, by_id, healthy
from tests.unit.validate_objects import (
    node,
)

pytestmark = pytest.mark.unit


def test_kubelet_newer_than_the_apiserver_fails_skew() -> None:
    listing, settings = healthy()
    listing.nodes[1] = node("gpu-1", LABELS, kubelet="v1.38.0")
    c = by_id(vver.versions_checks(listing, settings))
    assert c["versions.kubelet-skew"].status == "fail"
    assert (
        "kubelet must not be newer than any kube-apiserver"
        in c["versions.kubelet-skew"].problems[0].message
    )
    assert c["versions.gpu-kubelet-lockstep"].status == "fail"
    # on a tie the node that is not on the newest version is named
    assert [p.subject for p in c["versions.gpu-kubelet-lockstep"].problems] == ["gpu-2"]


def test_lockstep_tie_names_the_node_left_behind() -> None:
    listing, settings = healthy()
    listing.nodes[2] = node("gpu-2", LABELS, kubelet="v1.36.3")
    c = by_id(vver.versions_checks(listing, settings))
    lockstep = c["versions.gpu-kubelet-lockstep"]
    assert lockstep.status == "fail"
    assert [(p.subject, p.message.split(" while ")[0]) for p in lockstep.problems] == [
        ("gpu-2", "kubelet 1.36.3")
    ]
    assert c["versions.kubelet-skew"].status == "pass"


def test_apiservers_two_minors_apart_fail() -> None:
    listing, settings = healthy()
    listing.pods.append(apiserver_pod("cp-2", "1.35.0"))
    c = by_id(vver.versions_checks(listing, settings))
    assert c["versions.apiserver-skew"].status == "fail"


def test_known_bad_release_is_flagged() -> None:
    listing, settings = healthy()
    listing.version = {"gitVersion": "v1.30.0"}
    listing.pods = [apiserver_pod("cp", "1.30.0")]
    listing.nodes = [node("gpu-1", LABELS, kubelet="v1.30.0")]
    c = by_id(vver.versions_checks(listing, settings))
    assert c["versions.known-bad"].status == "fail"
    assert "1.30.1" in (c["versions.known-bad"].fix or "")


def test_a_138_kubelet_on_containerd_17_fails_naming_the_node() -> None:
    listing, settings = healthy()
    listing.nodes[2] = node("gpu-2", LABELS, kubelet="v1.38.0")
    listing.nodes[2]["status"]["nodeInfo"]["containerRuntimeVersion"] = "containerd://1.7.28"
    listing.nodes[1]["status"]["nodeInfo"]["containerRuntimeVersion"] = "containerd://1.7.28"
    c = by_id(vver.versions_checks(listing, settings))["versions.container-runtime"]
    assert c.status == "fail"
    # gpu-1's kubelet is 1.37: containerd 1.7 is still fine for it
    assert [p.subject for p in c.problems] == ["gpu-2"]
    assert "containerd 2.0 or later" in c.problems[0].message
    listing.nodes[2]["status"]["nodeInfo"]["containerRuntimeVersion"] = "containerd://2.4.2"
    assert by_id(vver.versions_checks(listing, settings))["versions.container-runtime"].status == (
        "pass"
    )


def test_version_evidence_groups_nodes_by_version_and_counts_past_a_few() -> None:
    many = {f"gpu-{i:05d}": "v1.38.0" for i in range(10_000)}
    many.update({"gpu-b": "v1.37.2", "gpu-a": "v1.37.2"})
    text = vver._per_version(many)
    top, old = text.split("; ")
    assert top.startswith("v1.38.0: gpu-00000, gpu-00001, ")
    assert top.endswith(f"gpu-{vver.MAX_NAMED_NODES - 1:05d} and 9980 more")
    assert old == "v1.37.2: gpu-a, gpu-b"
    assert len(text) < 1000
    assert vver._per_version({}) == "none"
