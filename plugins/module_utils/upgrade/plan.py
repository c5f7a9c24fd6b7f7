# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The rolling-upgrade planner: from what a cluster runs to the steps that bring it to a
target Kubernetes release, one minor at a time, in lockstep.

Pure: no I/O. ``build_plan`` turns the nodes as found (``upgrade.nodes.NodeState``) into
an ``UpgradePlan`` (``to_dict`` gives the JSON document of ``gpufleet upgrade --plan
--json`` and of the ``upgrade_plan`` module); the nodes of each step go in waves and
batches (``upgrade.waves``), the control plane's ``kubeadm upgrade apply`` with an
UpgradeConfiguration from 1.31 (``upgrade.kubeadm_config``).

Rules and their sources:

* kubeadm upgrades one minor at a time: "Skipping MINOR versions when upgrading is
  unsupported" (kubernetes/website ``docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade.md``).
  A path over several minors needs one release per intermediate minor (``via``);
  without it the plan is refused rather than a minor skipped. Downgrades are refused.
* Order per step (same page, and the version-skew policy
  ``content/en/releases/version-skew-policy.md``): the first control-plane node runs
  ``kubeadm upgrade apply``, the other control-plane nodes ``kubeadm upgrade node``;
  kubelets only once every kube-apiserver runs the step's release (a kubelet must not be
  newer than any kube-apiserver, ``dra.kubelet_upgrade_allowed``); workers
  last, in batches.
* Packages: pkgs.k8s.io has one repository per minor
  (``https://pkgs.k8s.io/core:/stable:/v1.37/deb/``) and versions ``1.37.2-1.1``
  (``docs/tasks/administer-cluster/kubeadm/change-package-repository.md``).
* DRA settings per step come from the version model (``dra.plan_transition``:
  the difference between the component settings of the two releases) and, for what the
  cluster holds today, ``dra.sanitize`` (entries the target refuses to start
  with). Such an entry that the upgrade does not change itself (a gate outside the DRA
  gates, in a kubeadm ConfigMap or, with ``host_facts``, in a host's file or process)
  blocks the step (``upgrade.blocking``, ``Step.blocking``, ``UpgradePlan.blocking``).

Batches and the GPU floor (``batch_size``, ``min_gpu_available_percent``): see
``upgrade.waves``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    metric_series as dra_metric_series,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import sanitize as dra_sanitize
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    transition as dra_transition,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.kubernetes_facts import (
    UPGRADE_MIN_MINOR,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import blocking as ub
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.input import (
    DEFAULT_PACKAGE_REVISION,
    DEFAULT_REPO_URL,
    INPUT_NAMES,
    UpgradePlanError,
    _target,
    package_version,
    parse_batch_size,
    parse_min_gpu_percent,
    parse_via,
    repo_url,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.kubeadm_config import (
    apply_command,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.nodes import (
    NodeState,
    needs,
    versions_of,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.waves import (
    GpuBudget,
    NodeStep,
    Wave,
    control_plane_waves,
    gpu_budget,
    worker_waves,
)


@dataclass
class Step:
    """One minor (or patch) step: ``version`` the release it ends at, ``source`` the
    release the control plane runs before it."""

    source: str
    version: str
    repo_url: str
    packages: dict[str, str]
    kubeadm_api: dict[str, Any]
    upgrade_configuration: bool
    apply_host: str | None
    apply_command: list[str]
    transition: dict[str, Any]
    sanitize: dict[str, dict[str, Any]]
    nodes: list[NodeStep]
    waves: list[Wave]
    serial: list[int]
    warnings: list[str] = field(default_factory=list)
    blocking: list[ub.Blocking] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "version": self.version,
            "minor": dra_core.parse_version(self.version).minor_version,
            "repo_url": self.repo_url,
            "packages": dict(self.packages),
            "kubeadm_api": dict(self.kubeadm_api),
            "upgrade_configuration": self.upgrade_configuration,
            "apply_host": self.apply_host,
            "apply_command": list(self.apply_command),
            "transition": self.transition,
            "sanitize": self.sanitize,
            "nodes": [n.to_dict() for n in self.nodes],
            "waves": [w.to_dict() for w in self.waves],
            "worker_serial": list(self.serial),
            "warnings": list(self.warnings),
            "blocking": [b.to_dict() for b in self.blocking],
        }


@dataclass
class UpgradePlan:
    """The whole upgrade: target, the nodes as found, the steps (empty: nothing to do)."""

    target: str
    nodes: list[NodeState]
    steps: list[Step]
    batch_size: int
    min_gpu_available_percent: float
    warnings: list[str] = field(default_factory=list)

    @property
    def up_to_date(self) -> bool:
        return not self.steps

    @property
    def blocking(self) -> list[ub.Blocking]:
        """What stops the upgrade before any host is changed, every step's."""
        return [b for s in self.steps for b in s.blocking]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "up_to_date": self.up_to_date,
            "path": [s.version for s in self.steps],
            "batch_size": self.batch_size,
            "min_gpu_available_percent": self.min_gpu_available_percent,
            "nodes": [n.to_dict() for n in self.nodes],
            "steps": [s.to_dict() for s in self.steps],
            "warnings": list(self.warnings),
            "blocking": [b.to_dict() for b in self.blocking],
        }


# --------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------


def _path(
    low: dra_core.KubeVersion, target: dra_core.KubeVersion, via: Mapping[int, dra_core.KubeVersion]
) -> list[dra_core.KubeVersion]:
    steps: list[dra_core.KubeVersion] = []
    for minor in range(low.minor + 1, target.minor):
        if minor not in via:
            chain = " -> ".join(f"1.{m}" for m in range(low.minor, target.minor + 1))
            raise UpgradePlanError(
                f"the cluster runs {low} and --to is {target}: the path {chain} needs a "
                f"1.{minor} release, and skipping minor 1.{minor} is unsupported by kubeadm.",
                f"name the 1.{minor} release to pass through with --via 1.{minor}.PATCH "
                "(upgrade_via), or upgrade to 1.{} first.".format(minor),
            )
        steps.append(via[minor])
    steps.append(target)
    return steps


def _settings_of(plan: dra_settings.ComponentPlan) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for c in dra_core.COMPONENTS:
        s = plan.components[c]
        out[c] = {
            "feature_gates": dict(s.feature_gates),
            "runtime_config": sorted(s.runtime_config) if c == dra_core.APISERVER else [],
        }
    return out


def _sanitize_all(
    current: Mapping[str, Mapping[str, Any]], version: dra_core.KubeVersion
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Sanitize report per component, and the settings that survive it."""
    reports: dict[str, dict[str, Any]] = {}
    kept: dict[str, dict[str, Any]] = {}
    for c in dra_core.COMPONENTS:
        entry = current.get(c) or {}
        gates = entry.get("feature_gates") or {}
        rc = entry.get("runtime_config") or []
        report = dra_sanitize.sanitize(gates, rc, version, component=c)
        reports[c] = {
            "remove": [f.to_dict() for f in report.must_remove],
            "advice": [f.to_dict() for f in report.advice],
            "not_checked": [f.entry for f in report.findings if f.action == "keep"],
        }
        kept[c] = {
            "feature_gates": dict(report.gates),
            "runtime_config": list(report.runtime_config),
        }
    return reports, kept


def build_plan(
    target: str,
    nodes: Sequence[NodeState],
    *,
    batch_size: int | str = 1,
    min_gpu_available_percent: int | float | str = 0,
    via: Sequence[str] = (),
    features: Sequence[str] = (),
    gates: Mapping[str, bool] | None = None,
    current_settings: Mapping[str, Mapping[str, Any]] | None = None,
    package_revision: str = DEFAULT_PACKAGE_REVISION,
    repo_url_template: str = DEFAULT_REPO_URL,
    ignore_preflight_errors: Sequence[str] = (),
    resume_hosts: Sequence[str] = (),
    input_names: Mapping[str, str] | None = None,
    host_facts: Mapping[str, Any] | None = None,
) -> UpgradePlan:
    """Plan the upgrade of ``nodes`` (inventory order) to ``target``.

    ``via``: releases for the minors between the cluster's and the target's
    (``["1.36.3"]`` to go 1.35 -> 1.36.3 -> 1.37.2); ``features``/``gates``: DRA wishes as
    for ``dra.plan_components``; ``current_settings``: per component
    (``kube-apiserver`` ... ``kubelet``) ``{"feature_gates": {name: bool},
    "runtime_config": ["g/v=true"]}`` as the kubeadm ConfigMaps hold them today;
    ``resume_hosts``: inventory hosts that an earlier run to ``target`` drained and left
    cordoned (the upgrade report's ``cordoned_by_upgrade``). Such a host that already runs
    ``target`` is not skipped but resumed in the last step (``NodeStep.resume``: its
    kubelet part again, then uncordon); one that does not is upgraded as usual.
    ``input_names``: how the messages name ``target``, ``via``, ``batch_size`` and
    ``min_gpu_available_percent`` (``INPUT_NAMES`` by default; the CLI passes the option
    when the value came from one, e.g. ``--batch-size``). ``host_facts``: host -> the
    ``facts`` of module ``dra_gate_audit_facts`` (None: not read); every host's files and
    processes are judged at each step's target too (``upgrade.blocking.host_blocking``).

    Returns an UpgradePlan with one Step per release on the path (none when every
    component already runs ``target`` and no host is to be resumed). Raises
    UpgradePlanError for a target outside the model, a downgrade, a skipped minor, a
    control plane with no kube-apiserver version, bad batch or floor values, or a node
    that alone breaks the GPU floor; VersionModelError for malformed ``host_facts``;
    VersionParseError for a malformed version.
    """
    names = {**INPUT_NAMES, **dict(input_names or {})}
    tv = _target(target, names["target"])
    if not nodes:
        raise UpgradePlanError("the inventory has no nodes to upgrade.", "check -i INVENTORY.")
    cps = [n for n in nodes if n.control_plane]
    if not cps:
        raise UpgradePlanError(
            "no control-plane node in the inventory (group kube_control_plane).",
            "put the control-plane nodes in kube_control_plane.",
        )
    floor = parse_min_gpu_percent(min_gpu_available_percent, names["min_gpu_available_percent"])
    workers = [n for n in nodes if not n.control_plane]
    size = parse_batch_size(batch_size, max(1, len(workers)), names["batch_size"])
    via_versions = parse_via(via, tv, names["via"])
    facts = ub.parse_host_facts(host_facts, [n.host for n in nodes])
    low, warnings = _lowest_version(nodes, tv)
    apis, skew = _apiserver_versions(cps, nodes)
    warnings = ub.unread_warnings(facts) + warnings + skew
    _check_range(low, tv, via_versions, names["via"])
    resume = [h for h in resume_hosts if h in {n.host for n in nodes}]
    if low >= tv and not resume:
        return UpgradePlan(str(tv), list(nodes), [], size, floor, warnings)
    ctx = _StepContext(
        target=tv,
        batch_size=size,
        budget=gpu_budget(nodes, floor, names["min_gpu_available_percent"]),
        features=list(features),
        gates=dict(gates or {}),
        package_revision=package_revision,
        repo_url_template=repo_url_template,
        ignore_preflight_errors=list(ignore_preflight_errors),
        resume=resume,
        facts=facts,
    )
    settings = {c: dict(v) for c, v in (current_settings or {}).items()}
    state = {n.host: n for n in nodes}
    source = min(dra_core.parse_version(a) for a in apis)
    seen: set[tuple] = set()
    steps: list[Step] = []
    for step_version in _path(low, tv, via_versions) if low.minor < tv.minor else [tv]:
        step, settings = _plan_step(ctx, step_version, source, state, settings, seen)
        steps.append(step)
        state = _after_step(state, step_version)
        source = step_version
    return UpgradePlan(str(tv), list(nodes), steps, size, floor, warnings)


# The named steps of build_plan: pure functions of the nodes as found and the inputs.


def _lowest_version(
    nodes: Sequence[NodeState], target: dra_core.KubeVersion
) -> tuple[dra_core.KubeVersion, list[str]]:
    """The lowest version any component of ``nodes`` runs, and a warning per version not
    known. Raises UpgradePlanError for a component newer than ``target`` (a downgrade)."""
    warnings: list[str] = []
    versions: list[dra_core.KubeVersion] = []
    for n in nodes:
        for component, v in versions_of(n):
            versions.append(v)
            if v > target:
                raise UpgradePlanError(
                    f"{component} on {n.host} runs {v}, newer than --to {target}; Kubernetes "
                    "does not support downgrades.",
                    f"give --to {v} or newer.",
                )
        if n.kubelet is None:
            warnings.append(f"{n.host}: the kubelet version is unknown (node not registered?)")
        if n.kubeadm is None:
            warnings.append(f"{n.host}: kubeadm version unknown (not read from the host)")
    return (min(versions) if versions else target), warnings


def _apiserver_versions(
    cps: Sequence[NodeState], nodes: Sequence[NodeState]
) -> tuple[list[str], list[str]]:
    """The kube-apiserver versions of the control-plane nodes and a warning per version-skew
    violation now (``dra.check_skew``). Raises UpgradePlanError when no
    control-plane node shows one."""
    apis = [n.apiserver for n in cps if n.apiserver]
    if not apis:
        raise UpgradePlanError(
            "no kube-apiserver version found on the control-plane nodes "
            f"({', '.join(n.name for n in cps)}).",
            "check that the kube-apiserver static pods run and are labelled "
            "component=kube-apiserver, and that kubernetes_node_name matches the node names.",
        )
    kubelets = [n.kubelet for n in nodes if n.kubelet]
    return apis, [
        f"version skew now: {v.component} {v.version} vs kube-apiserver {v.apiserver}: {v.reason}"
        for v in dra_skew.check_skew({dra_core.APISERVER: apis, dra_core.KUBELET: kubelets})
    ]


def _check_range(
    low: dra_core.KubeVersion,
    target: dra_core.KubeVersion,
    via_versions: Mapping[int, dra_core.KubeVersion],
    via_name: str,
) -> None:
    """The cluster is at 1.UPGRADE_MIN_MINOR or later, and each release to pass through is
    of a minor between the cluster's and the target's. Raises UpgradePlanError (naming
    ``via_name`` for a release to pass through)."""
    if low.minor < UPGRADE_MIN_MINOR:
        raise UpgradePlanError(
            f"the cluster runs {low} (lowest component version), below 1.{UPGRADE_MIN_MINOR}, "
            "the oldest release the upgrade covers.",
            f"bring every component to 1.{UPGRADE_MIN_MINOR} with kubeadm first.",
        )
    for minor, v in via_versions.items():
        if not low.minor < minor < target.minor:
            raise UpgradePlanError(
                f"{via_name} {v} is not between the cluster ({low.minor_version}) and --to "
                f"({target.minor_version}).",
                "give only releases of the minors in between.",
            )


@dataclass(frozen=True)
class _StepContext:
    """What every step of one plan shares (build_plan's judged inputs)."""

    target: dra_core.KubeVersion
    batch_size: int
    budget: GpuBudget
    features: list[str]
    gates: dict[str, bool]
    package_revision: str
    repo_url_template: str
    ignore_preflight_errors: list[str]
    resume: list[str]
    facts: Any


def _plan_step(
    ctx: _StepContext,
    version: dra_core.KubeVersion,
    control_plane_version: dra_core.KubeVersion,
    state: Mapping[str, NodeState],
    settings: Mapping[str, Mapping[str, Any]],
    seen: set[tuple],
) -> tuple[Step, dict[str, dict[str, Any]]]:
    """One step to ``version``: the DRA transition, what blocks it (each entry once over
    the plan: ``seen`` is updated), the waves, the kubeadm command. Returns the step and
    the DRA settings the components hold after it. Raises UpgradePlanError for a node that
    breaks the GPU floor."""
    source = control_plane_version
    if source.minor < version.minor - 1:
        source = dra_core.KubeVersion(1, version.minor - 1)
    transition = dra_transition.plan_transition(str(source), str(version), ctx.features, ctx.gates)
    reports, kept = _sanitize_all(settings, version)
    found = ub.configmap_blocking(reports, version, transition)
    found += ub.host_blocking(ctx.facts, version, transition)
    blocking = ub.with_fixes(b for b in found if b.key() not in seen)
    seen.update(b.key() for b in blocking)
    resumed = {h for h in ctx.resume if version == ctx.target and not needs(state[h], version)}
    nodes = list(state.values())
    pkg = package_version(str(version), ctx.package_revision)
    cp_steps, waves, apply_host, warnings = control_plane_waves(
        version, nodes, resumed, ctx.budget, pkg
    )
    w_steps, w_waves, serial = worker_waves(
        version, nodes, resumed, ctx.budget, ctx.batch_size, pkg, len(waves)
    )
    uses_config, command = apply_command(version, ctx.ignore_preflight_errors)
    api_from, api_to = dra_api.kubeadm_config_api(source), dra_api.kubeadm_config_api(version)
    warnings += [
        f"{bad.version} is a known-bad release ({bad.component}): {bad.problem}; {bad.advice}"
        for bad in dra_skew.known_bad_releases(version)
    ]
    warnings.extend(transition.warnings)
    warnings.extend(metric_series_warnings(source.minor, version.minor))
    step = Step(
        source=str(source),
        version=str(version),
        repo_url=repo_url(str(version), ctx.repo_url_template),
        packages=dict.fromkeys(("kubeadm", "kubelet", "kubectl"), pkg),
        kubeadm_api={
            "from": api_from.preferred,
            "to": api_to.preferred,
            "accepted_by_target": list(api_to.accepted),
        },
        upgrade_configuration=uses_config,
        apply_host=apply_host,
        apply_command=command,
        transition=transition.to_dict(),
        sanitize=reports,
        nodes=cp_steps + w_steps,
        waves=waves + w_waves,
        serial=serial,
        warnings=warnings,
        blocking=blocking,
    )
    return step, _settings_after(kept, transition)


def metric_series_warnings(from_minor: int, to_minor: int) -> list[str]:
    """One warning per series a component serves on 1.``from_minor`` and no longer on
    1.``to_minor``, naming the series that replaces it (``dra.metric_series``); none when
    either minor is outside that table."""
    known = dra_metric_series.known_minors()
    if from_minor not in known or to_minor not in known:
        return []
    out = []
    for change in dra_metric_series.renamed_between(from_minor, to_minor):
        if change.old is None:
            continue
        read = (
            f"read {change.new}{change.new_selector}"
            if change.new
            else f"1.{to_minor} serves no series in its place"
        )
        out.append(
            f"{change.component} of 1.{to_minor} no longer serves the metric {change.old}: "
            f"dashboards and alerts that read {change.old} see nothing after the upgrade; {read}"
        )
    return out


def _settings_after(
    kept: Mapping[str, Mapping[str, Any]], transition: dra_transition.TransitionPlan
) -> dict[str, dict[str, Any]]:
    """What the components hold after a step: what survived sanitize (``kept``), without
    the gates the target forbids, then the target's planned gates and runtime-config."""
    planned = _settings_of(transition.target)
    out: dict[str, dict[str, Any]] = {}
    for c in dra_core.COMPONENTS:
        fg = dict(kept[c]["feature_gates"])
        for name in transition.target.components[c].forbidden_gates:
            fg.pop(name, None)
        fg.update(planned[c]["feature_gates"])
        rc = [e for e in kept[c]["runtime_config"] if e not in planned[c]["runtime_config"]]
        out[c] = {
            "feature_gates": fg,
            "runtime_config": sorted(set(rc) | set(planned[c]["runtime_config"])),
        }
    return out


def _after_step(
    state: Mapping[str, NodeState], version: dra_core.KubeVersion
) -> dict[str, NodeState]:
    """The nodes after a step: every component runs ``version`` (an apiserver only on the
    control-plane nodes)."""
    v = str(version)
    return {
        h: NodeState(
            n.host,
            n.name,
            n.control_plane,
            v,
            v if n.control_plane else None,
            v,
            n.gpu_devices,
            n.unschedulable,
            n.ready,
        )
        for h, n in state.items()
    }
