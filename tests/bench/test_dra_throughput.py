"""kube-scheduler throughput for three DRA claim kinds on the same fleet.

Run it with ``.venv/bin/pytest -m bench tests/bench/test_dra_throughput.py`` (marker
``bench``: not part of the default run). For each kind of ``tests.bench.dra_fleet``
(whole GPUs, static MIG, dynamic MIG) it starts a fresh control plane of the default
pinned release (etcd, kube-apiserver, kube-controller-manager, kube-scheduler:
``tests.harness.controlplane``), ``NODES`` KWOK nodes of 8 H200s whose ResourceSlices
the simulator's kubelet plugin published for the first node (copied for the others,
``dra_fleet.clone_slice``), the simulator chart's DeviceClasses and one
ResourceClaimTemplate asking for one device of the kind (a 1g.18gb MIG device for the
MIG kinds). Then:

1. kube-scheduler is stopped (SIGSTOP of its process group);
2. ``PODS`` pods using the template are created, and kube-controller-manager's resource
   claim controller makes their ResourceClaims (waited for);
3. a watch on the pods is opened, kube-scheduler resumed (SIGCONT), and the time from
   the resume to the last pod bound (``spec.nodeName`` set, seen by the watch) is the
   run's time; pods/s = ``PODS`` / that time. This is scheduler_perf's burst case
   (``SchedulingWithResourceClaimTemplate``: pods created at once, the time to place
   them measured), with pod creation kept out of the time.

Every claim must end allocated to a distinct device of its kind on its pod's node (for
dynamic MIG: no two allocated devices on one GPU share a memory slice), else the test
fails; each kind's figure below its floor fails the test too.

kube-scheduler runs with kubeadm's flags plus ``--kube-api-qps``/``--kube-api-burst``
(``SCHEDULER_QPS``, default 5000, as scheduler_perf's client: ``util.go`` lines
129-130): with the default 50 QPS every DRA pod's two writes (claim status, binding) cap
it at about 25 pods/s whatever the claim kind, and the kinds could not be told apart.
Its leader lease is stretched (600 s) so that the stop does not cost it the lease.

Environment: ``GPUFLEET_DRA_BENCH_NODES`` (default 100), ``GPUFLEET_DRA_BENCH_PODS``
(default 800), ``GPUFLEET_DRA_BENCH_QPS`` (default 5000), ``GPUFLEET_DRA_BENCH_KINDS``
(comma-separated subset of ``whole,static-mig,dynamic-mig``).
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gpufleet.lab import gpusim_plugin
from tests.bench import dra_fleet
from tests.bench.dra_fleet import Kind
from tests.harness.controlplane import ControlPlane
from tests.integration.conftest import DEFAULT_VERSION, require_binaries

pytestmark = pytest.mark.bench

NODES = int(os.environ.get("GPUFLEET_DRA_BENCH_NODES", "100"))
PODS = int(os.environ.get("GPUFLEET_DRA_BENCH_PODS", "800"))
SCHEDULER_QPS = int(os.environ.get("GPUFLEET_DRA_BENCH_QPS", "5000"))
SELECTED = [
    k
    for k in dra_fleet.KINDS
    if k.name in os.environ.get("GPUFLEET_DRA_BENCH_KINDS", "whole,static-mig,dynamic-mig")
]
NAMESPACE = "dra-bench"

#: Upstream's floor for the same workload: kube-scheduler's own benchmark, DRA with a
#: ResourceClaimTemplate per pod, 500 nodes of 10 devices, 2,500 pods measured:
#: k8s.io/kubernetes v1.37.2 test/integration/scheduler_perf/dra/performance-config.yaml
#: line 130 (``SchedulingWithResourceClaimTemplate/5000pods_500nodes``, ``dra: 56 #
#: typically above 70``); its steady-state ``empty_500nodes`` has 64 (line 156, "typically
#: above 81"). There the scheduler runs in process against an in-process apiserver on a
#: dedicated CI machine.
UPSTREAM_FLOOR = 56.0
UPSTREAM_TYPICAL = 70.0

#: This benchmark's floor per kind, pods/s. Here kube-scheduler shares 2 CPUs with
#: kube-apiserver, etcd, kube-controller-manager, KWOK (which moves every bound pod to
#: Running) and the other work of a shared machine (load average 8 or more): it gets
#: about a quarter of a core-equivalent of upstream's CI, so the floor is a quarter of
#: upstream's 56 pods/s. A kind under it means the scheduler (or the slices the plugin
#: publishes) got markedly slower, not noise.
FLOOR = UPSTREAM_FLOOR / 4
#: Dynamic MIG against static MIG measured in the same run: each H200 publishes 26
#: partitionable devices over one CounterSet instead of 7 fixed ones, and the allocator
#: checks the counters of every candidate; upstream's partitionable-devices benchmark
#: (scheduler_perf/dra/partitionabledevices) states no threshold. Measured here (two runs,
#: docs/scale.md): 0.25 and 0.39 of the static rate, 4.7 and 9.1 pods/s, under the
#: absolute floor above, which therefore holds for the fixed-device kinds only. The goal
#: for dynamic MIG guards against a fall beyond what was measured: a fifth of the static
#: rate of the same run.
DYNAMIC_VS_STATIC = 0.2


@dataclass
class Result:
    kind: str
    nodes: int
    gpus: int
    devices: int
    pods: int
    seconds: float
    load: tuple[float, float]

    @property
    def rate(self) -> float:
        return self.pods / self.seconds


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _signal_scheduler(cp: ControlPlane, sig: signal.Signals) -> None:
    proc = cp.processes["kube-scheduler"]
    assert proc.popen is not None
    os.killpg(proc.popen.pid, sig)


class BindWatch:
    """A watch on the namespace's bound pods (``spec.nodeName!=``) from
    ``resource_version``: the monotonic time at which each pod was first seen bound.
    A watch the server ends is re-opened from the last resource version seen
    (``reopened`` counts them); when that version is gone (410), one list marks the
    bound pods at the time of the list (``relisted``)."""

    def __init__(self, cp: ControlPlane, resource_version: str) -> None:
        self.cp = cp
        self.rv = resource_version
        self.ctx = ssl.create_default_context(cafile=str(cp.layout.pki / "ca.crt"))
        self.ctx.load_cert_chain(
            str(cp.layout.root / "admin.crt"), str(cp.layout.root / "admin.key")
        )
        self.bound: dict[str, float] = {}
        self.reopened = 0
        self.relisted = 0
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _url(self, watch: bool) -> str:
        query = {"fieldSelector": "spec.nodeName!="}
        if watch:
            query |= {"watch": "1", "resourceVersion": self.rv, "allowWatchBookmarks": "true"}
        return f"{self.cp.server}/api/v1/namespaces/{NAMESPACE}/pods?" + urllib.parse.urlencode(
            query
        )

    def _relist(self) -> None:
        listed = self.cp.get_json(self._url(watch=False)[len(self.cp.server) :])
        now = time.monotonic()
        for item in listed["items"]:
            self.bound.setdefault(item["metadata"]["name"], now)
        self.rv = listed["metadata"]["resourceVersion"]
        self.relisted += 1

    def _run(self) -> None:
        deadline = time.monotonic() + 900
        try:
            while len(self.bound) < PODS and time.monotonic() < deadline:
                with urllib.request.urlopen(self._url(True), context=self.ctx, timeout=120) as resp:
                    for line in resp:
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            if obj.get("code") != 410:
                                raise RuntimeError(f"watch failed: {obj}")
                            self._relist()
                            break
                        meta = obj.get("metadata") or {}
                        self.rv = meta.get("resourceVersion", self.rv)
                        if event.get("type") != "BOOKMARK" and meta.get("name"):
                            self.bound.setdefault(meta["name"], time.monotonic())
                        if len(self.bound) >= PODS:
                            return
                self.reopened += 1
        except BaseException as exc:  # handed to the test thread
            self.error = exc
        finally:
            self.done.set()


def build(cp: ControlPlane, binary: Path, kind: Kind) -> tuple[list[str], int]:
    """Nodes, slices (plugin for the first node, copies for the rest), DeviceClasses,
    the namespace and the claim template. Returns the node names and the devices per
    node."""
    from kubernetes import client

    nodes = cp.start_kwok(NODES, name_prefix="gpu-node-")
    cp.wait_nodes_ready(nodes, timeout_s=600)
    published = dra_fleet.publish_with_plugin(cp, binary, nodes[0], kind)
    devices = sum(len(s["spec"].get("devices") or []) for s in published)
    uids = {
        n["metadata"]["name"]: n["metadata"]["uid"]
        for n in cp.get_json("/api/v1/nodes?labelSelector=type%3Dkwok")["items"]
    }
    first = dra_fleet.identities(dra_fleet.node_state(nodes[0], kind.carved))
    work = []
    for node in nodes[1:]:
        mine = dra_fleet.identities(dra_fleet.node_state(node, kind.carved))
        uuids = dict(zip(first, mine, strict=True))
        work += [dra_fleet.clone_slice(s, node, uids[node], uuids) for s in published]

    plural = {"ResourceSlice": "resourceslices", "DeviceClass": "deviceclasses"}

    def create(api: Any, body: Any) -> None:
        client.CustomObjectsApi(api).create_cluster_custom_object(
            "resource.k8s.io", "v1", plural[body["kind"]], body, _preload_content=False
        )

    cp.create_objects_concurrently(work, create, workers=8)
    cp.create_objects_concurrently(gpusim_plugin.device_classes(), create, workers=2)
    cp.create_namespace(NAMESPACE)
    client.CustomObjectsApi(cp.api_client()).create_namespaced_custom_object(
        "resource.k8s.io",
        "v1",
        NAMESPACE,
        "resourceclaimtemplates",
        dra_fleet.claim_template(NAMESPACE, kind),
    )
    return nodes, devices


def wait_claims(cp: ControlPlane, count: int, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        got = len(
            cp.get_json(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims")["items"]
        )
        if got >= count:
            return
        assert time.monotonic() < deadline, f"{got} of {count} claims made in {timeout_s:.0f}s"
        time.sleep(1)


def schedule_attempts(cp: ControlPlane) -> dict[str, int]:
    """kube-scheduler's ``scheduler_schedule_attempts_total`` by ``result`` (scheduled,
    unschedulable, error), read from its ``/metrics`` with the admin certificate."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the scheduler's self-signed serving certificate
    ctx.load_cert_chain(str(cp.layout.root / "admin.crt"), str(cp.layout.root / "admin.key"))
    url = f"https://127.0.0.1:{cp.ports.scheduler}/metrics"
    with urllib.request.urlopen(url, context=ctx, timeout=30) as resp:
        text = resp.read().decode()
    out: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("scheduler_schedule_attempts_total{"):
            result = line.split('result="', 1)[1].split('"', 1)[0]
            out[result] = out.get(result, 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


def last_scheduled(cp: ControlPlane) -> float:
    """The latest ``lastTransitionTime`` of the pods' PodScheduled=True condition, as a
    Unix time (whole seconds: the API keeps no fraction)."""
    pods = cp.get_json(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    times = [
        datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
        for p in pods
        for c in p["status"].get("conditions") or []
        if c["type"] == "PodScheduled" and c["status"] == "True"
    ]
    assert len(times) == PODS, f"{len(times)} of {PODS} pods have PodScheduled=True"
    return max(times)


def check_allocations(cp: ControlPlane, kind: Kind, slices: list[dict[str, Any]]) -> None:
    """Every claim allocated once, to a distinct device of ``kind`` on its pod's node; for
    dynamic MIG no two allocated devices of one GPU share a counter (memory slice)."""
    pods = cp.get_json(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    node_of = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
    claims = cp.get_json(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims")["items"]
    assert len(claims) == PODS
    by_device = {d["name"]: d for s in slices for d in s["spec"].get("devices") or []}
    taken: set[tuple[str, str]] = set()
    slices_used: dict[tuple[str, str, str], int] = {}
    for claim in claims:
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        owner = claim["metadata"]["ownerReferences"][0]["name"]
        assert result["pool"] == node_of[owner], (claim["metadata"]["name"], result)
        key = (result["pool"], result["device"])
        assert key not in taken, f"device {key} allocated twice"
        taken.add(key)
        dev = by_device[result["device"]]
        want = "gpu" if kind.name == "whole" else "mig"
        assert dev["attributes"]["type"]["string"] == want, result
        if kind.name != "whole":
            assert dev["attributes"]["profile"]["string"] == dra_fleet.PROFILE, result
        for consumed in dev.get("consumesCounters") or []:
            for counter, amount in consumed["counters"].items():
                if counter.startswith("memorySlice"):
                    k = (result["pool"], consumed["counterSet"], counter)
                    slices_used[k] = slices_used.get(k, 0) + int(amount["value"])
    over = {k: v for k, v in slices_used.items() if v > 1}
    assert not over, f"memory slices allocated more than once: {sorted(over)[:5]}"


def measure(kind: Kind, binary: Path, log: Any) -> Result:
    from kubernetes import client

    extra = {
        "kube-scheduler": {
            "kube-api-qps": str(SCHEDULER_QPS),
            "kube-api-burst": str(SCHEDULER_QPS),
            "leader-elect-lease-duration": "600s",
            "leader-elect-renew-deadline": "590s",
        }
    }
    with ControlPlane(DEFAULT_VERSION, extra_args=extra) as cp:
        nodes, devices = build(cp, binary, kind)
        slices = dra_fleet.pool_slices(cp, nodes[0])
        log(f"{kind.name}: {len(nodes)} nodes, {devices} devices per node published")
        _signal_scheduler(cp, signal.SIGSTOP)
        try:

            def create_pod(api: Any, i: int) -> None:
                client.CoreV1Api(api).create_namespaced_pod(
                    NAMESPACE, dra_fleet.pod(NAMESPACE, f"p-{i:05d}"), _preload_content=False
                )

            cp.create_objects_concurrently(range(PODS), create_pod, workers=8)
            wait_claims(cp, PODS)
            rv = cp.get_json(f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1")["metadata"][
                "resourceVersion"
            ]
            watch = BindWatch(cp, rv)
            watch.start()
            time.sleep(1)  # the watch is open before the scheduler runs
        finally:
            load_before = _load()
            start, wall_start = time.monotonic(), time.time()
            _signal_scheduler(cp, signal.SIGCONT)
        watch.done.wait(timeout=900)
        assert watch.error is None, watch.error
        assert len(watch.bound) == PODS, f"{len(watch.bound)} of {PODS} pods bound"
        seconds = max(watch.bound.values()) - start
        by_conditions = last_scheduled(cp) - wall_start
        log(
            f"{kind.name}: {PODS} pods bound in {seconds:.2f}s (watch re-opened "
            f"{watch.reopened}x, re-listed {watch.relisted}x); by the pods' PodScheduled "
            f"condition times (1 s resolution) {by_conditions:.0f}s; scheduling attempts "
            f"{schedule_attempts(cp)}"
        )
        result = Result(
            kind.name, len(nodes), len(nodes) * dra_fleet.NODE_GPUS, devices, PODS, seconds,
            (load_before, _load()),
        )  # fmt: skip
        check_allocations(cp, kind, slices)
        return result


@pytest.fixture(scope="module")
def plugin_binary() -> Path:
    require_binaries(DEFAULT_VERSION)
    try:
        gpusim_plugin.find_go()
    except gpusim_plugin.BuildError as exc:
        pytest.skip(f"the kubelet plugin cannot be built here: {exc}")
    return gpusim_plugin.ensure_binary().path


def floor_of(r: Result, results: dict[str, Result]) -> tuple[float, str]:
    """The floor a result is judged against, and how it was set."""
    if r.kind != "dynamic-mig":
        return FLOOR, f"{FLOOR:.0f}"
    static = results.get("static-mig")
    if static is None:  # run alone (an environment variable picks the kinds)
        return DYNAMIC_VS_STATIC * FLOOR, f"{DYNAMIC_VS_STATIC * FLOOR:.1f} (no static run)"
    rel = DYNAMIC_VS_STATIC * static.rate
    return rel, f"{rel:.1f} ({DYNAMIC_VS_STATIC:.1f}x static)"


def table(results: dict[str, Result]) -> Iterator[str]:
    head = (
        f"{'kind':<12} {'nodes':>5} {'GPUs':>5} {'dev/node':>8} {'pods':>5} "
        f"{'seconds':>8} {'pods/s':>7}  {'floor':<24} {'upstream':<18} load (start/end)"
    )
    yield head
    yield "-" * len(head)
    for r in results.values():
        floor, why = floor_of(r, results)
        mark = "ok" if r.rate >= floor else "MISSED"
        yield (
            f"{r.kind:<12} {r.nodes:>5} {r.gpus:>5} {r.devices:>8} {r.pods:>5} "
            f"{r.seconds:>8.2f} {r.rate:>7.1f}  {why + ' ' + mark:<24} "
            f"{f'>= {UPSTREAM_FLOOR:.0f} (~{UPSTREAM_TYPICAL:.0f})':<18} "
            f"{r.load[0]:.2f}/{r.load[1]:.2f}"
        )


def test_scheduler_throughput_per_claim_kind(
    plugin_binary: Path, pytestconfig: pytest.Config
) -> None:
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")

    def out(text: str) -> None:
        if reporter is None or capture is None:
            print(text)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(text)

    results: dict[str, Result] = {}
    for kind in SELECTED:
        results[kind.name] = measure(kind, plugin_binary, out)
    out("")
    out(
        f"kube-scheduler v{DEFAULT_VERSION} throughput, pods with one ResourceClaimTemplate "
        f"claim each (client QPS {SCHEDULER_QPS}, {os.cpu_count()} CPUs)"
    )
    for line in table(results):
        out(line)
    missed = [
        f"{r.kind} {r.rate:.1f} pods/s < {floor_of(r, results)[0]:.1f}"
        for r in results.values()
        if r.rate < floor_of(r, results)[0]
    ]
    assert not missed, "throughput below its floor: " + "; ".join(missed)
