# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Preflight rules on the GPU stack: the GPU Operator against the host stack, the driver
pin and branch (``nvidia.driver``), the container toolkit against containerd
(``nvidia.containerd.check_toolkit``), and the NVIDIA DRA driver chart and its feature
gates, judged by the dra_driver role's own rules (``dra_driver.chart``, ``dra_driver.gates``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gates as ddg
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.containerd import (
    ConfigError,
    check_toolkit,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.driver import (
    DRA_MIN_BRANCH,
    PlanError,
    check_pin,
    parse_driver_version,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import (
    ERROR,
    WARNING,
    HostContext,
    as_bool,
    as_list,
    text_of,
    vtext,
)


def _stack(ctx: HostContext) -> bool:
    return ctx.is_gpu and as_bool(ctx.settings, "site_install_gpu_stack")


def rule_driver(ctx: HostContext) -> None:
    if not ctx.is_gpu:
        return
    if as_bool(ctx.settings, "dra_driver_gpu_operator") and as_bool(
        ctx.settings, "site_install_gpu_stack"
    ):
        ctx.add(
            pp.problem(
                "gpu-operator-and-host-stack",
                ERROR,
                "site_install_gpu_stack",
                ctx.settings.get("site_install_gpu_stack"),
                "dra_driver_gpu_operator=true says the GPU Operator installs the driver and "
                "the toolkit (driver root /run/nvidia/driver), and the nvidia_driver and "
                "nvidia_container_toolkit roles would install them on the host as well",
                "set site_install_gpu_stack: false, or dra_driver_gpu_operator: false",
            )
        )
    if _stack(ctx):
        try:
            check_pin(
                text_of(ctx.settings, "nvidia_driver_branch"),
                text_of(ctx.settings, "nvidia_driver_version"),
                as_bool(ctx.settings, "nvidia_driver_for_dra"),
            )
        except PlanError as exc:
            variable, value, message, fix = _split_plan_error(str(exc), ctx.settings)
            ctx.add(pp.problem("driver-pin", ERROR, variable, value, message, fix))
    if ctx.driver_version:
        try:
            found = parse_driver_version(ctx.driver_version, "gpufleet_gpu_driver_version")
        except PlanError:
            return
        if found.branch < DRA_MIN_BRANCH and not _stack(ctx):
            ctx.add(
                pp.problem(
                    "driver-installed-branch",
                    ERROR,
                    "gpufleet_gpu_driver_version",
                    ctx.driver_version,
                    f"the driver installed on the node is branch {found.branch}; GPU "
                    f"allocation with the NVIDIA DRA driver needs {DRA_MIN_BRANCH} or newer "
                    "(dra-driver-nvidia-gpu docs/prerequisites.md)",
                    "upgrade the host driver (site_install_gpu_stack: true with "
                    "nvidia_driver_branch 580) before deploying the DRA driver",
                )
            )


_PLAN_ERROR_RE = re.compile(r"^(?P<var>[a-z_]+)=(?P<value>\S+?):? (?P<rest>.*)$", re.S)


def _split_plan_error(text: str, settings: Mapping[str, Any]) -> tuple[str, Any, str, str]:
    """``nvidia_driver_branch=550: ...; fix: ...`` -> (variable, value, message, fix)."""
    body, fix = msg.split_fix(text)
    m = _PLAN_ERROR_RE.match(body)
    if m and m.group("var") in settings:
        variable = m.group("var")
        return variable, settings.get(variable), m.group("rest").strip(), fix or "see above"
    return "nvidia_driver_version", settings.get("nvidia_driver_version"), body, fix


def rule_toolkit(ctx: HostContext) -> None:
    if not _stack(ctx):
        return
    containerd = text_of(ctx.settings, "nvidia_container_toolkit_containerd_version")
    if not containerd:
        return
    if ctx.release is not None:
        problem = dra_skew.container_runtime_problem(containerd, vtext(ctx.release))
        if problem:
            ctx.add(
                pp.problem(
                    "containerd-release",
                    ERROR,
                    "nvidia_container_toolkit_containerd_version",
                    containerd,
                    problem,
                    "upgrade containerd on the nodes to 2.0 or later and set the variable to "
                    "the version they run",
                )
            )
    try:
        check_toolkit(
            text_of(ctx.settings, "nvidia_container_toolkit_version"),
            containerd,
            as_bool(ctx.settings, "nvidia_container_toolkit_enable_cdi"),
        )
    except ConfigError as exc:
        body, fix = msg.split_fix(str(exc))
        if body.startswith("nvidia_container_toolkit_enable_cdi"):
            variable = "nvidia_container_toolkit_enable_cdi"
        elif body.startswith("cannot read a containerd"):
            variable = "nvidia_container_toolkit_containerd_version"
        else:
            variable = "nvidia_container_toolkit_version"
        message = body.split(": ", 1)[1] if ": " in body else body
        message += f" (nvidia_container_toolkit_containerd_version={containerd})"
        ctx.add(
            pp.problem(
                "toolkit-containerd", ERROR, variable, ctx.settings.get(variable), message, fix
            )
        )


def rule_driver_chart(ctx: HostContext) -> None:
    """The chart release as the dra_driver role parses it (``dra_driver_chart.
    parse_chart_version``), one group for labels and driver, and the chart's Kubernetes
    range (``CHART_KUBE_VERSION_MIN``, ``DOCUMENTED_KUBERNETES_MIN``) against the release."""
    text = text_of(ctx.settings, "dra_driver_chart_version")
    if text:
        try:
            ddc.parse_chart_version(text)
        except ddc.DraDriverError as exc:
            ctx.add(
                pp.problem("chart-version-format", ERROR, exc.variable, text, exc.reason, exc.fix)
            )
    groups = {
        name: text_of(ctx.settings, name) or "gpu_nodes"
        for name in ("gpu_node_labels_group", "dra_driver_group")
    }
    if groups["gpu_node_labels_group"] != groups["dra_driver_group"]:
        ctx.add(
            pp.problem(
                "gpu-groups-differ",
                WARNING,
                "dra_driver_group",
                groups["dra_driver_group"],
                f"differs from gpu_node_labels_group={groups['gpu_node_labels_group']}: the "
                "DRA kubelet plugin runs only on labelled nodes, and the driver role checks "
                "the ResourceSlices of its own group",
                "use one group for both",
            )
        )
    if ctx.release is None:
        return
    label = f"chart {text}" if text else "the NVIDIA DRA driver chart"
    chart_min = vtext(ddc.CHART_KUBE_VERSION_MIN)
    documented = vtext(ddc.DOCUMENTED_KUBERNETES_MIN)
    below = ddc.chart_kubernetes_minimum(ctx.release)
    if below == ddc.BELOW_CHART_KUBE_VERSION:
        ctx.add(
            pp.problem(
                "chart-kubernetes",
                ERROR,
                ctx.release_var,
                vtext(ctx.release),
                f"{label} declares kubeVersion >={chart_min}.0 in Chart.yaml; helm refuses "
                "to install it on this release",
                f"provision Kubernetes {documented} or newer",
            )
        )
    elif below == ddc.BELOW_DOCUMENTED_MINIMUM:
        accepted = as_bool(ctx.settings, "dra_driver_accept_below_documented_minimum")
        dra = dra_gates.gate_state(dra_core.DRA_GATE, vtext(ctx.release)).describe()
        ctx.add(
            pp.problem(
                "chart-kubernetes-docs",
                WARNING if accepted else ERROR,
                ctx.release_var,
                vtext(ctx.release),
                f"{label} installs (kubeVersion >={chart_min}), but its docs/prerequisites.md "
                f"document Kubernetes {documented} as the minimum; on {vtext(ctx.release)} "
                f"DynamicResourceAllocation is {dra} and needs the gates and runtime-config "
                "that dra_feature_gates sets"
                + ("" if accepted else ", and the dra_driver role refuses it"),
                f"prefer Kubernetes {documented} or newer"
                + ("" if accepted else ", or set dra_driver_accept_below_documented_minimum: true"),
            )
        )


def rule_driver_gates(ctx: HostContext) -> None:
    """The driver feature gates the inventory asks for (sharing strategies, DynamicMIG,
    explicit gates), judged by the dra_driver role's own rules
    (``dra_driver.gates.driver_feature_gates``: unknown gates, gates the chart release
    lacks, contradictions, dependencies, pairs the driver refuses together), then DynamicMIG
    against the Kubernetes release and its DRAPartitionableDevices gate."""
    try:
        chart = ddc.parse_chart_version(text_of(ctx.settings, "dra_driver_chart_version"))
    except ddc.DraDriverError:
        return  # reported by rule_driver_chart
    gates = ctx.settings.get("dra_driver_feature_gates") or {}
    if not isinstance(gates, Mapping):
        return  # reported by the argument-spec rule
    try:
        wanted = ddg.driver_feature_gates(
            chart,
            sharing=as_list(ctx.settings.get("dra_driver_sharing")),
            dynamic_mig=as_bool(ctx.settings, "dra_driver_dynamic_mig"),
            gates=gates,
        )
    except ddc.DraDriverError as exc:
        value = ctx.settings.get(exc.variable, exc.value)
        ctx.add(
            pp.problem(
                "driver-gates",
                ERROR,
                exc.variable,
                value,
                f"{exc.reason}; the dra_driver role refuses it",
                exc.fix,
            )
        )
        return
    if not wanted.get("DynamicMIG") or ctx.release is None:
        return
    var = "dra_driver_dynamic_mig"
    if not as_bool(ctx.settings, var):
        var = "dra_driver_feature_gates"
    val = ctx.settings.get(var)
    version = vtext(ctx.release)
    try:
        ddg.check_dynamic_mig_release(ctx.release[:2], var, val)
    except ddc.DraDriverError as exc:
        ctx.add(pp.problem("dynamic-mig-kubernetes", ERROR, var, val, exc.reason, exc.fix))
        return
    if dra_core.PROVISION_MIN_MINOR <= ctx.release[1] <= dra_core.PROVISION_MAX_MINOR and (
        not _partitionable_on(ctx, version)
    ):
        ctx.add(
            pp.problem(
                "dynamic-mig-gate",
                ERROR,
                var,
                val,
                "DynamicMIG publishes partitionable devices, and the Kubernetes gate "
                f"DRAPartitionableDevices is off on {version} with these settings",
                "add partitionable-devices to dra_feature_gates_features (and to "
                "kubeadm_dra_features when bootstrapping)",
            )
        )


def _partitionable_on(ctx: HostContext, version: str) -> bool:
    features = as_list(ctx.settings.get("dra_feature_gates_features"))
    gates = ctx.settings.get("dra_feature_gates_extra") or {}
    try:
        plan = dra_plan.plan_components(
            version, features, gates if isinstance(gates, Mapping) else {}
        )
    except dra_core.VersionModelError:
        return True  # reported by the gates rule
    if "DRAPartitionableDevices" in plan.wishes:
        return bool(plan.wishes["DRAPartitionableDevices"])
    state = dra_gates.gate_state("DRAPartitionableDevices", version)
    return state.known and state.default
