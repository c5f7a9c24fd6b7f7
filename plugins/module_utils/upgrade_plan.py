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

#: Releases an upgrade may start from and go to (design: any consecutive pair from 1.31 to
#: 1.37). 1.38 is a projection in the version model, not a release to upgrade to.
UPGRADE_MIN_MINOR = 31
UPGRADE_MAX_MINOR = dv.PROVISION_MAX_MINOR
DEFAULT_PACKAGE_REVISION = "1.1"
DEFAULT_REPO_URL = "https://pkgs.k8s.io/core:/stable:/v{minor}/deb/"
DEFAULT_GPU_DRIVER = "gpu.nvidia.com"
#: kubeadm takes an UpgradeConfiguration from this minor (kubeadm.k8s.io/v1beta4).
UPGRADE_CONFIGURATION_SINCE = 31

FIRST_CONTROL_PLANE = "first-control-plane"
CONTROL_PLANE = "control-plane"
WORKER = "worker"
RESUME_REASON = "at the target, left cordoned by an earlier run: resumed"
#: How ``build_plan``'s messages name its inputs by default.
INPUT_NAMES = {
    "target": "--to",
    "via": "--via",
    "batch_size": "upgrade_batch_size",
    "min_gpu_available_percent": "upgrade_min_gpu_available_percent",
    "features": "upgrade_dra_features",
    "gates": "upgrade_dra_gates",
}


class UpgradePlanError(dv.VersionModelError):
    """The upgrade cannot be planned: ``reason`` names the variable or node and the value,
    ``fix`` says what to do."""


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


def parse_batch_size(value: int | str, workers: int, name: str = "upgrade_batch_size") -> int:
    """Nodes per worker batch: a positive integer, or ``"N%"`` of ``workers`` rounded down
    and at least 1 (as Ansible's ``serial``). Raises UpgradePlanError naming ``name``."""
    text = str(value).strip()
    fix = "give a number of nodes (e.g. 2) or a percentage of the workers (e.g. 20%)."
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            raise UpgradePlanError(f"{name}={value!r} is not a percentage.", fix) from None
        if not 0 < pct <= 100:
            raise UpgradePlanError(f"{name}={value!r} must be above 0% and at most 100%.", fix)
        return max(1, math.floor(workers * pct / 100))
    try:
        size = int(text)
    except ValueError:
        raise UpgradePlanError(f"{name}={value!r} is not a number of nodes.", fix) from None
    if size < 1 or isinstance(value, bool):
        raise UpgradePlanError(f"{name}={value!r} must be at least 1.", fix)
    return size


def parse_min_gpu_percent(
    value: int | float | str, name: str = "upgrade_min_gpu_available_percent"
) -> float:
    """The floor on schedulable GPU devices, 0 to 100 (a trailing % is accepted)."""
    text = str(value).strip().rstrip("%")
    try:
        pct = float(text)
    except ValueError:
        pct = -1.0
    if isinstance(value, bool) or not 0 <= pct <= 100:
        raise UpgradePlanError(
            f"{name}={value!r} is not a percentage from 0 to 100.",
            "give e.g. 50 to keep at least half of the GPU devices schedulable, 0 for no floor.",
        )
    return pct


def package_version(version: str, revision: str = DEFAULT_PACKAGE_REVISION) -> str:
    """``"1.37.2"`` -> ``"1.37.2-1.1"`` (the pkgs.k8s.io Debian/RPM version)."""
    return f"{dv.parse_version(version).__str__()}-{revision}"


def repo_url(version: str, template: str = DEFAULT_REPO_URL) -> str:
    """The package repository of ``version``'s minor: ``template`` with ``{minor}`` replaced
    by ``1.37``. Raises UpgradePlanError when the template has no ``{minor}``."""
    if "{minor}" not in template:
        raise UpgradePlanError(
            f"upgrade_repo_url={template!r} has no {{minor}} placeholder; each minor has its "
            "own repository.",
            "write e.g. https://pkgs.k8s.io/core:/stable:/v{minor}/deb/ or "
            "file:/var/lib/gpufleet/pkgs/core:/stable:/v{minor}/deb/.",
        )
    return template.replace("{minor}", dv.parse_version(version).minor_version)


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
    return {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "UpgradeConfiguration",
        "apply": {"kubernetesVersion": f"v{v}", **common},
        "node": dict(common),
        "plan": {
            "kubernetesVersion": f"v{v}",
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


_RELEASE_RE = re.compile(r"^v?\d+\.\d+\.\d+$")
_RELEASE_FIX = "give MAJOR.MINOR.PATCH with an optional leading v, e.g. 1.37.2 or v1.37.2."


def parse_release(value: Any, name: str = "--to") -> dv.KubeVersion:
    """An exact release (``"1.37.2"`` or ``"v1.37.2"``, surrounding spaces ignored) as a
    KubeVersion with a patch. Packages are published only for releases (pkgs.k8s.io
    versions ``1.37.2-1.1``; the upgrade role accepts ``^v?\\d+\\.\\d+\\.\\d+$``), so a
    minor (``"1.37"``), a pre-release (``"1.37.3-rc.0"``) and build metadata
    (``"1.37.2+abc"``) are refused. The range of the model is not checked here.

    Raises UpgradePlanError (VersionParseError for a value that is no version at all)
    naming ``name`` and the value, with the fix."""
    if not isinstance(value, str):
        raise dv.VersionParseError(f"{name}={value!r} is not a Kubernetes release string.",
                                   _RELEASE_FIX)  # fmt: skip
    try:
        v = dv.parse_version(value, name)
    except dv.VersionParseError as exc:
        raise dv.VersionParseError(exc.reason, _RELEASE_FIX) from None
    text = value.strip()
    if v.patch is None:
        raise UpgradePlanError(
            f"{name} {value!r} names a minor, not a release.",
            f"give the exact release, e.g. {v.minor_version}.0; packages are pinned exactly.",
        )
    if not _RELEASE_RE.match(text):
        kind = "a pre-release" if v.pre else "a release with build metadata"
        plain = f"{v.major}.{v.minor}.{v.patch}"
        raise UpgradePlanError(
            f"{name} {value!r} is {kind}; packages (kubeadm, kubelet, kubectl "
            "MAJOR.MINOR.PATCH-REVISION) exist only for releases.",
            f"give a release MAJOR.MINOR.PATCH, e.g. {plain}.",
        )
    return v


def _target(version: Any, name: str = "--to") -> dv.KubeVersion:
    v = parse_release(version, name)
    if not UPGRADE_MIN_MINOR < v.minor <= UPGRADE_MAX_MINOR:
        raise UpgradePlanError(
            f"{name} {version!r} is outside the releases the version model covers for "
            f"upgrades (1.{UPGRADE_MIN_MINOR + 1} to 1.{UPGRADE_MAX_MINOR}).",
            f"give a release from 1.{UPGRADE_MIN_MINOR + 1}.0 to 1.{UPGRADE_MAX_MINOR}.x.",
        )
    return v


def parse_target(value: Any, name: str = "--to") -> dv.KubeVersion:
    """The release to upgrade to: ``parse_release`` and within the releases the upgrade
    covers (1.32 to ``UPGRADE_MAX_MINOR``). Raises UpgradePlanError naming ``name``."""
    return _target(value, name)


def parse_via(
    values: Sequence[Any], target: dv.KubeVersion, name: str = "--via"
) -> dict[int, dv.KubeVersion]:
    """The releases to pass through, by minor: each an exact release (``parse_release``) of
    a minor below ``target``'s, at most one per minor. What needs the cluster (a minor not
    between the cluster's and the target's) is checked by ``build_plan``. Raises
    UpgradePlanError naming ``name`` and the value."""
    out: dict[int, dv.KubeVersion] = {}
    for raw in values:
        v = parse_release(raw, name)
        if v.minor >= target.minor:
            raise UpgradePlanError(
                f"{name} {v} is not between the cluster and --to ({target}): a release to pass "
                f"through must be of a minor below {target.minor_version}.",
                "give only releases of the minors between the cluster's and the target's.",
            )
        if v.minor in out and out[v.minor] != v:
            raise UpgradePlanError(
                f"{name} names two releases of {v.minor_version}: {out[v.minor]} and {v}; "
                "each minor is passed through once.",
                f"give one {v.minor_version} release.",
            )
        out[v.minor] = v
    return out


def judge_input(
    target: Any,
    *,
    via: Sequence[Any] = (),
    batch_size: int | str = 1,
    min_gpu_available_percent: int | float | str = 0,
    features: Sequence[str] = (),
    gates: Mapping[str, bool] | None = None,
    repo_url_template: str = DEFAULT_REPO_URL,
    workers: int = 1,
    input_names: Mapping[str, str] | None = None,
) -> None:
    """Judge what the plan takes that needs neither the cluster nor a host, before either
    is read: the target and each ``via`` release (exact releases, no pre-release, in the
    model, one per minor, below the target), the batch size against ``workers`` (the
    inventory's hosts outside kube_control_plane), the GPU floor, the DRA wishes at every
    release named, and the repository template. ``input_names`` as for
    :func:`build_plan`. Raises UpgradePlanError (VersionParseError for a value that is no
    version) naming the input, the value and the fix."""
    names = {**INPUT_NAMES, **dict(input_names or {})}
    tv = parse_target(target, names["target"])
    via_versions = parse_via(list(via), tv, names["via"])
    parse_batch_size(batch_size, max(1, workers), names["batch_size"])
    parse_min_gpu_percent(min_gpu_available_percent, names["min_gpu_available_percent"])
    for release in [*via_versions.values(), tv]:
        try:
            dv.plan_components(str(release), list(features), dict(gates or {}))
        except dv.VersionModelError as exc:
            given = [f"{names['features']}={list(features)!r}"] if features else []
            given += [f"{names['gates']}={dict(gates or {})!r}"] if gates else []
            raise UpgradePlanError(
                f"{', '.join(given) or 'the DRA settings'} at {release}: {exc.reason}", exc.fix
            ) from None
    repo_url(str(tv), repo_url_template)


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
    floor_name = names["min_gpu_available_percent"]
    floor = parse_min_gpu_percent(min_gpu_available_percent, floor_name)
    workers = [n for n in nodes if not n.control_plane]
    size = parse_batch_size(batch_size, max(1, len(workers)), names["batch_size"])
    via_versions = parse_via(via, tv, names["via"])
    facts = ub.parse_host_facts(host_facts, [n.host for n in nodes])
    warnings = ub.unread_warnings(facts)
    all_versions: list[tuple[NodeState, str, dv.KubeVersion]] = []
    for n in nodes:
        for component, v in _versions_of(n):
            all_versions.append((n, component, v))
            if v > tv:
                raise UpgradePlanError(
                    f"{component} on {n.host} runs {v}, newer than --to {tv}; Kubernetes does "
                    "not support downgrades.",
                    f"give --to {v} or newer.",
                )
        if n.kubelet is None:
            warnings.append(f"{n.host}: the kubelet version is unknown (node not registered?)")
        if n.kubeadm is None:
            warnings.append(f"{n.host}: kubeadm version unknown (not read from the host)")
    apis = [n.apiserver for n in cps if n.apiserver]
    if not apis:
        raise UpgradePlanError(
            "no kube-apiserver version found on the control-plane nodes "
            f"({', '.join(n.name for n in cps)}).",
            "check that the kube-apiserver static pods run and are labelled "
            "component=kube-apiserver, and that kubernetes_node_name matches the node names.",
        )
    kubelets = [n.kubelet for n in nodes if n.kubelet]
    for violation in dv.check_skew({dv.APISERVER: apis, dv.KUBELET: kubelets}):
        warnings.append(
            f"version skew now: {violation.component} {violation.version} vs kube-apiserver "
            f"{violation.apiserver}: {violation.reason}"
        )
    low = min(v for _, _, v in all_versions)
    if low.minor < UPGRADE_MIN_MINOR:
        raise UpgradePlanError(
            f"the cluster runs {low} (lowest component version), below 1.{UPGRADE_MIN_MINOR}, "
            "the oldest release the upgrade covers.",
            f"bring every component to 1.{UPGRADE_MIN_MINOR} with kubeadm first.",
        )
    for minor, v in via_versions.items():
        if not low.minor < minor < tv.minor:
            raise UpgradePlanError(
                f"{names['via']} {v} is not between the cluster ({low.minor_version}) and --to "
                f"({tv.minor_version}).",
                "give only releases of the minors in between.",
            )
    known = {n.host for n in nodes}
    resume = [h for h in resume_hosts if h in known]
    if low >= tv and not resume:
        return UpgradePlan(str(tv), list(nodes), [], size, floor, warnings)
    path = _path(low, tv, via_versions) if low.minor < tv.minor else [tv]
    total_gpu = sum(n.gpu_devices for n in nodes)
    cordoned_gpu = sum(n.gpu_devices for n in nodes if n.unschedulable)
    required_gpu = math.ceil(total_gpu * floor / 100)
    gates = dict(gates or {})
    settings = {c: dict(v) for c, v in (current_settings or {}).items()}
    steps: list[Step] = []
    control_plane_version = min(dv.parse_version(a) for a in apis)
    state = {n.host: n for n in nodes}
    seen: set[tuple] = set()
    for step_version in path:
        source = control_plane_version
        if source.minor < step_version.minor - 1:
            source = dv.KubeVersion(1, step_version.minor - 1)
        transition = dv.plan_transition(str(source), str(step_version), features, gates)
        reports, kept = _sanitize_all(settings, step_version)
        found = ub.configmap_blocking(reports, step_version, transition)
        found += ub.host_blocking(facts, step_version, transition)
        blocking = ub.with_fixes(b for b in found if b.key() not in seen)
        seen.update(b.key() for b in blocking)
        # What the components hold after this step: what survived sanitize, then the plan.
        planned = _settings_of(transition.target)
        next_settings: dict[str, dict[str, Any]] = {}
        for c in dv.COMPONENTS:
            fg = dict(kept[c]["feature_gates"])
            for name in transition.target.components[c].forbidden_gates:
                fg.pop(name, None)
            fg.update(planned[c]["feature_gates"])
            rc = [e for e in kept[c]["runtime_config"] if e not in planned[c]["runtime_config"]]
            next_settings[c] = {
                "feature_gates": fg,
                "runtime_config": sorted(set(rc) | set(planned[c]["runtime_config"])),
            }
        settings = next_settings
        node_steps: list[NodeStep] = []
        waves: list[Wave] = []
        step_warnings: list[str] = []
        apply_done = any(
            state[n.host].apiserver and dv.parse_version(state[n.host].apiserver) >= step_version
            for n in cps
        )
        apply_host: str | None = None
        wave_index = 0

        def avail(drained: int) -> float:
            if not total_gpu:
                return 100.0
            return round(100.0 * (total_gpu - cordoned_gpu - drained) / total_gpu, 1)

        resumed = {h for h in resume if step_version == tv and not _needs(state[h], step_version)}

        for n in cps:
            cur = state[n.host]
            if not _needs(cur, step_version) and n.host not in resumed:
                node_steps.append(
                    NodeStep(n.host, n.name, CONTROL_PLANE, -1, [], True, f"at {step_version}")
                )
                continue
            cost = 0 if n.unschedulable else n.gpu_devices
            if total_gpu and cordoned_gpu + cost > total_gpu - required_gpu:
                raise UpgradePlanError(
                    f"{floor_name}={floor:g}: draining control-plane node "
                    f"{n.name} ({n.gpu_devices} GPU devices) breaks the floor of "
                    f"{required_gpu} of {total_gpu}.",
                    f"lower {floor_name}.",
                )
            if n.host in resumed:
                role = CONTROL_PLANE
                upgrade = ""
            elif not apply_done and apply_host is None:
                role = FIRST_CONTROL_PLANE
                apply_host = n.host
                upgrade = f"kubeadm upgrade apply v{step_version}"
            else:
                role = CONTROL_PLANE
                upgrade = "kubeadm upgrade node"
            actions = [
                f"kubeadm {package_version(str(step_version), package_revision)}",
                "sanitize kubeadm-config and manifests" if role == FIRST_CONTROL_PLANE else "",
                upgrade,
                "assert DRA settings" if upgrade else "",
                "drain",
                f"kubelet+kubectl {package_version(str(step_version), package_revision)}",
                "restart kubelet, wait Ready",
                "uncordon",
            ]
            node_steps.append(
                NodeStep(
                    n.host,
                    n.name,
                    role,
                    wave_index,
                    [a for a in actions if a],
                    reason=RESUME_REASON if n.host in resumed else "",
                    gpu_devices=n.gpu_devices,
                    resume=n.host in resumed,
                )
            )
            waves.append(Wave(wave_index, role, [n.host], cost, avail(cost)))
            wave_index += 1
        if (
            not apply_done
            and apply_host is None
            and any(_needs(state[n.host], step_version) for n in cps)
        ):
            step_warnings.append("no control-plane node needs kubeadm upgrade apply")
        pending = [n for n in workers if _needs(state[n.host], step_version) or n.host in resumed]
        for n in workers:
            if n not in pending:
                node_steps.append(
                    NodeStep(n.host, n.name, WORKER, -1, [], True, f"at {step_version}")
                )
        serial: list[int] = []
        pkg = package_version(str(step_version), package_revision)
        for batch in _batches(
            pending, size, total_gpu, cordoned_gpu, required_gpu, floor, floor_name
        ):
            drained = sum(0 if n.unschedulable else n.gpu_devices for n in batch)
            waves.append(Wave(wave_index, WORKER, [n.host for n in batch], drained, avail(drained)))
            serial.append(len(batch))
            for n in batch:
                node_steps.append(
                    NodeStep(
                        n.host,
                        n.name,
                        WORKER,
                        wave_index,
                        [
                            f"kubeadm {pkg}",
                            "drain",
                            "kubeadm upgrade node",
                            f"kubelet+kubectl {pkg}",
                            "assert kubelet DRA gates",
                            "restart kubelet, wait Ready",
                            "DRA plugin Ready, ResourceSlices republished",
                            "uncordon",
                        ],
                        reason=RESUME_REASON if n.host in resumed else "",
                        gpu_devices=n.gpu_devices,
                        resume=n.host in resumed,
                    )
                )
            wave_index += 1
        cfg = upgrade_configuration(
            str(step_version), ignore_preflight_errors=ignore_preflight_errors
        )
        if cfg is not None:
            command = ["kubeadm", "upgrade", "apply", f"v{step_version}", "--config",
                       "/etc/kubernetes/gpufleet/upgrade-configuration.yaml", "--yes"]  # fmt: skip
        else:
            command = ["kubeadm", "upgrade", "apply", f"v{step_version}", "--yes"]
            if ignore_preflight_errors:
                command.append("--ignore-preflight-errors=" + ",".join(ignore_preflight_errors))
        api_from = dv.kubeadm_config_api(source)
        api_to = dv.kubeadm_config_api(step_version)
        known_bad = dv.known_bad_releases(step_version)
        for bad in known_bad:
            step_warnings.append(
                f"{bad.version} is a known-bad release ({bad.component}): {bad.problem}; "
                f"{bad.advice}"
            )
        step_warnings.extend(transition.warnings)
        steps.append(
            Step(
                source=str(source),
                version=str(step_version),
                repo_url=repo_url(str(step_version), repo_url_template),
                packages={
                    p: package_version(str(step_version), package_revision)
                    for p in ("kubeadm", "kubelet", "kubectl")
                },
                kubeadm_api={
                    "from": api_from.preferred,
                    "to": api_to.preferred,
                    "accepted_by_target": list(api_to.accepted),
                },
                upgrade_configuration=cfg is not None,
                apply_host=apply_host,
                apply_command=command,
                transition=transition.to_dict(),
                sanitize=reports,
                nodes=node_steps,
                waves=waves,
                serial=serial,
                warnings=step_warnings,
                blocking=blocking,
            )
        )
        # After the step every node runs step_version.
        state = {
            h: NodeState(
                n.host,
                n.name,
                n.control_plane,
                str(step_version),
                str(step_version) if n.control_plane else None,
                str(step_version),
                n.gpu_devices,
                n.unschedulable,
                n.ready,
            )
            for h, n in state.items()
        }
        control_plane_version = step_version
    return UpgradePlan(str(tv), list(nodes), steps, size, floor, warnings)


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
