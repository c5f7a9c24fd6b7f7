# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Cross-variable checks of an inventory, run before any host is changed.

Argument specs check one variable at a time; the rules here look at several at once
(combinations, version ranges, removed variables, a MIG layout against the node's GPU
model, the DRA driver chart against the cluster's release). Pure: data in, a list of
``Problem`` out. The ``preflight_check`` filter calls ``check_inventory`` from the
``preflight`` role, which fails once, listing every error of every host.

Input shape (``check_inventory``)::

    {"<inventory host>": {
        "groups": ["k8s_cluster", "kube_node", "gpu_nodes", "gpu_h200"],
        "variables": {"nvidia_driver_branch": "580", ...},   # as the inventory sets them
        "gpus": [{"name": "NVIDIA H200", ...}],               # gpu_facts, optional
        "driver_version": "580.159.04"},                      # gpu_facts, optional
     ...}

Variables a host does not set take the role defaults in ``ROLE_DEFAULTS`` (a unit test
keeps them equal to the roles' ``meta/argument_specs.yml``).

Facts and sources of the rules:

* Provision range: ``dra_versions.supported_for_provision`` (1.32 to 1.38).
* NVIDIA DRA driver chart (``nvidia-dra-driver-gpu`` <= 25.12, ``dra-driver-nvidia-gpu``
  >= 0.4): ``Chart.yaml`` ``kubeVersion: >=1.32.0-0``; ``docs/prerequisites.md`` documents
  Kubernetes 1.34.2 as the minimum and host driver branch 565 for GPU allocation; driver
  feature gates ``TimeSlicingSettings``/``MPSSupport`` since 25.8 (0.2), ``DynamicMIG``
  since 25.12 (0.3); ``pkg/featuregates/featuregates.go`` ``ValidateFeatureGates``:
  DynamicMIG excludes MPSSupport, PassthroughSupport and NVMLDeviceHealthCheck,
  PassthroughSupport excludes NVMLDeviceHealthCheck. DynamicMIG publishes partitionable
  devices (KEP-4815): Kubernetes 1.34 or newer with ``DRAPartitionableDevices`` on, and at
  start-up it destroys MIG devices it did not create (``DestroyUnknownMIGDevices``), so a
  static MIG layout and DynamicMIG exclude each other.
* Container toolkit 1.17.4 is the first to read containerd 2's configuration version 3;
  CDI needs containerd 1.7 (``containerd_config.check_toolkit``).
* Driver pin and branch 565 (``nvidia_driver_plan.check_pin``).
* ``KubeletConfiguration.failCgroupV1`` exists from Kubernetes 1.31 (KEP-4569), so
  ``kubeadm_allow_cgroup_v1`` does nothing on older kubelets.
* MIG fit: ``mig_planner.plan`` / ``check_config`` with the models of ``mig_profiles``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_driver_values as ddv
from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils import input_guard as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils import mig_planner as mp
from ansible_collections.gpufleet.cluster.plugins.module_utils import mig_profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils import preflight_specs as ps
from ansible_collections.gpufleet.cluster.plugins.module_utils.containerd_config import (
    ConfigError,
    check_toolkit,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia_driver_plan import (
    DRA_MIN_BRANCH,
    PlanError,
    check_pin,
    parse_driver_version,
)

__all__ = [
    "CHART_DOCS_MIN_KUBERNETES",
    "CHART_MIN_KUBERNETES",
    "DRIVER_GATE_CONFLICTS",
    "ERROR",
    "ROLE_DEFAULTS",
    "WARNING",
    "Problem",
    "check_host",
    "check_inventory",
    "format_report",
]

ERROR = "error"
WARNING = "warning"

#: Chart ``kubeVersion`` of every NVIDIA DRA driver chart from 25.3.2 to 0.5.0-dev.
CHART_MIN_KUBERNETES = (1, 32, 0)
#: Minimum Kubernetes release in the driver's docs/prerequisites.md.
CHART_DOCS_MIN_KUBERNETES = (1, 34, 2)
#: Driver feature gate -> first chart release with it, as (0, minor) of the SemVer line
#: (calendar releases map 25.3 -> 0.1, 25.8 -> 0.2, 25.12 -> 0.3; featuregates.go).
DRIVER_GATE_SINCE = {
    "TimeSlicingSettings": (0, 2),
    "MPSSupport": (0, 2),
    "DynamicMIG": (0, 3),
    "PassthroughSupport": (0, 3),
    "NVMLDeviceHealthCheck": (0, 3),
}
#: Pairs of driver feature gates that the driver refuses together (ValidateFeatureGates).
DRIVER_GATE_CONFLICTS = (
    ("DynamicMIG", "MPSSupport"),
    ("DynamicMIG", "PassthroughSupport"),
    ("DynamicMIG", "NVMLDeviceHealthCheck"),
    ("PassthroughSupport", "NVMLDeviceHealthCheck"),
)
#: Sharing strategy (GpuConfig sharing.strategy) -> driver feature gate it needs.
SHARING_GATES = {"timeslicing": "TimeSlicingSettings", "mps": "MPSSupport"}
_CALENDAR_TO_SEMVER = {(25, 3): (0, 1), (25, 8): (0, 2), (25, 12): (0, 3)}

#: Defaults of the role variables the rules read (the roles' defaults/main.yml and
#: meta/argument_specs.yml; tests/unit/test_preflight.py keeps them equal).
ROLE_DEFAULTS: dict[str, Any] = {
    "nvidia_driver_mode": "install",
    "nvidia_driver_branch": "580",
    "nvidia_driver_version": "580.159.04",
    "nvidia_driver_for_dra": True,
    "nvidia_container_toolkit_version": "1.18.0",
    "nvidia_container_toolkit_containerd_version": "",
    "nvidia_container_toolkit_enable_cdi": True,
    "kubeadm_kubernetes_version": "",
    "kubeadm_dra_features": [],
    "kubeadm_dra_gates": {},
    "kubeadm_allow_cgroup_v1": False,
    "kubeadm_kubelet_extra": {},
    "dra_feature_gates_kubernetes_version": "",
    "dra_feature_gates_features": [],
    "dra_feature_gates_extra": {},
    "claim_templates_kubernetes_version": "",
    "gpu_node_labels_group": "gpu_nodes",
    "dra_driver_group": "gpu_nodes",
    "dra_driver_chart_version": "0.4.0",
    "dra_driver_kubernetes_version": "",
    "dra_driver_accept_below_documented_minimum": False,
    "dra_driver_sharing": [],
    "dra_driver_dynamic_mig": False,
    "dra_driver_gpu_operator": False,
    "dra_driver_feature_gates": {},
    "dra_driver_namespace": "nvidia-dra-driver-gpu",
    "mig_layout": {},
    "mig_enabled": True,
    "mig_config": {},
    "mig_config_file": "",
    "mig_config_name": "",
    "mig_restart_dra_plugin": True,
}
#: ``mig_dra_plugin_namespace`` has no default of its own: the mig role takes
#: ``dra_driver_namespace`` (roles/mig/defaults/main.yml).

#: Variables of the site playbook (not of a role) and their defaults.
SITE_DEFAULTS: dict[str, Any] = {
    "site_install_gpu_stack": True,
    "site_bootstrap": False,
}

#: Release variables, in the order the first non-empty one is taken as the cluster's.
RELEASE_VARIABLES = (
    "kubeadm_kubernetes_version",
    "dra_feature_gates_kubernetes_version",
    "dra_driver_kubernetes_version",
    "claim_templates_kubernetes_version",
)

_HOSTS_LISTED = 5


@dataclass(frozen=True)
class Problem:
    """One finding. ``severity`` is ``error`` (the run stops) or ``warning``.

    ``rule`` is a stable id (``driver-branch``); ``variable`` the variable to change,
    ``value`` the value found, ``message`` what is wrong and why, ``fix`` what to write
    instead; ``hosts`` the inventory hosts it applies to (empty: the inventory as a whole).
    """

    rule: str
    severity: str
    variable: str
    value: Any
    message: str
    fix: str
    hosts: tuple[str, ...] = ()

    def key(self) -> tuple[str, str, str, str, str, str]:
        return (
            self.rule,
            self.severity,
            self.variable,
            _short(self.value),
            self.message,
            self.fix,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "variable": self.variable,
            "value": self.value,
            "message": self.message,
            "fix": self.fix,
            "hosts": list(self.hosts),
        }


def _short(value: Any, limit: int = 160) -> str:
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _p(rule: str, severity: str, variable: str, value: Any, message: str, fix: str) -> Problem:
    return Problem(rule, severity, variable, value, message, fix)


# --- value readers ----------------------------------------------------------------------


class _BadValue(Exception):
    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(problem.message)


def _bool(settings: Mapping[str, Any], name: str) -> bool:
    value = settings.get(name)
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, str) and not value.strip():
        return False
    parsed = ig.variable_bool(value)  # Ansible's own booleans, as the roles read them
    if parsed is not None:
        return parsed
    raise _BadValue(
        _p(
            "value-type",
            ERROR,
            name,
            value,
            "is not a boolean",
            f"write {name}: true or {name}: false",
        )
    )


def _text(settings: Mapping[str, Any], name: str) -> str:
    value = settings.get(name)
    return "" if value is None else str(value).strip()


def _release(text: str) -> tuple[int, int, int] | None:
    try:
        v = dv.parse_version(text)
    except dv.VersionModelError:
        return None
    return (v.major, v.minor, v.patch or 0)


def _vtext(v: Sequence[int]) -> str:
    return ".".join(str(p) for p in v)


def _chart_version(text: str) -> tuple[int, int, int] | None:
    """``25.12.0`` -> (0, 3, 0); ``0.4.0``/``v0.4.0`` -> (0, 4, 0); None if unreadable."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$", text)
    if not m:
        return None
    major, minor, patch = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if major >= 25:
        mapped = _CALENDAR_TO_SEMVER.get((major, minor))
        if mapped is None:
            # calendar releases between the known ones: take the newest at or before it
            older = [v for k, v in _CALENDAR_TO_SEMVER.items() if k <= (major, minor)]
            mapped = max(older) if older else (0, 0)
        return (mapped[0], mapped[1], patch)
    return (major, minor, patch)


def _sharing(value: Any) -> list[str]:
    """Sharing strategies from a string (``MPS``, ``TimeSlicing,MPS``), a list or a mapping."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        items: Iterable[Any] = value.split(",")
    elif isinstance(value, Mapping):
        items = [k for k, v in value.items() if v not in (False, None, "", 0)]
        if "strategy" in value:
            items = [value["strategy"]]
    else:
        items = value
    out = []
    for item in items:
        name = str(item.get("strategy", "") if isinstance(item, Mapping) else item).strip()
        if name and name.lower() not in ("none", "exclusive"):
            out.append(name)
    return out


# --- per-host rules ---------------------------------------------------------------------


@dataclass
class _Ctx:
    host: str
    groups: tuple[str, ...]
    settings: dict[str, Any]
    user: Mapping[str, Any]
    gpus: list[Mapping[str, Any]]
    driver_version: str
    mig_config_file_text: str = ""
    problems: list[Problem] = field(default_factory=list)
    release: tuple[int, int, int] | None = None
    release_var: str = ""

    @property
    def gpu_group(self) -> str:
        return _text(self.settings, "gpu_node_labels_group") or "gpu_nodes"

    @property
    def is_gpu(self) -> bool:
        return self.gpu_group in self.groups

    def add(self, problem: Problem) -> None:
        self.problems.append(problem)


def check_host(
    host: str,
    groups: Iterable[str],
    variables: Mapping[str, Any],
    *,
    removed: Mapping[str, Any] | None = None,
    known_variables: Iterable[str] | None = None,
    gpus: Sequence[Mapping[str, Any]] | None = None,
    driver_version: str = "",
    mig_config_file_text: str = "",
) -> list[Problem]:
    """Every rule for one host; ``variables`` as the inventory sets them (role defaults
    are filled in from ``ROLE_DEFAULTS`` and ``SITE_DEFAULTS``).

    ``removed`` maps a removed variable name to its new name (a string) or to
    ``{"new": NAME, "fix": TEXT}``; ``known_variables``, when given, are all variable names
    the roles declare: a variable with a role's prefix outside that list is reported as a
    probable typo (warning). ``gpus``/``driver_version``: gathered ``gpu_facts``
    (``gpufleet_gpus``, ``gpufleet_gpu_driver_version``), optional;
    ``mig_config_file_text``: the content of ``mig_config_file``, read on the control host.
    """
    settings = {**ROLE_DEFAULTS, **SITE_DEFAULTS, **dict(variables)}
    ctx = _Ctx(
        host,
        tuple(groups),
        settings,
        variables,
        list(gpus or []),
        driver_version or "",
        mig_config_file_text or "",
    )
    _rule_removed(ctx, removed or {})
    if known_variables is not None:
        _rule_unknown(ctx, set(known_variables), removed or {})
    for rule in (
        _rule_release,
        _rule_gates,
        _rule_kubelet_extra_gates,
        _rule_cgroup_v1,
        _rule_driver,
        _rule_toolkit,
        _rule_driver_chart,
        _rule_driver_gates,
        _rule_mig,
    ):
        try:
            rule(ctx)
        except _BadValue as exc:
            ctx.add(exc.problem)
    out = []
    seen = set()
    for p in ctx.problems:
        if p.key() not in seen:
            seen.add(p.key())
            out.append(p)
    return out


def _removed_entry(entry: Any) -> tuple[str, str]:
    if isinstance(entry, Mapping):
        return str(entry.get("new") or ""), str(entry.get("fix") or "")
    return str(entry or ""), ""


def _rule_removed(ctx: _Ctx, removed: Mapping[str, Any]) -> None:
    for old in sorted(set(ctx.user) & set(removed)):
        new, fix = _removed_entry(removed[old])
        if new:
            text = f"rename it to {new}" + (f" ({fix})" if fix else "")
            message = f"was removed; {new} replaces it and this value is ignored"
        else:
            text = fix or "remove it"
            message = "was removed and this value is ignored"
        ctx.add(_p("removed-variable", ERROR, old, ctx.user[old], message, text))


#: Prefixes of role variables that the unknown-variable rule looks at.
ROLE_PREFIXES = (
    "nvidia_driver_",
    "nvidia_container_toolkit_",
    "kubeadm_",
    "dra_feature_gates_",
    "gpu_node_labels_",
    "dra_driver_",
    "mig_",
    "claim_templates_",
    "site_",
    "upgrade_",
)


def _rule_unknown(ctx: _Ctx, known: set[str], removed: Mapping[str, Any]) -> None:
    known = known | set(ROLE_DEFAULTS) | set(SITE_DEFAULTS)
    for name in sorted(ctx.user):
        if name in known or name in removed:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        if not close and not name.startswith(ROLE_PREFIXES):
            continue  # a variable of the site's own, not a misspelt role prefix
        fix = f"did you mean {close[0]}?" if close else "remove it, or check the role's spelling"
        ctx.add(
            _p(
                "unknown-variable",
                WARNING,
                name,
                ctx.user[name],
                "has the prefix of a role variable but no role declares it; it has no effect",
                fix,
            )
        )


def _rule_release(ctx: _Ctx) -> None:
    found = [(n, _text(ctx.settings, n)) for n in RELEASE_VARIABLES if _text(ctx.settings, n)]
    bootstrap = _bool(ctx.settings, "site_bootstrap")
    if bootstrap and not _text(ctx.settings, "kubeadm_kubernetes_version"):
        ctx.add(
            _p(
                "release-missing",
                ERROR,
                "kubeadm_kubernetes_version",
                ctx.settings.get("kubeadm_kubernetes_version"),
                "site_bootstrap=true bootstraps the cluster with kubeadm, which needs the "
                "release to install",
                'set kubeadm_kubernetes_version, for example "1.37.2"',
            )
        )
    parsed = []
    for name, text in found:
        v = _release(text)
        if v is None:
            ctx.add(
                _p(
                    "release-format",
                    ERROR,
                    name,
                    text,
                    "is not a Kubernetes release",
                    'write it as MAJOR.MINOR.PATCH, for example "1.37.2"',
                )
            )
            continue
        parsed.append((name, text, v))
    if not parsed:
        return
    first_name, first_text, first = parsed[0]
    for name, text, v in parsed[1:]:
        if v[:2] != first[:2] or (v[2] and first[2] and v != first):
            ctx.add(
                _p(
                    "release-mismatch",
                    ERROR,
                    name,
                    text,
                    f"differs from {first_name}={first_text}; every role must plan for the "
                    "release the cluster runs",
                    f"set {name} to {first_text}, or leave it empty to read the apiserver's",
                )
            )
    ctx.release, ctx.release_var = first, first_name
    verdict = dv.supported_for_provision(first_text)
    if not verdict.ok:
        ctx.add(
            _p(
                "release-range",
                ERROR,
                first_name,
                first_text,
                verdict.reason,
                f"choose a release from 1.{dv.PROVISION_MIN_MINOR} to 1.{dv.PROVISION_MAX_MINOR} "
                "(upgrade an older cluster first: gpufleet upgrades one minor at a time)",
            )
        )


def _as_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def _rule_gates(ctx: _Ctx) -> None:
    if ctx.release is None or not dv.supported_for_provision(_vtext(ctx.release)).ok:
        return
    version = _vtext(ctx.release)
    pairs = [("dra_feature_gates_features", "dra_feature_gates_extra")]
    if _bool(ctx.settings, "site_bootstrap"):
        pairs.append(("kubeadm_dra_features", "kubeadm_dra_gates"))
    for feat_var, gate_var in pairs:
        features = _as_list(ctx.settings.get(feat_var))
        gates = ctx.settings.get(gate_var) or {}
        if not isinstance(gates, Mapping):
            ctx.add(
                _p(
                    "gates-shape",
                    ERROR,
                    gate_var,
                    gates,
                    "must map feature-gate names to booleans",
                    f"write e.g. {gate_var}: {{DRAPrioritizedList: true}}",
                )
            )
            continue
        try:
            dv.plan_components(version, features, gates)
        except dv.VersionModelError as exc:
            variable = gate_var if gates else feat_var
            ctx.add(
                _p(
                    "gates-release",
                    ERROR,
                    variable,
                    gates if gates else features,
                    f"cannot be applied on Kubernetes {version}: {exc}",
                    f"change {feat_var} / {gate_var} to what {version} accepts "
                    f"(gpufleet gates plan --to {version} lists it)",
                )
            )
    if _bool(ctx.settings, "site_bootstrap"):
        for a, b in (
            ("kubeadm_dra_features", "dra_feature_gates_features"),
            ("kubeadm_dra_gates", "dra_feature_gates_extra"),
        ):
            va, vb = ctx.settings.get(a) or [], ctx.settings.get(b) or []
            if isinstance(va, Mapping) and isinstance(vb, Mapping):
                same = {k: _truth(v) for k, v in va.items()} == {
                    k: _truth(v) for k, v in vb.items()
                }
            else:
                same = sorted(_as_list(va)) == sorted(_as_list(vb))
            if not same:
                ctx.add(
                    _p(
                        "gates-differ",
                        WARNING,
                        a,
                        va,
                        f"differs from {b}={_short(vb)}: kubeadm bootstraps with one set and "
                        "dra_feature_gates then rewrites every component with the other "
                        "(a restart of each)",
                        f"give {a} the same value as {b}",
                    )
                )


def _rule_kubelet_extra_gates(ctx: _Ctx) -> None:
    """``featureGates`` in ``kubeadm_kubelet_extra`` (merged into the KubeletConfiguration
    the kubeadm role writes) judged against the release's full gate table: a gate the
    release does not register, or only another component registers, or a locked gate at
    the other value stops the kubelet."""
    if ctx.release is None or not _bool(ctx.settings, "site_bootstrap"):
        return
    extra = ctx.settings.get("kubeadm_kubelet_extra") or {}
    if not isinstance(extra, Mapping):
        return
    gates = extra.get("featureGates")
    if gates is None:
        return
    version = _vtext(ctx.release)
    if not isinstance(gates, Mapping) or not all(isinstance(k, str) for k in gates):
        ctx.add(
            _p(
                "gates-shape",
                ERROR,
                "kubeadm_kubelet_extra",
                gates,
                "featureGates must map feature-gate names to booleans",
                "write e.g. kubeadm_kubelet_extra: {featureGates: {DRAPrioritizedList: true}}",
            )
        )
        return
    try:
        report = dv.sanitize(dict(gates), [], version, component=dv.KUBELET)
    except dv.VersionModelError as exc:
        ctx.add(_p("gates-shape", ERROR, "kubeadm_kubelet_extra", gates, str(exc), exc.fix or ""))
        return
    for finding in report.must_remove:
        ctx.add(
            _p(
                "gates-release",
                ERROR,
                "kubeadm_kubelet_extra",
                finding.entry,
                f"featureGates {finding.entry} stops the kubelet of {version}: {finding.reason}",
                f"remove {finding.entry.partition('=')[0]} from kubeadm_kubelet_extra.featureGates "
                f"(gpufleet gates plan --to {version} --json lists the gates {version} registers)",
            )
        )


def _truth(value: Any) -> Any:
    parsed = ig.variable_bool(value) if isinstance(value, str) else None
    return value if parsed is None else parsed


def _rule_cgroup_v1(ctx: _Ctx) -> None:
    if ctx.release is None or not _bool(ctx.settings, "kubeadm_allow_cgroup_v1"):
        return
    if ctx.release[:2] < (1, 31):
        ctx.add(
            _p(
                "cgroup-v1-noop",
                WARNING,
                "kubeadm_allow_cgroup_v1",
                ctx.settings.get("kubeadm_allow_cgroup_v1"),
                f"has no effect on Kubernetes {_vtext(ctx.release)}: "
                "KubeletConfiguration.failCgroupV1 exists from 1.31 (older kubelets run on "
                "cgroup v1 without it)",
                "remove it for this release",
            )
        )


def _stack(ctx: _Ctx) -> bool:
    return ctx.is_gpu and _bool(ctx.settings, "site_install_gpu_stack")


def _rule_driver(ctx: _Ctx) -> None:
    if not ctx.is_gpu:
        return
    if _bool(ctx.settings, "dra_driver_gpu_operator") and _bool(
        ctx.settings, "site_install_gpu_stack"
    ):
        ctx.add(
            _p(
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
                _text(ctx.settings, "nvidia_driver_branch"),
                _text(ctx.settings, "nvidia_driver_version"),
                _bool(ctx.settings, "nvidia_driver_for_dra"),
            )
        except PlanError as exc:
            variable, value, message, fix = _split_plan_error(str(exc), ctx.settings)
            ctx.add(_p("driver-pin", ERROR, variable, value, message, fix))
    if ctx.driver_version:
        try:
            found = parse_driver_version(ctx.driver_version, "gpufleet_gpu_driver_version")
        except PlanError:
            return
        if found.branch < DRA_MIN_BRANCH and not _stack(ctx):
            ctx.add(
                _p(
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
    body, _, fix = text.partition("; fix: ")
    m = _PLAN_ERROR_RE.match(body)
    if m and m.group("var") in settings:
        variable = m.group("var")
        return variable, settings.get(variable), m.group("rest").strip(), fix or "see above"
    return "nvidia_driver_version", settings.get("nvidia_driver_version"), body, fix


def _rule_toolkit(ctx: _Ctx) -> None:
    if not _stack(ctx):
        return
    containerd = _text(ctx.settings, "nvidia_container_toolkit_containerd_version")
    if not containerd:
        return
    if ctx.release is not None:
        problem = dv.container_runtime_problem(containerd, _vtext(ctx.release))
        if problem:
            ctx.add(
                _p(
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
            _text(ctx.settings, "nvidia_container_toolkit_version"),
            containerd,
            _bool(ctx.settings, "nvidia_container_toolkit_enable_cdi"),
        )
    except ConfigError as exc:
        body, _, fix = str(exc).partition("; fix: ")
        if body.startswith("nvidia_container_toolkit_enable_cdi"):
            variable = "nvidia_container_toolkit_enable_cdi"
        elif body.startswith("cannot read a containerd"):
            variable = "nvidia_container_toolkit_containerd_version"
        else:
            variable = "nvidia_container_toolkit_version"
        message = body.split(": ", 1)[1] if ": " in body else body
        message += f" (nvidia_container_toolkit_containerd_version={containerd})"
        ctx.add(_p("toolkit-containerd", ERROR, variable, ctx.settings.get(variable), message, fix))


def _rule_driver_chart(ctx: _Ctx) -> None:
    text = _text(ctx.settings, "dra_driver_chart_version")
    if text and _chart_version(text) is None:
        ctx.add(
            _p(
                "chart-version-format",
                ERROR,
                "dra_driver_chart_version",
                text,
                "is not a chart version of the NVIDIA DRA driver",
                'write a release such as "25.12.0" (chart nvidia-dra-driver-gpu) or '
                '"0.4.0" (chart dra-driver-nvidia-gpu)',
            )
        )
    groups = {
        name: _text(ctx.settings, name) or "gpu_nodes"
        for name in ("gpu_node_labels_group", "dra_driver_group")
    }
    if groups["gpu_node_labels_group"] != groups["dra_driver_group"]:
        ctx.add(
            _p(
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
    if ctx.release < CHART_MIN_KUBERNETES:
        ctx.add(
            _p(
                "chart-kubernetes",
                ERROR,
                ctx.release_var,
                _vtext(ctx.release),
                f"{label} declares kubeVersion >={_vtext(CHART_MIN_KUBERNETES)} in "
                "Chart.yaml; helm refuses to install it on this release",
                f"provision Kubernetes {_vtext(CHART_DOCS_MIN_KUBERNETES)} or newer",
            )
        )
    elif ctx.release < CHART_DOCS_MIN_KUBERNETES:
        accepted = _bool(ctx.settings, "dra_driver_accept_below_documented_minimum")
        ctx.add(
            _p(
                "chart-kubernetes-docs",
                WARNING if accepted else ERROR,
                ctx.release_var,
                _vtext(ctx.release),
                f"{label} installs (kubeVersion >=1.32), but its docs/prerequisites.md "
                f"document Kubernetes {_vtext(CHART_DOCS_MIN_KUBERNETES)} as the minimum; "
                "before 1.34 DRA is beta and needs the gates and runtime-config that "
                "dra_feature_gates sets"
                + ("" if accepted else ", and the dra_driver role refuses it"),
                f"prefer Kubernetes {_vtext(CHART_DOCS_MIN_KUBERNETES)} or newer"
                + ("" if accepted else ", or set dra_driver_accept_below_documented_minimum: true"),
            )
        )


def _driver_gates(ctx: _Ctx) -> dict[str, tuple[str, Any]]:
    """Driver feature gates wanted -> (variable that asks for it, its value)."""
    out: dict[str, tuple[str, Any]] = {}
    if _bool(ctx.settings, "dra_driver_dynamic_mig"):
        out["DynamicMIG"] = ("dra_driver_dynamic_mig", ctx.settings.get("dra_driver_dynamic_mig"))
    raw_sharing = ctx.settings.get("dra_driver_sharing")
    for strategy in _sharing(raw_sharing):
        gate = SHARING_GATES.get(strategy.replace("-", "").replace("_", "").lower())
        if gate is None:
            raise _BadValue(
                _p(
                    "sharing-strategy",
                    ERROR,
                    "dra_driver_sharing",
                    raw_sharing,
                    f"{strategy!r} is not a sharing strategy of the NVIDIA DRA driver",
                    "use time-slicing or mps (GpuConfig sharing.strategy TimeSlicing, MPS)",
                )
            )
        out.setdefault(gate, ("dra_driver_sharing", raw_sharing))
    gates = ctx.settings.get("dra_driver_feature_gates") or {}
    if isinstance(gates, Mapping):
        for name, value in gates.items():
            if _truth(value) is True:
                out.setdefault(str(name), ("dra_driver_feature_gates", gates))
    return out


def _rule_driver_gates(ctx: _Ctx) -> None:
    wanted = _driver_gates(ctx)
    for a, b in DRIVER_GATE_CONFLICTS:
        if a in wanted and b in wanted:
            var_b, val_b = wanted[b]
            var_a, val_a = wanted[a]
            ctx.add(
                _p(
                    "driver-gate-conflict",
                    ERROR,
                    var_b,
                    val_b,
                    f"needs the driver feature gate {b}, and {var_a}={_short(val_a)} needs {a}; "
                    "the NVIDIA DRA driver refuses to start with both "
                    "(featuregates.go ValidateFeatureGates)",
                    f"drop one: {a} or {b}",
                )
            )
    chart_text = _text(ctx.settings, "dra_driver_chart_version")
    chart = _chart_version(chart_text) if chart_text else None
    if chart is not None:
        for gate, (var, val) in sorted(wanted.items()):
            since = DRIVER_GATE_SINCE.get(gate)
            if since and chart[:2] < since:
                ctx.add(
                    _p(
                        "driver-gate-chart",
                        ERROR,
                        var,
                        val,
                        f"needs the driver feature gate {gate}, which dra_driver_chart_version="
                        f"{chart_text} does not have (it arrived in {_vtext(since)}; calendar "
                        "releases 25.8 = 0.2, 25.12 = 0.3)",
                        "set dra_driver_chart_version to 25.12.0 or 0.4.0 or newer",
                    )
                )
    if "DynamicMIG" in wanted and ctx.release is not None:
        var, val = wanted["DynamicMIG"]
        version = _vtext(ctx.release)
        need = ".".join(map(str, ddv.DYNAMIC_MIG_KUBERNETES_MIN))
        if ctx.release[:2] < ddv.DYNAMIC_MIG_KUBERNETES_MIN:
            ctx.add(
                _p(
                    "dynamic-mig-kubernetes",
                    ERROR,
                    var,
                    val,
                    f"DynamicMIG publishes partitionable devices, which Kubernetes {version} "
                    f"lacks (the driver supports them from {need})",
                    f"provision {need} or newer, or set dra_driver_dynamic_mig: false",
                )
            )
        elif dv.PROVISION_MIN_MINOR <= ctx.release[1] <= dv.PROVISION_MAX_MINOR and (
            not _partitionable_on(ctx, version)
        ):
            ctx.add(
                _p(
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


def _partitionable_on(ctx: _Ctx, version: str) -> bool:
    features = _as_list(ctx.settings.get("dra_feature_gates_features"))
    gates = ctx.settings.get("dra_feature_gates_extra") or {}
    try:
        plan = dv.plan_components(version, features, gates if isinstance(gates, Mapping) else {})
    except dv.VersionModelError:
        return True  # reported by the gates rule
    if "DRAPartitionableDevices" in plan.wishes:
        return bool(plan.wishes["DRAPartitionableDevices"])
    state = dv.gate_state("DRAPartitionableDevices", version)
    return state.known and state.default


def _models(ctx: _Ctx) -> list[tuple[str, Any, mprof.GpuModel | None, str]]:
    """GPU models of the host: (variable, value, model or None, error text)."""
    name = _text(ctx.settings, "gpu_model")
    if name:
        try:
            return [("gpu_model", name, mprof.model(name), "")]
        except mprof.UnknownGpuModel as exc:
            return [("gpu_model", name, None, str(exc))]
    out = []
    for gpu_name in sorted({str(g.get("name") or "") for g in ctx.gpus if g.get("name")}):
        try:
            out.append(("gpufleet_gpus", gpu_name, mprof.model(gpu_name), ""))
        except mprof.UnknownGpuModel as exc:
            out.append(("gpufleet_gpus", gpu_name, None, str(exc)))
    return out


def _rule_mig(ctx: _Ctx) -> None:
    layout = ctx.settings.get("mig_layout") or {}
    config = ctx.settings.get("mig_config") or {}
    name = _text(ctx.settings, "mig_config_name")
    config_file = _text(ctx.settings, "mig_config_file")
    if layout and not _bool(ctx.settings, "mig_enabled"):
        ctx.add(
            _p(
                "mig-layout-disabled",
                ERROR,
                "mig_layout",
                layout,
                "mig_enabled=false turns MIG off, and MIG devices cannot exist without it",
                "set mig_layout: {} to turn MIG off, or mig_enabled: true",
            )
        )
    if layout and (config or config_file or name):
        other = "mig_config_name" if name else ("mig_config" if config else "mig_config_file")
        ctx.add(
            _p(
                "mig-layout-and-config",
                ERROR,
                "mig_layout",
                layout,
                f"and {other} both say what to carve; the mig role takes one",
                f"keep mig_layout, or {other} (with mig_config_name) alone",
            )
        )
    if not layout and not name:
        return
    _rule_mig_plugin_namespace(ctx)
    if _bool(ctx.settings, "dra_driver_dynamic_mig"):
        var = "mig_layout" if layout else ("mig_config_name" if name else "mig_config")
        ctx.add(
            _p(
                "mig-with-dynamic-mig",
                ERROR,
                var,
                ctx.settings.get(var),
                "a static MIG layout and the DRA driver's DynamicMIG exclude each other: at "
                "start the driver destroys the MIG devices it did not create "
                "(DestroyUnknownMIGDevices), and it carves MIG itself per claim",
                f"remove {var} on this node group, or set dra_driver_dynamic_mig: false",
            )
        )
    wanted: dict[str, int] | None = None
    selected: mp.MigConfig | None = None
    if layout:
        try:
            wanted = mp.parse_layout(layout, name="mig_layout")
        except ValueError as exc:
            ctx.add(
                _p(
                    "mig-layout-format",
                    ERROR,
                    "mig_layout",
                    layout,
                    str(exc),
                    'write MIG profile -> count per GPU, e.g. {"1g.18gb": 7}',
                )
            )
            return
    else:
        if not config and config_file:
            text = ctx.mig_config_file_text
            if not text:
                ctx.add(
                    _p(
                        "mig-config-file",
                        ERROR,
                        "mig_config_file",
                        config_file,
                        "cannot be read on the control host",
                        "give the path of a mig-parted config file on the control host",
                    )
                )
                return
            config = text
        if not config:
            ctx.add(
                _p(
                    "mig-config-missing",
                    ERROR,
                    "mig_config_name",
                    name,
                    "names a config but mig_config and mig_config_file are empty",
                    "set mig_config to a mig-parted config (version: v1, mig-configs: ...)",
                )
            )
            return
        try:
            parsed = mp.load_mig_config(config)
        except mp.MigConfigError as exc:
            ctx.add(
                _p(
                    "mig-config-format",
                    ERROR,
                    f"mig_config.{exc.key}",
                    exc.value,
                    exc.problem,
                    exc.fix,
                )
            )
            return
        if name not in parsed.configs:
            ctx.add(
                _p(
                    "mig-config-name",
                    ERROR,
                    "mig_config_name",
                    name,
                    "is not a config of mig_config",
                    "choose one of: " + ", ".join(parsed.names),
                )
            )
            return
        selected = mp.MigConfig(parsed.version, {name: parsed.configs[name]})
    models = _models(ctx)
    if not models:
        ctx.add(
            _p(
                "mig-gpu-model-unknown",
                WARNING,
                "gpu_model",
                None,
                "the MIG layout cannot be checked against the GPU: the node group has no "
                "gpu_model and no GPU facts were gathered",
                'set gpu_model on the node group, e.g. gpu_model: "NVIDIA H200" (or run '
                "preflight with preflight_gather_gpu_facts: true)",
            )
        )
        return
    for var, value, model, error in models:
        if model is None:
            ctx.add(
                _p(
                    "mig-gpu-model",
                    ERROR,
                    var,
                    value,
                    error,
                    "set gpu_model to the GPU's NVML name (nvidia-smi --query-gpu=name)",
                )
            )
            continue
        if wanted is not None:
            _check_layout(ctx, model, wanted)
        elif selected is not None:
            for prob in mp.check_config(selected, model):
                entries = selected.configs[name]
                value: Any = name
                if prob.entry is not None and prob.entry < len(entries):
                    value = dict(entries[prob.entry].mig_devices)
                message, _, fix = prob.message.partition(". Fix: ")
                ctx.add(
                    _p(
                        "mig-layout-fit",
                        ERROR if prob.severity == "error" else WARNING,
                        f"mig_config.{prob.key}",
                        value,
                        f"mig_config_name={name} on {model.name}: {message}",
                        fix
                        or "change the config's mig-devices to a layout the GPU model takes "
                        "(gpufleet mig plan shows one)",
                    )
                )


def _rule_mig_plugin_namespace(ctx: _Ctx) -> None:
    if not _bool(ctx.settings, "mig_restart_dra_plugin"):
        return
    ns_driver = _text(ctx.settings, "dra_driver_namespace")
    ns_mig = _text(ctx.settings, "mig_dra_plugin_namespace") or ns_driver  # the role's default
    if ns_mig and ns_driver and ns_mig != ns_driver:
        ctx.add(
            _p(
                "mig-plugin-namespace",
                ERROR,
                "mig_dra_plugin_namespace",
                ns_mig,
                f"differs from dra_driver_namespace={ns_driver}: after carving, the mig role "
                "restarts the node's DRA kubelet plugin pod in its namespace and would not "
                "find it",
                f"set mig_dra_plugin_namespace: {ns_driver}",
            )
        )


def _check_layout(ctx: _Ctx, model: mprof.GpuModel, wanted: Mapping[str, int]) -> None:
    try:
        mp.plan(model, wanted)
    except mprof.UnknownProfile as exc:
        ctx.add(
            _p(
                "mig-layout-fit",
                ERROR,
                "mig_layout",
                dict(wanted),
                str(exc),
                f"use the profiles of {model.name}",
            )
        )
    except mp.LayoutDoesNotFit as exc:
        reason, _, fix = exc.reason.partition(". Fix: ")
        ctx.add(
            _p(
                "mig-layout-fit",
                ERROR,
                "mig_layout",
                dict(wanted),
                reason,
                fix or "ask for fewer or smaller instances",
            )
        )


# --- whole inventory --------------------------------------------------------------------


def _spec_problems(
    variables: Mapping[str, Any], role_specs: Mapping[str, Mapping[str, Any]]
) -> Iterator[Problem]:
    for role, name, value, message in ps.argument_spec_problems(variables, role_specs):
        spec = role_specs[role][name]
        wanted = str(spec.get("type") or "str")
        if spec.get("elements"):
            wanted += f" of {spec['elements']}"
        if spec.get("choices"):
            wanted += " (one of " + ", ".join(map(str, spec["choices"])) + ")"
        yield _p(
            "argument-spec",
            ERROR,
            name,
            value,
            f"the {role} role's argument spec refuses it: {message}",
            f"give {name} as {wanted} (roles/{role}/meta/argument_specs.yml)",
        )


def check_inventory(
    hosts: Mapping[str, Mapping[str, Any]],
    removed: Mapping[str, Any] | None = None,
    known_variables: Iterable[str] | None = None,
    role_specs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Problem]:
    """Run every rule on every host; merge identical problems; add inventory-wide ones.

    ``hosts``: inventory host -> ``{"groups", "variables", "gpus", "driver_version"}`` (see
    the module docstring); ``role_specs``: role -> options of its argument spec
    (:func:`preflight_specs.load_role_specs`), each value a host sets judged by it. Returns
    problems sorted errors first, then by rule and variable; each lists the hosts it
    applies to. Inventory-wide: the GPU group has no host (error), hosts disagree on the
    Kubernetes release (error).
    """
    known = list(known_variables) if known_variables is not None else None
    merged: dict[tuple, list[str]] = {}
    first: dict[tuple, Problem] = {}
    releases: dict[str, list[str]] = {}
    gpu_groups: set[str] = set()
    any_gpu = False
    for host in sorted(hosts):
        data = hosts[host] or {}
        groups = list(data.get("groups") or [])
        variables = dict(data.get("variables") or {})
        settings = {**ROLE_DEFAULTS, **variables}
        gpu_group = _text(settings, "gpu_node_labels_group") or "gpu_nodes"
        gpu_groups.add(gpu_group)
        any_gpu = any_gpu or gpu_group in groups
        for name in RELEASE_VARIABLES:
            text = _text(settings, name)
            if text:
                releases.setdefault(text, []).append(host)
                break
        for p in check_host(
            host,
            groups,
            variables,
            removed=removed,
            known_variables=known,
            gpus=data.get("gpus") or [],
            driver_version=str(data.get("driver_version") or ""),
            mig_config_file_text=str(data.get("mig_config_file_text") or ""),
        ):
            merged.setdefault(p.key(), []).append(host)
            first.setdefault(p.key(), p)
        for p in _spec_problems(variables, role_specs or {}):
            merged.setdefault(p.key(), []).append(host)
            first.setdefault(p.key(), p)
    out = [
        Problem(p.rule, p.severity, p.variable, p.value, p.message, p.fix, tuple(merged[k]))
        for k, p in first.items()
    ]
    if hosts and not any_gpu:
        group = sorted(gpu_groups)[0] if gpu_groups else "gpu_nodes"
        out.append(
            _p(
                "gpu-group-empty",
                ERROR,
                "gpu_node_labels_group",
                group,
                f"no inventory host is in the group {group!r}: no node would get the GPU "
                "stack, the labels or the DRA kubelet plugin",
                f"put the GPU hosts in {group!r} (children groups per GPU model), or set "
                "gpu_node_labels_group to the group that holds them",
            )
        )
    if len(releases) > 1:
        desc = "; ".join(f"{v} on {_hosts_text(h, hosts)}" for v, h in sorted(releases.items()))
        out.append(
            _p(
                "release-hosts-differ",
                ERROR,
                "kubeadm_kubernetes_version",
                sorted(releases),
                f"hosts plan for different Kubernetes releases ({desc})",
                "set the release once for the whole cluster (group_vars/all.yml); change it "
                "with the upgrade playbook, one minor at a time",
            )
        )
    out.sort(key=lambda p: (p.severity != ERROR, p.rule, p.variable, p.hosts))
    return out


def _hosts_text(names: Sequence[str], hosts: Mapping[str, Mapping[str, Any]]) -> str:
    """``all 12 hosts``, ``group gpu_h200 (4 hosts)``, or the first names and a count."""
    chosen = set(names)
    if chosen == set(hosts) and len(hosts) > 1:
        return f"all {len(hosts)} hosts"
    members: dict[str, set[str]] = {}
    for host, data in hosts.items():
        for g in (data or {}).get("groups") or []:
            members.setdefault(g, set()).add(host)
    ordered = sorted(chosen)
    exact = sorted(g for g, m in members.items() if m == chosen)
    if exact and len(chosen) > _HOSTS_LISTED:
        return f"group {exact[0]} ({len(chosen)} hosts)"
    text = ", ".join(ordered[:_HOSTS_LISTED])
    if len(ordered) > _HOSTS_LISTED:
        text += f" and {len(ordered) - _HOSTS_LISTED} more"
    return text


def format_report(
    problems: Sequence[Problem], hosts: Mapping[str, Mapping[str, Any]] | None = None
) -> str:
    """One paragraph per problem: ``ERROR rule: variable=value (on hosts): message; fix: ...``."""
    errors = sum(1 for p in problems if p.severity == ERROR)
    warnings = len(problems) - errors
    lines = [f"preflight: {errors} error(s), {warnings} warning(s)"]
    for p in problems:
        where = f" (on {_hosts_text(p.hosts, hosts or {})})" if p.hosts else ""
        lines.append(
            f"{p.severity.upper()} [{p.rule}] {p.variable}={_short(p.value)}{where}: "
            f"{p.message}; fix: {p.fix}"
        )
    return "\n".join(lines)
