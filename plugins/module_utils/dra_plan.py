# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: DRA features, parsing of settings, and the per-component plan.

Import the model through ``dra_versions``, which re-exports every public name of its parts."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ansible_collections.gpufleet.cluster.plugins.module_utils import k8s_releases as _releases
from ansible_collections.gpufleet.cluster.plugins.module_utils import kube_flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_api import (
    _CORE_RUNTIME_CONFIG,
    _DTR,
    _RPSR,
    ALL_RESOURCE_VERSIONS,
    KubeadmConfigAPI,
    _kubeadm,
    _served,
    _version_for_kind,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_core import (
    ALPHA,
    APISERVER,
    BETA,
    COMPONENTS,
    DEPENDENCIES_DECLARED_SINCE,
    DRA_GATE,
    MAX_MINOR,
    MIN_MINOR,
    PROJECTED_MINORS,
    RESOURCE_GROUP,
    UNVERIFIED_MINORS,
    KubeVersion,
    VersionLike,
    VersionModelError,
    VersionParseError,
    _in_model,
    _mv,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_gates import (
    GATES,
    REMOVED,
    GateState,
    _gate_def,
    gate_state,
    prerelease_source,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_skew import (
    ProvisionVerdict,
    known_bad_releases,
    supported_for_provision,
)

# --------------------------------------------------------------------------------------
# Features asked for by name
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureDef:
    """A DRA capability a user asks for by name.

    ``gates``: gates to enable (their dependencies are added); ``api_kinds``:
    resource.k8s.io kinds it needs served (the most stable served version carrying the kind
    is enabled with --runtime-config when off by default); ``core_before``: before this
    minor the capability is part of DynamicResourceAllocation itself.
    """

    name: str
    gates: tuple[str, ...]
    description: str
    api_kinds: tuple[str, ...] = ()
    core_before: int | None = None


_FEATURE_LIST = (
    FeatureDef(
        "admin-access", ("DRAAdminAccess",), "privileged claims (adminAccess) for monitoring"
    ),
    FeatureDef("binding-conditions", ("DRADeviceBindingConditions",), "device binding conditions"),
    FeatureDef("consumable-capacity", ("DRAConsumableCapacity",), "share a device by capacity"),
    FeatureDef(
        "control-plane-controller",
        ("DRAControlPlaneController",),
        "classic DRA with a driver control-plane controller",
        core_before=31,
    ),
    FeatureDef("derived-attributes", ("DRADerivedAttributes",), "derived device attributes"),
    FeatureDef(
        "device-compatibility-groups",
        ("DRADeviceCompatibilityGroups",),
        "compatibility groups of partitionable devices",
    ),
    FeatureDef("device-health", ("ResourceHealthStatus",), "device health in Pod status"),
    FeatureDef("device-status", ("DRAResourceClaimDeviceStatus",), "driver-reported device status"),
    FeatureDef(
        "device-taint-rules",
        ("DRADeviceTaintRules",),
        "DeviceTaintRule objects",
        api_kinds=(_DTR,),
    ),
    FeatureDef("device-taints", ("DRADeviceTaints",), "device taints and tolerations"),
    FeatureDef(
        "extended-resource",
        ("DRAExtendedResource",),
        "extended resources (e.g. nvidia.com/gpu) backed by DRA (DeviceClass extendedResourceName)",
    ),
    FeatureDef(
        "fractional-capacity-range", ("DRAFractionalCapacityRange",), "fractional capacity ranges"
    ),
    FeatureDef(
        "granular-status-authorization",
        ("DRAResourceClaimGranularStatusAuthorization",),
        "per-field ResourceClaim status authorization",
    ),
    FeatureDef("list-type-attributes", ("DRAListTypeAttributes",), "list-typed device attributes"),
    FeatureDef(
        "node-allocatable-resources",
        ("DRANodeAllocatableResources",),
        "node allocatable resources backed by DRA",
    ),
    FeatureDef(
        "optional-node-operations", ("DRAOptionalNodeOperations",), "optional node operations"
    ),
    FeatureDef(
        "partitionable-devices", ("DRAPartitionableDevices",), "partitionable devices (MIG)"
    ),
    FeatureDef(
        "partitionable-devices-type",
        ("DRAPartitionableDevicesType",),
        "partitionable device types in pool status",
    ),
    FeatureDef(
        "pod-resources-api",
        ("KubeletPodResourcesDynamicResources",),
        "DRA devices in the kubelet PodResources API",
    ),
    FeatureDef("prioritized-list", ("DRAPrioritizedList",), "firstAvailable sub-requests"),
    FeatureDef(
        "resource-pool-status",
        ("DRAResourcePoolStatus",),
        "ResourcePoolStatusRequest objects",
        api_kinds=(_RPSR,),
    ),
    FeatureDef(
        "scheduler-filter-timeout", ("DRASchedulerFilterTimeout",), "scheduler Filter timeout"
    ),
    FeatureDef(
        "workload-resource-claims",
        ("DRAWorkloadResourceClaims",),
        "ResourceClaims for workloads (GenericWorkload)",
    ),
)

#: feature name -> FeatureDef.
FEATURES: dict[str, FeatureDef] = {f.name: f for f in _FEATURE_LIST}
ALL_FEATURES = tuple(sorted(FEATURES))


def _feature_def(name: str) -> FeatureDef:
    try:
        return FEATURES[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(FEATURES), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise VersionParseError(
            f"feature {name!r} is not a DRA feature the version model knows{hint}.",
            "use one of: {}.".format(", ".join(ALL_FEATURES)),
        ) from None


def _locked_since(name: str) -> str:
    """``1.N``: the first minor of the model at which gate ``name`` is locked to its default
    (the generated releases' specs), or ``"its GA release"`` when none locks it."""
    for minor in range(MIN_MINOR, MAX_MINOR + 1):
        st = gate_state(name, KubeVersion(1, minor, 0))
        if st.known and st.locked:
            return _mv(minor)
    return "its GA release"


# --------------------------------------------------------------------------------------
# Parsing of existing settings
# --------------------------------------------------------------------------------------


def parse_feature_gates(value: str, name: str = "feature-gates") -> dict[str, bool]:
    """Parse ``"A=true,B=0"`` (the --feature-gates flag) into ``{"A": True, "B": False}``
    by the one flag parser (:func:`kube_flags.parse_feature_gates`: Go's
    ``strconv.ParseBool`` values, as the components read them; a later entry wins).

    Raises VersionParseError naming ``name`` and the bad entry.
    """
    try:
        entries = kfl.parse_feature_gates(value, name)
    except kfl.FlagValueError as exc:
        text, _, fix = str(exc).partition("; fix: ")
        raise VersionParseError(text + ".", fix or "write NAME=true or NAME=false.") from None
    return {e.key: bool(kfl.parse_go_bool(e.value)) for e in entries}


def _parse_bool(value: str | bool, what: str) -> bool:
    """A gate's value: a boolean, or a string Go's ``strconv.ParseBool`` reads (``1``,
    ``t``, ``TRUE``, ...), as the components read it. Raises VersionParseError."""
    if isinstance(value, bool):
        return value
    parsed = kfl.parse_go_bool(str(value).strip())
    if parsed is None:
        raise VersionParseError(
            f"{what} has value {value!r}, not a boolean.", f"use {kfl.GO_BOOL_HELP}."
        )
    return parsed


def feature_gates_string(gates: Mapping[str, bool]) -> str:
    """``{"B": False, "A": True}`` -> ``"A=true,B=false"`` (sorted, the --feature-gates form)."""
    return ",".join("{}={}".format(k, "true" if gates[k] else "false") for k in sorted(gates))


def parse_runtime_config(value: str | Sequence[str]) -> list[tuple[str, str]]:
    """Split --runtime-config (a string ``"a/b=true,c/d"`` or a list of entries) into
    ``[(key, value)]``; an entry without ``=`` means ``true``."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for raw in items:
        for part in raw.split(","):
            entry = part.strip()
            if not entry:
                continue
            key, sep, val = entry.partition("=")
            out.append((key.strip(), val.strip() if sep else "true"))
    return out


# --------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Forbidden:
    """A feature-gate entry that must not appear: ``values`` are the forbidden values
    (both for an unknown gate); ``reason`` says why."""

    values: tuple[bool, ...]
    reason: str


@dataclass
class ComponentSettings:
    """What one component needs at one version.

    ``feature_gates``: entries to set (name -> value); ``forbidden_gates``: entries that
    would stop the component (name -> Forbidden); ``runtime_config``: entries to add
    (kube-apiserver only, e.g. "resource.k8s.io/v1beta1=true");
    ``runtime_config_absent``: group/versions that must not appear in --runtime-config
    (-> reason), kube-apiserver only.
    """

    component: str
    feature_gates: dict[str, bool] = field(default_factory=dict)
    forbidden_gates: dict[str, Forbidden] = field(default_factory=dict)
    runtime_config: list[str] = field(default_factory=list)
    runtime_config_absent: dict[str, str] = field(default_factory=dict)

    @property
    def feature_gates_flag(self) -> str:
        return feature_gates_string(self.feature_gates)

    def to_dict(self) -> dict:
        return {
            "component": self.component,
            "feature_gates": {k: self.feature_gates[k] for k in sorted(self.feature_gates)},
            "feature_gates_flag": self.feature_gates_flag,
            "forbidden_gates": {
                k: {"values": list(v.values), "reason": v.reason}
                for k, v in sorted(self.forbidden_gates.items())
            },
            "runtime_config": sorted(self.runtime_config),
            "runtime_config_absent": dict(sorted(self.runtime_config_absent.items())),
        }


@dataclass
class ComponentPlan:
    """Settings per component for DRA at ``version``.

    ``features``: features planned; ``wishes``: effective gate wishes (name -> value);
    ``components``: component name -> ComponentSettings (all four always present);
    ``omitted``: wished gates deliberately not emitted -> reason (GA on by default, locked);
    ``kubeadm``: the kubeadm configuration API; ``warnings``: projections, known-bad patches.
    """

    version: KubeVersion
    features: tuple[str, ...]
    wishes: dict[str, bool]
    components: dict[str, ComponentSettings]
    omitted: dict[str, str]
    kubeadm: KubeadmConfigAPI
    warnings: list[str] = field(default_factory=list)
    dropped_wishes: dict[str, str] = field(default_factory=dict)

    @property
    def runtime_config(self) -> list[str]:
        return sorted(self.components[APISERVER].runtime_config)

    @property
    def runtime_config_flag(self) -> str:
        return ",".join(self.runtime_config)

    def emitted(self) -> dict[str, dict[str, bool]]:
        """component -> feature-gate entries."""
        return {c: dict(self.components[c].feature_gates) for c in COMPONENTS}

    def to_dict(self) -> dict:
        return {
            "version": str(self.version),
            "minor": self.version.minor_version,
            "projected": self.version.minor in PROJECTED_MINORS,
            "features": list(self.features),
            "wishes": {k: self.wishes[k] for k in sorted(self.wishes)},
            "components": {c: self.components[c].to_dict() for c in COMPONENTS},
            "runtime_config_flag": self.runtime_config_flag,
            "omitted": dict(sorted(self.omitted.items())),
            "kubeadm": {
                "preferred": self.kubeadm.preferred,
                "accepted": list(self.kubeadm.accepted),
                "deprecated": list(self.kubeadm.deprecated),
                "experimental": list(self.kubeadm.experimental),
                "extra_args_shape": self.kubeadm.extra_args_shape,
            },
            "provision": _verdict_dict(supported_for_provision(self.version)),
            "warnings": list(self.warnings),
        }


def _verdict_dict(v: ProvisionVerdict) -> dict:
    return {"supported": v.ok, "reason": v.reason}


def _fmt(gate: str, value: bool) -> str:
    return "{}={}".format(gate, "true" if value else "false")


def _unknown_reason(st: GateState) -> str:
    if st.status == REMOVED:
        return (
            f"removed in {_mv(st.removed_in or st.minor)}: every component of {_mv(st.minor)} "
            f"refuses to start with 'unrecognized feature gate: {st.gate}'"
        )
    return (
        f"introduced in {_mv(st.since)}: every component of {_mv(st.minor)} refuses to start with "
        f"'unrecognized feature gate: {st.gate}'"
    )


def unregistered_gate_reason(name: str, minor: int) -> str:
    """Why a gate that no generated release registers stops a component of ``minor``."""
    rel = _releases.release(minor)
    source = rel.release if rel else _mv(minor)
    close = difflib.get_close_matches(name, sorted(rel.gates) if rel else [], n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return (
        f"Kubernetes {source} registers no feature gate {name}{hint}, nor does any release "
        f"of the model: every component refuses to start with 'unrecognized feature gate: "
        f"{name}'"
    )


def _locked_reason(st: GateState) -> str:
    text = "locked to {} in {}: 'cannot set feature gate {} to {}, feature is locked to {}'".format(
        "true" if st.default else "false",
        _mv(st.minor),
        st.gate,
        "false" if st.default else "true",
        "true" if st.default else "false",
    )
    return text


def _forbidden_at(minor: int) -> dict[str, Forbidden]:
    out = {}
    for name in GATES:
        st = gate_state(name, _kv(minor))
        if not st.known:
            out[name] = Forbidden((True, False), _unknown_reason(st))
        elif st.locked:
            out[name] = Forbidden((not st.default,), _locked_reason(st))
    return out


def _unserved_reason(minor: int, ver: str) -> str:
    return (
        f"Kubernetes {_mv(minor)} does not serve {RESOURCE_GROUP}/{ver}; kube-apiserver refuses "
        "to start with it in --runtime-config"
    )


def _kv(minor: int) -> KubeVersion:
    return KubeVersion(1, minor)


def _closure(gates: Iterable[str]) -> list[str]:
    """Gates plus their declared dependencies, transitively (dependencies first)."""
    seen: list[str] = []

    def visit(name: str) -> None:
        if name in seen:
            return
        for dep in _gate_def(name).depends_on:
            visit(dep)
        seen.append(name)

    for g in gates:
        visit(g)
    return seen


def _needs_dra(name: str) -> bool:
    """Gates that have no effect unless DynamicResourceAllocation is on (all DRA gates and
    those declaring it as a dependency)."""
    g = _gate_def(name)
    return name != DRA_GATE and (g.dra or DRA_GATE in g.depends_on)


def _on_after_removal(name: str) -> bool:
    """True for a gate removed after being locked on: its feature is simply always on."""
    last = _gate_def(name).specs[-1]
    return _gate_def(name).removed is not None and last.locked and last.default


def _enabled_at(states: Mapping[str, GateState], wishes: Mapping[str, bool], name: str) -> bool:
    st = states[name]
    if not st.known:
        return st.status == REMOVED and _on_after_removal(name)
    return wishes.get(name, st.default)


_GA_RISK = "setting it only risks 'unrecognized feature gate' once it is removed"


def _emit(st: GateState, value: bool) -> tuple[bool, str]:
    """The GA-gate policy: whether a wished value is written as a feature-gates entry.

    * never a locked gate (it can only hold its default, and setting it breaks the
      component once the gate is removed);
    * ``=true`` for an alpha or beta gate (pins beta gates that are on by default, so that
      the wish survives a default change), and for any gate off by default;
    * nothing for a GA gate on by default (setting it only risks "unrecognized feature
      gate" after its removal) and nothing for ``=false`` on a gate off by default;
    * ``=false`` for a gate on by default that is not locked.
    Returns (emit, reason when not emitted).
    """
    if st.locked:
        held = "true" if st.default else "false"
        return False, f"{st.describe()}: Kubernetes holds it at {held}, it is never set"
    if value != st.default:
        return True, ""
    if value and st.stage in (ALPHA, BETA):
        return True, ""
    if value:
        return (
            False,
            f"{st.describe()}: {_GA_RISK}",
        )
    return False, f"{st.describe()}: already off"


def plan_components(
    version: VersionLike,
    features: Iterable[str] = (),
    gates: Mapping[str, bool | str] | None = None,
) -> ComponentPlan:
    """Plan the DRA settings of kube-apiserver, kube-controller-manager, kube-scheduler and
    kubelet at ``version``.

    ``features``: capability names (``FEATURES``); ``gates``: explicit gate wishes
    (name -> bool). Core DRA is always wished (``DynamicResourceAllocation=true`` while the
    gate exists, plus the alpha/beta API versions the core objects need before 1.34) unless
    ``gates`` says ``DynamicResourceAllocation=false``.

    Returns a ComponentPlan. Raises VersionModelError for an impossible wish (a gate the
    version does not know or no longer knows, a locked gate at the other value, a gate
    enabled without its dependencies, a feature the version lacks) with the reason and
    the fix; VersionParseError for a malformed version, an unknown feature name or a
    non-boolean gate value.
    """
    return _plan(
        _in_model(version, "target version"), tuple(features), dict(gates or {}), strict=True
    )


def _plan(
    v: KubeVersion, features: tuple[str, ...], raw_gates: dict[str, bool | str], strict: bool
) -> ComponentPlan:
    minor = v.minor
    states = {name: gate_state(name, v) for name in (*GATES, *raw_gates)}
    explicit: dict[str, bool] = {}
    for name, val in raw_gates.items():
        _gate_def(name)
        explicit[name] = _parse_bool(val, f"gate {name}")
    feature_defs = []
    for fname in features:
        fd = _feature_def(fname)
        if fd not in feature_defs:
            feature_defs.append(fd)
    dropped: dict[str, str] = {}

    def refuse(reason: str, fix: str, key: str) -> None:
        if strict:
            raise VersionModelError(reason, fix)
        dropped[key] = reason

    # 1. Explicit gate wishes must be possible at this minor.
    for name in list(explicit):
        val = explicit[name]
        st = states[name]
        if not st.known:
            if st.status == REMOVED:
                fix = f"remove {name} from the feature gates of every component"
                if name == "DRAControlPlaneController":
                    fix += (
                        "; classic DRA with a control-plane controller ended in 1.31, "
                        "use structured parameters (DRA drivers publishing ResourceSlices)"
                    )
                elif name == DRA_GATE:
                    fix += f"; DRA is always on from {_locked_since(name)}, nothing needs to be set"
            else:
                fix = f"drop {_fmt(name, val)} or target {_mv(st.since)} or newer"
            refuse(
                f"{_fmt(name, val)} cannot be set on Kubernetes {v}: the gate is "
                f"{_unknown_reason(st)}.",
                fix + ".",
                name,
            )
            del explicit[name]
            continue
        if st.locked and val != st.default:
            extra = ""
            if name == DRA_GATE:
                extra = f"; DRA cannot be turned off from {_locked_since(name)}"
            refuse(
                f"{_fmt(name, val)} is impossible on Kubernetes {v}: the gate is "
                f"{_locked_reason(st)}.",
                f"remove {_fmt(name, val)}{extra}.",
                name,
            )
            del explicit[name]

    # 2. Wishes: core DRA, features (with their dependencies), explicit gates.
    wishes: dict[str, bool] = {}
    dra_off = explicit.get(DRA_GATE) is False
    if states[DRA_GATE].known and not dra_off:
        wishes[DRA_GATE] = True
    planned_features: list[str] = []
    api_kinds: list[tuple[str, str]] = []
    for fd in feature_defs:
        if fd.core_before is not None and minor < fd.core_before:
            planned_features.append(fd.name)
            continue
        missing = [g for g in fd.gates if not states[g].known]
        if missing:
            st = states[missing[0]]
            if st.status == REMOVED:
                fix = (
                    f"drop feature {fd.name} (its gate {st.gate} was removed in "
                    f"{_mv(st.removed_in or minor)})"
                )
            else:
                fix = f"target {_mv(st.since)} or newer, or drop feature {fd.name}"
            refuse(
                "feature {} needs feature gate {}, which Kubernetes {} {}.".format(
                    fd.name,
                    st.gate,
                    v,
                    f"no longer has (removed in {_mv(st.removed_in or minor)})"
                    if st.status == REMOVED
                    else f"does not have yet (introduced in {_mv(st.since)})",
                ),
                fix + ".",
                "feature " + fd.name,
            )
            continue
        if dra_off:
            refuse(
                f"feature {fd.name} needs DynamicResourceAllocation, but "
                "DynamicResourceAllocation=false was asked for.",
                f"drop DynamicResourceAllocation=false or drop feature {fd.name}.",
                "feature " + fd.name,
            )
            continue
        conflict = None
        for g in _closure(fd.gates):
            if explicit.get(g) is False:
                conflict = g
                break
        if conflict:
            refuse(
                f"feature {fd.name} needs {conflict}=true, but {conflict}=false was asked for.",
                f"drop {conflict}=false or drop feature {fd.name}.",
                "feature " + fd.name,
            )
            continue
        blocked = None
        for g in _closure(fd.gates):
            st = states[g]
            if st.status == REMOVED and _on_after_removal(g):
                continue
            if not st.known or (st.locked and not st.default):
                blocked = st
                break
        if blocked is not None:
            refuse(
                f"feature {fd.name} needs {blocked.gate}, which is {blocked.describe()} in "
                f"Kubernetes {v}.",
                f"drop feature {fd.name}.",
                "feature " + fd.name,
            )
            continue
        kinds_ok = True
        for kind in fd.api_kinds:
            ver = _version_for_kind(minor, kind)
            if ver is None:
                refuse(
                    f"feature {fd.name} needs the {kind} kind, which no resource.k8s.io version of "
                    f"Kubernetes {v} serves.",
                    f"drop feature {fd.name}.",
                    "feature " + fd.name,
                )
                kinds_ok = False
                break
        if not kinds_ok:
            continue
        for g in _closure(fd.gates):
            if states[g].known:
                wishes[g] = True
        api_kinds.extend((fd.name, k) for k in fd.api_kinds)
        planned_features.append(fd.name)
    wishes.update(explicit)
    if dra_off:
        wishes[DRA_GATE] = False

    # 3. Effective state and dependencies.
    effective = {n: _enabled_at(states, wishes, n) for n in states}
    for name in sorted(wishes):
        st = states[name]
        if not st.known or not wishes[name]:
            continue
        missing_deps = [d for d in _gate_def(name).depends_on if not effective.get(d)]
        if (
            _needs_dra(name)
            and not effective.get(DRA_GATE)
            and DRA_GATE not in missing_deps
            and states[DRA_GATE].known
        ):
            missing_deps.append(DRA_GATE)
        if missing_deps:
            refuse(
                "{} needs {}, which {}.".format(
                    _fmt(name, True),
                    " and ".join(_fmt(d, True) for d in missing_deps),
                    "is not enabled" if len(missing_deps) == 1 else "are not enabled",
                ),
                "also set {} (or ask for a feature that needs {}), or drop {}.".format(
                    ", ".join(_fmt(d, True) for d in missing_deps), name, _fmt(name, True)
                ),
                name,
            )
            wishes.pop(name, None)
            effective[name] = _enabled_at(states, wishes, name)
    if minor >= DEPENDENCIES_DECLARED_SINCE:
        # Kubernetes checks every enabled gate, default or not, at start-up.
        for name, st in states.items():
            if not st.known or not effective[name]:
                continue
            off = [d for d in _gate_def(name).depends_on if not effective.get(d)]
            if off:
                turned_off = [d for d in off if wishes.get(d) is False]
                refuse(
                    "{} is enabled ({}) but depends on {}; Kubernetes {} refuses to start: "
                    "'{} is enabled, but depends on features that are disabled: [{}]'.".format(
                        name,
                        "asked for" if wishes.get(name) else "on by default",
                        ", ".join(_fmt(d, False) for d in off),
                        v,
                        name,
                        " ".join(off),
                    ),
                    "also set {}, or drop {}.".format(
                        _fmt(name, False), ", ".join(_fmt(d, False) for d in turned_off or off)
                    ),
                    name,
                )
                effective[name] = False
                wishes[name] = False
    wishes = {k: val for k, val in wishes.items() if states[k].known}

    # 4. Emission per component.
    components = {c: ComponentSettings(c) for c in COMPONENTS}
    omitted: dict[str, str] = {}
    emit: dict[str, bool] = {}
    for name in sorted(wishes):
        ok, why = _emit(states[name], wishes[name])
        if ok:
            emit[name] = wishes[name]
        else:
            omitted[name] = why
    targets: dict[str, set] = {name: set(_gate_def(name).components) for name in emit}
    # Every component checks dependencies at start-up, so a component that gets a gate
    # =true must get its dependencies =true too (propagate downwards), and a component that
    # gets a dependency =false must get its disabled dependents =false too (upwards).
    changed = True
    while changed:
        changed = False
        for name in list(emit):
            for dep in _gate_def(name).depends_on:
                if dep not in emit or emit[dep] != emit[name]:
                    continue
                low, high = (dep, name) if emit[name] else (name, dep)
                if not targets[high] <= targets[low]:
                    targets[low] |= targets[high]
                    changed = True
    for name, val in emit.items():
        for c in targets[name]:
            components[c].feature_gates[name] = val

    forbidden = _forbidden_at(minor)
    for c in COMPONENTS:
        components[c].forbidden_gates = dict(forbidden)

    # 5. runtime-config (kube-apiserver).
    served = _served(minor)
    rc: list[str] = []
    if effective.get(DRA_GATE):
        for ver in _CORE_RUNTIME_CONFIG.get(minor, ()):
            rc.append(f"{RESOURCE_GROUP}/{ver}=true")
    for _fname, kind in api_kinds:
        ver = _version_for_kind(minor, kind)
        if ver is not None and not served[ver][0]:
            entry = f"{RESOURCE_GROUP}/{ver}=true"
            if entry not in rc:
                rc.append(entry)
    components[APISERVER].runtime_config = rc
    components[APISERVER].runtime_config_absent = {
        f"{RESOURCE_GROUP}/{ver}": _unserved_reason(minor, ver)
        for ver in ALL_RESOURCE_VERSIONS
        if ver not in served
    }

    warnings: list[str] = []
    prerelease = prerelease_source(minor)
    if prerelease:
        warnings.append(
            f"the facts of Kubernetes {_mv(minor)} come from {prerelease}, a pre-release; "
            f"regenerate them once {_mv(minor)}.0 is out (python -m gpufleet.lab.release_facts "
            "generate)."
        )
    if minor in UNVERIFIED_MINORS:
        warnings.append(
            f"Kubernetes {_mv(minor)} is not on the Go module proxy; its facts come from "
            "documentation and are not checked against source."
        )
    for bad in known_bad_releases(v):
        warnings.append(
            f"Kubernetes {bad.version} is a known-bad release ({bad.component}): "
            f"{bad.problem}. {bad.advice}."
        )
    return ComponentPlan(
        version=v,
        features=tuple(planned_features),
        wishes=wishes,
        components=components,
        omitted=omitted,
        kubeadm=_kubeadm(minor),
        warnings=warnings,
        dropped_wishes=dropped,
    )
