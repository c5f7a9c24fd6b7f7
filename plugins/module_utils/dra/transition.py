# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: what changes from one minor to the next.

Importers import the part that defines what they use (no module re-exports another's names)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.api import (
    API_LIFECYCLE_REMOVED,
    _served,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    COMPONENTS,
    DEPENDENCIES_DECLARED_SINCE,
    RESOURCE_GROUP,
    KubeVersion,
    VersionLike,
    VersionModelError,
    _in_model,
    _mv,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.gates import (
    GATES,
    NOT_YET,
    PRESENT,
    REMOVED,
    gate_state,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.plan import (
    _plan,
    _unknown_reason,
    _unserved_reason,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.settings import (
    ComponentPlan,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.skew import (
    MAX_UPGRADE_MINOR_STEP,
)

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
    _check_step(src, dst)
    features = tuple(features)
    gates = dict(gates or {})
    target = _plan(dst, features, gates, strict=True)
    source = _plan(src, features, gates, strict=False)
    return TransitionPlan(
        source,
        target,
        _gate_changes(src, dst, source, target),
        _runtime_config_changes(dst, source, target),
        _kubeadm_change(src, dst, source, target),
        _upgrade_order(dst),
        _transition_warnings(src, dst, source, target),
        gate_state_changes(src, dst),
    )


def _check_step(src: KubeVersion, dst: KubeVersion) -> None:
    """Refuse a downgrade and a skipped minor (kubeadm upgrades one minor at a time)."""
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


def _gate_changes(
    src: KubeVersion, dst: KubeVersion, source: ComponentPlan, target: ComponentPlan
) -> list[GateChange]:
    """The feature-gates entries to add, remove or change per component, and why."""
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
    return changes


def _runtime_config_changes(
    dst: KubeVersion, source: ComponentPlan, target: ComponentPlan
) -> list[RuntimeConfigChange]:
    """The runtime-config entries to drop (``required`` when the target does not serve the
    version) or add."""
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
    return rc_changes


def _kubeadm_change(
    src: KubeVersion, dst: KubeVersion, source: ComponentPlan, target: ComponentPlan
) -> dict[str, object]:
    """The kubeadm configuration API change: preferred versions, whether the target reads
    the source's, the extraArgs shapes, and what to migrate."""
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
    return kubeadm_change


def _upgrade_order(dst: KubeVersion) -> list[str]:
    """The order of the upgrade steps (version-skew policy)."""
    return [
        f"upgrade kube-apiserver on every control-plane node to {dst} first",
        "then kube-controller-manager and kube-scheduler (never newer than any kube-apiserver)",
        "then kubelets node by node, drained first (a kubelet must not be newer than any "
        "kube-apiserver; it may stay up to 3 minors older)",
        "remove the gates and runtime-config entries marked remove from the kubeadm-config "
        "ConfigMap, the static Pod manifests and the kubelet configuration before the "
        f"{dst.minor_version} binaries start",
    ]


def _transition_warnings(
    src: KubeVersion, dst: KubeVersion, source: ComponentPlan, target: ComponentPlan
) -> list[str]:
    """The target plan's warnings, the start-up dependency check newly in force, and the
    wishes the source version could not honour."""
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
    return warnings
