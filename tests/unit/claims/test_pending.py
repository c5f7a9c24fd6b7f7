"""Pending claims: not allocated past the threshold, explained when a pod waits."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pending as cpending

from tests.unit.validate_objects import (
    GPU_CLASS,
    MIG_CLASS,
    claim,
    mig_device,
    mig_request,
    node,
    pod,
    resource_slice,
)

pytestmark = pytest.mark.unit

NOW = 1767225600.0 + 3600  # 2026-01-01T01:00:00Z


def mig_node(name: str, gpus: int = 2, per_gpu: int = 7, profile: str = "1g.18gb") -> dict:
    devices = []
    for g in range(gpus):
        parent = f"GPU-{name}-{g}"
        devices += [
            mig_device(g, parent, f"MIG-{name}-{g}-{s}", profile, s) for s in range(per_gpu)
        ]
    return resource_slice(name, devices)


def test_pending_claim_with_a_waiting_pod_fails_with_the_explanation() -> None:
    c = claim("inference", requests=[mig_request("1g.10gb")], created="2026-01-01T00:00:00Z")
    waiting = pod("server", phase="Pending", claims=["inference"])
    (p,) = cpending.find_pending(
        [c], [waiting], [mig_node("gpu-1")], [MIG_CLASS], [node("gpu-1")], NOW, 300
    )
    assert p.status == "fail"
    assert p.users == ["default/server"]
    assert "not allocated for 60m" in p.reason
    assert "0 of 14 devices match: profile is 1g.18gb, wanted 1g.10gb (14)" in p.reason


def test_young_or_unused_claims() -> None:
    young = claim("young", created="2026-01-01T00:59:00Z")
    unused = claim("unused", created="2026-01-01T00:00:00Z")
    found = cpending.find_pending([young, unused], [], [], [GPU_CLASS], [], NOW, 300)
    assert [(p.claim, p.status) for p in found] == [("default/unused", "warn")]
    assert "no pod uses it" in found[0].reason
