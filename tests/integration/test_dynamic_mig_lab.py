"""Dynamic MIG on a real lab: MIG devices made when a claim is prepared and destroyed when
it is unprepared, the scheduler placing them through the GPU's shared counters.

It brings up a lab of its own (``gpufleet-dynmig`` on 10.89.63.0/24) with one GPU worker
whose simulated H200 is published as NVIDIA's DRA driver does with its ``DynamicMIG`` gate
(``gpufleet lab up --workers 1 --dynamic-mig``: a CounterSet per GPU, the full GPU and
every MIG profile at every placement consuming from it), and removes it at the end
(``GPUFLEET_TEST_KEEP_LAB=1`` keeps it; ``GPUFLEET_DYNMIG_LAB=0`` skips the module, a
developer's quick run; CI never sets it). The kube-scheduler and the kubelet are real; the
GPU simulator's kubelet plugin creates each GPU instance at the placement the scheduler
allocated, through the simulator's ``nvidia-smi`` on the node.

The scenario: seven pods each claiming a ``1g.18gb`` run at once; an eighth waits,
unschedulable; a ``3g.71gb`` claim waits while no four aligned memory slices are free and
runs once they are, its GPU instance (``nvidia-smi mig -lgi`` on the node) at the placement
of the allocated device; when every pod is gone the node has no GPU instance. Each step
prints its time (run with ``-s`` to see them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    templates as claim_templates,
)

from tests.lab.running import Lab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GPUFLEET = REPO / ".venv" / "bin" / "gpufleet"
OWN_LAB = {"GPUFLEET_LAB_NAME": "gpufleet-dynmig", "GPUFLEET_LAB_SUBNET": "10.89.63.0/24"}
NS = "dynamic-mig"
SMI = "nvidia-smi"
IMAGE = "localhost/gpufleet/busybox:1"
#: An ``nvidia-smi mig -lgi`` row: GPU, profile name, profile ID, instance ID, start:size.
LGI_ROW = re.compile(r"^\|\s+(\d+)\s+MIG (\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s+\|$", re.M)
#: A dynamic MIG device: gpu-<minor>-mig-<profile>-<GI profile ID>-<placement start>.
DEVICE = re.compile(r"^gpu-(\d+)-mig-[a-z0-9-]+-(\d+)-(\d+)$")


def _gpufleet(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GPUFLEET), *args],
        env={**os.environ, **OWN_LAB},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    if os.environ.get("GPUFLEET_DYNMIG_LAB") == "0":
        pytest.skip("GPUFLEET_DYNMIG_LAB=0: the dynamic MIG lab was turned off")
    from gpufleet.build import binaries

    try:
        t = time.monotonic()
        up = _gpufleet("lab", "up", "--workers", "1", "--dynamic-mig")
        assert up.returncode == 0, (
            f"lab up exited {up.returncode}:\n{up.stdout[-3000:]}{up.stderr[-3000:]}"
        )
        up_s = time.monotonic() - t
        print(f"\nlab up --dynamic-mig {up_s:.0f}s")
        status = json.loads(_gpufleet("lab", "status", "--json").stdout)
        running = Lab(
            name=OWN_LAB["GPUFLEET_LAB_NAME"],
            kubeconfig=Path(status["kubeconfig"]),
            kubectl=binaries.binary_path("kubectl", status["kubernetes_version"]),
            status=status,
            up_seconds=up_s,
            lab_env=dict(OWN_LAB),
        )
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        running.kubectl_run("apply", "-f", "-", stdin=json.dumps(namespace))
        yield running
    finally:
        if os.environ.get("GPUFLEET_TEST_KEEP_LAB") != "1":
            down = _gpufleet("lab", "down", timeout=600)
            assert down.returncode == 0, f"lab down left things behind:\n{down.stderr[-3000:]}"


class Step:
    """Prints how long each step of the scenario took."""

    def __init__(self) -> None:
        self.t = time.monotonic()

    def done(self, what: str) -> None:
        now = time.monotonic()
        print(f"  {what}: {now - self.t:.1f}s")
        self.t = now


def _pod(name: str, template: str) -> dict[str, Any]:
    show = "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; sleep 3600"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "resourceClaims": [{"name": "mig", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "gpu",
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/busybox", "sh", "-c", show],
                    "resources": {"claims": [{"name": "mig"}]},
                }
            ],
        },
    }


def _apply(lab: Lab, *objects: dict[str, Any]) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    lab.kubectl_run("apply", "-f", "-", stdin=json.dumps(doc))


def _unschedulable(lab: Lab, pod: str) -> bool:
    status = lab.kubectl_json("get", "pod", "-n", NS, pod)["status"]
    return status.get("phase") == "Pending" and any(
        c["type"] == "PodScheduled"
        and c["status"] == "False"
        and c.get("reason") == "Unschedulable"
        for c in status.get("conditions", [])
    )


def _allocated_device(lab: Lab, pod: str) -> str:
    """The device allocated to ``pod``'s claim (its ResourceClaim's allocation result)."""
    status = lab.kubectl_json("get", "pod", "-n", NS, pod)["status"]
    claim = status["resourceClaimStatuses"][0]["resourceClaimName"]
    rc = lab.kubectl_json("get", "resourceclaim", "-n", NS, claim)
    results = rc["status"]["allocation"]["devices"]["results"]
    assert [r["driver"] for r in results] == ["gpu.nvidia.com"], results
    return results[0]["device"]


def _gpu_instances(lab: Lab, node: str) -> list[tuple[str, int, int, int]]:
    """``nvidia-smi mig -lgi`` on the node: (profile, profile ID, start, size) per GI."""
    out = lab.node_exec(node, SMI, "mig", "-lgi", check=False)
    return sorted((m[2], int(m[3]), int(m[5]), int(m[6])) for m in LGI_ROW.finditer(out))


def _placement(device: str) -> tuple[int, int]:
    m = DEVICE.match(device)
    assert m, f"{device} is not a dynamic MIG device name"
    return int(m[2]), int(m[3])


def _delete(lab: Lab, *pods: str) -> None:
    lab.kubectl_run("delete", "pod", "-n", NS, "--wait=true", "--timeout=180s", *pods)


def _seven_small_then_an_eighth_waits(lab: Lab, node: str, step: Step) -> dict[str, int]:
    """Seven ``1g.18gb`` pods run at once, an eighth stays unschedulable. Returns each
    running pod's placement start."""
    small = [f"small-{i}" for i in range(7)]
    _apply(lab, *(_pod(name, "mig-1g18gb") for name in small))
    lab.kubectl_run(
        "wait", "-n", NS, *(f"pod/{p}" for p in small), "--for=condition=Ready", "--timeout=300s"
    )
    step.done("7 x 1g.18gb pods Ready")
    starts = {p: _placement(_allocated_device(lab, p)) for p in small}
    assert sorted(s for _, s in starts.values()) == list(range(7)), starts
    assert {pid for pid, _ in starts.values()} == {19}, starts
    gis = _gpu_instances(lab, node)
    assert gis == sorted(("1g.18gb", 19, s, 1) for s in range(7)), gis
    logs = lab.kubectl_run("logs", "-n", NS, "small-0")
    assert re.search(r"NVIDIA_VISIBLE_DEVICES=MIG-[0-9a-f-]{36}", logs), logs
    _apply(lab, _pod("small-7", "mig-1g18gb"))
    lab.wait_for(
        "the eighth 1g.18gb pod to be unschedulable", lambda: _unschedulable(lab, "small-7")
    )
    time.sleep(10)  # and it stays so
    assert _unschedulable(lab, "small-7")
    step.done("eighth 1g.18gb pod Pending, Unschedulable")
    _delete(lab, "small-7")
    return {p: s for p, (_, s) in starts.items()}


def _large_waits_for_four_aligned_slices(
    lab: Lab, node: str, starts: dict[str, int], step: Step
) -> None:
    """A ``3g.71gb`` pod waits while no aligned block of four slices is free (one slice of
    the first block freed is not enough), then runs where the scheduler put it."""
    by_start = {s: p for p, s in starts.items()}
    _apply(lab, _pod("large", "mig-3g71gb"))
    lab.wait_for("the 3g.71gb pod to be unschedulable", lambda: _unschedulable(lab, "large"))
    step.done("3g.71gb pod Pending, Unschedulable")
    _delete(lab, by_start[3])
    lab.wait_for(
        "the GPU instance at slice 3 destroyed",
        lambda: ("1g.18gb", 19, 3, 1) not in _gpu_instances(lab, node),
    )
    time.sleep(10)
    assert _unschedulable(lab, "large"), "3g.71gb scheduled with slices 0-2 still taken"
    step.done("one slice of block 0-3 freed: 3g.71gb still Pending")
    _delete(lab, by_start[4], by_start[5], by_start[6])
    step.done("slices 4-6 freed")
    lab.kubectl_run("wait", "-n", NS, "pod/large", "--for=condition=Ready", "--timeout=300s")
    step.done("3g.71gb pod Ready")
    device = _allocated_device(lab, "large")
    profile_id, start = _placement(device)
    assert (profile_id, start) == (9, 4), device  # the one free aligned block of four
    gis = _gpu_instances(lab, node)
    assert ("3g.71gb", profile_id, start, 4) in gis, (device, gis)
    assert gis == sorted([("3g.71gb", 9, 4, 4)] + [("1g.18gb", 19, s, 1) for s in (0, 1, 2)])
    mig = re.search(
        r"NVIDIA_VISIBLE_DEVICES=(MIG-[0-9a-f-]{36})", lab.kubectl_run("logs", "-n", NS, "large")
    )
    assert mig, "the 3g.71gb container got no MIG device UUID"
    assert mig[1] in lab.node_exec(node, SMI, "-L"), "the container's MIG UUID is not the GI's"


def test_dynamic_mig_placements_follow_the_scheduler(lab: Lab) -> None:
    node = lab.workers()[0]
    for name, profile in (("mig-1g18gb", "1g.18gb"), ("mig-3g71gb", "3g.71gb")):
        rct = claim_templates.build(
            "mig-slice", {"profile": profile, "name": name, "namespace": NS}
        )
        lab.kubectl_run("apply", "-f", "-", stdin=yaml.safe_dump(rct))
    devices = lab.wait_for(
        f"{node}'s dynamic MIG devices",
        lambda: [
            d["name"]
            for s in lab.kubectl_json("get", "resourceslices")["items"]
            if s["spec"].get("nodeName") == node
            for d in s["spec"].get("devices", [])
        ],
    )
    assert "gpu-0" in devices and "gpu-0-mig-3g71gb-9-4" in devices, devices
    assert _gpu_instances(lab, node) == []
    print(f"\n{node}: {len(devices)} devices published")
    step = Step()
    try:
        starts = _seven_small_then_an_eighth_waits(lab, node, step)
        _large_waits_for_four_aligned_slices(lab, node, starts, step)
    finally:
        lab.kubectl_run("delete", "pods", "--all", "-n", NS, "--wait=true", check=False)
    step.done("every pod deleted")
    lab.wait_for(f"no GPU instance on {node}", lambda: _gpu_instances(lab, node) == [], 120)
    mode = lab.node_exec(node, SMI, "--query-gpu=mig.mode.current", "--format=csv,noheader")
    assert mode.strip() == "Disabled", mode  # the last MIG device gone, as NVIDIA's driver does
    lab.wait_for(
        "the pods' ResourceClaims deleted",
        lambda: lab.kubectl_json("get", "resourceclaims", "-n", NS)["items"] == [],
    )
    step.done("no GPU instance left, MIG mode Disabled")
