"""The gc plan: which leaked claims are released or deleted, and which a live pod keeps."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import gc as cgc

from tests.unit.validate_objects import (
    claim,
    pod,
)

pytestmark = pytest.mark.unit


def test_gc_releases_a_dead_reservation_and_clears_the_allocation() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-1")])
    (action,) = cgc.plan_gc([c], [])
    assert action.action == "release"
    assert action.status_patch == {"reservedFor": []}
    assert action.remove_finalizer is True
    assert action.delete is False


def test_gc_deletes_an_orphaned_generated_claim() -> None:
    c = claim(
        "trainer-gpu",
        owner_pod=("trainer", "u-1"),
        allocated=[("gpu-1", "gpu-0")],
        reserved_for=[("trainer", "u-1")],
    )
    (action,) = cgc.plan_gc([c], [])
    assert action.delete is True
    assert action.action == "delete"


def test_gc_never_touches_a_claim_a_live_pod_reserves_or_uses() -> None:
    reserved = claim(
        "shared", allocated=[("gpu-1", "gpu-0")], reserved_for=[("a", "u-a"), ("b", "u-b")]
    )
    used = claim("idle", allocated=[("gpu-1", "gpu-1")])
    pods = [
        pod("b", uid="u-b", claims=["shared"]),
        pod("waiting", phase="Pending", claims=["idle"]),
    ]
    actions = {a.claim: a for a in cgc.plan_gc([reserved, used], pods)}
    assert actions["default/shared"].action == "skip"
    assert "b" in actions["default/shared"].reason
    # 'idle' is used by a pending pod: not a leak at all
    assert "default/idle" not in actions
    assert all(a.status_patch is None and not a.delete for a in actions.values())
