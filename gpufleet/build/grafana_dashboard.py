"""The Grafana dashboard the monitoring role provisions
(roles/monitoring/files/gpufleet-dra-dashboard.json), built with Grafana's own types: the
``grafana-foundation-sdk`` package, a test and development dependency (the ``test`` extra).
The collection ships the generated JSON, never the SDK.

    python -m gpufleet.build.grafana_dashboard           # rewrite the committed file
    python -m gpufleet.build.grafana_dashboard --check   # exit 1 when it differs

The panels read the series of ``gpufleet report --serve`` (report/metrics.py), the
Kubernetes series of the metric series table (dra/metric_series.py) and the DCGM exporter
series the role's alerting rules read; tests/unit/build/test_grafana_dashboard.py holds
every expression to that list and to the committed file, and
tests/integration/test_grafana_dashboard_promql.py has promtool parse each one.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    NVIDIA_DRIVER,
)

from gpufleet.exit import EXIT_FAILED, EXIT_OK

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "roles" / "monitoring" / "files" / "gpufleet-dra-dashboard.json"
UID = "gpufleet-dra"

#: The values promtool parses in place of the dashboard's variables: Grafana's own
#: (``$__rate_interval``, ``$__range``) and those of the dashboard (``VARIABLES``).
SAMPLE_VALUES = {
    "__rate_interval": "1m",
    "__range": "1h",
    "node": ".*",
    "team": ".*",
    "driver": NVIDIA_DRIVER,
    "window": "10m",
}

#: Matchers of the DCGM exporter series of a device allocated through DRA (its
#: ``dra_claim_name`` label, set with the chart's kubernetesDRA), on the chosen nodes.
_DRA = 'dra_claim_name!="", node=~"$node"'
#: Each allocated device once: profiling's graphics engine activity (MIG devices too),
#: else the GPU utilization, as the rule DRAAllocatedDeviceIdle reads them.
_ALLOCATED = f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{_DRA}}} or DCGM_FI_DEV_GPU_UTIL{{{_DRA}}}"
_IDLE = (
    f"(avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{_DRA}}}[$window]) * 100"
    f" or avg_over_time(DCGM_FI_DEV_GPU_UTIL{{{_DRA}}}[$window])) < 5"
)
_PLUGIN_SOCKET = (
    'plugin_manager_total_plugins{state="actual_state_of_world", '
    'socket_path=~".*/${driver}(-[^/]+)?-reg[.]sock", node=~"$node"}'
)
_RATE = "[$__rate_interval]"


@dataclass(frozen=True)
class Query:
    """A target: its PromQL ``expr`` and ``legend`` (Grafana's ``{{label}}`` format)."""

    expr: str
    legend: str = ""


@dataclass(frozen=True)
class PanelSpec:
    """A panel: ``kind`` (timeseries, stat, table, bargauge), title, description, unit,
    queries, width in grid columns (of 24), and whether its queries are instant."""

    kind: str
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    width: int = 12
    instant: bool = False
    stacked: bool = False


def _devices() -> tuple[PanelSpec, ...]:
    return (
        PanelSpec(
            "stat",
            "Devices published, allocated and free",
            "Devices of the DRA driver that ResourceSlices publish, and how many of them "
            "are allocated to ResourceClaims (gpufleet report --serve).",
            (
                Query("sum(gpufleet_dra_devices)", "published"),
                Query('sum(gpufleet_dra_devices{state="allocated"})', "allocated"),
                Query('sum(gpufleet_dra_devices{state="free"})', "free"),
            ),
            width=8,
        ),
        PanelSpec(
            "timeseries",
            "Devices by state",
            "Allocated and free devices of the DRA driver over time.",
            (Query("sum by (state) (gpufleet_dra_devices)", "{{state}}"),),
            width=16,
            stacked=True,
        ),
        PanelSpec(
            "timeseries",
            "Devices published per GPU node",
            "Devices that ResourceSlices of the driver publish on each node; 0 on a GPU node "
            "is the alert GPUNodeWithoutResourceSlice.",
            (
                Query(
                    'sum by (node) (gpufleet_gpu_node_resourceslice_devices{node=~"$node"})',
                    "{{node}}",
                ),
            ),
        ),
        PanelSpec(
            "timeseries",
            "Device plugin resources per node",
            "nvidia.com/gpu and nvidia.com/mig-* a Node lists in status.allocatable: above 0 "
            "on a node that also publishes DRA devices is the alert GPUNodeDualAdvertised.",
            (
                Query(
                    "sum by (node, resource) ("
                    'gpufleet_node_device_plugin_allocatable{node=~"$node"})',
                    "{{node}} {{resource}}",
                ),
            ),
        ),
        PanelSpec(
            "timeseries",
            "Allocated devices by GPU model and MIG profile",
            "Devices the DCGM exporter attributes to a ResourceClaim (kubernetesDRA), by "
            "GPU model and MIG profile (empty: a whole GPU).",
            (
                Query(
                    f"count by (modelName, dra_mig_profile) ({_ALLOCATED})",
                    "{{modelName}} {{dra_mig_profile}}",
                ),
            ),
            stacked=True,
        ),
        PanelSpec(
            "timeseries",
            "Allocated devices by DRA pool",
            "Devices the DCGM exporter attributes to a ResourceClaim, by the ResourceSlice "
            "pool they were allocated from.",
            (Query(f"count by (dra_pool_name) ({_ALLOCATED})", "{{dra_pool_name}}"),),
            stacked=True,
        ),
        PanelSpec(
            "timeseries",
            "Stranded GPU memory per node (dynamic MIG)",
            "GPU memory of the free memory slices that no device of a GPU published with "
            "shared counters can use now, per node (gpufleet report --serve).",
            (
                Query(
                    'sum by (node) (gpufleet_gpu_stranded_memory_bytes{node=~"$node"})',
                    "{{node}}",
                ),
            ),
            unit="bytes",
        ),
        PanelSpec(
            "timeseries",
            "Stranded multiprocessors per node (dynamic MIG)",
            "Free multiprocessors of the GPUs published with shared counters on which no "
            "device can be allocated any more, per node.",
            (
                Query(
                    'sum by (node) (gpufleet_gpu_stranded_multiprocessors{node=~"$node"})',
                    "{{node}}",
                ),
            ),
        ),
    )


def _claims() -> tuple[PanelSpec, ...]:
    allocated = (
        'sum(dynamic_resource_allocation_resource_claims{allocated="true"})'
        ' or sum(resourceclaim_controller_resource_claims{allocated="true"})'
        " or sum(resourceclaim_controller_allocated_resource_claims)"
    )
    failures = " or ".join(
        f"rate({name}{_RATE})"
        for name in (
            'dynamic_resource_allocation_resourceclaim_creates_total{status="failure"}',
            'resourceclaim_controller_creates_total{status="failure"}',
            'scheduler_resourceclaim_creates_total{status="failure"}',
            "resourceclaim_controller_create_failures_total",
        )
    )
    return (
        PanelSpec(
            "stat",
            "Pending and leaked claims",
            "ResourceClaims without an allocation, and allocated ones no live pod uses.",
            (
                Query("sum(gpufleet_dra_claims_pending)", "pending"),
                Query("sum(gpufleet_dra_claims_leaked)", "leaked"),
            ),
            width=8,
        ),
        PanelSpec(
            "timeseries",
            "Pending claims by cause",
            "Pending ResourceClaims by the first reason gpufleet report gives.",
            (Query("sum by (reason) (gpufleet_dra_claim_pending)", "{{reason}}"),),
            width=16,
            stacked=True,
        ),
        PanelSpec(
            "table",
            "Leaked claims",
            "Allocated ResourceClaims no live pod uses; gpufleet claims gc --apply releases them.",
            (Query("gpufleet_dra_claim_leaked == 1"),),
            width=24,
            instant=True,
        ),
        PanelSpec(
            "timeseries",
            "Claims allocated and in use",
            "Allocated ResourceClaims (kube-controller-manager, the name of each release) "
            "and claims the kubelets have in use (1.34 and later).",
            (
                Query(allocated, "allocated"),
                Query('sum(dra_resource_claims_in_use{driver_name="<any>"})', "in use"),
            ),
        ),
        PanelSpec(
            "timeseries",
            "Pods unschedulable for devices",
            "Pods the scheduler's DynamicResources plugin keeps unschedulable.",
            (
                Query(
                    'sum by (instance) (scheduler_unschedulable_pods{plugin="DynamicResources"})',
                    "{{instance}}",
                ),
            ),
        ),
        PanelSpec(
            "timeseries",
            "ResourceClaim creation failures",
            "Failed creations of ResourceClaims from their templates per second "
            "(controller-manager, or the scheduler for extended resources).",
            (Query(f"sum by (job) ({failures})", "{{job}}"),),
            unit="reqps",
            width=24,
        ),
    )


def _teams() -> tuple[PanelSpec, ...]:
    return (
        PanelSpec(
            "timeseries",
            "Idle GPU memory per team",
            "GPU memory allocated to each team's claims and idle (below the activity "
            "threshold of gpufleet report; no sample without the activity measured).",
            (
                Query(
                    'sum by (team) (gpufleet_team_idle_gpu_memory_bytes{team=~"$team"})',
                    "{{team}}",
                ),
            ),
            unit="bytes",
        ),
        PanelSpec(
            "timeseries",
            "Idle devices per team",
            "Devices allocated to each team's claims and idle.",
            (Query('sum by (team) (gpufleet_team_idle_devices{team=~"$team"})', "{{team}}"),),
        ),
        PanelSpec(
            "bargauge",
            "Idle devices per namespace (average over the window)",
            "Devices allocated to the claims of each namespace and idle, averaged over the "
            "window variable.",
            (
                Query(
                    "sum by (namespace, team) (avg_over_time("
                    'gpufleet_namespace_idle_devices{team=~"$team"}[$window]))',
                    "{{namespace}} ({{team}})",
                ),
            ),
            instant=True,
        ),
        PanelSpec(
            "bargauge",
            "Allocated devices below 5% utilization over the window, per namespace",
            "Devices the DCGM exporter attributes to a claim whose utilization averaged over "
            "the window is below 5% (the rule DRAAllocatedDeviceIdle's default threshold).",
            (Query(f"count by (dra_claim_namespace) ({_IDLE})", "{{dra_claim_namespace}}"),),
            instant=True,
        ),
        PanelSpec(
            "timeseries",
            "GPU memory held by leaked claims per team",
            "GPU memory allocated to claims no live pod uses: held for nobody.",
            (
                Query(
                    'sum by (team) (gpufleet_team_leaked_gpu_memory_bytes{team=~"$team"})',
                    "{{team}}",
                ),
            ),
            unit="bytes",
        ),
        PanelSpec(
            "timeseries",
            "Allocated GPU memory per team",
            "GPU memory allocated to each team's claims.",
            (
                Query(
                    'sum by (team) (gpufleet_team_allocated_gpu_memory_bytes{team=~"$team"})',
                    "{{team}}",
                ),
            ),
            unit="bytes",
            stacked=True,
        ),
    )


def _kubelets() -> tuple[PanelSpec, ...]:
    missing = (
        'count(max by (node) (up{job="kubelet", gpu_node="true", node=~"$node"} == 1)'
        f" unless on(node) max by (node) ({_PLUGIN_SOCKET} > 0)) or vector(0)"
    )
    return (
        PanelSpec(
            "stat",
            "GPU kubelets without the driver's plugin",
            "GPU nodes whose kubelet answers but has no plugin of the driver registered "
            "(the alert DRAKubeletPluginDown).",
            (Query(missing, "without plugin"),),
            width=8,
        ),
        PanelSpec(
            "timeseries",
            "Registered plugin sockets of the driver per node",
            "The kubelet plugin manager's registered sockets of the driver variable.",
            (Query(f"max by (node) ({_PLUGIN_SOCKET})", "{{node}}"),),
            width=16,
        ),
        PanelSpec(
            "timeseries",
            "NodePrepareResources and NodeUnprepareResources errors",
            "Failed prepare and unprepare operations per second on each node's kubelet.",
            (
                Query(
                    "sum by (node, operation_name) (rate(dra_operations_duration_seconds_count"
                    f'{{is_error="true", node=~"$node"}}{_RATE}))',
                    "{{node}} {{operation_name}}",
                ),
            ),
            unit="ops",
        ),
        PanelSpec(
            "timeseries",
            "Prepare and unprepare latency (p99)",
            "99th percentile of the kubelet's DRA operations.",
            (
                Query(
                    "histogram_quantile(0.99, sum by (le, operation_name) (rate("
                    f'dra_operations_duration_seconds_bucket{{node=~"$node"}}{_RATE})))',
                    "{{operation_name}}",
                ),
            ),
            unit="s",
        ),
        PanelSpec(
            "timeseries",
            "Kubelet calls to the DRA plugin by status",
            "gRPC calls of the kubelet to DRA plugins per second, by method and status code.",
            (
                Query(
                    "sum by (driver_name, method_name, grpc_status_code) (rate("
                    f'dra_grpc_operations_duration_seconds_count{{node=~"$node"}}{_RATE}))',
                    "{{driver_name}} {{method_name}} {{grpc_status_code}}",
                ),
            ),
            unit="ops",
        ),
        PanelSpec(
            "timeseries",
            "Claims in use per kubelet",
            "ResourceClaims each kubelet has prepared for running pods (1.34 and later).",
            (
                Query(
                    'sum by (node) (dra_resource_claims_in_use{driver_name="<any>", '
                    'node=~"$node"})',
                    "{{node}}",
                ),
            ),
        ),
    )


def _control_plane() -> tuple[PanelSpec, ...]:
    objects = (
        'max by (resource) (apiserver_resource_objects{group="resource.k8s.io"})'
        " or on() max by (resource) ("
        'apiserver_storage_objects{resource=~".+[.]resource[.]k8s[.]io"})'
    )
    return (
        PanelSpec(
            "timeseries",
            "Scrape targets up per job",
            "Targets answering per scrape job (kubelet, kube-scheduler, ... gpufleet-report).",
            (Query("sum by (job) (up)", "{{job}}"),),
        ),
        PanelSpec(
            "timeseries",
            "Binding-condition allocations by status",
            "Allocations of devices with BindingConditions per second, by driver and outcome "
            "(kube-scheduler, 1.36 and later).",
            (
                Query(
                    "sum by (driver, status) (rate("
                    f"scheduler_dra_bindingconditions_allocations_total{_RATE}))",
                    "{{driver}} {{status}}",
                ),
            ),
            unit="ops",
        ),
        PanelSpec(
            "timeseries",
            "DRA objects stored by the kube-apiserver",
            "resource.k8s.io objects per resource: none is the alert DRAAPINotServed.",
            (Query(objects, "{{resource}}"),),
        ),
        PanelSpec(
            "timeseries",
            "DynamicResourceAllocation feature gate per component",
            "1: on; 0: off (the alert DRAFeatureGateOff). Releases from 1.38 have no gate.",
            (
                Query(
                    'min by (job) (kubernetes_feature_enabled{name="DynamicResourceAllocation"})',
                    "{{job}}",
                ),
            ),
        ),
    )


#: The rows of the dashboard and their panels, top to bottom.
ROWS: tuple[tuple[str, tuple[PanelSpec, ...]], ...] = (
    ("Devices", _devices()),
    ("ResourceClaims", _claims()),
    ("Idle and leaked GPUs by team and namespace", _teams()),
    ("DRA components: kubelets and their plugin", _kubelets()),
    ("DRA components: control plane", _control_plane()),
)


def _panel(spec: PanelSpec, datasource: Any) -> Any:
    """The SDK builder of one panel."""
    from grafana_foundation_sdk.builders import bargauge, prometheus, stat, table, timeseries
    from grafana_foundation_sdk.builders import common as cb
    from grafana_foundation_sdk.models import common
    from grafana_foundation_sdk.models import prometheus as prom

    kinds = {
        "timeseries": timeseries.Panel,
        "stat": stat.Panel,
        "table": table.Panel,
        "bargauge": bargauge.Panel,
    }
    panel = (
        kinds[spec.kind]()
        .title(spec.title)
        .description(spec.description)
        .datasource(datasource)
        .unit(spec.unit)
        .span(spec.width)
        .height(8)
    )
    for ref, query in zip("ABCDEFGH", spec.queries, strict=False):
        target = prometheus.Dataquery().expr(query.expr).ref_id(ref).datasource(datasource)
        if query.legend:
            target = target.legend_format(query.legend)
        if spec.instant or spec.kind == "table":
            target = target.instant()
        if spec.kind == "table":
            target = target.format(prom.PromQueryFormat.TABLE)
        panel = panel.with_target(target)
    reduce = cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False)
    if spec.kind in ("stat", "bargauge"):
        panel = panel.reduce_options(reduce)
    if spec.kind == "table":
        panel = panel.show_header(True)
    if spec.kind == "timeseries":
        legend = cb.VizLegendOptions().display_mode(common.LegendDisplayMode.LIST)
        legend = legend.placement(common.LegendPlacement.BOTTOM).show_legend(True)
        tooltip = cb.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI)
        tooltip = tooltip.sort(common.SortOrder.DESCENDING)
        panel = panel.fill_opacity(10).min(0).legend(legend).tooltip(tooltip)
        if spec.stacked:
            panel = panel.stacking(cb.StackingConfig().mode(common.StackingMode.NORMAL))
    return panel


def _variables(datasource: Any) -> list[Any]:
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.models import dashboard as model

    def labels(name: str, label: str, query: str) -> Any:
        return (
            db.QueryVariable(name)
            .label(label)
            .datasource(datasource)
            .query(query)
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )

    return [
        db.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        labels("node", "Node", "label_values(gpufleet_gpu_node_resourceslice_devices, node)"),
        labels("team", "Team", "label_values(gpufleet_team_allocated_devices, team)"),
        db.TextBoxVariable("driver")
        .label("DRA driver")
        .description("The driver whose kubelet plugin registration the panels look for.")
        .default_value(NVIDIA_DRIVER),
        db.CustomVariable("window")
        .label("Idle window")
        .values("10m,1h,6h,1d")
        .current(model.VariableOption(text="10m", value="10m", selected=True)),
    ]


def build() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (a dict)."""
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import dashboard as model

    datasource = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
    dash = (
        db.Dashboard("gpufleet: DRA GPU fleet")
        .uid(UID)
        .description(
            "Devices, ResourceClaims, idle and leaked GPUs per team and namespace, and the "
            "health of the DRA components (the monitoring role of gpufleet, docs/monitoring.md)."
        )
        .tags(["gpufleet", "dra", "gpu"])
        .time("now-6h", "now")
        .refresh("1m")
        .timezone("browser")
    )
    for variable in _variables(datasource):
        dash = dash.with_variable(variable)
    for title, panels in ROWS:
        dash = dash.with_row(db.Row(title))
        for spec in panels:
            dash = dash.with_panel(_panel(spec, datasource))
    return json.loads(json.dumps(dash.build(), cls=JSONEncoder))


def render() -> str:
    """The committed file's text: the model, sorted keys, two-space indents."""
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def panel_targets(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """``(panel title, refId, PromQL)`` of every target of every panel of ``doc``, top to
    bottom (rows have none)."""
    for panel in doc.get("panels") or []:
        for target in panel.get("targets") or []:
            yield panel["title"], target.get("refId", ""), target["expr"]


def expressions(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(where, PromQL)`` of every panel target and query variable of ``doc``."""
    for title, ref, expr in panel_targets(doc):
        yield f"panel {title!r} {ref}", expr
    for variable in (doc.get("templating") or {}).get("list") or []:
        query = variable.get("query")
        if variable.get("type") == "query" and isinstance(query, str):
            m = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
            yield f"variable {variable['name']}", m.group(1) if m else query


def substituted(expr: str, values: Mapping[str, str] | None = None) -> str:
    """``expr`` with the dashboard's variables replaced by ``values`` (default
    ``SAMPLE_VALUES``; a variable ``values`` leaves out takes its sample value), for a
    PromQL parser or a query (``$x`` and ``${x}``; an unknown variable raises KeyError)."""
    chosen = {**SAMPLE_VALUES, **(values or {})}
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: chosen[m.group(1) or m.group(2)], expr)


def multi_value(values: Iterable[str]) -> str:
    """The regex Grafana puts in place of a multi-value variable in a Prometheus query:
    each value with its regex characters escaped for a PromQL string (``a.b``: ``a\\\\.b``),
    joined by ``|`` in parentheses (one value: the escaped value alone)."""
    escaped = sorted(re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\\\1", v) for v in values)
    return escaped[0] if len(escaped) == 1 else f"({'|'.join(escaped)})"


def main(argv: list[str]) -> int:
    text = render()
    if argv[1:] == ["--check"]:
        same = DASHBOARD.is_file() and DASHBOARD.read_text(encoding="utf-8") == text
        if not same:
            print(f"{DASHBOARD} differs; run python -m gpufleet.build.grafana_dashboard")
        return EXIT_OK if same else EXIT_FAILED
    DASHBOARD.parent.mkdir(parents=True, exist_ok=True)
    DASHBOARD.write_text(text, encoding="utf-8")
    print(DASHBOARD)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv))
