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

At each step the real CLI runs against the lab and what it says is checked against what the
cluster holds (the allocated ResourceClaims, the counters their devices consume as the
ResourceSlices publish them, and the GPU instances ``nvidia-smi mig -lgi`` lists on the
node): ``gpufleet claims explain NS/CLAIM --json`` of the pending eighth ``1g.18gb`` claim
(verdict ``in-use``: each of the seven ``1g.18gb`` devices is allocated, to the claim that
holds its memory slice) and of the pending ``3g.71gb`` claim (verdict ``counters``: in each
aligned block the held memory slices, exhausted, and the claims holding them), and
``gpufleet report --json -`` after the seven run, while the ``3g.71gb`` waits, after it runs
and at the end (the GPU's row: memory slices free and stranded, multiprocessors free and
stranded). Their lines are printed with ``-s`` too.

Then Kueue (the kueue role, as ``tests/lab/test_kueue.py`` installs it) with a quota per MIG
profile: DeviceClass ``mig-1g.18gb.gpufleet.io`` and a team with a nominal quota of 2 of it.
Of three Jobs claiming through that class two are admitted and run on dynamic ``1g.18gb``
devices (two GPU instances on the node); the third waits on Kueue's quota while the GPU's
counters have room for five more; ``gpufleet validate --kueue`` judges the quota against the
devices the GPU's counters allow at once (7 of ``1g.18gb``); one Job deleted, the third runs.
Kueue is removed after, leaving no pod and no GPU instance.

Last, ``gpufleet mig mode --to static`` (with ``mig_layout={"1g.18gb": 7}``) and ``--to
dynamic`` move the node while a Deployment's pod holds a claim on it: after each, the node is
uncordoned, ``nvidia-smi mig -lgi`` lists the static layout (none after the move back), the
ResourceSlices publish counters only in dynamic mode and the plugin DaemonSet is on rolling
updates again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    templates as claim_templates,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue.queues import (
    profile_device_class,
)

from gpufleet.lab import kueue as lab_kueue
from tests.lab.kueue_scenario import Scenario, kueue_left, play, play_failures, remove_kueue
from tests.lab.running import Lab, run_gpufleet

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
GIB = 2**30


_gpufleet = partial(run_gpufleet, OWN_LAB)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    if os.environ.get("GPUFLEET_DYNMIG_LAB") == "0":
        pytest.skip("GPUFLEET_DYNMIG_LAB=0: the dynamic MIG lab was turned off")
    from gpufleet.build import binaries

    try:
        t = time.monotonic()
        # GPUFLEET_DYNMIG_KUBERNETES_VERSION: another pinned release (default: the default)
        release = os.environ.get("GPUFLEET_DYNMIG_KUBERNETES_VERSION")
        version = ["--kubernetes-version", release] if release else []
        up = _gpufleet("lab", "up", "--workers", "1", "--dynamic-mig", *version)
        assert up.returncode == 0, (
            f"lab up exited {up.returncode}:\n{up.stdout[-3000:]}{up.stderr[-3000:]}"
        )
        up_s = time.monotonic() - t
        print(f"\nlab up --dynamic-mig {' '.join(version)} {up_s:.0f}s")
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

    def resume(self) -> None:
        """The next step's time starts now: the CLI checks between steps are not in it."""
        self.t = time.monotonic()


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


def _allocation(lab: Lab, pod: str, ns: str = NS) -> dict[str, Any]:
    """The one device allocated to ``pod``'s claim (its ResourceClaim's allocation result:
    driver, pool, device, request)."""
    status = lab.kubectl_json("get", "pod", "-n", ns, pod)["status"]
    claim = status["resourceClaimStatuses"][0]["resourceClaimName"]
    rc = lab.kubectl_json("get", "resourceclaim", "-n", ns, claim)
    results = rc["status"]["allocation"]["devices"]["results"]
    assert [r["driver"] for r in results] == ["gpu.nvidia.com"], results
    return results[0]


def _allocated_device(lab: Lab, pod: str) -> str:
    """The device allocated to ``pod``'s claim (its ResourceClaim's allocation result)."""
    return str(_allocation(lab, pod)["device"])


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


def _claim_of(lab: Lab, pod: str) -> str:
    """The name of the ResourceClaim made for ``pod`` from its template."""
    status = lab.kubectl_json("get", "pod", "-n", NS, pod)["status"]
    return status["resourceClaimStatuses"][0]["resourceClaimName"]


def _amount(entry: Any) -> int:
    """A counter value of the simulator (``{"value": "16"}``) as an int; ``memory``
    (``140Gi``) is not read."""
    return int(str(entry["value"]))


def _published_counters(lab: Lab, node: str) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """As the ResourceSlices of ``node`` publish them: the capacity of ``gpu-0-counter-set``
    (counter -> value) and what each device consumes from it (device -> counter -> value),
    every counter but ``memory``."""
    capacity: dict[str, int] = {}
    devices: dict[str, dict[str, int]] = {}
    for s in lab.kubectl_json("get", "resourceslices")["items"]:
        spec = s["spec"]
        if spec.get("nodeName") != node or spec.get("driver") != "gpu.nvidia.com":
            continue
        for cs in spec.get("sharedCounters") or []:
            if cs["name"] == "gpu-0-counter-set":
                capacity = {c: _amount(v) for c, v in cs["counters"].items() if c != "memory"}
        for d in spec.get("devices") or []:
            for use in d.get("consumesCounters") or []:
                if use["counterSet"] == "gpu-0-counter-set":
                    devices[d["name"]] = {
                        c: _amount(v) for c, v in use["counters"].items() if c != "memory"
                    }
    assert capacity, f"{node} publishes no gpu-0-counter-set"
    return capacity, devices


def _slices_of(consumed: dict[str, int]) -> list[int]:
    return sorted(
        int(c.removeprefix("memory-slice-")) for c, v in consumed.items()
        if c.startswith("memory-slice-") and v > 0
    )  # fmt: skip


def _held(lab: Lab, node: str) -> dict[int, str]:
    """Memory slice -> ``namespace/claim`` holding it, from the allocated ResourceClaims and
    the counters their devices consume; checked against the GPU instances on the node."""
    _, devices = _published_counters(lab, node)
    held: dict[int, str] = {}
    for rc in lab.kubectl_json("get", "resourceclaims", "-A")["items"]:
        alloc = (rc.get("status") or {}).get("allocation")
        if not alloc:
            continue
        holder = f"{rc['metadata']['namespace']}/{rc['metadata']['name']}"
        for r in alloc["devices"]["results"]:
            for i in _slices_of(devices[r["device"]]):
                assert i not in held, (i, held[i], holder)
                held[i] = holder
    on_node = sorted(
        s for _, _, start, size in _gpu_instances(lab, node) for s in range(start, start + size)
    )
    assert sorted(held) == on_node, (held, _gpu_instances(lab, node))
    return held


def _cli(lab: Lab, *args: str) -> tuple[int, Any, float]:
    """``gpufleet ARGS --kubeconfig <the lab's>``: (exit status, its JSON stdout, seconds)."""
    t = time.monotonic()
    proc = subprocess.run(
        [str(GPUFLEET), *args, "--kubeconfig", str(lab.kubeconfig)],
        env=lab.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    took = time.monotonic() - t
    assert proc.stdout.strip(), f"gpufleet {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
    return proc.returncode, json.loads(proc.stdout), took


def _explain(lab: Lab, claim: str) -> dict[str, Any]:
    """``gpufleet claims explain NS/CLAIM --json`` of a claim that cannot be allocated now
    (exit 1); its lines printed."""
    rc, doc, took = _cli(lab, "claims", "explain", f"{NS}/{claim}", "--json")
    print(f"    explain {NS}/{claim} ({took:.1f}s, exit {rc}): verdict {doc['verdict']}")
    print(f"      {doc['summary']}")
    for req in doc["requests"]:
        for reason, n in req["reasons"]:
            print(f"      {n} x {reason}")
        for cs in req["counter_sets"]:
            print(
                f"      {cs['node']} {cs['counter_set']} ({cs['gpu']}): "
                f"memory slices free {cs['memory_slices_free']}"
            )
            for e in cs["exhausted"]:
                print(
                    f"        {e['counter']}: {e['consumed']} of {e['capacity']} consumed, "
                    f"needs {e['needed']}, stops {e['devices']} devices, "
                    f"held by {', '.join(e['holders'])}"
                )
    assert rc == 1, f"explain of a pending claim exited {rc}"
    assert doc["allocated"] == [], doc["allocated"]
    return doc


def _exhausted_slices(doc: dict[str, Any], node: str) -> dict[int, list[str]]:
    """Memory slice -> holders of each ``memory-slice-<i>`` an explanation says is exhausted
    on ``node``'s GPU 0."""
    [req] = doc["requests"]
    [cs] = req["counter_sets"]
    assert (cs["node"], cs["counter_set"], cs["gpu"]) == (node, "gpu-0-counter-set", "gpu-0"), cs
    return {
        int(e["counter"].removeprefix("memory-slice-")): e["holders"]
        for e in cs["exhausted"]
        if e["counter"].startswith("memory-slice-")
    }


def _report_row(lab: Lab, node: str, when: str) -> dict[str, Any]:
    """``gpufleet report --json -``: the row of ``node``'s GPU 0 (``gpus``), checked against
    what the cluster holds (memory slices free = 8 - held, multiprocessors free = capacity
    less what the allocated devices consume, the claims); its lines printed."""
    held = _held(lab, node)
    capacity, devices = _published_counters(lab, node)
    rc, doc, took = _cli(lab, "report", "--json", "-")
    assert rc == 0, f"report exited {rc}"
    rows = [r for r in doc["gpus"] if r["node"] == node]
    assert [r["gpu"] for r in rows] == ["gpu-0"], doc["gpus"]
    [row] = rows
    sums = doc["cluster"]["shared_counters"]
    # a placement is free only where it fits now: the fleet's free devices are the devices
    # the GPUs' counters leave room for, the others are blocked, not free
    c = doc["cluster"]
    assert c["devices_free"] == sum(r["devices_fitting"] for r in doc["gpus"]), (c, doc["gpus"])
    parts = c["devices_allocated"] + c["devices_free"] + c["devices_blocked"]
    assert c["devices_published"] == parts, c
    print(f"      devices: {c['devices_free']} free, {c['devices_blocked']} blocked, "
          f"{c['devices_allocated']} allocated")  # fmt: skip
    print(
        f"    report {when} ({took:.1f}s): {node}/{row['gpu']} {row['model']}: memory slices "
        f"free {row['memory_slices_free']} of {row['memory_slices']}, stranded "
        f"{row['memory_slices_stranded']}; multiprocessors free {row['multiprocessors_free']} "
        f"of {row['multiprocessors']}, stranded {row['multiprocessors_stranded']}; memory "
        f"free {row['memory_free'] / GIB:.2f}Gi, stranded {row['memory_stranded'] / GIB:.2f}Gi; "
        f"devices {row['devices_allocated']} allocated, {row['devices_fitting']} fitting; "
        f"profiles fitting {row['profiles_fitting']}; claims {row['claims']}"
    )
    print(f"      cluster.shared_counters: {sums}")
    slices = _slices_of(capacity)
    assert slices == list(range(8)) and row["memory_slices"] == 8, (slices, row)
    assert row["memory_slices_free"] == [i for i in slices if i not in held], (row, held)
    assert set(row["memory_slices_stranded"]) <= set(row["memory_slices_free"]), row
    per_slice = row["memory"] // row["memory_slices"]
    assert row["memory_stranded"] == per_slice * len(row["memory_slices_stranded"]), row
    allocated = [
        r["device"]
        for rc_ in lab.kubectl_json("get", "resourceclaims", "-A")["items"]
        if (rc_.get("status") or {}).get("allocation")
        for r in rc_["status"]["allocation"]["devices"]["results"]
    ]
    sm_used = sum(devices[d].get("multiprocessors", 0) for d in allocated)
    assert row["multiprocessors"] == capacity["multiprocessors"], row
    assert row["multiprocessors_free"] == capacity["multiprocessors"] - sm_used, (row, sm_used)
    assert row["devices_allocated"] == len(allocated), (row, allocated)
    assert row["claims"] == sorted(set(held.values())), (row, held)
    assert sums["gpus"] == 1 and sums["memory_slices_free"] == len(row["memory_slices_free"])
    assert sums["memory_slices_stranded"] == len(row["memory_slices_stranded"]), sums
    return row


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
    held = _held(lab, node)
    assert held == {s: f"{NS}/{_claim_of(lab, p)}" for p, (_, s) in starts.items()}, held
    row = _report_row(lab, node, "7 x 1g.18gb running")
    # 1g.18gb has placements 0-6; every placement over slice 7 also needs a held slice.
    assert row["memory_slices_free"] == [7] and row["memory_slices_stranded"] == [7], row
    assert row["devices_fitting"] == 0 and row["profiles_fitting"] == [], row
    assert row["multiprocessors_stranded"] == row["multiprocessors_free"] > 0, row
    step.resume()
    _apply(lab, _pod("small-7", "mig-1g18gb"))
    lab.wait_for(
        "the eighth 1g.18gb pod to be unschedulable", lambda: _unschedulable(lab, "small-7")
    )
    time.sleep(10)  # and it stays so
    assert _unschedulable(lab, "small-7")
    step.done("eighth 1g.18gb pod Pending, Unschedulable")
    doc = _explain(lab, _claim_of(lab, "small-7"))
    # Every 1g.18gb device (placements 0-6) is itself allocated, one to each of the seven
    # claims: the scheduler skips an allocated device before it looks at counters, so
    # the verdict is in-use and no device is reported short of counters.
    assert doc["verdict"] == "in-use", doc["summary"]
    [req] = doc["requests"]
    assert (req["matching"], req["free"], req["counter_sets"]) == (7, 0, []), req
    named = {
        r.removeprefix("allocated to claim "): n
        for r, n in req["reasons"]
        if r.startswith("allocated to claim ")
    }
    assert named == {h: 1 for h in held.values()}, (req["reasons"], held)
    seven = {f"{NS}/{_claim_of(lab, p)}" for p in small}
    assert set(named) == seven, named
    step.resume()
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
    large = _claim_of(lab, "large")
    _large_explained(lab, node, large, free=[7])
    row = _report_row(lab, node, "3g.71gb waiting, 7 x 1g.18gb running")
    assert row["memory_slices_free"] == [7] and row["memory_slices_stranded"] == [7], row
    assert row["multiprocessors_stranded"] == row["multiprocessors_free"] > 0, row
    step.resume()
    _delete(lab, by_start[3])
    lab.wait_for(
        "the GPU instance at slice 3 destroyed",
        lambda: ("1g.18gb", 19, 3, 1) not in _gpu_instances(lab, node),
    )
    time.sleep(10)
    assert _unschedulable(lab, "large"), "3g.71gb scheduled with slices 0-2 still taken"
    step.done("one slice of block 0-3 freed: 3g.71gb still Pending")
    _large_explained(lab, node, large, free=[3, 7])
    row = _report_row(lab, node, "3g.71gb waiting, slice 3 freed")
    # slice 3 takes a 1g.18gb; slice 7 is still in no placement that fits
    assert row["memory_slices_free"] == [3, 7] and row["memory_slices_stranded"] == [7], row
    assert "1g.18gb" in row["profiles_fitting"] and "3g.71gb" not in row["profiles_fitting"]
    assert row["multiprocessors_stranded"] == 0, row
    step.resume()
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
    row = _report_row(lab, node, "3g.71gb running")
    assert f"{NS}/{large}" in row["claims"], row
    assert row["memory_slices_free"] == [3] and row["memory_slices_stranded"] == [], row
    assert row["multiprocessors_stranded"] == 0, row
    step.resume()


def _large_explained(lab: Lab, node: str, claim: str, free: list[int]) -> None:
    """The pending ``3g.71gb`` claim's explanation: verdict ``counters``; in each aligned
    block of four slices (its placements, as published) the held slices are exhausted,
    each held by the claim the cluster says holds it; ``free`` the slices free."""
    doc = _explain(lab, claim)
    assert doc["verdict"] == "counters", doc["summary"]
    held = _held(lab, node)
    exhausted = _exhausted_slices(doc, node)
    _, devices = _published_counters(lab, node)
    blocks = sorted(_slices_of(c) for d, c in devices.items() if "-mig-3g71gb-" in d)
    assert blocks == [[0, 1, 2, 3], [4, 5, 6, 7]], blocks
    for block in blocks:
        in_block = {i: [held[i]] for i in block if i in held}
        assert in_block, f"block {block} is free, yet the 3g.71gb claim waits"
        assert {i: hs for i, hs in exhausted.items() if i in block} == in_block, (
            block,
            exhausted,
            held,
        )
    assert doc["requests"][0]["counter_sets"][0]["memory_slices_free"] == free, doc


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
    row = _report_row(lab, node, "every pod gone")
    assert row["memory_slices_free"] == list(range(8)), row
    assert row["memory_slices_stranded"] == [] and row["memory_stranded"] == 0, row
    assert row["multiprocessors_free"] == row["multiprocessors"], row
    assert row["multiprocessors_stranded"] == 0 and row["claims"] == [], row


def test_gpufleet_up_smoke_runs_a_dynamic_mig_claim_and_leaves_no_gpu_instance(
    lab: Lab, tmp_path: Path
) -> None:
    """``gpufleet up -i inventory/lab`` on the idle dynamic-MIG lab ends ``validation:
    PASS``; its smoke claim asks for the smallest profile of the H200 (``1g.18gb``), the
    pod sees the MIG device, and after the pod and its claim are gone the node's
    ``nvidia-smi mig -lgi``, read by validate after the smoke, lists no GPU instance."""
    node = lab.workers()[0]
    report = tmp_path / "validate.json"
    t = time.monotonic()
    up = _gpufleet(
        "up", "-i", str(REPO / "inventory" / "lab"), "-e", f"validate_report_file={report}"
    )
    up_s = time.monotonic() - t
    print(f"\n  gpufleet up with the dynamic MIG smoke: {up_s:.0f}s")
    tail = (up.stdout + up.stderr)[-4000:]
    assert up.returncode == 0, tail
    assert "validation: PASS" in up.stdout, tail
    checks = {c["id"]: c for c in json.loads(report.read_text())["checks"]}
    smoke = sorted(i for i in checks if i.startswith("smoke."))
    assert smoke == ["smoke.dynamic-mig-1g-18gb"], smoke
    check = checks["smoke.dynamic-mig-1g-18gb"]
    assert check["status"] == "pass", check
    assert check["data"] == {"dynamic_mig_node": node}, check
    evidence = {e["source"]: e["detail"] for e in check["evidence"]}
    claim = next(d for s, d in evidence.items() if s.startswith("claim "))
    device = re.search(r"allocated \S+/\S+/(gpu-0-mig-1g18gb-19-\d+)", claim)
    assert device, claim
    assert re.search(r"NVIDIA_VISIBLE_DEVICES=MIG-[0-9a-f-]+", evidence["pod log"]), evidence
    leftover = next(d for s, d in evidence.items() if s.startswith("nodes.dynamic-mig-leftover-gi"))
    assert leftover == "every GPU instance is owned by a claim; the smoke's is gone", evidence
    assert checks["nodes.dynamic-mig-leftover-gi"]["status"] == "pass", checks
    assert checks["nodes.dynamic-mig-counters"]["status"] == "pass", checks
    assert _gpu_instances(lab, node) == []


KUEUE_TEAM = "team-mig"
KUEUE_PROFILE = "1g.18gb"
KUEUE_CLASS = profile_device_class(KUEUE_PROFILE)  # mig-1g.18gb.gpufleet.io
KUEUE_QUOTA = 2


def _kueue_job_on_dynamic_mig(s: Scenario, node: str, job: str) -> tuple[int, int]:
    """The pod of Kueue-admitted ``job`` runs on a ``1g.18gb`` device of ``node``'s dynamic
    MIG pool, claimed through the profile's DeviceClass: its (GI profile ID, placement
    start)."""
    pod = s.wait_running(KUEUE_TEAM, job)
    assert pod["spec"]["nodeName"] == node, pod["spec"]["nodeName"]
    result = _allocation(s.lab, pod["metadata"]["name"], KUEUE_TEAM)
    assert result["pool"] == node, result
    _, consuming = _published_counters(s.lab, node)
    assert result["device"] in consuming, f"{result['device']} consumes no counter of {node}"
    assert "-mig-1g18gb-" in result["device"], result
    claim = s.lab.kubectl_json(
        "get", "resourceclaim", "-n", KUEUE_TEAM,
        pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"],
    )  # fmt: skip
    [request] = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == KUEUE_CLASS, request
    return _placement(result["device"])


def _kueue_validate(lab: Lab, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """``gpufleet validate -i inventory/lab --kueue`` with the per-profile class: the
    report's ``kueue.*`` checks; their lines printed."""
    report = tmp_path / "validate-kueue.json"
    res = _gpufleet(
        "validate", "-i", str(REPO / "inventory" / "lab"), "--kueue",
        "-e", f'kueue_profile_classes=["{KUEUE_PROFILE}"]', "--json", str(report),
    )  # fmt: skip
    tail = (res.stdout + res.stderr)[-4000:]
    assert report.is_file(), tail
    checks = {c["id"]: c for c in json.loads(report.read_text())["checks"]}
    print(f"    validate (exit {res.returncode}): {res.stdout.splitlines()[0]}")
    kueue = {i: c for i, c in checks.items() if c["area"] == "kueue"}
    for i, c in sorted(kueue.items()):
        print(f"      {i}: {c['status']}: {c['summary']}")
        for e in c["evidence"]:
            print(f"        {e['source']}: {e['detail']}")
    assert res.returncode == 0, [(i, c["problems"]) for i, c in checks.items() if c["problems"]]
    return kueue


def test_kueue_quota_per_mig_profile_admits_dynamic_mig_claims(lab: Lab, tmp_path: Path) -> None:
    """Kueue with a quota of 2 on ``mig-1g.18gb.gpufleet.io`` (the kueue role's class of
    ``1g.18gb``) over the dynamic-MIG H200: two Jobs run on dynamic ``1g.18gb`` devices, the
    third waits on Kueue's quota while the GPU's counters have room, validate counts 7
    ``1g.18gb`` at once, and the third runs once a Job is gone. Kueue is removed after."""
    node = lab.workers()[0]
    art = lab_kueue.artefacts(log=lambda m: print(m))
    s = Scenario(lab, art)
    teams = [{"name": KUEUE_TEAM, "quotas": {KUEUE_CLASS: KUEUE_QUOTA}}]
    step = Step()
    try:
        result = play(lab, tmp_path, art, teams=teams, profile_classes=[KUEUE_PROFILE])
        assert result.status == 0, play_failures(result)
        step.done(f"kueue role: Kueue, DeviceClass {KUEUE_CLASS}, {KUEUE_TEAM} quota {KUEUE_QUOTA}")
        cm = lab.kubectl_json("get", "configmap", "-n", "kueue-system", "kueue-manager-config")
        config = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])
        mapped = {
            m["name"]: m["deviceClassNames"] for m in config["resources"]["deviceClassMappings"]
        }
        assert mapped[KUEUE_CLASS] == [KUEUE_CLASS], mapped
        for job in ("j1", "j2"):
            s.submit(KUEUE_TEAM, job, priority=None, profile=KUEUE_PROFILE)
        placements = {job: _kueue_job_on_dynamic_mig(s, node, job) for job in ("j1", "j2")}
        assert {pid for pid, _ in placements.values()} == {19}, placements
        gis = _gpu_instances(lab, node)
        assert gis == sorted(("1g.18gb", 19, start, 1) for _, start in placements.values()), gis
        step.done("2 Jobs admitted, their pods Running on dynamic 1g.18gb devices")
        s.submit(KUEUE_TEAM, "j3", priority=None, profile=KUEUE_PROFILE)
        reserved = s.wait_pending_on_quota(KUEUE_TEAM, "j3")
        print(f"    {KUEUE_TEAM}/j3 {reserved['reason']}: {reserved['message']}")
        assert f"insufficient unused quota for {KUEUE_CLASS}" in reserved["message"], reserved
        admitted = s.condition(KUEUE_TEAM, "j3", "Admitted")
        assert admitted is None or admitted["status"] == "False", admitted
        assert s.pods(KUEUE_TEAM, "j3") == [], "a Job Kueue did not admit has a pod"
        usage = s.cq_status(KUEUE_TEAM)["flavorsUsage"][0]["resources"]
        used = [(u["name"], str(u["total"])) for u in usage]
        assert used == [(KUEUE_CLASS, str(KUEUE_QUOTA))], usage
        step.done("third Job waits on Kueue's quota")
        # quota, not the GPU, holds it back: 6 memory slices free, 1g.18gb fits now
        row = _report_row(lab, node, "2 x 1g.18gb admitted by Kueue, a third on quota")
        assert len(row["memory_slices_free"]) == 6 and "1g.18gb" in row["profiles_fitting"], row
        assert row["devices_allocated"] == 2, row
        step.resume()
        checks = _kueue_validate(lab, tmp_path)
        step.done("gpufleet validate --kueue")
        for i in ("kueue.controller", "kueue.mappings", "kueue.local-queues", "kueue.pending"):
            assert checks[i]["status"] == "pass", checks[i]
        quota = checks["kueue.quota-vs-devices"]
        assert quota["status"] == "pass", quota
        # the devices the H200's counters allow at once: 7 x 1g.18gb, a whole GPU or its MIG
        published = {"gpu.nvidia.com": 1, "mig.nvidia.com": 7, KUEUE_CLASS: 7}
        assert quota["data"] == {
            "published": published,
            "nominal": {KUEUE_CLASS: {KUEUE_TEAM: KUEUE_QUOTA}},
        }
        [evidence] = quota["evidence"]
        assert evidence["detail"].startswith(
            f"gpu.nvidia.com: 1, {KUEUE_CLASS}: 7, mig.nvidia.com: 7 (on 1 GPU(s) with shared "
            "counters"
        ), evidence
        [waiting] = checks["kueue.pending"]["data"]["pending_on_quota"]
        assert waiting.startswith(f"{KUEUE_TEAM}/job-j3-"), waiting
        step.resume()
        lab.kubectl_run("delete", "job", "-n", KUEUE_TEAM, "j1", "--wait=true", "--timeout=120s")
        s.wait_admitted(KUEUE_TEAM, "j3")
        pid, start = _kueue_job_on_dynamic_mig(s, node, "j3")
        step.done("j1 deleted: j3 admitted, its pod Running")
        expected = sorted(("1g.18gb", 19, x, 1) for x in (placements["j2"][1], start))
        lab.wait_for(
            "j1's GPU instance destroyed, j2's and j3's on the node",
            lambda: _gpu_instances(lab, node) == expected,
        )
        assert pid == 19
        step.done("2 GPU instances: j2's and j3's")
    finally:
        remove_kueue(lab, art, [KUEUE_TEAM])
    lab.wait_for(f"no GPU instance on {node}", lambda: _gpu_instances(lab, node) == [], 120)
    assert lab.kubectl_json("get", "resourceclaims", "-A")["items"] == []
    assert kueue_left(lab) == []
    step.done("Kueue and the Jobs removed, no GPU instance left")


def _deployment(name: str, template: str) -> dict[str, Any]:
    """One replica of ``_pod``'s container: a pod kubectl drain evicts and its ReplicaSet
    makes again."""
    pod = _pod(name, template)
    pod["spec"]["restartPolicy"] = "Always"
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod["spec"]},
        },
    }


def _held_pod_ready(lab: Lab) -> None:
    """The pod of Deployment ``held`` is Ready: first made by its ReplicaSet (``kubectl wait``
    on a selector that matches no pod yet fails at once), then Ready."""
    lab.wait_for(
        "the pod of Deployment held",
        lambda: lab.kubectl_json("get", "pods", "-n", NS, "-l", "app=held")["items"],
    )
    lab.kubectl_run("wait", "-n", NS, "pod", "-l", "app=held", "--for=condition=Ready",
                    "--timeout=300s")  # fmt: skip


def _node_after_move(lab: Lab, node: str) -> dict[str, Any]:
    """The node is schedulable and carries no annotation of the move."""
    obj = lab.kubectl_json("get", "node", node)
    assert not obj["spec"].get("unschedulable"), f"{node} left cordoned"
    notes = obj["metadata"].get("annotations") or {}
    assert not [k for k in notes if k.startswith("gpufleet.io/mig-mode-")], notes
    return obj


def _slice_shape(lab: Lab, node: str) -> tuple[bool, list[str]]:
    """(any CounterSet published, the MIG device names) of ``node``'s ResourceSlices."""
    counters, migs = False, []
    for s in lab.kubectl_json("get", "resourceslices")["items"]:
        spec = s["spec"]
        if spec.get("nodeName") != node or spec.get("driver") != "gpu.nvidia.com":
            continue
        counters = counters or bool(spec.get("sharedCounters"))
        for d in spec.get("devices") or []:
            counters = counters or bool(d.get("consumesCounters"))
            if (d.get("attributes") or {}).get("type", {}).get("string") == "mig":
                migs.append(d["name"])
    return counters, sorted(migs)


def _plugin_update_strategy(lab: Lab) -> str:
    [ds] = lab.kubectl_json("get", "daemonsets", "-n", "gpufleet-gpu-simulator")["items"]
    return ds["spec"]["updateStrategy"]["type"]


def test_mig_mode_moves_the_pool_to_static_and_back_leaving_no_gpu_instance(lab: Lab) -> None:
    """``gpufleet mig mode --to static`` with a running claim on the node: the pod is
    evicted, its GPU instance destroyed at unprepare, the node carved ``7 x 1g.18gb``,
    its slices republished without counters, the pod running again on a static device,
    the node uncordoned; ``--to dynamic`` then leaves no GPU instance and the counters back.
    The kubelet-plugin DaemonSet is on rolling updates again after each."""
    node = lab.workers()[0]
    inventory = str(REPO / "inventory" / "lab")
    step = Step()
    _apply(lab, _deployment("held", "mig-1g18gb"))
    _held_pod_ready(lab)
    assert [p for p, *_ in _gpu_instances(lab, node)] == ["1g.18gb"]
    step.done("a 1g.18gb pod of a Deployment Ready on the dynamic node")
    try:
        to_static = _gpufleet(
            "mig", "mode", "--to", "static", "-i", inventory, "-e", 'mig_layout={"1g.18gb": 7}'
        )
        tail = (to_static.stdout + to_static.stderr)[-4000:]
        assert to_static.returncode == 0, tail
        step.done("gpufleet mig mode --to static")
        assert _gpu_instances(lab, node) == sorted(("1g.18gb", 19, s, 1) for s in range(7))
        counters, migs = _slice_shape(lab, node)
        assert not counters and len(migs) == 7, (counters, migs)
        _node_after_move(lab, node)
        assert _plugin_update_strategy(lab) == "RollingUpdate"
        _held_pod_ready(lab)
        [pod] = lab.kubectl_json("get", "pods", "-n", NS, "-l", "app=held")["items"]
        assert _allocated_device(lab, pod["metadata"]["name"]) in migs
        step.done("the pod runs again on a static MIG device")
    finally:
        lab.kubectl_run("delete", "deployment", "-n", NS, "held", "--wait=true", check=False)
    to_dynamic = _gpufleet("mig", "mode", "--to", "dynamic", "-i", inventory)
    tail = (to_dynamic.stdout + to_dynamic.stderr)[-4000:]
    assert to_dynamic.returncode == 0, tail
    step.done("gpufleet mig mode --to dynamic")
    assert _gpu_instances(lab, node) == []
    counters, migs = _slice_shape(lab, node)
    assert counters and "gpu-0-mig-1g18gb-19-0" in migs, migs
    _node_after_move(lab, node)
    assert _plugin_update_strategy(lab) == "RollingUpdate"
