# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The I/O edge of validation: raw JSON requests to the API server with the ``kubernetes``
client's configuration and authentication, each kind listed once, requests counted.

Objects stay plain JSON dicts (no model classes), so listing thousands of pods costs one
``json.loads`` per page, and resource.k8s.io kinds are read in whichever version the
cluster serves (v1, v1beta2, v1beta1), independent of the client release.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.validate_cluster import Listing

__all__ = ["RESOURCE_VERSIONS", "Kube", "KubeError", "list_cluster"]

#: resource.k8s.io versions tried for listing, most stable first.
RESOURCE_VERSIONS = ("v1", "v1beta2", "v1beta1")


class KubeError(Exception):
    """A request failed: ``status`` (HTTP status or None when the server was not reached)
    and the server's message."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(f"{status or 'no answer'}: {message}")
        self.status = status
        self.message = message


class Kube:
    """One API server connection from a kubeconfig (``None``: ``KUBECONFIG`` or
    ``~/.kube/config``; in a pod, the in-cluster configuration). Raises KubeError when the
    kubeconfig cannot be loaded or the ``kubernetes`` package is missing."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        try:
            from kubernetes import config as k8s_config
        except ImportError as err:
            raise KubeError(
                None, "the Python package 'kubernetes' is missing; fix: pip install kubernetes"
            ) from err
        try:
            self.client = k8s_config.new_client_from_config(config_file=kubeconfig, context=context)
        except Exception as err:  # ConfigException, OSError, yaml errors
            where = kubeconfig or "KUBECONFIG or ~/.kube/config"
            raise KubeError(
                None,
                f"cannot load the kubeconfig {where}: {err}; fix: pass --kubeconfig "
                "(validate_kubeconfig)",
            ) from None
        self.requests = 0
        self.log: list[str] = []

    def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        raw: bool = False,
    ) -> Any:
        """One request; returns the decoded JSON body. Raises KubeError for a status
        outside 2xx (with the server's message) or a connection failure."""
        self.requests += 1
        self.log.append(
            f"{method} {path}" + (f"?{urllib.parse.urlencode(list(query))}" if query else "")
        )
        headers = {"Accept": "*/*" if raw else "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            if hasattr(self.client, "param_serialize"):  # kubernetes >= 31 (OpenAPI generator 7)
                params = self.client.param_serialize(
                    method=method,
                    resource_path=path,
                    query_params=list(query),
                    header_params=headers,
                    body=body,
                    auth_settings=["BearerToken"],
                )
                resp = self.client.call_api(*params)
                status = resp.status
                data = resp.read() if callable(getattr(resp, "read", None)) else resp.data
                if data is None:
                    data = getattr(resp, "data", b"")
            else:  # pragma: no cover - older client releases
                resp = self.client.call_api(
                    path,
                    method,
                    query_params=list(query),
                    header_params=headers,
                    body=body,
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                )
                status, data = resp.status, resp.data
        except Exception as err:
            status = getattr(err, "status", None)
            message = getattr(err, "body", None) or getattr(err, "reason", None) or str(err)
            raise KubeError(status, _message(message)) from None
        if not 200 <= int(status) < 300:
            raise KubeError(int(status), _message(data))
        if raw:
            return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
        return json.loads(data) if data else {}

    def request_text(self, path: str) -> str:
        """GET ``path`` and return the body as text (pod logs)."""
        return self.request("GET", path, raw=True)

    def get(self, path: str, query: Sequence[tuple[str, Any]] = ()) -> Any:
        return self.request("GET", path, query)

    def list(
        self, path: str, page_size: int = 5000, query: Sequence[tuple[str, Any]] = ()
    ) -> list[dict[str, Any]]:
        """Every item of a list path, ``page_size`` per request (``limit``/``continue``)."""
        items: list[dict[str, Any]] = []
        token = None
        while True:
            q = [*query, ("limit", page_size)] + ([("continue", token)] if token else [])
            page = self.get(path, q)
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items


def _message(data: Any) -> str:
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    try:
        doc = json.loads(data) if isinstance(data, str) else data
        if isinstance(doc, Mapping) and doc.get("message"):
            return str(doc["message"])
    except (ValueError, TypeError):
        pass
    return str(data)[:300]


def resource_version(kube: Kube) -> tuple[Mapping[str, Any] | None, str | None]:
    """``/apis/resource.k8s.io`` (None when the group is not served) and the version to
    list in: the most stable one served of ``RESOURCE_VERSIONS``."""
    try:
        group = kube.get("/apis/resource.k8s.io")
    except KubeError as err:
        if err.status == 404:
            return None, None
        raise
    served = [v.get("version") for v in group.get("versions") or []]
    for v in RESOURCE_VERSIONS:
        if v in served:
            return group, v
    return group, None


def list_cluster(
    kube: Kube,
    plugin_namespace: str = "",
    page_size: int = 5000,
    kinds: Sequence[str] = (
        "nodes",
        "pods",
        "resourceslices",
        "resourceclaims",
        "deviceclasses",
        "daemonsets",
    ),
) -> Listing:
    """List each kind once (paged by ``page_size``) into a Listing; a kind that fails is
    recorded in ``errors`` and left empty. ``/version`` and ``/apis/resource.k8s.io`` are
    read first. Raises KubeError only when the API server does not answer ``/version``."""
    listing = Listing()
    listing.version = kube.get("/version")
    listing.sources["version"] = "GET /version"
    try:
        listing.resource_group, listing.resource_version = resource_version(kube)
    except KubeError as err:
        listing.errors["resource.k8s.io"] = str(err)
    rv = listing.resource_version
    paths = {
        "nodes": "/api/v1/nodes",
        "pods": "/api/v1/pods",
        "daemonsets": f"/apis/apps/v1/namespaces/{plugin_namespace}/daemonsets"
        if plugin_namespace
        else "/apis/apps/v1/daemonsets",
    }
    if rv:
        for kind in ("resourceslices", "resourceclaims", "deviceclasses"):
            paths[kind] = f"/apis/resource.k8s.io/{rv}/{kind}"
    for kind in kinds:
        if kind not in paths:
            listing.errors[kind] = "resource.k8s.io is not served"
            continue
        listing.sources[kind] = f"GET {paths[kind]}"
        try:
            setattr(
                listing,
                {
                    "resourceslices": "slices",
                    "resourceclaims": "claims",
                    "deviceclasses": "classes",
                }.get(kind, kind),
                kube.list(paths[kind], page_size),
            )
        except KubeError as err:
            listing.errors[kind] = str(err)
    listing.requests = kube.requests
    return listing
