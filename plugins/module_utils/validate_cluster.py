# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Cluster-side validation checks: versions, gates, API, nodes and claims, as pure
functions over objects listed once (``Listing``) and the gate audit's result.

Every function returns ``validate_report.Check`` objects with a stable id:

=================================  ===================================================
id                                 what it checks
=================================  ===================================================
``versions.apiserver-skew``        kube-apiservers within one minor of each other
``versions.kubelet-skew``          no kubelet newer than any kube-apiserver, none more
                                   than 3 minors older (``dra_versions.check_skew``,
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
``nodes.gpu-labels``               every GPU node has the GPU labels
``nodes.plugin-running``           the DRA kubelet plugin pod runs on every GPU node
``nodes.resourceslices``           each GPU node publishes ResourceSlices whose devices
                                   match its GPUs (facts) and the wanted MIG layout
``nodes.orphan-slices``            no ResourceSlice of a node without its plugin pod
``claims.leaked``                  no claim holds devices for pods that are gone
``claims.pending``                 no claim pending longer than the threshold
=================================  ===================================================

Sources: Node ``status.nodeInfo.kubeletVersion``; kube-apiserver static pods
(``component=kube-apiserver`` in kube-system, image tag) and ``/version``; the gate audit
(``gate_audit.audit``); ``/apis/resource.k8s.io``; ResourceSlices ``spec.nodeName``,
``spec.driver``, ``spec.pool.generation`` and devices (``staging/src/k8s.io/api/resource/
v1/types.go``).

The checks by area, one module each: ``validate_versions``, ``validate_gates``,
``validate_api``, ``validate_nodes``; what they read in ``validate_listing`` (``Listing``,
``Settings``, label selectors). This module runs them all (``all_checks``) and holds the
claims checks over the listed objects (``claims_checks``, rules in ``validate_claims``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_claims as vcl
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate_api import (
    api_checks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate_gates import (
    gates_checks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate_listing import (
    Listing,
    Settings,
    cluster_version,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate_nodes import (
    nodes_checks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate_report import (
    Check,
    Evidence,
    finish,
    skipped,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate_versions import (
    versions_checks,
)

# Listing, Settings and cluster_version live in validate_listing; validate_run and
# validate_smoke read them from here, with all_checks.
__all__ = [
    "Listing",
    "Settings",
    "all_checks",
    "claims_checks",
    "cluster_version",
]


# ------------------------------------------------------------------ claims


def claims_checks(listing: Listing, settings: Settings) -> list[Check]:
    out = []
    ev = [
        Evidence(listing.src("resourceclaims"), f"{len(listing.claims)} claim(s)"),
        Evidence(listing.src("pods"), f"{len(listing.pods)} pod(s)"),
    ]
    if "resourceclaims" in listing.errors or "pods" in listing.errors:
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
        ]
    c = Check("claims.leaked", "no leaked ResourceClaims", evidence=list(ev))
    leaks = vcl.find_leaks(listing.claims, listing.pods)
    for leak in leaks:
        c.problem(leak.claim, leak.status, f"[{leak.kind}] {leak.reason}")
    c.data["leaks"] = [x.to_dict() for x in leaks]
    c.fix = (
        "release them: gpufleet claims gc --apply (dry run without --apply); then find out why "
        "kube-controller-manager's resource claim controller did not"
    )
    out.append(finish(c, f"{len(listing.claims)} claim(s), none leaked"))
    c = Check(
        "claims.pending",
        f"no ResourceClaim unallocated for more than {int(settings.pending_threshold_s)}s",
        evidence=list(ev),
    )
    pend = vcl.find_pending(
        listing.claims,
        listing.pods,
        listing.slices,
        listing.classes,
        listing.nodes,
        settings.now,
        settings.pending_threshold_s,
    )
    for p in pend:
        c.problem(p.claim, p.status, p.reason)
    c.data["pending"] = [p.to_dict() for p in pend]
    c.fix = (
        "gpufleet claims explain NAMESPACE/CLAIM shows per node and device which selector fails; "
        "fix the selector, the DeviceClass or the MIG layout"
    )
    out.append(finish(c, "no claim pending longer than the threshold"))
    return out


def all_checks(
    listing: Listing,
    settings: Settings,
    audit: Mapping[str, Any] | None = None,
    audit_reason: str = "",
    scheduler: Sequence[Mapping[str, Any]] | None = None,
) -> list[Check]:
    """Every cluster-side check (versions, gates, api, nodes, claims)."""
    return [
        *versions_checks(listing, settings),
        *gates_checks(audit, audit_reason),
        *api_checks(listing, settings, scheduler, audit),
        *nodes_checks(listing, settings),
        *claims_checks(listing, settings),
    ]
