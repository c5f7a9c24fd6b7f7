"""The validation against a hostile API server (a real HTTP server on 127.0.0.1,
``api_server``) whose lists hold items that are not objects, or objects whose fields
have other types than the API's: the checks run on the readable items, the unreadable
ones are counted in the warning ``api.objects-unreadable``, and nothing raises."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing_file as lf
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import run as vr
from ansible_collections.gpufleet.cluster.plugins.modules import dra_validate

from tests.harness.ansible_module import run_module
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


#: Claims a pod waits for, whose device requests hold what no API server serves where it
#: has lists of objects and numbers.
ODD_DEVICES: list[dict[str, Any]] = [
    {"constraints": {"matchAttribute": "gpu.nvidia.com/uuid"}},
    {"constraints": "text"},
    {"constraints": [{"requests": [{"a": 1}], "matchAttribute": "gpu.nvidia.com/uuid"}, 7]},
    {"requests": "gpu"},
    {"requests": ["gpu", 5]},
    {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": "x"}}]},
    {"requests": [{"name": "gpu", "firstAvailable": ["x", {"name": "a", "count": [1]}]}]},
    {
        "requests": [
            {
                "name": "gpu",
                "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": "x"}, 3]},
            }
        ]
    },
]


def test_pending_claims_of_odd_requests_on_odd_devices_are_explained(tmp_path: Path) -> None:
    claims, pods = [], []
    for i, devices in enumerate(ODD_DEVICES):
        meta = {"name": f"c{i}", "namespace": "default", "uid": f"u-c{i}"}
        meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
        claims.append({"metadata": meta, "spec": {"devices": devices}, "status": {}})
        pods.append(
            {
                "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"u-p{i}"},
                "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": f"c{i}"}]},
                "status": {"phase": "Pending"},
            }
        )
    # the devices' attributes and capacity: a list and a text, not maps
    devices = [
        {"name": "gpu-0", "attributes": ["x"]},
        {"name": "gpu-1", "capacity": "80Gi"},
        {"name": "gpu-2", "attributes": {"type": {"string": "gpu"}}},
    ]
    rslice = {
        "metadata": {"name": "gpu-1-slice"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "gpu-1",
            "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
    dc = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression": (
        "device.driver == 'gpu.nvidia.com'")}}]}}  # fmt: skip
    paths = answers(
        nodes=listing([NODE]),
        pods=listing(pods),
        resourceclaims=listing(claims),
        resourceslices=listing([rslice]),
    )
    paths["/apis/resource.k8s.io/v1/deviceclasses"] = listing([dc])
    with serve(paths) as (url, _):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kubeconfig", url)), None)
        report = vr.run(kube, {"pending_threshold": 0, "gpu_nodes": ["gpu-1"]})
    pending = {c["id"]: c for c in report["checks"]}["claims.pending"]
    assert pending["status"] == "fail", pending
    assert pending["data"]["pending_total"] == len(ODD_DEVICES)
    explained = {p["claim"]: p["explain"] for p in pending["data"]["pending"]}
    assert set(explained) == {f"default/c{i}" for i in range(len(ODD_DEVICES))}
    # the devices whose attributes or capacity are no map are not usable, by name
    (request,) = explained["default/c5"]["requests"]
    reasons = " ".join(r for r, _count in request["reasons"])
    assert "attributes are not a map" in reasons and "capacity are not a map" in reasons


@pytest.mark.parametrize("value", [0, -1, "-5", "x"])
def test_the_module_refuses_a_listing_wait_that_is_no_time(value: Any, tmp_path: Path) -> None:
    result = run_module(
        dra_validate,
        {
            "kubeconfig": "/nonexistent/kubeconfig",
            "listing_file": str(tmp_path / "listing"),
            "listing_timeout": value,
        },
    )
    assert result["failed"] and "listing_timeout" in result["msg"], result
    assert "Traceback" not in result["msg"] and "kubeconfig /nonexistent" not in result["msg"]


def test_the_module_names_a_listing_that_is_not_there(tmp_path: Path) -> None:
    """No lister started (no ``<file>.pid``) and nothing to read: the module says so
    within ``listing_timeout``, naming the file."""
    with serve(answers()) as (url, _):
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
        path = tmp_path / "listing"
        result = run_module(
            dra_validate,
            {"kubeconfig": str(kubeconfig), "listing_file": str(path), "listing_timeout": 1},
        )
    assert result["failed"], result
    assert result["msg"].startswith("cannot validate: no cluster listing was started"), result
    assert str(path) in result["msg"]


@pytest.mark.parametrize("left", ["record", "mark"])
def test_a_listing_that_expired_unread_is_listed_again_by_the_checks(
    tmp_path: Path, left: str
) -> None:
    """The lister kept its listing until its time ran out (the nodes took longer to read)
    and replaced it with the record of its expiry (or, where that could not be written,
    removed it and renamed its process id file): the checks list the cluster themselves,
    and the report counts their own requests only."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = str(folder / "listing")
    lf.mark_started(path)
    if left == "record":
        lf.write_listing(path, None, expired_s=1800)
    else:
        os.replace(f"{path}.pid", f"{path}.expired")
    with serve(answers(nodes=listing([NODE]))) as (url, seen):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kubeconfig", url)), None)
        report = vr.run(kube, {"listing_file": path, "listing_timeout": 5})
    assert report["meta"]["objects"]["nodes"] == 1
    assert "list_wait" not in report["meta"]["timings_s"]
    assert report["meta"]["api_requests"] == len(report["meta"]["api_request_log"]) == len(seen)
    assert any(line.startswith("GET /api/v1/nodes") for line in report["meta"]["api_request_log"])
