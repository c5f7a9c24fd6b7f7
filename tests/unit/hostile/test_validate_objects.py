"""The validation against a hostile API server (a real HTTP server on 127.0.0.1,
``api_server``) whose lists hold items that are not objects, or objects whose fields
have other types than the API's: the checks run on the readable items, the unreadable
ones are counted in the warning ``api.objects-unreadable``, and nothing raises."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import run as vr

from tests.integration.test_hostile_input_servers import write_kubeconfig
from tests.unit.hostile.api_server import answers, listing, serve

pytestmark = pytest.mark.unit

NODE = {"metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"}}}
ODD: list[Any] = ["x", 5, None, [1], {"metadata": "odd"}]
SHAPED = [{"metadata": {"name": 3, "labels": []}, "spec": [], "status": "up"}]


@pytest.mark.parametrize("kind", ["nodes", "pods", "resourceslices", "resourceclaims"])
def test_validation_skips_and_counts_items_that_are_not_objects(tmp_path: Path, kind: str) -> None:
    items = [*ODD, *SHAPED] + ([NODE] if kind == "nodes" else [])
    with serve(answers(**{kind: listing(items)})) as (url, _):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kubeconfig", url)), None)
        report = vr.run(kube, {})
    checks = {c["id"]: c for c in report["checks"]}
    unreadable = checks["api.objects-unreadable"]
    assert unreadable["status"] == "warn"
    listed = {"resourceslices": "slices", "resourceclaims": "claims"}.get(kind, kind)
    # the odd envelopes are skipped too, unless trimming to the fields read left them sound
    found = re.search(rf"(\d+) {listed}", unreadable["summary"])
    assert found and len(ODD) <= int(found[1]) <= len(ODD) + len(SHAPED), unreadable


def test_a_clean_listing_has_no_unreadable_warning(tmp_path: Path) -> None:
    with serve(answers(nodes=listing([NODE]))) as (url, _):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kubeconfig", url)), None)
        report = vr.run(kube, {})
    assert "api.objects-unreadable" not in {c["id"] for c in report["checks"]}
