"""What the client costs per page of a list, offline: decoding, trimming, storing and
walking pages of pods, ResourceClaims and ResourceSlices shaped as kube-apiserver serves
the scale benchmark's fleet.

The objects are ``tests.bench.fleet``'s, with what kube-apiserver and its clients add to
them: ``metadata.uid``, ``resourceVersion``, ``creationTimestamp`` and ``managedFields``
(one entry per writer), the defaults the API fills in (a pod's service account volume,
tolerations, ``dnsPolicy``...) and the status KWOK writes (a pod's conditions, container
statuses, IPs). A page of 2,000 such pods is about 12 MB of JSON.

Run ``python -m tests.bench.decode_pages`` (a few seconds per kind; ``--profile KIND``
prints the cProfile of that kind's page on the ``json`` path). It prints, per kind and
per decoder (``msgspec``, and the standard library's ``json`` that runs without it), the
seconds of one page's decoding and trimming, of storing it (``PagedList``) and of one
walk of it, the total with as many walks as validate and the report make, the stored
bytes and the most memory allocated while the page is decoded. ``--judge NODES`` times
validate's checks, the report and the MIG advice instead, on the stored listing of a
fleet of that many nodes (about 10 s of CPU for 1,000). No API server, no I/O.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import time
import tracemalloc
import uuid as uuidlib
from collections.abc import Callable
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client

from tests.bench import fleet
from tests.harness.component_flags import kwok_node_manifest

#: Items per page of each kind, as ``list_cluster`` asks for them.
PAGE_ITEMS = {"pods": 2000, "resourceclaims": 2000, "resourceslices": 500, "nodes": 1000}
#: Walks of each kind's stored pages by validate's checks with pending claims explained
#: and no device consuming counters (docs/scale.md; the unit test of the walks counts
#: them, ``test_validate_walks_the_stored_nodes_and_pods_once_per_fact``).
WALKS = {"pods": 1, "resourceclaims": 2, "resourceslices": 4, "nodes": 5}
STAMP = "2026-12-03T10:15:42Z"


def _uid(*parts: Any) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, "/".join(map(str, parts))))


def _managed(manager: str, fields: dict[str, Any], subresource: str = "") -> dict[str, Any]:
    entry = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": STAMP,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def served(obj: dict[str, Any], i: int, managed: list[dict[str, Any]]) -> dict[str, Any]:
    """``obj`` with the metadata kube-apiserver adds to every object it stores."""
    meta = obj["metadata"]
    meta["uid"] = _uid(obj["kind"], i)
    meta["resourceVersion"] = str(1_000_000 + 7 * i)
    meta["creationTimestamp"] = STAMP
    meta["managedFields"] = managed
    return obj


def pod(i: int) -> dict[str, Any]:
    """A workload pod of the fleet as listed: defaults, KWOK's status, managedFields."""
    plan = fleet.ClaimPlan(
        fleet.WORKLOAD_NAMESPACES[i % 10],
        f"claim-{i:05d}",
        f"job-{i:05d}",
        f"gpu-node-{i // 10}",
        "gpu-4",
        "gpu.nvidia.com",
        False,
        False,
    )
    out = fleet.workload_pod(plan)
    volume = f"kube-api-access-{_uid(i)[:5]}"
    spec = out["spec"]
    spec.update(
        {
            "volumes": [
                {
                    "name": volume,
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{t}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for t in ("not-ready", "unreachable")
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        }
    )
    spec["containers"][0].update(
        {
            "volumeMounts": [
                {
                    "name": volume,
                    "readOnly": True,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                }
            ],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }
    )
    ip = f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
    out["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": STAMP}
            for t in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            )
        ],
        "hostIP": ip,
        "hostIPs": [{"ip": ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": STAMP,
        "containerStatuses": [
            {
                "name": "main",
                "state": {"running": {"startedAt": STAMP}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": fleet.IMAGE,
                "imageID": "",
                "started": True,
            }
        ],
        "qosClass": "BestEffort",
    }
    f = {".": {}}
    spec_fields = {
        "f:containers": {
            'k:{"name":"main"}': {
                **f,
                "f:image": {},
                "f:imagePullPolicy": {},
                "f:name": {},
                "f:resources": {**f, "f:claims": {**f, 'k:{"name":"gpu"}': {**f, "f:name": {}}}},
                "f:terminationMessagePath": {},
                "f:terminationMessagePolicy": {},
            }
        },
        **{
            f"f:{k}": {}
            for k in (
                "dnsPolicy",
                "enableServiceLinks",
                "nodeName",
                "restartPolicy",
                "schedulerName",
                "securityContext",
                "terminationGracePeriodSeconds",
            )
        },
        "f:resourceClaims": {
            **f,
            'k:{"name":"gpu"}': {**f, "f:name": {}, "f:resourceClaimName": {}},
        },
    }
    status_fields = {
        "f:status": {
            "f:conditions": {
                f'k:{{"type":"{t}"}}': {
                    **f,
                    "f:lastProbeTime": {},
                    "f:lastTransitionTime": {},
                    "f:status": {},
                    "f:type": {},
                }
                for t in ("ContainersReady", "Initialized", "PodScheduled", "Ready")
            },
            **{
                f"f:{k}": {} for k in ("containerStatuses", "hostIP", "phase", "podIP", "startTime")
            },
            "f:podIPs": {**f, 'k:{"ip":"' + ip + '"}': {**f, "f:ip": {}}},
        }
    }
    managed = [
        _managed(
            "python-requests",
            {"f:metadata": {"f:labels": {**f, "f:app": {}}}, "f:spec": spec_fields},
        ),
        _managed("kwok", status_fields, "status"),
    ]
    return served(out, i, managed)


def claim(i: int) -> dict[str, Any]:
    """An allocated, reserved ResourceClaim of the fleet as listed: reserved for the pod
    ``pod(i)``, one in ``fleet.LEAK_EVERY`` for a pod that no longer exists."""
    plan = fleet.ClaimPlan(
        fleet.WORKLOAD_NAMESPACES[i % 10],
        f"claim-{i:05d}",
        f"job-{i:05d}",
        f"gpu-node-{i // 10}",
        f"gpu-{i % 8}",
        "gpu.nvidia.com",
        False,
        False,
    )
    out = fleet.claim_object(plan)
    request = out["spec"]["devices"]["requests"][0]["exactly"]
    request.update({"allocationMode": "ExactCount", "count": 1})
    # reserved for its pod (``pod(i)``), but 1 in ``fleet.LEAK_EVERY`` for a pod gone
    leaked = i % fleet.LEAK_EVERY == fleet.LEAK_EVERY - 1
    out["status"] = fleet.claim_status(plan, _uid("gone" if leaked else "Pod", i))
    out["status"]["allocation"]["allocationTimestamp"] = STAMP
    f = {".": {}}
    managed = [
        _managed(
            "python-requests",
            {
                "f:metadata": {"f:finalizers": {**f, f'v:"{fleet.FINALIZER}"': {}}},
                "f:spec": {"f:devices": {**f, "f:requests": {}}},
            },
        ),
        _managed(
            "python-requests",
            {"f:status": {**f, "f:allocation": {**f, "f:devices": {}}, "f:reservedFor": {}}},
            "status",
        ),
    ]
    for entry in managed:
        entry["apiVersion"] = fleet.RESOURCE_API
    return served(out, i, managed)


def resource_slice(i: int, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """One node's ResourceSlice of the fleet as listed."""
    node = f"gpu-node-{i}"
    out = fleet.resource_slice(node, _uid("node", i), devices)
    out["metadata"]["name"] = out["metadata"]["generateName"] + _uid(i)[:5]
    out["metadata"]["generation"] = 1
    f = {".": {}}
    managed = [
        _managed(
            "gpu-kubelet-plugin",
            {
                "f:metadata": {"f:generateName": {}, "f:ownerReferences": {**f}},
                "f:spec": {
                    "f:devices": {},
                    "f:driver": {},
                    "f:nodeName": {},
                    "f:pool": {**f, "f:generation": {}, "f:name": {}, "f:resourceSliceCount": {}},
                },
            },
        )
    ]
    managed[0]["apiVersion"] = fleet.RESOURCE_API
    return served(out, i, managed)


def node(i: int) -> dict[str, Any]:
    """A KWOK GPU node of the fleet as listed: KWOK's status (conditions, addresses),
    the node's labels and managedFields."""
    name = f"gpu-node-{i}"
    ip = f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
    conditions = [
        {
            "type": t,
            "status": "True" if t == "Ready" else "False",
            "lastHeartbeatTime": STAMP,
            "lastTransitionTime": STAMP,
            "reason": reason,
            "message": message,
        }
        for t, reason, message in (
            ("Ready", "KubeletReady", "kubelet is posting ready status"),
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("NetworkUnavailable", "RouteCreated", "RouteController created a route"),
        )
    ]
    out = kwok_node_manifest(
        name,
        kubelet_version="1.37.2",
        labels={fleet.GPU_LABEL: "true", "nvidia.com/gpu.product": "NVIDIA-H200"},
        allocatable={"ephemeral-storage": "1Ti"},
    )
    out["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] = "0"
    out["spec"] = {"podCIDR": f"10.244.{i % 256}.0/24", "podCIDRs": [f"10.244.{i % 256}.0/24"]}
    out["status"].update(
        {
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "phase": "Running",
        }
    )
    f = {".": {}}
    managed = [
        _managed(
            "python-requests",
            {
                "f:metadata": {
                    "f:labels": {**f, **{f"f:{k}": {} for k in out["metadata"]["labels"]}}
                }
            },
        ),
        _managed(
            "kwok",
            {
                "f:status": {
                    "f:conditions": {**f, **{f'k:{{"type":"{c["type"]}"}}': f for c in conditions}}
                }
            },
            "status",
        ),
    ]
    return served(out, i, managed)


def page(kind: str, start: int = 0) -> bytes:
    """One list answer of ``PAGE_ITEMS[kind]`` items of ``kind``, as JSON bytes."""
    count = PAGE_ITEMS[kind]
    if kind == "pods":
        items = [pod(start + i) for i in range(count)]
    elif kind == "resourceclaims":
        items = [claim(start + i) for i in range(count)]
    elif kind == "nodes":
        items = [node(start + i) for i in range(count)]
    else:
        devs = fleet.devices(fleet.node_state("gpu-node-0"))
        items = [resource_slice(start + i, json.loads(json.dumps(devs))) for i in range(count)]
    doc = {
        "kind": "List",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "1234567", "continue": "eyJ2IjoibWV0YTEifQ"},
        "items": items,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decoded(kind: str, data: bytes, fast: bool) -> list[Any]:
    """The trimmed items of one answer, as ``Kube.pages`` decodes them: by msgspec
    (``fast``) or by the standard library's ``json`` alone."""
    items: list[Any] = []
    module = client.msgspec
    if not fast:
        client.msgspec = None
    try:
        client.decode_list(data, items.append, listing.TRIMS[kind](), listing.SCHEMAS.get(kind))
    finally:
        client.msgspec = module
    return items


def stored(items: list[Any]) -> client.PagedList:
    out = client.PagedList()
    out.add_page(items)
    return out


def walk(pages: client.PagedList) -> int:
    """One walk of the stored pages (what a check's ``for`` costs before it reads)."""
    return sum(1 for _ in pages)


def timed(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def peak_mib(fn: Callable[[], Any]) -> float:
    """MiB allocated at most while ``fn`` runs (``tracemalloc``)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def measure(kind: str, data: bytes, fast: bool, repeat: int) -> dict[str, float]:
    t_dec, items = timed(lambda: decoded(kind, data, fast), repeat)
    t_store, pages = timed(lambda: stored(items), repeat)
    t_walk, _ = timed(lambda: walk(pages), repeat)
    return {
        "decode": t_dec,
        "store": t_store,
        "walk": t_walk,
        "total": t_dec + t_store + WALKS[kind] * t_walk,
        "stored_kb": pages.stored_bytes / 1e3,
        "peak_mib": peak_mib(lambda: decoded(kind, data, fast)),
    }


def stored_kind(kind: str, count: int, make: Callable[[int], Any]) -> client.PagedList:
    """``count`` objects ``make(i)`` listed as ``list_cluster`` lists them: pages of
    ``PAGE_ITEMS`` (1,000 for the others), each made, decoded, trimmed and stored in
    turn."""
    out = client.PagedList()
    size = PAGE_ITEMS.get(kind, 1000)
    trim = listing.TRIMS[kind]()
    for start in range(0, count, size):
        made = [make(i) for i in range(start, min(count, start + size))]
        data = json.dumps({"kind": "List", "metadata": {}, "items": made}, separators=(",", ":"))
        items: list[Any] = []
        client.decode_list(data.encode(), items.append, trim, listing.SCHEMAS.get(kind))
        out.add_page(items)
    return out


def pending_claim(i: int) -> dict[str, Any]:
    """``claim(i)`` not allocated: its pod ``pod(i)`` waits for it (the claim was made long
    before the judges' ``now``)."""
    out = claim(i)
    out["status"] = {}
    return out


def fleet_listing(nodes: int, pending: int = 0) -> listing.Listing:
    """The listing of a fleet of ``nodes`` GPU nodes: 10 claims and pods a node, one
    slice a node (plugin pods left out); the first ``pending`` claims not allocated, each
    with its pod waiting (validate's ``claims.pending`` explains each)."""
    devices = json.dumps(fleet.devices(fleet.node_state("gpu-node-0")))
    with client.gc_paused():
        return listing.Listing(
            version={"gitVersion": "v1.37.2"},
            resource_group={"versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]},
            resource_version="v1",
            pods=stored_kind("pods", nodes * 10, pod),
            claims=stored_kind(
                "resourceclaims",
                nodes * 10,
                lambda i: pending_claim(i) if i < pending else claim(i),
            ),
            slices=stored_kind(
                "resourceslices", nodes, lambda i: resource_slice(i, json.loads(devices))
            ),
            nodes=stored_kind("nodes", nodes, node),
            classes=fleet.device_classes(),
        )


def _rss_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))


def judge(nodes: int, pending: int = 0) -> None:
    """Seconds and peak memory (resident, above the stored listing) of validate's checks,
    the report and the MIG advice on the stored listing of ``nodes`` GPU nodes with
    ``pending`` claims a pod waits for (``fleet_listing``), the garbage collector paused as
    ``dra_validate``, ``gpufleet report`` and ``gpufleet mig advise`` pause it."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart
    from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as report
    from ansible_collections.gpufleet.cluster.plugins.module_utils.report import mig_advice
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster

    fleet_of = fleet_listing(nodes, pending)
    settings = listing.Settings(
        driver=chart.NVIDIA_DRIVER,
        device_classes=[*chart.GPU_DEVICE_CLASSES],
        gpu_nodes=[f"gpu-node-{i}" for i in range(nodes)],
        now=1.9e9,
    )
    runs = {
        "validate checks": lambda: cluster.all_checks(fleet_of, settings),
        "report": lambda: report.build_report(
            fleet_of.slices, fleet_of.claims, fleet_of.pods, fleet_of.nodes
        ),
        "mig advise": lambda: mig_advice.advise(
            fleet_of.slices, fleet_of.claims, fleet_of.pods, fleet_of.nodes
        ),
    }
    for name, run in runs.items():
        for kind in (fleet_of.pods, fleet_of.claims, fleet_of.slices, fleet_of.nodes):
            kind.forget()  # each command as in a process of its own: nothing derived kept
        gc.collect()
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")  # the peak resident size starts again from here
        before = _rss_kib("VmRSS")
        with client.gc_paused():
            t, cpu = time.perf_counter(), time.process_time()
            result = run()
            seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
        peak = (_rss_kib("VmHWM") - before) / 1024
        shown = ""
        if name == "validate checks":
            check = next(c for c in result if c.id == "claims.pending")
            shown = f"  claims.pending {check.status}: {str(check.evidence)[:100]}"
        print(
            f"{name:16} {nodes:6} nodes {seconds:7.2f} s ({cpu:.2f} s CPU)  "
            f"peak +{peak:.0f} MiB{shown}"
        )
        del result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=sorted(PAGE_ITEMS))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--judge", type=int, metavar="NODES", help="time the checks instead")
    parser.add_argument(
        "--pending", type=int, default=0, metavar="N", help="with --judge: N claims a pod waits for"
    )
    args = parser.parse_args()
    if client.msgspec is None:
        parser.error("msgspec is not installed: pip install msgspec")
    if args.judge:
        judge(args.judge, args.pending)
        return
    print(
        f"{'kind':15} {'items':>5} {'MB':>5} {'decoder':8} {'decode+trim':>11} {'store':>6} "
        f"{'walk':>6} {'walks':>5} {'total s':>7} {'stored KB':>9} {'peak MiB':>8}"
    )
    with client.gc_paused():
        for kind in PAGE_ITEMS:
            data = page(kind)
            if args.profile == kind:
                prof = cProfile.Profile()
                prof.runcall(decoded, kind, data, False)
                pstats.Stats(prof).sort_stats("tottime").print_stats(12)
            for fast in (False, True):
                m = measure(kind, data, fast, args.repeat)
                print(
                    f"{kind:15} {PAGE_ITEMS[kind]:5} {len(data) / 1e6:5.1f} "
                    f"{'msgspec' if fast else 'json':8} {m['decode']:11.3f} {m['store']:6.3f} "
                    f"{m['walk']:6.3f} {WALKS[kind]:5} {m['total']:7.3f} {m['stored_kb']:9.0f} "
                    f"{m['peak_mib']:8.1f}"
                )


if __name__ == "__main__":
    main()
