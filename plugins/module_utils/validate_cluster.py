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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_cel as vcel
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_claims as vcl
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate_report import (
    FAIL,
    PASS,
    SKIP,
    WARN,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = [
    "Listing",
    "Settings",
    "api_checks",
    "claims_checks",
    "gates_checks",
    "label_selector_matches",
    "nodes_checks",
    "parse_label_selector",
    "versions_checks",
]

MIB = 2**20


@dataclass
class Listing:
    """What was read from the API, each kind once: ``version`` (``/version``),
    ``resource_group`` (``/apis/resource.k8s.io``), ``resource_version`` (the group
    version the resource.k8s.io kinds were listed in), the object lists, ``errors`` (kind ->
    error text for a list that failed), ``requests`` (API requests made) and ``sources``
    (kind -> the request that read it)."""

    version: Mapping[str, Any] | None = None
    resource_group: Mapping[str, Any] | None = None
    resource_version: str | None = None
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    requests: int = 0
    sources: dict[str, str] = field(default_factory=dict)

    def src(self, kind: str) -> str:
        return self.sources.get(kind, kind)


@dataclass
class Settings:
    """What the checks are judged against.

    ``gpu_nodes``: Kubernetes node names of the inventory's GPU nodes; ``gpu_labels``:
    labels every GPU node must have; ``driver``: the DRA driver name; ``plugin_namespace``
    (empty: any) and ``plugin_selector`` (a label selector such as
    ``app.kubernetes.io/component=kubelet-plugin``) find the driver's kubelet plugin pods;
    ``device_classes``: DeviceClasses that must exist; ``pending_threshold_s``: seconds a
    claim may stay unallocated; ``version``: Kubernetes version judged against (empty:
    ``/version``); ``features``/``gates``: what the version model was asked for;
    ``gpu_facts``: node -> ``gpu_facts`` module facts (``gpufleet_gpus``,
    ``gpufleet_gpu_driver_version``); ``mig_layout``: node -> wanted ``{profile: count}``
    per MIG-enabled GPU (a mapping of GPU index -> layout, or one layout for all);
    ``now``: seconds since the epoch.
    """

    gpu_nodes: list[str] = field(default_factory=list)
    gpu_labels: dict[str, str] = field(default_factory=lambda: {"nvidia.com/gpu.present": "true"})
    driver: str = "gpu.nvidia.com"
    plugin_namespace: str = ""
    plugin_selector: str = "app.kubernetes.io/component=kubelet-plugin"
    device_classes: list[str] = field(default_factory=lambda: ["gpu.nvidia.com", "mig.nvidia.com"])
    pending_threshold_s: float = 300.0
    version: str = ""
    features: list[str] = field(default_factory=list)
    gates: dict[str, Any] = field(default_factory=dict)
    gpu_facts: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    mig_layout: dict[str, Any] = field(default_factory=dict)
    now: float = 0.0


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def cluster_version(listing: Listing, settings: Settings) -> str | None:
    """The version judged against: ``settings.version``, else ``/version``."""
    if settings.version:
        return settings.version
    return (listing.version or {}).get("gitVersion")


# ------------------------------------------------------------------ label selectors

_SEL_RE = re.compile(
    r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9._-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$"
)


def parse_label_selector(text: str) -> list[tuple[str, str, list[str]]]:
    """A label selector string (``a=b,c!=d,e in (x,y),!f,g``) as ``(key, op, values)``
    with op ``=``, ``!=``, ``in``, ``notin``, ``exists``, ``!exists``. Raises ValueError
    naming the term for one it cannot read."""
    out: list[tuple[str, str, list[str]]] = []
    depth = 0
    term = ""
    terms = []
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(term)
            term = ""
        else:
            term += ch
    terms.append(term)
    for t in terms:
        if not t.strip():
            continue
        m = _SEL_RE.match(t)
        if not m:
            raise ValueError(
                f"label selector term {t.strip()!r} is not key=value, key!=value, "
                "key in (a,b), key notin (a,b), key or !key"
            )
        neg, k, op, val, setop, setvals = m.groups()
        if op:
            out.append((k, "!=" if op == "!=" else "=", [val or ""]))
        elif setop:
            out.append((k, setop, [v.strip() for v in setvals.split(",") if v.strip()]))
        else:
            out.append((k, "!exists" if neg else "exists", []))
    return out


def label_selector_matches(
    selector: Sequence[tuple[str, str, list[str]]], labels: Mapping[str, str]
) -> bool:
    for k, op, vals in selector:
        has = k in labels
        v = labels.get(k)
        if (
            (op == "=" and v != vals[0])
            or (op == "!=" and has and v == vals[0])
            or (op == "in" and v not in vals)
            or (op == "notin" and has and v in vals)
            or (op == "exists" and not has)
            or (op == "!exists" and has)
        ):
            return False
    return True


# ------------------------------------------------------------------ versions

_TAG_RE = re.compile(r":(v?\d+\.\d+\.\d+[^@]*)(?:@.*)?$")


def apiserver_versions(listing: Listing) -> tuple[dict[str, str], str]:
    """kube-apiserver versions by where they run, and the source: the image tags of the
    kube-apiserver static pods (kube-system, label ``component=kube-apiserver``), else the
    one ``/version`` answered."""
    out: dict[str, str] = {}
    for pod in listing.pods:
        meta = pod.get("metadata") or {}
        if (
            meta.get("namespace") != "kube-system"
            or _labels(pod).get("component") != "kube-apiserver"
        ):
            continue
        for c in (pod.get("spec") or {}).get("containers") or []:
            m = _TAG_RE.search(str(c.get("image", "")))
            if c.get("name") == "kube-apiserver" and m:
                try:
                    v = dv.parse_version(m.group(1))
                except dv.VersionParseError:
                    continue
                out[(pod.get("spec") or {}).get("nodeName") or meta.get("name", "")] = str(v)
    if out:
        return out, f"image tags of the kube-apiserver pods ({listing.src('pods')})"
    git = (listing.version or {}).get("gitVersion")
    if git:
        return {"(the apiserver answering /version)": str(dv.parse_version(git))}, "GET /version"
    return {}, "none"


def _norm(version: str) -> str:
    """``v1.37.2`` -> ``1.37.2`` (unparseable text is kept as it is)."""
    try:
        return str(dv.parse_version(version))
    except dv.VersionParseError:
        return version


def versions_checks(listing: Listing, settings: Settings) -> list[Check]:
    apis, api_source = apiserver_versions(listing)
    kubelets = {
        _name(n): str((n.get("status") or {}).get("nodeInfo", {}).get("kubeletVersion", ""))
        for n in listing.nodes
    }
    kubelets = {k: _norm(v) for k, v in kubelets.items() if v}
    ev_api = Evidence(api_source, ", ".join(f"{h}={v}" for h, v in sorted(apis.items())) or "none")
    ev_kl = Evidence(
        f"{listing.src('nodes')} status.nodeInfo.kubeletVersion",
        ", ".join(f"{h}={v}" for h, v in sorted(kubelets.items())) or "none",
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
    for v in dv.check_skew({dv.APISERVER: list(apis.values())}):
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
                for x in dv.check_skew({dv.APISERVER: list(apis.values()), dv.KUBELET: [v]})
            ]
            dv.kubelet_upgrade_allowed(v, list(apis.values()))
        except dv.VersionModelError as err:
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
    out.append(_container_runtime(listing, kubelets))
    return out


def _container_runtime(listing: Listing, kubelets: Mapping[str, str]) -> Check:
    """Each node's container runtime (status.nodeInfo.containerRuntimeVersion) fit for its
    kubelet (``dra_versions.container_runtime_problem``: containerd 2.0+ for 1.38)."""
    runtimes = {
        _name(n): str(
            (n.get("status") or {}).get("nodeInfo", {}).get("containerRuntimeVersion", "")
        )
        for n in listing.nodes
    }
    c = Check(
        "versions.container-runtime",
        "container runtime fit for each kubelet",
        evidence=[
            Evidence(
                f"{listing.src('nodes')} status.nodeInfo.containerRuntimeVersion",
                ", ".join(f"{n}={r}" for n, r in sorted(runtimes.items()) if r) or "none",
            )
        ],
    )
    for node, kubelet in sorted(kubelets.items()):
        problem = dv.container_runtime_problem(runtimes.get(node, ""), kubelet)
        if problem:
            c.problem(node, FAIL, problem)
    c.fix = (
        "upgrade containerd on the nodes named to 2.0 or later before their kubelets move to "
        "1.38 (nvidia_container_toolkit_containerd_version names the version the toolkit is "
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
        k = dv.parse_version(v)
    except dv.VersionModelError:
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
            bad = dv.known_bad_releases(v)
        except dv.VersionParseError:
            continue
        for b in bad:
            c.problem(
                ", ".join(where), FAIL, f"{b.version} ({b.component}): {b.problem} [{b.source}]"
            )
            fixes.append(b.advice)
    c.fix = "; ".join(dict.fromkeys(fixes)) or None
    return finish(c, f"none of {len(seen)} version(s) is a known-bad release")


# ------------------------------------------------------------------ gates

_DRIFT = {
    "gates.process-file-drift",
    "gates.configmap-drift",
    "gates.node-drift",
    "gates.metric-drift",
    "gates.kubelet-flag-override",
    "gates.restart-pending",
    "gates.process-absent",
}
_COVERAGE = {
    "gates.facts-missing",
    "gates.component-not-found",
    "gates.configmap-absent",
    "gates.source-unreadable",
}


def gates_checks(audit: Mapping[str, Any] | None, reason: str = "") -> list[Check]:
    """The gate audit (``gate_report.AuditResult.to_dict()``) as three checks:
    ``gates.component-drift``, ``gates.model`` and ``gates.coverage``; each finding keeps
    its own id in the problem text. ``audit`` None: all three skipped with ``reason``."""
    titles = {
        "gates.component-drift": "feature gates: processes = files = ConfigMaps, hosts alike",
        "gates.model": "feature gates and runtime-config as the DRA version model requires",
        "gates.coverage": "every host and component was audited",
    }
    if audit is None:
        return [skipped(i, t, reason or "the gate audit did not run") for i, t in titles.items()]
    ev = Evidence(
        "gate audit (dra_gate_audit_facts on every node, kube-system ConfigMaps)",
        f"version {audit.get('version')}, {len((audit.get('summary') or {}).get('hosts') or [])} "
        f"host(s), {(audit.get('counts') or {}).get('fail', 0)} failed and "
        f"{(audit.get('counts') or {}).get('warn', 0)} warning finding(s)",
    )
    checks = {i: Check(i, t, evidence=[ev]) for i, t in titles.items()}
    fixes: dict[str, list[str]] = {i: [] for i in titles}
    for f in audit.get("findings") or []:
        fid = f.get("id", "")
        target = (
            "gates.component-drift"
            if fid in _DRIFT
            else "gates.coverage"
            if fid in _COVERAGE
            else "gates.model"
        )
        subject = " ".join(x for x in (f.get("host") or "(cluster)", f.get("component") or "") if x)
        checks[target].problem(subject, f.get("severity", FAIL), f"[{fid}] {f.get('message', '')}")
        if f.get("fix"):
            fixes[target].append(f["fix"])
    oks = {
        "gates.component-drift": "processes, files and ConfigMaps agree on every host",
        "gates.model": f"every component as the version model requires for {audit.get('version')}",
        "gates.coverage": "every host and component was read",
    }
    out = []
    for i, c in checks.items():
        c.fix = "; ".join(dict.fromkeys(fixes[i])) or None
        out.append(finish(c, oks[i]))
    return out


# ------------------------------------------------------------------ api


def api_checks(
    listing: Listing,
    settings: Settings,
    scheduler: Sequence[Mapping[str, Any]] | None = None,
    audit: Mapping[str, Any] | None = None,
) -> list[Check]:
    """``api.resource-versions``, ``api.deviceclasses``, ``api.scheduler-dynamicresources``.
    ``scheduler``: per control-plane host the check-mode result of the module
    ``scheduler_dynamic_resources`` (``host``, ``custom_config``, ``changes``, ``message``,
    ``failed``/``msg``); None or empty: that check is skipped. ``audit``: the gate audit
    (``gate_report.AuditResult.to_dict()``), whose per-host kube-scheduler gates tell
    whether a gate that is off by default was turned on there."""
    out = [_resource_versions(listing, settings), _device_classes(listing, settings)]
    out.append(_scheduler(listing, settings, scheduler, audit))
    return out


def _scheduler_gate_on(audit: Mapping[str, Any] | None, host: str) -> bool:
    """True when the gate audit read the DRA gate set to true on ``host``'s kube-scheduler
    (its running process, else its static pod manifest)."""
    cells = ((audit or {}).get("summary") or {}).get("cells") or {}
    cell = (cells.get("kube-scheduler") or {}).get(host) or {}
    return (cell.get("feature_gates") or {}).get(dv.DRA_GATE) is True


def _resource_versions(listing: Listing, settings: Settings) -> Check:
    title = "resource.k8s.io versions the model expects are served"
    version = cluster_version(listing, settings)
    if not version:
        return skipped("api.resource-versions", title, "the Kubernetes version is unknown")
    try:
        states = dv.served_api_versions(version)
        plan = dv.plan_components(version, settings.features, settings.gates)
    except dv.VersionModelError as err:
        return skipped(
            "api.resource-versions", title, f"the version model refuses {version}: {err}"
        )
    served = [v.get("groupVersion") for v in (listing.resource_group or {}).get("versions") or []]
    ev = Evidence(
        "GET /apis/resource.k8s.io", f"served: {', '.join(served) or 'none (group absent)'}"
    )
    wanted = [s.group_version for s in states if s.enabled_by_default]
    wanted += [
        e.split("=", 1)[0]
        for e in plan.runtime_config
        if e.endswith("=true") and e.startswith(dv.RESOURCE_GROUP)
    ]
    wanted = list(dict.fromkeys(wanted))
    known = {s.group_version for s in states}
    c = Check(
        "api.resource-versions",
        title,
        evidence=[ev, Evidence("DRA version model", f"{version}: expects {', '.join(wanted)}")],
    )
    for gv in wanted:
        if gv not in served:
            c.problem(None, FAIL, f"{gv} is not served; Kubernetes {version} needs it for DRA")
    for gv in served:
        if gv not in known:
            c.problem(
                None,
                WARN,
                f"{gv} is served but the version model says {version} has no such version",
            )
    c.fix = (
        "set kube-apiserver --runtime-config as the version model plans it: gpufleet gates "
        f"plan --kubernetes-version {version} shows it, gpufleet gates apply -i INVENTORY sets it"
    )
    return finish(c, f"served: {', '.join(served)}")


def _device_classes(listing: Listing, settings: Settings) -> Check:
    title = "DeviceClasses present"
    if "deviceclasses" in listing.errors:
        return skipped(
            "api.deviceclasses",
            title,
            f"DeviceClasses could not be listed: {listing.errors['deviceclasses']}",
        )
    names = sorted(_name(c) for c in listing.classes)
    c = Check(
        "api.deviceclasses",
        title,
        evidence=[Evidence(listing.src("deviceclasses"), ", ".join(names) or "none")],
    )
    for want in settings.device_classes:
        if want not in names:
            c.problem(
                want,
                FAIL,
                f"DeviceClass {want} does not exist (classes: {', '.join(names) or 'none'})",
            )
    c.fix = (
        "install the DRA driver chart, which creates them (gpufleet up -i INVENTORY, role "
        "dra_driver)"
    )
    return finish(c, f"{', '.join(settings.device_classes)} present")


def _scheduler(
    listing: Listing,
    settings: Settings,
    scheduler: Sequence[Mapping[str, Any]] | None,
    audit: Mapping[str, Any] | None = None,
) -> Check:
    cid, title = "api.scheduler-dynamicresources", "kube-scheduler profile runs DynamicResources"
    if not scheduler:
        return skipped(
            cid, title, "no control-plane host reported its kube-scheduler configuration"
        )
    c = Check(cid, title)
    version = cluster_version(listing, settings)
    gate = None
    if version:
        try:
            gate = dv.gate_state(dv.DRA_GATE, version)
        except dv.VersionModelError:
            gate = None
    for r in scheduler:
        host = str(r.get("host", "?"))
        if r.get("failed"):
            c.problem(
                host, FAIL, f"the kube-scheduler configuration could not be read: {r.get('msg')}"
            )
            continue
        c.evidence.append(
            Evidence(
                f"{host}: {r.get('manifest', 'kube-scheduler manifest')}", str(r.get("message", ""))
            )
        )
        for ch in r.get("changes") or []:
            c.problem(
                host,
                FAIL,
                f"{ch.get('where')}: {ch.get('what')} is {ch.get('old') or 'absent'} "
                f"({ch.get('why')})",
            )
        if (
            not r.get("custom_config")
            and gate is not None
            and gate.known
            and not gate.default
            and not gate.locked
            and not _scheduler_gate_on(audit, host)
        ):
            c.problem(
                host,
                WARN,
                f"default profile: DynamicResources runs only while the {dv.DRA_GATE} gate is on "
                f"({gate.describe()} in {version}); see gates.model",
            )
    c.fix = (
        "enable DynamicResources in every profile: gpufleet gates apply -i INVENTORY (module "
        "scheduler_dynamic_resources)"
    )
    return finish(c, "every kube-scheduler profile includes DynamicResources")


# ------------------------------------------------------------------ nodes


def _gpu_nodes(listing: Listing, settings: Settings) -> tuple[list[str], list[str]]:
    """(GPU nodes of the inventory that have a Node object, those that do not)."""
    names = {_name(n) for n in listing.nodes}
    return [n for n in settings.gpu_nodes if n in names], [
        n for n in settings.gpu_nodes if n not in names
    ]


def plugin_pods(listing: Listing, settings: Settings) -> dict[str, list[Mapping[str, Any]]]:
    """Node -> the driver's kubelet plugin pods on it (``plugin_namespace``,
    ``plugin_selector``)."""
    sel = parse_label_selector(settings.plugin_selector)
    out: dict[str, list[Mapping[str, Any]]] = {}
    for pod in listing.pods:
        meta = pod.get("metadata") or {}
        if settings.plugin_namespace and meta.get("namespace") != settings.plugin_namespace:
            continue
        if not label_selector_matches(sel, _labels(pod)):
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            out.setdefault(node, []).append(pod)
    return out


def _pod_running(pod: Mapping[str, Any]) -> bool:
    st = pod.get("status") or {}
    if st.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return all(cs.get("ready") for cs in st.get("containerStatuses") or []) and bool(
        st.get("containerStatuses")
    )


def nodes_checks(listing: Listing, settings: Settings) -> list[Check]:
    return [
        _labels_check(listing, settings),
        _plugin_check(listing, settings),
        _slices_check(listing, settings),
        _orphans_check(listing, settings),
    ]


def _labels_check(listing: Listing, settings: Settings) -> Check:
    present, missing = _gpu_nodes(listing, settings)
    want = ", ".join(f"{k}={v}" for k, v in sorted(settings.gpu_labels.items()))
    c = Check(
        "nodes.gpu-labels",
        "every GPU node carries the GPU labels",
        evidence=[
            Evidence(
                f"{listing.src('nodes')} metadata.labels",
                f"{len(listing.nodes)} node(s); wanted on {len(settings.gpu_nodes)} GPU node(s): "
                f"{want}",
            )
        ],
    )
    if not settings.gpu_nodes:
        return skipped(c.id, c.title, "the inventory group gpu_nodes is empty", c.evidence)
    by_name = {_name(n): n for n in listing.nodes}
    for node in missing:
        c.problem(
            node,
            FAIL,
            "no Node object of this name: the host has not joined (or kubernetes_node_name is "
            "wrong)",
        )
    for node in present:
        labels = _labels(by_name[node])
        wrong = [
            f"{k}={labels[k]!r}" if k in labels else f"{k} absent"
            for k, v in sorted(settings.gpu_labels.items())
            if labels.get(k) != v
        ]
        if wrong:
            c.problem(
                node,
                FAIL,
                f"labels: {', '.join(wrong)} (wanted {want}); the kubelet plugin DaemonSet's node "
                "affinity needs them",
            )
    c.fix = "label the GPU nodes: gpufleet up -i INVENTORY (role gpu_node_labels), or that play "
    c.fix += "alone: ansible-playbook -i INVENTORY gpufleet.cluster.gpu_node_labels"
    return finish(c, f"{len(present)} GPU node(s) carry {want}")


def _plugin_check(listing: Listing, settings: Settings) -> Check:
    present, _ = _gpu_nodes(listing, settings)
    pods = plugin_pods(listing, settings)
    where = (
        f"namespace {settings.plugin_namespace}" if settings.plugin_namespace else "all namespaces"
    )
    ds_names = []
    sel = parse_label_selector(settings.plugin_selector)
    for ds in listing.daemonsets:
        tmpl = ((ds.get("spec") or {}).get("template") or {}).get("metadata") or {}
        if label_selector_matches(sel, tmpl.get("labels") or {}) and (
            not settings.plugin_namespace
            or (ds.get("metadata") or {}).get("namespace") == settings.plugin_namespace
        ):
            st = ds.get("status") or {}
            ds_names.append(
                f"{(ds.get('metadata') or {}).get('namespace')}/{_name(ds)} "
                f"desired={st.get('desiredNumberScheduled', 0)} ready={st.get('numberReady', 0)}"
            )
    c = Check(
        "nodes.plugin-running",
        f"the {settings.driver} kubelet plugin runs on every GPU node",
        evidence=[
            Evidence(
                f"{listing.src('pods')} ({where}, selector {settings.plugin_selector})",
                f"plugin pods on {', '.join(sorted(pods)) or 'no node'}",
            ),
            Evidence(
                listing.src("daemonsets"),
                "; ".join(ds_names) or "no DaemonSet whose pods match the selector",
            ),
        ],
    )
    if not present:
        return skipped(c.id, c.title, "no GPU node of the inventory has a Node object", c.evidence)
    for node in present:
        mine = pods.get(node, [])
        if not mine:
            c.problem(
                node,
                FAIL,
                f"no kubelet plugin pod ({settings.plugin_selector}, {where}) is scheduled here: "
                "its claims cannot be prepared",
            )
        elif not any(_pod_running(p) for p in mine):
            states = ", ".join(f"{_name(p)} {(p.get('status') or {}).get('phase')}" for p in mine)
            c.problem(node, FAIL, f"kubelet plugin pod not Running and ready: {states}")
    c.fix = (
        "check the DaemonSet's nodeSelector/affinity against the node labels and the pod's "
        "events (kubectl -n <namespace> describe pod -l " + settings.plugin_selector + ")"
    )
    return finish(c, f"plugin pod Running on all {len(present)} GPU node(s)")


def _attr_value(device: Mapping[str, Any], name: str) -> Any:
    body = device.get("basic") if isinstance(device.get("basic"), Mapping) else device
    v = (body.get("attributes") or {}).get(name)
    if isinstance(v, Mapping) and v:
        return next(iter(v.values()))
    return None


def _capacity(device: Mapping[str, Any], name: str) -> Any:
    body = device.get("basic") if isinstance(device.get("basic"), Mapping) else device
    v = (body.get("capacity") or {}).get(name)
    return v.get("value") if isinstance(v, Mapping) else v


def _semver(version: str | None) -> str | None:
    if not version:
        return None
    parts = [str(int(p)) for p in re.findall(r"\d+", version)[:3]]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts)


def _wanted_layout(raw: Any, index: int) -> dict[str, int] | None:
    if not raw:
        return None
    if isinstance(raw, Mapping) and all(str(k).isdigit() for k in raw):
        layout = raw.get(index, raw.get(str(index)))
        return (
            {str(k): int(v) for k, v in (layout or {}).items() if int(v)}
            if layout is not None
            else None
        )
    return {str(k): int(v) for k, v in raw.items() if int(v)}


def expected_devices(facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the NVIDIA DRA driver publishes for a host's ``gpu_facts``: per GPU without
    MIG one ``gpu`` device (uuid, productName, memory bytes, driverVersion), per MIG
    device one ``mig`` device (uuid, parentUUID, profile, memory)."""
    out = []
    driver = _semver(facts.get("gpufleet_gpu_driver_version"))
    for g in facts.get("gpufleet_gpus") or []:
        if g.get("mig_mode_current") == "Enabled":
            for m in g.get("mig_devices") or []:
                out.append(
                    {
                        "type": "mig",
                        "uuid": m.get("uuid"),
                        "parentUUID": g.get("uuid"),
                        "gpu": g.get("index"),
                        "profile": m.get("profile"),
                        "productName": g.get("name"),
                        "driverVersion": driver,
                        "memory": m.get("memory_mib"),
                    }
                )
        else:
            out.append(
                {
                    "type": "gpu",
                    "uuid": g.get("uuid"),
                    "gpu": g.get("index"),
                    "productName": g.get("name"),
                    "driverVersion": driver,
                    "memory": g.get("memory_mib"),
                }
            )
    return out


def _slices_check(listing: Listing, settings: Settings) -> Check:
    present, _ = _gpu_nodes(listing, settings)
    latest = vcl.latest_slices(
        s for s in listing.slices if (s.get("spec") or {}).get("driver") == settings.driver
    )
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for s in latest:
        node = (s.get("spec") or {}).get("nodeName")
        if node:
            by_node.setdefault(node, []).append(s)
    c = Check(
        "nodes.resourceslices",
        "each GPU node publishes ResourceSlices that match its GPUs",
        evidence=[
            Evidence(
                listing.src("resourceslices"),
                f"{len(listing.slices)} slice(s), {len(latest)} of driver {settings.driver} "
                f"(newest generation) on {len(by_node)} node(s)",
            ),
        ],
    )
    if "resourceslices" in listing.errors:
        return skipped(
            c.id, c.title, f"ResourceSlices could not be listed: {listing.errors['resourceslices']}"
        )
    if not present:
        return skipped(c.id, c.title, "no GPU node of the inventory has a Node object", c.evidence)
    compared = 0
    for node in present:
        devices = [
            d for s in by_node.get(node, []) for d in (s.get("spec") or {}).get("devices") or []
        ]
        if not devices:
            c.problem(
                node,
                FAIL,
                f"no ResourceSlice of driver {settings.driver} with devices: the scheduler cannot "
                "allocate a GPU here",
            )
            continue
        facts = settings.gpu_facts.get(node)
        if not facts or not facts.get("gpufleet_gpus"):
            continue
        compared += 1
        by_uuid = {_attr_value(d, "uuid"): d for d in devices}
        want = expected_devices(facts)
        for e in want:
            d = by_uuid.pop(e["uuid"], None)
            label = (
                f"GPU {e['gpu']}"
                + (f" MIG {e['profile']}" if e["type"] == "mig" else "")
                + f" {e['uuid']}"
            )
            if d is None:
                c.problem(node, FAIL, f"{label} is not published (nvidia-smi shows it)")
                continue
            diffs = []
            for attr in ("type", "productName", "driverVersion", "profile", "parentUUID"):
                if attr in e and e[attr] is not None and str(_attr_value(d, attr)) != str(e[attr]):
                    diffs.append(f"{attr} is {_attr_value(d, attr)}, the host says {e[attr]}")
            cap = _capacity(d, "memory")
            if e.get("memory") and cap is not None:
                try:
                    mib = vcel.parse_quantity(cap) / MIB
                except vcel.CelError:
                    mib = None
                if mib is not None and mib != e["memory"]:
                    diffs.append(f"memory is {cap}, the host says {e['memory']}Mi")
            if diffs:
                c.problem(node, FAIL, f"{label} ({d.get('name')}): " + "; ".join(diffs))
        for uuid, d in by_uuid.items():
            c.problem(
                node,
                FAIL,
                f"device {d.get('name')} ({uuid}) is published but the host has no such GPU or MIG "
                "device",
            )
        # wanted MIG layout
        raw = settings.mig_layout.get(node)
        for g in facts.get("gpufleet_gpus") or []:
            layout = _wanted_layout(raw, int(g.get("index", 0)))
            if layout is None:
                continue
            have = Counter(
                _attr_value(d, "profile")
                for d in devices
                if _attr_value(d, "parentUUID") == g.get("uuid")
            )
            have.pop(None, None)
            if dict(have) != layout:
                c.problem(
                    node,
                    FAIL,
                    f"GPU {g.get('index')}: published MIG devices "
                    f"{dict(sorted(have.items())) or 'none'}, wanted layout "
                    f"{dict(sorted(layout.items())) or 'MIG off'}",
                )
    c.evidence.append(
        Evidence(
            "gpu_facts (gpufleet_gpus) per GPU node",
            f"compared on {compared} of {len(present)} node(s)",
        )
    )
    c.fix = (
        "restart the kubelet plugin on the node so it republishes (kubectl delete pod of the "
        "plugin there); check the driver and MIG state with nvidia-smi"
    )
    return finish(
        c,
        f"{len(present)} GPU node(s) publish devices"
        + (f" matching the GPU facts on {compared}" if compared else ""),
    )


def _orphans_check(listing: Listing, settings: Settings) -> Check:
    pods = plugin_pods(listing, settings)
    node_names = {_name(n) for n in listing.nodes}
    c = Check(
        "nodes.orphan-slices",
        "no ResourceSlice left by a driver without its plugin pod",
        evidence=[
            Evidence(listing.src("resourceslices"), f"{len(listing.slices)} slice(s)"),
            Evidence(
                listing.src("pods"),
                f"plugin pods of {settings.driver} on {', '.join(sorted(pods)) or 'no node'}",
            ),
        ],
    )
    if "resourceslices" in listing.errors:
        return skipped(
            c.id, c.title, f"ResourceSlices could not be listed: {listing.errors['resourceslices']}"
        )
    seen: set[tuple[str, str]] = set()
    other_drivers: set[str] = set()
    for s in listing.slices:
        spec = s.get("spec") or {}
        node, driver = spec.get("nodeName"), spec.get("driver", "")
        if not node:
            continue
        if (node, driver) in seen:
            continue
        if node not in node_names:
            seen.add((node, driver))
            c.problem(
                node,
                FAIL,
                f"ResourceSlice(s) of driver {driver} name node {node}, which no longer exists",
            )
        elif driver == settings.driver and not any(_pod_running(p) for p in pods.get(node, [])):
            seen.add((node, driver))
            c.problem(
                node,
                FAIL,
                f"ResourceSlice {_name(s)} of driver {driver} is published but no plugin pod runs "
                "here: the scheduler may allocate devices the node cannot prepare",
            )
        elif driver != settings.driver:
            other_drivers.add(driver)
    if other_drivers:
        c.evidence.append(
            Evidence(
                "not judged",
                f"slices of other drivers ({', '.join(sorted(other_drivers))}): their plugin pods "
                "are not known to this check",
            )
        )
    c.fix = (
        "start the plugin on that node again, or delete the slices it left: kubectl delete "
        "resourceslices --field-selector spec.nodeName=<node>,spec.driver=" + settings.driver
    )
    return finish(c, "every node slice has its node and plugin pod")


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


_ = (PASS, SKIP, Iterable)
