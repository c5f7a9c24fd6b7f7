"""``gpufleet validate`` on a running lab: a clean lab passes, and faults injected for real
are caught by the check whose id names them.

Needs a lab (``gpufleet lab up``; set ``GPUFLEET_LAB_NAME``/``GPUFLEET_LAB_SUBNET`` for a
lab of one's own) with at least two GPU workers; skipped otherwise. Every fault is undone
after its check, so the tests leave the lab as they found it. Faults:

* a GPU node unlabeled (``kubectl label node ... nvidia.com/gpu.present-``);
* the kubelet plugin stopped on one node (a DaemonSet nodeSelector that excludes it);
* another driver version on one simulated GPU (``gpusim set --driver-version``);
* a leaked claim: kube-controller-manager stopped (its static pod manifest moved away),
  a pod with an allocated claim force-deleted; ``claims gc --apply`` releases it;
* a claim no device matches (explained: the failing selector is named);
* a kubelet feature gate drifted on one worker (``/var/lib/kubelet/config.yaml``);
* a kubelet of the previous release on one GPU worker (its binary swapped).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import gpu as nvidia_gpu

from gpufleet.build import binaries, release_pins
from gpufleet.lab import cluster

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GPUFLEET = str(Path(sys.executable).parent / "gpufleet")
TIMINGS: dict[str, float] = {}
PLUGIN_SELECTOR = "app.kubernetes.io/component=kubelet-plugin"


class Lab:
    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state
        self.kubeconfig = str(cluster.kubeconfig_path())
        self.kubectl_bin = str(
            Path(state["vars"]["kubeadm_binaries_dir"]) / "kubectl"
            if (Path(state["vars"]["kubeadm_binaries_dir"]) / "kubectl").exists()
            else "kubectl"
        )
        nodes = state["nodes"]
        self.control_plane = next(n["name"] for n in nodes if n["role"] == "control-plane")
        self.workers = [n["name"] for n in nodes if n["role"] == "gpu-worker"]
        self.tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"validate-{cluster.lab_name()}"
        self.tmp.mkdir(parents=True, exist_ok=True)

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> str:
        proc = subprocess.run(
            [self.kubectl_bin, f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def exec(self, node: str, *argv: str) -> str:
        proc = subprocess.run(
            ["podman", "exec", node, *argv], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, f"{node}: {' '.join(argv)}: {proc.stderr}"
        return proc.stdout

    def validate(self, name: str, *extra: str) -> tuple[int, dict[str, Any], str]:
        out = self.tmp / f"{name}.json"
        junit = self.tmp / f"{name}.xml"
        start = time.monotonic()
        proc = subprocess.run(
            [
                GPUFLEET,
                "validate",
                "-i",
                str(REPO / "inventory" / "lab"),
                *("--json", str(out), "--junit", str(junit)),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
        )
        TIMINGS[name] = time.monotonic() - start
        report = json.loads(out.read_text()) if out.is_file() else {}
        return proc.returncode, report, proc.stdout + proc.stderr

    def wait(self, what: str, probe: Callable[[], Any], timeout_s: float = 180) -> Any:
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            try:
                last = probe()
            except AssertionError as err:
                last = str(err)
                continue
            if last and not isinstance(last, str):
                return last
            time.sleep(2)
        raise AssertionError(f"timed out after {timeout_s}s waiting for {what}: {last!r}")

    def ensure_images(self) -> None:
        """Import the lab's worker images again where containerd lost them: the kubelet's
        image garbage collection removes unused images when it sees its image filesystem
        above ``imageGCHighThresholdPercent`` (85%), which a shared disk reaches, and the
        plugin and test images are pulled with ``Never``."""
        for node in self.workers:
            have = self.exec(node, "ctr", "--namespace", "k8s.io", "images", "list", "--quiet")
            for image in self.state["vars"].get("lab_images_worker") or []:
                if image["ref"] in have.split():
                    continue
                subprocess.run(
                    ["podman", "cp", image["path"], f"{node}:/tmp/lab-image.tar"], check=True
                )
                self.exec(
                    node, "ctr", "--namespace", "k8s.io", "images", "import", "/tmp/lab-image.tar"
                )
                self.exec(node, "rm", "-f", "/tmp/lab-image.tar")
                # a plugin pod in image back-off would wait minutes for its next try
                self.kubectl(
                    "delete",
                    "pods",
                    "-A",
                    "-l",
                    PLUGIN_SELECTOR,
                    "--field-selector",
                    f"spec.nodeName={node},status.phase!=Running",
                    check=False,
                )

    def namespace(self, ns: str) -> None:
        """Create ``ns`` and wait for its ``default`` ServiceAccount (pods are refused
        until kube-controller-manager has made it)."""
        self.kubectl("create", "namespace", ns)
        self.wait(
            f"serviceaccount {ns}/default",
            lambda: bool(self.kubectl("-n", ns, "get", "serviceaccount", "default", check=False)),
        )

    def kcm_running(self) -> bool:
        """A kube-controller-manager process runs on the control plane (argv[0], as the
        static pod starts it; ``comm`` would be cut to 15 characters)."""
        args = self.exec(self.control_plane, "ps", "-eo", "args")
        return any(line.startswith("kube-controller-manager ") for line in args.splitlines())

    def plugin_running(self) -> bool:
        pods = json.loads(self.kubectl("get", "pods", "-A", "-l", PLUGIN_SELECTOR, "-o", "json"))
        running = {
            p["spec"].get("nodeName")
            for p in pods["items"]
            if p["status"].get("phase") == "Running"
            and all(c.get("ready") for c in p["status"].get("containerStatuses") or [])
        }
        return set(self.workers) <= running

    def node_ready(self, node: str) -> bool:
        ready = 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'
        return "True" in self.kubectl("get", "node", node, "-o", ready)

    def kubelet_version(self, node: str) -> str:
        return self.kubectl("get", "node", node, "-o", "jsonpath={.status.nodeInfo.kubeletVersion}")

    def published_driver_versions(self, node: str) -> set[str]:
        """The ``driverVersion`` attributes the node's ResourceSlices publish."""
        slices = json.loads(self.kubectl("get", "resourceslices", "-o", "json"))
        return {
            str(d["attributes"]["driverVersion"].get("version"))
            for s in slices["items"]
            if s["spec"].get("nodeName") == node
            for d in s["spec"].get("devices") or []
            if "driverVersion" in (d.get("attributes") or {})
        }

    def slices_published(self) -> bool:
        """Every worker has a ResourceSlice again (the plugin republishes them after its
        kubelet restarts)."""
        slices = json.loads(self.kubectl("get", "resourceslices", "-o", "json"))
        return set(self.workers) <= {s["spec"].get("nodeName") for s in slices["items"]}

    def settle(self) -> None:
        """Wait until the kubelet plugin runs on every worker and its slices are back."""
        self.wait("the kubelet plugin on every node", self.plugin_running)
        self.wait("ResourceSlices on every node", self.slices_published)


def version_key(version: str) -> tuple[int, int, int, bool, str]:
    """Release order: a pre-release ("1.38.0-beta.0") sorts below its release."""
    v = core.parse_version(version)
    return (v.major, v.minor, v.patch or 0, v.pre is None, v.pre or "")


def checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in report.get("checks") or []}


def failed_checks(report: dict[str, Any]) -> dict[str, Any]:
    """The failed checks with their problems, for an assertion message."""
    return {
        c["id"]: {"summary": c["summary"], "problems": c.get("problems")}
        for c in report.get("checks") or []
        if c["status"] == "fail"
    }


def subjects(report: dict[str, Any], check_id: str) -> set[str]:
    return {p["subject"] for p in checks(report)[check_id]["problems"] if p["status"] == "fail"}


@pytest.fixture(scope="module")
def lab(lab) -> Iterator[Lab]:
    """The session's lab (tests/lab/conftest.py), seen through this module's helpers."""
    try:
        state = cluster.load_state()
    except cluster.LabError as err:
        pytest.skip(f"no usable lab: {err}")
    if not state or not cluster.kubeconfig_path().is_file():
        pytest.skip(
            f"no lab named {cluster.lab_name()!r}: run `gpufleet lab up` (GPUFLEET_LAB_NAME, "
            "GPUFLEET_LAB_SUBNET select one's own)"
        )
    lab = Lab(state)
    if len(lab.workers) < 2:
        pytest.skip("the fault tests need a lab with two GPU workers (gpufleet lab up --workers 2)")
    lab.ensure_images()
    lab.settle()
    yield lab
    print("\nvalidate timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in TIMINGS.items()))


#: Every check ``gpufleet validate`` reports without ``--smoke`` (plugins/module_utils/
#: validate/: versions, gates, api, nodes, hosts; the claims checks read claims/).
CLEAN_LAB_CHECKS = {
    "versions.apiserver-skew",
    "versions.kubelet-skew",
    "versions.gpu-kubelet-lockstep",
    "versions.known-bad",
    "versions.container-runtime",
    "versions.packages-held",
    "gates.component-drift",
    "gates.model",
    "gates.coverage",
    "api.resource-versions",
    "api.deviceclasses",
    "api.scheduler-dynamicresources",
    "nodes.gpu-labels",
    "nodes.plugin-running",
    "nodes.resourceslices",
    "nodes.orphan-slices",
    "hosts.driver-version",
    "hosts.toolkit",
    "hosts.containerd-cdi",
    "hosts.cdi-gpus",
    "hosts.driver-root",
    "hosts.cdi-hook",
    "hosts.plugin-sockets",
    "claims.prepare-failed",
    "claims.leaked",
    "claims.pending",
}

#: The checks that skip on a clean lab, with (the start of) the reason validate gives; every
#: other check must pass.
CLEAN_LAB_SKIPS = {
    # inventory/lab installs kubeadm and kubelet as binaries (kubeadm_install_method:
    # binaries): there are no packages to hold
    "versions.packages-held": "kubeadm and kubelet are not installed from packages on any host",
    # the GPUs are simulated: the nodes have no NVIDIA Container Toolkit or nvidia runtime
    "hosts.toolkit": "every GPU node has a simulated GPU",
    # no toolkit, so no toolkit CDI spec to judge (the simulator's plugin writes per-claim
    # specs)
    "hosts.cdi-gpus": "no GPU node has the NVIDIA Container Toolkit",
    # no NVIDIA driver under any root: the simulator answers nvidia-smi (hosts.cdi-hook is
    # judged: the lab's GPU nodes carry NVIDIA's real hook, which the simulator's specs call)
    "hosts.driver-root": "every GPU node has a simulated GPU",
    # inventory/lab puts every GPU node on DRA: no pool uses NVIDIA's device plugin
    "nodes.device-plugin-gpus": "no GPU node of the inventory is on the device-plugin path",
    # the lab's simulator publishes pre-carved MIG devices unless `lab up --dynamic-mig`
    "nodes.dynamic-mig-counters": "no node publishes dynamic MIG devices (no CounterSet)",
    "nodes.dynamic-mig-leftover-gi": "no node publishes dynamic MIG devices (no CounterSet)",
}


def test_clean_lab_passes(lab: Lab) -> None:
    code, report, out = lab.validate("clean")
    assert code == 0, f"{failed_checks(report)}\n{out[-3000:]}"
    found = checks(report)
    assert set(found) >= CLEAN_LAB_CHECKS, sorted(CLEAN_LAB_CHECKS - set(found))
    not_as_expected = {}
    for check_id, check in found.items():
        if check_id in CLEAN_LAB_SKIPS:
            reason = check.get("reason") or ""
            if check["status"] != "skip" or not reason.startswith(CLEAN_LAB_SKIPS[check_id]):
                not_as_expected[check_id] = (check["status"], reason or check["summary"])
        elif check["status"] != "pass":
            not_as_expected[check_id] = (
                check["status"],
                check.get("reason") or check.get("problems") or check["summary"],
            )
    assert not not_as_expected, not_as_expected
    assert report["meta"]["api_requests"] <= 20, report["meta"]["api_request_log"]
    assert (lab.tmp / "clean.xml").read_text().startswith("<?xml")


def test_unlabeled_gpu_node_is_caught(lab: Lab) -> None:
    node = lab.workers[-1]
    lab.kubectl("label", "node", node, "nvidia.com/gpu.present-")
    try:
        code, report, _ = lab.validate("unlabeled")
        assert code == 1
        assert subjects(report, "nodes.gpu-labels") == {node}
    finally:
        lab.kubectl("label", "node", node, "nvidia.com/gpu.present=true", "--overwrite")
        lab.ensure_images()
        lab.wait("the kubelet plugin back on every node", lab.plugin_running)


def test_plugin_stopped_on_one_node_is_caught(lab: Lab) -> None:
    ds = json.loads(lab.kubectl("get", "daemonsets", "-A", "-l", PLUGIN_SELECTOR, "-o", "json"))
    if not ds["items"]:
        ds = json.loads(lab.kubectl("get", "daemonsets", "-A", "-o", "json"))
        ds["items"] = [
            d
            for d in ds["items"]
            if d["spec"]["template"]["metadata"]
            .get("labels", {})
            .get("app.kubernetes.io/component")
            == "kubelet-plugin"
        ]
    (d,) = ds["items"]
    ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
    keep, stop = lab.workers[0], lab.workers[-1]
    patch = {"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": keep}}}}}
    lab.kubectl("-n", ns, "patch", "daemonset", name, "--type=merge", "-p", json.dumps(patch))
    try:
        lab.wait(
            f"the plugin pod gone from {stop}",
            lambda: (
                stop
                not in lab.kubectl(
                    "get", "pods", "-A", "-l", PLUGIN_SELECTOR, "-o", "jsonpath={..nodeName}"
                )
            ),
        )
        code, report, _ = lab.validate("plugin-stopped")
        assert code == 1
        assert subjects(report, "nodes.plugin-running") == {stop}
    finally:
        unpatch = {"spec": {"template": {"spec": {"nodeSelector": None}}}}
        lab.kubectl("-n", ns, "patch", "daemonset", name, "--type=merge", "-p", json.dumps(unpatch))
        lab.ensure_images()
        lab.wait("the kubelet plugin back on every node", lab.plugin_running)


def test_other_driver_version_on_one_node_is_caught(lab: Lab) -> None:
    node = lab.workers[-1]
    before = lab.exec(node, "nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
    lab.exec(node, "gpusim", "set", "--driver-version", "570.0.0")
    try:
        code, report, _ = lab.validate("driver-version")
        assert code == 1
        assert subjects(report, "hosts.driver-version") == {node}
        msg = next(p["message"] for p in checks(report)["hosts.driver-version"]["problems"])
        assert "driver 570.0.0" in msg
    finally:
        release = before.strip().splitlines()[0]
        lab.exec(node, "gpusim", "set", "--driver-version", release)
        # the plugin exits on a driver release it did not start with and is started again
        # (the real one must re-read the GPUs): wait until it publishes the release again
        lab.wait(
            f"{node}'s kubelet plugin publishing driver {release} again",
            lambda: lab.published_driver_versions(node) == {nvidia_gpu.semver(release)},
        )
        lab.wait("the kubelet plugin back on every node", lab.plugin_running)


def test_leaked_claim_is_caught_and_released_by_gc(lab: Lab) -> None:
    lab.ensure_images()
    ns = "validate-leak"
    image = lab.state["vars"].get("lab_smoke_image", "localhost/gpufleet/busybox:1")
    lab.namespace(ns)
    objs = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "train", "namespace": ns},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": ns},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "tolerations": [{"operator": "Exists"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "train"}],
                "containers": [
                    {
                        "name": "c",
                        "image": image,
                        "imagePullPolicy": "Never",
                        "command": ["/bin/busybox", "sleep", "3600"],
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
            },
        },
    ]
    lab.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
    )
    manifest = "/etc/kubernetes/manifests/kube-controller-manager.yaml"
    parked = "/etc/kubernetes/kube-controller-manager.yaml.parked"
    try:
        lab.wait(
            "claim train reserved",
            lambda: json.loads(
                lab.kubectl("-n", ns, "get", "resourceclaim", "train", "-o", "json")
            )["status"].get("reservedFor"),
        )
        lab.exec(lab.control_plane, "mv", manifest, parked)
        lab.wait("kube-controller-manager stopped", lambda: not lab.kcm_running())
        lab.kubectl("-n", ns, "delete", "pod", "trainer", "--grace-period=0", "--force")
        code, report, _ = lab.validate("leak")
        assert code == 1
        assert f"{ns}/train" in subjects(report, "claims.leaked")
        gc = subprocess.run(
            [GPUFLEET, "claims", "gc", "--apply", "--json", "--kubeconfig", lab.kubeconfig],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert gc.returncode == 0, gc.stdout + gc.stderr
        after = json.loads(lab.kubectl("-n", ns, "get", "resourceclaim", "train", "-o", "json"))
        assert not after["status"].get("allocation")
        assert not after["status"].get("reservedFor")
    finally:
        lab.exec(lab.control_plane, "sh", "-c", f"test ! -e {parked} || mv {parked} {manifest}")
        lab.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        lab.wait("kube-controller-manager back", lab.kcm_running)


def test_unmatchable_claim_is_explained(lab: Lab) -> None:
    ns = "validate-pending"
    image = lab.state["vars"].get("lab_smoke_image", "localhost/gpufleet/busybox:1")
    selector = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('200Gi')) >= 0"
    lab.namespace(ns)
    objs = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "huge", "namespace": ns},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "selectors": [{"cel": {"expression": selector}}],
                            },
                        }
                    ]
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "waiter", "namespace": ns},
            "spec": {
                "tolerations": [{"operator": "Exists"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "huge"}],
                "containers": [
                    {
                        "name": "c",
                        "image": image,
                        "imagePullPolicy": "Never",
                        "command": ["/bin/busybox", "true"],
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
            },
        },
    ]
    try:
        lab.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}),
        )
        code, report, _ = lab.validate("pending", "-e", "validate_pending_threshold=0")
        assert code == 1
        (problem,) = [
            p for p in checks(report)["claims.pending"]["problems"] if p["subject"] == f"{ns}/huge"
        ]
        assert "0 of " in problem["message"] and "devices match" in problem["message"]
        assert "memory is 143771Mi, wanted >= 200Gi" in problem["message"]
        ex = subprocess.run(
            [GPUFLEET, "claims", "explain", f"{ns}/huge", "--json", "--kubeconfig", lab.kubeconfig],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ex.returncode == 1, ex.stderr
        result = json.loads(ex.stdout)
        assert result["verdict"] == "no-device"
        assert result["requests"][0]["reasons"][0][0] == "memory is 143771Mi, wanted >= 200Gi"
    finally:
        lab.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_kubelet_gate_drift_on_one_worker_is_caught(lab: Lab) -> None:
    node = lab.workers[-1]
    config = "/var/lib/kubelet/config.yaml"
    backup = "/var/lib/kubelet/config.yaml.validate-test"
    lab.exec(node, "cp", "-p", config, backup)
    script = (
        "import yaml,sys; p=sys.argv[1]; d=yaml.safe_load(open(p)); "
        "d.setdefault('featureGates', {})['ResourceHealthStatus']=False; "
        "open(p,'w').write(yaml.safe_dump(d))"
    )
    try:
        lab.exec(node, "python3", "-c", script, config)
        lab.exec(node, "systemctl", "restart", "kubelet")
        lab.wait(f"the kubelet of {node} Ready again", lambda: lab.node_ready(node))
        code, report, _ = lab.validate("gate-drift")
        assert code == 1
        drift = checks(report)["gates.component-drift"]
        assert drift["status"] == "fail"
        assert any(
            p["subject"] == f"{node} kubelet" and "ResourceHealthStatus" in p["message"]
            for p in drift["problems"]
        ), drift["problems"]
    finally:
        lab.exec(node, "mv", backup, config)
        lab.exec(node, "systemctl", "restart", "kubelet")
        lab.wait(f"the kubelet of {node} Ready again", lambda: lab.node_ready(node))
        lab.settle()


def test_kubelet_on_another_version_is_caught(lab: Lab) -> None:
    """One GPU worker's kubelet binary swapped for the newest older release's in the
    binaries cache: the GPU nodes are no longer in lockstep, and the skew policy judges
    that kubelet by how far behind the kube-apiserver it is (at most 3 minors is legal;
    the ci build profile has 1.33.13's kubelet beside 1.37.2, 4 minors apart)."""
    ours = str(lab.state["spec"]["kubernetes_version"]).lstrip("v")
    older = [
        r.version
        for r in release_pins.load_releases().releases
        if binaries.binary_path("kubelet", r.version).is_file()
        and version_key(r.version) < version_key(ours)
    ]
    if not older:
        pytest.skip(f"no kubelet of a release older than {ours} in the binaries cache")
    other = max(older, key=version_key)
    node = lab.workers[0]
    kubelet = "/usr/bin/kubelet"
    backup = "/usr/bin/kubelet.validate-test"
    cached = binaries.binary_path("kubelet", other).relative_to(binaries.cache_root())
    in_node = f"{cluster.NODE_CACHE}/{cached}"
    lab.exec(node, "cp", "-p", kubelet, backup)
    try:
        lab.exec(node, "install", "-m", "0755", in_node, kubelet)
        lab.exec(node, "systemctl", "restart", "kubelet")
        lab.wait(
            f"the kubelet of {node} reporting v{other}",
            lambda: lab.kubelet_version(node) == f"v{other}",
        )
        code, report, _ = lab.validate("kubelet-version")
        assert code == 1
        lockstep = checks(report)["versions.gpu-kubelet-lockstep"]
        assert lockstep["status"] == "fail", lockstep
        assert subjects(report, "versions.gpu-kubelet-lockstep") == {node}
        skew = checks(report)["versions.kubelet-skew"]
        behind = core.parse_version(ours).minor - core.parse_version(other).minor
        if behind <= 3:
            assert skew["status"] == "pass", skew
        else:
            assert skew["status"] == "fail", skew
            assert subjects(report, "versions.kubelet-skew") == {node}
            messages = [p["message"] for p in skew["problems"]]
            assert any("at most 3 minor(s) older" in m for m in messages), messages
    finally:
        lab.exec(node, "mv", backup, kubelet)
        lab.exec(node, "systemctl", "restart", "kubelet")
        lab.wait(
            f"the kubelet of {node} back on v{ours}",
            lambda: lab.kubelet_version(node) == f"v{ours}",
        )
        lab.settle()


def test_smoke_gets_a_gpu_and_cleans_up(lab: Lab) -> None:
    lab.ensure_images()
    lab.settle()
    code, report, out = lab.validate("smoke", "--smoke")
    smoke = {i: c for i, c in checks(report).items() if i.startswith("smoke.")}
    assert smoke, out[-2000:]
    for c in smoke.values():
        assert c["status"] == "pass", c
        assert any(e["source"] == "cleanup" and "deleted" in e["detail"] for e in c["evidence"])
        log = next(e["detail"] for e in c["evidence"] if e["source"] == "pod log")
        assert "NVIDIA_VISIBLE_DEVICES=" in log
    assert code == 0, f"{failed_checks(report)}\n{out[-3000:]}"
