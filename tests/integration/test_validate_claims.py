"""Leaked claims, ``claims gc`` and ``claims explain`` against a real control plane.

The control plane runs without kube-controller-manager's resource claim controller and
garbage collector (``--controllers=*,...,-resourceclaim-controller,
-garbage-collector-controller``): the state a cluster is in while those controllers are
down or failing, which is when claims leak. The real kube-scheduler allocates devices of
ResourceSlices published for a KWOK node and reserves the claims for the pods; a pod is
then force-deleted, leaving its claim allocated and reserved for a pod that is gone.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc
from click.testing import CliRunner

from gpufleet.cli import main
from gpufleet.lab import gpusim_plugin
from tests.harness.controlplane import ControlPlane
from tests.integration.conftest import DEFAULT_VERSION

pytestmark = pytest.mark.integration

NS = "leak"
DRIVER = "gpu.nvidia.com"
CONTROLLERS = (
    "*,bootstrapsigner,tokencleaner,-resourceclaim-controller,-garbage-collector-controller"
)


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")


def device(name: str, uuid: str, profile: str | None = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "type": {"string": "mig" if profile else "gpu"},
        "uuid": {"string": uuid},
        "productName": {"string": "NVIDIA H200"},
        "driverVersion": {"version": "580.159.4"},
    }
    if profile:
        attrs["profile"] = {"string": profile}
    return {
        "name": name,
        "attributes": attrs,
        "capacity": {"memory": {"value": "16Gi" if profile else "143771Mi"}},
    }


def apply(cp: ControlPlane, objs: list[dict[str, Any]]) -> None:
    proc = subprocess.run(
        [str(cp.binaries.kubectl), f"--kubeconfig={cp.kubeconfig}", "apply", "-f", "-"],
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


def pod(name: str, claim: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "tolerations": [{"operator": "Exists"}],
            "resourceClaims": [{"name": "gpu", **claim}],
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


def claim_spec(class_name: str, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": class_name}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


@pytest.fixture(scope="module")
def cluster() -> Any:
    from tests.integration.conftest import require_binaries

    require_binaries(DEFAULT_VERSION)
    cp = ControlPlane(
        DEFAULT_VERSION, extra_args={"kube-controller-manager": {"controllers": CONTROLLERS}}
    )
    cp.start()
    try:
        (node,) = cp.start_kwok(1, labels={"nvidia.com/gpu.present": "true"}, name_prefix="gpu-")
        cp.wait_nodes_ready([node])
        classes = gpusim_plugin.device_classes()
        devices = [device("gpu-0", "GPU-0"), device("gpu-1", "GPU-1")]
        devices += [device(f"gpu-2-mig-1g18gb-19-{i}", f"MIG-{i}", "1g.18gb") for i in range(3)]
        rslice = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
        cp.create_namespace(NS)
        apply(cp, [*classes, rslice])
        yield cp, node
    finally:
        cp.stop()


def get_claim(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    proc = cp.kubectl("-n", NS, "get", "resourceclaim", name, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def run_cli(cp: ControlPlane, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*args, "--kubeconfig", str(cp.kubeconfig)])
    return result.exit_code, result.output


def test_leak_detected_then_released_by_gc(cluster: Any) -> None:
    cp, _ = cluster
    # "generated" gets a claim shaped as the resource claim controller generates them
    # (controller ownerReference to its pod): that controller is off here.
    apply(
        cp,
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "train", "namespace": NS},
                "spec": claim_spec("gpu.nvidia.com"),
            },
            pod("trainer", {"resourceClaimName": "train"}),
            pod("generated", {"resourceClaimName": "generated-gpu-x7k2q"}),
        ],
    )
    owner = json.loads(cp.kubectl("-n", NS, "get", "pod", "generated", "-o", "json").stdout)
    apply(
        cp,
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": "generated-gpu-x7k2q",
                    "namespace": NS,
                    "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": "generated",
                            "uid": owner["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": claim_spec("gpu.nvidia.com"),
            }
        ],
    )
    for name in ("train", "generated-gpu-x7k2q"):
        wait_for(
            f"claim {name} allocated and reserved",
            lambda name=name: (
                (c := get_claim(cp, name))
                and c["status"].get("allocation")
                and c["status"].get("reservedFor")
            ),
        )
    gen = get_claim(cp, "generated-gpu-x7k2q")
    for p in ("trainer", "generated"):
        cp.kubectl("-n", NS, "delete", "pod", p, "--grace-period=0", "--force")

    # validate: one listing, the leak found with the right id
    kube = vk.Kube(str(cp.kubeconfig))
    start = time.monotonic()
    listing = vli.list_cluster(kube)
    elapsed = time.monotonic() - start
    checks = {
        c.id: c
        for c in vc.claims_checks(
            listing,
            vli.Settings(
                driver=ddc.NVIDIA_DRIVER, device_classes=[*ddc.GPU_DEVICE_CLASSES], now=time.time()
            ),
        )
    }
    leaked = checks["claims.leaked"]
    assert leaked.status == "fail"
    kinds = {p.subject: p.message for p in leaked.problems}
    assert kinds[f"{NS}/train"].startswith("[dead-reservation]")
    assert (
        f"pod {NS}/trainer" in kinds[f"{NS}/train"] and "no longer exists" in kinds[f"{NS}/train"]
    )
    assert f"{NS}/{gen['metadata']['name']}" in kinds
    assert kube.requests <= 12, kube.log
    print(f"\nlist_cluster: {kube.requests} requests in {elapsed:.2f}s")

    # gc dry run changes nothing
    code, out = run_cli(cp, "claims", "gc", "--json")
    assert code == 0, out
    plan = {c["claim"]: c for c in json.loads(out)["claims"]}
    assert plan[f"{NS}/train"]["action"] == "release" and not plan[f"{NS}/train"]["applied"]
    assert plan[f"{NS}/{gen['metadata']['name']}"]["action"] == "delete"
    assert get_claim(cp, "train")["status"].get("allocation")

    # gc --apply releases the standalone claim and deletes the generated one
    code, out = run_cli(cp, "claims", "gc", "--apply", "--json")
    assert code == 0, out
    after = get_claim(cp, "train")
    assert not after["status"].get("allocation")
    assert not after["status"].get("reservedFor")
    assert "resource.kubernetes.io/delete-protection" not in (
        after["metadata"].get("finalizers") or []
    )
    wait_for(
        "the generated claim deleted", lambda: get_claim(cp, gen["metadata"]["name"]) is None, 30
    )
    listing = vli.list_cluster(vk.Kube(str(cp.kubeconfig)))
    assert {
        c.id: c
        for c in vc.claims_checks(
            listing,
            vli.Settings(
                driver=ddc.NVIDIA_DRIVER, device_classes=[*ddc.GPU_DEVICE_CLASSES], now=time.time()
            ),
        )
    }["claims.leaked"].status == "pass"


def test_gc_never_releases_a_claim_of_a_live_pod(cluster: Any) -> None:
    cp, _ = cluster
    apply(
        cp,
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "serving", "namespace": NS},
                "spec": claim_spec("gpu.nvidia.com"),
            },
            pod("server", {"resourceClaimName": "serving"}),
        ],
    )
    wait_for(
        "claim serving reserved",
        lambda: (c := get_claim(cp, "serving")) and c["status"].get("reservedFor"),
    )
    code, out = run_cli(cp, "claims", "gc", "--apply", "--json")
    assert code == 0, out
    assert f"{NS}/serving" not in {
        c["claim"] for c in json.loads(out)["claims"] if c["action"] != "skip"
    }
    assert get_claim(cp, "serving")["status"].get("allocation")
    cp.kubectl("-n", NS, "delete", "pod", "server", "--grace-period=0", "--force")


def test_explain_names_the_failing_selector_of_a_pending_claim(cluster: Any) -> None:
    cp, _ = cluster
    selector = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    apply(
        cp,
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "small", "namespace": NS},
                "spec": claim_spec("mig.nvidia.com", selector),
            },
            pod("inference", {"resourceClaimName": "small"}),
        ],
    )
    wait_for(
        "the scheduler to give up on the pod",
        lambda: any(
            c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in json.loads(
                cp.kubectl("-n", NS, "get", "pod", "inference", "-o", "json").stdout
            )["status"].get("conditions")
            or []
        ),
    )
    code, out = run_cli(cp, "claims", "explain", f"{NS}/small", "--json")
    assert code == 1, out
    ex = json.loads(out)
    assert ex["verdict"] == "no-device"
    (req,) = ex["requests"]
    assert (req["total"], req["matching"]) == (5, 0)
    assert req["reasons"] == [
        ["profile is 1g.18gb, wanted 1g.10gb", 3],
        ["class mig.nvidia.com: type is gpu, wanted mig", 2],
    ]
    assert "0 of 5 devices match" in ex["summary"]
    # the selectors are judged for the release the API server reports
    assert ex["kubernetesVersion"] == DEFAULT_VERSION
    assert ex["kubernetesVersionSource"] == "GET /version"
    assert DEFAULT_VERSION in ex["celJudgedBy"]
    assert ex["pods"][0]["pod"] == f"{NS}/inference" and ex["pods"][0]["scheduler"]
    code, text = run_cli(cp, "claims", "explain", f"{NS}/small")
    assert code == 1
    assert "profile is 1g.18gb, wanted 1g.10gb" in " ".join(text.split())
    # and the pending check of validate explains it too, once past the threshold
    listing = vli.list_cluster(vk.Kube(str(cp.kubeconfig)))
    checks = {
        c.id: c
        for c in vc.claims_checks(
            listing,
            vli.Settings(
                driver=ddc.NVIDIA_DRIVER,
                device_classes=[*ddc.GPU_DEVICE_CLASSES],
                now=time.time(),
                pending_threshold_s=0,
            ),
        )
    }
    msgs = [p.message for p in checks["claims.pending"].problems if p.subject == f"{NS}/small"]
    assert msgs and "profile is 1g.18gb, wanted 1g.10gb (3)" in msgs[0]
    cp.kubectl("-n", NS, "delete", "pod", "inference", "--grace-period=0", "--force")


def test_a_claim_that_failed_at_prepare_is_reported_with_the_kubelets_text(cluster) -> None:
    """A kubelet Event FailedPrepareDynamicResources, as NVIDIA's plugin makes the kubelet
    report it for a driver root whose dev/ is empty, is found by the one Events LIST of
    validate and reported with the node, the pod, the kubelet's text and the fix."""
    cp, node = cluster
    apply(cp, [pod("prep", {"resourceClaimName": "prep-claim"})])
    text = (
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
        "failed for ResourceClaim prep-claim: unable to create CDI spec file for claim: "
        "invalid device, empty device edits"
    )
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "prep.failed", "namespace": NS},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": "prep", "apiVersion": "v1"},
        "reason": "FailedPrepareDynamicResources",
        "message": text,
        "type": "Warning",
        "source": {"component": "kubelet", "host": node},
        "count": 3,
        "firstTimestamp": "2026-12-02T10:00:00Z",
        "lastTimestamp": "2026-12-02T10:05:00Z",
    }
    apply(cp, [event])
    kube = vk.Kube(str(cp.kubeconfig))
    listing = vli.list_cluster(kube)
    check = vc.prepare_failed_check(listing)
    assert check.status == "fail", check
    (problem,) = [p for p in check.problems if f"pod {NS}/prep:" in p.message]
    assert problem.subject == node and "empty device edits" in problem.message, problem
    assert "hosts.driver-root" in check.fix, check
    cp.kubectl("-n", NS, "delete", "pod", "prep", "--grace-period=0", "--force")


def test_explain_agrees_with_the_schedulers_event_on_a_claim_no_device_matches(
    cluster: Any,
) -> None:
    """kube-scheduler finds no device for a claim whose selector no published device
    meets (its Event FailedScheduling: "cannot allocate all claims", the DRA plugin's
    Filter verdict); ``claims explain`` says the same and names the selector."""
    cp, _ = cluster
    selector = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"
    apply(
        cp,
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "b200", "namespace": NS},
                "spec": claim_spec("gpu.nvidia.com", selector),
            },
            pod("b200-job", {"resourceClaimName": "b200"}),
        ],
    )

    def scheduler_event() -> str:
        events = json.loads(
            cp.kubectl(
                "-n",
                NS,
                "get",
                "events",
                "--field-selector",
                "involvedObject.kind=Pod,involvedObject.name=b200-job,reason=FailedScheduling",
                "-o",
                "json",
            ).stdout
        )["items"]
        return events[-1]["message"] if events else ""

    event = wait_for("kube-scheduler's FailedScheduling Event", scheduler_event)
    assert "cannot allocate all claims" in event, event
    code, out = run_cli(cp, "claims", "explain", f"{NS}/b200", "--json")
    assert code == 1, out
    ex = json.loads(out)
    assert ex["verdict"] == "no-device"
    (req,) = ex["requests"]
    assert (req["total"], req["matching"]) == (5, 0)
    # the class's selector takes the MIG devices out, the request's selector the GPUs
    assert [(s["selector"], s["rejects"]) for s in req["selectors"]] == [
        ("class gpu.nvidia.com selector #0", 3),
        ("request selector #0", 2),
    ]
    assert req["selectors"][1]["expression"] == selector
    assert req["reasons"] == [
        ["class gpu.nvidia.com: type is mig, wanted gpu", 3],
        ["productName is NVIDIA H200, wanted NVIDIA B200", 2],
    ]
    assert f"request selector #0 {selector!r} (2)" in ex["summary"]
    # the pod's PodScheduled condition, which explain quotes, carries the Event's verdict
    (user,) = ex["pods"]
    assert user["pod"] == f"{NS}/b200-job"
    assert "cannot allocate all claims" in user["scheduler"]
    code, text = run_cli(cp, "claims", "explain", f"{NS}/b200")
    assert code == 1
    assert selector in " ".join(text.split())
    cp.kubectl("-n", NS, "delete", "pod", "b200-job", "--grace-period=0", "--force")
