"""What each panel of the monitoring role's Grafana dashboard should show on the lab's
panels scenario (test_monitoring.py ``test_every_dashboard_panel_returns_the_scenario_series``),
derived from the cluster's own objects as listed while the scenario holds: ResourceSlices,
ResourceClaims, Pods, Nodes, Namespaces.

``EXPECTED`` maps every panel title to a function of the ``Scene`` that gives, per query
(refId), the ``Want``: the labels compared, the series by their values, and each series'
value (a number, or a predicate on it). A query that returns nothing on the scenario says
why in ``Want.empty``. A panel the dashboard has and ``EXPECTED`` lacks fails the test.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    NVIDIA_DRIVER,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.quantity import (
    parse_quantity,
)

#: The namespace label that names a claim's team (report.teams.DEFAULT_TEAM_LABEL).
TEAM_LABEL = "gpufleet.io/team"
NO_TEAM = "(no team)"
#: Any value at all (a NaN too: a quantile over a window without operations).
ANY: Callable[[float], bool] = lambda v: True  # noqa: E731
ZERO: Callable[[float], bool] = lambda v: v == 0  # noqa: E731


@dataclass(frozen=True)
class Want:
    """The series one query should return: ``labels`` the label names compared, ``series``
    each series by the values of those labels (in that order) and its value or a predicate
    on it; ``empty``, when no series is wanted, says why the scenario gives none."""

    labels: tuple[str, ...] = ()
    series: Mapping[tuple[str, ...], float | Callable[[float], bool]] = field(default_factory=dict)
    empty: str = ""


@dataclass(frozen=True)
class Scene:
    """The cluster's objects (the ``items`` of each list) while the scenario holds, the
    resources of resource.k8s.io it serves, and the scrape jobs of the lab's Prometheus
    with their number of targets."""

    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    classes: list[dict[str, Any]]
    #: The resources of resource.k8s.io the kube-apiserver serves (``deviceclasses``, ...).
    resources: list[str]
    jobs: Mapping[str, int]

    def devices(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Published devices of the driver by (pool, device name)."""
        return {
            (s["spec"]["pool"]["name"], d["name"]): {**d, "node": s["spec"].get("nodeName", "")}
            for s in self.slices
            if s["spec"].get("driver") == NVIDIA_DRIVER
            for d in s["spec"].get("devices") or []
        }

    def memory(self, pool: str, device: str) -> int:
        """Bytes of GPU memory a published device has (its ``memory`` capacity)."""
        capacity = self.devices()[(pool, device)].get("capacity") or {}
        return int(parse_quantity(capacity["memory"]["value"]))

    def running(self) -> set[tuple[str, str]]:
        return {
            (p["metadata"]["namespace"], p["metadata"]["name"])
            for p in self.pods
            if p["status"].get("phase") == "Running"
        }

    def allocated(self) -> list[dict[str, Any]]:
        """``{namespace, claim, pool, device, in_use, measured, leaked}`` per device of the
        driver allocated to a claim; ``in_use``: the claim is reserved for a running pod;
        ``measured``: reserved for a pod at all (its device was prepared, so the simulator
        reported its 0% utilization within the window); ``leaked``: no pod it is reserved
        for exists."""
        pods = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.pods}
        running = self.running()
        out = []
        for c in self.claims:
            ns, status = c["metadata"]["namespace"], c.get("status") or {}
            users = {(ns, r["name"]) for r in status.get("reservedFor") or []}
            for r in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []:
                if r["driver"] == NVIDIA_DRIVER:
                    out.append(
                        {
                            "namespace": ns,
                            "claim": c["metadata"]["name"],
                            "pool": r["pool"],
                            "device": r["device"],
                            "in_use": bool(users & running),
                            "measured": bool(users),
                            "leaked": not users & pods,
                        }
                    )
        return out

    def pending(self) -> list[dict[str, Any]]:
        return [c for c in self.claims if not (c.get("status") or {}).get("allocation")]

    def team(self, namespace: str) -> str:
        for ns in self.namespaces:
            if ns["metadata"]["name"] == namespace:
                return (ns["metadata"].get("labels") or {}).get(TEAM_LABEL, NO_TEAM)
        return NO_TEAM

    def gpu_nodes(self) -> list[str]:
        return sorted(
            n["metadata"]["name"]
            for n in self.nodes
            if (n["metadata"].get("labels") or {}).get("nvidia.com/gpu.present") == "true"
        )

    def unschedulable(self) -> int:
        return sum(
            1
            for p in self.pods
            for cond in p["status"].get("conditions") or []
            if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable"
        )


def _counted(rows: list[dict[str, Any]], *keys: str) -> dict[tuple[str, ...], float]:
    return dict(Counter(tuple(r[k] for k in keys) for r in rows))


def _summed(rows: list[dict[str, Any]], weight: str, *keys: str) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for r in rows:
        out[tuple(r[k] for k in keys)] = out.get(tuple(r[k] for k in keys), 0) + r[weight]
    return out


def _devices(s: Scene) -> dict[str, Want]:
    published, allocated = len(s.devices()), len(s.allocated())
    return {
        "A": Want((), {(): published}),
        "B": Want((), {(): allocated}),
        "C": Want((), {(): published - allocated}),
    }


def _by_state(s: Scene) -> dict[str, Want]:
    """Devices by state; blocked (not allocated, but shared counters hold what they need) is
    0 where no device consumes shared counters, as on this lab (the dynamic MIG lab checks
    blocked devices through the report)."""
    devices = s.devices()
    sharing = [name for name, d in devices.items() if d.get("consumesCounters")]
    assert not sharing, f"devices consuming shared counters, not modelled here: {sharing[:5]}"
    published, allocated = len(devices), len(s.allocated())
    return {
        "A": Want(
            ("state",),
            {("allocated",): allocated, ("blocked",): 0, ("free",): published - allocated},
        )
    }


def _per_node(s: Scene) -> dict[str, Want]:
    per_node = Counter(d["node"] for d in s.devices().values())
    return {"A": Want(("node",), {(n,): per_node.get(n, 0) for n in s.gpu_nodes()})}


def _device_plugin(s: Scene) -> dict[str, Want]:
    listed = {
        (n["metadata"]["name"], r): v
        for n in s.nodes
        for r, v in ((n.get("status") or {}).get("allocatable") or {}).items()
        if r == "nvidia.com/gpu" or r.startswith("nvidia.com/mig-")
    }
    why = "no Node of the lab lists nvidia.com/gpu or nvidia.com/mig-* (no device plugin)"
    return {"A": Want(("node", "resource"), {k: int(v) for k, v in listed.items()}, why)}


def _in_use_attribute(s: Scene, attribute: str) -> list[dict[str, Any]]:
    """The devices in use with the value of a device attribute (``""`` without it)."""
    devices = s.devices()
    return [
        {**a, attribute: _attribute(devices[(a["pool"], a["device"])], attribute)}
        for a in s.allocated()
        if a["in_use"]
    ]


def _attribute(device: dict[str, Any], name: str) -> str:
    value = (device.get("attributes") or {}).get(name) or {}
    return str(next(iter(value.values()), "")) if value else ""


def _by_model(s: Scene) -> dict[str, Want]:
    rows = _in_use_attribute(s, "productName")
    for r in rows:
        r["profile"] = _attribute(s.devices()[(r["pool"], r["device"])], "profile")
    return {"A": Want(("modelName", "dra_mig_profile"), _counted(rows, "productName", "profile"))}


def _by_pool(s: Scene) -> dict[str, Want]:
    return {
        "A": Want(("dra_pool_name",), _counted([a for a in s.allocated() if a["in_use"]], "pool"))
    }


def _stranded(s: Scene) -> dict[str, Want]:
    shared = [x for x in s.slices if x["spec"].get("sharedCounters")]
    why = "no ResourceSlice of the lab publishes shared counters (no dynamic MIG GPU)"
    return {"A": Want(("node",), {(x["spec"]["nodeName"],): ANY for x in shared}, why)}


def _claims_stat(s: Scene) -> dict[str, Want]:
    leaked = {(a["namespace"], a["claim"]) for a in s.allocated() if a["leaked"]}
    return {"A": Want((), {(): len(s.pending())}), "B": Want((), {(): len(leaked)})}


def _pending_by_cause(s: Scene) -> dict[str, Want]:
    # the cause is gpufleet report's own words; the claim count is the cluster's
    return {"A": Want((), {(): len(s.pending())})} if s.pending() else {"A": Want(empty="none")}


def _leaked_table(s: Scene) -> dict[str, Want]:
    leaked = {(a["namespace"], a["claim"]) for a in s.allocated() if a["leaked"]}
    return {"A": Want(("namespace", "claim"), dict.fromkeys(leaked, 1))}


def _claims_in_use(s: Scene) -> dict[str, Want]:
    claims = {(a["namespace"], a["claim"]) for a in s.allocated()}
    in_use = {(a["namespace"], a["claim"]) for a in s.allocated() if a["in_use"]}
    return {"A": Want((), {(): len(claims)}), "B": Want((), {(): len(in_use)})}


def _unschedulable(s: Scene) -> dict[str, Want]:
    return {"A": Want((), {(): s.unschedulable()})}


def _creation_failures(s: Scene) -> dict[str, Want]:
    # no ResourceClaimTemplate in the scenario: a counter of failures reads 0, if exported
    return {"A": Want(("job",), {}, "no claim of the scenario is made from a template")}


def _held(s: Scene, weight: str, which: str) -> dict[str, Want]:
    """Per team (of the claims' namespaces) the devices or memory allocated (``which``
    ``allocated``), idle (measured at 0% utilization within the window: every device of
    the lab's simulator idles unless set) or leaked."""
    rows = [
        {
            **a,
            "team": s.team(a["namespace"]),
            "memory": s.memory(a["pool"], a["device"]),
            "devices": 1,
        }
        for a in s.allocated()
    ]
    chosen = {
        "allocated": lambda r: True,
        "idle": lambda r: r["measured"],
        "leaked": lambda r: r["leaked"],
    }[which]
    teams = {(r["team"],): 0 for r in rows}
    return {
        "A": Want(("team",), {**teams, **_summed([r for r in rows if chosen(r)], weight, "team")})
    }


def _idle_per_namespace(s: Scene) -> dict[str, Want]:
    rows = [{**a, "team": s.team(a["namespace"])} for a in s.allocated()]
    want: dict[tuple[str, ...], Any] = {(r["namespace"], r["team"]): ZERO for r in rows}
    for r in rows:
        if r["measured"]:  # averaged over samples, the first ones before it was measured
            want[(r["namespace"], r["team"])] = lambda v: 0 < v <= 1
    return {"A": Want(("namespace", "team"), want)}


def _dcgm_idle(s: Scene) -> dict[str, Want]:
    # the window holds the samples of a device measured before its pod went: counted too
    measured = [a for a in s.allocated() if a["measured"]]
    return {"A": Want(("dra_claim_namespace",), _counted(measured, "namespace"))}


def _plugins(s: Scene) -> dict[str, set[str]]:
    """GPU nodes with and without a running kubelet plugin pod of the driver."""
    running = {
        p["spec"].get("nodeName")
        for p in s.pods
        if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/component")
        == "kubelet-plugin"
        and p["status"].get("phase") == "Running"
    }
    return {"with": set(s.gpu_nodes()) & running, "without": set(s.gpu_nodes()) - running}


def _without_plugin(s: Scene) -> dict[str, Want]:
    return {"A": Want((), {(): len(_plugins(s)["without"])})}


def _sockets(s: Scene) -> dict[str, Want]:
    return {"A": Want(("node",), {(n,): 1 for n in _plugins(s)["with"]})}


def _prepare_errors(s: Scene) -> dict[str, Want]:
    why = "every NodePrepareResources and NodeUnprepareResources of the scenario succeeds"
    return {"A": Want(("node", "operation_name"), {}, why)}


def _operations(s: Scene) -> dict[str, Want]:
    # the quantile over the last rate interval: NaN once no operation falls in it
    return {
        "A": Want(("operation_name",), {("PrepareResources",): ANY, ("UnprepareResources",): ANY})
    }


#: The gRPC service of the DRA kubelet plugin API the kubelet calls (resource.k8s.io v1,
#: Kubernetes 1.34 and later); the kubelet's metric names the method by its full path.
DRA_SERVICE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"


def _grpc_calls(s: Scene) -> dict[str, Want]:
    methods = (f"{DRA_SERVICE}NodePrepareResources", f"{DRA_SERVICE}NodeUnprepareResources")
    return {
        "A": Want(
            ("driver_name", "method_name", "grpc_status_code"),
            {(NVIDIA_DRIVER, m, "OK"): ANY for m in methods},
        )
    }


def _in_use_per_node(s: Scene) -> dict[str, Want]:
    on_node = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p["spec"].get("nodeName", "")
        for p in s.pods
    }
    per_node: Counter[str] = Counter()
    for c in s.claims:
        users = {
            on_node.get((c["metadata"]["namespace"], r["name"]))
            for r in (c.get("status") or {}).get("reservedFor") or []
        }
        per_node.update(n for n in users if n)
    return {"A": Want(("node",), {(n,): per_node.get(n, 0) for n in s.gpu_nodes()})}


def _targets(s: Scene) -> dict[str, Want]:
    return {"A": Want(("job",), {(job,): n for job, n in s.jobs.items()})}


def _binding_conditions(s: Scene) -> dict[str, Want]:
    bound = [d for d in s.devices().values() if d.get("bindingConditions")]
    why = "no device the lab publishes has BindingConditions"
    return {
        "A": Want(("driver", "status"), {(NVIDIA_DRIVER, "success"): ANY} if bound else {}, why)
    }


def _objects(s: Scene) -> dict[str, Want]:
    # Every resource.k8s.io resource the kube-apiserver serves (apiserver_resource_objects
    # names it without its group); it counts stored objects about once a minute, so only
    # the DeviceClasses' count is compared: no test of the module changes them, while the
    # stopped-plugin test has a node's ResourceSlices deleted and published again.
    counts = {"deviceclasses": len(s.classes)}
    return {"A": Want(("resource",), {(r,): counts.get(r, ANY) for r in s.resources})}


def _feature_gate(s: Scene) -> dict[str, Want]:
    jobs = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
    return {"A": Want(("job",), {(j,): 1 for j in jobs})}


#: Every panel of the dashboard, by title: its expectation on the scenario.
EXPECTED: dict[str, Callable[[Scene], dict[str, Want]]] = {
    "Devices published, allocated and free": _devices,
    "Devices by state": _by_state,
    "Devices published per GPU node": _per_node,
    "Device plugin resources per node": _device_plugin,
    "Allocated devices by GPU model and MIG profile": _by_model,
    "Allocated devices by DRA pool": _by_pool,
    "Stranded GPU memory per node (dynamic MIG)": _stranded,
    "Stranded multiprocessors per node (dynamic MIG)": _stranded,
    "Pending and leaked claims": _claims_stat,
    "Pending claims by cause": _pending_by_cause,
    "Leaked claims": _leaked_table,
    "Claims allocated and in use": _claims_in_use,
    "Pods unschedulable for devices": _unschedulable,
    "ResourceClaim creation failures": _creation_failures,
    "Idle GPU memory per team": lambda s: _held(s, "memory", "idle"),
    "Idle devices per team": lambda s: _held(s, "devices", "idle"),
    "Idle devices per namespace (average over the window)": _idle_per_namespace,
    "Allocated devices below 5% utilization over the window, per namespace": _dcgm_idle,
    "GPU memory held by leaked claims per team": lambda s: _held(s, "memory", "leaked"),
    "Allocated GPU memory per team": lambda s: _held(s, "memory", "allocated"),
    "GPU kubelets without the driver's plugin": _without_plugin,
    "Registered plugin sockets of the driver per node": _sockets,
    "NodePrepareResources and NodeUnprepareResources errors": _prepare_errors,
    "Prepare and unprepare latency (p99)": _operations,
    "Kubelet calls to the DRA plugin by status": _grpc_calls,
    "Claims in use per kubelet": _in_use_per_node,
    "Scrape targets up per job": _targets,
    "Binding-condition allocations by status": _binding_conditions,
    "DRA objects stored by the kube-apiserver": _objects,
    "DynamicResourceAllocation feature gate per component": _feature_gate,
}


def _matches(value: float, wanted: float | Callable[[float], bool]) -> bool:
    if callable(wanted):
        return bool(wanted(value))
    return math.isclose(value, wanted, rel_tol=1e-9, abs_tol=1e-9)


def check(
    title: str, ref: str, query: str, result: list[dict[str, Any]], scene: Scene
) -> dict[str, Any]:
    """One row of the table: the panel, the query as run, the series it returned (by the
    labels compared) and whether they are the ones ``EXPECTED`` gives for the scenario."""
    wants = EXPECTED[title](scene) if title in EXPECTED else {}
    want = wants.get(ref)
    got: dict[tuple[str, ...], float] = {}
    duplicate = False
    for r in result:
        key = tuple(r["metric"].get(label, "") for label in (want.labels if want else ()))
        duplicate |= key in got
        got[key] = float(r["value"][1])
    if want is None:
        expected, why = False, f"no expectation for {title!r} {ref}"
    elif not want.series:
        expected, why = not got and bool(want.empty), f"empty: {want.empty}"
    else:
        expected = not duplicate and set(got) == set(want.series)
        expected = expected and all(_matches(got[k], w) for k, w in want.series.items())
        why = "" if expected else f"wanted {_shown(want.labels, want.series)}"
    return {
        "panel": title,
        "ref": ref,
        "query": query,
        "series": _shown(want.labels if want else (), got) if got else "(none)",
        "expected": expected,
        "why": why,
    }


def _shown(labels: tuple[str, ...], series: Mapping[tuple[str, ...], Any]) -> str:
    def value(v: Any) -> str:
        return "any" if v is ANY else "0" if v is ZERO else "a test" if callable(v) else f"{v:g}"

    return "; ".join(
        "{" + ",".join(f"{k}={v}" for k, v in zip(labels, key, strict=True)) + "} " + value(v)
        for key, v in sorted(series.items())
    )


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table: panel, query, series returned, expected."""
    lines = ["| panel | query | series returned | expected |", "|---|---|---|---|"]
    for r in rows:
        verdict = "yes" if r["expected"] else f"NO ({r['why']})"
        if r["expected"] and r["why"].startswith("empty"):
            verdict = f"yes ({r['why']})"
        query = r["query"].replace("|", "\\|")
        lines.append(f"| {r['panel']} {r['ref']} | `{query}` | {r['series']} | {verdict} |")
    return "\n".join(lines) + "\n"
