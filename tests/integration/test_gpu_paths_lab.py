"""NVIDIA's device plugin and DRA side by side on a real lab: one pool on each path, a pod
of each kind running on its own pool, validate refusing a node that advertises its GPUs
both ways, and ``gpufleet migrate`` moving the device-plugin pool to DRA and back while a
Deployment that asks for ``nvidia.com/gpu: 1`` keeps its replica.

It brings up a lab of its own (``gpufleet-paths`` on 10.89.62.0/24) with two GPU workers,
the second on the device-plugin path (``gpufleet lab up --device-plugin-workers 1``: pool
``lab_pool_2`` in ``gpu_path_device_plugin``, ``lab_pool_1`` in ``gpu_path_dra``), runs
``gpufleet up -i inventory/lab`` on it and removes it at the end
(``GPUFLEET_TEST_KEEP_LAB=1`` keeps it; ``GPUFLEET_PATHS_LAB=0`` skips the module, a
developer's quick run; CI never sets it). The GPU simulator stands in for the GPUs, for
NVIDIA's DRA driver and, in its device-plugin mode, for NVIDIA's device plugin (it speaks
the kubelet's device plugin API).

The tests run in file order on one lab; each leaves the lab as it found it. Each prints
its figures (run with ``-s`` to see them): the times of ``lab up`` and ``up``, the move's
phases per node, and the Deployment's downtime.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    templates as claim_templates,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)

from tests.lab.running import Lab, run_gpufleet

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GPUFLEET = REPO / ".venv" / "bin" / "gpufleet"
OWN_LAB = {"GPUFLEET_LAB_NAME": "gpufleet-paths", "GPUFLEET_LAB_SUBNET": "10.89.62.0/24"}
INVENTORY = str(REPO / "inventory" / "lab")
DP_POOL, DRA_POOL = "lab_pool_2", "lab_pool_1"
NS = "gpu-paths"
SMI = "nvidia-smi"


_gpufleet = partial(run_gpufleet, OWN_LAB)


@dataclass(frozen=True)
class PathsLab(Lab):
    """The lab under test (``tests/lab/running.py``), with its nodes by path."""

    image: str = "localhost/gpufleet/busybox:1"

    @classmethod
    def from_status(cls, status: dict[str, Any]) -> PathsLab:
        from gpufleet.build import binaries

        return cls(
            name=OWN_LAB["GPUFLEET_LAB_NAME"],
            kubeconfig=Path(status["kubeconfig"]),
            kubectl=binaries.binary_path("kubectl", status["kubernetes_version"]),
            status=status,
            up_seconds=0.0,
            lab_env=dict(OWN_LAB),
        )

    def _worker_on(self, path: str) -> str:
        return next(
            n["name"]
            for n in self.status["nodes"]
            if n["role"] == "gpu-worker" and n["gpu_path"] == path
        )

    @property
    def dra_node(self) -> str:
        return self._worker_on(gp.DRA)

    @property
    def dp_node(self) -> str:
        return self._worker_on(gp.DEVICE_PLUGIN)

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return self.kubectl_run(*args, stdin=stdin, check=check)

    def json(self, *args: str) -> Any:
        return self.kubectl_json(*args)

    def allocatable_gpus(self, node: str) -> str | None:
        return self.json("get", "node", node)["status"]["allocatable"].get("nvidia.com/gpu")

    def slice_devices(self, node: str) -> list[str]:
        slices = self.json("get", "resourceslices", "--field-selector", f"spec.nodeName={node}")
        return sorted(d["name"] for s in slices["items"] for d in s["spec"].get("devices", []))

    def path_label(self, node: str) -> str | None:
        return self.json("get", "node", node)["metadata"]["labels"].get(gp.PATH_LABEL)

    def pod(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        show = "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; sleep 600"
        container = {
            "name": "gpu",
            "image": self.image,
            "imagePullPolicy": "Never",
            "command": ["/bin/busybox", "sh", "-c", show],
            **spec.pop("container", {}),
        }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "containers": [container],
                **spec,
            },
        }


@pytest.fixture(scope="module")
def lab() -> Iterator[PathsLab]:
    if os.environ.get("GPUFLEET_PATHS_LAB") == "0":
        pytest.skip("GPUFLEET_PATHS_LAB=0: the lab with both GPU paths was turned off")
    saved = {k: os.environ.get(k) for k in OWN_LAB}
    os.environ.update(OWN_LAB)  # playbooks run by this process read inventory/lab for it
    try:
        t = time.monotonic()
        up = _gpufleet("lab", "up", "--workers", "2", "--device-plugin-workers", "1")
        assert up.returncode == 0, (
            f"lab up exited {up.returncode}:\n{up.stdout[-3000:]}{up.stderr[-3000:]}"
        )
        lab_up_s = time.monotonic() - t
        t = time.monotonic()
        site = _gpufleet("up", "-i", INVENTORY)
        out = site.stdout + site.stderr
        assert site.returncode == 0, f"gpufleet up exited {site.returncode}:\n{out[-6000:]}"
        assert "validation: PASS" in out, out[-6000:]
        print(f"\nlab up {lab_up_s:.0f}s, gpufleet up {time.monotonic() - t:.0f}s")
        status = json.loads(_gpufleet("lab", "status", "--json").stdout)
        pl = PathsLab.from_status(status)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        pl.run("apply", "-f", "-", stdin=json.dumps(namespace))  # a kept lab has it
        yield pl
    finally:
        if os.environ.get("GPUFLEET_TEST_KEEP_LAB") != "1":
            down = _gpufleet("lab", "down", timeout=600)
            assert down.returncode == 0, f"lab down left things behind:\n{down.stderr[-3000:]}"
        else:
            subprocess.run(
                [str(GPUFLEET), "lab", "status"],
                env={**os.environ},
                capture_output=True,
                check=False,
            )
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _validate(lab: PathsLab, tmp_path: Path) -> tuple[int, str, dict[str, Any]]:
    report = tmp_path / "validate.json"
    proc = _gpufleet("validate", "-i", INVENTORY, "--json", str(report), timeout=600)
    doc = json.loads(report.read_text()) if report.is_file() else {}
    return proc.returncode, proc.stdout + proc.stderr, doc


def _check(doc: dict[str, Any], cid: str) -> dict[str, Any]:
    return next(c for c in doc["checks"] if c["id"] == cid)


def test_each_pool_advertises_its_own_path_and_validate_reports_it(
    lab: PathsLab, tmp_path: Path
) -> None:
    # placed by what gpufleet up did: the device plugin on its pool, the DRA plugin on the other
    assert lab.path_label(lab.dp_node) == gp.DEVICE_PLUGIN
    assert lab.path_label(lab.dra_node) == gp.DRA
    assert lab.allocatable_gpus(lab.dp_node) == "1"
    assert lab.allocatable_gpus(lab.dra_node) is None
    assert lab.slice_devices(lab.dp_node) == []
    assert lab.slice_devices(lab.dra_node) == ["gpu-0"]
    pods = lab.json("get", "pods", "-A")["items"]
    placed = {
        (p["metadata"]["namespace"], p["spec"].get("nodeName"))
        for p in pods
        if p["metadata"]["namespace"] in ("nvidia-device-plugin", "gpufleet-gpu-simulator")
    }
    assert placed == {
        ("nvidia-device-plugin", lab.dp_node),
        ("gpufleet-gpu-simulator", lab.dra_node),
    }
    rc, out, doc = _validate(lab, tmp_path)
    assert rc == 0, out[-4000:]
    pools = {p["pool"]: p for p in _check(doc, "nodes.gpu-paths")["data"]["pools"]}
    assert {k: (v["declared"], v["agree"]) for k, v in pools.items()} == {
        DRA_POOL: (gp.DRA, True),
        DP_POOL: (gp.DEVICE_PLUGIN, True),
    }
    print("\n" + "\n".join(_check(doc, "nodes.gpu-paths")["details"]))


def test_a_whole_gpu_pod_and_a_mig_claim_run_each_on_its_own_pool(lab: PathsLab) -> None:
    node = lab.dra_node
    lab.node_exec(node, SMI, "-i", "0", "-mig", "1")
    try:
        out = lab.node_exec(node, SMI, "mig", "-cgi", ",".join(["19"] * 7), "-C")
        assert out.count("Successfully created compute instance") == 7, out
        lab.wait_for(
            f"7 MIG devices in {node}'s ResourceSlices", lambda: len(lab.slice_devices(node)) == 7
        )
        rct = claim_templates.build(
            "mig-slice", {"profile": "1g.18gb", "name": "mig-1g18gb", "namespace": NS}
        )
        lab.run("apply", "-f", "-", stdin=yaml.safe_dump(rct))
        mig = lab.pod(
            "mig-slice",
            {
                "resourceClaims": [{"name": "mig", "resourceClaimTemplateName": "mig-1g18gb"}],
                "container": {"resources": {"claims": [{"name": "mig"}]}},
            },
        )
        whole = lab.pod(
            "whole-gpu", {"container": {"resources": {"limits": {"nvidia.com/gpu": "1"}}}}
        )
        lab.run(
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [mig, whole]}),
        )
        lab.run(
            "wait",
            "-n",
            NS,
            "pod/mig-slice",
            "pod/whole-gpu",
            "--for=condition=Ready",
            "--timeout=180s",
        )
        got = {p["metadata"]["name"]: p for p in lab.json("get", "pods", "-n", NS)["items"]}
        assert got["mig-slice"]["spec"]["nodeName"] == lab.dra_node
        # the whole GPU of the DRA node is carved: only the device plugin's GPU is left
        assert got["whole-gpu"]["spec"]["nodeName"] == lab.dp_node
        assert "extendedResourceClaimStatus" not in got["whole-gpu"]["status"]
        claims = lab.json("get", "resourceclaims", "-n", NS)["items"]
        results = [r for c in claims for r in c["status"]["allocation"]["devices"]["results"]]
        assert [(r["driver"], r["pool"]) for r in results] == [("gpu.nvidia.com", lab.dra_node)]
        assert re.fullmatch(r"gpu-0-mig-1g18gb-19-\d", results[0]["device"]), results
        logs = lab.run("logs", "-n", NS, "whole-gpu")
        assert re.search(r"NVIDIA_VISIBLE_DEVICES=GPU-[0-9a-f-]{36}", logs), logs
    finally:
        lab.run(
            "delete", "pods,resourceclaimtemplates", "--all", "-n", NS, "--wait=true", check=False
        )
        lab.node_exec(node, SMI, "mig", "-dci", check=False)
        lab.node_exec(node, SMI, "mig", "-dgi", check=False)
        lab.node_exec(node, SMI, "-i", "0", "-mig", "0", check=False)
    lab.wait_for(f"{node} back to one whole GPU", lambda: lab.slice_devices(node) == ["gpu-0"])


def test_validate_refuses_a_node_that_advertises_its_gpus_both_ways(
    lab: PathsLab, tmp_path: Path
) -> None:
    node = lab.dra_node
    # a device plugin's advertisement made by hand on the DRA node: the extended resource in
    # the Node's status, as the kubelet writes it for a device plugin
    lab.run(
        "patch", "node", node, "--subresource=status", "--type=json", "-p",
        json.dumps([{"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": "1"}]),
    )  # fmt: skip
    try:
        lab.wait_for(f"{node} to list nvidia.com/gpu", lambda: lab.allocatable_gpus(node) == "1")
        rc, out, doc = _validate(lab, tmp_path)
        assert rc == 1, out[-4000:]
        dual = _check(doc, "nodes.gpu-path-dual")
        assert dual["status"] == "fail"
        message = " ".join(p["message"] for p in dual["problems"])
        for words in (node, "nvidia.com/gpu=1", "NVIDIA device plugin", "driver gpu.nvidia.com"):
            assert words in message, message
        assert dual["data"]["paths"][node] == gp.BOTH
        assert dual["data"]["paths"][lab.dp_node] == gp.DEVICE_PLUGIN
        print(f"\nnodes.gpu-path-dual: {message}")
    finally:
        for key in ("capacity", "allocatable"):
            lab.run(
                "patch", "node", node, "--subresource=status", "--type=json", "-p",
                json.dumps([{"op": "remove", "path": f"/status/{key}/nvidia.com~1gpu"}]),
                check=False,
            )  # fmt: skip
    lab.wait_for(f"{node} without nvidia.com/gpu", lambda: lab.allocatable_gpus(node) is None)


class ReadyWatch:
    """Polls a Deployment's ready replicas every half second; ``downtime`` is the time it
    had none."""

    def __init__(self, lab: PathsLab, name: str) -> None:
        self.lab, self.name = lab, name
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            out = self.lab.run(
                "get", "deployment", self.name, "-n", NS, "-o", "jsonpath={.status.readyReplicas}",
                check=False,
            )  # fmt: skip
            self.samples.append((time.monotonic(), int(out or 0) if out.strip().isdigit() else 0))
            self._stop.wait(0.5)

    def __enter__(self) -> ReadyWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def downtime(self) -> float:
        down, since = 0.0, None
        for t, ready in self.samples:
            if ready < 1 and since is None:
                since = t
            elif ready >= 1 and since is not None:
                down, since = down + t - since, None
        return down + (self.samples[-1][0] - since if since is not None else 0.0)


def _deployment(lab: PathsLab) -> dict[str, Any]:
    pod = lab.pod("x", {"container": {"resources": {"limits": {"nvidia.com/gpu": "1"}}}})
    spec = pod["spec"]
    spec.pop("restartPolicy")
    spec["containers"][0]["command"] = ["/bin/busybox", "sleep", "3600"]
    # the replica starts on the device-plugin pool; moved, it may go wherever a GPU is served
    spec["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [
                            {"key": gp.PATH_LABEL, "operator": "In", "values": [gp.DEVICE_PLUGIN]}
                        ]
                    },
                }
            ]
        }
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {"metadata": {"labels": {"app": "trainer"}}, "spec": spec},
        },
    }


def _migrate(lab: PathsLab, to: str) -> tuple[str, float]:
    t = time.monotonic()
    proc = _gpufleet("migrate", "-i", INVENTORY, "--pool", DP_POOL, "--to", to, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out, time.monotonic() - t


def _phases(out: str, node: str) -> str:
    """The batch table's row of ``node``: phase and the time of each step."""
    row = next(line for line in out.splitlines() if node in line and "done" in line)
    return " ".join(row.replace("│", " ").split())


def test_migrate_moves_the_device_plugin_pool_to_dra_and_back(lab: PathsLab) -> None:
    node = lab.dp_node
    lab.run("apply", "-f", "-", stdin=json.dumps(_deployment(lab)))
    lab.run("rollout", "status", "-n", NS, "deployment/trainer", "--timeout=180s")
    first = lab.json("get", "pods", "-n", NS, "-l", "app=trainer")["items"]
    assert [p["spec"]["nodeName"] for p in first] == [node]

    plan = _gpufleet(
        "migrate", "-i", INVENTORY, "--pool", DP_POOL, "--to", gp.DRA, "--plan", "--json"
    )
    assert plan.returncode == 0, plan.stderr[-4000:]
    planned = json.loads(plan.stdout)
    assert not planned["blocked"], planned
    assert planned["batches"] == [[node]]
    assert [p["name"] for p in planned["nodes"][0]["pods"]] == [first[0]["metadata"]["name"]]
    assert "nvidia.com/gpu" in planned["served_by"], planned
    assert lab.path_label(node) == gp.DEVICE_PLUGIN  # --plan changed nothing

    with ReadyWatch(lab, "trainer") as watch:
        out, took = _migrate(lab, gp.DRA)
        lab.run("rollout", "status", "-n", NS, "deployment/trainer", "--timeout=180s")
    assert "validate before the migrate" in out and "validate after the migrate" in out, out[-6000:]
    assert lab.path_label(node) == gp.DRA
    assert lab.allocatable_gpus(node) in (None, "0")
    assert lab.slice_devices(node) == ["gpu-0"]
    moved = lab.json("get", "pods", "-n", NS, "-l", "app=trainer")["items"]
    assert [p["metadata"]["uid"] for p in moved] != [p["metadata"]["uid"] for p in first]
    print(
        f"\nto dra: {took:.1f}s; {_phases(out, node)}; replica down {watch.downtime():.1f}s; "
        f"replica now on {moved[0]['spec']['nodeName']}"
    )

    # the moved node serves nvidia.com/gpu through DRA: the DeviceClass's extendedResourceName
    probe = lab.pod(
        "dra-served",
        {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "container": {"resources": {"limits": {"nvidia.com/gpu": "1"}}},
        },
    )
    lab.run("apply", "-f", "-", stdin=json.dumps(probe))
    # read while it runs: a finished pod's claim is deallocated and deleted
    lab.run("wait", "-n", NS, "pod/dra-served", "--for=condition=Ready", "--timeout=180s")
    served = lab.json("get", "pod", "dra-served", "-n", NS)["status"]["extendedResourceClaimStatus"]
    assert [m["resourceName"] for m in served["requestMappings"]] == ["nvidia.com/gpu"]
    claim = lab.json("get", "resourceclaim", served["resourceClaimName"], "-n", NS)
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [
        ("gpu.nvidia.com", node, "gpu-0")
    ]
    lab.run("delete", "pod", "dra-served", "-n", NS, "--wait=true")

    with ReadyWatch(lab, "trainer") as back_watch:
        back, took = _migrate(lab, gp.DEVICE_PLUGIN)
        lab.run("rollout", "status", "-n", NS, "deployment/trainer", "--timeout=180s")
    assert lab.path_label(node) == gp.DEVICE_PLUGIN
    assert lab.allocatable_gpus(node) == "1"
    assert lab.slice_devices(node) == []
    print(f"back to device-plugin: {took:.1f}s; {_phases(back, node)}; "
          f"replica down {back_watch.downtime():.1f}s")  # fmt: skip
    lab.run("delete", "deployment", "trainer", "-n", NS, "--wait=true")
