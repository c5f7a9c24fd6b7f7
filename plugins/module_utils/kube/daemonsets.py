# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""A Helm release's DaemonSet and whether it has rolled out: the DaemonSet of a release in
one DaemonSet list (``release_daemonset``), and whether it runs a ready, updated pod on
exactly the wanted nodes (``rollout_verdict``).

A DaemonSet scheduled on no node reports 0 of 0 pods ready, which a readiness check of
``numberReady == desiredNumberScheduled`` passes (the field case
kubernetes-sigs/dra-driver-nvidia-gpu#1084); ``rollout_verdict`` compares the scheduled count
with the wanted nodes instead, and names the nodes the pod template does not fit and the
others it fits (``kube.scheduling``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.scheduling import (
    node_name_of,
)

__all__ = [
    "HELM_RELEASE_ANNOTATION",
    "release_daemonset",
    "rollout_verdict",
]

#: The annotation Helm puts on every object of a release: the release's name.
HELM_RELEASE_ANNOTATION = "meta.helm.sh/release-name"

#: ``(node, pod_spec) -> reason or ""``: why a pod of this spec cannot run on a Node.
WhyNotHere = Callable[[Mapping[str, Any], Mapping[str, Any]], str]


def release_daemonset(
    daemonsets: Sequence[Mapping[str, Any]],
    release: str,
    name: str = "",
    *,
    is_it: Callable[[str], bool],
) -> Mapping[str, Any] | None:
    """From one DaemonSet list: the one named ``name`` when given, else the first whose
    ``HELM_RELEASE_ANNOTATION`` is ``release`` and whose name ``is_it`` accepts (a chart
    may render several DaemonSets); None when there is none."""
    for ds in daemonsets:
        meta = ds.get("metadata") or {}
        ds_name = str(meta.get("name") or "")
        if name:
            if ds_name == name:
                return ds
            continue
        ann = meta.get("annotations") or {}
        if ann.get(HELM_RELEASE_ANNOTATION) == release and is_it(ds_name):
            return ds
    return None


def _misplaced(
    pod_spec: Mapping[str, Any],
    wanted: Sequence[str],
    nodes: Sequence[Mapping[str, Any]],
    why_not_here: WhyNotHere,
) -> list[str]:
    """Why the pods are not on exactly the ``wanted`` nodes: each wanted node the pod does
    not fit (or that has no Node object), then the other nodes it fits."""
    by_name = {node_name_of(n): n for n in nodes}
    out = []
    for name in wanted:
        node = by_name.get(name)
        why = "has no Node object" if node is None else why_not_here(node, pod_spec)
        if why:
            out.append(f"{name} {why}")
    extra = sorted(
        name
        for name, node in by_name.items()
        if name not in wanted and not why_not_here(node, pod_spec)
    )
    if extra:
        out.append("it also fits other node(s) " + ", ".join(extra))
    return out


def rollout_verdict(
    ds: Mapping[str, Any] | None,
    wanted: Sequence[str],
    nodes: Sequence[Mapping[str, Any]],
    *,
    why_not_here: WhyNotHere,
    what: str,
    wanted_as: str,
    fix: str,
    release: str = "",
    namespace: str = "",
) -> dict[str, Any]:
    """Whether the DaemonSet ``ds`` runs a ready pod on every node of ``wanted`` (node
    names), and only there, judged from one Node list (``nodes``).

    Returns ``{"ok": bool, "final": bool, "message": str}``. ``ok`` needs the controller to
    have seen the newest spec (``status.observedGeneration >= metadata.generation``),
    ``desiredNumberScheduled == len(wanted) > 0`` and ``numberReady`` and
    ``updatedNumberScheduled`` equal to it. ``final`` is True when waiting cannot help: the
    controller has seen the spec and schedules another number of pods (0 of 0 included);
    the message then names the wanted nodes the pod template does not fit (``why_not_here``
    on the live DaemonSet's pod spec) and the other nodes it fits, and ends with ``fix``.

    Wording: ``what`` names the DaemonSet when there is none (``no <what> DaemonSet of
    release ...``), ``wanted_as`` the wanted nodes (``there are 2 <wanted_as> node(s)``).
    """
    if ds is None:
        return {
            "ok": False,
            "final": False,
            "message": f"no {what} DaemonSet of release {release!r} in namespace {namespace!r} yet",
        }
    meta, status = ds.get("metadata") or {}, ds.get("status") or {}
    name = f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))
    desired = int(status.get("desiredNumberScheduled") or 0)
    ready = int(status.get("numberReady") or 0)
    updated = int(status.get("updatedNumberScheduled") or 0)
    seen = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    counts = f"desiredNumberScheduled {desired}, numberReady {ready}, updated {updated}"
    if not seen:
        return {
            "ok": False,
            "final": False,
            "message": f"DaemonSet {name}: rollout not observed yet ({counts})",
        }
    if desired != len(wanted) or desired == 0:
        parts = [
            f"DaemonSet {name} is scheduled on {desired} node(s) but there are {len(wanted)} "
            f"{wanted_as} node(s) ({counts})"
        ]
        if desired == 0:
            parts.append("a DaemonSet with 0 of 0 pods ready runs nowhere")
        pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        parts += _misplaced(pod_spec, wanted, nodes, why_not_here)
        parts.append(f"fix: {fix}")
        return {"ok": False, "final": True, "message": "; ".join(parts)}
    if ready != desired or updated != desired:
        return {
            "ok": False,
            "final": False,
            "message": f"DaemonSet {name}: {ready} of {desired} pods ready, {updated} updated",
        }
    return {
        "ok": True,
        "final": True,
        "message": f"DaemonSet {name}: {ready} of {desired} pods ready",
    }
