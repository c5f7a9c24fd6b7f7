# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Moving one batch of a GPU pool's nodes to the other GPU path, over the API.

The path label (``gpu_paths.PATH_LABEL``) decides where each advertiser runs: the device plugin's
DaemonSet selects ``device-plugin``, the DRA kubelet plugin's ``dra``
(roles ``device_plugin`` and ``dra_driver``). Per batch, in order, each phase for every
node of the batch before the next phase:

1. ``cordon``: nodes not cordoned before are cordoned (``spec.unschedulable``);
2. ``evict``: the GPU pods on them (``migrate.plan``'s list: pods that ask for the device
   plugin's resources or hold ResourceClaims) are evicted through the Eviction API, which
   keeps PodDisruptionBudgets (a 429 is asked again until ``evict_timeout``), and are
   waited for until they are gone from the node;
3. ``stop``: the label becomes ``MOVING``, which neither advertiser selects, and the
   nodes are waited for until they advertise nothing (the extended resource at 0, no
   devices in ResourceSlices of the driver);
4. ``start``: the label becomes the target path, and the nodes are waited for until
   they advertise it;
5. ``uncordon``: nodes this move cordoned are uncordoned.

At no moment does a node advertise its GPUs both ways: the new advertiser is selected only
once the old one advertises nothing; a node seen advertising both stops the batch at once.
A batch that fails is put back: the label of each node as it was, each node waited for
until it advertises its old path again (within ``advertise_timeout``), and uncordoned when
this move cordoned it. Evicted pods are not brought back: their controllers make new ones,
which the scheduler places on what the nodes advertise.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_state as ns
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_map
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.migrate import plan as mp
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import paths as rpaths

__all__ = ["MOVING", "MoveFailed", "NodeRecord", "advertised", "move_batch"]

#: The label's value while a node is between paths: neither advertiser selects it.
MOVING = "moving"

Request = Callable[..., Any]


@dataclass
class NodeRecord:
    """One node's move: what it was before (cordoned, label value or None), the pods
    evicted, the phase reached and the seconds each phase took."""

    node: str
    was_cordoned: bool = False
    label_before: str | None = None
    phase: str = "read"
    evicted: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "was_cordoned": self.was_cordoned,
            "label_before": self.label_before,
            "phase": self.phase,
            "evicted": list(self.evicted),
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
        }


class MoveFailed(Exception):
    """The batch failed at ``phase`` on ``node``; ``restored`` says whether every node of
    the batch was put back (label, advertiser, cordon); ``records`` each node's move."""

    def __init__(
        self, message: str, node: str, phase: str, restored: bool, records: list[NodeRecord]
    ) -> None:
        super().__init__(message)
        self.node = node
        self.phase = phase
        self.restored = restored
        self.records = records


@dataclass(frozen=True)
class Clock:
    """Time for the waits: ``sleep`` and ``now`` (monotonic seconds), and the seconds
    between two reads of the API."""

    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.monotonic
    interval: float = 2.0


def advertised(state: Mapping[str, Any]) -> str:
    """What a node advertises, from ``cluster.node_state.node_state``'s answer
    (``migrate.plan.advertises``)."""
    return mp.advertises(state.get("allocatable"), int(state.get("devices") or 0))


def _label_patch(value: str | None) -> dict[str, Any]:
    return {"metadata": {"labels": {gp.PATH_LABEL: value}}}


def _pods_path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{urllib.parse.quote(namespace, safe='')}/pods"
    return f"{base}/{urllib.parse.quote(name, safe='')}" if name else base


def _items(answer: Any, path: str) -> list[Mapping[str, Any]]:
    """The objects of a list answer (none for an empty answer). Raises KubeError for an
    answer that is not an object whose ``items`` is a list of objects: what it lists cannot
    be known, so the batch fails and is put back."""
    if answer is None:
        return []
    items = answer.get("items") if isinstance(answer, Mapping) else None
    if not isinstance(answer, Mapping):
        odd = f"a {type(answer).__name__}, not an object"
    elif items is None:
        return []
    elif not isinstance(items, list):
        odd = f"items of type {type(items).__name__}"
    elif not all(isinstance(i, Mapping) for i in items):
        odd = "an item that is not an object"
    else:
        return items
    raise vk.KubeError(
        None,
        f"the answer to GET {path} is {odd}: not the Kubernetes API's list; fix: check that "
        "the kubeconfig names the cluster's kube-apiserver",
    )


def _gpu_pods_on(request: Request, node: str) -> list[tuple[str, str]]:
    query = [("fieldSelector", f"spec.nodeName={node}")]
    answer = request("GET", "/api/v1/pods", query=query)
    out = []
    for pod in _items(answer, "/api/v1/pods"):
        meta, spec = as_map(pod.get("metadata")), as_map(pod.get("spec"))
        phase = as_map(pod.get("status")).get("phase")
        if phase in ("Succeeded", "Failed") or meta.get("deletionTimestamp"):
            continue
        if not (rpaths.pod_requests(pod) or spec.get("resourceClaims")):
            continue
        namespace, name = meta.get("namespace"), meta.get("name")
        if not (isinstance(namespace, str) and namespace and isinstance(name, str) and name):
            raise vk.KubeError(
                None,
                f"a GPU pod on node {node} has no namespace and name to evict it by "
                f"(metadata {str(pod.get('metadata'))[:80]}); fix: check that the kubeconfig "
                "names the cluster's kube-apiserver",
            )
        out.append((namespace, name))
    return sorted(out)


class _Batch:
    def __init__(
        self,
        request: Request,
        records: list[NodeRecord],
        driver: str,
        clock: Clock,
        log: Callable[[str], None],
    ) -> None:
        self.request = request
        self.records = records
        self.driver = driver
        self.clock = clock
        self.log = log

    def state(self, node: str) -> dict[str, Any]:
        return ns.node_state(
            lambda path: self.request("GET", path),
            lambda path, query: _items(self.request("GET", path, query=query), path),
            node,
            self.driver,
        )

    def patch(self, node: str, body: Mapping[str, Any]) -> None:
        self.request("PATCH", ns.node_path(node), body=body, content_type=ns.MERGE_PATCH)

    def cordon(self, record: NodeRecord) -> None:
        if not record.was_cordoned:
            self.patch(record.node, {"spec": {"unschedulable": True}})

    def uncordon(self, record: NodeRecord) -> None:
        if not record.was_cordoned:
            ns.uncordon(self.request, record.node)

    def wait(self, phase: str, want: str, timeout: float, nodes: Sequence[str] = ()) -> None:
        """Until every node (of ``nodes``, else of the batch) advertises ``want``; a node
        that advertises both fails at once."""
        deadline = self.clock.now() + timeout
        pending = set(nodes) or {r.node for r in self.records}
        seen: dict[str, str] = {}
        while True:
            for node in sorted(pending):
                try:
                    seen[node] = advertised(self.state(node))
                except vk.KubeError as err:
                    if not (err.status is None or err.status >= 500):
                        raise
                    seen[node] = f"unknown ({err})"
                if seen[node] == gp.BOTH:
                    raise _Stop(
                        node,
                        phase,
                        f"node {node} advertises its GPUs both through the device plugin and "
                        "through DRA",
                    )
                if seen[node] == want:
                    pending.discard(node)
            if not pending:
                return
            if self.clock.now() + self.clock.interval > deadline:
                node = sorted(pending)[0]
                raise _Stop(
                    node,
                    phase,
                    f"node {node} still advertises {seen.get(node)}, not {want}, after "
                    f"{timeout:g} s",
                )
            self.clock.sleep(self.clock.interval)

    def evict(self, record: NodeRecord, timeout: float) -> None:
        deadline = self.clock.now() + timeout
        pods = _gpu_pods_on(self.request, record.node)
        for namespace, name in pods:
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
            }
            while True:
                try:
                    self.request("POST", _pods_path(namespace, name) + "/eviction", body=body)
                    break
                except vk.KubeError as err:
                    if err.status == 404:  # gone already
                        break
                    if err.status != 429 or self.clock.now() + self.clock.interval > deadline:
                        raise _Stop(
                            record.node,
                            "evict",
                            f"evicting pod {namespace}/{name} from node {record.node}: {err}",
                        ) from None
                    self.clock.sleep(self.clock.interval)  # a PodDisruptionBudget: later
            record.evicted.append(f"{namespace}/{name}")
        while pods:
            left = set(_gpu_pods_on(self.request, record.node)) & set(pods)
            if not left:
                return
            if self.clock.now() + self.clock.interval > deadline:
                names = ", ".join(f"{n}/{p}" for n, p in sorted(left))
                raise _Stop(
                    record.node,
                    "evict",
                    f"pods {names} are still on node {record.node} after {timeout:g} s",
                )
            self.clock.sleep(self.clock.interval)


class _Stop(Exception):
    def __init__(self, node: str, phase: str, message: str) -> None:
        super().__init__(message)
        self.node = node
        self.phase = phase


def move_batch(
    request: Request,
    nodes: Sequence[str],
    to_path: str,
    *,
    driver: str,
    evict_timeout: float = 600,
    advertise_timeout: float = 300,
    clock: Clock | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> list[NodeRecord]:
    """Move ``nodes`` to ``to_path`` (module docstring); ``request(method, path, query=,
    body=, content_type=)`` as ``kube.client.Kube.request``. Returns each node's record.
    Raises MoveFailed (after putting the batch back) when a phase fails, ValueError for a
    ``to_path`` that is not a path."""
    if to_path not in gp.PATHS:
        raise ValueError(f"to_path {to_path!r} is not one of {', '.join(gp.PATHS)}")
    clock = clock or Clock()
    records = [NodeRecord(n) for n in nodes]
    batch = _Batch(request, records, driver, clock, log)
    try:
        for record in records:
            state = batch.state(record.node)
            record.was_cordoned = bool(state["unschedulable"])
            record.label_before = state["labels"].get(gp.PATH_LABEL)
            if advertised(state) == gp.BOTH:
                raise _Stop(record.node, "read", f"node {record.node} advertises both already")
        _phase(records, "cordon", clock, batch.cordon)
        _phase(records, "evict", clock, lambda r: batch.evict(r, evict_timeout))
        _phase(records, "stop", clock, lambda r: batch.patch(r.node, _label_patch(MOVING)))
        _timed(records, "stop", clock, lambda: batch.wait("stop", gp.NONE, advertise_timeout))
        _phase(records, "start", clock, lambda r: batch.patch(r.node, _label_patch(to_path)))
        _timed(records, "start", clock, lambda: batch.wait("start", to_path, advertise_timeout))
        _phase(records, "uncordon", clock, batch.uncordon)
    except (_Stop, vk.KubeError) as err:
        node = getattr(err, "node", "") or next((r.node for r in records if r.phase != "done"), "")
        phase = getattr(err, "phase", "") or next((r.phase for r in records if r.node == node), "")
        restored = _restore(batch, advertise_timeout)
        raise MoveFailed(str(err), node, phase, restored, records) from None
    for record in records:
        record.phase = "done"
    return records


def _phase(
    records: list[NodeRecord], phase: str, clock: Clock, act: Callable[[NodeRecord], Any]
) -> None:
    for record in records:
        record.phase = phase
        started = clock.now()
        act(record)
        record.seconds[phase] = record.seconds.get(phase, 0.0) + clock.now() - started


def _timed(records: list[NodeRecord], phase: str, clock: Clock, act: Callable[[], Any]) -> None:
    started = clock.now()
    act()
    for record in records:
        record.seconds[phase] = record.seconds.get(phase, 0.0) + clock.now() - started


def _restore(batch: _Batch, timeout: float) -> bool:
    """Each node's label as it was, its old path waited for, the cordon undone; whether
    all of it went through."""
    ok = True
    relabelled = [r for r in batch.records if r.phase in ("stop", "start", "uncordon")]
    for record in relabelled:
        try:
            batch.patch(record.node, _label_patch(record.label_before))
        except vk.KubeError:
            ok = False
    for old in sorted({str(r.label_before) for r in relabelled} & set(gp.PATHS)):
        try:
            nodes = [r.node for r in relabelled if r.label_before == old]
            batch.wait("restore", old, timeout, nodes)
        except (_Stop, vk.KubeError):
            ok = False
    for record in batch.records:
        if record.phase == "read":
            continue
        try:
            batch.uncordon(record)
        except vk.KubeError:
            ok = False
    return ok
