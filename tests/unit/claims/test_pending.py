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


def test_pending_claims_short_of_shared_counters_are_explained_in_counters() -> None:
    """Two claims wait on the simulator's dynamic MIG H200 whose seven 1g.18gb are held:
    both are explained from one counter accounting, naming the memory slices held."""
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, slices

    held = [allocated_claim(f"c{i}", H200_NODE, f"gpu-0-mig-1g18gb-19-{i}") for i in range(7)]
    waiting = [
        claim(name, requests=[mig_request(profile)], created="2026-01-01T00:00:00Z")
        for name, profile in (("me", "1g.18gb+me"), ("big", "3g.71gb"))
    ]
    pods = [pod(f"p-{c['metadata']['name']}", claims=[c["metadata"]["name"]]) for c in waiting]
    found = cpending.find_pending(
        [*held, *waiting], pods, slices(H200_NODE), [MIG_CLASS], [node(H200_NODE)], NOW, 300
    )
    assert [(p.claim, p.explain["verdict"]) for p in found] == [
        ("default/me", "counters"),
        ("default/big", "counters"),
    ]
    assert "memory-slice-3 1 of 1 consumed, needs 1 (held by default/c3)" in found[0].reason
    assert "memory-slice-4 1 of 1 consumed, needs 1 (held by default/c4)" in found[1].reason


@pytest.mark.parametrize("kept", [1000, 2])
def test_stored_claims_are_judged_in_one_walk_as_a_list_is(
    monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    """Of a PagedList, the claims judged and the allocations their explanations read come
    from one walk; past ``MAX_KEPT_UNALLOCATED`` claims not allocated, the claims are
    walked again instead of kept. Either way the claims found are those of a list."""

    from tests.unit.cluster.test_paged_listing import counted

    monkeypatch.setattr(cpending, "MAX_KEPT_UNALLOCATED", kept)
    held = claim("held", requests=[mig_request("1g.18gb")], created="2026-01-01T00:00:00Z")
    held["status"] = {
        "allocation": {
            "devices": {
                "results": [{"driver": "gpu.nvidia.com", "pool": "gpu-1", "device": "gpu-0-mig-0"}]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "run", "uid": "u-run"}],
    }
    waiting = [
        claim(f"wait-{i}", requests=[mig_request("1g.18gb")], created="2026-01-01T00:00:00Z")
        for i in range(3)
    ]
    items = [waiting[0], held, *waiting[1:], claim("young", created="2026-01-01T00:59:00Z")]
    pods = [pod(f"server-{i}", phase="Pending", claims=[f"wait-{i}"]) for i in range(3)]
    args = ([mig_node("gpu-1")], [MIG_CLASS], [node("gpu-1")], NOW, 300)
    as_list = [p.to_dict() for p in cpending.find_pending(items, pods, *args)]
    walks: list[int] = []
    stored = counted(items, 2, lambda: walks.append(1))
    assert [p.to_dict() for p in cpending.find_pending(stored, pods, *args)] == as_list
    assert [p["claim"] for p in as_list] == [f"default/wait-{i}" for i in range(3)]
    assert len(walks) == (1 if kept > 4 else 2)
