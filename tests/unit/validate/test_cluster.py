"""All cluster-side checks together, and the claim checks, over small listed objects
(``plugins/module_utils/validate/cluster.py``); each group of checks has the file of its
module (``test_versions.py``, ``test_gates.py``, ``test_api.py``, ``test_nodes.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import explain as cexplain
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc

from tests.unit.validate.listed_cluster import by_id, healthy
from tests.unit.validate_objects import (
    claim,
    pod,
)

pytestmark = pytest.mark.unit


def test_a_healthy_cluster_passes_every_cluster_check() -> None:
    listing, settings = healthy()
    checks = by_id(vc.all_checks(listing, settings, audit={"version": "1.37.2", "findings": []}))
    bad = {i: (c.status, c.summary) for i, c in checks.items() if c.status not in ("pass", "skip")}
    assert bad == {}
    assert checks["api.scheduler-dynamicresources"].status == "skip"
    assert checks["nodes.resourceslices"].summary.endswith("matching the GPU facts on 2")


def test_leaked_and_pending_claims_become_checks() -> None:
    listing, settings = healthy()
    listing.claims = [
        claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("gone", "u-gone")])
    ]
    c = by_id(vc.claims_checks(listing, settings))
    assert c["claims.leaked"].status == "fail"
    assert c["claims.leaked"].problems[0].subject == "default/train"
    assert c["claims.pending"].status == "pass"


def test_pending_claims_judged_in_a_child_process_are_judged_as_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``all_checks`` runs ``claims.pending`` in a child process from
    ``PARALLEL_MIN_CLAIMS`` claims: the report is the one made in this process."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import forked

    listing, settings = healthy()
    listing.claims = [
        claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("gone", "u-gone")]),
        claim("wait", created="2025-12-31T00:00:00Z"),
    ]
    listing.pods = [*listing.pods, pod("waiter", phase="Pending", claims=["wait"])]
    here = [c.to_dict() for c in vc.all_checks(listing, settings)]
    assert by_id(vc.all_checks(listing, settings))["claims.pending"].status == "fail"
    made_in: list[bool] = []
    real = forked.Forked

    def recorded(*args: object) -> forked.Forked:
        job = real(*args)  # type: ignore[arg-type]
        made_in.append(job.forked)
        return job

    monkeypatch.setattr(vc, "PARALLEL_MIN_CLAIMS", 1)
    monkeypatch.setattr(vc, "Forked", recorded)
    assert [c.to_dict() for c in vc.all_checks(listing, settings)] == here
    assert made_in == [forked.spare_cpus() > 0]
    # stored as the module stores them: the same report, and once the child that reads
    # the claims' allocations is forked, the module holds them no more
    listing.claims, listing.pods = vk.PagedList(listing.claims), vk.PagedList(listing.pods)
    assert [c.to_dict() for c in vc.all_checks(listing, settings)] == here
    kept = listing.claims.derived(cexplain.allocations_fold()[0], lambda _: None)
    assert (kept is None) == made_in[-1]
