"""claims.prepare-failed: the kubelet's FailedPrepareDynamicResources Events become findings
naming the node, the pod and the kubelet's message; the Events are one LIST selected by
reason on the server."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import (
    report as validate_report,
)

from tests.unit.validate_objects import pod

pytestmark = pytest.mark.unit

#: The kubelet's message on the H200 node whose driver root had an empty dev/ (NVIDIA's
#: DRA kubelet plugin 0.4.1).
EMPTY_EDITS = (
    "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
    "failed for ResourceClaim gpu-test-claim-x7k2p: error preparing devices for claim "
    "default/gpu-test-claim-x7k2p:3f1c: unable to create CDI spec file for claim: failed to "
    "validate device spec: invalid device, empty device edits"
)


def event(
    pod_name: str,
    message: str = EMPTY_EDITS,
    node: str | None = "gpu-1",
    namespace: str = "default",
    last: str = "2026-12-02T10:00:00Z",
    count: int = 1,
    reporting_instance: str = "",
) -> dict[str, Any]:
    """A core/v1 Event as the kubelet records it on a Pod."""
    return {
        "metadata": {"name": f"{pod_name}.18a", "namespace": namespace},
        "reason": "FailedPrepareDynamicResources",
        "type": "Warning",
        "message": message,
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": pod_name},
        "source": {"component": "kubelet", **({"host": node} if node else {})},
        "reportingComponent": "kubelet",
        "reportingInstance": reporting_instance,
        "count": count,
        "lastTimestamp": last,
    }


def check(
    events: list[dict[str, Any]], pods: list[dict[str, Any]] | None = None
) -> validate_report.Check:
    return vc.prepare_failed_check(vli.Listing(events=events, pods=pods or []))


def test_no_event_passes() -> None:
    c = check([], [pod("job-1", phase="Running")])
    assert c.status == "pass"
    assert c.summary == "no FailedPrepareDynamicResources Event on any pod"


def test_empty_device_edits_fails_naming_node_pod_message_and_the_host_check() -> None:
    c = check(
        [event("job-1", count=3), event("job-1", last="2026-12-02T09:00:00Z", count=2)],
        [pod("job-1", node_name="gpu-1", phase="Pending")],
    )
    assert c.status == "fail"
    (p,) = c.problems
    assert p.subject == "gpu-1"
    assert p.message == (f"pod default/job-1: {EMPTY_EDITS} (5 time(s), last 2026-12-02T10:00:00Z)")
    assert "the check hosts.driver-root names the node and the directory" in c.fix
    assert c.data["pods"] == 1


def test_another_message_gets_the_generic_fix_only() -> None:
    text = "Failed to prepare dynamic resources: plugin gpu.nvidia.com not registered"
    c = check([event("job-2", message=text)], [pod("job-2", phase="Pending")])
    assert c.problems[0].message.startswith(f"pod default/job-2: {text} (")
    assert "hosts.driver-root" not in c.fix
    assert "kubectl describe pod NAMESPACE/POD" in c.fix


def test_the_node_comes_from_reporting_instance_or_the_pod() -> None:
    c = check(
        [
            event("a", node=None, reporting_instance="gpu-3"),
            event("b", node=None),
        ],
        [pod("a", phase="Pending"), pod("b", node_name="gpu-4", phase="Pending")],
    )
    assert sorted(p.subject for p in c.problems) == ["gpu-3", "gpu-4"]


def test_a_pod_that_has_since_started_or_is_gone_is_a_warning() -> None:
    c = check(
        [event("ran", last="2026-12-02T10:00:02Z"), event("gone", last="2026-12-02T10:00:01Z")],
        [pod("ran", phase="Running")],
    )
    assert c.status == "warn"
    assert [p.message.rsplit("; ", 1)[1] for p in c.problems] == [
        "the pod has since started (Running))",
        "the pod is gone)",
    ]


def test_findings_are_bounded_newest_first_and_the_rest_counted() -> None:
    events = [event(f"job-{i:02d}", last=f"2026-12-02T10:00:{i:02d}Z") for i in range(25)]
    pods = [pod(f"job-{i:02d}", phase="Pending") for i in range(25)]
    c = check(events, pods)
    assert len(c.problems) == vc.MAX_PREPARE_FINDINGS + 1
    assert c.problems[0].message.startswith("pod default/job-24: ")
    assert c.problems[-1].subject is None
    assert c.problems[-1].message == (
        "5 more pod(s) with FailedPrepareDynamicResources Events, not listed here"
    )
    assert c.data["pods"] == 25


def test_a_long_message_is_cut() -> None:
    c = check([event("job-1", message="x" * 2000)], [pod("job-1", phase="Pending")])
    assert len(c.problems[0].message) < vc.MAX_MESSAGE + 100


def test_events_that_could_not_be_listed_skip_the_check() -> None:
    c = vc.prepare_failed_check(vli.Listing(errors={"events": "403: forbidden"}))
    assert c.status == "skip"
    assert c.reason == "Events could not be listed: 403: forbidden"


def test_claims_checks_include_it_even_when_claims_cannot_be_listed() -> None:
    listing = vli.Listing(events=[event("job-1")], errors={"resourceclaims": "404"})
    by_id = {
        c.id: c
        for c in vc.claims_checks(
            listing,
            vli.Settings(driver=ddc.NVIDIA_DRIVER, device_classes=[*ddc.GPU_DEVICE_CLASSES]),
        )
    }
    assert by_id["claims.prepare-failed"].status == "fail"
    assert by_id["claims.pending"].status == "skip"


class FakeKube:
    """The Kube calls list_cluster makes: GETs and paged LISTs, each recorded."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.requests = 0
        self.lists: list[tuple[str, tuple]] = []
        self.ahead: set[bool] = set()

    def get(self, path: str, query: Any = ()) -> Any:
        self.requests += 1
        if path == "/version":
            return {"gitVersion": "v1.37.2"}
        return {"versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]}

    def paged(
        self,
        path: str,
        page_size: int = 5000,
        query: Any = (),
        trim: Any = None,
        schema: Any = None,
        ahead: bool = True,
        keep: Any = None,
    ) -> vk.PagedList:
        self.requests += 1
        self.lists.append((path, tuple(query)))
        self.ahead.add(ahead)
        items = [dict(e, managedFields=[1]) for e in self.events] if path.endswith("events") else []
        trimmed = [trim(i) if trim else i for i in items]
        return vk.PagedList(i for i in trimmed if keep is None or keep(i))


def test_list_cluster_lists_events_once_selected_by_reason() -> None:
    kube = FakeKube([event("job-1")])
    listing = vli.list_cluster(kube)  # type: ignore[arg-type]
    # the kinds are read side by side, none with a page read ahead as well
    assert kube.ahead == {False}
    events = [q for path, q in kube.lists if path == "/api/v1/events"]
    assert events == [(("fieldSelector", "reason=FailedPrepareDynamicResources"),)]
    assert listing.sources["events"] == (
        "GET /api/v1/events?fieldSelector=reason=FailedPrepareDynamicResources"
    )
    (e,) = listing.events
    assert "managedFields" not in e
    assert e["message"] == EMPTY_EDITS and e["source"]["host"] == "gpu-1"
