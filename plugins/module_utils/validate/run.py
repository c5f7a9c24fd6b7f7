# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""One validation run on the control host: list the cluster once, audit the gates, judge
the hosts' facts, optionally run the smoke test, and build the report.

``run(kube, options)`` is what the module ``dra_validate`` calls; ``options`` is the
module's parameters (see its documentation). The result is ``Report.to_dict()`` with
``meta`` holding the Kubernetes version, the API requests made and the timings in seconds.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import (
    listing as cluster_listing,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing_file
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import RefusedValue
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import NVIDIA_DRIVER
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import audit as ga
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import (
    facts as gate_audit_facts,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import (
    terms as gate_audit_terms,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import hosts as vh
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    WARN,
    Check,
    Report,
    check_from_dict,
    finish,
)

__all__ = [
    "LISTING_TIMEOUT_S",
    "MOVES_VARIABLE",
    "gpu_path_moves",
    "run",
    "run_smoke_only",
    "settings_from",
]

#: The role variable of the module option ``gpu_path_moves``, which its refusals name.
MOVES_VARIABLE = "validate_gpu_path_moves"
#: Seconds ``run`` waits at most for the listing of option ``listing_file`` (the role's
#: ``validate_listing_timeout``, which the background listing runs under).
LISTING_TIMEOUT_S = 1800
#: Characters of a value a refusal quotes (the values come from a command line).
QUOTED = 80


def _given(value: Any, default: Any) -> Any:
    """``value`` unless it is None (0 is a value: a threshold of 0 seconds)."""
    return default if value is None else value


def settings_from(
    options: Mapping[str, Any], hosts: Sequence[Mapping[str, Any]]
) -> cluster_listing.Settings:
    """Settings from the module options; GPU facts and MIG layouts come per host."""
    gpu_facts: dict[str, Mapping[str, Any]] = {}
    layouts: dict[str, Any] = {}
    for h in hosts:
        node = str(h.get("node") or h.get("host"))
        g = h.get("gpu")
        if isinstance(g, Mapping) and not g.get("failed") and not g.get("skipped"):
            gpu_facts[node] = g.get("ansible_facts") or g
        if h.get("mig_layout"):
            layouts[node] = h["mig_layout"]
    return cluster_listing.Settings(
        gpu_nodes=list(options.get("gpu_nodes") or []),
        gpu_labels=dict(options.get("gpu_labels") or {"nvidia.com/gpu.present": "true"}),
        driver=options.get("driver") or NVIDIA_DRIVER,
        plugin_namespace=options.get("plugin_namespace") or "",
        plugin_selector=options.get("plugin_selector")
        or "app.kubernetes.io/component=kubelet-plugin",
        device_classes=list(options.get("device_classes") or []),
        pending_threshold_s=float(_given(options.get("pending_threshold"), 300)),
        version=options.get("kubernetes_version") or "",
        features=list(options.get("features") or []),
        gates=dict(options.get("gates") or {}),
        gpu_facts=gpu_facts,
        mig_layout=layouts,
        node_groups=_node_groups(options),
        gpu_path_moves=gpu_path_moves(options),
        now=time.time(),
    )


def _node_groups(options: Mapping[str, Any]) -> dict[str, list[str]]:
    """The option ``node_groups``: group -> node names (a value that is no list left out)."""
    return {
        str(g): [str(n) for n in members]
        for g, members in (options.get("node_groups") or {}).items()
        if isinstance(members, list)
    }


def _quoted(value: Any) -> str:
    """``value`` as a refusal quotes it: its repr, cut to ``QUOTED`` characters."""
    text = repr(value[: QUOTED + 1] if isinstance(value, str) else value)
    return text if len(text) <= QUOTED else text[:QUOTED] + "..."


def gpu_path_moves(options: Mapping[str, Any]) -> dict[str, str]:
    """The option ``gpu_path_moves``: pool group -> the path ``gpufleet migrate`` moved the
    pool to (``device-plugin`` or ``dra``), for pools whose group is not yet in its new
    ``gpu_path_*`` group. Raises RefusedValue naming ``validate_gpu_path_moves``, the pool
    and the value for a value that is no mapping, a path that is none of ``gp.PATHS`` and
    a pool that is no group of ``node_groups`` (an inventory group with a GPU node)."""
    moves = options.get("gpu_path_moves") or {}
    paths = " or ".join(gp.PATHS)
    if not isinstance(moves, Mapping):
        raise RefusedValue(
            MOVES_VARIABLE,
            _quoted(moves),
            "is not a mapping of pool group to GPU path",
            f"give {{POOL: PATH}} with PATH {paths}, as gpufleet migrate passes it",
        )
    groups = _node_groups(options)
    out: dict[str, str] = {}
    for pool, path in moves.items():
        where = f"{MOVES_VARIABLE}[{_quoted(pool)}]"
        if not isinstance(path, str) or path not in gp.PATHS:
            raise RefusedValue(
                where,
                _quoted(path),
                "names no GPU path",
                f"give {paths}: the path gpufleet migrate --to moved the pool to",
            )
        if pool not in groups:
            raise RefusedValue(
                where,
                _quoted(path),
                f"{_quoted(pool)} is no inventory group with a GPU node",
                "name the pool's inventory group, as gpufleet migrate --pool names it, or "
                "leave the pool out",
            )
        out[str(pool)] = path
    _one_path_per_node(out, groups)
    return out


def _one_path_per_node(moves: Mapping[str, str], groups: Mapping[str, list[str]]) -> None:
    """Refuse moves that put one node on both paths (in a pool moved to each)."""
    moved_to: dict[str, tuple[str, str]] = {}
    for pool, path in sorted(moves.items()):
        for node in groups[pool]:
            other, other_path = moved_to.setdefault(node, (pool, path))
            if other_path != path:
                raise RefusedValue(
                    MOVES_VARIABLE,
                    _quoted(dict(moves)),
                    f"node {_quoted(node)} is in pool {_quoted(other)} moved to {other_path} "
                    f"and in pool {_quoted(pool)} moved to {path}",
                    "give each node one path: name the pool gpufleet migrate moved",
                )


def gate_audit(
    kube: vk.Kube, facts: Any, expected: Sequence[str], version: str, options: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """The gate audit of ``facts`` (``dra_gate_audit_facts`` results), or None and why."""
    if not facts:
        return None, "no host gave gate facts (dra_gate_audit_facts)"
    try:
        if isinstance(facts, Mapping):
            hosts = {
                str(h): gate_audit_facts.HostFacts.from_dict(f, str(h)) for h, f in facts.items()
            }
        else:
            hosts = {}
            for item in facts:
                hf = gate_audit_facts.HostFacts.from_dict(item)
                hosts[hf.host] = hf
        cms = ga.read_configmap_facts(kube, version)
        result = ga.audit(
            hosts,
            version,
            features=options.get("features") or [],
            gates=options.get("gates") or {},
            configmaps=cms,
            expected_hosts=expected,
        )
    except (gate_audit_terms.GateAuditError, dra_core.VersionModelError, vk.KubeError) as err:
        return None, f"the gate audit could not run: {err}"
    return result.to_dict(), ""


def run(kube: vk.Kube, options: Mapping[str, Any]) -> dict[str, Any]:
    """The whole validation; raises KubeError when the API server cannot be read at all
    (``/version``), which the caller reports as "could not run"."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    hosts = [vh.normalize_host(h) for h in options.get("hosts") or []]
    gate_facts = options.get("gate_facts")
    if gate_facts is None:
        gate_facts = [
            (h.get("gates") or {}).get("facts")
            for h in hosts
            if isinstance(h.get("gates"), Mapping) and (h.get("gates") or {}).get("facts")
        ]
    scheduler = list(options.get("scheduler") or [])
    if not scheduler:
        for h in hosts:
            s = h.get("scheduler")
            if isinstance(s, Mapping) and s and not s.get("skipped"):
                scheduler.append({**s, "host": h.get("host")})
    listing, listed_log, listed_s = _listed(kube, options)
    background = listed_log is not None  # listed by another process while the nodes were read
    if background:
        timings["list"] = listed_s
        timings["list_wait"] = time.monotonic() - t0
    else:
        timings["list"] = time.monotonic() - t0
    settings = settings_from(options, hosts)
    version = cluster_listing.cluster_version(listing, settings) or ""
    t1 = time.monotonic()
    audit, why = gate_audit(kube, gate_facts, options.get("gate_hosts") or [], version, options)
    timings["gates"] = time.monotonic() - t1
    t2 = time.monotonic()
    unreadable = _drop_unreadable(listing)
    try:
        with vk.gc_paused():  # tens of thousands of objects indexed, no cycles made
            checks = vc.all_checks(listing, settings, audit, why, scheduler)
    except (AttributeError, TypeError) as err:  # a field deeper in an object of odd type
        raise vk.KubeError(
            None,
            f"the API server {kube.server} answered objects whose fields have other types "
            f"than the API's ({err}); fix: check that it is the cluster's kube-apiserver",
        ) from None
    if unreadable:
        checks.append(
            Check(
                "api.objects-unreadable",
                "every listed item is an object with metadata",
                WARN,
                "items skipped (not an object, or metadata, spec or status of another type): "
                + ", ".join(f"{n} {kind}" for kind, n in sorted(unreadable.items())),
                fix=f"check that {kube.server} is the cluster's kube-apiserver and not a proxy "
                "that rewrites its answers",
            )
        )
    if hosts:
        checks += vh.hosts_checks(hosts, options.get("min_driver_version") or vh.DEFAULT_MIN_DRIVER)
        _kubeadm_known_bad(checks, hosts)
    for kind, err in sorted(listing.errors.items()):
        checks.append(
            Check(
                f"api.list-{kind}",
                f"{kind} could be listed",
                FAIL,
                f"listing {kind} failed: {err}",
                fix="give the validating user list rights on it (ClusterRole view covers most; "
                "resource.k8s.io needs its own rule)",
            )
        )
    timings["checks"] = time.monotonic() - t2
    if options.get("kueue"):
        from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import kueue as vq

        t_kueue = time.monotonic()
        kueue_options = dict(options["kueue"])
        checks += vq.kueue_checks(vq.list_kueue(kube, kueue_options, listing), kueue_options)
        timings["kueue"] = time.monotonic() - t_kueue
    t3 = time.monotonic()
    checks += _smoke_checks(kube, listing, settings, options, checks)
    timings["smoke"] = time.monotonic() - t3
    timings["total"] = time.monotonic() - t0
    meta = {
        "kubernetes_version": version,
        "resource_api": listing.resource_version,
        "api_requests": kube.requests + (listing.requests if background else 0),
        "api_request_log": [*(listed_log or []), *kube.log],
        "objects": {
            "nodes": len(listing.nodes),
            "pods": len(listing.pods),
            "resourceslices": len(listing.slices),
            "resourceclaims": len(listing.claims),
            "deviceclasses": len(listing.classes),
            "daemonsets": len(listing.daemonsets),
            "events": len(listing.events),
        },
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        "duration_s": round(timings["total"], 3),
        "smoke": bool(options.get("smoke") or options.get("smoke_results")),
    }
    return Report(checks, meta).to_dict()


def _listed(
    kube: vk.Kube, options: Mapping[str, Any]
) -> tuple[cluster_listing.Listing, list[str] | None, float]:
    """The listing the checks judge, the request log of the process that listed it (None
    when it is this one: ``kube.log``) and the seconds its listing took: read from option
    ``listing_file`` (``cluster.listing_file.list_to_file`` wrote it) once it is there,
    else listed now; listed now too when the file's listing expired unread (the nodes took
    longer to read than its lister kept it). Raises KubeError when the listing failed,
    ListingFileError when there is none to read."""
    path = options.get("listing_file")
    if path:
        timeout = float(_given(options.get("listing_timeout"), LISTING_TIMEOUT_S))
        try:
            listing_file.wait_for_listing(path, timeout)
            return listing_file.read_listing(path, cluster_listing.READABLE)
        except listing_file.ListingExpired:
            pass
    t0 = time.monotonic()
    listing = cluster_listing.list_for_checks(
        kube,
        options.get("plugin_namespace") or "",
        int(options.get("page_size") or vk.PAGE_SIZE),
    )
    return listing, None, time.monotonic() - t0


def _smoke_checks(
    kube: vk.Kube,
    listing: cluster_listing.Listing,
    settings: cluster_listing.Settings,
    options: Mapping[str, Any],
    checks: Sequence[Check],
) -> list[Check]:
    """The smoke checks: those of an earlier smoke-only run (option ``smoke_results``,
    whose GPU facts this run read after it), else the smoke run now (option ``smoke``),
    else none; a dynamic-MIG smoke check gets what ``nodes.dynamic-mig-leftover-gi`` found
    on its node (``smoke.fold_leftover``)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import dynamic_mig
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    if options.get("smoke_results"):
        smoke = [check_from_dict(d) for d in options["smoke_results"]]
    elif options.get("smoke"):
        smoke = vs.run_smoke(kube, listing, settings, options)
    else:
        return []
    leftover = next((c for c in checks if c.id == dynamic_mig.LEFTOVER_ID), None)
    vs.fold_leftover(smoke, leftover, read_after=bool(options.get("smoke_results")))
    return smoke


def run_smoke_only(kube: vk.Kube, options: Mapping[str, Any]) -> dict[str, Any]:
    """The smoke test alone (module option ``smoke_only``), on a listing of the
    ResourceSlices only: its report holds the smoke checks, which a later run takes as
    ``smoke_results`` after the nodes were read again. Raises KubeError as ``run``."""
    t0 = time.monotonic()
    listing = cluster_listing.list_cluster(
        kube,
        options.get("plugin_namespace") or "",
        int(options.get("page_size") or vk.PAGE_SIZE),
        kinds=("resourceslices",),
    )
    settings = settings_from(options, [])
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    checks = vs.run_smoke(kube, listing, settings, options)
    meta = {
        "kubernetes_version": cluster_listing.cluster_version(listing, settings) or "",
        "resource_api": listing.resource_version,
        "api_requests": kube.requests,
        "timings_s": {"smoke": round(time.monotonic() - t0, 3)},
        "duration_s": round(time.monotonic() - t0, 3),
        "smoke": True,
    }
    return Report(checks, meta).to_dict()


def _kubeadm_known_bad(checks: list[Check], hosts: Sequence[Mapping[str, Any]]) -> None:
    """Add kubeadm releases the version model marks bad to ``versions.known-bad``."""
    target = next((c for c in checks if c.id == "versions.known-bad"), None)
    if target is None:
        return
    fixes = [target.fix] if target.fix else []
    for host, v in sorted(vh.kubeadm_versions(hosts).items()):
        for b in dra_skew.known_bad_releases(v):
            target.problem(host, FAIL, f"kubeadm {b.version}: {b.problem} [{b.source}]")
            fixes.append(b.advice)
    if target.problems:
        target.fix = "; ".join(dict.fromkeys(fixes))
        finish(target, target.summary)


#: The object lists of a Listing the checks read.
_LISTED_KINDS = ("nodes", "pods", "slices", "claims", "classes", "daemonsets", "events")


def _drop_unreadable(listing: Any) -> dict[str, int]:
    """Drop from ``listing``'s object lists the items that are not readable
    (``cluster.listing.readable``: an API server answers none such; a proxy might), so
    that no check meets them; returns kind -> items dropped (kinds with none left out). A
    list already judged by it as it was listed (``kube.client.PagedList.vetted``) is kept
    as it is."""
    dropped: dict[str, int] = {}
    for kind in _LISTED_KINDS:
        objects = getattr(listing, kind)
        refused = (
            objects.vetted(cluster_listing.readable) if isinstance(objects, vk.PagedList) else None
        )
        if refused is not None:
            if refused:
                dropped[kind] = refused
            continue
        if isinstance(objects, vk.PagedList):
            kept: Any = objects.filtered(cluster_listing.readable)
        else:
            kept = [item for item in objects if cluster_listing.readable(item)]
        if len(kept) != len(objects):
            dropped[kind] = len(objects) - len(kept)
            setattr(listing, kind, kept)
    return dropped
