# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model: what Kubernetes 1.26 to 1.38 needs for Dynamic Resource Allocation.

This module is the single source of truth for every version-dependent DRA fact the
collection and the ``gpufleet`` CLI use. It is pure Python (standard library only)
because Ansible ships ``module_utils`` to managed hosts; all data are Python literals.

Facts, per Kubernetes minor:

* every DRA feature gate (and the few non-DRA gates DRA gates depend on) as a versioned
  spec list, the way Kubernetes registers it: ``[(since_minor, stage, default, locked)]``
  plus the removal minor, so that stage/default/locked/removed follow for any minor
  (``gate_state``);
* which components read each gate (``GateDef.components``);
* the gate dependencies Kubernetes declares (and checks at start-up) from 1.35;
* the ``resource.k8s.io`` group-versions kube-apiserver serves, which are on by
  default and which need ``--runtime-config`` (``served_api_versions``);
* the kubeadm configuration API versions (``kubeadm_config_api``);
* the version-skew rules (``check_skew``, ``kubelet_upgrade_allowed``);
* patch releases known to break DRA set-ups (``KNOWN_BAD_RELEASES``).

Planning functions turn wishes into settings or refuse them with a reason and a fix:
``plan_components`` (per component: feature-gates to set, entries that must be absent,
runtime-config to add or drop), ``plan_transition`` (what changes from one minor to the
next) and ``sanitize`` (which existing entries would stop a component).

Policy for what a plan writes (``_emit``): nothing for a gate that is GA and on by default
(setting it only risks "unrecognized feature gate" once Kubernetes removes it, the way
``BlockVolume`` broke upgrades to 1.21); ``=true`` where the gate is alpha or beta (beta
gates on by default are pinned so the wish survives a default change) or off by default;
``=false`` only for an unlocked gate on by default; never a locked gate. A gate is written
on every component that reads it, and a dependency on every component its dependent is
written on, because each component checks dependencies at start-up (1.35+).

Sources. The per-release facts are generated from each release's own source and
committed as data (``k8s_release_v1_<minor>.py``, read through ``k8s_releases``; made by
``python -m gpufleet.lab.release_facts generate``, which builds ``lab/go/featuredump``
against k8s.io/kubernetes v1.31.14, v1.32.13, v1.33.13, v1.34.4, v1.35.4, v1.36.3, v1.37.2
and v1.38.0-beta.0): every registered feature gate with its versioned specs and declared
dependencies (``pkg/features``), the ``resource.k8s.io`` versions of
``DefaultAPIResourceConfigSource`` (``pkg/controlplane/instance.go``) with their kinds and
prerelease lifecycle, and kubeadm's registered, old, deprecated and experimental
configuration API versions (``cmd/kubeadm/app/util/config/common.go``). Hand-kept here is
only what the source cannot say: which components read each DRA gate (``_READERS``, from
the packages that reference it: ``pkg/registry``, ``pkg/api*``, ``plugin/`` ->
kube-apiserver; ``pkg/controller`` -> kube-controller-manager; ``pkg/scheduler`` ->
kube-scheduler; ``pkg/kubelet`` -> kubelet), known-bad releases with their source, the
runtime-config policy before resource.k8s.io/v1, the skew policy, and the facts of minors
older than 1.31 (``_RESOURCE_API_BEFORE_DATA``; 1.26 to 1.28 are not on the Go module
proxy, ``UNVERIFIED_MINORS``). A minor whose data comes from a pre-release (1.38 from
v1.38.0-beta.0) carries a warning in every plan.

``tests/unit/test_release_facts.py`` checks the model against every committed release and
``tests/integration/test_version_model_source.py`` regenerates each cached release's data
and compares it with the committed file.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Union

from ansible_collections.gpufleet.cluster.plugins.module_utils import k8s_releases as _releases

__all__ = [
    "ALL_FEATURES",
    "COMPONENTS",
    "FEATURES",
    "GATES",
    "KNOWN_BAD_RELEASES",
    "MAX_MINOR",
    "MIN_MINOR",
    "PROVISION_MAX_MINOR",
    "PROVISION_MIN_MINOR",
    "ApiVersionState",
    "ComponentPlan",
    "ComponentSettings",
    "GateDef",
    "GateState",
    "KubeVersion",
    "KubeadmConfigAPI",
    "SanitizeReport",
    "TransitionPlan",
    "VersionModelError",
    "VersionParseError",
    "check_skew",
    "feature_gates_string",
    "gate_state",
    "gate_state_changes",
    "known_bad_releases",
    "kubeadm_config_api",
    "kubelet_upgrade_allowed",
    "parse_feature_gates",
    "parse_runtime_config",
    "parse_version",
    "plan_components",
    "plan_transition",
    "sanitize",
    "served_api_versions",
    "supported_for_provision",
]

# --------------------------------------------------------------------------------------
# Range of the model
# --------------------------------------------------------------------------------------

MIN_MINOR = 26
MAX_MINOR = 38
#: Minors whose facts are projected from code comments of the newest release, not read
#: from a release of their own.
PROJECTED_MINORS: frozenset = frozenset()
#: Minors whose facts come from notes, not from a release's source.
UNVERIFIED_MINORS = frozenset({26, 27, 28})
#: Minors the provision roles accept (design: DRA with structured parameters).
PROVISION_MIN_MINOR = 32
PROVISION_MAX_MINOR = 38

APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
KUBELET = "kubelet"
COMPONENTS = (APISERVER, CONTROLLER_MANAGER, SCHEDULER, KUBELET)
_ALL = frozenset(COMPONENTS)

ALPHA = "alpha"
BETA = "beta"
GA = "ga"
DEPRECATED = "deprecated"

RESOURCE_GROUP = "resource.k8s.io"
DRA_GATE = "DynamicResourceAllocation"
#: Kubernetes declares gate dependencies (``defaultKubernetesFeatureGateDependencies``)
#: and refuses to start a component that enables a gate whose dependency is disabled,
#: from this minor on (``AddDependencies`` first appears in pkg/features in v1.35).
DEPENDENCIES_DECLARED_SINCE = 35

# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class VersionModelError(ValueError):
    """A wish the model cannot satisfy, with the reason and the fix.

    Attributes: ``reason`` (what is wrong, naming the value), ``fix`` (what to do).
    ``str(error)`` is ``"<reason> Fix: <fix>"``.
    """

    def __init__(self, reason: str, fix: str = "") -> None:
        self.reason = reason
        self.fix = fix
        super().__init__(reason + (" Fix: " + fix if fix else ""))


class VersionParseError(VersionModelError):
    """Malformed input (a version string, a ``NAME=true|false`` entry): not a wish at all."""


# --------------------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------------------

_VERSION_RE = re.compile(
    r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:-([0-9A-Za-z.\-]+))?(?:\+[0-9A-Za-z.\-]+)?$"
)


@dataclass(frozen=True, order=True)
class KubeVersion:
    """A Kubernetes version. ``patch`` is None when only the minor was given ("1.35")."""

    major: int
    minor: int
    patch: int | None = None
    pre: str | None = None

    @property
    def minor_version(self) -> str:
        """``"1.35"``."""
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        text = self.minor_version
        if self.patch is not None:
            text += f".{self.patch}"
        if self.pre:
            text += "-" + self.pre
        return text


VersionLike = Union[str, KubeVersion]  # noqa: UP007 (evaluated at run time on managed hosts)


def parse_version(value: VersionLike, name: str = "version") -> KubeVersion:
    """Parse ``"1.35"``, ``"1.35.0"``, ``"v1.35.0"`` or ``"v1.35.0-rc.1"`` into a KubeVersion.

    Raises VersionParseError naming ``name`` and the bad value when it is not a version, or
    when its major is not 1. The range of the model is not checked here.
    """
    if isinstance(value, KubeVersion):
        return value
    if not isinstance(value, str):
        raise VersionParseError(
            f"{name}={value!r} is not a Kubernetes version string.",
            "give a version such as 1.35.0 or v1.35.0.",
        )
    match = _VERSION_RE.match(value.strip())
    if not match:
        raise VersionParseError(
            f"{name}={value!r} is not a Kubernetes version.",
            "give MAJOR.MINOR[.PATCH] with an optional leading v, e.g. 1.35.0 or v1.35.0.",
        )
    major, minor = int(match.group(1)), int(match.group(2))
    patch = int(match.group(3)) if match.group(3) is not None else None
    if major != 1:
        raise VersionParseError(
            f"{name}={value!r} has major version {major}; Kubernetes versions are 1.x.",
            "give a version such as 1.35.0.",
        )
    return KubeVersion(major, minor, patch, match.group(4))


def _in_model(version: VersionLike, name: str = "version") -> KubeVersion:
    v = parse_version(version, name)
    if not MIN_MINOR <= v.minor <= MAX_MINOR:
        raise VersionModelError(
            f"{name}={v} is outside the DRA version model ({_mv(MIN_MINOR)} to {_mv(MAX_MINOR)}).",
            f"use a Kubernetes release from {_mv(MIN_MINOR)} to {_mv(MAX_MINOR)}.",
        )
    return v


def _mv(minor: int) -> str:
    return f"1.{minor}"


# --------------------------------------------------------------------------------------
# Feature gates: data
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpecEntry:
    """One versioned spec of a gate, as Kubernetes' ``featuregate.FeatureSpec``.

    ``since``: first minor the entry applies to; ``min_compat``: the
    ``MinCompatibilityVersion`` minor (the entry applies only when the component's
    minimum compatibility version is at least this; by default it is one minor below the
    binary, so such an entry is not the default state in its own minor).
    """

    since: int
    stage: str
    default: bool
    locked: bool = False
    min_compat: int | None = None


@dataclass(frozen=True)
class GateDef:
    """A feature gate of the model.

    ``specs``: versioned specs in Kubernetes order, from the newest generated release that
    registers the gate; ``removed``: first generated minor whose components no longer know
    the gate (None: every generated release after its introduction registers it);
    ``components``: components whose code reads the gate (hand-kept; every component
    *parses* every gate, so an unknown one stops any of them); ``depends_on``: the gates
    Kubernetes declares as dependencies (checked at start-up from 1.35), over all generated
    releases; ``dra``: False for gates outside DRA.
    """

    name: str
    specs: tuple[SpecEntry, ...]
    components: frozenset
    depends_on: tuple[str, ...] = ()
    removed: int | None = None
    dra: bool = True
    note: str = ""

    @property
    def since(self) -> int:
        return self.specs[0].since if self.specs else MIN_MINOR


_API_KCM_SCHED = frozenset({APISERVER, CONTROLLER_MANAGER, SCHEDULER})
_API_SCHED = frozenset({APISERVER, SCHEDULER})
_API_KUBELET_SCHED = frozenset({APISERVER, KUBELET, SCHEDULER})
_KCM_SCHED_API = _API_KCM_SCHED

#: What the source cannot say: which components read each DRA gate (and the non-DRA gates
#: DRA gates depend on), and notes. name -> (components, dra, note). Stages, defaults,
#: locks, removals and dependencies come from the generated release data (k8s_releases).
_READERS: dict[str, tuple[frozenset, bool, str]] = {
    DRA_GATE: (
        _ALL,
        True,
        "classic (control-plane controller) DRA up to 1.30, structured parameters from 1.30",
    ),
    "DRAControlPlaneController": (_API_SCHED, True, "classic DRA split out in 1.31"),
    "DRAAdminAccess": (_API_KCM_SCHED, True, ""),
    "DRAConsumableCapacity": (_API_KCM_SCHED, True, ""),
    "DRADerivedAttributes": (_API_SCHED, True, ""),
    "DRADeviceBindingConditions": (_API_SCHED, True, ""),
    "DRADeviceCompatibilityGroups": (_API_SCHED, True, ""),
    "DRADeviceTaintRules": (_API_KCM_SCHED, True, ""),
    "DRADeviceTaints": (_API_KCM_SCHED, True, ""),
    "DRAExtendedResource": (
        _ALL,
        True,
        "kube-controller-manager reads it through the ResourceQuota evaluator "
        "(pkg/quota/v1/evaluator/core)",
    ),
    "DRAFractionalCapacityRange": (
        _API_SCHED,
        True,
        "on by default only when --min-compatibility-version is at least 1.37",
    ),
    "DRAListTypeAttributes": (_API_SCHED, True, ""),
    "DRANodeAllocatableResources": (_API_KUBELET_SCHED, True, ""),
    "DRAOptionalNodeOperations": (_API_KUBELET_SCHED, True, ""),
    "DRAPartitionableDevices": (_API_SCHED, True, ""),
    "DRAPartitionableDevicesType": (frozenset({APISERVER}), True, ""),
    "DRAPrioritizedList": (_API_KCM_SCHED, True, ""),
    "DRAResourceClaimDeviceStatus": (
        _API_SCHED,
        True,
        "no declared dependency ('soft dependency on DynamicResourceAllocation due to "
        "on/off-by-default conflict')",
    ),
    "DRAResourceClaimGranularStatusAuthorization": (frozenset({APISERVER}), True, ""),
    "DRAResourcePoolStatus": (frozenset({APISERVER, CONTROLLER_MANAGER}), True, ""),
    "DRASchedulerFilterTimeout": (frozenset({SCHEDULER}), True, ""),
    "DRAWorkloadResourceClaims": (_ALL, True, ""),
    "KubeletPodResourcesDynamicResources": (frozenset({KUBELET}), True, ""),
    "ResourceHealthStatus": (
        frozenset({APISERVER, KUBELET}),
        True,
        "device health in Pod status, for device plugins and DRA",
    ),
    "GenericWorkload": (
        _API_KCM_SCHED,
        False,
        "not a DRA gate; DRAWorkloadResourceClaims needs it",
    ),
    "NodeDeclaredFeatures": (
        _API_KUBELET_SCHED,
        False,
        "not a DRA gate; DRAOptionalNodeOperations needs it",
    ),
}


def _spec_entries(facts) -> tuple[SpecEntry, ...]:
    return tuple(SpecEntry(s.since, s.stage, s.default, s.locked, s.min_compat) for s in facts)


def _build_gate(name: str, components: frozenset, dra: bool, note: str) -> GateDef:
    newest = _releases.newest_minor()
    facts = _releases.latest_gate_facts(name, newest)
    deps = sorted(
        {
            d
            for r in _releases.releases().values()
            if name in r.gates and r.dependencies_declared
            for d in r.gates[name].dependencies
        }
    )
    specs = _spec_entries(facts.specs) if facts else ()
    first = _releases.presence(name)[0] if facts else newest
    # A release before versioned gates (1.31) registers some gates without a version
    # ("0.0"): the history then starts at the first generated release that registers it.
    specs = tuple(
        SpecEntry(first, s.stage, s.default, s.locked, s.min_compat) if s.since == 0 else s
        for s in specs
    )
    return GateDef(
        name,
        specs,
        components,
        tuple(deps),
        _releases.removed_in(name, newest),
        dra,
        note,
    )


def _model_gates() -> dict[str, GateDef]:
    out: dict[str, GateDef] = {}
    pending = list(_READERS)
    while pending:
        name = pending.pop(0)
        if name in out:
            continue
        components, dra, note = _READERS.get(
            name, (_ALL, False, "not a DRA gate; a DRA gate depends on it")
        )
        out[name] = _build_gate(name, components, dra, note)
        pending.extend(d for d in out[name].depends_on if d not in out)
    return out


#: name -> GateDef, for every DRA gate of the model and the gates they depend on.
GATES: dict[str, GateDef] = _model_gates()


# --------------------------------------------------------------------------------------
# Feature gates: state per minor
# --------------------------------------------------------------------------------------

NOT_YET = "not-yet"
PRESENT = "present"
REMOVED = "removed"


@dataclass(frozen=True)
class GateState:
    """State of ``gate`` in one minor.

    ``status``: ``"present"``, ``"not-yet"`` (the minor predates the gate) or ``"removed"``;
    ``stage``/``default``/``locked`` are meaningful only when present; ``since``: first minor
    of the gate; ``removed_in``: removal minor or None; ``projected``: the minor is a
    projection.
    """

    gate: str
    minor: int
    status: str
    stage: str | None
    default: bool
    locked: bool
    since: int
    removed_in: int | None
    projected: bool

    @property
    def known(self) -> bool:
        """True when components of this minor accept the gate name."""
        return self.status == PRESENT

    def describe(self) -> str:
        if self.status == NOT_YET:
            return f"not known to {_mv(self.minor)} (introduced in {_mv(self.since)})"
        if self.status == REMOVED:
            return f"removed in {_mv(self.removed_in or self.minor)}"
        text = "{}, {} by default".format(
            {"ga": "GA"}.get(self.stage or "", self.stage),
            "on" if self.default else "off",
        )
        if self.locked:
            text += ", locked"
        return text


def _spec_at(gate: GateDef | Sequence[SpecEntry], minor: int) -> SpecEntry | None:
    """The spec in force at ``minor`` with the default minimum compatibility version."""
    specs = gate.specs if isinstance(gate, GateDef) else gate
    min_compat = minor - 1
    chosen = None
    carried: int | None = None
    for spec in specs:
        # featuregate.AddVersioned carries MinCompatibilityVersion forward to later entries.
        carried = spec.min_compat if spec.min_compat is not None else carried
        if spec.since > minor:
            continue
        if carried is not None and min_compat < carried:
            continue
        chosen = spec
    return chosen


@functools.cache
def _other_gate(name: str) -> GateDef | None:
    """A gate outside the DRA set that some generated release registers; None if none does."""
    if name not in _releases.all_gate_names():
        return None
    newest = _releases.presence(name)[-1]
    owners = _releases.release(newest).registered_by(name)
    return _build_gate(name, owners or _ALL, False, "")


def _gate_def(gate: str) -> GateDef:
    found = GATES.get(gate) or _other_gate(gate)
    if found is not None:
        return found
    close = difflib.get_close_matches(gate, sorted(_releases.all_gate_names()), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise VersionModelError(
        f"feature gate {gate!r} is registered by no Kubernetes release from "
        f"{_releases.releases()[_releases.oldest_minor()].release} to "
        f"{_releases.releases()[_releases.newest_minor()].release}{hint}.",
        "check the spelling; gate names are case-sensitive (see 'gpufleet gates plan --json').",
    ) from None


def is_known_gate(gate: str) -> bool:
    """True when some generated release registers ``gate``."""
    return gate in GATES or gate in _releases.all_gate_names()


def registered_by(gate: str, version: VersionLike) -> frozenset | None:
    """The components of ``version`` that register ``gate``: None when all of them do (or
    when the minor has no generated table), else e.g. ``{"kube-controller-manager"}``."""
    rel = _releases.release(_in_model(version).minor)
    return rel.registered_by(gate) if rel is not None else None


def gate_state(gate: str, version: VersionLike) -> GateState:
    """Stage/default/locked/removed of any feature gate at ``version``'s minor.

    For a minor with generated release data the state is that release's own: its
    registration of the gate (``pkg/features``, read by featuredump), or, when it does
    not register it, ``removed`` (an earlier release did) or ``not-yet``. For an older
    minor the state follows from the versioned spec history of the oldest generated
    release. Raises VersionModelError for a gate no generated release registers or a
    version outside 1.26-1.38; VersionParseError for a malformed version.
    """
    v = _in_model(version)
    g = _gate_def(gate)
    projected = v.minor in PROJECTED_MINORS
    rel = _releases.release(v.minor)
    if rel is not None:
        facts = rel.gate(g.name)
        if facts is None:
            removed = _releases.removed_in(g.name, v.minor)
            status = REMOVED if removed is not None else NOT_YET
            return GateState(
                g.name, v.minor, status, None, False, False, g.since, removed, projected
            )
        spec = _spec_at(_spec_entries(facts.specs), v.minor)
    else:
        spec = _spec_at(g, v.minor)
    if spec is None:
        return GateState(
            g.name, v.minor, NOT_YET, None, False, False, g.since, g.removed, projected
        )
    return GateState(
        g.name,
        v.minor,
        PRESENT,
        spec.stage,
        spec.default,
        spec.locked,
        g.since,
        g.removed,
        projected,
    )


def prerelease_source(minor: int) -> str | None:
    """``"1.38.0-beta.0"`` when ``minor``'s facts come from a pre-release, else None."""
    rel = _releases.release(minor)
    return rel.release if rel is not None and rel.prerelease else None


def gates_at(version: VersionLike) -> dict[str, GateState]:
    """Every model gate's state at ``version``: gate name -> GateState."""
    v = _in_model(version)
    return {name: gate_state(name, v) for name in GATES}


def release_gates_at(version: VersionLike) -> dict[str, GateState]:
    """Every gate the release of ``version``'s minor registers (all of them, not only
    DRA's): gate name -> GateState. Empty for a minor without generated release data."""
    v = _in_model(version)
    rel = _releases.release(v.minor)
    return {name: gate_state(name, v) for name in sorted(rel.all_names())} if rel else {}


def release_document(version: VersionLike) -> dict:
    """What ``version``'s release registers, as data: ``source`` (the release the facts
    were generated from, or None before 1.31), ``gates`` (every gate: stage, default,
    locked, components that register it), ``removed_gates`` (gates an earlier generated
    release registered -> the minor that removed them), ``api_versions`` (served
    resource.k8s.io versions: enabled_by_default, kinds), ``not_served`` (version -> why)
    and ``kubeadm`` (registered, deprecated, experimental, old -> kubeadm to migrate with).
    """
    v = _in_model(version)
    rel = _releases.release(v.minor)
    if rel is None:
        return {"source": None, "gates": {}, "removed_gates": {}, "api_versions": {}}
    gates = {}
    for name, st in release_gates_at(v).items():
        owners = rel.registered_by(name)
        gates[name] = {
            "stage": st.stage,
            "default": st.default,
            "locked": st.locked,
            "components": sorted(owners) if owners else list(COMPONENTS),
        }
    removed = {}
    for name in sorted(_releases.all_gate_names() - rel.all_names()):
        gone = _releases.removed_in(name, v.minor)
        if gone is not None:
            removed[name] = _mv(gone)
    served = _served(v.minor)
    not_served = {}
    for ver, api in sorted(rel.resource.items()):
        if ver in served:
            continue
        if api.removed is not None and v.minor >= api.removed:
            not_served[ver] = f"API lifecycle removed in {_mv(api.removed)}"
        else:
            not_served[ver] = "not in kube-apiserver's DefaultAPIResourceConfigSource"
    return {
        "source": rel.release,
        "prerelease": rel.prerelease,
        "gates": gates,
        "removed_gates": removed,
        "api_versions": {
            ver: {"enabled_by_default": served[ver][0], "kinds": list(served[ver][1])}
            for ver in sorted(served)
        },
        "not_served": not_served,
        "kubeadm": {
            "registered": list(rel.kubeadm.registered),
            "deprecated": list(rel.kubeadm.deprecated),
            "experimental": list(rel.kubeadm.experimental),
            "old": dict(rel.kubeadm.old),
        },
    }


# --------------------------------------------------------------------------------------
# resource.k8s.io API versions
# --------------------------------------------------------------------------------------

_CORE4 = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")
_CLASSIC_1 = ("PodScheduling", "ResourceClaim", "ResourceClaimTemplate", "ResourceClass")
_CLASSIC_2 = ("PodSchedulingContext", "ResourceClaim", "ResourceClaimTemplate", "ResourceClass")
_CLASSIC_2_STRUCTURED = (
    *_CLASSIC_2,
    "ResourceClaimParameters",
    "ResourceClassParameters",
    "ResourceSlice",
)
_DTR = "DeviceTaintRule"
_RPSR = "ResourcePoolStatusRequest"

# Minors older than every generated release: minor -> {version: (enabled by default,
# kinds)}; from the Kubernetes website and the v1.29.6/v1.30.14 sources. Newer minors come
# from the generated release data (``_served``).
_RESOURCE_API_BEFORE_DATA: dict[int, dict[str, tuple[bool, tuple[str, ...]]]] = {
    26: {"v1alpha1": (False, _CLASSIC_1)},
    27: {"v1alpha2": (False, _CLASSIC_2)},
    28: {"v1alpha2": (False, _CLASSIC_2)},
    29: {"v1alpha2": (False, _CLASSIC_2)},
    30: {"v1alpha2": (False, _CLASSIC_2_STRUCTURED)},
}


def _api_lifecycle_removed() -> dict[str, int]:
    """resource.k8s.io version -> the minor its generated API lifecycle stops serving it
    (``APILifecycleRemoved`` of its kinds), as the newest generated release says."""
    newest = _releases.release(_releases.newest_minor())
    return {v: a.removed for v, a in sorted(newest.resource.items()) if a.removed is not None}


#: resource.k8s.io version -> minor its API lifecycle stops serving it (generated data).
API_LIFECYCLE_REMOVED = _api_lifecycle_removed()

#: Versions the core DRA objects (DeviceClass, ResourceClaim(Template), ResourceSlice)
#: need enabled with --runtime-config, per minor; empty once resource.k8s.io/v1 is GA
#: and on by default (1.34). 1.33 enables both betas: v1beta1 for drivers and clients
#: built against 1.32, v1beta2 for those built against 1.33.
_CORE_RUNTIME_CONFIG: dict[int, tuple[str, ...]] = {
    26: ("v1alpha1",),
    27: ("v1alpha2",),
    28: ("v1alpha2",),
    29: ("v1alpha2",),
    30: ("v1alpha2",),
    31: ("v1alpha3",),
    32: ("v1beta1",),
    33: ("v1beta1", "v1beta2"),
}

_VERSION_ORDER = {"v1": 0, "v1beta2": 1, "v1beta1": 2, "v1alpha3": 3, "v1alpha2": 4, "v1alpha1": 5}

#: Every resource.k8s.io version any minor of the model serves.
ALL_RESOURCE_VERSIONS = tuple(
    sorted(
        {ver for api in _RESOURCE_API_BEFORE_DATA.values() for ver in api}
        | {ver for r in _releases.releases().values() for ver in r.resource},
        key=lambda x: _VERSION_ORDER[x],
    )
)


@dataclass(frozen=True)
class ApiVersionState:
    """One served group-version: ``group_version`` ("resource.k8s.io/v1"), ``version``
    ("v1"), ``enabled_by_default``, ``kinds`` (sorted), ``runtime_config`` (the
    ``--runtime-config`` entry that enables it)."""

    group_version: str
    version: str
    enabled_by_default: bool
    kinds: tuple[str, ...]

    @property
    def runtime_config(self) -> str:
        return f"{self.group_version}=true"


def served_api_versions(version: VersionLike) -> tuple[ApiVersionState, ...]:
    """The resource.k8s.io group-versions kube-apiserver of ``version`` serves, most stable
    first. Alpha and beta versions are off by default and need ``--runtime-config``.

    Source: pkg/controlplane/instance.go (stable/beta/alpha GroupVersion lists and
    DefaultAPIResourceConfigSource) and staging/src/k8s.io/api/resource/*/register.go.
    """
    v = _in_model(version)
    api = _served(v.minor)
    return tuple(
        ApiVersionState(f"{RESOURCE_GROUP}/{ver}", ver, api[ver][0], tuple(sorted(api[ver][1])))
        for ver in sorted(api, key=lambda x: _VERSION_ORDER[x])
    )


@functools.cache
def _served(minor: int) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """version -> (enabled by default, kinds) of what kube-apiserver of ``minor`` serves.

    From the generated data: a version listed in DefaultAPIResourceConfigSource whose API
    lifecycle has not reached its removal in ``minor`` (a GA or beta build stops serving a
    version in the minor its ``APILifecycleRemoved`` names: ``ShouldServeForVersion`` in
    k8s.io/apiserver/pkg/server/deleted_kinds.go).
    """
    rel = _releases.release(minor)
    if rel is None:
        return _RESOURCE_API_BEFORE_DATA[minor]
    return {
        ver: (a.enabled_by_default, a.kinds)
        for ver, a in rel.resource.items()
        if a.served and a.kinds and (a.removed is None or minor < a.removed)
    }


def _version_for_kind(minor: int, kind: str) -> str | None:
    api = _served(minor)
    for ver in sorted(api, key=lambda x: _VERSION_ORDER[x]):
        if kind in api[ver][1]:
            return ver
    return None


# --------------------------------------------------------------------------------------
# kubeadm configuration API
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KubeadmConfigAPI:
    """kubeadm's configuration API in one minor.

    ``preferred``: the version kubeadm writes (and stores in the kubeadm-config ConfigMap);
    ``accepted``: versions usable without flags; ``deprecated``: accepted with a warning;
    ``experimental``: need ``--allow-experimental-api``; ``extra_args_shape``: ``"map"``
    (v1beta3, ``extraArgs: {feature-gates: "..."}``) or ``"list"`` (v1beta4,
    ``extraArgs: [{name: feature-gates, value: "..."}]``) for ``preferred``;
    ``migrate_with``: for a version kubeadm no longer reads, the kubeadm minor whose
    ``kubeadm config migrate`` converts it.
    """

    minor: int
    preferred: str
    accepted: tuple[str, ...]
    deprecated: tuple[str, ...] = ()
    experimental: tuple[str, ...] = ()
    migrate_with: tuple[tuple[str, str], ...] = ()
    verified: bool = True

    @property
    def extra_args_shape(self) -> str:
        return extra_args_shape(self.preferred)

    @property
    def registered(self) -> tuple[str, ...]:
        """Versions kubeadm's scheme registers (accepted plus experimental)."""
        return tuple(sorted(set(self.accepted) | set(self.experimental)))


def kubeadm_api_problem(api_version: str, version: VersionLike) -> str | None:
    """Why kubeadm of ``version`` refuses a configuration of ``api_version``
    (``"kubeadm.k8s.io/v1beta3"``), or None when it takes it without a flag.

    From the generated data of the release: a version in ``validateSupportedVersion``'s
    old list ("your configuration file uses an old API spec ... Please use kubeadm vX"),
    an experimental one (needs ``--allow-experimental-api``), or one its scheme does not
    register. Source: cmd/kubeadm/app/util/config/common.go of the release.
    """
    v = _in_model(version)
    api = _kubeadm(v.minor)
    if api_version in api.accepted:
        return None
    old = dict(api.migrate_with)
    if api_version in old:
        return (
            f"kubeadm {v} refuses {api_version} (an old API spec): convert the configuration "
            f"with 'kubeadm config migrate' of kubeadm {old[api_version]}, which still reads "
            f"it, or write {api.preferred}"
        )
    if api_version in api.experimental:
        return (
            f"{api_version} is experimental in kubeadm {v}: it needs "
            f"--allow-experimental-api; write {api.preferred}"
        )
    return (
        f"kubeadm {v} does not know {api_version} (it reads "
        f"{', '.join(api.accepted)}); write {api.preferred}"
    )


def extra_args_shape(api_version: str) -> str:
    """``"map"`` for kubeadm.k8s.io/v1beta3 and older, ``"list"`` for v1beta4 and newer."""
    return "map" if api_version.rsplit("/", 1)[-1] in ("v1beta1", "v1beta2", "v1beta3") else "list"


_KB = "kubeadm.k8s.io/"


def _kubeadm(minor: int) -> KubeadmConfigAPI:
    if minor <= 26:
        return KubeadmConfigAPI(
            minor,
            _KB + "v1beta3",
            (_KB + "v1beta3", _KB + "v1beta2"),
            (_KB + "v1beta2",),
            verified=False,
        )
    if minor < _releases.oldest_minor():
        return KubeadmConfigAPI(
            minor,
            _KB + "v1beta3",
            (_KB + "v1beta3",),
            experimental=(_KB + "v1beta4",) if minor >= 28 else (),
            migrate_with=((_KB + "v1beta2", "1.26"),),
            verified=minor >= 29,
        )
    rel = _releases.release(minor)
    if rel is None:
        # 1.31 and newer always have generated data; this covers an older one.
        raise VersionModelError(f"no kubeadm facts for 1.{minor}", "add its release data.")
    k = rel.kubeadm
    accepted = tuple(v for v in k.registered if v not in k.experimental)
    stable_first = sorted(accepted, key=_kubeadm_api_order)
    preferred = next((v for v in stable_first if v not in k.deprecated), stable_first[0])
    return KubeadmConfigAPI(
        minor,
        preferred,
        tuple(stable_first),
        deprecated=tuple(v for v in stable_first if v in k.deprecated),
        experimental=tuple(k.experimental),
        migrate_with=tuple((gv, use.lstrip("v")) for gv, use in k.old if gv not in accepted),
    )


def _kubeadm_api_order(group_version: str) -> tuple[int, int, int]:
    """Most stable first: v1 < v1beta4 < v1beta3 < ... (kubeadm.k8s.io/<version>)."""
    m = re.match(r"v(\d+)(alpha|beta)?(\d+)?$", group_version.rsplit("/", 1)[-1])
    if not m:
        return (9, 0, 0)
    level = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (level, -int(m.group(1)), -int(m.group(3) or 0))


def kubeadm_config_api(version: VersionLike) -> KubeadmConfigAPI:
    """kubeadm configuration API versions of ``version``.

    v1beta4 (extraArgs as a list) is experimental from 1.28, preferred from 1.31;
    v1beta3 (extraArgs as a map) is deprecated from 1.31 and rejected from 1.37
    ("Please use kubeadm v1.36"); kubeadm.k8s.io/v1 is experimental in 1.37.
    Source: cmd/kubeadm/app/util/config/common.go validateSupportedVersion, v1.29.6-v1.37.2.
    """
    return _kubeadm(_in_model(version).minor)


# --------------------------------------------------------------------------------------
# Version skew and known-bad releases
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SkewRule:
    """``component`` may be at most ``max_newer`` minors newer and ``max_older`` minors older
    than every kube-apiserver.

    Source: kubernetes/website content/en/releases/version-skew-policy.md.
    """

    component: str
    max_newer: int
    max_older: int


SKEW_RULES = (
    SkewRule(KUBELET, 0, 3),
    SkewRule("kube-proxy", 0, 3),
    SkewRule(CONTROLLER_MANAGER, 0, 1),
    SkewRule(SCHEDULER, 0, 1),
    SkewRule("cloud-controller-manager", 0, 1),
)
#: Highest minor difference between kube-apiservers of one HA control plane.
HA_APISERVER_MAX_SKEW = 1
#: kubeadm upgrades one minor at a time ("Skipping MINOR versions when upgrading is unsupported").
MAX_UPGRADE_MINOR_STEP = 1


@dataclass(frozen=True)
class SkewViolation:
    """``component`` at ``version`` breaks the skew policy against kube-apiserver ``apiserver``."""

    component: str
    version: str
    apiserver: str
    reason: str


def check_skew(versions: Mapping[str, Sequence[VersionLike]]) -> list[SkewViolation]:
    """Check a fleet's versions against the skew policy.

    ``versions``: component name -> versions running (e.g. ``{"kube-apiserver": ["1.35.2",
    "1.36.0"], "kubelet": ["1.35.2"]}``). Returns every violation (empty list: compliant).
    Raises VersionParseError for a malformed version, VersionModelError when no
    kube-apiserver version is given.
    """
    apis = [parse_version(x, "kube-apiserver version") for x in versions.get(APISERVER, ())]
    if not apis:
        raise VersionModelError(
            "no kube-apiserver version given to check version skew against.",
            "pass the versions of every kube-apiserver under 'kube-apiserver'.",
        )
    out: list[SkewViolation] = []
    lo, hi = min(apis), max(apis)
    if hi.minor - lo.minor > HA_APISERVER_MAX_SKEW:
        out.append(
            SkewViolation(
                APISERVER,
                str(lo),
                str(hi),
                "kube-apiservers of one control plane must be within "
                f"{HA_APISERVER_MAX_SKEW} minor of each other",
            )
        )
    rules = {r.component: r for r in SKEW_RULES}
    for component, values in versions.items():
        if component == APISERVER:
            continue
        rule = rules.get(component)
        if rule is None:
            raise VersionModelError(
                f"component {component!r} has no version-skew rule.",
                "use one of: {}.".format(", ".join([APISERVER, *sorted(rules)])),
            )
        for raw in values:
            v = parse_version(raw, f"{component} version")
            for api in (lo, hi):
                diff = v.minor - api.minor
                if diff > rule.max_newer:
                    out.append(
                        SkewViolation(
                            component,
                            str(v),
                            str(api),
                            f"{component} must not be newer than any kube-apiserver",
                        )
                    )
                    break
                if -diff > rule.max_older and api == hi:
                    out.append(
                        SkewViolation(
                            component,
                            str(v),
                            str(api),
                            f"{component} may be at most {rule.max_older} minor(s) older "
                            "than kube-apiserver",
                        )
                    )
    return out


def kubelet_upgrade_allowed(target: VersionLike, apiserver_versions: Sequence[VersionLike]) -> None:
    """Refuse a kubelet upgrade to ``target`` while any kube-apiserver is older.

    Raises VersionModelError naming the older kube-apiservers (a newer kubelet talking to
    an older apiserver, e.g. through a load-balanced endpoint, may fail to start).
    """
    t = parse_version(target, "kubelet target version")
    if not apiserver_versions:
        raise VersionModelError(
            "no kube-apiserver version given to check the kubelet upgrade against.",
            "pass the versions of every kube-apiserver.",
        )
    apis = [parse_version(a, "kube-apiserver version") for a in apiserver_versions]
    older = [str(a) for a in apis if a.minor < t.minor]
    if older:
        raise VersionModelError(
            "kubelet {} would be newer than kube-apiserver {}; a kubelet must not be newer "
            "than any kube-apiserver.".format(t, ", ".join(older)),
            f"upgrade every kube-apiserver to {t.minor_version} first, then the kubelets.",
        )
    too_new = [str(a) for a in apis if a.minor - t.minor > 3]
    if too_new:
        raise VersionModelError(
            "kubelet {} would be more than 3 minors older than kube-apiserver {}.".format(
                t, ", ".join(too_new)
            ),
            "upgrade the kubelets one minor at a time together with the control plane.",
        )


@dataclass(frozen=True)
class KnownBadRelease:
    """A patch release that breaks DRA set-ups. ``version`` is exact ("1.30.0")."""

    version: str
    component: str
    problem: str
    fixed_in: str
    source: str
    advice: str


_DRA_PLUGIN_REGISTRATION_134 = dict(
    component="kubelet",
    problem="DRA kubelet plugins fail to register with the kubelet, so the node publishes "
    "no ResourceSlices and no claim on it is prepared",
    fixed_in="1.34.2",
    source="the NVIDIA DRA driver's documented Kubernetes minimum, v1.34.2 "
    "(kubernetes-sigs/dra-driver-nvidia-gpu docs/prerequisites.md, added by PR #1088)",
    advice="run 1.34.2 or later on every kubelet of a DRA node",
)

#: Known-bad patch releases (extend as new ones become known).
KNOWN_BAD_RELEASES: tuple[KnownBadRelease, ...] = (
    KnownBadRelease(version="1.34.0", **_DRA_PLUGIN_REGISTRATION_134),
    KnownBadRelease(version="1.34.1", **_DRA_PLUGIN_REGISTRATION_134),
    KnownBadRelease(
        version="1.30.0",
        component="kubeadm",
        problem="'kubeadm upgrade apply' writes a defaulted /var/lib/kubelet/config.yaml, "
        "dropping custom KubeletConfiguration fields such as featureGates "
        "(DynamicResourceAllocation=true is lost on the kubelet)",
        fixed_in="1.30.1",
        source="kubernetes/kubeadm#3049; fixed by kubernetes/kubernetes PR #124480 "
        "(cherry-pick #124497); the 1.30 release notes advise skipping 1.30.0",
        advice="upgrade to 1.30.1 or later instead; after any 'kubeadm upgrade node', "
        "re-assert the kubelet featureGates and check the live value",
    ),
)


def known_bad_releases(version: VersionLike) -> tuple[KnownBadRelease, ...]:
    """Known-bad entries for exactly ``version`` (a minor-only version matches none)."""
    v = parse_version(version)
    if v.patch is None:
        return ()
    key = f"{v.major}.{v.minor}.{v.patch}"
    return tuple(k for k in KNOWN_BAD_RELEASES if k.version == key)


#: Lowest containerd for a kubelet of a minor: 1.38 drops the kubelet's fallback for
#: runtimes without the CRI RuntimeConfig call, which containerd 1.7 lacks (plan on
#: containerd 2.0 or later for 1.38 kubelets; shared/reference/updates-2026-12.md).
MIN_CONTAINERD_FOR_KUBELET: dict[int, tuple[int, int]] = {38: (2, 0)}


def container_runtime_problem(runtime_version: str, kubelet_version: VersionLike) -> str | None:
    """Why a kubelet of ``kubelet_version`` cannot run on ``runtime_version``
    (``"containerd://1.7.28"``, ``"1.7.28"`` or ``"v1.7.28"``), or None. Only containerd
    is judged; another runtime or an unreadable version gives None."""
    v = parse_version(kubelet_version, "kubelet version")
    text = str(runtime_version).strip()
    if "://" in text:
        name, _, text = text.partition("://")
        if name != "containerd":
            return None
    m = re.match(r"v?(\d+)\.(\d+)", text)
    if not m:
        return None
    have = (int(m.group(1)), int(m.group(2)))
    need = max(
        (req for minor, req in MIN_CONTAINERD_FOR_KUBELET.items() if v.minor >= minor),
        default=None,
    )
    if need is None or have >= need:
        return None
    return (
        f"the kubelet of {_mv(v.minor)} needs containerd {need[0]}.{need[1]} or later (it no "
        f"longer falls back for runtimes without the CRI RuntimeConfig call), this node runs "
        f"containerd {text}"
    )


@dataclass(frozen=True)
class ProvisionVerdict:
    """``ok``: provision accepts the version; ``reason`` says why not (or the caveat)."""

    ok: bool
    reason: str


_PROVISION_RANGE = f"{_mv(PROVISION_MIN_MINOR)} to {_mv(PROVISION_MAX_MINOR)}"


def supported_for_provision(version: VersionLike) -> ProvisionVerdict:
    """Whether the provision roles accept ``version`` (1.32 to 1.37).

    Older minors predate the beta structured-parameters API (resource.k8s.io/v1beta1,
    1.32); 1.38 is a projection. Raises VersionParseError for a malformed version.
    """
    v = parse_version(version)
    if v.minor < PROVISION_MIN_MINOR:
        return ProvisionVerdict(
            False,
            f"Kubernetes {v} is older than {_mv(PROVISION_MIN_MINOR)}: DRA there is alpha (no "
            "beta structured-parameters API, resource.k8s.io/v1beta1 arrives in 1.32); "
            f"provision supports {_PROVISION_RANGE}",
        )
    if v.minor > PROVISION_MAX_MINOR:
        return ProvisionVerdict(
            False,
            f"Kubernetes {v} is newer than {_mv(PROVISION_MAX_MINOR)}, the newest release the "
            f"version model is checked against; provision supports {_PROVISION_RANGE}",
        )
    bad = known_bad_releases(v)
    if bad:
        return ProvisionVerdict(
            False,
            f"Kubernetes {v} is a known-bad release: {bad[0].problem}; {bad[0].advice}",
        )
    return ProvisionVerdict(True, f"Kubernetes {v} is supported for provision")


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


# --------------------------------------------------------------------------------------
# Parsing of existing settings
# --------------------------------------------------------------------------------------


def parse_feature_gates(value: str, name: str = "feature-gates") -> dict[str, bool]:
    """Parse ``"A=true,B=false"`` (the --feature-gates flag) into ``{"A": True, "B": False}``.

    Raises VersionParseError naming ``name`` and the bad entry.
    """
    out: dict[str, bool] = {}
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            continue
        if "=" not in entry:
            raise VersionParseError(
                f"{name} entry {entry!r} has no '='.", "write NAME=true or NAME=false."
            )
        key, _, val = entry.partition("=")
        out[key.strip()] = _parse_bool(val, f"{name} entry {entry!r}")
    return out


def _parse_bool(value: str | bool, what: str) -> bool:
    if isinstance(value, bool):
        return value
    low = str(value).strip().lower()
    if low == "true":
        return True
    if low == "false":
        return False
    raise VersionParseError(f"{what} has value {value!r}, not true or false.", "use true or false.")


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
                    fix += "; DRA is always on from 1.35, nothing needs to be set"
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
                extra = "; DRA cannot be turned off from 1.35"
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


# --------------------------------------------------------------------------------------
# Sanitize existing settings
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One existing entry judged against a version.

    ``kind``: ``"feature-gate"`` or ``"runtime-config"``; ``entry``: as written
    (``"DynamicResourceAllocation=true"``); ``fatal``: True when the component refuses to
    start with it (must be removed); ``action``: ``"remove"``, ``"advise-remove"`` or
    ``"keep"``; ``reason``.
    """

    kind: str
    entry: str
    fatal: bool
    action: str
    reason: str

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "entry": self.entry,
            "fatal": self.fatal,
            "action": self.action,
            "reason": self.reason,
        }


@dataclass
class SanitizeReport:
    """Findings for existing feature gates and runtime-config at ``version``.

    ``must_remove``: fatal findings; ``advice``: entries that work but should go;
    ``gates``/``runtime_config``: the existing entries with the fatal ones removed.
    """

    version: KubeVersion
    findings: list[Finding]
    gates: dict[str, bool]
    runtime_config: list[str]

    @property
    def must_remove(self) -> list[Finding]:
        return [f for f in self.findings if f.fatal]

    @property
    def advice(self) -> list[Finding]:
        return [f for f in self.findings if not f.fatal and f.action == "advise-remove"]

    @property
    def ok(self) -> bool:
        return not self.must_remove

    def to_dict(self) -> dict:
        return {
            "version": str(self.version),
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
            "gates": {k: self.gates[k] for k in sorted(self.gates)},
            "runtime_config": list(self.runtime_config),
        }


def sanitize(
    existing_gates: Mapping[str, bool | str],
    existing_runtime_config: str | Sequence[str],
    version: VersionLike,
    component: str | None = None,
) -> SanitizeReport:
    """Judge existing ``feature-gates`` entries and ``--runtime-config`` entries of a
    component against ``version`` (e.g. before upgrading to it).

    Every gate is judged against the full gate table of ``version``'s release (generated
    from its source), DRA or not. Fatal (must be removed before the component of
    ``version`` starts): a gate the release does not register (removed, not yet
    introduced, or never a Kubernetes gate); a locked gate at the other value; an enabled
    gate whose declared dependency is disabled (1.35+); a resource.k8s.io group/version the
    version does not serve. Advice: a locked gate at its default, a GA gate on by default
    set to true (both break at the gate's removal), a served alpha/beta API version no
    longer needed. Only for a minor without a generated table (before 1.31) are gates
    outside the model kept unchecked. With ``component``, a gate that only another
    component registers (kube-controller-manager's own) is fatal too.

    Raises VersionParseError for a malformed version or gate value.
    """
    v = _in_model(version)
    minor = v.minor
    findings: list[Finding] = []
    kept: dict[str, bool] = {}
    parsed = {k: _parse_bool(val, f"feature gate {k}") for k, val in existing_gates.items()}
    states = {n: gate_state(n, v) for n in GATES}
    effective = {n: _enabled_at(states, {}, n) for n in GATES}
    for name in sorted(parsed):
        val = parsed[name]
        entry = _fmt(name, val)
        if not is_known_gate(name):
            if _releases.release(minor) is None:
                findings.append(
                    Finding(
                        "feature-gate",
                        entry,
                        False,
                        "keep",
                        f"Kubernetes {_mv(minor)} has no generated gate table; not checked",
                    )
                )
                kept[name] = val
                continue
            findings.append(
                Finding(
                    "feature-gate", entry, True, "remove", unregistered_gate_reason(name, minor)
                )
            )
            continue
        st = gate_state(name, v)
        if not st.known:
            findings.append(Finding("feature-gate", entry, True, "remove", _unknown_reason(st)))
            continue
        owners = registered_by(name, v)
        if component is not None and owners is not None and component not in owners:
            findings.append(
                Finding(
                    "feature-gate",
                    entry,
                    True,
                    "remove",
                    f"only {', '.join(sorted(owners))} registers {name} in "
                    f"{_releases.release(minor).release}: {component} refuses to start with "
                    f"'unrecognized feature gate: {name}'",
                )
            )
            continue
        if st.locked and val != st.default:
            findings.append(Finding("feature-gate", entry, True, "remove", _locked_reason(st)))
            continue
        kept[name] = val
        if name in GATES:
            effective[name] = val
        if st.locked:
            findings.append(
                Finding(
                    "feature-gate",
                    entry,
                    False,
                    "advise-remove",
                    "{}: it has no effect{}".format(
                        st.describe(),
                        f" and stops the component once removed in {_mv(st.removed_in)}"
                        if st.removed_in
                        else "",
                    ),
                )
            )
        elif st.stage == GA and st.default and val:
            findings.append(
                Finding(
                    "feature-gate",
                    entry,
                    False,
                    "advise-remove",
                    f"{st.describe()}: {_GA_RISK}",
                )
            )
    if minor >= DEPENDENCIES_DECLARED_SINCE:
        for name in sorted(effective):
            if not effective[name] or not states[name].known:
                continue
            off = [d for d in GATES[name].depends_on if not effective.get(d, False)]
            if not off or not (name in kept or any(d in kept for d in off)):
                continue
            reason = (
                f"{name} is enabled but depends on disabled {', '.join(off)}: Kubernetes "
                f"{_mv(minor)} refuses to start"
            )
            for culprit in [d for d in off if d in kept] or [name]:
                entry = _fmt(culprit, kept.pop(culprit))
                findings.append(Finding("feature-gate", entry, True, "remove", reason))
        findings.extend(_other_dependency_findings(kept, minor))
    kept_rc: list[str] = []
    served = _served(minor)
    needed = set(_CORE_RUNTIME_CONFIG.get(minor, ()))
    for key, val in parse_runtime_config(existing_runtime_config):
        entry = f"{key}={val}"
        parts = key.split("/")
        if parts[0] != RESOURCE_GROUP or len(parts) < 2:
            problem = runtime_config_problem(key, minor)
            if problem:
                findings.append(Finding("runtime-config", entry, True, "remove", problem))
            else:
                kept_rc.append(entry)
            continue
        ver = parts[1]
        if ver not in served:
            findings.append(
                Finding("runtime-config", entry, True, "remove", _unserved_reason(minor, ver))
            )
            continue
        kept_rc.append(entry)
        if served[ver][0] or ver in needed or val.lower() == "false" or minor < 34:
            continue
        reason = (
            f"not needed for DRA on {_mv(minor)} (resource.k8s.io/v1 is served and on by default)"
        )
        removal = API_LIFECYCLE_REMOVED.get(ver)
        if removal:
            reason += f"; {RESOURCE_GROUP}/{ver} is scheduled for removal in {_mv(removal)}"
        findings.append(Finding("runtime-config", entry, False, "advise-remove", reason))
    return SanitizeReport(v, findings, kept, kept_rc)


#: --runtime-config keys kube-apiserver takes besides group/versions (options/api_enablement).
_RUNTIME_CONFIG_SWITCHES = frozenset({"api/all", "api/ga", "api/beta", "api/alpha", "api/legacy"})
#: Groups served by kube-apiserver's other schemes (CRDs, aggregation): not in the dump.
_OTHER_SCHEME_GROUPS = frozenset({"apiextensions.k8s.io", "apiregistration.k8s.io"})


def runtime_config_problem(key: str, minor: int) -> str | None:
    """Why kube-apiserver of ``minor`` refuses the --runtime-config key ``key``
    (``"batch/v2alpha1"``, ``"apps/v1/deployments"``, ``"api/v1"``), or None.

    A group/version its scheme does not register stops it at start-up ("group version ...
    that has not been registered", k8s.io/apiserver/pkg/server/resourceconfig). Judged
    from the generated release data; None for a minor without it, for the ``api/*``
    switches and for the CRD and aggregation groups.
    """
    rel = _releases.release(minor)
    if rel is None or not rel.group_versions or key in _RUNTIME_CONFIG_SWITCHES:
        return None
    parts = key.split("/")
    if parts[0] == "api" and len(parts) >= 2:
        group_version = parts[1]  # core: api/v1
    elif len(parts) >= 2:
        group_version = f"{parts[0]}/{parts[1]}"
    else:
        group_version = key
    if group_version.split("/")[0] in _OTHER_SCHEME_GROUPS:
        return None
    if group_version in rel.group_versions:
        return None
    group = group_version.split("/")[0] if "/" in group_version else ""
    same_group = sorted(gv for gv in rel.group_versions if gv.split("/")[0] == group and "/" in gv)
    known = f" (it registers {', '.join(same_group)})" if same_group else ""
    return (
        f"Kubernetes {rel.release} registers no API group version {group_version}{known}: "
        f"kube-apiserver refuses to start with 'group version {group_version} that has not "
        "been registered'"
    )


def _other_dependency_findings(kept: dict[str, bool], minor: int) -> list[Finding]:
    """Declared dependencies of gates outside the model's set, from ``minor``'s release."""
    rel = _releases.release(minor)
    if rel is None:
        return []
    out = []
    for name in sorted(kept):
        if name in GATES or not kept.get(name) or rel.gate(name) is None:
            continue
        off = []
        for dep in rel.gate(name).dependencies:
            if dep in kept:
                on = kept[dep]
            elif dep in rel.gates:
                on = gate_state(dep, _kv(minor)).default
            else:
                on = False
            if not on:
                off.append(dep)
        if off:
            reason = (
                f"{name} is enabled but depends on disabled {', '.join(off)}: Kubernetes "
                f"{_mv(minor)} refuses to start"
            )
            culprits = [d for d in off if d in kept] or [name]
            out.extend(
                Finding("feature-gate", _fmt(c, kept.pop(c)), True, "remove", reason)
                for c in culprits
                if c in kept
            )
    return out


# --------------------------------------------------------------------------------------
# Transitions
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateChange:
    """A feature-gate entry that changes on ``component``: ``action`` is ``"add"``,
    ``"remove"`` or ``"change"``; ``before``/``after`` the values (None: absent)."""

    component: str
    gate: str
    action: str
    before: bool | None
    after: bool | None
    reason: str

    def to_dict(self) -> dict:
        return {
            "component": self.component,
            "gate": self.gate,
            "action": self.action,
            "before": self.before,
            "after": self.after,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class RuntimeConfigChange:
    """A --runtime-config entry added or dropped on kube-apiserver; ``required``: the target
    refuses to start with the old entry."""

    entry: str
    action: str
    required: bool
    reason: str

    def to_dict(self) -> dict:
        return {
            "entry": self.entry,
            "action": self.action,
            "required": self.required,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class GateStateChange:
    """A model gate whose state differs between two minors: ``before``/``after`` are
    ``GateState.describe()`` texts; ``consequence`` says what an existing entry needs."""

    gate: str
    before: str
    after: str
    consequence: str

    def to_dict(self) -> dict:
        return {
            "gate": self.gate,
            "before": self.before,
            "after": self.after,
            "consequence": self.consequence,
        }


def gate_state_changes(from_version: VersionLike, to_version: VersionLike) -> list[GateStateChange]:
    """Every model gate whose stage/default/lock/presence differs between the two minors,
    with what an existing ``feature-gates`` entry for it needs on ``to_version``."""
    a, b = _in_model(from_version, "from version"), _in_model(to_version, "to version")
    out = []
    for name in sorted(GATES):
        sa, sb = gate_state(name, a), gate_state(name, b)
        key_a = (sa.status, sa.stage, sa.default, sa.locked)
        key_b = (sb.status, sb.stage, sb.default, sb.locked)
        if key_a == key_b:
            continue
        if sb.status == REMOVED:
            consequence = "remove any entry for it from every component before the upgrade"
        elif sb.status == NOT_YET:
            consequence = "remove any entry for it: the target does not know it"
        elif sa.status != PRESENT:
            consequence = "new: available to set"
        elif sb.locked and not sa.locked:
            held = "true" if sb.default else "false"
            other = "false" if sb.default else "true"
            consequence = (
                f"now locked to {held}: an entry ={other} stops every component; an entry "
                f"={held} has no effect and should go"
            )
        elif sb.default != sa.default:
            consequence = "now %s by default" % ("on" if sb.default else "off")
        else:
            consequence = "stage change only"
        out.append(GateStateChange(name, sa.describe(), sb.describe(), consequence))
    return out


@dataclass
class TransitionPlan:
    """What changes from ``source`` to ``target``: the two plans, gate changes per
    component, runtime-config changes, the kubeadm API change, the upgrade order and
    warnings."""

    source: ComponentPlan
    target: ComponentPlan
    gate_changes: list[GateChange]
    runtime_config_changes: list[RuntimeConfigChange]
    kubeadm_change: dict[str, object]
    order: list[str]
    warnings: list[str]
    state_changes: list[GateStateChange] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "from": str(self.source.version),
            "to": str(self.target.version),
            "gate_state_changes": [c.to_dict() for c in self.state_changes],
            "gate_changes": [c.to_dict() for c in self.gate_changes],
            "runtime_config_changes": [c.to_dict() for c in self.runtime_config_changes],
            "kubeadm": dict(self.kubeadm_change),
            "order": list(self.order),
            "warnings": list(self.warnings),
        }


def _why_not_emitted(name: str, target: ComponentPlan) -> str:
    st = gate_state(name, target.version)
    if not st.known:
        return _unknown_reason(st)
    if name in target.omitted:
        return target.omitted[name]
    if name not in target.wishes:
        return f"no longer wished in {target.version.minor_version}"
    return f"not read by this component in {target.version.minor_version}"


def plan_transition(
    from_version: VersionLike,
    to_version: VersionLike,
    features: Iterable[str] = (),
    gates: Mapping[str, bool | str] | None = None,
) -> TransitionPlan:
    """Plan an upgrade from ``from_version`` to ``to_version`` (same minor or the next one).

    The target plan is strict (``plan_components``); the source plan takes the same wishes
    where the source version can honour them. Returns a TransitionPlan listing gates to add,
    remove (and why: removed, locked, GA on by default, no longer wished) or change per
    component, runtime-config entries to drop (``required`` when the target does not serve
    them) or add, and the kubeadm configuration API change.

    Raises VersionModelError for a downgrade, a skipped minor (kubeadm upgrades one minor at
    a time) or an impossible target wish; VersionParseError for malformed input.
    """
    src = _in_model(from_version, "from version")
    dst = _in_model(to_version, "to version")
    step = dst.minor - src.minor
    if step < 0 or (step == 0 and (dst.patch or 0) < (src.patch or 0)):
        raise VersionModelError(
            f"upgrade from {src} to {dst} goes backwards; Kubernetes does not support downgrades.",
            f"give a --to version newer than --from {src}.",
        )
    if step > MAX_UPGRADE_MINOR_STEP:
        path = " -> ".join(_mv(m) for m in range(src.minor, dst.minor + 1))
        raise VersionModelError(
            f"upgrade from {src} to {dst} skips {step - 1} minor(s); kubeadm upgrades one minor "
            "at a time ('Skipping MINOR versions when upgrading is unsupported').",
            f"upgrade step by step: {path}.",
        )
    features = tuple(features)
    gates = dict(gates or {})
    target = _plan(dst, features, gates, strict=True)
    source = _plan(src, features, gates, strict=False)
    changes: list[GateChange] = []
    for c in COMPONENTS:
        before = source.components[c].feature_gates
        after = target.components[c].feature_gates
        for name in sorted(set(before) | set(after)):
            b, a = before.get(name), after.get(name)
            if b == a:
                continue
            if a is None:
                changes.append(
                    GateChange(c, name, "remove", b, None, _why_not_emitted(name, target))
                )
            elif b is None:
                st = gate_state(name, dst)
                if not gate_state(name, src).known:
                    why = f"new in {dst.minor_version} ({st.describe()})"
                else:
                    why = f"{st.describe()} in {dst.minor_version}"
                changes.append(GateChange(c, name, "add", None, a, why))
            else:
                changes.append(
                    GateChange(c, name, "change", b, a, gate_state(name, dst).describe())
                )
    rc_changes: list[RuntimeConfigChange] = []
    src_rc, dst_rc = set(source.runtime_config), set(target.runtime_config)
    served = _served(dst.minor)
    for entry in sorted(src_rc - dst_rc):
        ver = entry.split("=", 1)[0].split("/")[1]
        if ver not in served:
            rc_changes.append(
                RuntimeConfigChange(
                    entry,
                    "drop",
                    True,
                    _unserved_reason(dst.minor, ver),
                )
            )
        else:
            removal = API_LIFECYCLE_REMOVED.get(ver)
            rc_changes.append(
                RuntimeConfigChange(
                    entry,
                    "drop",
                    False,
                    "no longer needed in {}: {}{}".format(
                        dst.minor_version,
                        "resource.k8s.io/v1 is served and on by default"
                        if "v1" in served
                        else "the core DRA objects use another version",
                        f"; {RESOURCE_GROUP}/{ver} is scheduled for removal in {_mv(removal)}"
                        if removal
                        else "",
                    ),
                )
            )
    for entry in sorted(dst_rc - src_rc):
        ver = entry.split("=", 1)[0].split("/")[1]
        rc_changes.append(
            RuntimeConfigChange(
                entry,
                "add",
                True,
                f"{RESOURCE_GROUP}/{ver} is off by default in {dst.minor_version} and the plan "
                "needs it",
            )
        )
    ka, kb = source.kubeadm, target.kubeadm
    kubeadm_change: dict[str, object] = {
        "from": ka.preferred,
        "to": kb.preferred,
        "changed": ka.preferred != kb.preferred,
        "from_accepted_by_target": ka.preferred in kb.accepted,
        "extra_args_shape": {"from": ka.extra_args_shape, "to": kb.extra_args_shape},
        "note": "",
    }
    gone = [ver for ver in ka.accepted if ver not in kb.accepted]
    notes = []
    if ka.preferred != kb.preferred:
        notes.append(
            f"kubeadm {dst.minor_version} writes {kb.preferred} (extraArgs as a "
            f"{kb.extra_args_shape}); convert files in {ka.preferred} with "
            "'kubeadm config migrate'"
        )
    if gone:
        notes.append(
            "kubeadm {} no longer reads {}: migrate such files with kubeadm {} "
            "('kubeadm config migrate') before upgrading".format(
                dst.minor_version, ", ".join(gone), src.minor_version
            )
        )
    kubeadm_change["note"] = "; ".join(notes)
    order = [
        f"upgrade kube-apiserver on every control-plane node to {dst} first",
        "then kube-controller-manager and kube-scheduler (never newer than any kube-apiserver)",
        "then kubelets node by node, drained first (a kubelet must not be newer than any "
        "kube-apiserver; it may stay up to 3 minors older)",
        "remove the gates and runtime-config entries marked remove from the kubeadm-config "
        "ConfigMap, the static Pod manifests and the kubelet configuration before the "
        f"{dst.minor_version} binaries start",
    ]
    warnings = list(target.warnings)
    if src.minor < DEPENDENCIES_DECLARED_SINCE <= dst.minor:
        warnings.append(
            f"from {_mv(DEPENDENCIES_DECLARED_SINCE)} every component checks the declared "
            "feature-gate dependencies at start-up: an enabled gate whose dependency is "
            "disabled stops it"
        )
    for name, why in source.dropped_wishes.items():
        warnings.append(
            f"{name} is not possible on {src} and was left out of the source plan: {why}"
        )
    return TransitionPlan(
        source,
        target,
        changes,
        rc_changes,
        kubeadm_change,
        order,
        warnings,
        gate_state_changes(src, dst),
    )
