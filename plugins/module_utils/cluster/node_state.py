# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""One Node over the API, for the modules that act on a node from the control host (the
upgrade, the move of a GPU pool between paths): its cordon, labels, allocatable resources
and the devices its ResourceSlices publish (``node_state``), a bounded retry for a server
that restarts (a probe failure on a busy control-plane node, the refusals of a server not
ready yet), and the uncordon
(``kubectl uncordon``'s change, made directly: ``spec.unschedulable`` removed by a JSON
merge patch, RFC 7386)."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    OBJECT_RESOURCE_VERSIONS,
    device_fields,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

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
    driver_version: str = "",
) -> dict[str, Any]:
    """``{unschedulable, allocatable, labels, devices, slices}`` of ``node``: its cordon,
    its ``status.allocatable`` and ``metadata.labels`` (objects, empty when absent), and the
    devices and ResourceSlices of ``driver`` on it; from ``get(path)`` (the Node) and
    ``list_items(path, query)`` (ResourceSlices, the first of ``versions`` the server
    serves: a 404 tries the next). With ``driver_version`` only the devices whose
    ``driverVersion`` attribute is that version count (the NVIDIA driver's release as the
    DRA driver publishes it, a semantic version: ``580.159.4`` for 580.159.04). Raises
    KubeError as the callables do; a 404 on every version reads as no slices
    (resource.k8s.io not served)."""
    obj = get(node_path(node))
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    status = obj.get("status") if isinstance(obj, Mapping) else None
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    allocatable = status.get("allocatable") if isinstance(status, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    out = {
        "unschedulable": bool(spec.get("unschedulable")) if isinstance(spec, Mapping) else False,
        "allocatable": dict(allocatable) if isinstance(allocatable, Mapping) else {},
        "labels": dict(labels) if isinstance(labels, Mapping) else {},
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
            devices = devices if isinstance(devices, list) else []
            if driver_version:
                devices = [d for d in devices if device_driver_version(d) == driver_version]
            out["devices"] += len(devices)
        out["slices"] = len(items)
        break
    return out


def device_driver_version(device: Any) -> str:
    """A published device's ``driverVersion`` attribute (``attributes``, or
    ``basic.attributes`` in v1beta1); empty when it has none."""
    if not isinstance(device, Mapping):
        return ""
    attrs = device_fields(device).get("attributes")
    value = attrs.get("driverVersion") if isinstance(attrs, Mapping) else None
    return str(value.get("version") or "") if isinstance(value, Mapping) else ""


def kube_node_state(
    kube: vk.Kube, node: str, driver: str, driver_version: str = ""
) -> dict[str, Any]:
    """``node_state`` over one ``Kube`` connection (its GET and paged list)."""
    return node_state(
        kube.get,
        lambda path, query: kube.list(path, query=query),
        node,
        driver,
        driver_version=driver_version,
    )


def retrying(
    call: Callable[[], T],
    timeout: float,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    starting: Callable[[], bool] | None = None,
) -> tuple[T, int]:
    """``(call(), attempts)``: ``call`` asked again every ``interval`` seconds while it
    raises a KubeError with no answer, a server error (5xx) or 404 (a Node not there yet),
    until ``timeout`` seconds have passed. A refusal (401, 403) is asked again too while
    ``starting()`` says the server is still starting: a kube-apiserver that has just
    restarted answers before its authorizer has read the RBAC bindings, and refuses even
    the cluster's admin until it has. Then, or at once for any other status (or a refusal
    from a server that is ready), raises the last KubeError with ``attempts`` set on it."""
    deadline = clock() + max(timeout, 0)
    attempts = 0
    while True:
        attempts += 1
        try:
            return call(), attempts
        except vk.KubeError as err:
            retry = err.status is None or err.status >= 500 or err.status == 404
            if not retry and err.status in (401, 403) and starting is not None:
                retry = starting()
            if not retry or clock() + interval > deadline:
                err.attempts = attempts  # type: ignore[attr-defined]
                raise
        sleep(interval)


def server_starting(kube: vk.Kube) -> Callable[[], bool]:
    """For :func:`retrying`: whether ``kube``'s API server is still starting, that is, its
    ``/readyz`` (which waits for the server's informers, the RBAC bindings' among them) does
    not answer ``ok``. A server that cannot be asked counts as starting; ``retrying``'s
    timeout bounds the wait."""

    def starting() -> bool:
        try:
            return kube.request("GET", "/readyz", raw=True).strip() != "ok"
        except vk.KubeError:
            return True

    return starting


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
