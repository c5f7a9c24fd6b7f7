# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The rolling-upgrade planner: from what a cluster runs to the steps that bring it to a
target Kubernetes release, one minor at a time, in lockstep.

Pure: no I/O. ``nodes_from_objects`` turns what the API returns (one list of Nodes, one
list of kube-system Pods, one list of ResourceSlices) plus the kubeadm version read on
each host into ``NodeState`` records; ``build_plan`` turns those into an ``UpgradePlan``
(``to_dict`` gives the JSON document of ``gpufleet upgrade --plan --json`` and of the
``upgrade_plan`` module).

Rules and their sources:

* kubeadm upgrades one minor at a time: "Skipping MINOR versions when upgrading is
  unsupported" (kubernetes/website ``docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade.md``).
  A path over several minors needs one release per intermediate minor (``via``);
  without it the plan is refused rather than a minor skipped. Downgrades are refused.
* Order per step (same page, and the version-skew policy
  ``content/en/releases/version-skew-policy.md``): the first control-plane node runs
  ``kubeadm upgrade apply``, the other control-plane nodes ``kubeadm upgrade node``;
  kubelets only once every kube-apiserver runs the step's release (a kubelet must not be
  newer than any kube-apiserver, ``dra_versions.kubelet_upgrade_allowed``); workers
  last, in batches.
* Packages: pkgs.k8s.io has one repository per minor
  (``https://pkgs.k8s.io/core:/stable:/v1.37/deb/``) and versions ``1.37.2-1.1``
  (``docs/tasks/administer-cluster/kubeadm/change-package-repository.md``).
* kubeadm reads an ``UpgradeConfiguration`` (``kubeadm upgrade apply --config``) from
  ``kubeadm.k8s.io/v1beta4``, i.e. from 1.31
  (``cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go``; ``--config`` mixes only with
  ``--yes``, ``--ignore-preflight-errors``, ``--dry-run`` and ``--skip-*``:
  ``cmd/kubeadm/app/apis/kubeadm/validation/validation.go`` ``isAllowedFlag``).
* DRA settings per step come from the version model (``dra_versions.plan_transition``:
  the difference between the component settings of the two releases) and, for what the
  cluster holds today, ``dra_versions.sanitize`` (entries the target refuses to start
  with). Such an entry that the upgrade does not change itself (a gate outside the DRA
  gates, in a kubeadm ConfigMap or, with ``host_facts``, in a host's file or process)
  blocks the step (``upgrade_blocking``, ``Step.blocking``, ``UpgradePlan.blocking``).

Batches: ``batch_size`` is a number of nodes or a percentage of the workers to upgrade
(rounded down, at least 1, as Ansible's ``serial``). A batch is also cut short so that
the GPU devices left schedulable (nodes neither in the batch nor cordoned before) stay at
or above ``min_gpu_available_percent`` of all GPU devices of the cluster. A node that
alone would break the floor makes the plan refuse.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils import upgrade_blocking as ub
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade_input import (
    DEFAULT_GPU_DRIVER,
    DEFAULT_PACKAGE_REVISION,
    DEFAULT_REPO_URL,
    INPUT_NAMES,
    UPGRADE_MAX_MINOR,
    UPGRADE_MIN_MINOR,
    UpgradePlanError,
    _target,
    judge_input,
    package_version,
    parse_batch_size,
    parse_min_gpu_percent,
    parse_release,
    parse_target,
    parse_via,
    repo_url,
)

__all__ = [
    "DEFAULT_GPU_DRIVER",
    "DEFAULT_PACKAGE_REVISION",
    "DEFAULT_REPO_URL",
    "INPUT_NAMES",
    "UPGRADE_MAX_MINOR",
    "UPGRADE_MIN_MINOR",
    "NodeState",
    "NodeStep",
    "Step",
    "UpgradePlan",
    "UpgradePlanError",
    "Wave",
    "build_plan",
    "judge_input",
    "nodes_from_objects",
    "package_version",
    "parse_batch_size",
    "parse_min_gpu_percent",
    "parse_release",
    "parse_target",
    "parse_via",
    "repo_url",
    "upgrade_configuration",
]

#: kubeadm takes an UpgradeConfiguration from this minor (kubeadm.k8s.io/v1beta4).
UPGRADE_CONFIGURATION_SINCE = 31

FIRST_CONTROL_PLANE = "first-control-plane"
CONTROL_PLANE = "control-plane"
WORKER = "worker"
RESUME_REASON = "at the target, left cordoned by an earlier run: resumed"


# --------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeState:
    """One node as the cluster and its host report it.

    ``host``: inventory name; ``name``: Kubernetes node name; versions are plain
    (``"1.36.3"``) or None when unknown (``apiserver`` is None on workers);
    ``gpu_devices``: devices of the GPU driver published for the node (ResourceSlices);
    ``unschedulable``: cordoned before the upgrade starts.
    """

    host: str
    name: str
    control_plane: bool
    kubelet: str | None = None
    apiserver: str | None = None
    kubeadm: str | None = None
    gpu_devices: int = 0
    unschedulable: bool = False
    ready: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "name": self.name,
            "control_plane": self.control_plane,
            "kubelet": self.kubelet,
            "apiserver": self.apiserver,
            "kubeadm": self.kubeadm,
            "gpu_devices": self.gpu_devices,
            "unschedulable": self.unschedulable,
            "ready": self.ready,
        }


_TAG_RE = re.compile(r":v?(\d+\.\d+\.\d+[0-9A-Za-z.\-+]*)$")


def _plain(version: str | None) -> str | None:
    if not version:
        return None
    v = dv.parse_version(str(version))
    return str(v)


def _image_version(image: str) -> str | None:
    match = _TAG_RE.search(image or "")
    return match.group(1) if match else None


def _count_devices(slices: Iterable[Mapping[str, Any]], driver: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if not node or spec.get("driver") != driver:
            continue
        out[node] = out.get(node, 0) + len(spec.get("devices") or [])
    return out


def nodes_from_objects(
    hosts: Sequence[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]] = (),
    kubeadm_versions: Mapping[str, str | None] | None = None,
    gpu_driver: str = DEFAULT_GPU_DRIVER,
) -> list[NodeState]:
    """Build NodeState records in inventory order.

    ``hosts``: ``[{host, name, control_plane}]`` from the inventory (``name`` is the
    Kubernetes node name, host var ``kubernetes_node_name``); ``nodes``: Node objects as
    dicts (``status.nodeInfo.kubeletVersion``, ``spec.unschedulable``, the Ready
    condition); ``pods``: kube-system Pods (the ``kube-apiserver`` static pods, label
    ``component=kube-apiserver``: version from the image tag, node from
    ``spec.nodeName``); ``slices``: ResourceSlices (devices of ``gpu_driver`` per
    ``spec.nodeName``); ``kubeadm_versions``: host -> ``kubeadm version -o short`` output.

    Raises UpgradePlanError when an inventory host has no Node object.
    """
    by_name = {(n.get("metadata") or {}).get("name"): n for n in nodes}
    apiservers: dict[str, str] = {}
    for p in pods:
        meta = p.get("metadata") or {}
        if (meta.get("labels") or {}).get("component") != "kube-apiserver":
            continue
        node = (p.get("spec") or {}).get("nodeName")
        containers = (p.get("spec") or {}).get("containers") or []
        image = next(
            (c.get("image", "") for c in containers if c.get("name") == "kube-apiserver"),
            containers[0].get("image", "") if containers else "",
        )
        version = _image_version(image)
        if node and version:
            apiservers[node] = version
    devices = _count_devices(slices, gpu_driver)
    kubeadm_versions = kubeadm_versions or {}
    out: list[NodeState] = []
    for h in hosts:
        name = h["name"]
        node = by_name.get(name)
        if node is None:
            raise UpgradePlanError(
                f"inventory host {h['host']!r} names Kubernetes node {name!r}, which the "
                "cluster does not have.",
                "set kubernetes_node_name of the host to its node name (kubectl get nodes) "
                "or remove the host from the inventory.",
            )
        status = node.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        out.append(
            NodeState(
                host=h["host"],
                name=name,
                control_plane=bool(h.get("control_plane")),
                kubelet=_plain((status.get("nodeInfo") or {}).get("kubeletVersion")),
                apiserver=_plain(apiservers.get(name)),
                kubeadm=_plain(kubeadm_versions.get(h["host"])),
                gpu_devices=devices.get(name, 0),
                unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
                ready=conditions.get("Ready") == "True",
            )
        )
    return out


def upgrade_configuration(
    version: str,
    *,
    ignore_preflight_errors: Sequence[str] = (),
    image_pull_policy: str = "",
    etcd_upgrade: bool = True,
    certificate_renewal: bool = True,
) -> dict[str, Any] | None:
    """The ``kubeadm.k8s.io/v1beta4`` UpgradeConfiguration for ``kubeadm upgrade apply`` and
    ``kubeadm upgrade node --config`` at ``version``, or None before 1.31 (flags only).
    Field names from ``cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go``."""
    v = dv.parse_version(version)
    if v.minor < UPGRADE_CONFIGURATION_SINCE:
        return None
    common: dict[str, Any] = {
        "certificateRenewal": certificate_renewal,
        "etcdUpgrade": etcd_upgrade,
    }
    if ignore_preflight_errors:
        common["ignorePreflightErrors"] = list(ignore_preflight_errors)
    if image_pull_policy:
        common["imagePullPolicy"] = image_pull_policy
    # kubeadm refuses a pre-release target unless told (phases/upgrade/policy.go)
    unstable = {"allowExperimentalUpgrades": True} if v.pre else {}
    return {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "UpgradeConfiguration",
        "apply": {"kubernetesVersion": f"v{v}", **unstable, **common},
        "node": dict(common),
        "plan": {
            "kubernetesVersion": f"v{v}",
            **unstable,
            "etcdUpgrade": etcd_upgrade,
            **(
                {"ignorePreflightErrors": list(ignore_preflight_errors)}
                if ignore_preflight_errors
                else {}
            ),
        },
    }


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------


@dataclass
class NodeStep:
    """What one node does in a step: ``role`` (first-control-plane, control-plane, worker),
    ``wave`` index, ``actions`` in order, or ``skip`` with the reason. ``resume``: the node
    already runs the step's release but an earlier run of this step drained it and left it
    cordoned (``reason`` says so); its kubelet part runs again and it is uncordoned."""

    host: str
    name: str
    role: str
    wave: int
    actions: list[str]
    skip: bool = False
    reason: str = ""
    gpu_devices: int = 0
    resume: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "name": self.name,
            "role": self.role,
            "wave": self.wave,
            "actions": list(self.actions),
            "skip": self.skip,
            "reason": self.reason,
            "gpu_devices": self.gpu_devices,
            "resume": self.resume,
        }


@dataclass
class Wave:
    """Nodes upgraded together; ``gpu_available_percent``: GPU devices left schedulable
    while they are drained (100.0 when the cluster has none)."""

    index: int
    kind: str
    hosts: list[str]
    gpu_devices_drained: int
    gpu_available_percent: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "hosts": list(self.hosts),
            "gpu_devices_drained": self.gpu_devices_drained,
            "gpu_available_percent": self.gpu_available_percent,
        }


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
            "minor": dv.parse_version(self.version).minor_version,
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


def _versions_of(node: NodeState) -> list[tuple[str, dv.KubeVersion]]:
    out = []
    for component in ("kubelet", "apiserver", "kubeadm"):
        raw = getattr(node, component)
        if raw:
            out.append((component, dv.parse_version(raw, f"{node.host} {component} version")))
    return out


def _path(
    low: dv.KubeVersion, target: dv.KubeVersion, via: Mapping[int, dv.KubeVersion]
) -> list[dv.KubeVersion]:
    steps: list[dv.KubeVersion] = []
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


def _settings_of(plan: dv.ComponentPlan) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for c in dv.COMPONENTS:
        s = plan.components[c]
        out[c] = {
            "feature_gates": dict(s.feature_gates),
            "runtime_config": sorted(s.runtime_config) if c == dv.APISERVER else [],
        }
    return out


def _sanitize_all(
    current: Mapping[str, Mapping[str, Any]], version: dv.KubeVersion
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Sanitize report per component, and the settings that survive it."""
    reports: dict[str, dict[str, Any]] = {}
    kept: dict[str, dict[str, Any]] = {}
    for c in dv.COMPONENTS:
        entry = current.get(c) or {}
        gates = entry.get("feature_gates") or {}
        rc = entry.get("runtime_config") or []
        report = dv.sanitize(gates, rc, version, component=c)
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


def _batches(
    workers: list[NodeState],
    batch_size: int,
    total_gpu: int,
    cordoned_gpu: int,
    required_gpu: int,
    floor: float,
    floor_name: str = "upgrade_min_gpu_available_percent",
) -> list[list[NodeState]]:
    allowance = total_gpu - required_gpu - cordoned_gpu
    batches: list[list[NodeState]] = []
    current: list[NodeState] = []
    used = 0
    for n in workers:
        cost = 0 if n.unschedulable else n.gpu_devices
        if total_gpu and cost > allowance:
            raise UpgradePlanError(
                f"{floor_name}={floor:g}: draining {n.name} alone "
                f"({n.gpu_devices} GPU devices) leaves {total_gpu - cordoned_gpu - cost} of "
                f"{total_gpu} schedulable, below the floor of {required_gpu}.",
                f"lower {floor_name}, or uncordon nodes cordoned by hand "
                "so that more GPU capacity stays schedulable.",
            )
        if current and (len(current) >= batch_size or used + cost > allowance):
            batches.append(current)
            current, used = [], 0
        current.append(n)
        used += cost
    if current:
        batches.append(current)
    return batches


def _needs(node: NodeState, version: dv.KubeVersion) -> bool:
    return any(v < version for _, v in _versions_of(node))


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
    for ``dra_versions.plan_components``; ``current_settings``: per component
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
    processes are judged at each step's target too (``upgrade_blocking.host_blocking``).

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
        budget=_gpu_budget(nodes, floor, names["min_gpu_available_percent"]),
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
    source = min(dv.parse_version(a) for a in apis)
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
    nodes: Sequence[NodeState], target: dv.KubeVersion
) -> tuple[dv.KubeVersion, list[str]]:
    """The lowest version any component of ``nodes`` runs, and a warning per version not
    known. Raises UpgradePlanError for a component newer than ``target`` (a downgrade)."""
    warnings: list[str] = []
    versions: list[dv.KubeVersion] = []
    for n in nodes:
        for component, v in _versions_of(n):
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
    violation now (``dra_versions.check_skew``). Raises UpgradePlanError when no
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
        for v in dv.check_skew({dv.APISERVER: apis, dv.KUBELET: kubelets})
    ]


def _check_range(
    low: dv.KubeVersion,
    target: dv.KubeVersion,
    via_versions: Mapping[int, dv.KubeVersion],
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
class _GpuBudget:
    """GPU devices of the cluster (``total``), those cordoned before the upgrade, and the
    floor: ``required`` devices stay schedulable (``floor`` percent, named ``name``)."""

    total: int
    cordoned: int
    required: int
    floor: float
    name: str

    def available(self, drained: int) -> float:
        """Percent of the GPU devices schedulable while ``drained`` more are drained."""
        if not self.total:
            return 100.0
        return round(100.0 * (self.total - self.cordoned - drained) / self.total, 1)


def _gpu_budget(nodes: Sequence[NodeState], floor: float, name: str) -> _GpuBudget:
    total = sum(n.gpu_devices for n in nodes)
    cordoned = sum(n.gpu_devices for n in nodes if n.unschedulable)
    return _GpuBudget(total, cordoned, math.ceil(total * floor / 100), floor, name)


@dataclass(frozen=True)
class _StepContext:
    """What every step of one plan shares (build_plan's judged inputs)."""

    target: dv.KubeVersion
    batch_size: int
    budget: _GpuBudget
    features: list[str]
    gates: dict[str, bool]
    package_revision: str
    repo_url_template: str
    ignore_preflight_errors: list[str]
    resume: list[str]
    facts: Any


def _plan_step(
    ctx: _StepContext,
    version: dv.KubeVersion,
    control_plane_version: dv.KubeVersion,
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
        source = dv.KubeVersion(1, version.minor - 1)
    transition = dv.plan_transition(str(source), str(version), ctx.features, ctx.gates)
    reports, kept = _sanitize_all(settings, version)
    found = ub.configmap_blocking(reports, version, transition)
    found += ub.host_blocking(ctx.facts, version, transition)
    blocking = ub.with_fixes(b for b in found if b.key() not in seen)
    seen.update(b.key() for b in blocking)
    resumed = {h for h in ctx.resume if version == ctx.target and not _needs(state[h], version)}
    nodes = list(state.values())
    cp_steps, waves, apply_host, warnings = _control_plane_waves(ctx, version, nodes, resumed)
    w_steps, w_waves, serial = _worker_waves(ctx, version, nodes, resumed, len(waves))
    uses_config, command = _apply_command(version, ctx.ignore_preflight_errors)
    api_from, api_to = dv.kubeadm_config_api(source), dv.kubeadm_config_api(version)
    warnings += [
        f"{bad.version} is a known-bad release ({bad.component}): {bad.problem}; {bad.advice}"
        for bad in dv.known_bad_releases(version)
    ]
    warnings.extend(transition.warnings)
    pkg = package_version(str(version), ctx.package_revision)
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


def _settings_after(
    kept: Mapping[str, Mapping[str, Any]], transition: dv.TransitionPlan
) -> dict[str, dict[str, Any]]:
    """What the components hold after a step: what survived sanitize (``kept``), without
    the gates the target forbids, then the target's planned gates and runtime-config."""
    planned = _settings_of(transition.target)
    out: dict[str, dict[str, Any]] = {}
    for c in dv.COMPONENTS:
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


def _control_plane_waves(
    ctx: _StepContext,
    version: dv.KubeVersion,
    nodes: Sequence[NodeState],
    resumed: set[str],
) -> tuple[list[NodeStep], list[Wave], str | None, list[str]]:
    """The control-plane nodes of a step, one per wave in inventory order: the first that
    needs it runs ``kubeadm upgrade apply`` (unless an apiserver already runs ``version``),
    the others ``kubeadm upgrade node``; resumed ones only their kubelet part. Returns
    ``(node steps, waves, apply host, warnings)``. Raises UpgradePlanError when draining
    one breaks the GPU floor."""
    budget = ctx.budget
    cps = [n for n in nodes if n.control_plane]
    apply_done = any(n.apiserver and dv.parse_version(n.apiserver) >= version for n in cps)
    pkg = package_version(str(version), ctx.package_revision)
    steps: list[NodeStep] = []
    waves: list[Wave] = []
    apply_host: str | None = None
    for n in cps:
        if not _needs(n, version) and n.host not in resumed:
            steps.append(NodeStep(n.host, n.name, CONTROL_PLANE, -1, [], True, f"at {version}"))
            continue
        cost = 0 if n.unschedulable else n.gpu_devices
        if budget.total and budget.cordoned + cost > budget.total - budget.required:
            raise UpgradePlanError(
                f"{budget.name}={budget.floor:g}: draining control-plane node "
                f"{n.name} ({n.gpu_devices} GPU devices) breaks the floor of "
                f"{budget.required} of {budget.total}.",
                f"lower {budget.name}.",
            )
        if n.host in resumed:
            role, upgrade = CONTROL_PLANE, ""
        elif not apply_done and apply_host is None:
            role, apply_host = FIRST_CONTROL_PLANE, n.host
            upgrade = f"kubeadm upgrade apply v{version}"
        else:
            role, upgrade = CONTROL_PLANE, "kubeadm upgrade node"
        actions = [
            f"kubeadm {pkg}",
            "sanitize kubeadm-config and manifests" if role == FIRST_CONTROL_PLANE else "",
            upgrade,
            "assert DRA settings" if upgrade else "",
            "drain",
            f"kubelet+kubectl {pkg}",
            "restart kubelet, wait Ready",
            "uncordon",
        ]
        index = len(waves)
        steps.append(
            NodeStep(
                n.host,
                n.name,
                role,
                index,
                [a for a in actions if a],
                reason=RESUME_REASON if n.host in resumed else "",
                gpu_devices=n.gpu_devices,
                resume=n.host in resumed,
            )
        )
        waves.append(Wave(index, role, [n.host], cost, budget.available(cost)))
    warnings = []
    if not apply_done and apply_host is None and any(_needs(n, version) for n in cps):
        warnings.append("no control-plane node needs kubeadm upgrade apply")
    return steps, waves, apply_host, warnings


#: What a worker goes through in a step (``{pkg}``: the packages' version).
WORKER_ACTIONS = (
    "kubeadm {pkg}",
    "drain",
    "kubeadm upgrade node",
    "kubelet+kubectl {pkg}",
    "assert kubelet DRA gates",
    "restart kubelet, wait Ready",
    "DRA plugin Ready, ResourceSlices republished",
    "uncordon",
)


def _worker_waves(
    ctx: _StepContext,
    version: dv.KubeVersion,
    nodes: Sequence[NodeState],
    resumed: set[str],
    first_wave: int,
) -> tuple[list[NodeStep], list[Wave], list[int]]:
    """The workers of a step: those at ``version`` skipped, the others (and the resumed)
    in batches (``_batches``: batch size and GPU floor), waves numbered from
    ``first_wave``. Returns ``(node steps, waves, serial)``, serial the batch sizes."""
    workers = [n for n in nodes if not n.control_plane]
    pending = [n for n in workers if _needs(n, version) or n.host in resumed]
    steps = [
        NodeStep(n.host, n.name, WORKER, -1, [], True, f"at {version}")
        for n in workers
        if n not in pending
    ]
    pkg = package_version(str(version), ctx.package_revision)
    actions = [a.format(pkg=pkg) for a in WORKER_ACTIONS]
    b = ctx.budget
    waves: list[Wave] = []
    serial: list[int] = []
    batches = _batches(pending, ctx.batch_size, b.total, b.cordoned, b.required, b.floor, b.name)
    for index, batch in enumerate(batches, first_wave):
        drained = sum(0 if n.unschedulable else n.gpu_devices for n in batch)
        waves.append(Wave(index, WORKER, [n.host for n in batch], drained, b.available(drained)))
        serial.append(len(batch))
        steps += [
            NodeStep(
                n.host,
                n.name,
                WORKER,
                index,
                list(actions),
                reason=RESUME_REASON if n.host in resumed else "",
                gpu_devices=n.gpu_devices,
                resume=n.host in resumed,
            )
            for n in batch
        ]
    return steps, waves, serial


def _apply_command(
    version: dv.KubeVersion, ignore_preflight_errors: Sequence[str]
) -> tuple[bool, list[str]]:
    """``(UpgradeConfiguration used, kubeadm upgrade apply argv)`` for ``version``: with a
    configuration file from 1.UPGRADE_CONFIGURATION_SINCE on, else with flags."""
    cfg = upgrade_configuration(str(version), ignore_preflight_errors=ignore_preflight_errors)
    if cfg is not None:
        return True, ["kubeadm", "upgrade", "apply", f"v{version}", "--config",
                      "/etc/kubernetes/gpufleet/upgrade-configuration.yaml", "--yes"]  # fmt: skip
    command = ["kubeadm", "upgrade", "apply", f"v{version}", "--yes"]
    if version.pre:
        command.append("--allow-experimental-upgrades")
    if ignore_preflight_errors:
        command.append("--ignore-preflight-errors=" + ",".join(ignore_preflight_errors))
    return False, command


def _after_step(state: Mapping[str, NodeState], version: dv.KubeVersion) -> dict[str, NodeState]:
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


def settings_from_configmaps(
    cluster_configuration: Mapping[str, Any] | None, kubelet_configuration: Mapping[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """Feature gates and runtime-config per component as the kubeadm ConfigMaps hold them:
    ``ClusterConfiguration`` (``apiServer``/``controllerManager``/``scheduler``
    ``extraArgs``, a map in v1beta3, a list of ``{name, value}`` in v1beta4) and
    ``KubeletConfiguration`` (``featureGates``). Returns the ``current_settings`` shape of
    ``build_plan``. Malformed gate values raise VersionParseError."""
    out: dict[str, dict[str, Any]] = {}
    cc = cluster_configuration or {}
    for key, component in (
        ("apiServer", dv.APISERVER),
        ("controllerManager", dv.CONTROLLER_MANAGER),
        ("scheduler", dv.SCHEDULER),
    ):
        args = (cc.get(key) or {}).get("extraArgs") or {}
        pairs: list[tuple[str, str]]
        if isinstance(args, Mapping):
            pairs = [(str(k), str(v)) for k, v in args.items()]
        else:
            pairs = [(str(a.get("name")), str(a.get("value", ""))) for a in args]
        gates: dict[str, bool] = {}
        rc: list[str] = []
        for name, value in pairs:
            if name == "feature-gates":
                gates.update(dv.parse_feature_gates(value))
            elif name == "runtime-config":
                rc.extend(f"{k}={v}" for k, v in dv.parse_runtime_config(value))
        out[component] = {"feature_gates": gates, "runtime_config": rc}
    kc = kubelet_configuration or {}
    out[dv.KUBELET] = {
        "feature_gates": {str(k): bool(v) for k, v in (kc.get("featureGates") or {}).items()},
        "runtime_config": [],
    }
    return out
