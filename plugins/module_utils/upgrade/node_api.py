"""What the upgrade's control-host modules send to the API server about one node: its
cordon and the devices its ResourceSlices publish (``node_state``), a bounded retry for a
server that restarts (a probe failure on a busy control-plane node), the wait for the
devices to come back after the kubelet restart, and the uncordon (``kubectl
uncordon``'s change, made directly: ``spec.unschedulable`` removed by a JSON merge patch,
RFC 7386). Module ``upgrade_node_state`` reads, module ``upgrade_uncordon`` waits and
writes; the drain stays ``kubectl drain`` (evictions, DaemonSets, grace periods are
kubectl's own logic)."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    OBJECT_RESOURCE_VERSIONS,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import (
    record as upgrade_record,
)

T = TypeVar("T")

MERGE_PATCH = "application/merge-patch+json"


def node_path(node: str) -> str:
    """The Node's API path, its name quoted (a name is never read as a path)."""
    return f"/api/v1/nodes/{urllib.parse.quote(node, safe='')}"


def node_state(
    get: Callable[[str], Any],
    list_items: Callable[[str, Sequence[tuple[str, Any]]], list[Any]],
    node: str,
    driver: str,
    versions: Sequence[str] = OBJECT_RESOURCE_VERSIONS,
) -> dict[str, Any]:
    """``{unschedulable, devices, slices}`` of ``node``, from ``get(path)`` (the Node) and
    ``list_items(path, query)`` (ResourceSlices, the first of ``versions`` the server
    serves: a 404 tries the next). Raises KubeError as the callables do; a 404 on every
    version reads as no slices (resource.k8s.io not served)."""
    obj = get(node_path(node))
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    out = {
        "unschedulable": bool(spec.get("unschedulable")) if isinstance(spec, Mapping) else False,
        "devices": 0,
        "slices": 0,
    }
    if not driver:
        return out
    query = [("fieldSelector", f"spec.nodeName={node},spec.driver={driver}")]
    for version in versions:
        try:
            items = list_items(f"/apis/resource.k8s.io/{version}/resourceslices", query)
        except vk.KubeError as err:
            if err.status == 404:
                continue
            raise
        for item in items:
            s = item.get("spec") if isinstance(item, Mapping) else None
            devices = s.get("devices") if isinstance(s, Mapping) else None
            out["devices"] += len(devices) if isinstance(devices, list) else 0
        out["slices"] = len(items)
        break
    return out


def node_module_argspec(**more: Any) -> dict[str, Any]:
    """The argument spec of the upgrade's control-host node modules, as the doc fragments
    ``kube_auth`` and ``upgrade_node`` document it (``kubeconfig``, ``context``, ``node``,
    ``timeout``, ``interval``, ``record``), plus ``more``; a new copy per call."""
    return {
        **vk.kube_auth_argspec(),
        "node": {"type": "str", "required": True},
        "timeout": {"type": "int", "default": 60},
        "interval": {"type": "float", "default": 5},
        "record": upgrade_record.record_argspec(),
        **more,
    }


def kube_node_state(kube: vk.Kube, node: str, driver: str) -> dict[str, Any]:
    """``node_state`` over one ``Kube`` connection (its GET and paged list)."""
    return node_state(kube.get, lambda path, query: kube.list(path, query=query), node, driver)


def retrying(
    call: Callable[[], T],
    timeout: float,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[T, int]:
    """``(call(), attempts)``: ``call`` asked again every ``interval`` seconds while it
    raises a KubeError with no answer, a server error (5xx) or 404 (a Node not there yet),
    until ``timeout`` seconds have passed. Then, or at once for any other status, raises
    the last KubeError with ``attempts`` set on it."""
    deadline = clock() + max(timeout, 0)
    attempts = 0
    while True:
        attempts += 1
        try:
            return call(), attempts
        except vk.KubeError as err:
            retry = err.status is None or err.status >= 500 or err.status == 404
            if not retry or clock() + interval > deadline:
                err.attempts = attempts  # type: ignore[attr-defined]
                raise
        sleep(interval)


def uncordon(request: Callable[..., Any], node: str) -> bool:
    """Make ``node`` schedulable again: GET it and, when ``spec.unschedulable`` is set,
    PATCH it away. ``request(method, path, body=None, content_type=...)`` as
    ``Kube.request``. Returns whether the Node was cordoned (and is no longer). Raises
    KubeError as ``request`` does."""
    path = node_path(node)
    obj = request("GET", path)
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if not (isinstance(spec, dict) and spec.get("unschedulable")):
        return False
    request("PATCH", path, body={"spec": {"unschedulable": None}}, content_type=MERGE_PATCH)
    return True


class DevicesNotBack(Exception):
    """The node's ResourceSlices still publish fewer devices than wanted at the deadline;
    ``devices`` is the last count seen (None: never read)."""

    def __init__(self, devices: int | None, message: str) -> None:
        super().__init__(message)
        self.devices = devices


def wait_devices(
    state: Callable[[], Mapping[str, Any]],
    devices: int,
    timeout: float,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[int, int]:
    """Ask ``state()`` (``node_state``'s answer) every ``interval`` seconds until its
    ``devices`` is at least ``devices``; returns ``(devices seen, requests rounds)``. A
    KubeError with no answer, a server error or 404 counts as not yet; any other raises.
    Raises DevicesNotBack when ``timeout`` seconds pass first."""
    deadline = clock() + max(timeout, 0)
    seen: int | None = None
    rounds = 0
    why = ""
    while True:
        rounds += 1
        try:
            seen = int(state()["devices"])
            if seen >= devices:
                return seen, rounds
            why = f"{seen} device(s) published"
        except vk.KubeError as err:
            if not (err.status is None or err.status >= 500 or err.status == 404):
                raise
            why = str(err)
        if clock() + interval > deadline:
            raise DevicesNotBack(
                seen, f"{why}, fewer than the {devices} before the upgrade, after {timeout:g}s"
            )
        sleep(interval)
