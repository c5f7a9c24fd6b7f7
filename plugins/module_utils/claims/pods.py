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
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

_TERMINAL = ("Succeeded", "Failed")


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` of an API object (``{}`` when it has none)."""
    return obj.get("metadata") or {}


def key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of an object (``name`` for cluster-scoped ones)."""
    m = metadata(obj)
    return f"{m['namespace']}/{m.get('name')}" if m.get("namespace") else str(m.get("name"))


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


def _shared(value: Any) -> Any:
    """``value``, one object for every equal text (``sys.intern``): a phase or a node name
    is the same for many pods, and a decoded answer holds one string object per pod."""
    try:
        return sys.intern(value)
    except TypeError:  # not text (None; a str subclass or another type a hostile answer has)
        return value


class _Users(Mapping[tuple[str, str], list[Mapping[str, Any]]]):
    """``(namespace, claim)`` -> the live pods that use the claim, each as the small pod
    ``PodIndex.get`` gives."""

    def __init__(self, index: PodIndex) -> None:
        self._index = index
        #: the name of the one pod that uses the claim, or the names of several: a claim
        #: has one user as a rule, and a list for each is 64 bytes more a claim
        self._names: dict[tuple[str, str], str | list[str]] = {}

    def add(self, namespace: str, claim: str, pod: str) -> None:
        k = (namespace, claim)
        had = self._names.get(k)
        if had is None:
            self._names[k] = pod
        elif isinstance(had, list):
            had.append(pod)
        else:
            self._names[k] = [had, pod]

    def __getitem__(self, k: tuple[str, str]) -> list[Mapping[str, Any]]:
        names = self._names[k]
        pods = (
            self._index.get(k[0], pod) for pod in ([names] if isinstance(names, str) else names)
        )
        return [p for p in pods if p is not None]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class PodIndex:
    """Pods by ``(namespace, name)`` and the claims each live (not done) pod uses.

    Each pod is kept as a tuple of the fields the checks read (uid, phase,
    deletionTimestamp, nodeName, the PodScheduled condition when it is not True), its
    namespace, phase and node name one string object for all the pods that share it
    (``_shared``): about 0.5 KiB a pod with the claim it uses, whatever the pod's size
    (0.7 KiB before the strings were shared). ``get`` and ``users`` give each as a small
    pod object with those fields only (``metadata.name``, ``metadata.namespace``,
    ``metadata.uid``, ``metadata.deletionTimestamp``, ``spec.nodeName``,
    ``status.phase``, ``status.conditions``).

    With ``claims`` (``(namespace, claim name)`` pairs) only the live pods that use one
    of them are kept: ``users`` of those claims, and ``get`` of no other pod.

    An index is also a fold (``kube.client.PagedList.derive``): ``PodIndex()`` is empty,
    ``add`` indexes one more pod, ``result`` is the index itself (``index_fold``)."""

    def __init__(
        self,
        pods: Iterable[Mapping[str, Any]] = (),
        claims: Collection[tuple[str, str]] | None = None,
    ) -> None:
        self._pods: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._claims = claims
        self.users = _Users(self)
        for pod in pods:
            self.add(pod)

    def add(self, pod: Mapping[str, Any]) -> None:
        """Index one more pod (a later pod of the same namespace and name replaces it in
        ``get``)."""
        m = metadata(pod)
        # a namespace is shared by many pods: one string object each
        ns, name = _shared(str(m.get("namespace", ""))), str(m.get("name", ""))
        if self._claims is not None:
            if pod_done(pod):
                return
            if {(ns, str(n)) for n in _claim_names(pod)}.isdisjoint(self._claims):
                return
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
            _shared(phase),
            m.get("deletionTimestamp"),
            _shared((pod.get("spec") or {}).get("nodeName")),
            tuple(dict(c) for c in unscheduled) or None,
        )
        if pod_done(pod):
            return
        for n in _claim_names(pod):
            self.users.add(ns, str(n), name)

    def result(self) -> PodIndex:
        return self

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


def index_fold() -> tuple[str, Callable[[], PodIndex]]:
    """The key and the fold of the pods' ``PodIndex`` (``kube.client.PagedList.derive``):
    a reader that walks the pods for more than the index asks for it in the same walk."""
    return "pod-index", PodIndex
