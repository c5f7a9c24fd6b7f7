"""Shared counters (dynamic MIG) against the real kube-scheduler: the ResourceSlices the
GPU simulator's plugin publishes with ``--dynamic-mig`` for one H200 and one B200 (the unit
tests' fixture, ``tests/unit/dynamic_mig_slices.py``) are created for two KWOK nodes.

- H200: kube-scheduler allocates seven 1g.18gb claims, then cannot allocate an eighth 1g
  (the +me profile, whose placements 0 to 6 overlap them). ``claims explain`` must say why
  in the scheduler's terms (the memory slices, held by the claims the scheduler chose), and
  ``report`` must count memory slice 7 and the multiprocessors left as stranded.
- B200: two 3g.90gb take the 8 memory slices; a 1g.23gb waits, and the report counts the
  18 multiprocessors left (one of 7 compute slices) as stranded.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufleet.lab import gpusim_plugin
from tests.harness.controlplane import ControlPlane
from tests.integration.conftest import DEFAULT_VERSION
from tests.integration.test_validate_claims import apply, claim_spec, pod, run_cli, wait_for
from tests.unit import dynamic_mig_slices

pytestmark = pytest.mark.integration

NS = "leak"  # the namespace test_validate_claims' pod() puts pods in


@pytest.fixture(scope="module")
def cluster() -> Any:
    from tests.integration.conftest import require_binaries

    require_binaries(DEFAULT_VERSION)
    cp = ControlPlane(DEFAULT_VERSION)
    cp.start()
    try:
        nodes = cp.start_kwok(2, labels={"nvidia.com/gpu.present": "true"}, name_prefix="dyn-")
        cp.wait_nodes_ready(nodes)
        slices = []
        for node, fixture in zip(
            nodes, (dynamic_mig_slices.H200_NODE, dynamic_mig_slices.B200_NODE), strict=True
        ):
            for i, s in enumerate(dynamic_mig_slices.slices(fixture)):
                s["metadata"] = {"name": f"{node}-gpu.nvidia.com-{i}"}
                s["spec"]["nodeName"] = node
                s["spec"]["pool"]["name"] = node
                slices.append(s)
        cp.create_namespace(NS)
        apply(cp, [*gpusim_plugin.device_classes(), *slices])
        yield cp, nodes
    finally:
        cp.stop()


def profile_claim(name: str, profile: str) -> dict[str, Any]:
    selector = f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": claim_spec("mig.nvidia.com", selector),
    }


def allocations(cp: ControlPlane, pool: str) -> dict[str, str]:
    """Device of ``pool`` -> ``namespace/claim`` of every allocated claim of ``NS``."""
    items = json.loads(cp.kubectl("-n", NS, "get", "resourceclaims", "-o", "json").stdout)
    out = {}
    for c in items["items"]:
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get(
            "results"
        ) or []:
            if r["pool"] == pool:
                out[r["device"]] = f"{NS}/{c['metadata']['name']}"
    return out


def unschedulable(cp: ControlPlane, name: str) -> bool:
    """Whether kube-scheduler marked pod ``name`` of ``NS`` unschedulable."""
    status = json.loads(cp.kubectl("-n", NS, "get", "pod", name, "-o", "json").stdout)["status"]
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in status.get("conditions") or []
    )


def test_the_schedulers_refusal_is_explained_by_memory_slices(cluster: Any) -> None:
    cp, (node, _) = cluster
    apply(cp, [profile_claim(f"one-{i}", "1g.18gb") for i in range(7)])
    apply(cp, [pod(f"one-{i}", {"resourceClaimName": f"one-{i}"}) for i in range(7)])
    wait_for("kube-scheduler to allocate seven 1g.18gb", lambda: len(allocations(cp, node)) == 7)
    held = allocations(cp, node)
    assert sorted(held) == [f"gpu-0-mig-1g18gb-19-{i}" for i in range(7)]

    apply(
        cp, [profile_claim("eighth", "1g.18gb+me"), pod("eighth", {"resourceClaimName": "eighth"})]
    )
    wait_for("the scheduler to give up on the eighth pod", lambda: unschedulable(cp, "eighth"))
    code, out = run_cli(cp, "claims", "explain", f"{NS}/eighth", "--json")
    assert code == 1, out
    ex = json.loads(out)
    assert ex["verdict"] == "counters", ex["summary"]
    (req,) = ex["requests"]
    assert (req["matching"], req["free"]) == (7, 0)
    (cs,) = req["counter_sets"]
    assert (cs["node"], cs["counter_set"], cs["memory_slices_free"]) == (
        node,
        "gpu-0-counter-set",
        [7],
    )
    slices = {e["counter"]: e for e in cs["exhausted"] if e["counter"].startswith("memory-")}
    assert sorted(slices) == [f"memory-slice-{i}" for i in range(7)]
    for i in range(7):  # each slice held by the claim the scheduler put on that placement
        assert slices[f"memory-slice-{i}"]["holders"] == [held[f"gpu-0-mig-1g18gb-19-{i}"]]
    assert ex["pods"][0]["scheduler"]  # the scheduler did refuse it

    code, out = run_cli(cp, "report", "--json", "-")
    assert code == 0, out
    report = json.loads(out[out.index("{") :])
    (gpu,) = [g for g in report["gpus"] if g["node"] == node]
    assert gpu["memory_slices_stranded"] == [7]
    assert (gpu["multiprocessors_free"], gpu["multiprocessors_stranded"]) == (20, 20)
    assert gpu["claims"] == sorted(held.values())


def test_two_3g_on_a_b200_strand_one_of_seven_compute_slices(cluster: Any) -> None:
    cp, (_, node) = cluster
    apply(cp, [profile_claim(f"half-{i}", "3g.90gb") for i in range(2)])
    apply(cp, [pod(f"half-{i}", {"resourceClaimName": f"half-{i}"}) for i in range(2)])
    wait_for("kube-scheduler to allocate two 3g.90gb", lambda: len(allocations(cp, node)) == 2)
    held = allocations(cp, node)
    assert sorted(held) == ["gpu-0-mig-3g90gb-9-0", "gpu-0-mig-3g90gb-9-4"]
    apply(cp, [profile_claim("small", "1g.23gb"), pod("small", {"resourceClaimName": "small"})])
    wait_for("the scheduler to give up on the 1g.23gb pod", lambda: unschedulable(cp, "small"))
    code, out = run_cli(cp, "claims", "explain", f"{NS}/small", "--json")
    assert code == 1, out
    ex = json.loads(out)
    assert ex["verdict"] == "counters", ex["summary"]
    (cs,) = ex["requests"][0]["counter_sets"]
    assert cs["node"] == node and cs["memory_slices_free"] == []
    exhausted = {e["counter"]: e for e in cs["exhausted"]}
    assert exhausted["memory-slice-2"]["holders"] == [held["gpu-0-mig-3g90gb-9-0"]]
    assert exhausted["memory"]["holders"] == sorted(held.values())

    code, out = run_cli(cp, "report", "--json", "-")
    assert code == 0, out
    report = json.loads(out[out.index("{") :])
    (gpu,) = [g for g in report["gpus"] if g["node"] == node]
    assert (gpu["model"], gpu["memory_slices_free"], gpu["memory_stranded"]) == (
        "NVIDIA B200",
        [],
        0,
    )
    assert (gpu["multiprocessors_free"], gpu["multiprocessors_stranded"]) == (18, 18)
