# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The GPU-stack upgrade plan: from the NVIDIA driver, container toolkit and DRA driver chart
a cluster runs to target releases of the three, per node, in order. Plan only: nothing here
changes a host or the cluster.

Pure: no I/O. ``plan_gpu_stack`` turns the stack as found (``StackState``: the cluster's
Kubernetes release, the installed chart release, per GPU node the loaded driver, the
toolkit and the GPU architectures, as module ``nvidia_driver_facts``, ``nvidia-ctk
--version`` and ``helm_info`` report them) and the targets into a ``GpuStackPlan``
(``to_dict`` is the JSON document of ``gpufleet upgrade-gpu-stack --plan --json``).

Refusals (``Refusal``, each naming the variable or option, the value, the fix and the
upstream source of its rule) are collected, not raised, so that one plan lists them all;
a plan with a refusal cannot run (exit 2):

* a driver release that is no NVIDIA release, or not of its branch, or below the
  collection's floor (``nvidia.driver.check_pin``);
* a driver older than the chart's minimum (``dra_driver.chart.chart_driver_minimum``:
  docs/prerequisites.md of the DRA driver);
* a chart on a cluster whose Kubernetes release is below the chart's ``kubeVersion``
  (Chart.yaml) or its documented minimum (docs/prerequisites.md;
  ``dra_driver.chart.chart_kubernetes_minimum``), the latter unless accepted as the
  dra_driver role accepts it;
* a chart downgrade the chart forbids (``dra_driver.chart.chart_downgrade``: back from 0.4
  to a calendar release, docs/upgrade.md);
* a GPU the target driver branch does not support (``nvidia.driver.release_supports``).

Order: the chart first (its CRDs, then ``helm upgrade``: the controller and the kubelet
plugin DaemonSet, ``dra_driver.chart.chart_upgrade_steps``) when every node's driver meets
the target chart's minimum, else after the nodes; then the nodes in batches of
``batch_size`` that keep ``min_gpu_available_percent`` of the GPU devices schedulable
(``upgrade.waves``, as the Kubernetes upgrade batches its workers). A node whose driver
changes is drained and its GPU clients stopped (the DRA kubelet plugin, the DCGM exporter,
the host's GPU services, ``mig.clients``); the new driver is loaded by ``modprobe`` when
none is loaded, else by a reboot with ``nvidia_driver_reboot`` (``nvidia.driver
.load_action``), else by unloading the old modules and loading the new ones (``reload``).
A node whose toolkit alone changes is not drained. A part in ``StackTargets.keep`` is kept
as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import clients as mig_clients
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd as nvc
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import driver as nvd
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import waves as uw
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.input import (
    UpgradePlanError,
    parse_batch_size,
    parse_min_gpu_percent,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.nodes import NodeState
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.waves import (
    _batches as batches_under_floor,
)

#: How messages name each input by default (the role variables); the CLI passes the option
#: for a value that came from one (``--driver``).
STACK_INPUT_NAMES = {
    "driver": "nvidia_driver_version",
    "branch": "nvidia_driver_branch",
    "toolkit": "nvidia_container_toolkit_version",
    "chart": "dra_driver_chart_version",
    "batch_size": "upgrade_batch_size",
    "min_gpu_available_percent": "upgrade_min_gpu_available_percent",
}
#: Upstream sources of the rules, as the refusals name them.
SOURCE_RELEASES = "NVIDIA driver release numbering (branch.minor.patch)"
SOURCE_FLOOR = "gpufleet nvidia.driver.DRIVER_FLOOR (oldest R525 data-center release)"
SOURCE_CHART_YAML = "kubernetes-sigs/dra-driver-nvidia-gpu Chart.yaml kubeVersion"
SOURCE_TOOLKIT = "NVIDIA/nvidia-container-toolkit release tags (vMAJOR.MINOR.PATCH)"
#: What a node whose driver changes stops before the driver is replaced: the pods holding
#: GPUs (drain), then every client that keeps the kernel module in use (``mig.clients``).
DRAIN = "GPU pods (drain)"
DRA_PLUGIN = "DRA kubelet plugin (gpus, compute-domains)"


class GpuStackPlanError(UpgradePlanError):
    """The stack as found cannot be read (a malformed node or version): ``reason``, ``fix``."""


@dataclass(frozen=True)
class Refusal:
    """An input the plan cannot run with: ``variable`` (option or variable) and ``value``,
    ``reason``, ``fix`` (a value or step that exists), ``source`` (where the rule comes
    from), ``node`` (the inventory host it concerns; empty for the whole cluster)."""

    variable: str
    value: Any
    reason: str
    fix: str
    source: str
    node: str = ""

    def __str__(self) -> str:
        where = f"{self.node}: " if self.node else ""
        return msg.refusal(
            where + msg.assignment(self.variable, self.value),
            f"{self.reason} (source: {self.source})",
            self.fix,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "variable": self.variable,
            "value": self.value,
            "reason": self.reason,
            "fix": self.fix,
            "source": self.source,
            "node": self.node,
            "message": str(self),
        }


@dataclass(frozen=True)
class StackNode:
    """A GPU node as found: ``host`` (inventory), ``name`` (Kubernetes node), ``driver``
    (loaded release, None when none is loaded), ``toolkit`` (``nvidia-ctk`` release, None
    when not installed), ``architectures`` (``nvidia.driver.architecture_of``),
    ``gpu_devices`` (devices its ResourceSlices publish), ``unschedulable`` (cordoned now),
    ``mig`` (MIG mode on a GPU)."""

    host: str
    name: str
    driver: str | None = None
    toolkit: str | None = None
    architectures: tuple[str, ...] = ()
    gpu_devices: int = 0
    unschedulable: bool = False
    mig: bool = False


@dataclass(frozen=True)
class StackState:
    """The stack as found: ``kubernetes`` (the cluster's release, ``"1.35.2"``), ``chart``
    (the installed release's Helm chart field, ``"nvidia-dra-driver-gpu-25.12.0"``; empty
    when none), ``nodes``."""

    kubernetes: str
    chart: str = ""
    nodes: tuple[StackNode, ...] = ()


@dataclass(frozen=True)
class StackTargets:
    """The releases to go to: ``driver`` (``"580.159.04"``), ``branch`` (``"580"``; empty:
    the driver's), ``toolkit`` (``"1.20.2"``), ``chart`` (``"0.4.0"``); ``keep`` the parts
    of ``driver``, ``toolkit``, ``chart`` kept as they are (their targets not judged nor
    planned: a node keeps its driver or toolkit, the cluster its chart); ``reboot``
    (``nvidia_driver_reboot``), ``compute_domains`` (ComputeDomains in use),
    ``accept_below_documented_minimum`` (``dra_driver_accept_below_documented_minimum``)."""

    driver: str
    toolkit: str
    chart: str
    branch: str = ""
    reboot: bool = False
    compute_domains: bool = False
    accept_below_documented_minimum: bool = False
    keep: tuple[str, ...] = ()


@dataclass
class NodePlan:
    """What changes on one node: ``driver``/``toolkit`` ``(current, target)``; ``load``
    (``none``, ``modprobe``, ``reload``, ``reboot``); ``stop`` what stops first; ``wave`` its wave
    (-1: nothing changes); ``actions`` in order; ``mig`` the node has a MIG layout (applied
    again after a driver change)."""

    host: str
    name: str
    driver: tuple[str | None, str]
    toolkit: tuple[str | None, str]
    load: str
    stop: list[str]
    wave: int
    actions: list[str]
    mig: bool = False

    @property
    def changes(self) -> bool:
        return self.driver[0] != self.driver[1] or self.toolkit[0] != self.toolkit[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "name": self.name,
            "driver": {"current": self.driver[0], "target": self.driver[1]},
            "toolkit": {"current": self.toolkit[0], "target": self.toolkit[1]},
            "changes": self.changes,
            "load": self.load,
            "stop": list(self.stop),
            "wave": self.wave,
            "actions": list(self.actions),
            "mig": self.mig,
        }


@dataclass
class GpuStackPlan:
    """The whole plan: ``chart`` (current, target, ``steps``, ``wave``), the nodes, the
    waves in order (``kind`` ``chart`` or ``nodes``), warnings and refusals."""

    kubernetes: str
    targets: StackTargets
    chart: dict[str, Any]
    nodes: list[NodePlan]
    waves: list[uw.Wave]
    batch_size: int
    min_gpu_available_percent: float
    warnings: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    @property
    def up_to_date(self) -> bool:
        return not self.waves

    def to_dict(self) -> dict[str, Any]:
        t = self.targets
        return {
            "kubernetes_version": self.kubernetes,
            "target": {
                "driver": None if "driver" in t.keep else t.driver,
                "driver_branch": None if "driver" in t.keep else t.branch,
                "toolkit": None if "toolkit" in t.keep else t.toolkit,
                "dra_driver_chart": None if "chart" in t.keep else t.chart,
                "reboot": t.reboot,
                "kept": list(t.keep),
            },
            "up_to_date": self.up_to_date,
            "chart": dict(self.chart),
            "nodes": [n.to_dict() for n in self.nodes],
            "waves": [w.to_dict() for w in self.waves],
            "batch_size": self.batch_size,
            "min_gpu_available_percent": self.min_gpu_available_percent,
            "warnings": list(self.warnings),
            "refused": [r.to_dict() for r in self.refused],
        }


# --------------------------------------------------------------------------------------
# Reading the stack as found
# --------------------------------------------------------------------------------------


def parse_state(data: Mapping[str, Any]) -> StackState:
    """A StackState from its dict (``kubernetes_version``, ``chart``, ``nodes``: each
    ``host``, ``name``, ``driver``, ``toolkit``, ``architectures``, ``gpu_devices``,
    ``unschedulable``, ``mig``), as the planning playbook gathers it
    (``state_from_facts``). Raises GpuStackPlanError naming the field."""
    if not isinstance(data, Mapping):
        raise GpuStackPlanError("the GPU stack state is not a mapping.", _STATE_FIX)
    kube = str(data.get("kubernetes_version") or "").strip()
    if not kube:
        raise GpuStackPlanError("the GPU stack state has no kubernetes_version.", _STATE_FIX)
    nodes = []
    for i, raw in enumerate(data.get("nodes") or []):
        if not isinstance(raw, Mapping) or not raw.get("host"):
            raise GpuStackPlanError(f"nodes[{i}] has no host.", _STATE_FIX)
        try:
            devices = int(raw.get("gpu_devices") or 0)
        except (TypeError, ValueError):
            raise GpuStackPlanError(
                f"nodes[{i}] ({raw['host']}): gpu_devices={raw.get('gpu_devices')!r} is not a "
                "number.",
                _STATE_FIX,
            ) from None
        nodes.append(
            StackNode(
                host=str(raw["host"]),
                name=str(raw.get("name") or raw["host"]),
                driver=_text_or_none(raw.get("driver")),
                toolkit=_text_or_none(raw.get("toolkit")),
                architectures=tuple(str(a) for a in raw.get("architectures") or ()),
                gpu_devices=devices,
                unschedulable=bool(raw.get("unschedulable")),
                mig=bool(raw.get("mig")),
            )
        )
    return StackState(kube, str(data.get("chart") or ""), tuple(nodes))


_STATE_FIX = (
    "plan with playbooks/upgrade_gpu_stack.yml (gpufleet upgrade-gpu-stack -i INVENTORY "
    "--plan), which builds the state with filter gpufleet.cluster.gpu_stack_state."
)


def _text_or_none(value: Any) -> str | None:
    text = str(value).strip() if value is not None else ""
    return text or None


def toolkit_release(text: str | None) -> str | None:
    """The release in ``nvidia-ctk --version`` output (``NVIDIA Container Toolkit CLI
    version 1.18.0`` -> ``1.18.0``) or a plain release; None when there is none."""
    for word in str(text or "").replace(",", " ").split():
        try:
            return ".".join(map(str, nvc.parse_toolkit_version(word)))
        except nvc.ConfigError:
            continue
    return None


# --------------------------------------------------------------------------------------
# Refusals
# --------------------------------------------------------------------------------------


def _pin_subject(reason: str, branch: str, driver: str) -> tuple[str, str] | None:
    """(``branch`` or ``driver``, the reason alone) of a ``check_pin`` message, which opens
    with the variable and its value (``nvidia_driver_branch='5 x' is not ...``); None when
    it opens otherwise. The value is matched as written, so one with spaces or quotes
    does not spill into the reason."""
    for key, variable, value in (
        ("branch", "nvidia_driver_branch", str(branch).strip()),
        ("driver", "nvidia_driver_version", str(driver).strip()),
    ):
        for shown in (repr(value), value):
            head = f"{variable}={shown} "
            if reason.startswith(head):
                rest = reason[len(head) :]
                return key, rest[3:] if rest.startswith("is ") else rest
    return None


def judge_driver(
    targets: StackTargets, chart: ddc.ChartVersion | None, names: Mapping[str, str]
) -> tuple[nvd.DriverVersion | None, list[Refusal]]:
    """The target driver release and what refuses it: no NVIDIA release
    (``nvidia.driver.parse_driver_version``, named as the driver even when the branch
    follows it), not a release of its branch or below the floor (``nvidia.driver.check_pin``),
    older than the target chart's minimum (``dra_driver.chart.chart_driver_minimum``)."""
    name = names["driver"]
    branch = targets.branch or str(targets.driver).split(".", 1)[0]
    try:
        nvd.parse_driver_version(targets.driver, name)
    except nvd.PlanError as exc:
        fix = msg.split_fix(str(exc))[1]
        reason = "not an NVIDIA driver release"
        return None, [Refusal(name, targets.driver, reason, fix, SOURCE_RELEASES)]
    try:
        pinned = nvd.check_pin(branch, targets.driver, for_dra=False)
    except nvd.PlanError as exc:
        reason, fix = msg.split_fix(str(exc))
        variable, value = name, targets.driver
        found = _pin_subject(reason, branch, targets.driver)
        if found:
            reason = found[1]
            if found[0] == "branch":
                variable, value = names["branch"], branch
        source = SOURCE_FLOOR if reason.startswith("older than") else SOURCE_RELEASES
        return None, [Refusal(variable, value, reason, fix, source)]
    if chart is None:
        return pinned, []
    minimum = ddc.chart_driver_minimum(chart, targets.compute_domains)
    if pinned >= nvd.parse_driver_version(minimum):
        return pinned, []
    what = "ComputeDomains with chart" if targets.compute_domains else "chart"
    return pinned, [
        Refusal(
            name,
            targets.driver,
            f"{what} {chart.chart_name} {chart.text} needs host driver {minimum} or later",
            f"give a driver release of {minimum} or later (e.g. of branch "
            f"{nvd.LAST_PRE_TURING_BRANCH})",
            ddc.PREREQUISITES_DOC,
        )
    ]


def judge_chart(
    targets: StackTargets,
    installed: ddc.ChartVersion | None,
    kubernetes: dra_core.KubeVersion,
    names: Mapping[str, str],
) -> tuple[ddc.ChartVersion | None, list[Refusal]]:
    """The target chart release and what refuses it: no such release
    (``parse_chart_version``), a downgrade the chart forbids (``chart_downgrade``), a
    cluster below the chart's Kubernetes minimums (``chart_kubernetes_minimum``; the
    documented one unless ``accept_below_documented_minimum``). A chart that does not
    change is not judged against Kubernetes."""
    name = names["chart"]
    try:
        target = ddc.parse_chart_version(targets.chart, name)
    except ddc.DraDriverError as exc:
        return None, [Refusal(name, targets.chart, exc.reason, exc.fix, ddc.UPGRADE_DOC)]
    out: list[Refusal] = []
    if installed is not None:
        down = ddc.chart_downgrade(installed, target)
        if down:
            fix = f"keep {name} at {installed.text} or later"
            out.append(Refusal(name, targets.chart, down, fix, ddc.UPGRADE_DOC))
    if installed == target and installed is not None and installed.legacy == target.legacy:
        return target, out
    release = (kubernetes.major, kubernetes.minor, kubernetes.patch or 0)
    below = ddc.chart_kubernetes_minimum(release)
    if below == ddc.BELOW_CHART_KUBE_VERSION:
        out.append(
            Refusal(
                name,
                targets.chart,
                f"the cluster runs Kubernetes {kubernetes}; the chart's kubeVersion is "
                f">={ddc.CHART_MIN}.0-0 (helm refuses the install)",
                f"upgrade Kubernetes to {ddc.DOCUMENTED_MIN} or later first (gpufleet upgrade "
                "-i INVENTORY --to VERSION)",
                SOURCE_CHART_YAML,
            )
        )
    elif below == ddc.BELOW_DOCUMENTED_MINIMUM and not targets.accept_below_documented_minimum:
        out.append(
            Refusal(
                name,
                targets.chart,
                f"the cluster runs Kubernetes {kubernetes}, below the chart's documented "
                f"minimum {ddc.DOCUMENTED_MIN}",
                f"upgrade Kubernetes to {ddc.DOCUMENTED_MIN} or later first (gpufleet upgrade "
                "-i INVENTORY --to VERSION), or set "
                "dra_driver_accept_below_documented_minimum=true",
                ddc.PREREQUISITES_DOC,
            )
        )
    return target, out


def judge_gpus(
    nodes: Sequence[StackNode], driver: nvd.DriverVersion, names: Mapping[str, str]
) -> list[Refusal]:
    """A refusal per node and architecture that ``driver`` does not support
    (``nvidia.driver.release_supports``, naming NVIDIA's document)."""
    out = []
    for node in nodes:
        for arch in sorted(set(node.architectures)):
            why = nvd.release_supports(arch, driver)
            if not why:
                continue
            first, last, source = nvd.BRANCH_SUPPORT[arch]
            fix = (
                f"give a release of branch {last} or older"
                if last is not None and driver.branch > last
                else f"give {first} or later"
            )
            out.append(Refusal(names["driver"], str(driver), why, fix, source, node=node.host))
    return out


def judge_toolkit(targets: StackTargets, names: Mapping[str, str]) -> list[Refusal]:
    """A refusal when the target toolkit is no release (``nvidia.containerd``)."""
    try:
        nvc.parse_toolkit_version(targets.toolkit)
    except nvc.ConfigError:
        return [
            Refusal(
                names["toolkit"],
                targets.toolkit,
                "not a release of the NVIDIA Container Toolkit",
                "give the release as MAJOR.MINOR.PATCH, as NVIDIA numbers it",
                SOURCE_TOOLKIT,
            )
        ]
    return []


# --------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------


def node_plan(node: StackNode, driver: str | None, toolkit: str | None, reboot: bool) -> NodePlan:
    """What changes on ``node`` to reach ``driver`` and ``toolkit`` (None: kept as the
    node has it), what stops first, how the driver loads and the actions in order (wave -1
    until batched)."""
    new_driver = driver is not None and node.driver != driver
    new_toolkit = toolkit is not None and node.toolkit != toolkit
    load = nvd.load_action(node.driver, driver, False) if new_driver else "none"
    if load == "reboot" and not reboot:
        # drained and its clients stopped, the node unloads the old modules and loads the
        # new ones (nvidia_driver_reload); a module still in use fails there, by name
        load = "reload"
    stop: list[str] = []
    actions: list[str] = []
    if new_driver:
        stop = [DRAIN, DRA_PLUGIN, *mig_clients.SYSTEMD_CLIENTS, *mig_clients.MODULE_CLIENTS]
        actions += ["cordon", "drain GPU pods", "stop " + ", ".join(stop[1:])]
        actions.append(f"driver {node.driver or 'none'} -> {driver} (nvidia_driver)")
    if new_toolkit:
        actions.append(
            f"toolkit {node.toolkit or 'none'} -> {toolkit} (nvidia_container_toolkit), "
            "CDI spec regenerated"
        )
    if load == "reboot":
        actions.append("reboot")
    elif load == "reload":
        actions.append("unload the NVIDIA modules and load the new driver (no reboot)")
    elif load == "modprobe":
        actions.append("modprobe nvidia")
    if new_driver:
        if node.mig:
            actions.append("MIG layout applied again (mig role)")
        actions += ["start the stopped GPU clients", "DRA plugin Ready, ResourceSlices "
                    "republished", "uncordon"]  # fmt: skip
    return NodePlan(
        node.host, node.name, (node.driver, node.driver if driver is None else driver),
        (node.toolkit, node.toolkit if toolkit is None else toolkit),
        load, stop, -1, actions, node.mig,
    )  # fmt: skip


def plan_gpu_stack(
    state: StackState,
    targets: StackTargets,
    *,
    batch_size: int | str = 1,
    min_gpu_available_percent: int | float | str = 0,
    input_names: Mapping[str, str] | None = None,
) -> GpuStackPlan:
    """Plan the GPU stack of ``state`` to ``targets``: refusals (module docstring), per
    node what changes, and the waves (the chart's, the nodes' batches). ``input_names``:
    how messages name the inputs (``STACK_INPUT_NAMES`` by default). Raises
    GpuStackPlanError for a cluster release that is no version, UpgradePlanError for bad
    batch or floor values or a node that alone breaks the GPU floor (as the Kubernetes
    upgrade)."""
    names = {**STACK_INPUT_NAMES, **dict(input_names or {})}
    try:
        kube = dra_core.parse_version(state.kubernetes, "kubernetes_version")
    except dra_core.VersionParseError as exc:
        raise GpuStackPlanError(exc.reason, _STATE_FIX) from None
    floor = parse_min_gpu_percent(min_gpu_available_percent, names["min_gpu_available_percent"])
    size = parse_batch_size(batch_size, max(1, len(state.nodes)), names["batch_size"])
    installed, warnings = _installed_chart(state.chart)
    keep = set(targets.keep)
    chart, refused = (None, []) if "chart" in keep else judge_chart(targets, installed, kube, names)
    # a chart kept as installed still sets the driver's minimum
    driver, more = (
        (None, []) if "driver" in keep else judge_driver(targets, chart or installed, names)
    )
    refused += more + ([] if "toolkit" in keep else judge_toolkit(targets, names))
    if driver is not None:
        refused += judge_gpus(state.nodes, driver, names)
    nodes = [
        node_plan(
            n,
            None if "driver" in keep else targets.driver,
            None if "toolkit" in keep else targets.toolkit,
            targets.reboot,
        )
        for n in state.nodes
    ]
    chart_info, waves = _order(state, targets, installed, chart, nodes, size, floor, names)
    warnings += _warnings(state, nodes, targets, chart_info)
    return GpuStackPlan(
        str(kube), targets, chart_info, nodes, waves, size, floor, warnings, refused
    )


def _installed_chart(field_text: str) -> tuple[ddc.ChartVersion | None, list[str]]:
    """The installed NVIDIA chart release from Helm's chart field, and a warning when one
    is installed that is not NVIDIA's (it is not judged)."""
    if not field_text:
        return None, []
    name, version = ddc.parse_release_chart(field_text)
    if name not in ddc.NVIDIA_CHARTS or not version:
        return None, [f"the installed release's chart {field_text!r} is not NVIDIA's; not judged"]
    try:
        return ddc.parse_chart_version(version, "installed chart version"), []
    except ddc.DraDriverError as exc:
        return None, [f"the installed chart {field_text!r}: {exc.reason}; not judged"]


def _order(
    state: StackState,
    targets: StackTargets,
    installed: ddc.ChartVersion | None,
    chart: ddc.ChartVersion | None,
    nodes: list[NodePlan],
    size: int,
    floor: float,
    names: Mapping[str, str],
) -> tuple[dict[str, Any], list[uw.Wave]]:
    """The chart's entry (``current``, ``target``, ``steps``, ``position``: ``first``,
    ``last`` or ``none``) and the waves: the chart before the node batches when every
    node's driver now meets the target chart's minimum, else after them."""
    steps = ddc.chart_upgrade_steps(installed, chart) if chart is not None else []
    position = "none"
    if steps and chart is not None:
        minimum = nvd.parse_driver_version(ddc.chart_driver_minimum(chart, targets.compute_domains))
        old = [n.host for n in state.nodes if not _meets(n.driver, minimum)]
        position = "last" if old else "first"
    found = {n.host: n for n in state.nodes}
    # a node whose driver changes is drained; one whose toolkit alone changes is not
    drained = [
        NodeState(p.host, p.name, False, unschedulable=found[p.host].unschedulable,
                  gpu_devices=found[p.host].gpu_devices if p.driver[0] != p.driver[1] else 0)
        for p in nodes
        if p.changes
    ]  # fmt: skip
    everyone = [
        NodeState(n.host, n.name, False, gpu_devices=n.gpu_devices, unschedulable=n.unschedulable)
        for n in state.nodes
    ]
    budget = uw.gpu_budget(everyone, floor, names["min_gpu_available_percent"])
    batches = batches_under_floor(
        drained, size, budget.total, budget.cordoned, budget.required, floor, budget.name
    )
    waves: list[uw.Wave] = []
    if position == "first":
        waves.append(uw.Wave(0, "chart", [], 0, budget.available(0)))
    by_host = {n.host: n for n in nodes}
    for batch in batches:
        cost = sum(0 if b.unschedulable else b.gpu_devices for b in batch)
        index = len(waves)
        waves.append(uw.Wave(index, "nodes", [b.host for b in batch], cost, budget.available(cost)))
        for b in batch:
            by_host[b.host].wave = index
    if position == "last":
        waves.append(uw.Wave(len(waves), "chart", [], 0, budget.available(0)))
    current = f"{installed.chart_name} {installed.text}" if installed else (state.chart or None)
    info = {
        "current": current,
        "target": current
        if "chart" in targets.keep
        else (f"{chart.chart_name} {chart.text}" if chart else targets.chart),
        "steps": steps,
        "position": position,
    }
    return info, waves


def _meets(driver: str | None, minimum: nvd.DriverVersion) -> bool:
    try:
        return driver is not None and nvd.parse_driver_version(driver) >= minimum
    except nvd.PlanError:
        return False


def _warnings(
    state: StackState, nodes: Sequence[NodePlan], targets: StackTargets, chart: Mapping[str, Any]
) -> list[str]:
    out = []
    if chart.get("position") == "last":
        out.append(
            "the chart goes after the node batches: a node runs a driver older than the "
            "target chart's minimum until its batch"
        )
    unknown = sorted({n.host for n in state.nodes if "unknown" in n.architectures})
    if unknown:
        out.append(f"GPU architecture unknown on {', '.join(unknown)}: driver support not judged")
    return out


# --------------------------------------------------------------------------------------
# The planning playbook's inputs
# --------------------------------------------------------------------------------------


def state_from_facts(
    kubernetes_version: str,
    release: Mapping[str, Any] | None,
    hosts: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The stack state (the dict ``parse_state`` reads) from what the planning playbook
    read: ``release`` module ``helm_info``'s ``status`` (its ``chart`` field; None or empty
    when no release), ``hosts`` one per GPU node: ``host``, ``name`` (the Kubernetes node),
    ``facts`` (module ``nvidia_driver_facts``'s result), ``toolkit`` (``nvidia-ctk
    --version`` stdout; empty when absent); ``nodes`` the Node objects (``spec
    .unschedulable``). The GPU devices of a node are the GPUs on its PCI bus."""
    cordoned = {
        str((n.get("metadata") or {}).get("name")): bool((n.get("spec") or {}).get("unschedulable"))
        for n in nodes
        if isinstance(n, Mapping)
    }
    out = []
    for h in hosts:
        facts = h.get("facts") or {}
        name = str(h.get("name") or h.get("host"))
        smi = [v for v in facts.get("smi_driver_versions") or [] if str(v).strip()]
        out.append(
            {
                "host": str(h.get("host")),
                "name": name,
                "driver": facts.get("loaded_version") or (smi[0] if smi else None),
                "toolkit": toolkit_release(h.get("toolkit")),
                "architectures": list(facts.get("architectures") or []),
                "gpu_devices": len(facts.get("pci_gpus") or []),
                "unschedulable": cordoned.get(name, False),
                "mig": bool(h.get("mig")),
            }
        )
    chart = str((release or {}).get("chart") or "")
    return {"kubernetes_version": str(kubernetes_version), "chart": chart, "nodes": out}


def plan_from_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The plan's dict from the planning playbook's inputs: ``state`` (``parse_state``),
    ``targets`` (the fields of ``StackTargets``), ``batch_size``,
    ``min_gpu_available_percent``, ``input_names``. Raises GpuStackPlanError (an
    UpgradePlanError) for a state that cannot be read or bad batch or floor values."""
    t = inputs.get("targets") or {}
    # a release is judged and planned as written without the spaces around it (a node at
    # 580.159.04 is not planned to " 580.159.04 ")
    targets = StackTargets(
        driver=_text(t.get("driver")),
        toolkit=_text(t.get("toolkit")),
        chart=_text(t.get("chart")),
        branch=_text(t.get("branch")),
        reboot=_flag(t, "reboot", "nvidia_driver_reboot"),
        compute_domains=_flag(t, "compute_domains", "compute_domains"),
        accept_below_documented_minimum=_flag(
            t, "accept_below_documented_minimum", "dra_driver_accept_below_documented_minimum"
        ),
        keep=_keep(t.get("keep")),
    )
    plan = plan_gpu_stack(
        parse_state(inputs.get("state") or {}),
        targets,
        batch_size=inputs.get("batch_size", 1),
        min_gpu_available_percent=inputs.get("min_gpu_available_percent", 0),
        input_names=inputs.get("input_names") or None,
    )
    return plan.to_dict()


#: The parts of the GPU stack a run changes or keeps.
PARTS = ("driver", "toolkit", "chart")


def _keep(value: Any) -> tuple[str, ...]:
    """``targets.keep``: a list of ``PARTS``; raises GpuStackPlanError otherwise."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or any(v not in PARTS for v in value):
        written = repr(value)
        if len(written) > 200:  # a huge list is named by its start and its length
            written = f"{written[:200]}... ({len(value)} members)"
        raise GpuStackPlanError(
            f"the parts kept, {written}, are not a list of {', '.join(PARTS)}.",
            "give upgrade_gpu_stack_components as a list of driver, toolkit and chart.",
        )
    return tuple(dict.fromkeys(value))


def _text(value: Any) -> str:
    return str(value if value is not None else "").strip()


def _flag(targets: Mapping[str, Any], key: str, variable: str) -> bool:
    """A boolean input as Ansible reads it; raises GpuStackPlanError naming ``variable``."""
    value = ig.variable_bool(targets.get(key, False))
    if value is None:
        raise GpuStackPlanError(
            f"{variable}={targets.get(key)!r} is not a boolean.", "give true or false."
        )
    return value
