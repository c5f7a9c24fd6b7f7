"""A real rolling upgrade of the lab, SOURCE -> TARGET, with injected faults, then a
resume. TARGET is the newest release pinned in gpufleet/build/releases.yaml (1.38.0-beta.0,
a pre-release: kubeadm is allowed experimental upgrades, the packages are
``1.38.0~beta.0-1.1``), SOURCE the newest pinned one of the minor below (1.37.2);
GPUFLEET_UPGRADE_FROM and GPUFLEET_UPGRADE_TO name another pair.

It brings up a lab of its own at SOURCE with two GPU workers (``gpufleet-upgrade`` on
10.89.61.0/24) and removes it at the end; ``GPUFLEET_UPGRADE_LAB=1`` upgrades the existing
lab ``GPUFLEET_LAB_NAME`` names instead (the test changes it: it ends at TARGET, and a lab
goes back to SOURCE only by ``lab down`` and ``lab up``). kubeadm, kubelet and kubectl
come from the local package repository in the pkgs.k8s.io layout
(gpufleet/lab/packages.py), so unhold, exact-version install and hold run for real;
the control-plane images of TARGET are built from the cached binaries (air-gapped).

The steps run in this order, each on what the lab runs at that moment (a step that finds
no worker left at SOURCE skips and says so), so that one lab serves them all:

a. a PodDisruptionBudget blocks the drain of the first GPU worker still at SOURCE: the
   control plane is upgraded first (when it is not yet), the drain fails after its bounded
   attempts, the worker is uncordoned, the wave stops (no other worker touched), the report
   names node, phase and cause;
c. the last worker still at SOURCE is stopped (``podman stop``) while the wave upgrades the
   first: that one is upgraded, the stopped one fails in phase ``connect`` when its turn
   comes, with the cause in the report, and the wave stops; then it is started again;
b. a feature gate no kubelet knows is set by hand on the next worker (its
   ``/etc/default/kubelet``, ``KUBELET_EXTRA_ARGS``: ``kubeadm upgrade node`` rewrites
   ``/var/lib/kubelet/config.yaml`` from the kubelet-config ConfigMap, so a gate written
   there would not survive to the restart): the new kubelet cannot start, the wave stops
   at once, the node stays cordoned and the report holds the kubelet's own error;
final. the gate is removed and ``gpufleet upgrade -i inventory/lab --to TARGET`` (the CLI)
   resumes: nodes at the target are skipped, the node left cordoned is resumed and
   uncordoned; every kubelet and kube-apiserver runs TARGET, the packages are held at
   TARGET's package version on every node, the simulator's ResourceSlices are back,
   nothing is cordoned, the GPU nodes' kubelets run one version.

Each step prints its wall-clock time and the report's timings per node (drain, restart to
Ready, DRA plugin and slices, node total) against their sum.

Then the GPU stack, on the lab at TARGET (``gpufleet upgrade-gpu-stack --components driver``,
the GPU simulator standing in for the driver packages and the kernel module: the lab
inventory's ``nvidia_driver_unload_command`` and ``nvidia_driver_load_command`` run
``gpusim driver unload`` and ``load``):

gpu-a. both workers' GPUs carved into seven 1g.18gb MIG devices (``gpufleet mig apply``), a
   pod claiming one runs on the first worker, and a process holds that worker's simulated
   GPU: the first batch drains the pod (it lands on a MIG device of the other worker),
   stops the DRA kubelet plugin by the NoExecute taint, and fails in phase ``driver``
   because the module is in use; the report names the holder, the node stays cordoned and
   tainted, its old driver loaded, and the other worker is not touched;
gpu-b. the process lets go and the same command resumes: every worker runs the new driver,
   its MIG layout is carved again (GPU instances do not survive the reload), its
   ResourceSlices publish the new driver as ``driverVersion`` on as many devices as before,
   nothing is cordoned or tainted, the pod runs again, validate passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _version_key(version: str) -> tuple[int, int, int, int, str]:
    """Order of Kubernetes versions: a pre-release sorts below its release."""
    core, _, pre = version.partition("-")
    major, minor, patch = (int(x) for x in core.split("."))
    return major, minor, patch, 0 if pre else 1, pre


def default_pair() -> tuple[str, str]:
    """(SOURCE, TARGET): the newest release pinned in gpufleet/build/releases.yaml and the
    newest pinned one of the minor below it."""
    from gpufleet.build import release_pins

    pinned = [r.version for r in release_pins.load_releases().releases]
    target = max(pinned, key=_version_key)
    below = [v for v in pinned if _version_key(v)[1] == _version_key(target)[1] - 1]
    assert below, f"releases.yaml pins no release of the minor below {target}: {pinned}"
    return max(below, key=_version_key), target


#: The upgrade path: the lab's release and the target (one minor apart, both pinned in
#: gpufleet/build/releases.yaml and built by the ci profile). GPUFLEET_UPGRADE_FROM and
#: GPUFLEET_UPGRADE_TO run the same faults on another pair, e.g. 1.33.13 -> 1.34.4 (DRA
#: beta -> GA).
SOURCE = os.environ.get("GPUFLEET_UPGRADE_FROM") or default_pair()[0]
TARGET = os.environ.get("GPUFLEET_UPGRADE_TO") or default_pair()[1]


def package_version(version: str) -> str:
    """The pkgs.k8s.io version the plan pins (revision 1.1): 1.37.2-1.1,
    1.38.0~beta.0-1.1."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import (
        input as upgrade_input,
    )

    return upgrade_input.package_version(version)


REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventory" / "lab"
PROBE_GATE = "GpufleetUpgradeProbe"
PLUGIN_NAMESPACE = "gpufleet-gpu-simulator"

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


class Lab:
    """The lab under test: its state, kubeconfig, report and the playbook variables."""

    def __init__(self, cluster: Any, state: dict[str, Any]) -> None:
        self.cluster = cluster
        self.state = state
        self.kubeconfig = cluster.kubeconfig_path()
        self.report = self.kubeconfig.parent / "upgrade-report.json"
        self.control_plane = next(n["name"] for n in state["nodes"] if n["role"] == "control-plane")
        self.workers = [n["name"] for n in state["nodes"] if n["role"] == "gpu-worker"]
        self._extravars: dict[str, Any] | None = None

    # ---------------------------------------------------------------- cluster reads

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """kubectl against the lab; an API server that is restarting (the lab's node shares
        two busy cores) is retried for up to a minute."""
        from gpufleet.build import binaries

        argv = [str(binaries.binary_path("kubectl", TARGET)), "--kubeconfig",
                str(self.kubeconfig), *args]  # fmt: skip
        for _ in range(12):
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            if proc.returncode == 0 or not any(
                m in proc.stderr for m in ("connection refused", "EOF", "timeout", "TLS handshake")
            ):
                break
            time.sleep(5)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: {proc.stderr.strip()}")
        return proc

    def get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {n["metadata"]["name"]: n for n in self.get("nodes")["items"]}

    def pending_workers(self) -> list[str]:
        """Workers whose kubelet is not at the target yet, in inventory (wave) order."""
        nodes = self.nodes()
        return [
            w for w in self.workers
            if nodes[w]["status"]["nodeInfo"]["kubeletVersion"] != f"v{TARGET}"
        ]  # fmt: skip

    def wait_ready(self, node: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            conditions = self.nodes()[node]["status"].get("conditions") or []
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                return
            time.sleep(5)
        raise AssertionError(f"{node} not Ready within {timeout}s")

    def wait_control_plane(self, timeout: float = 600) -> None:
        """Every kube-system static pod Running and Ready: on this shared two-core machine
        the kube-scheduler and kube-controller-manager lose their leader lease under load
        and restart, and the upgrade's preflight rightly refuses a control plane with a
        component down. Raises AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            pods = self.get("pods", "-n", "kube-system")["items"]
            down = [
                p["metadata"]["name"] for p in pods
                if p["status"].get("phase") != "Running"
                or not all(c.get("ready") for c in p["status"].get("containerStatuses") or [{}])
            ]  # fmt: skip
            if not down:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"control plane not Ready within {timeout}s: {down}")
            time.sleep(5)

    def slice_devices(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.get("resourceslices")["items"]:
            spec = s["spec"]
            if spec.get("driver") == "gpu.nvidia.com" and spec.get("nodeName"):
                out[spec["nodeName"]] = out.get(spec["nodeName"], 0) + len(
                    spec.get("devices") or []
                )
        return out

    def read_report(self) -> dict[str, Any]:
        return json.loads(self.report.read_text()) if self.report.is_file() else {}

    def exec(self, node: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["podman", "exec", node, *argv], capture_output=True, text=True,
                              check=check, timeout=120)  # fmt: skip

    # ---------------------------------------------------------------- runs

    def extravars(self) -> dict[str, Any]:
        """What `gpufleet upgrade` passes on the lab, plus short drain bounds."""
        if self._extravars is None:
            from gpufleet.lab.upgrade import lab_upgrade_vars

            lab_vars = {**self.state["vars"], "lab_kubeconfig": str(self.kubeconfig)}
            t = time.monotonic()
            per_step = lab_upgrade_vars([SOURCE], [TARGET], lab_vars)
            print(f"repository and images: {time.monotonic() - t:.0f}s")
            self._extravars = {
                **per_step[TARGET],
                "upgrade_kubernetes_version": TARGET,
                "upgrade_kubeconfig": str(self.kubeconfig),
                "upgrade_report_path": str(self.report),
                "upgrade_drain_timeout": 20,
                "upgrade_drain_retries": 1,
                "upgrade_drain_retry_delay": 2,
            }
        return self._extravars

    def playbook(self) -> tuple[int, float, float]:
        """Run playbooks/upgrade.yml; (exit status, wall seconds, start epoch)."""
        from gpufleet.runner import run_playbook

        self.wait_control_plane()
        start, t = time.time(), time.monotonic()
        result = run_playbook("upgrade", str(INVENTORY), extravars=self.extravars())
        return result.status, time.monotonic() - t, start

    def events_since(self, start: float) -> dict[str, list[str]]:
        """Per host, the report's states recorded at or after ``start`` (epoch)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start - 1))
        out: dict[str, list[str]] = {}
        for e in self.read_report().get("events") or []:
            if e["time"] >= stamp:
                out.setdefault(e["host"], []).append(e["state"])
        return out

    def print_timings(self, label: str, wall: float, hosts: list[str], start: float) -> None:
        from gpufleet.commands.upgrade import timing_rows

        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start - 1))
        rows = timing_rows(self.read_report(), hosts, since)
        print(f"\n{label}: wall-clock {wall:.1f}s")
        for r in rows:
            print(
                f"  {r['host']}: {r['state']}; control plane {r['control_plane_s']}, drain "
                f"{r['drain_s']}, restart->Ready {r['restart_ready_s']}, plugin+slices "
                f"{r['dra_plugin_s']}, node total {r['node_total_s']}; waits {r['waits_s']}, "
                f"overhead {r['overhead_s']}"
            )
        waits = sum(r["waits_s"] for r in rows)
        print(f"  summed waits {waits:.1f}s of {wall:.1f}s; the rest {wall - waits:.1f}s")


#: The lab this module brings up for itself (beside the tests/lab package's own).
OWN_LAB = {"GPUFLEET_LAB_NAME": "gpufleet-upgrade", "GPUFLEET_LAB_SUBNET": "10.89.61.0/24"}


def _gpufleet(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "gpufleet"), *args],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _existing_lab(cluster: Any) -> Lab:
    state = cluster.load_state()
    if state is None:
        pytest.fail(f"GPUFLEET_UPGRADE_LAB=1: no lab named {cluster.lab_name()}; run gpufleet "
                    f"lab up --kubernetes-version {SOURCE} --workers 2")  # fmt: skip
    if state["spec"]["kubernetes_version"] != SOURCE:
        pytest.fail(
            f"lab {cluster.lab_name()} was brought up at {state['spec']['kubernetes_version']}, "
            f"not {SOURCE}"
        )
    lab = Lab(cluster, state)
    if lab.pending_workers() == lab.workers and lab.report.is_file():
        # a fresh lab: a report left by an earlier lab of the same name does not apply
        lab.report.unlink()
    return lab


@pytest.fixture(scope="module")
def lab():
    """The lab to upgrade. By default a lab of this module's own (``OWN_LAB``), brought up
    at ``SOURCE`` with two GPU workers and removed afterwards; ``GPUFLEET_UPGRADE_LAB=1``
    upgrades the existing lab that ``GPUFLEET_LAB_NAME`` names instead (kept), and
    ``GPUFLEET_UPGRADE_LAB=0`` skips the module (a developer's quick run; CI never sets it)."""
    mode = os.environ.get("GPUFLEET_UPGRADE_LAB", "")
    if mode == "0":
        pytest.skip("GPUFLEET_UPGRADE_LAB=0: the lab upgrade was turned off for this run")
    from gpufleet.lab import cluster

    if mode == "1":
        yield _existing_lab(cluster)
        return
    saved = {k: os.environ.get(k) for k in OWN_LAB}
    os.environ.update(OWN_LAB)
    try:
        t = time.monotonic()
        up = _gpufleet("lab", "up", "--kubernetes-version", SOURCE, "--workers", "2", timeout=1800)
        assert up.returncode == 0, (
            f"lab up exited {up.returncode}:\n{up.stdout[-3000:]}{up.stderr[-3000:]}"
        )
        print(f"\nlab {OWN_LAB['GPUFLEET_LAB_NAME']} up at {SOURCE}: {time.monotonic() - t:.0f}s")
        yield _existing_lab(cluster)
    finally:
        if os.environ.get("GPUFLEET_TEST_KEEP_LAB") != "1":
            down = _gpufleet("lab", "down", timeout=600)
            assert down.returncode == 0, f"lab down left things behind:\n{down.stderr[-3000:]}"
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_plan_names_the_path_packages_and_waves(lab):
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "gpufleet"), "upgrade", "-i", str(INVENTORY),
         "--to", TARGET, "--plan", "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    pending = lab.pending_workers()
    if not pending and not doc["steps"]:
        pytest.skip(f"the lab already runs {TARGET} everywhere")
    assert doc["path"] == [TARGET]
    step = doc["steps"][0]
    assert step["packages"] == dict.fromkeys(
        ("kubeadm", "kubelet", "kubectl"), package_version(TARGET)
    )
    worker_waves = [w["hosts"] for w in step["waves"] if w["kind"] == "worker"]
    resumed = [n["host"] for n in step["nodes"] if n["resume"]]
    assert [h for hs in worker_waves for h in hs] == [
        w for w in lab.workers if w in pending or w in resumed
    ]


def test_a_pdb_blocking_the_drain_stops_the_wave_and_uncordons(lab):
    pending = lab.pending_workers()
    if not pending:
        pytest.skip(f"no worker at {SOURCE} left for the drain fault: lab down, lab up")
    worker, others = pending[0], pending[1:]
    cp_before = lab.nodes()[lab.control_plane]["status"]["nodeInfo"]["kubeletVersion"]
    pdb = Path(lab.kubeconfig.parent / "upgrade-pdb-probe.yaml")
    pdb.write_text(PDB_OBJECTS % {"node": worker, "image": lab.state["vars"]["lab_smoke_image"]})
    lab.kubectl("apply", "-f", str(pdb))
    try:
        lab.kubectl("-n", "default", "rollout", "status", "deployment/upgrade-pdb-probe",
                    "--timeout=180s")  # fmt: skip
        status, wall, start = lab.playbook()
        lab.print_timings("a. drain blocked by a PodDisruptionBudget", wall,
                          [lab.control_plane, worker], start)  # fmt: skip
        assert status != 0, "the drain must fail while the budget allows no eviction"
        report = lab.read_report()
        assert worker in report.get("nodes", {}), f"the run stopped before {worker}: {report}"
        entry = report["nodes"][worker]
        assert (entry["state"], entry["phase"]) == ("failed", "drain"), entry
        assert "disruption budget" in entry["cause"], entry["cause"]
        assert "2 attempt(s) of 20s" in entry["cause"], entry["cause"]
        assert entry["cordoned"] is False and entry["cordoned_by_upgrade"] is False
        # bounded: two attempts of 20 s and the pause between them, not the default 300 s
        assert entry["timings_s"]["drain_s"] < 120, entry["timings_s"]
        nodes = lab.nodes()
        assert not nodes[worker]["spec"].get("unschedulable"), "a failed drain must uncordon"
        assert nodes[worker]["status"]["nodeInfo"]["kubeletVersion"] == f"v{SOURCE}"
        touched = lab.events_since(start)
        for other in others:
            assert other not in touched, f"the wave went on to {other}: {touched[other]}"
            assert nodes[other]["status"]["nodeInfo"]["kubeletVersion"] == f"v{SOURCE}"
            assert not nodes[other]["spec"].get("unschedulable")
        cp = lab.read_report()["nodes"][lab.control_plane]
        if cp_before == f"v{SOURCE}":
            assert cp["state"] == "upgraded", cp
        assert nodes[lab.control_plane]["status"]["nodeInfo"]["kubeletVersion"] == f"v{TARGET}"
    finally:
        lab.kubectl("delete", "-f", str(pdb), "--wait=true", "--ignore-not-found")


def test_c_a_worker_stopped_mid_wave_stops_it_with_the_cause(lab):
    pending = lab.pending_workers()
    if len(pending) < 2:
        pytest.skip(f"needs two workers at {SOURCE} (one upgraded, one stopped): lab down, lab up")
    first, stopped = pending[0], pending[-1]
    result: dict[str, Any] = {}

    def run() -> None:
        result["status"], result["wall"], result["start"] = lab.playbook()

    start = time.time()
    thread = threading.Thread(target=run)
    thread.start()
    stopped_at = None
    try:
        while thread.is_alive() and stopped_at is None:
            if "in-progress" in lab.events_since(start).get(first, []):
                # the wave is at the first worker: stop the one whose turn comes later
                subprocess.run(["podman", "stop", "-t", "5", stopped], check=True,
                               capture_output=True, timeout=120)  # fmt: skip
                stopped_at = time.time() - start
            time.sleep(2)
        thread.join()
        lab.print_timings("c. worker stopped mid-wave", result["wall"], [first, stopped], start)
        assert stopped_at is not None, "the run ended before the first worker started"
        print(f"  {stopped} stopped {stopped_at:.0f}s into the run")
        assert result["status"] != 0
        report = lab.read_report()["nodes"]
        assert report[first]["state"] == "upgraded", report[first]
        entry = report[stopped]
        assert (entry["state"], entry["phase"]) == ("failed", "connect"), entry
        assert "unreachable" in entry["cause"], entry["cause"]
        assert entry["cordoned"] is False and entry["cordoned_by_upgrade"] is False
    finally:
        subprocess.run(["podman", "start", stopped], check=True, capture_output=True, timeout=120)
    lab.wait_ready(stopped)
    nodes = lab.nodes()
    assert nodes[first]["status"]["nodeInfo"]["kubeletVersion"] == f"v{TARGET}"
    assert nodes[stopped]["status"]["nodeInfo"]["kubeletVersion"] == f"v{SOURCE}"
    assert not any(n["spec"].get("unschedulable") for n in nodes.values())


def test_b_a_kubelet_that_cannot_start_stops_the_wave_cordoned(lab):
    pending = lab.pending_workers()
    if not pending:
        pytest.skip(f"no worker at {SOURCE} left for the kubelet fault: lab down, lab up")
    worker, others = pending[0], pending[1:]
    lab.wait_ready(worker)
    line = f"KUBELET_EXTRA_ARGS=--feature-gates={PROBE_GATE}=true"
    lab.exec(worker, "sh", "-c", f"echo '{line}' > /etc/default/kubelet")
    status, wall, start = lab.playbook()
    lab.print_timings("b. kubelet refuses a hand-written feature gate", wall, [worker], start)
    assert status != 0
    entry = lab.read_report()["nodes"][worker]
    assert (entry["state"], entry["phase"]) == ("failed", "kubelet-restart"), entry
    assert f"unrecognized feature gate: {PROBE_GATE}" in entry["cause"], entry["cause"]
    assert entry["cordoned"] is True and entry["cordoned_by_upgrade"] is True
    # found from the kubelet's exit within seconds, not after the Ready timeout (300 s)
    assert entry["timings_s"]["restart_to_failure_s"] < 60, entry["timings_s"]
    nodes = lab.nodes()
    assert nodes[worker]["spec"].get("unschedulable") is True, "left cordoned for a look"
    touched = lab.events_since(start)
    for other in others:
        assert other not in touched, f"the wave went on to {other}"
    held = lab.exec(worker, "dpkg-query", "-W", "-f", "${Version} ${db:Status-Abbrev}", "kubelet")
    assert held.stdout.split()[:2] == [package_version(TARGET), "hi"], held.stdout


def test_final_cli_resumes_and_finishes_the_wave(lab, tmp_path):
    # the fault of step b is removed (systemd keeps restarting the kubelet: it comes up)
    for w in lab.workers:
        lab.exec(w, "rm", "-f", "/etc/default/kubelet")
    devices_before = lab.slice_devices()
    lab.wait_control_plane()
    log = lab.kubeconfig.parent / "upgrade-cli-output.txt"
    # as a user of the air-gapped lab does first: the package repository and control-plane
    # images of TARGET built and recorded in the lab's state, where inventory/lab finds them
    prep = subprocess.run(
        [str(Path(sys.executable).parent / "gpufleet"), "lab", "prepare-upgrade", "--to", TARGET],
        cwd=REPO, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert prep.returncode == 0, prep.stdout[-3000:] + prep.stderr[-3000:]
    t, start = time.monotonic(), time.time()
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "gpufleet"), "upgrade", "-i", "inventory/lab",
         "--to", TARGET],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False,
        env={**os.environ, "COLUMNS": "160"},
    )  # fmt: skip
    wall = time.monotonic() - t
    log.write_text(proc.stdout + proc.stderr)
    print(proc.stdout[-6000:], proc.stderr[-2000:])
    print(f"CLI output saved to {log}")
    lab.print_timings(
        "final: gpufleet upgrade (resume)", wall, [lab.control_plane, *lab.workers], start
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    nodes = lab.nodes()
    assert {n["status"]["nodeInfo"]["kubeletVersion"] for n in nodes.values()} == {f"v{TARGET}"}
    gpu_versions = {nodes[w]["status"]["nodeInfo"]["kubeletVersion"] for w in lab.workers}
    assert len(gpu_versions) == 1, f"GPU nodes' kubelets on two versions: {gpu_versions}"
    assert not any(n["spec"].get("unschedulable") for n in nodes.values())
    pods = lab.get("pods", "-n", "kube-system", "-l", "component=kube-apiserver")["items"]
    assert {p["spec"]["containers"][0]["image"].rsplit(":", 1)[1] for p in pods} == {f"v{TARGET}"}
    for node in [lab.control_plane, *lab.workers]:
        fmt = "${Package} ${Version} ${db:Status-Abbrev}\n"
        held = lab.exec(node, "dpkg-query", "-W", "-f", fmt, "kubeadm", "kubelet", "kubectl").stdout
        assert sorted(line.split()[:3] for line in held.splitlines() if line) == [
            [p, package_version(TARGET), "hi"] for p in ("kubeadm", "kubectl", "kubelet")
        ], f"{node}: {held}"
    devices = lab.slice_devices()
    for w in lab.workers:
        assert devices.get(w, 0) >= max(1, devices_before.get(w, 0)), (w, devices)
    report = lab.read_report()
    assert report["target"] == TARGET
    for host, entry in report["nodes"].items():
        assert entry["state"] in ("upgraded", "skipped"), (host, entry)
        assert entry["cordoned_by_upgrade"] is False, (host, entry)


# ---------------------------------------------------------------- the GPU stack

#: The driver the GPU-stack steps load in place of the simulator's (580.159.04): another
#: branch, as a driver upgrade of the field moves.
GPU_STACK_DRIVER = "590.44.01"
#: Where the GPU simulator's loaded module describes itself on a lab node.
SIM_PROC_VERSION = "/var/lib/gpufleet-gpu-simulator/proc/driver/nvidia/version"
GPU_STACK_NS = "gpufleet-gpu-stack-test"
GPU_STACK_TAINT = "gpufleet.io/gpu-stack-upgrade"
#: The MIG layout of the GPU-stack steps: the mig role carves it again after the reload.
GPU_STACK_MIG = {"1g.18gb": 7}


def _gpu_stack(lab: Lab, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    lab.wait_control_plane()
    t = time.monotonic()
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "gpufleet"), "upgrade-gpu-stack", "-i", "inventory/lab",
         "--driver", GPU_STACK_DRIVER, "--components", "driver",
         "-e", f"mig_layout={json.dumps(GPU_STACK_MIG)}", *extra],
        cwd=REPO, capture_output=True, text=True, timeout=2400, check=False,
        env={**os.environ, "COLUMNS": "160"},
    )  # fmt: skip
    wall = time.monotonic() - t
    print(proc.stdout[-5000:], proc.stderr[-3000:])
    return proc, wall


def _loaded(lab: Lab, node: str) -> str:
    """The release of the simulated module loaded on ``node``; "" when none is."""
    out = lab.exec(node, "cat", SIM_PROC_VERSION, check=False)
    words = out.stdout.split()
    return next((w for w in words if w.count(".") == 2 and w[0].isdigit()), "")


def _gpu_stack_report(lab: Lab) -> dict[str, Any]:
    path = lab.kubeconfig.parent / "upgrade-report-gpu-stack.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _gpu_pod_node(lab: Lab) -> str:
    pods = lab.get("pods", "-n", GPU_STACK_NS)["items"]
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    return running[0]["spec"].get("nodeName", "") if len(running) == 1 else ""


def _wait(what: str, check: Any, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(3)


def _gpu_deployment(lab: Lab, node: str) -> None:
    """A Deployment of one pod claiming one MIG device (a ResourceClaimTemplate of
    DeviceClass mig.nvidia.com), preferring ``node``."""
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu", "namespace": GPU_STACK_NS},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com"}}]}}},
    }  # fmt: skip
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]}}  # fmt: skip
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "gpu-job", "namespace": GPU_STACK_NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "gpu-job"}},
                 "template": {"metadata": {"labels": {"app": "gpu-job"}}, "spec": {
                     "terminationGracePeriodSeconds": 1, "affinity": affinity,
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                     "containers": [{"name": "job", "image": "localhost/gpufleet/busybox:1",
                                     "imagePullPolicy": "Never",
                                     "command": ["/bin/busybox", "sleep", "3600"],
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}},
    }  # fmt: skip
    lab.kubectl("create", "namespace", GPU_STACK_NS, check=False)
    for obj in (template, deployment):
        proc = subprocess.run(
            [str(_kubectl()), "--kubeconfig", str(lab.kubeconfig), "apply", "-f", "-"],
            input=json.dumps(obj), capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr


def _kubectl() -> Path:
    from gpufleet.build import binaries

    return binaries.binary_path("kubectl", TARGET)


def _gis(lab: Lab, node: str) -> list[str]:
    """The GPU instances ``nvidia-smi mig -lgi`` lists on ``node`` (the GPU simulator's)."""
    out = lab.exec(node, "nvidia-smi", "mig", "-lgi", check=False).stdout
    return [line for line in out.splitlines() if "MIG 1g" in line]


def _tainted(node: dict[str, Any]) -> bool:
    return any(t.get("key") == GPU_STACK_TAINT for t in node["spec"].get("taints") or [])


def test_gpu_stack_a_client_that_holds_the_gpu_stops_the_batch(lab):
    if len(lab.workers) < 2 or any(_loaded(lab, w) != "580.159.04" for w in lab.workers):
        pytest.skip("needs two workers with the simulator's driver 580.159.04: lab down, lab up")
    first, second = lab.workers
    carve = subprocess.run(
        [str(Path(sys.executable).parent / "gpufleet"), "mig", "apply", "-i", "inventory/lab",
         "--layout", json.dumps(GPU_STACK_MIG)],
        cwd=REPO, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert carve.returncode == 0, carve.stdout[-3000:] + carve.stderr[-3000:]
    assert all(len(_gis(lab, w)) == 7 for w in lab.workers)
    _gpu_deployment(lab, first)
    assert _wait("the GPU pod Running", lambda: _gpu_pod_node(lab)) == first
    # "a client that will not stop": a process on the host holds the first worker's GPU
    lab.exec(first, "gpusim", "hold", "--gpu", "0", "--pid", "4242", "--name", "python3",
             "--mib", "1024")  # fmt: skip
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    proc, wall = _gpu_stack(lab, "--batch-size", "1", "--no-validate")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    entry = _gpu_stack_report(lab)["nodes"][first]
    print(f"gpu-a: {wall:.1f}s; {first}: {entry['state']} in {entry['phase']}: {entry['cause']}")
    assert (entry["state"], entry["phase"]) == ("failed", "driver"), entry
    assert "Module nvidia is in use" in entry["cause"] and "python3" in entry["cause"], entry
    # the run stopped at the first batch: nothing of it reached the second worker
    untouched = _gpu_stack_report(lab)["nodes"].get(second, {"updated": ""})
    assert untouched["updated"] < stamp, untouched
    nodes = lab.nodes()
    assert nodes[first]["spec"].get("unschedulable") and _tainted(nodes[first])
    assert not nodes[second]["spec"].get("unschedulable") and not _tainted(nodes[second])
    assert (_loaded(lab, first), _loaded(lab, second)) == ("580.159.04", "580.159.04")
    # the drained pod landed on the other worker
    assert _wait("the GPU pod Running again", lambda: _gpu_pod_node(lab)) == second


def test_gpu_stack_resume_finishes_every_node_and_validate_passes(lab):
    if not _gpu_stack_report(lab):
        pytest.skip("the GPU-stack fault did not run (gpu-a)")
    first = lab.workers[0]
    lab.exec(first, "gpusim", "release", "--gpu", "0")
    start = time.time()
    proc, wall = _gpu_stack(lab, "--batch-size", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "validation: PASS" in proc.stdout + proc.stderr
    report = _gpu_stack_report(lab)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start - 1))
    print(f"gpu-b: gpufleet upgrade-gpu-stack (resume) {wall:.1f}s")
    for w in lab.workers:
        e = report["nodes"][w]
        print(f"  {w}: {e['state']} {json.dumps(e['timings_s'], sort_keys=True)}")
        assert e["state"] == "upgraded" and e["updated"] >= stamp, e
        assert e["cordoned_by_upgrade"] is False, e
        assert _loaded(lab, w) == GPU_STACK_DRIVER
    nodes = lab.nodes()
    assert not any(n["spec"].get("unschedulable") or _tainted(n) for n in nodes.values())
    for w in lab.workers:
        assert len(_gis(lab, w)) == 7, f"{w}: the MIG layout was not carved again"
    assert all(n >= 7 for n in lab.slice_devices().values()), lab.slice_devices()
    published = {
        (s["spec"]["nodeName"], d["attributes"]["driverVersion"]["version"])
        for s in lab.get("resourceslices")["items"]
        if s["spec"].get("driver") == "gpu.nvidia.com"
        for d in s["spec"].get("devices") or []
        if "driverVersion" in (d.get("attributes") or {})
    }
    assert published == {(w, "590.44.1") for w in lab.workers}, published
    landed = _wait("the GPU pod Running", lambda: _gpu_pod_node(lab))
    print(f"  the GPU pod, drained with each batch, runs on {landed}")
    lab.kubectl("delete", "namespace", GPU_STACK_NS, "--wait=false", check=False)
