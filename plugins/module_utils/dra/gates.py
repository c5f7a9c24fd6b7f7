# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: feature gates: the DRA gate set and every gate's state per release.

Importers import the part that defines what they use (no module re-exports another's names)."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Sequence
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import release_data as _releases
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    _ALL,
    APISERVER,
    CONTROLLER_MANAGER,
    DRA_GATE,
    KUBELET,
    MIN_MINOR,
    PROJECTED_MINORS,
    SCHEDULER,
    VersionLike,
    VersionModelError,
    _in_model,
    _mv,
)

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


def require_known_gate(gate: str) -> None:
    """Raise :class:`VersionModelError` (with a did-you-mean) unless some generated release
    registers ``gate``."""
    _gate_def(gate)


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
