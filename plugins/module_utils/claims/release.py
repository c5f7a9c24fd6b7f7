# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Releasing a leaked ResourceClaim: the writes ``gpufleet claims gc --apply`` makes for one
claim that ``claims.gc.plan_gc`` judged leaked (its pods are gone), as
kube-controller-manager's resource claim controller would
(``pkg/controller/resourceclaim/controller.go``: drop the dead ``status.reservedFor``
entries, clear ``status.allocation`` when nothing reserves the claim, remove the
``resource.kubernetes.io/delete-protection`` finalizer, delete a generated claim whose pod
is gone).

Every write carries the ``resourceVersion`` of the object it replaces: a claim that changed
since it was listed is refused by the API server (409) and never overwritten; the DELETE
carries ``preconditions`` (uid and resourceVersion) for the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import gc as cgc
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import leaks as cleaks
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk


def claim_path(resource_version: str, namespace: str, name: str) -> str:
    """The API path of ResourceClaim ``namespace/name`` in ``resource.k8s.io``
    ``resource_version`` (``v1``, ``v1beta2``...)."""
    return f"/apis/resource.k8s.io/{resource_version}/namespaces/{namespace}/resourceclaims/{name}"


def release_claim(
    kube: vk.Kube, resource_version: str, claim: Mapping[str, Any], action: cgc.GcAction
) -> list[tuple[str, str]]:
    """Apply ``action`` (a ``release`` or ``delete`` of ``plan_gc``) to ``claim`` (the
    ResourceClaim dict as listed, ``metadata.resourceVersion`` included), in this order:

    1. ``PUT <claim>/status`` with ``status`` replaced by ``action.status_patch`` (when set);
    2. ``PUT <claim>`` with the finalizer ``resource.kubernetes.io/delete-protection``
       removed from ``metadata.finalizers`` of the object step 1 returned (when
       ``action.remove_finalizer``);
    3. ``DELETE <claim>`` with ``DeleteOptions`` whose preconditions are the claim's uid
       and the resourceVersion step 2 (or 1) returned (when ``action.delete``).

    Returns ``(method, path)`` of each request made. Raises ``kube.client.KubeError`` from
    the first refused request (``status`` 409: the claim changed since the list; nothing
    after it is sent)."""
    meta = claim["metadata"]
    path = claim_path(resource_version, meta["namespace"], meta["name"])
    made: list[tuple[str, str]] = []
    current: Mapping[str, Any] = claim
    if action.status_patch is not None:
        current = kube.request(
            "PUT", path + "/status", body={**claim, "status": action.status_patch}
        )
        made.append(("PUT", path + "/status"))
    if action.remove_finalizer:
        fins = [f for f in current["metadata"].get("finalizers") or [] if f != cleaks.FINALIZER]
        body = {**current, "metadata": {**current["metadata"], "finalizers": fins}}
        current = kube.request("PUT", path, body=body)
        made.append(("PUT", path))
    if action.delete:
        preconditions = {
            "uid": meta["uid"],
            "resourceVersion": current["metadata"]["resourceVersion"],
        }
        kube.request(
            "DELETE",
            path,
            body={"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions},
        )
        made.append(("DELETE", path))
    return made
