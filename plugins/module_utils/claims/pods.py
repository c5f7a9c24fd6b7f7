# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Pods as the DRA checks read them: by ``(namespace, name)``, done or not, and the
claims each live pod uses.

Pure functions over listed objects (JSON dicts as the API returns them); no I/O. A pod
is done as kube-controller-manager's resource claim controller judges it
(``pkg/controller/resourceclaim/controller.go`` ``isPodDone``, v1.37.2).
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

_TERMINAL = ("Succeeded", "Failed")


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` of an API object (``{}`` when it has none)."""
    return obj.get("metadata") or {}


def key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of an object (``name`` for cluster-scoped ones)."""
    m = metadata(obj)
    return f"{m['namespace']}/{m['name']}" if m.get("namespace") else str(m.get("name"))


def pod_done(pod: Mapping[str, Any]) -> bool:
    """``isPodDone``: a terminal phase, or deleted before it was scheduled."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    return status.get("phase") in _TERMINAL or (
        bool(metadata(pod).get("deletionTimestamp")) and not spec.get("nodeName")
    )


def _claim_names(pod: Mapping[str, Any]) -> set[Any]:
    """The names of the claims ``pod`` uses: those its ``spec.resourceClaims`` name and
    those generated for it (``status.resourceClaimStatuses``)."""
    names = {
        rc.get("resourceClaimName") for rc in (pod.get("spec") or {}).get("resourceClaims") or []
    }
    names |= {
        s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    return names - {None}


class _Users(Mapping[tuple[str, str], list[Mapping[str, Any]]]):
    """``(namespace, claim)`` -> the live pods that use the claim, each as the small pod
    ``PodIndex.get`` gives."""

    def __init__(self, index: PodIndex) -> None:
        self._index = index
        self._names: dict[tuple[str, str], list[str]] = {}

    def add(self, namespace: str, claim: str, pod: str) -> None:
        self._names.setdefault((namespace, claim), []).append(pod)

    def __getitem__(self, k: tuple[str, str]) -> list[Mapping[str, Any]]:
        pods = (self._index.get(k[0], pod) for pod in self._names[k])
        return [p for p in pods if p is not None]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class PodIndex:
    """Pods by ``(namespace, name)`` and the claims each live (not done) pod uses.

    Each pod is kept as a tuple of the fields the checks read (uid, phase,
    deletionTimestamp, nodeName, the PodScheduled condition when it is not True), about
    0.3 KiB a pod whatever the pod's size; ``get`` and ``users`` give each as a small
    pod object with those fields only (``metadata.name``, ``metadata.namespace``,
    ``metadata.uid``, ``metadata.deletionTimestamp``, ``spec.nodeName``,
    ``status.phase``, ``status.conditions``).

    With ``claims`` (``(namespace, claim name)`` pairs) only the live pods that use one
    of them are kept: ``users`` of those claims, and ``get`` of no other pod."""

    def __init__(
        self,
        pods: Iterable[Mapping[str, Any]],
        claims: Collection[tuple[str, str]] | None = None,
    ) -> None:
        self._pods: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.users = _Users(self)
        for pod in pods:
            m = metadata(pod)
            # a namespace is shared by many pods: one string object each
            ns, name = sys.intern(str(m.get("namespace", ""))), str(m.get("name", ""))
            if claims is not None:
                if pod_done(pod):
                    continue
                if {(ns, str(n)) for n in _claim_names(pod)}.isdisjoint(claims):
                    continue
            status = pod.get("status") or {}
            phase = status.get("phase")
            unscheduled = [
                c
                for c in status.get("conditions") or []
                if isinstance(c, Mapping)
                and c.get("type") == "PodScheduled"
                and c.get("status") != "True"
            ]
            self._pods[(ns, name)] = (
                m.get("uid"),
                phase,
                m.get("deletionTimestamp"),
                (pod.get("spec") or {}).get("nodeName"),
                tuple(dict(c) for c in unscheduled) or None,
            )
            if pod_done(pod):
                continue
            for n in _claim_names(pod):
                self.users.add(ns, str(n), name)

    def get(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        rec = self._pods.get((namespace, name))
        if rec is None:
            return None
        uid, phase, deleted, node, conditions = rec
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
        if deleted:
            meta["deletionTimestamp"] = deleted
        status: dict[str, Any] = {"phase": phase} if phase is not None else {}
        if conditions:
            status["conditions"] = [dict(c) for c in conditions]
        return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}

    def __len__(self) -> int:
        return len(self._pods)
