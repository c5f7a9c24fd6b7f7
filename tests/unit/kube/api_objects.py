"""Nodes and DaemonSets as the API lists them, for the tests of where a DaemonSet's pod runs:
the scheduling rules, the rollout verdict and the GPU advertisers' node checks."""

from __future__ import annotations

from typing import Any


def node(name: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A Node named ``name`` with ``labels``; ``taints=[...]`` sets ``spec.taints`` and
    ``allocatable={...}`` sets ``status.allocatable``."""
    out: dict[str, Any] = {"metadata": {"name": name, "labels": labels or {}}, "spec": {}}
    if "taints" in extra:
        out["spec"]["taints"] = extra["taints"]
    if "allocatable" in extra:
        out["status"] = {"allocatable": extra["allocatable"]}
    return out


def daemonset(
    name: str,
    release: str,
    pod_spec: dict[str, Any],
    *,
    desired: int = 2,
    ready: int | None = None,
    updated: int | None = None,
    generation: int = 3,
    observed: int | None = None,
) -> dict[str, Any]:
    """A DaemonSet of the Helm release ``release`` whose pod template has ``pod_spec``, and
    whose status has ``desired`` pods scheduled, ``ready`` of them ready and ``updated``
    updated (each ``desired`` when not given), at the ``observed`` generation
    (``generation`` when not given: the controller has seen the spec)."""
    return {
        "metadata": {
            "name": name,
            "generation": generation,
            "annotations": {"meta.helm.sh/release-name": release},
        },
        "spec": {"template": {"spec": pod_spec}},
        "status": {
            "desiredNumberScheduled": desired,
            "numberReady": desired if ready is None else ready,
            "updatedNumberScheduled": desired if updated is None else updated,
            "observedGeneration": generation if observed is None else observed,
        },
    }
