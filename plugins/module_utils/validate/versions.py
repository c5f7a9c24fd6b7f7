# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Validation checks of the versions that run: ``versions.apiserver-skew``,
``versions.kubelet-skew`` (``dra.check_skew``, ``kubelet_upgrade_allowed``),
``versions.gpu-kubelet-lockstep``, ``versions.known-bad`` and the container runtime of the
GPU nodes. Sources: Node ``status.nodeInfo``; kube-apiserver static pods
(``component=kube-apiserver`` in kube-system, image tag) and ``/version``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import (
    Listing,
    Settings,
    labels_of,
    name_of,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = [
    "versions_checks",
]


# ------------------------------------------------------------------ versions

_TAG_RE = re.compile(r":(v?\d+\.\d+\.\d+[^@]*)(?:@.*)?$")


class _ApiserverTags:
    """The fold (``kube.client.PagedList.derive``) of the kube-apiserver versions by
    where they run, read from the image tags of the kube-apiserver static pods."""

    def __init__(self) -> None:
        self.out: dict[str, str] = {}

    def add(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        if (
            meta.get("namespace") != "kube-system"
            or labels_of(pod).get("component") != "kube-apiserver"
        ):
            return
        for c in (pod.get("spec") or {}).get("containers") or []:
            m = _TAG_RE.search(str(c.get("image", "")))
            if c.get("name") == "kube-apiserver" and m:
                try:
                    v = dra_core.parse_version(m.group(1))
                except dra_core.VersionParseError:
                    continue
                self.out[(pod.get("spec") or {}).get("nodeName") or meta.get("name", "")] = str(v)

    def result(self) -> dict[str, str]:
        return self.out


def apiserver_fold() -> tuple[str, Callable[[], _ApiserverTags]]:
    """The key and the fold of ``apiserver_versions``' walk of the pods, for a caller
    that walks them once for several readers (``validate.cluster.all_checks``)."""
    return "kube-apiserver-image-tags", _ApiserverTags


def apiserver_versions(listing: Listing) -> tuple[dict[str, str], str]:
    """kube-apiserver versions by where they run, and the source: the image tags of the
    kube-apiserver static pods (kube-system, label ``component=kube-apiserver``), else the
    one ``/version`` answered."""
    out = dict(vk.folded(listing.pods, dict([apiserver_fold()]))[0])
    if out:
        return out, f"image tags of the kube-apiserver pods ({listing.src('pods')})"
    git = (listing.version or {}).get("gitVersion")
    if git:
        return {
            "(the apiserver answering /version)": str(dra_core.parse_version(git))
        }, "GET /version"
    return {}, "none"


def _norm(version: str) -> str:
    """``v1.37.2`` -> ``1.37.2`` (unparseable text is kept as it is)."""
    try:
        return str(dra_core.parse_version(version))
    except dra_core.VersionParseError:
        return version


def versions_checks(listing: Listing, settings: Settings) -> list[Check]:
    apis, api_source = apiserver_versions(listing)
    kubelets, runtimes = _node_versions(listing)
    ev_api = Evidence(api_source, ", ".join(f"{h}={v}" for h, v in sorted(apis.items())) or "none")
    ev_kl = Evidence(
        f"{listing.src('nodes')} status.nodeInfo.kubeletVersion", _per_version(kubelets)
    )
    out: list[Check] = []
    if not apis:
        reason = "no kube-apiserver version could be read (/version and kube-system pods)"
        return [
            skipped("versions.apiserver-skew", "kube-apiservers within one minor", reason),
            skipped("versions.kubelet-skew", "kubelets within the skew policy", reason),
            _lockstep(kubelets, settings, ev_kl),
            _known_bad(apis, kubelets, ev_api, ev_kl),
        ]
    c = Check("versions.apiserver-skew", "kube-apiservers within one minor", evidence=[ev_api])
    for v in dra_skew.check_skew({dra_core.APISERVER: list(apis.values())}):
        c.problem(None, FAIL, f"kube-apiserver {v.version} and {v.apiserver}: {v.reason}")
    c.fix = "finish the control-plane upgrade: every kube-apiserver on one minor (gpufleet upgrade)"
    out.append(
        finish(c, f"{len(apis)} kube-apiserver(s) on {', '.join(sorted(set(apis.values())))}")
    )

    c = Check("versions.kubelet-skew", "kubelets within the skew policy", evidence=[ev_api, ev_kl])
    by_version: dict[str, list[str]] = {}
    for node, v in kubelets.items():
        by_version.setdefault(v, []).append(node)
    for v, nodes in sorted(by_version.items()):
        problems = []
        try:
            problems += [
                x.reason
                for x in dra_skew.check_skew(
                    {dra_core.APISERVER: list(apis.values()), dra_core.KUBELET: [v]}
                )
            ]
            dra_skew.kubelet_upgrade_allowed(v, list(apis.values()))
        except dra_core.VersionModelError as err:
            problems.append(str(err))
        for p in dict.fromkeys(problems):
            c.problem(", ".join(sorted(nodes)), FAIL, f"kubelet {v}: {p}")
    c.fix = (
        "upgrade the control plane before the kubelets and keep kubelets at most 3 minors "
        "behind: gpufleet upgrade -i INVENTORY"
    )
    out.append(finish(c, f"{len(kubelets)} kubelet(s) within the skew policy of kube-apiserver"))
    out.append(_lockstep(kubelets, settings, ev_kl))
    out.append(_known_bad(apis, kubelets, ev_api, ev_kl))
    out.append(_container_runtime(listing, kubelets, runtimes))
    return out


#: Nodes a version's evidence names; more are counted.
MAX_NAMED_NODES = 20


def _per_version(versions: Mapping[str, str]) -> str:
    """Node -> version as evidence: each version with its nodes (``v1.38.0: a, b``), the
    most common first; a version on more than ``MAX_NAMED_NODES`` nodes names the first of
    them and counts the rest (a fleet's evidence stays short: one entry per node was
    about 250 KB at 10,000 nodes)."""
    by_version: dict[str, list[str]] = {}
    for node, v in versions.items():
        by_version.setdefault(v, []).append(node)
    parts = []
    for v, nodes in sorted(by_version.items(), key=lambda x: (-len(x[1]), x[0])):
        nodes.sort()
        named = ", ".join(nodes[:MAX_NAMED_NODES])
        more = len(nodes) - MAX_NAMED_NODES
        parts.append(f"{v}: {named}" + (f" and {more} more" if more > 0 else ""))
    return "; ".join(parts) or "none"


def _node_versions(listing: Listing) -> tuple[dict[str, str], dict[str, str]]:
    """(node -> its kubelet's version, normalized, where it reports one; node -> its
    container runtime's version as reported), from ``status.nodeInfo`` in one walk."""
    kubelets: dict[str, str] = {}
    runtimes: dict[str, str] = {}
    for n in listing.nodes:
        info = (n.get("status") or {}).get("nodeInfo", {})
        name = name_of(n)
        kubelet = str(info.get("kubeletVersion", ""))
        if kubelet:
            kubelets[name] = _norm(kubelet)
        runtimes[name] = str(info.get("containerRuntimeVersion", ""))
    return kubelets, runtimes


def _container_runtime(
    listing: Listing, kubelets: Mapping[str, str], runtimes: Mapping[str, str]
) -> Check:
    """Each node's container runtime (status.nodeInfo.containerRuntimeVersion) fit for its
    kubelet (``dra.container_runtime_problem``: containerd 2.0+ for 1.38)."""
    c = Check(
        "versions.container-runtime",
        "container runtime fit for each kubelet",
        evidence=[
            Evidence(
                f"{listing.src('nodes')} status.nodeInfo.containerRuntimeVersion",
                _per_version({n: r for n, r in runtimes.items() if r}),
            )
        ],
    )
    for node, kubelet in sorted(kubelets.items()):
        problem = dra_skew.container_runtime_problem(runtimes.get(node, ""), kubelet)
        if problem:
            c.problem(node, FAIL, problem)
    floors = "; ".join(
        f"to {need[0]}.{need[1]} or later before their kubelets move to 1.{minor}"
        for minor, need in sorted(dra_skew.MIN_CONTAINERD_FOR_KUBELET.items())
    )
    c.fix = (
        f"upgrade containerd on the nodes named {floors} "
        "(nvidia_container_toolkit_containerd_version names the version the toolkit is "
        "wired for)"
    )
    return finish(c, f"{len(kubelets)} node(s) with a runtime fit for their kubelet")


def _lockstep(kubelets: Mapping[str, str], settings: Settings, ev: Evidence) -> Check:
    c = Check(
        "versions.gpu-kubelet-lockstep", "kubelets of the GPU nodes on one version", evidence=[ev]
    )
    gpu = {n: kubelets[n] for n in settings.gpu_nodes if n in kubelets}
    if not gpu:
        return skipped(c.id, c.title, "no GPU node of the inventory has a Node object", [ev])
    counts = Counter(gpu.values())
    if len(counts) > 1:
        # the version most GPU nodes run; on a tie the newest (an upgrade's laggards named)
        ref = max(counts, key=lambda v: (counts[v], _version_order(v)))
        for node, v in sorted(gpu.items()):
            if v != ref:
                c.problem(
                    node,
                    FAIL,
                    f"kubelet {v} while {counts[ref]} of {len(gpu)} GPU nodes run {ref}: DRA "
                    "kubelet plugins and ResourceSlices are upgraded in lockstep",
                )
        c.fix = "finish the kubelet upgrade of the GPU nodes (gpufleet upgrade -i INVENTORY)"
    return finish(c, f"{len(gpu)} GPU node kubelet(s) on {', '.join(sorted(counts))}")


def _version_order(v: str) -> tuple[int, int, int]:
    try:
        k = dra_core.parse_version(v)
    except dra_core.VersionModelError:
        return (-1, -1, -1)
    return (k.major, k.minor, k.patch or 0)


def _known_bad(apis: Mapping[str, str], kubelets: Mapping[str, str], *ev: Evidence) -> Check:
    c = Check("versions.known-bad", "no release the version model marks bad", evidence=list(ev))
    seen: dict[str, list[str]] = {}
    for where, v in [
        *(("kube-apiserver " + h, v) for h, v in apis.items()),
        *(("kubelet " + h, v) for h, v in kubelets.items()),
    ]:
        seen.setdefault(v, []).append(where)
    fixes = []
    for v, where in sorted(seen.items()):
        try:
            bad = dra_skew.known_bad_releases(v)
        except dra_core.VersionParseError:
            continue
        for b in bad:
            c.problem(
                ", ".join(where), FAIL, f"{b.version} ({b.component}): {b.problem} [{b.source}]"
            )
            fixes.append(b.advice)
    c.fix = "; ".join(dict.fromkeys(fixes)) or None
    return finish(c, f"none of {len(seen)} version(s) is a known-bad release")
