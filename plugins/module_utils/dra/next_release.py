# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What the minor after a Kubernetes release will remove or lock, as advice for a plan that
ends at that release (``gpufleet gates plan``, ``gpufleet upgrade --plan``).

For a next minor the model has generated facts of, those facts say it: a DRA feature gate
the next minor no longer registers, one it locks, a resource.k8s.io version it no longer
serves. For the minor after the newest generated release, that release's own source says
it: the comments on its versioned gate specs (``ReleaseFacts.announced``, read by
``gpufleet.build.release_facts.announced_lifecycle`` from ``pkg/features/kube_features.go``)
and the removal its API lifecycle names (``ApiFacts.removed``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import release_data as _releases
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.api import served_api_versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    RESOURCE_GROUP,
    KubeVersion,
    VersionLike,
    _in_model,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.gates import (
    GATES,
    REMOVED,
    gate_state,
)

__all__ = ["LOCK", "REMOVE", "STOP_SERVING", "Coming", "advice", "coming_changes"]

REMOVE = "remove"
LOCK = "lock"
STOP_SERVING = "stop-serving"


@dataclass(frozen=True)
class Coming:
    """One change of the next minor: ``subject`` (a gate name, or a group-version such as
    ``resource.k8s.io/v1beta2``), ``change`` (REMOVE, LOCK or STOP_SERVING), ``value`` (the
    value a LOCK keeps), ``source`` (where the model knows it from)."""

    minor: int
    subject: str
    change: str
    source: str
    value: bool = True

    def advice(self) -> str:
        nxt = f"Kubernetes 1.{self.minor}"
        if self.change == REMOVE:
            return (
                f"{nxt} will remove the feature gate {self.subject} ({self.source}): a "
                f"component given it in --feature-gates or featureGates will not start; drop "
                f"it from every component before upgrading to 1.{self.minor}."
            )
        if self.change == LOCK:
            return (
                f"{nxt} will lock the feature gate {self.subject} to "
                f"{str(self.value).lower()} ({self.source}): a component given "
                f"{self.subject}={str(not self.value).lower()} will not start; stop relying "
                f"on it being {'off' if self.value else 'on'} before upgrading to 1.{self.minor}."
            )
        return (
            f"{nxt} will stop serving {self.subject} ({self.source}): clients, manifests and "
            f"stored objects that use it must move to {RESOURCE_GROUP}/v1 before upgrading to "
            f"1.{self.minor}."
        )


def _from_facts(minor: int) -> list[Coming]:
    now, nxt = KubeVersion(1, minor), KubeVersion(1, minor + 1)
    rel = _releases.release(minor + 1)
    source = f"facts of v{rel.release}" if rel is not None else f"1.{minor + 1}"
    out = []
    for name, gate in sorted(GATES.items()):
        if not gate.dra:
            continue
        before, after = gate_state(name, now), gate_state(name, nxt)
        if not before.known:
            continue
        if after.status == REMOVED:
            out.append(Coming(minor + 1, name, REMOVE, source))
        elif after.known and after.locked and not before.locked:
            out.append(Coming(minor + 1, name, LOCK, source, after.default))
    served_next = {a.group_version for a in served_api_versions(nxt)}
    for api in served_api_versions(now):
        if api.group_version not in served_next:
            out.append(Coming(minor + 1, api.group_version, STOP_SERVING, source))
    return out


def _announced(minor: int) -> list[Coming]:
    rel = _releases.release(minor)
    if rel is None:
        return []
    source = f"announced in the v{rel.release} source"
    out = []
    for name, steps in sorted(rel.announced.items()):
        gate = GATES.get(name)
        if gate is None or not gate.dra or not gate_state(name, KubeVersion(1, minor)).known:
            continue
        if steps.get("remove") == minor + 1:
            out.append(Coming(minor + 1, name, REMOVE, source))
        elif steps.get("lock") == minor + 1:
            default = gate_state(name, KubeVersion(1, minor)).default
            out.append(Coming(minor + 1, name, LOCK, source, default))
    for ver, api in sorted(rel.resource.items()):
        if api.served and api.removed == minor + 1:
            out.append(
                Coming(
                    minor + 1,
                    f"{RESOURCE_GROUP}/{ver}",
                    STOP_SERVING,
                    f"{source}, its API lifecycle",
                )
            )
    return out


def coming_changes(version: VersionLike) -> tuple[Coming, ...]:
    """What the minor after ``version``'s removes or locks of DRA (feature gates and
    resource.k8s.io versions): from that minor's facts when the model has them, else from
    what ``version``'s own release announces. Empty for a minor the model has neither for.
    Raises VersionModelError / VersionParseError as ``_in_model``."""
    minor = _in_model(version).minor
    if _releases.release(minor + 1) is not None:
        return tuple(_from_facts(minor))
    return tuple(_announced(minor))


def advice(version: VersionLike) -> list[str]:
    """``coming_changes`` as sentences."""
    return [c.advice() for c in coming_changes(version)]
