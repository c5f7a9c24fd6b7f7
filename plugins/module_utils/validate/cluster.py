# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Cluster-side validation checks: versions, gates, API, nodes and claims, as pure
functions over objects listed once (``Listing``) and the gate audit's result.

Every function returns ``validate.report.Check`` objects with a stable id:

=================================  ===================================================
id                                 what it checks
=================================  ===================================================
``versions.apiserver-skew``        kube-apiservers within one minor of each other
``versions.kubelet-skew``          no kubelet newer than any kube-apiserver, none more
                                   than 3 minors older (``dra.check_skew``,
                                   ``kubelet_upgrade_allowed``)
``versions.gpu-kubelet-lockstep``  the kubelets of the GPU nodes run one version
``versions.known-bad``             no component runs a release the model marks bad
``gates.component-drift``          running processes = files = kubeadm ConfigMaps, and
                                   every host the same (gate audit)
``gates.model``                    every component as the DRA version model requires
``gates.coverage``                 every host and component could be read
``api.resource-versions``          the resource.k8s.io versions the model expects are
                                   served (``served_api_versions``, runtime-config plan)
``api.deviceclasses``              the DeviceClasses wanted exist
``api.scheduler-dynamicresources`` the scheduler profile runs DynamicResources
``api.deviceclass-extended-resource`` no DeviceClass sets extendedResourceName where
                                   the release does not serve it (DRAExtendedResource)
``nodes.gpu-labels``               every GPU node has the GPU labels
``nodes.plugin-running``           the DRA kubelet plugin pod runs on every GPU node of
                                   a DRA pool
``nodes.resourceslices``           each GPU node of a DRA pool publishes ResourceSlices
                                   whose devices match its GPUs (facts) and the wanted
                                   MIG layout
``nodes.orphan-slices``            no ResourceSlice of a node without its plugin pod
``nodes.dynamic-mig-counters``    on each dynamic-MIG node every GPU publishes its
                                   CounterSet, whose counters and devices' consumption
                                   agree with the GPU model's MIG table
``nodes.dynamic-mig-leftover-gi``  no GPU instance on a dynamic-MIG node that no
                                   allocated claim owns (GPU facts against claims)
``nodes.gpu-path-dual``            no node advertises its GPUs both as nvidia.com/gpu
                                   (device plugin) and in ResourceSlices (DRA)
``nodes.gpu-path-none``            every GPU node advertises its GPUs one way
``nodes.device-plugin-gpus``       each GPU node of a device-plugin pool lists
                                   nvidia.com/gpu above 0 in status.allocatable
``nodes.gpu-paths``                per pool, the path it declares (inventory groups
                                   gpu_path_*) against what its nodes advertise
``claims.leaked``                  no claim holds devices for pods that are gone
``claims.pending``                 no claim pending longer than the threshold
``claims.prepare-failed``          no kubelet Event FailedPrepareDynamicResources: a
                                   node's DRA driver failed to prepare a pod's claims
=================================  ===================================================

Sources: Node ``status.nodeInfo.kubeletVersion``; kube-apiserver static pods
(``component=kube-apiserver`` in kube-system, image tag) and ``/version``; the gate audit
(``gate_audit.audit``); ``/apis/resource.k8s.io``; ResourceSlices ``spec.nodeName``,
``spec.driver``, ``spec.pool.generation`` and devices (``staging/src/k8s.io/api/resource/
v1/types.go``); Events of reason ``FailedPrepareDynamicResources`` on Pods, which the
kubelet records when the node's DRA driver fails NodePrepareResources (``source.host``
or ``reportingInstance``: the node; ``message``: "Failed to prepare dynamic resources:
...").

The checks by area, one module each: ``validate.versions``, ``validate.gates``,
``validate.api``, ``validate.nodes``, ``validate.dynamic_mig``, ``validate.gpu_paths``; what
they read in ``cluster.listing`` (``Listing``, ``Settings``, label selectors). This module runs
them all (``all_checks``) and holds the claims checks over the listed objects (``claims_checks``,
rules in ``claims.leaks.find_leaks`` and ``claims.pending.find_pending``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as ccounters
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import explain as cexplain
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import leaks as cleaks
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pending as cpending
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pods as cpods
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import (
    PREPARE_FAILED_REASON,
    Listing,
    Settings,
    cluster_version,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.forked import Forked
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import (
    dynamic_mig as vdynamic,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import (
    gpu_paths as vgpu_paths,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import nodes as vnodes
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.api import (
    api_checks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.dynamic_mig import (
    dynamic_mig_checks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.gates import (
    gates_checks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.gpu_paths import (
    gpu_paths_checks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.nodes import (
    nodes_checks,
    plugin_pods_fold,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    WARN,
    Check,
    Evidence,
    check_from_dict,
    finish,
    skipped,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.versions import (
    apiserver_fold,
    versions_checks,
)

# Listing, Settings and cluster_version live in validate_listing; validate_run and
# validate_smoke read them from here, with all_checks.
__all__ = [
    "PARALLEL_MIN_CLAIMS",
    "Listing",
    "Settings",
    "all_checks",
    "claims_checks",
    "cluster_version",
    "leaked_check",
    "pending_check",
    "prepare_failed_check",
]

#: Claims from which ``all_checks`` runs ``claims.pending`` in a child process beside the
#: other checks (below, the fork and the copies of what both write cost more than it saves).
PARALLEL_MIN_CLAIMS = 5000
#: Pods ``claims.prepare-failed`` names one by one; the rest are counted.
MAX_PREPARE_FINDINGS = 20
#: Claims ``claims.leaked`` names one by one (and keeps in ``data.leaks``); the rest are
#: counted (``data.leaks_total``), so that the report of a fleet with thousands of leaks
#: stays a few hundred KB.
MAX_CLAIM_FINDINGS = 200
#: Nodes, and reasons, each request of a pending claim's explanation names in
#: ``data.pending`` (``gpufleet claims explain`` lists every one).
MAX_EXPLAINED_NODES = 10
#: Characters of the kubelet's message kept in a finding.
MAX_MESSAGE = 600
#: The plugin's text when the CDI spec of a claim has no device node: its driver root has a
#: dev/ directory without the NVIDIA device nodes.
EMPTY_EDITS = "empty device edits"


# ------------------------------------------------------------------ claims


def claims_checks(
    listing: Listing,
    settings: Settings,
    sets: Mapping[str, ccounters.CounterSet] | None = None,
) -> list[Check]:
    """``claims.leaked``, ``claims.pending`` and ``claims.prepare-failed``; ``sets``: the
    CounterSets of the listing (``claims.counters.counter_sets``) when the caller has
    them, for the pending claims' explanations."""
    unlisted = _claims_unlisted(listing)
    if unlisted is not None:
        return unlisted
    index = cpods.PodIndex(listing.pods)  # one walk over the pods for both checks
    return [
        leaked_check(listing, index),
        pending_check(listing, settings, index, sets),
        prepare_failed_check(listing),
    ]


def _claims_unlisted(listing: Listing) -> list[Check] | None:
    """The claims checks skipped when the claims or the pods could not be listed."""
    if "resourceclaims" not in listing.errors and "pods" not in listing.errors:
        return None
    why = listing.errors.get("resourceclaims") or listing.errors.get("pods")
    return [
        skipped(
            "claims.leaked",
            "no leaked ResourceClaims",
            f"claims or pods could not be listed: {why}",
        ),
        skipped(
            "claims.pending",
            "no ResourceClaim pending too long",
            f"claims or pods could not be listed: {why}",
        ),
        prepare_failed_check(listing),
    ]


def _claims_evidence(listing: Listing) -> list[Evidence]:
    return [
        Evidence(listing.src("resourceclaims"), f"{len(listing.claims)} claim(s)"),
        Evidence(listing.src("pods"), f"{len(listing.pods)} pod(s)"),
    ]


def leaked_check(listing: Listing, index: cpods.PodIndex) -> Check:
    """``claims.leaked``: no claim holds devices for pods that are gone (``index``: the
    listing's pods)."""
    c = Check("claims.leaked", "no leaked ResourceClaims", evidence=_claims_evidence(listing))
    leaks = cleaks.find_leaks(listing.claims, index)
    named = _name_the_worst(
        c,
        leaks,
        lambda leak: f"[{leak.kind}] {leak.reason}",
        "leaked claim(s), not listed here (gpufleet claims gc lists every one)",
    )
    c.data["leaks"] = [x.to_dict() for x in named]
    c.data["leaks_total"] = len(leaks)
    c.fix = (
        "release them: gpufleet claims gc --apply (dry run without --apply); then find out why "
        "kube-controller-manager's resource claim controller did not"
    )
    return finish(c, f"{len(listing.claims)} claim(s), none leaked")


def pending_check(
    listing: Listing,
    settings: Settings,
    index: cpods.PodIndex,
    sets: Mapping[str, ccounters.CounterSet] | None = None,
) -> Check:
    """``claims.pending``: no claim unallocated for longer than the threshold while a pod
    waits for it, each explained (``index``: the listing's pods; ``sets``: as
    ``claims_checks``)."""
    c = Check(
        "claims.pending",
        f"no ResourceClaim unallocated for more than {int(settings.pending_threshold_s)}s",
        evidence=_claims_evidence(listing),
    )
    pend = cpending.find_pending(
        listing.claims,
        index,
        listing.slices,
        listing.classes,
        listing.nodes,
        settings.now,
        settings.pending_threshold_s,
        sets,
    )
    named = _name_the_worst(
        c,
        pend,
        lambda p: p.reason,
        "pending claim(s), not listed here (gpufleet report lists every one)",
    )
    compact: dict[int, list[dict[str, Any]]] = {}
    c.data["pending"] = [
        {**p.to_dict(), "explain": _compact_explanation(p.explain, compact)} for p in named
    ]
    c.data["pending_total"] = len(pend)
    c.fix = (
        "gpufleet claims explain NAMESPACE/CLAIM shows per node and device which selector fails; "
        "fix the selector, the DeviceClass or the MIG layout"
    )
    return finish(c, "no claim pending longer than the threshold")


def _pending_check_dict(
    listing: Listing,
    settings: Settings,
    index: cpods.PodIndex,
    sets: Mapping[str, ccounters.CounterSet],
) -> dict[str, Any]:
    return pending_check(listing, settings, index, sets).to_dict()


def _name_the_worst(
    c: Check, found: list[Any], message: Callable[[Any], str], more: str
) -> list[Any]:
    """One problem of ``c`` per claim of ``found`` (each with ``claim`` and ``status``), at
    most ``MAX_CLAIM_FINDINGS`` of them, fails first so that the named ones are the worst;
    the rest in one problem, ``N more`` followed by ``more``. Returns those named."""
    found.sort(key=lambda x: x.status != "fail")
    for x in found[:MAX_CLAIM_FINDINGS]:
        c.problem(x.claim, x.status, message(x))
    rest = found[MAX_CLAIM_FINDINGS:]
    if rest:
        worst = "fail" if any(x.status == "fail" for x in rest) else "warn"
        c.problem(None, worst, f"{len(rest)} more {more}")
    return found[:MAX_CLAIM_FINDINGS]


def _compact_explanation(
    explanation: Mapping[str, Any] | None, done: dict[int, list[dict[str, Any]]]
) -> dict[str, Any] | None:
    """A pending claim's explanation (``claims.explain.explain_claim``) with each request's
    nodes cut to ``MAX_EXPLAINED_NODES`` (those it fits on first, then those with the most
    free matching devices) and their count in ``nodes_total``, and its reasons (most
    devices first; ``allocated to claim X`` is one reason per claim holding a device) and
    each named node's to as many, their count in ``reasons_total``: whole, an explanation
    at 1,000 GPU nodes was about 0.5 MB. ``done`` keeps the cut request entries of explanations
    shared by several claims (``explain_claim``'s ``shared``), by identity."""
    if not explanation:
        return None
    requests = explanation.get("requests") or []
    cut = done.get(id(requests))
    if cut is None:
        cut = []
        for r in requests:
            nodes = r.get("nodes") or []
            shown = sorted(
                nodes,
                key=lambda n: (
                    not (n.get("fits") and n.get("ready")),
                    -int(n.get("free") or 0),
                    -int(n.get("matching") or 0),
                    str(n.get("node")),
                ),
            )[:MAX_EXPLAINED_NODES]
            reasons = r.get("reasons") or []
            cut.append(
                {
                    **r,
                    "reasons": reasons[:MAX_EXPLAINED_NODES],
                    "reasons_total": len(reasons),
                    "nodes": [
                        {**n, "reasons": (n.get("reasons") or [])[:MAX_EXPLAINED_NODES]}
                        for n in shown
                    ],
                    "nodes_total": len(nodes),
                }
            )
        done[id(requests)] = cut
    return {**explanation, "requests": cut}


def _event_time(event: Mapping[str, Any]) -> str:
    """When the Event was last seen (RFC 3339 text, which sorts by time)."""
    series = event.get("series") or {}
    return str(
        series.get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def _event_count(event: Mapping[str, Any]) -> int:
    try:
        return int((event.get("series") or {}).get("count") or event.get("count") or 1)
    except (TypeError, ValueError):
        return 1


def prepare_failed_check(listing: Listing) -> Check:
    """``claims.prepare-failed``: one finding per Pod with a kubelet Event
    ``FailedPrepareDynamicResources`` (its newest message), newest first, at most
    ``MAX_PREPARE_FINDINGS`` named and the rest counted. ``fail`` while the pod exists and
    has not started; ``warn`` when it has since run or is gone (the Event is history)."""
    title = "no pod's ResourceClaims failed to be prepared on its node"
    if "events" in listing.errors:
        return skipped(
            "claims.prepare-failed",
            title,
            f"Events could not be listed: {listing.errors['events']}",
        )
    events = [
        e
        for e in listing.events
        if e.get("reason") == PREPARE_FAILED_REASON
        and (e.get("involvedObject") or {}).get("kind", "Pod") == "Pod"
    ]
    c = Check(
        "claims.prepare-failed",
        title,
        evidence=[
            Evidence(listing.src("events"), f"{len(events)} Event(s) {PREPARE_FAILED_REASON}")
        ],
    )
    per_pod: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for e in sorted(events, key=_event_time, reverse=True):
        obj = e.get("involvedObject") or {}
        key = (str(obj.get("namespace") or ""), str(obj.get("name") or "?"))
        per_pod.setdefault(key, []).append(e)
    named = set(list(per_pod)[:MAX_PREPARE_FINDINGS])
    pods = {}  # only the pods a finding names: the pod list is walked (when one does), not held
    for p in listing.pods if named else ():
        meta = p.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) in named:
            pods[(meta.get("namespace"), meta.get("name"))] = p
    empty_edits = False
    for (ns, name), evs in list(per_pod.items())[:MAX_PREPARE_FINDINGS]:
        newest = evs[0]
        pod = pods.get((ns, name))
        node = (
            (newest.get("source") or {}).get("host")
            or newest.get("reportingInstance")
            or ((pod or {}).get("spec") or {}).get("nodeName")
            or None
        )
        message = " ".join(str(newest.get("message") or "").split())
        empty_edits = empty_edits or EMPTY_EDITS in message
        phase = ((pod or {}).get("status") or {}).get("phase")
        if pod is None and listing.pods:
            status, now = WARN, "; the pod is gone"
        elif phase in ("Running", "Succeeded"):
            status, now = WARN, f"; the pod has since started ({phase})"
        else:
            status, now = FAIL, ""
        count = sum(_event_count(e) for e in evs)
        c.problem(
            node,
            status,
            f"pod {ns}/{name}: {message[:MAX_MESSAGE]}"
            + ("..." if len(message) > MAX_MESSAGE else "")
            + f" ({count} time(s), last {_event_time(newest) or '?'}{now})",
        )
    more = len(per_pod) - MAX_PREPARE_FINDINGS
    if more > 0:
        c.problem(
            None, FAIL, f"{more} more pod(s) with {PREPARE_FAILED_REASON} Events, not listed here"
        )
    c.data["pods"] = len(per_pod)
    fixes = []
    if empty_edits:
        fixes.append(
            "'empty device edits': the DRA driver's driver root has a dev/ directory without the "
            "NVIDIA device nodes (nvidia[0-9]*, nvidiactl, nvidia-uvm), so the CDI spec of the "
            "claim has none; the check hosts.driver-root names the node and the directory"
        )
    fixes.append(
        "kubectl describe pod NAMESPACE/POD and the log of the DRA kubelet plugin pod on the "
        "node named; the kubelet retries the prepare, so a fixed driver (its kubelet plugin pod "
        "restarted after a change of its driver root) lets the pod start"
    )
    c.fix = "; ".join(fixes)
    return finish(c, f"no {PREPARE_FAILED_REASON} Event on any pod")


def all_checks(
    listing: Listing,
    settings: Settings,
    audit: Mapping[str, Any] | None = None,
    audit_reason: str = "",
    scheduler: Sequence[Mapping[str, Any]] | None = None,
) -> list[Check]:
    """Every cluster-side check (versions, gates, api, nodes, claims).

    The CounterSets are accounted once, for the dynamic-MIG checks and the pending
    claims, in a walk of the slices and, where a device consumes counters, one of the
    claims that also reads the claims' allocations for the pending claims' explanations
    (else the explanations read them, in the child process); the pods are walked once, for the
    claims' users (both claims checks), the kube-apiserver pods and the DRA plugin pods
    (``kube.client.PagedList.derive`` keeps each for the check that reads it). With
    ``PARALLEL_MIN_CLAIMS`` claims or more, ``claims.pending`` runs in a child process
    (``common.forked``) beside the other checks: explaining the claims pods wait for puts
    every published device through their selectors (at 10,000 nodes with claims pending,
    the longer of the two processes' work)."""
    unlisted = _claims_unlisted(listing)
    # the claims' allocations, which explaining the pending claims reads, in the same walk
    # where the claims are walked for the CounterSets (else the explanations read them)
    sets = ccounters.counter_sets(
        listing.slices,
        listing.claims,
        dict([cexplain.allocations_fold()]) if unlisted is None else None,
    )
    # one walk of the pods for the claims' users, the kube-apiserver pods and the plugin
    # pods (each kept in the listing for the check that reads it)
    readers: list[tuple[str, Callable[[], Any]]] = [apiserver_fold(), plugin_pods_fold(settings)]
    if unlisted is None:
        readers.append(cpods.index_fold())
    walked = vk.folded(listing.pods, dict(readers))
    index = walked[2] if unlisted is None else None
    pending = None
    if index is not None and len(listing.claims) >= PARALLEL_MIN_CLAIMS:
        pending = Forked(_pending_check_dict, listing, settings, index, sets)
        if pending.forked and isinstance(listing.claims, vk.PagedList):
            # the child reads the claims' allocations, the module's own checks do not
            # (about 40 MiB at 100,000 claims; computed again should the child fail)
            listing.claims.forget(cexplain.allocations_fold()[0])
    try:
        # one walk of the slices for the nodes', the dynamic-MIG and the GPU paths' checks
        vk.folded(
            listing.slices,
            {
                **vnodes.slice_folds(listing, settings),
                **vdynamic.slice_folds(listing, settings),
                **vgpu_paths.slice_folds(listing, settings),
            },
        )
        out = [
            *versions_checks(listing, settings),
            *gates_checks(audit, audit_reason),
            *api_checks(listing, settings, scheduler, audit),
            *nodes_checks(listing, settings),
            *dynamic_mig_checks(listing, settings, sets),
            *gpu_paths_checks(listing, settings, audit),
        ]
        if index is None:
            return [*out, *(unlisted or [])]
        out.append(leaked_check(listing, index))
        if pending is not None:
            out.append(check_from_dict(pending.result()))
        else:
            out.append(pending_check(listing, settings, index, sets))
    finally:  # a check that raised: the child is ended, not left behind
        if pending is not None:
            pending.close()
    out.append(prepare_failed_check(listing))
    return out
