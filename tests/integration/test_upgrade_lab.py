"""A real rolling upgrade of the lab, 1.36.3 -> 1.37.2, with playbooks/upgrade.yml.

Needs a lab at 1.36.3 (``GPUFLEET_LAB_NAME=... gpufleet lab up --kubernetes-version 1.36.3
--workers 1``); the test changes it (it ends at 1.37.2), so it runs only when
``GPUFLEET_UPGRADE_LAB=1`` is set too. What it does, in order:

1. builds the local package repository (gpufleet/lab/packages.py) for 1.36.3 and 1.37.2
   and the 1.37.2 control-plane images (gpufleet/lab/images.py);
2. ``gpufleet upgrade --plan --json``: the path and the waves;
3. fault - a PodDisruptionBudget that blocks the drain of the GPU worker: the control
   plane is upgraded, the drain fails after its bounded attempts, the worker is
   uncordoned, the wave stops, the report names the node, the phase and the cause;
4. rerun without the budget: the control plane is skipped (already at the target), the
   worker is upgraded; every kubelet and kube-apiserver runs 1.37.2, the packages are
   held at 1.37.2-1.1, the GPU simulator's ResourceSlices are back, nothing is cordoned.

Timings (per node: drain, restart to Ready, plugin; whole run) are printed and written
to the report file.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE, TARGET = "1.36.3", "1.37.2"
REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventory" / "lab"


def _lab():
    if os.environ.get("GPUFLEET_UPGRADE_LAB") != "1":
        pytest.skip("set GPUFLEET_UPGRADE_LAB=1 (and GPUFLEET_LAB_NAME) to upgrade a lab for real")
    from gpufleet.lab import cluster

    state = cluster.load_state()
    if state is None:
        pytest.skip(
            f"no lab named {cluster.lab_name()}: run gpufleet lab up --kubernetes-version 1.36.3"
        )
    if state["spec"]["kubernetes_version"] != SOURCE:
        pytest.skip(
            f"lab {cluster.lab_name()} runs {state['spec']['kubernetes_version']}, not {SOURCE}"
        )
    return cluster, state


def _kubectl(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    from gpufleet.lab import binaries

    return subprocess.run(
        [str(binaries.binary_path("kubectl", TARGET)), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        check=check,
        timeout=300,
    )


def _json(kubeconfig: Path, *args: str) -> dict:
    return json.loads(_kubectl(kubeconfig, *args, "-o", "json").stdout)


PDB_OBJECTS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: upgrade-pdb-probe, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: upgrade-pdb-probe}}
  template:
    metadata: {labels: {app: upgrade-pdb-probe}}
    spec:
      nodeName: %(node)s
      terminationGracePeriodSeconds: 1
      containers:
      - name: sleep
        image: %(image)s
        imagePullPolicy: Never
        command: [/bin/busybox, sleep, "3600"]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: upgrade-pdb-probe, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: upgrade-pdb-probe}}
"""


def test_upgrade_lab_136_to_137_with_a_blocked_drain_then_a_resume(tmp_path):
    cluster, state = _lab()
    from gpufleet.lab import images, packages
    from gpufleet.runner import run_playbook

    kubeconfig = cluster.kubeconfig_path()
    worker = next(n["name"] for n in state["nodes"] if n["role"] == "gpu-worker")
    t = time.monotonic()
    repos = packages.build_repository([SOURCE, TARGET])
    etcd = state["vars"]["kubeadm_etcd_image_tag"]
    archives = [
        {"ref": s.ref, "path": str(images.build_archive(s))}
        for s in images.control_plane_images(TARGET, etcd=etcd)
    ]
    print(f"repository and images: {time.monotonic() - t:.0f}s; {sorted(repos)}")

    env = dict(os.environ)
    plan = subprocess.run(
        [str(Path(os.sys.executable).parent / "gpufleet"), "upgrade", "-i", str(INVENTORY),
         "--to", TARGET, "--plan", "--json"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert doc["path"] == [TARGET]
    step = doc["steps"][0]
    assert step["packages"]["kubelet"] == f"{TARGET}-1.1"
    assert [w["kind"] for w in step["waves"]] == ["first-control-plane", "worker"]
    assert step["waves"][1]["hosts"] == [worker]

    report = tmp_path / "upgrade-report.json"
    extravars = {
        "upgrade_kubernetes_version": TARGET,
        "upgrade_local_repo_dir": str(packages.default_root()),
        "upgrade_image_archives": archives,
        "upgrade_report_path": str(report),
        "upgrade_local_backup_dir": str(tmp_path / "backups"),
        "upgrade_dra_plugin_namespace": "gpufleet-gpu-simulator",
        "upgrade_drain_timeout": 20,
        "upgrade_drain_retries": 1,
        "upgrade_drain_retry_delay": 2,
        "upgrade_accept_warnings": True,
    }

    # 3. a PodDisruptionBudget blocks the drain of the worker
    objects = PDB_OBJECTS % {"node": worker, "image": state["vars"]["lab_smoke_image"]}
    (tmp_path / "pdb.yaml").write_text(objects)
    _kubectl(kubeconfig, "apply", "-f", str(tmp_path / "pdb.yaml"))
    _kubectl(kubeconfig, "-n", "default", "rollout", "status", "deployment/upgrade-pdb-probe",
             "--timeout=180s")  # fmt: skip
    t = time.monotonic()
    first = run_playbook("upgrade", str(INVENTORY), extravars=extravars)
    first_s = time.monotonic() - t
    assert first.status != 0, "the drain must fail while the budget allows no eviction"
    rep = json.loads(report.read_text())
    entry = rep["nodes"][worker]
    assert entry["state"] == "failed" and entry["phase"] == "drain", entry
    assert "disruption budget" in entry["cause"], entry["cause"]
    assert entry["cordoned"] is False
    node = _json(kubeconfig, "get", "node", worker)
    assert not node["spec"].get("unschedulable"), "a failed drain must uncordon the node"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == f"v{SOURCE}"
    cp = next(h for h, e in rep["nodes"].items() if h != worker)
    assert rep["nodes"][cp]["state"] == "upgraded"
    cp_timings = rep["nodes"][cp]["timings_s"]
    print(f"run 1 (control plane upgraded, worker drain blocked): {first_s:.0f}s; "
          f"control plane {cp_timings}; worker {entry['timings_s']}")  # fmt: skip

    # 4. without the budget a rerun resumes: control plane skipped, worker upgraded
    _kubectl(kubeconfig, "delete", "-f", str(tmp_path / "pdb.yaml"), "--wait=true")
    t = time.monotonic()
    second = run_playbook("upgrade", str(INVENTORY), extravars=extravars)
    second_s = time.monotonic() - t
    assert second.status == 0
    rep = json.loads(report.read_text())
    assert rep["nodes"][cp]["state"] == "skipped"
    assert rep["nodes"][worker]["state"] == "upgraded"
    nodes = _json(kubeconfig, "get", "nodes")["items"]
    assert {n["status"]["nodeInfo"]["kubeletVersion"] for n in nodes} == {f"v{TARGET}"}
    assert not any(n["spec"].get("unschedulable") for n in nodes)
    pods = _json(kubeconfig, "-n", "kube-system", "get", "pods", "-l", "component=kube-apiserver")
    assert {p["spec"]["containers"][0]["image"].rsplit(":", 1)[1] for p in pods["items"]} == {
        f"v{TARGET}"
    }
    slices = _json(kubeconfig, "get", "resourceslices")["items"]
    assert any(s["spec"].get("nodeName") == worker for s in slices)
    held = subprocess.run(
        ["podman", "exec", worker, "dpkg-query", "-W", "-f",
         "${Package} ${Version} ${db:Status-Abbrev}\n", "kubeadm", "kubelet", "kubectl"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    assert sorted(line.split()[:3] for line in held if line) == [
        ["kubeadm", f"{TARGET}-1.1", "hi"],
        ["kubectl", f"{TARGET}-1.1", "hi"],
        ["kubelet", f"{TARGET}-1.1", "hi"],
    ]
    timings = rep["nodes"][worker]["timings_s"]
    parts = sum(timings.get(k, 0) for k in ("drain_s", "restart_ready_s", "dra_plugin_s"))
    print(
        f"run 2 (resume, worker): {second_s:.0f}s; worker {timings}; "
        f"drain+restart+ready+plugin {parts:.0f}s of node total {timings.get('node_total_s')}s"
    )
