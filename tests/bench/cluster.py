"""The fleet of the scale benchmark on a real control plane, and how runs are measured.

``build_fleet`` fills a running ``ControlPlane`` (etcd and kube-apiserver, KWOK nodes)
with the objects of ``tests.bench.fleet``: KWOK GPU nodes, their ResourceSlices,
DeviceClasses, ResourceClaims with the status kube-scheduler would have written, the
pods that use them, and the DRA kubelet plugin's DaemonSet and pods. KWOK moves the pods
to Running.

``Metrics`` reads kube-apiserver's ``apiserver_request_total`` counter (``GET
/metrics``) before and after a run; ``run_measured`` runs a command as a child process
and returns its wall time, the peak resident set size of its process tree and the lists
it read (the audit log); ``measure_floor`` pages through those lists with a client that
only receives the bytes (``tests.bench.floor``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.lab import gpusim_plugin
from tests.bench import fleet, writes
from tests.bench import floor as floor_client
from tests.harness.controlplane import ControlPlane

# --------------------------------------------------------------------------- requests


_METRIC_RE = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")
_LABEL_RE = re.compile(r'(\w+)="([^"]*)"')

#: The user kube-apiserver makes its own loopback requests as (identity Lease renewals,
#: ``/openapi/v3`` reads, informers re-opening watches, repair controllers listing).
APISERVER_USER = "system:apiserver"

#: Audit policy of the benchmark's kube-apiserver: every request of kube-apiserver
#: itself, every watch and every list at level Metadata, node patches at level Request
#: (with their bodies), nothing else. The measured programs' lists and node patches are
#: logged so that their floor pages through the same lists and sends the same patches
#: (``tests.bench.floor``): one event per page, about a hundred for validate at 10,000
#: nodes, and one per node patch; their other requests cost no audit work. No measured
#: program opens a watch; a watch that ends during a run is KWOK's (its controller is
#: paused, its watches time out) or kube-apiserver's own.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "Metadata", "users": [APISERVER_USER]},
        {"level": "Metadata", "verbs": ["watch", "list"]},
        # the bodies of node patches (not of nodes/status: KWOK's), which a floor sends again
        {
            "level": "Request",
            "verbs": ["patch"],
            "resources": [{"group": "", "resources": ["nodes"]}],
        },
        {"level": "None"},
    ],
}

#: Audit verbs -> the verb label of ``apiserver_request_total``.
_AUDIT_VERBS = {
    "get": "GET",
    "list": "LIST",
    "watch": "WATCH",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETE",
}


def audit_args(workdir: Path) -> dict[str, str]:
    """kube-apiserver flags that write ``AUDIT_POLICY``'s log to ``workdir/audit.log``."""
    policy = workdir / "audit-policy.json"
    policy.write_text(json.dumps(AUDIT_POLICY))
    return {
        "audit-policy-file": str(policy),
        "audit-log-path": str(workdir / "audit.log"),
        "audit-log-format": "json",
    }


def _kind(verb: str, resource: str, subresource: str) -> str:
    what = f"{resource}/{subresource}" if resource and subresource else resource or subresource
    return f"{verb} {what or '?'}"


class Metrics:
    """kube-apiserver's ``apiserver_request_total`` (all clients) as a Counter keyed by
    ``"VERB resource[/subresource]"``; non-resource paths (``/version``, ``/apis``) are
    keyed by their path, which the metric records in ``subresource``."""

    def __init__(self, cp: ControlPlane) -> None:
        self.url = f"{cp.server}/metrics"
        self.ctx = ssl.create_default_context(cafile=str(cp.layout.pki / "ca.crt"))
        self.ctx.load_cert_chain(
            str(cp.layout.root / "admin.crt"), str(cp.layout.root / "admin.key")
        )

    def read(self) -> Counter:
        with urllib.request.urlopen(self.url, context=self.ctx, timeout=60) as resp:
            text = resp.read().decode()
        out: Counter = Counter()
        for line in text.splitlines():
            m = _METRIC_RE.match(line)
            if m:
                labels = dict(_LABEL_RE.findall(m.group(1)))
                key = _kind(
                    labels.get("verb", ""),
                    labels.get("resource", ""),
                    labels.get("subresource", ""),
                )
                out[key] += int(float(m.group(2)))
        return out


class AuditLog:
    """The audit log (``AUDIT_POLICY``) since a remembered offset: its lines, and the
    background requests of a run among them (``since_mark``: those of kube-apiserver
    itself and every watch, keyed like ``Metrics``). The lists a run read come from the
    same lines (``tests.bench.floor.lists_from_audit``)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size if self.path and self.path.exists() else 0

    def lines_since_mark(self) -> list[bytes]:
        if not self.path or not self.path.exists():
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            return fh.readlines()

    def since_mark(self, lines: list[bytes] | None = None) -> Counter:
        out: Counter = Counter()
        for raw in self.lines_since_mark() if lines is None else lines:
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # a line still being written
            if not isinstance(event, dict):
                continue
            user = (event.get("user") or {}).get("username")
            if user != APISERVER_USER and event.get("verb") != "watch":
                continue
            ref = event.get("objectRef") or {}
            verb = _AUDIT_VERBS.get(event.get("verb", ""), event.get("verb", "").upper())
            if ref.get("resource"):
                key = _kind(verb, ref["resource"], ref.get("subresource", ""))
            else:
                path = urllib.parse.urlsplit(event.get("requestURI", "")).path
                key = _kind(verb, "", path.lstrip("/"))
            out[key] += 1
        return out


@dataclass
class Requests:
    """API requests of one run: ``total`` and ``by_kind`` (``"LIST nodes"`` -> count):
    the rise of ``apiserver_request_total`` less ``background``, the requests
    kube-apiserver made to itself and the watches that ended meanwhile (its audit
    log)."""

    total: int
    by_kind: dict[str, int]
    background: int

    def short(self, top: int = 6) -> str:
        items = sorted(self.by_kind.items(), key=lambda kv: -kv[1])
        text = ", ".join(f"{k} {v}" for k, v in items[:top])
        if len(items) > top:
            text += f", {len(items) - top} more kinds"
        return text


def request_delta(before: Counter, after: Counter, background: Counter) -> Requests:
    by_kind: Counter = Counter()
    for key, value in after.items():
        diff = value - before.get(key, 0) - background.get(key, 0)
        if diff > 0:
            by_kind[key] += diff
    return Requests(sum(by_kind.values()), dict(by_kind), sum(background.values()))


# --------------------------------------------------------------------------- processes


def audit_path(cp: ControlPlane) -> Path | None:
    """The audit log ``audit_args`` gave kube-apiserver, if any."""
    flags = (cp.extra_args or {}).get("kube-apiserver") or {}
    path = flags.get("audit-log-path")
    return Path(path) if path else None


@dataclass
class Measured:
    """One measured command: exit status, wall time in seconds, peak resident set size
    in MiB of the largest process of its tree (``getrusage(RUSAGE_CHILDREN)``
    ``ru_maxrss``: the largest of every descendant waited for), the API requests it
    issued, the CPU seconds its tree used (``cpu_s``) and kube-apiserver and etcd used
    meanwhile (``server_cpu_s``), the load average around it, its output, and the paged
    lists it read (``lists``, from the audit log; empty without one)."""

    argv: list[str]
    rc: int
    wall_s: float
    peak_rss_mib: float
    requests: Requests
    stdout: str
    stderr: str
    cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    #: the machine's 1-minute load average when the run started and when it ended
    load: tuple[float, float] = (0.0, 0.0)
    lists: list[floor_client.ListRequest] = field(default_factory=list)
    #: the floor measured right after this run (``measure_floor``), when asked for
    floor: FloorRun | None = None
    #: the node patches it sent, with their bodies (from the audit log)
    patches: list[floor_client.PatchRequest] = field(default_factory=list)

    def check(self) -> Measured:
        if self.rc != 0:
            raise AssertionError(
                f"{' '.join(self.argv[:6])} ... exited with {self.rc}\n"
                f"stdout (tail):\n{self.stdout[-4000:]}\nstderr (tail):\n{self.stderr[-3000:]}"
            )
        return self


@contextlib.contextmanager
def kwok_paused(cp: ControlPlane) -> Iterator[None]:
    """SIGSTOP the KWOK controller's process group for the block, SIGCONT after.

    KWOK plays 1,000 kubelets (node heartbeats, pod status); a real fleet's kubelets run
    on their own machines, here they would share the two CPUs with the measured program
    and add their requests to the apiserver's counter. Nothing KWOK does is needed while
    a measured program reads or labels the fleet (every pod is Running by then).
    """
    proc = cp.processes.get("kwok")
    pgid = proc.popen.pid if proc is not None and proc.popen is not None else None
    if pgid is not None:
        os.killpg(pgid, signal.SIGSTOP)
    try:
        yield
    finally:
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGCONT)


#: Runs ``argv[2:]`` and writes the ``RUSAGE_CHILDREN`` of its process tree to
#: ``argv[1]`` (JSON: peak RSS in KiB, CPU seconds). A small intermediate process: a
#: child's ``ru_maxrss`` also counts the memory of the process it was forked from
#: (``exec`` keeps the old image's high-water mark, ``fs/exec.c`` ``exec_mmap``), which
#: would be the benchmark's own. It is the subreaper of the tree (``PR_SET_CHILD_SUBREAPER``)
#: and waits for every orphan: a process that left its parent (an Ansible ``async`` task
#: detaches itself) is counted too.
_WRAPPER = """
import ctypes, json, os, resource, subprocess, sys
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d" % ctypes.get_errno())
rc = subprocess.call(sys.argv[2:])
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as fh:
    json.dump({"maxrss_kib": ru.ru_maxrss, "cpu_s": ru.ru_utime + ru.ru_stime}, fh)
sys.exit(rc if rc >= 0 else 128 - rc)
"""


def _cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of the given processes so far (``/proc/<pid>/stat``)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def settle(
    cp: ControlPlane, busy_cores: float = 0.1, window_s: float = 2.0, timeout_s: float = 120.0
) -> float:
    """Wait until kube-apiserver and etcd use less than ``busy_cores`` CPUs over a
    ``window_s`` window (work left from the last bulk change: watch cache, etcd
    compaction and snapshots), at most ``timeout_s`` seconds. Returns the last load in
    CPUs."""
    pids = server_pids(cp)
    deadline = time.monotonic() + timeout_s
    while True:
        before = _cpu_seconds(pids)
        time.sleep(window_s)
        used = (_cpu_seconds(pids) - before) / window_s
        if used < busy_cores or time.monotonic() > deadline:
            return used


def server_pids(cp: ControlPlane) -> list[int]:
    """PIDs of etcd and kube-apiserver."""
    out = []
    for name in ("etcd", "kube-apiserver"):
        proc = cp.processes.get(name)
        if proc is not None and proc.popen is not None:
            out.append(proc.popen.pid)
    return out


def run_measured(
    cp: ControlPlane,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 3600.0,
) -> Measured:
    """Run ``argv`` with KWOK paused, once kube-apiserver and etcd are idle (``settle``);
    count the apiserver requests around it and read the CPU time and peak RSS of its
    process tree (``RUSAGE_CHILDREN`` of a small wrapper process).
    Raises ``TimeoutError`` (after killing it) when it runs longer than ``timeout_s``."""
    metrics = Metrics(cp)
    audit = AuditLog(audit_path(cp))
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as tmp:
        out_path, err_path = Path(tmp) / "out", Path(tmp) / "err"
        rss_path = Path(tmp) / "rss"
        wrapped = [sys.executable, "-I", "-S", "-c", _WRAPPER, str(rss_path), *argv]
        with kwok_paused(cp), open(out_path, "wb") as out, open(err_path, "wb") as err:
            settle(cp)
            audit.mark()
            before = metrics.read()
            server_before = _cpu_seconds(server_pids(cp))
            load_before = _load()
            start = time.monotonic()
            proc = subprocess.Popen(
                wrapped,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise TimeoutError(f"{argv[0]} ran longer than {timeout_s:.0f}s") from None
            wall = time.monotonic() - start
            server_cpu = _cpu_seconds(server_pids(cp)) - server_before
            after = metrics.read()
            time.sleep(0.5)  # the audit log backend writes in batches
            lines = audit.lines_since_mark()
            background = audit.since_mark(lines)
            lists = floor_client.lists_from_audit(lines, (APISERVER_USER,))
            patches = floor_client.patches_from_audit(lines, (APISERVER_USER,))
        usage = json.loads(rss_path.read_text())
        return Measured(
            list(argv),
            rc,
            wall,
            usage["maxrss_kib"] / 1024,
            request_delta(before, after, background),
            out_path.read_text(errors="replace"),
            err_path.read_text(errors="replace"),
            usage["cpu_s"],
            server_cpu,
            (load_before, _load()),
            lists,
            patches=patches,
        )


@dataclass
class FloorRun:
    """The floor of one measured command: what paging through its lists took
    (``floor``, timed inside the client, its process start left out) and that client's
    own run (``run``: its requests, CPU and peak RSS as ``run_measured`` counts them)."""

    floor: floor_client.Floor
    run: Measured


def measure_floor(
    cp: ControlPlane,
    command: Measured,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    reset: Callable[[], None] | None = None,
) -> FloorRun | None:
    """Page through the lists ``command`` read (``command.lists``), then send the node
    patches it sent (``command.patches``), with ``tests.bench.floor``'s client, as a
    child process measured like the command (KWOK paused, the servers settled), with the
    admin credentials of ``cp`` (those of the kubeconfig the commands are given) and as
    many connections as the command had lists, and patches, in flight
    (``floor.concurrency``). None when the command read no list and sent no patch.

    ``reset`` puts the objects back as they were before the command (the patches would
    change nothing otherwise); a command that sent patches needs it (``ValueError``)."""
    if not command.lists and not command.patches:
        return None
    if command.patches:
        if reset is None:
            raise ValueError(
                f"the command sent {len(command.patches)} node patches: its floor sends them "
                "again, so the nodes must be put back first (pass reset)"
            )
        reset()
    with tempfile.TemporaryDirectory(prefix="gpufleet-floor-") as tmp:
        spec = Path(tmp) / "floor.json"
        spec.write_text(
            json.dumps(
                {
                    "server": cp.server,
                    "ca": str(cp.layout.pki / "ca.crt"),
                    "cert": str(cp.layout.root / "admin.crt"),
                    "key": str(cp.layout.root / "admin.key"),
                    "workers": floor_client.concurrency(command.lists),
                    "lists": [r.to_dict() for r in command.lists],
                    "patch_workers": floor_client.concurrency(command.patches),
                    "patches": [r.to_dict() for r in command.patches],
                }
            )
        )
        run = run_measured(
            cp, [sys.executable, "-m", "tests.bench.floor", str(spec)], env=env, cwd=cwd
        ).check()
    doc = json.loads(run.stdout)
    got = floor_client.Floor(
        doc["seconds"],
        doc["pages"],
        doc["bytes"],
        doc["workers"],
        command.lists,
        doc["patches"],
        doc["patch_workers"],
        doc["patch_seconds"],
    )
    return FloorRun(got, run)


# --------------------------------------------------------------------------- the fleet


@dataclass
class Fleet:
    """What ``build_fleet`` made: node names, the claims (``ClaimPlan``), the devices per
    node, the leaked claims' keys, timings of each setup step in seconds, and whether the
    ResourceSlice shape was checked against the simulator's kubelet plugin (and if not,
    why)."""

    cp: ControlPlane
    nodes: list[str]
    claims: list[fleet.ClaimPlan]
    devices_per_node: int
    leaked: set[str]
    timings: dict[str, float] = field(default_factory=dict)
    shape_check: str = ""

    @property
    def devices(self) -> int:
        return self.devices_per_node * len(self.nodes)

    def leaked_on(self, nodes: Sequence[str]) -> set[str]:
        wanted = set(nodes)
        return {c.key for c in self.claims if c.leaked and c.node in wanted}


def _timed(timings: dict[str, float], name: str) -> Callable[[], None]:
    start = time.monotonic()

    def done() -> None:
        timings[name] = time.monotonic() - start

    return done


def build_fleet(
    cp: ControlPlane,
    node_count: int,
    *,
    plugin_binary: Path | None = None,
    plugin_skip_reason: str = "",
    log: Callable[[str], None] = print,
    workers: int = 8,
) -> Fleet:
    """Create the whole fleet on ``cp`` and wait until KWOK runs every pod.

    ``plugin_binary``: the simulator's kubelet plugin; when given it publishes the first
    node's ResourceSlice from that node's simulator state, and the devices must equal
    ``fleet.devices`` of that state (``AssertionError`` otherwise); the other nodes'
    slices are created from ``fleet.devices``. ``workers``: requests in flight, each on a
    connection of its own (``tests.bench.writes``).
    Raises ``TimeoutError`` when nodes or pods do not become Ready/Running in time (the
    waits grow with the fleet).
    """
    from kubernetes import client

    api = cp.api_client()
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    apps = client.AppsV1Api(api)
    timings: dict[str, float] = {}

    done = _timed(timings, "nodes")
    # Ready once, then no Lease renewals or heartbeats: nothing here watches them (no
    # kube-controller-manager), the measured commands run with KWOK paused, and at
    # 10,000 nodes they would be about 1,400 writes a second on the API server's 2 cores.
    nodes = cp.start_kwok(node_count, name_prefix="gpu-node-", heartbeats=False)
    cp.wait_nodes_ready(nodes, timeout_s=max(600.0, 0.2 * node_count))
    done()
    log(f"{len(nodes)} KWOK nodes Ready in {timings['nodes']:.1f}s")

    for ns in (*fleet.WORKLOAD_NAMESPACES, fleet.PLUGIN_NAMESPACE):
        core.create_namespace({"metadata": {"name": ns}})
        # kube-controller-manager does not run here (it would clean up the leaked
        # claims); the ServiceAccount admission plugin needs the default ServiceAccount
        core.create_namespaced_service_account(ns, {"metadata": {"name": "default"}})
    for dc in fleet.device_classes():
        custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", dc)

    # ResourceSlices: the first node's from the real plugin when it can run
    done = _timed(timings, "resourceslices")
    uids = {
        n["metadata"]["name"]: n["metadata"]["uid"]
        for n in cp.get_json("/api/v1/nodes?labelSelector=type%3Dkwok")["items"]
    }
    first_devices = fleet.devices(fleet.node_state(nodes[0]))
    shape = plugin_skip_reason or "no plugin binary given"
    rest = nodes
    if plugin_binary is not None:
        shape = check_plugin_shape(cp, plugin_binary, nodes[0], first_devices)
        rest = nodes[1:]

    resource = f"/apis/resource.k8s.io/{fleet.RESOURCE_API.split('/')[1]}"
    send = functools.partial(writes.send_all, cp.server, writes.admin_context(cp), workers=workers)
    send(
        (
            writes.Write(
                "POST",
                f"{resource}/resourceslices",
                fleet.resource_slice(node, uids[node], fleet.devices(fleet.node_state(node))),
            )
            for node in rest
        ),
    )
    done()
    log(
        f"{len(nodes)} ResourceSlices ({len(first_devices)} devices each) in "
        f"{timings['resourceslices']:.1f}s; shape: {shape}"
    )

    # claims, the pods that use them, then the status the scheduler writes
    done = _timed(timings, "claims")
    plans = fleet.plan_claims(nodes, first_devices)
    send(
        (
            writes.Write(
                "POST",
                f"{resource}/namespaces/{plan.namespace}/resourceclaims",
                fleet.claim_object(plan),
            )
            for plan in plans
        ),
    )
    pod_uids: dict[str, str] = {}
    plan_of_pod = {(p.namespace, p.pod): p.key for p in plans if not p.leaked}

    def keep_pod_uid(w: writes.Write, body: bytes) -> None:
        meta = json.loads(body)["metadata"]
        pod_uids[plan_of_pod[(meta["namespace"], meta["name"])]] = meta["uid"]

    send(
        (
            writes.Write(
                "POST", f"/api/v1/namespaces/{plan.namespace}/pods", fleet.workload_pod(plan)
            )
            for plan in plans
            if not plan.leaked
        ),
        answer=keep_pod_uid,
    )
    # a leaked claim stays reserved for a pod uid that no pod has any more
    send(
        (
            writes.Write(
                "PATCH",
                f"{resource}/namespaces/{plan.namespace}/resourceclaims/{plan.name}/status",
                {"status": fleet.claim_status(plan, pod_uids.get(plan.key) or _dead_uid(plan))},
                writes.MERGE_PATCH,
            )
            for plan in plans
        ),
    )
    done()
    log(
        f"{len(plans)} ResourceClaims ({sum(p.leaked for p in plans)} leaked) and "
        f"{len(pod_uids)} pods in {timings['claims']:.1f}s"
    )

    # the kubelet plugin DaemonSet and its pod on every node
    done = _timed(timings, "plugin")
    ds = apps.create_namespaced_daemon_set(fleet.PLUGIN_NAMESPACE, fleet.plugin_daemonset())
    apps.patch_namespaced_daemon_set_status(
        fleet.PLUGIN_DAEMONSET,
        fleet.PLUGIN_NAMESPACE,
        {"status": fleet.plugin_daemonset_status(len(nodes))},
    )
    send(
        (
            writes.Write(
                "POST",
                f"/api/v1/namespaces/{fleet.PLUGIN_NAMESPACE}/pods",
                fleet.plugin_pod(node, ds.metadata.uid),
            )
            for node in nodes
        ),
    )
    done()

    done = _timed(timings, "pods_running")
    wait_pods_running(
        cp, len(pod_uids) + len(nodes), timeout_s=max(900.0, 0.03 * (len(pod_uids) + len(nodes)))
    )
    done()
    log(f"{len(pod_uids) + len(nodes)} pods Running after {timings['pods_running']:.1f}s")
    return Fleet(
        cp,
        nodes,
        plans,
        len(first_devices),
        {p.key for p in plans if p.leaked},
        timings,
        shape,
    )


def _dead_uid(plan: fleet.ClaimPlan) -> str:
    import uuid

    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gone/{plan.key}"))


def wait_pods_running(cp: ControlPlane, expected: int, timeout_s: float = 900.0) -> None:
    """Wait until no pod is outside phase Running (server-side field selector, so each
    poll returns only the pods still waiting) and ``expected`` pods exist."""
    query = urllib.parse.urlencode({"fieldSelector": "status.phase!=Running", "limit": 1})
    deadline = time.monotonic() + timeout_s
    while True:
        waiting = cp.get_json(f"/api/v1/pods?{query}")
        left = len(waiting["items"]) + int(waiting["metadata"].get("remainingItemCount") or 0)
        if left == 0:
            total = cp.get_json("/api/v1/pods?limit=1")
            count = 1 + int(total["metadata"].get("remainingItemCount") or 0)
            if count >= expected:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{left} pods not Running after {timeout_s:.0f}s")
        time.sleep(2)


def check_plugin_shape(
    cp: ControlPlane, binary: Path, node: str, expected: list[dict[str, Any]]
) -> str:
    """Run the simulator's kubelet plugin for ``node`` with that node's simulator state,
    wait for its ResourceSlice and compare its devices with ``expected``. The plugin is
    stopped afterwards; its slice stays. Returns a one-line verdict; raises
    ``AssertionError`` naming the first device that differs."""
    root = Path(tempfile.mkdtemp(prefix="gpusim-"))  # short: socket paths <= 107 bytes
    state = root / "state.json"
    state.write_text(json.dumps(fleet.node_state(node).to_dict()))
    log = root / "plugin.log"
    cmd = gpusim_plugin.local_command(binary, node, state, cp.kubeconfig, root)
    selector = urllib.parse.quote(f"spec.nodeName={node}")
    proc = gpusim_plugin.start_local(cmd, log)
    try:
        deadline = time.monotonic() + 60
        got: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not got:
            assert proc.poll() is None, f"plugin exited: {log.read_text()[-2000:]}"
            items = cp.get_json(f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector={selector}")
            got = [d for s in items["items"] for d in s["spec"].get("devices") or []]
            time.sleep(0.3)
        assert got, f"plugin published nothing in 60s: {log.read_text()[-2000:]}"
    finally:
        gpusim_plugin.stop(proc)
        subprocess.run(["rm", "-rf", str(root)], check=False)
    for g, e in zip(got, expected, strict=False):
        assert g == e, f"plugin device {g.get('name')} differs from the benchmark's: {g} != {e}"
    assert len(got) == len(expected), f"plugin published {len(got)} devices, not {len(expected)}"
    return f"the simulator's kubelet plugin published node {node}'s {len(got)} devices identically"


def set_gpu_label(cp: ControlPlane, nodes: Sequence[str], value: str | None) -> None:
    """Set (``"true"``) or remove (``None``) the GPU label on ``nodes``, concurrently; a
    setup step between measured runs, not measured."""
    from kubernetes import client

    body = {"metadata": {"labels": {fleet.GPU_LABEL: value}}}

    def patch(api_client: Any, node: str) -> None:
        client.CoreV1Api(api_client).patch_node(
            node, body, _content_type=writes.MERGE_PATCH, _preload_content=False
        )

    cp.create_objects_concurrently(list(nodes), patch, workers=8)


def labelled(cp: ControlPlane) -> set[str]:
    """Names of the nodes that carry the GPU label (one list)."""
    query = urllib.parse.urlencode({"labelSelector": f"{fleet.GPU_LABEL}=true"})
    return {n["metadata"]["name"] for n in cp.get_json(f"/api/v1/nodes?{query}")["items"]}
