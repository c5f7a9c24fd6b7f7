# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: the per-component plan (``plan_components``: which
feature-gates and runtime-config each component gets for the features and gates asked
for, or why a wish is impossible) and the reasons a gate cannot be set.

Importers import the part that defines what they use (no module re-exports another's names)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import next_release
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import release_data as _releases
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.api import (
    _CORE_RUNTIME_CONFIG,
    ALL_RESOURCE_VERSIONS,
    _kubeadm,
    _served,
    _version_for_kind,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    ALPHA,
    APISERVER,
    BETA,
    COMPONENTS,
    DEPENDENCIES_DECLARED_SINCE,
    DRA_GATE,
    MAX_MINOR,
    MIN_MINOR,
    RESOURCE_GROUP,
    UNVERIFIED_MINORS,
    KubeVersion,
    VersionLike,
    VersionModelError,
    _in_model,
    _mv,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.features import (
    FeatureDef,
    feature_def,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.gates import (
    GATES,
    REMOVED,
    GateState,
    _gate_def,
    gate_state,
    prerelease_source,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.settings import (
    ComponentPlan,
    ComponentSettings,
    Forbidden,
    parse_gate_bool,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.skew import (
    known_bad_releases,
)


def _locked_since(name: str) -> str:
    """``1.N``: the first minor of the model at which gate ``name`` is locked to its default
    (the generated releases' specs), or ``"its GA release"`` when none locks it."""
    for minor in range(MIN_MINOR, MAX_MINOR + 1):
        st = gate_state(name, KubeVersion(1, minor, 0))
        if st.known and st.locked:
            return _mv(minor)
    return "its GA release"


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


class _Refusals:
    """How ``_plan`` treats an impossible wish: raise VersionModelError (``strict``) or
    drop it and keep the reason (``dropped``: wish -> reason)."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.dropped: dict[str, str] = {}

    def refuse(self, reason: str, fix: str, key: str) -> None:
        if self.strict:
            raise VersionModelError(reason, fix)
        self.dropped[key] = reason


def _plan(
    v: KubeVersion, features: tuple[str, ...], raw_gates: dict[str, bool | str], strict: bool
) -> ComponentPlan:
    """The plan of ``plan_components`` in steps: explicit wishes checked, wishes from the
    features, dependencies, feature-gates per component, runtime-config, warnings. With
    ``strict`` False an impossible wish is dropped (``dropped_wishes``) instead of raised."""
    minor = v.minor
    states = {name: gate_state(name, v) for name in (*GATES, *raw_gates)}
    explicit: dict[str, bool] = {}
    for name, val in raw_gates.items():
        _gate_def(name)
        explicit[name] = parse_gate_bool(val, f"gate {name}")
    feature_defs = []
    for fname in features:
        fd = feature_def(fname)
        if fd not in feature_defs:
            feature_defs.append(fd)
    refusals = _Refusals(strict)
    _check_explicit_wishes(v, states, explicit, refusals)
    wishes, planned_features, api_kinds = _wishes(v, states, explicit, feature_defs, refusals)
    wishes, effective = _check_dependencies(v, states, wishes, refusals)
    components, omitted = _components(minor, states, wishes)
    _runtime_config(minor, components, effective, api_kinds)
    return ComponentPlan(
        version=v,
        features=tuple(planned_features),
        wishes=wishes,
        components=components,
        omitted=omitted,
        kubeadm=_kubeadm(minor),
        warnings=_plan_warnings(v),
        dropped_wishes=refusals.dropped,
    )


def _check_explicit_wishes(
    v: KubeVersion,
    states: Mapping[str, GateState],
    explicit: dict[str, bool],
    refusals: _Refusals,
) -> None:
    """Step 1: explicit gate wishes must be possible at this minor; impossible ones are
    refused and removed from ``explicit``."""
    for name in list(explicit):
        val = explicit[name]
        st = states[name]
        if not st.known:
            if st.status == REMOVED:
                fix = f"remove {name} from the feature gates of every component"
                if name == "DRAControlPlaneController":
                    fix += (
                        "; classic DRA with a control-plane controller ended with "
                        f"{_mv((st.removed_in or st.minor) - 1)}, use structured parameters "
                        "(DRA drivers publishing ResourceSlices)"
                    )
                elif name == DRA_GATE:
                    fix += f"; DRA is always on from {_locked_since(name)}, nothing needs to be set"
            else:
                fix = f"drop {_fmt(name, val)} or target {_mv(st.since)} or newer"
            refusals.refuse(
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
            refusals.refuse(
                f"{_fmt(name, val)} is impossible on Kubernetes {v}: the gate is "
                f"{_locked_reason(st)}.",
                f"remove {_fmt(name, val)}{extra}.",
                name,
            )
            del explicit[name]


def _wishes(
    v: KubeVersion,
    states: Mapping[str, GateState],
    explicit: Mapping[str, bool],
    feature_defs: Sequence[FeatureDef],
    refusals: _Refusals,
) -> tuple[dict[str, bool], list[str], list[tuple[str, str]]]:
    """Step 2: the wishes: core DRA, features (with their dependencies), explicit gates.
    Returns (gate -> wished value, features planned, (feature, API kind) pairs)."""
    minor = v.minor
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
        problem = _feature_problem(v, states, explicit, dra_off, fd)
        if problem is not None:
            refusals.refuse(*problem, "feature " + fd.name)
            continue
        for g in _closure(fd.gates):
            if states[g].known:
                wishes[g] = True
        api_kinds.extend((fd.name, k) for k in fd.api_kinds)
        planned_features.append(fd.name)
    wishes.update(explicit)
    if dra_off:
        wishes[DRA_GATE] = False
    return wishes, planned_features, api_kinds


def _feature_problem(
    v: KubeVersion,
    states: Mapping[str, GateState],
    explicit: Mapping[str, bool],
    dra_off: bool,
    fd: FeatureDef,
) -> tuple[str, str] | None:
    """Why feature ``fd`` cannot be planned at ``v`` (reason, fix), or None: a gate the
    version lacks, DRA turned off, a needed gate asked off, a gate locked off, an API kind
    no served version has."""
    minor = v.minor
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
        return (
            "feature {} needs feature gate {}, which Kubernetes {} {}.".format(
                fd.name,
                st.gate,
                v,
                f"no longer has (removed in {_mv(st.removed_in or minor)})"
                if st.status == REMOVED
                else f"does not have yet (introduced in {_mv(st.since)})",
            ),
            fix + ".",
        )
    if dra_off:
        return (
            f"feature {fd.name} needs DynamicResourceAllocation, but "
            "DynamicResourceAllocation=false was asked for.",
            f"drop DynamicResourceAllocation=false or drop feature {fd.name}.",
        )
    for g in _closure(fd.gates):
        if explicit.get(g) is False:
            return (
                f"feature {fd.name} needs {g}=true, but {g}=false was asked for.",
                f"drop {g}=false or drop feature {fd.name}.",
            )
    for g in _closure(fd.gates):
        st = states[g]
        if st.status == REMOVED and _on_after_removal(g):
            continue
        if not st.known or (st.locked and not st.default):
            return (
                f"feature {fd.name} needs {st.gate}, which is {st.describe()} in Kubernetes {v}.",
                f"drop feature {fd.name}.",
            )
    for kind in fd.api_kinds:
        if _version_for_kind(minor, kind) is None:
            return (
                f"feature {fd.name} needs the {kind} kind, which no resource.k8s.io version of "
                f"Kubernetes {v} serves.",
                f"drop feature {fd.name}.",
            )
    return None


def _check_dependencies(
    v: KubeVersion,
    states: Mapping[str, GateState],
    wishes: dict[str, bool],
    refusals: _Refusals,
) -> tuple[dict[str, bool], dict[str, bool]]:
    """Step 3: the effective state of every gate and the declared dependencies: a wish
    whose dependencies are off is refused; from 1.35 an enabled gate (wished or on by
    default) whose dependencies are off is refused too, as Kubernetes refuses to start.
    Returns (the wishes of known gates, gate -> enabled)."""
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
            refusals.refuse(
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
    if v.minor >= DEPENDENCIES_DECLARED_SINCE:
        # Kubernetes checks every enabled gate, default or not, at start-up.
        for name, st in states.items():
            if not st.known or not effective[name]:
                continue
            off = [d for d in _gate_def(name).depends_on if not effective.get(d)]
            if off:
                turned_off = [d for d in off if wishes.get(d) is False]
                refusals.refuse(
                    # the gate is named twice: in the sentence and in Kubernetes' own message
                    # pylint: disable-next=duplicate-string-formatting-argument
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
    return {k: val for k, val in wishes.items() if states[k].known}, effective


def _components(
    minor: int, states: Mapping[str, GateState], wishes: Mapping[str, bool]
) -> tuple[dict[str, ComponentSettings], dict[str, str]]:
    """Step 4: the feature-gates entries per component (``_emit`` policy, dependencies
    written wherever their dependents are) and the gates forbidden at ``minor``. Returns
    (component -> settings, gate -> why it is not written)."""
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
    return components, omitted


def _runtime_config(
    minor: int,
    components: Mapping[str, ComponentSettings],
    effective: Mapping[str, bool],
    api_kinds: Sequence[tuple[str, str]],
) -> None:
    """Step 5: kube-apiserver's ``--runtime-config``: the versions core DRA and the planned
    features need that are off by default, and the versions that must be absent (not
    served at ``minor``)."""
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


def _plan_warnings(v: KubeVersion) -> list[str]:
    """What every plan at ``v`` warns about: facts from a pre-release or from documentation
    only, known-bad releases, and what the next minor removes or locks
    (``next_release.advice``)."""
    minor = v.minor
    warnings: list[str] = []
    prerelease = prerelease_source(minor)
    if prerelease:
        warnings.append(
            f"the facts of Kubernetes {_mv(minor)} come from {prerelease}, a pre-release; "
            f"regenerate them once {_mv(minor)}.0 is out (python -m gpufleet.build.release_facts "
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
    warnings.extend(next_release.advice(v))
    return warnings


#: The gate behind DeviceClass ``spec.extendedResourceName`` (KEP-5004).
EXTENDED_RESOURCE_GATE = "DRAExtendedResource"


def extended_resource_served(
    version: str,
    features: Sequence[str] = (),
    gates: Mapping[str, Any] | None = None,
    audit: Mapping[str, Any] | None = None,
) -> tuple[bool, str]:
    """Whether kube-apiserver at ``version`` serves DeviceClass ``extendedResourceName``
    (``DRAExtendedResource`` on), and why: the gate's state in the version model; for a
    gate that can be set, the gate audit's kube-apiserver flags where it read any
    (every kube-apiserver must have it on), else the plan for ``features`` and ``gates``
    (what the version model was asked for). Raises VersionModelError for a version
    outside the model."""
    st = gate_state(EXTENDED_RESOURCE_GATE, version)
    state = f"{EXTENDED_RESOURCE_GATE} is {st.describe()} in {version.lstrip('v')}"
    if st.status == REMOVED:
        last = gate_state(EXTENDED_RESOURCE_GATE, KubeVersion(1, (st.removed_in or st.minor) - 1))
        return last.locked and last.default, state
    if not st.known or st.locked:
        return st.known and st.default, state
    cells = (((audit or {}).get("summary") or {}).get("cells") or {}).get(APISERVER) or {}
    read = {
        host: (cell.get("feature_gates") or {}).get(EXTENDED_RESOURCE_GATE, st.default)
        for host, cell in sorted(cells.items())
        if isinstance(cell, Mapping) and cell.get("state") != "absent"
    }
    if read:
        off = [h for h, v in read.items() if v is not True]
        if off:
            where = ", ".join(off)
            return False, f"{state}, and off on the kube-apiserver of {where} (gate audit)"
        return True, f"{state}, on every kube-apiserver (gate audit)"
    try:
        plan = plan_components(version, features, gates)
    except VersionModelError:
        return st.default, state
    on = bool(plan.wishes.get(EXTENDED_RESOURCE_GATE, st.default))
    return on, f"{state}, {'on' if on else 'off'} as planned for the features and gates asked for"
