"""Leaked ResourceClaims: dead reservations, orphaned and finished owners, stale entries,
unreserved allocations, over small listed objects."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import leaks as cleaks

from tests.unit.validate_objects import (
    claim,
    pod,
)

pytestmark = pytest.mark.unit


def test_claim_reserved_for_a_deleted_pod_is_a_leak_naming_pod_and_devices() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-1")])
    leaks = cleaks.find_leaks([c], [])
    assert [(x.claim, x.kind, x.status) for x in leaks] == [
        ("default/train", "dead-reservation", "fail")
    ]
    assert "pod default/trainer (uid u-1) no longer exists" in leaks[0].reason
    assert leaks[0].devices == ["gpu.nvidia.com/gpu-1/gpu-0"]


def test_reservation_for_a_replaced_pod_is_dead() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-old")])
    leaks = cleaks.find_leaks([c], [pod("trainer", uid="u-new")])
    assert leaks[0].kind == "dead-reservation"
    assert "was replaced (reserved uid u-old, now u-new)" in leaks[0].reason


def test_reservation_for_a_finished_pod_is_dead() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-1")])
    leaks = cleaks.find_leaks([c], [pod("trainer", uid="u-1", phase="Succeeded")])
    assert leaks[0].kind == "dead-reservation"
    assert "is done (phase Succeeded)" in leaks[0].reason


def test_claim_of_a_running_pod_is_not_a_leak() -> None:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-1")])
    assert cleaks.find_leaks([c], [pod("trainer", uid="u-1", claims=["train"])]) == []


def test_generated_claim_whose_pod_is_gone_is_orphaned() -> None:
    c = claim("trainer-gpu-x7k", owner_pod=("trainer", "u-1"))
    leaks = cleaks.find_leaks([c], [])
    assert [(x.kind, x.status, x.owner) for x in leaks] == [("orphaned", "fail", "default/trainer")]


def test_stale_entry_beside_a_live_one_is_only_a_warning() -> None:
    c = claim("shared", allocated=[("gpu-1", "gpu-0")], reserved_for=[("a", "u-a"), ("b", "u-b")])
    leaks = cleaks.find_leaks([c], [pod("b", uid="u-b", claims=["shared"])])
    assert [(x.kind, x.status) for x in leaks] == [("stale-entries", "warn")]


def test_allocated_claim_reserved_for_nobody_is_a_warning() -> None:
    c = claim("idle", allocated=[("gpu-1", "gpu-0")])
    assert [(x.kind, x.status) for x in cleaks.find_leaks([c], [])] == [("unreserved", "warn")]
