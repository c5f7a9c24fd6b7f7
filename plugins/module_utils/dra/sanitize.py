# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: judging existing feature gates and runtime-config against a release.

Importers import the part that defines what they use (no module re-exports another's names)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import release_data as _releases
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.api import (
    _CORE_RUNTIME_CONFIG,
    API_LIFECYCLE_REMOVED,
    _served,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    DEPENDENCIES_DECLARED_SINCE,
    GA,
    RESOURCE_GROUP,
    KubeVersion,
    VersionLike,
    _in_model,
    _mv,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.gates import (
    GATES,
    GateState,
    gate_state,
    is_known_gate,
    registered_by,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.plan import (
    _GA_RISK,
    _enabled_at,
    _fmt,
    _kv,
    _locked_reason,
    _unknown_reason,
    _unserved_reason,
    unregistered_gate_reason,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.settings import (
    parse_gate_bool,
    parse_runtime_config,
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


def _advice(st: GateState, entry: str, val: bool) -> list[Finding]:
    """Advice on a gate kept as set: a locked gate (no effect, fatal once removed), a GA
    gate on by default set to true."""
    if st.locked:
        return [
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
        ]
    if st.stage == GA and st.default and val:
        return [
            Finding(
                "feature-gate",
                entry,
                False,
                "advise-remove",
                f"{st.describe()}: {_GA_RISK}",
            )
        ]
    return []


def _dependency_findings(
    effective: dict[str, bool], states: Mapping[str, GateState], kept: dict[str, bool], minor: int
) -> list[Finding]:
    """Fatal: an enabled gate whose declared dependency is disabled (1.35+), charged to the
    gates set here (popped from ``kept``); then the dependencies outside the DRA gates."""
    findings: list[Finding] = []
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
    return findings


def _judge_runtime_config(
    existing_runtime_config: str | Sequence[str], minor: int, findings: list[Finding]
) -> list[str]:
    """Judge ``--runtime-config`` entries at ``minor``: findings go to ``findings``; returns
    the entries kept (``group/version=value``)."""
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
    return kept_rc


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
    parsed = {k: parse_gate_bool(val, f"feature gate {k}") for k, val in existing_gates.items()}
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
        findings.extend(_advice(st, entry, val))
    if minor >= DEPENDENCIES_DECLARED_SINCE:
        findings.extend(_dependency_findings(effective, states, kept, minor))
    kept_rc = _judge_runtime_config(existing_runtime_config, minor, findings)
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
