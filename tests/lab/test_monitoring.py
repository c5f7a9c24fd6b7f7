"""The monitoring role on a running lab: a real Prometheus (built from
github.com/prometheus/prometheus, run by the role as ``gpufleet-prometheus`` on the
control-plane node) scrapes the lab's kubelets, kube-scheduler, kube-controller-manager,
kube-apiserver, the GPU simulator's DCGM-named metrics and ``gpufleet report --serve``,
with the role's rules at short ``for:`` durations; faults caused for real make the matching
alerts fire, and the test records which alert fired after how long
(``$TMPDIR/monitoring-<lab>.json``, printed at the end):

* an allocated device left idle (the GPU simulator at 0% utilization) fires
  DRAAllocatedDeviceIdle, and 90% utilization (``gpusim set``) clears it;
* a leaked claim (kube-controller-manager stopped, the pod force-deleted, as in
  test_validate.py) fires DRAClaimLeaked;
* the kubelet plugin stopped on one node (a DaemonSet nodeSelector) fires
  DRAKubeletPluginDown for that node and, once the kubelet has deleted the node's
  ResourceSlices (30 s after the plugin unregisters), GPUNodeWithoutResourceSlice.

Everything is put back: the plugin, kube-controller-manager, the claim (``claims gc``),
the Prometheus unit and its files, the RBAC objects, the exporter process.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet import runner
from gpufleet.build import binaries
from gpufleet.build import grafana_dashboard as gd
from gpufleet.lab import cluster
from tests.lab import dashboard_panels as dp
from tests.lab.test_validate import GPUFLEET, Lab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

BIN = Path(sys.executable).parent
FOR_S = 20  # every for: of the rules on the lab, in seconds
FOR = f"{FOR_S}s"
#: The kubelet deletes a driver's ResourceSlices on its node this long after the driver's
#: plugin unregisters, unless the plugin registers again (``defaultWipingDelay``,
#: pkg/kubelet/cm/dra/manager.go); the plugin's helper never deletes them itself.
WIPING_DELAY_S = 30
CONFIG_DIR = "/etc/gpufleet/monitoring"
RESULTS: dict[str, Any] = {"alerts": {}}
RBAC = [
    {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "gpufleet-prometheus", "namespace": "kube-system"},
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "gpufleet-prometheus"},
        "rules": [
            {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "gpufleet-prometheus"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "gpufleet-prometheus",
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": "gpufleet-prometheus", "namespace": "kube-system"}
        ],
    },
]


class Prom:
    """The HTTP API of the Prometheus the role started (every request with a timeout)."""

    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str, **query: str) -> Any:
        url = f"{self.base}{path}?{urllib.parse.urlencode(query)}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return json.loads(resp.read())["data"]

    def firing(self, alert: str, **labels: str) -> list[dict[str, str]]:
        sel = ",".join(
            [
                f'alertname="{alert}"',
                'alertstate="firing"',
                *(f'{k}="{v}"' for k, v in labels.items()),
            ]
        )
        return [r["metric"] for r in self.get("/api/v1/query", query=f"ALERTS{{{sel}}}")["result"]]

    def series(self, expr: str) -> list[dict[str, Any]]:
        return self.get("/api/v1/query", query=expr)["result"]


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float) -> float:
    """Seconds until ``probe()`` is truthy; AssertionError after ``timeout_s``."""
    start = time.monotonic()
    last: Any = None
    while time.monotonic() - start < timeout_s:
        try:
            last = probe()
        except (OSError, ValueError) as err:
            last = repr(err)
        else:
            if last:
                return time.monotonic() - start
        time.sleep(2)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}; last: {last!r}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def run_role(lab: Lab, variables: dict[str, Any], tmp: Path) -> None:
    (tmp / "monitoring-vars.yml").write_text(yaml.safe_dump(variables))
    proc = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(runner.collection_root() / "inventory" / "lab"),
            "-e",
            f"@{tmp / 'monitoring-vars.yml'}",
            str(runner.collection_root() / "playbooks" / "monitoring.yml"),
        ],
        env={
            **os.environ,
            "ANSIBLE_COLLECTIONS_PATH": str(runner.collection_root().parents[2]),
            "ANSIBLE_NOCOLOR": "1",
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def mon(lab) -> Iterator[tuple[Lab, Prom]]:
    state = cluster.load_state()
    if not state or not cluster.kubeconfig_path().is_file():
        pytest.skip(f"no lab named {cluster.lab_name()!r}: run `gpufleet lab up`")
    lab = Lab(state)
    if len(lab.workers) < 2:
        pytest.skip("the monitoring faults need a lab with two GPU workers")
    lab.ensure_images()
    lab.settle()
    ips = {n["name"]: n["ip"] for n in state["nodes"]}
    gateway = subprocess.run(
        [
            "podman",
            "inspect",
            lab.control_plane,
            "--format",
            "{{range .NetworkSettings.Networks}}{{.Gateway}}{{end}}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    port = free_port()
    # with --prometheus the exporter measures the allocated devices' activity on the
    # Prometheus it is scraped by (the idle panels per team and namespace), over the
    # dashboard's default window
    exporter = subprocess.Popen(
        [
            GPUFLEET,
            "report",
            "--serve",
            f"0.0.0.0:{port}",
            "--kubeconfig",
            lab.kubeconfig,
            "--prometheus",
            f"http://{ips[lab.control_plane]}:9090",
            "--idle-window",
            "1m",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lab.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": RBAC})
    )
    try:
        token = lab.kubectl(
            "-n", "kube-system", "create", "token", "gpufleet-prometheus", "--duration=2h"
        )
        subprocess.run(
            [
                "podman",
                "exec",
                "-i",
                lab.control_plane,
                "sh",
                "-c",
                f"mkdir -p {CONFIG_DIR} && umask 077 && cat > {CONFIG_DIR}/token",
            ],
            input=token.strip() + "\n",
            text=True,
            timeout=60,
            check=True,
        )
        variables = {
            "monitoring_config_dir": CONFIG_DIR,
            "monitoring_scrape_interval": "5s",
            "monitoring_kubelet_targets": [
                {"node": n, "address": f"{ips[n]}:10250", "gpu_node": n in lab.workers}
                for n in [lab.control_plane, *lab.workers]
            ],
            "monitoring_dcgm_exporter_targets": [
                {"node": n, "address": f"{ips[n]}:9400"} for n in lab.workers
            ],
            # kubeadm binds the scheduler and the controller-manager to 127.0.0.1
            "monitoring_scheduler_targets": ["127.0.0.1:10259"],
            "monitoring_controller_manager_targets": ["127.0.0.1:10257"],
            "monitoring_apiserver_targets": [f"{ips[lab.control_plane]}:6443"],
            "monitoring_object_exporter_targets": [f"{gateway}:{port}"],
            **{
                f"monitoring_{k}": FOR
                for k in (
                    "claim_leaked_for",
                    "claim_pending_for",
                    "resourceslice_missing_for",
                    "plugin_down_for",
                    "device_idle_for",
                    "dra_gate_missing_for",
                    "claim_create_failed_for",
                    "binding_conditions_failed_for",
                )
            },
            "monitoring_device_idle_window": "30s",
            "monitoring_prometheus_service": True,
            "monitoring_prometheus_binary": str(binaries.binary_path("prometheus")),
            "monitoring_prometheus_data_dir": "/var/lib/gpufleet-prometheus",
        }
        run_role(lab, variables, lab.tmp)
        prom = Prom(f"http://{ips[lab.control_plane]}:9090")
        RESULTS["prometheus"] = str(binaries.binary_path("prometheus"))

        def all_up() -> bool:
            active = prom.get("/api/v1/targets", state="active")["activeTargets"]
            RESULTS["targets"] = {
                f"{t['labels']['job']} {t['scrapeUrl']}": t["health"] for t in active
            }
            return len(active) >= 9 and all(t["health"] == "up" for t in active)

        RESULTS["targets_up_s"] = round(wait_for("every target up", all_up, 180), 1)
        yield lab, prom
    finally:
        lab.exec(
            lab.control_plane,
            "sh",
            "-c",
            "systemctl disable --now gpufleet-prometheus; rm -rf "
            "/etc/systemd/system/gpufleet-prometheus.service /usr/local/bin/gpufleet-prometheus "
            f"/var/lib/gpufleet-prometheus {CONFIG_DIR}; rmdir --ignore-fail-on-non-empty "
            f"{Path(CONFIG_DIR).parent}; systemctl daemon-reload",
        )
        lab.kubectl(
            "delete",
            "-f",
            "-",
            "--ignore-not-found",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": RBAC}),
            check=False,
        )
        exporter.terminate()
        exporter.wait(timeout=30)
        out = lab.tmp / f"monitoring-{cluster.lab_name()}.json"
        out.write_text(json.dumps(RESULTS, indent=2))
        print(f"\nmonitoring results ({out}):\n{json.dumps(RESULTS, indent=2)}")


def test_no_alert_fires_on_a_clean_lab(mon: tuple[Lab, Prom]) -> None:
    lab, prom = mon
    # the exporter, the kubelets and the simulator answer with the series the rules read
    assert prom.series("gpufleet_gpu_node_resourceslice_devices") != []
    assert {
        r["metric"]["node"] for r in prom.series("gpufleet_gpu_node_resourceslice_devices > 0")
    } == set(lab.workers)
    registered = prom.series(
        'plugin_manager_total_plugins{state="actual_state_of_world",socket_path=~".*/gpu.nvidia.com-reg.sock"}'
    )
    assert {r["metric"]["node"] for r in registered} == set(lab.workers)
    assert {r["metric"]["Hostname"] for r in prom.series("DCGM_FI_DEV_GPU_UTIL")} == set(
        lab.workers
    )
    time.sleep(25)  # longer than every for:
    firing = prom.series('ALERTS{alertstate="firing"}')
    RESULTS["clean_lab_firing"] = [r["metric"]["alertname"] for r in firing]
    assert firing == []


def test_idle_device_and_leaked_claim_fire(mon: tuple[Lab, Prom]) -> None:
    lab, prom = mon
    ns = "monitoring-leak"
    image = lab.state["vars"].get("lab_smoke_image", "localhost/gpufleet/busybox:1")
    lab.namespace(ns)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "train", "namespace": ns},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    pod = {
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
    }
    lab.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [claim, pod]}),
    )
    manifest = "/etc/kubernetes/manifests/kube-controller-manager.yaml"
    parked = "/etc/kubernetes/kube-controller-manager.yaml.parked"
    node = ""
    try:
        lab.wait(
            "pod trainer running",
            lambda: (
                lab.kubectl("-n", ns, "get", "pod", "trainer", "-o", "jsonpath={.status.phase}")
                == "Running"
            ),
        )
        node = lab.kubectl("-n", ns, "get", "pod", "trainer", "-o", "jsonpath={.spec.nodeName}")
        started = time.monotonic()
        # the simulator labels the prepared device with the claim, as the DCGM exporter does
        wait_for(
            "DCGM metrics of claim train",
            lambda: prom.series(
                f'DCGM_FI_DEV_GPU_UTIL{{dra_claim_name="train",dra_claim_namespace="{ns}",Hostname="{node}"}}'
            ),
            60,
        )
        wait_for(
            "DRAAllocatedDeviceIdle",
            lambda: prom.firing("DRAAllocatedDeviceIdle", dra_claim_name="train"),
            180,
        )
        RESULTS["alerts"]["idle device (0% utilization)"] = {
            "alert": "DRAAllocatedDeviceIdle",
            "node": node,
            "seconds": round(time.monotonic() - started, 1),
        }
        # the report reads the same series from the same Prometheus: the device is idle
        report_file = lab.tmp / "report-activity.json"
        reported = subprocess.run(
            [GPUFLEET, "report", "--kubeconfig", lab.kubeconfig, "--prometheus", prom.base,
             "--idle-window", "10m", "--json", str(report_file)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert reported.returncode == 0, reported.stdout + reported.stderr
        doc = json.loads(report_file.read_text())
        idle = [i for i in doc["idle"] if i["claim"] == f"{ns}/train"]
        assert [i["node"] for i in idle] == [node], doc["activity"]
        assert idle[0]["percent"] < 5 and doc["activity"]["devices_measured"] >= 1
        RESULTS["report_idle"] = {"activity": doc["activity"], "idle": idle}
        lab.exec(node, "gpusim", "set", "--gpu", "0", "--utilization", "90")
        busy = time.monotonic()
        wait_for(
            "DRAAllocatedDeviceIdle resolved",
            lambda: not prom.firing("DRAAllocatedDeviceIdle", dra_claim_name="train"),
            120,
        )
        RESULTS["alerts"]["idle device (0% utilization)"]["resolved_after_busy_s"] = round(
            time.monotonic() - busy, 1
        )
        lab.exec(node, "gpusim", "set", "--gpu", "0", "--utilization", "0")

        lab.exec(lab.control_plane, "mv", manifest, parked)
        lab.wait("kube-controller-manager stopped", lambda: not lab.kcm_running())
        lab.kubectl("-n", ns, "delete", "pod", "trainer", "--grace-period=0", "--force")
        leaked = time.monotonic()
        seconds = wait_for(
            "DRAClaimLeaked",
            lambda: prom.firing("DRAClaimLeaked", namespace=ns, claim="train"),
            180,
        )
        RESULTS["alerts"]["leaked claim (controller-manager stopped, pod force-deleted)"] = {
            "alert": "DRAClaimLeaked",
            "seconds": round(seconds, 1),
            "also_firing": sorted(
                {r["metric"]["alertname"] for r in prom.series('ALERTS{alertstate="firing"}')}
            ),
        }
        assert time.monotonic() - leaked >= FOR_S  # not before its for:
        gc = subprocess.run(
            [GPUFLEET, "claims", "gc", "--apply", "--json", "--kubeconfig", lab.kubeconfig],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert gc.returncode == 0, gc.stdout + gc.stderr
        wait_for(
            "DRAClaimLeaked resolved",
            lambda: not prom.firing("DRAClaimLeaked", namespace=ns, claim="train"),
            120,
        )
    finally:
        if node:
            lab.exec(node, "gpusim", "set", "--gpu", "0", "--utilization", "0")
        lab.exec(lab.control_plane, "sh", "-c", f"test ! -e {parked} || mv {parked} {manifest}")
        lab.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        lab.wait("kube-controller-manager back", lab.kcm_running)


def test_stopped_plugin_fires_plugin_down(mon: tuple[Lab, Prom]) -> None:
    lab, prom = mon
    ds = json.loads(lab.kubectl("get", "daemonsets", "-A", "-o", "json"))
    (d,) = [
        d
        for d in ds["items"]
        if d["spec"]["template"]["metadata"].get("labels", {}).get("app.kubernetes.io/component")
        == "kubelet-plugin"
    ]
    ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
    keep, stop = lab.workers[0], lab.workers[-1]
    patch = {"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": keep}}}}}
    lab.kubectl("-n", ns, "patch", "daemonset", name, "--type=merge", "-p", json.dumps(patch))
    started = time.monotonic()
    try:
        wait_for(
            "DRAKubeletPluginDown", lambda: prom.firing("DRAKubeletPluginDown", node=stop), 240
        )
        entry: dict[str, Any] = {
            "alert": "DRAKubeletPluginDown",
            "node": stop,
            "seconds": round(time.monotonic() - started, 1),
        }
        RESULTS["alerts"]["kubelet plugin stopped on one node"] = entry
        assert prom.firing("DRAKubeletPluginDown", node=keep) == []
        # the kubelet deletes the node's ResourceSlices WIPING_DELAY_S after the plugin
        # unregisters; the exporter then publishes 0 devices for the node and the alert
        # fires its for: later (on the lab about 30 s after DRAKubeletPluginDown)
        wait_for(
            "GPUNodeWithoutResourceSlice",
            lambda: prom.firing("GPUNodeWithoutResourceSlice", node=stop),
            90,
        )
        slices_gone = time.monotonic() - started
        entry["GPUNodeWithoutResourceSlice_s"] = round(slices_gone, 1)
        entry["also_firing"] = sorted(
            {r["metric"]["alertname"] for r in prom.series('ALERTS{alertstate="firing"}')}
        )
        assert slices_gone >= WIPING_DELAY_S + FOR_S  # not before the wipe and its for:
        assert prom.firing("GPUNodeWithoutResourceSlice", node=keep) == []
    finally:
        unpatch = {"spec": {"template": {"spec": {"nodeSelector": None}}}}
        lab.kubectl("-n", ns, "patch", "daemonset", name, "--type=merge", "-p", json.dumps(unpatch))
        lab.ensure_images()
        lab.wait("the kubelet plugin back on every node", lab.plugin_running)
    wait_for("DRAKubeletPluginDown resolved", lambda: not prom.firing("DRAKubeletPluginDown"), 180)


PANELS_NS = {"panels-idle": "vision", "panels-leak": "nlp", "panels-pending": ""}
#: Keeps kube-controller-manager from releasing the claims of panels-leak once their pod
#: is gone, so a claim leaks while every component runs and exports its series.
KEEP_ALLOCATION = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "gpufleet-panels-keep-allocation"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": "panels-leak"}
                },
                "resourceRules": [
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "apiVersions": ["*"],
                        "operations": ["UPDATE"],
                        "resources": ["resourceclaims/status"],
                    }
                ],
            },
            "validations": [
                {
                    "expression": "!has(oldObject.status) || !has(oldObject.status.allocation)"
                    " || (has(object.status) && has(object.status.allocation))",
                    "message": "the panels scenario keeps this claim allocated",
                }
            ],
        },
    },
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "gpufleet-panels-keep-allocation"},
        "spec": {
            "policyName": "gpufleet-panels-keep-allocation",
            "validationActions": ["Deny"],
        },
    },
]


def claim_and_pod(ns: str, name: str, image: str, selector: str = "") -> list[dict[str, Any]]:
    """A ResourceClaim ``ns/name`` of one device of the driver's class (with a CEL
    ``selector``, if any) and the pod ``name``-pod that uses it."""
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com"}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-pod", "namespace": ns},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "tolerations": [{"operator": "Exists"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
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


def panels_scenario(lab: Lab, prom: Prom) -> None:
    """An idle claim (panels-idle/train, team vision, its device at 0% utilization), a
    leaked one (panels-leak/held, team nlp: its pod force-deleted, its allocation kept by
    KEEP_ALLOCATION) and a pending one (panels-pending/huge, no team: no device has
    200Gi of memory), each used by a pod; returns once the rules see the idle device and
    the leaked claim."""
    image = lab.state["vars"].get("lab_smoke_image", "localhost/gpufleet/busybox:1")
    for ns, team in PANELS_NS.items():
        lab.namespace(ns)
        if team:
            lab.kubectl("label", "namespace", ns, f"gpufleet.io/team={team}")
    huge = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('200Gi')) >= 0"
    items = [
        *KEEP_ALLOCATION,
        *claim_and_pod("panels-idle", "train", image),
        *claim_and_pod("panels-leak", "held", image),
        *claim_and_pod("panels-pending", "huge", image, huge),
    ]
    lab.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    phase = "jsonpath={.status.phase}"
    for ns, pod in (("panels-idle", "train-pod"), ("panels-leak", "held-pod")):
        lab.wait(
            f"{ns}/{pod} running",
            lambda ns=ns, pod=pod: (
                lab.kubectl("-n", ns, "get", "pod", pod, "-o", phase) == "Running"
            ),
        )
    # the leaked device idled while its pod ran: measured, so idle over the window
    wait_for(
        "DCGM metrics of claim panels-leak/held",
        lambda: prom.series('DCGM_FI_DEV_GPU_UTIL{dra_claim_name="held"}'),
        60,
    )
    lab.kubectl("-n", "panels-leak", "delete", "pod", "held-pod", "--grace-period=0", "--force")
    wait_for(
        "DRAClaimLeaked of panels-leak/held",
        lambda: prom.firing("DRAClaimLeaked", namespace="panels-leak", claim="held"),
        180,
    )
    wait_for(
        "DRAAllocatedDeviceIdle of panels-idle/train",
        lambda: prom.firing("DRAAllocatedDeviceIdle", dra_claim_namespace="panels-idle"),
        180,
    )


def scene(lab: Lab, prom: Prom) -> dp.Scene:
    """The cluster's objects now, and the scrape jobs with their number of targets."""
    listed = {
        kind: json.loads(lab.kubectl("get", kind, *flags, "-o", "json"))["items"]
        for kind, flags in (
            ("resourceslices", ()),
            ("resourceclaims", ("-A",)),
            ("pods", ("-A",)),
            ("nodes", ()),
            ("namespaces", ()),
            ("deviceclasses", ()),
        )
    }
    served = lab.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name")
    active = prom.get("/api/v1/targets", state="active")["activeTargets"]
    return dp.Scene(
        slices=listed["resourceslices"],
        claims=listed["resourceclaims"],
        pods=listed["pods"],
        nodes=listed["nodes"],
        namespaces=listed["namespaces"],
        classes=listed["deviceclasses"],
        resources=sorted({name.partition(".")[0] for name in served.split()}),
        jobs=Counter(t["labels"]["job"] for t in active),
    )


def variable_values(prom: Prom, doc: dict[str, Any]) -> dict[str, list[str]]:
    """What Grafana offers for each query variable of ``doc``: the values of the label
    its ``label_values(series, label)`` names, on the series that the lab's Prometheus
    holds now."""
    out = {}
    for variable in doc["templating"]["list"]:
        if variable.get("type") == "query":
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["query"])
            assert m, variable["query"]
            out[variable["name"]] = sorted(
                {r["metric"][m.group(2)] for r in prom.series(m.group(1))}
            )
    return out


def test_every_dashboard_panel_returns_the_scenario_series(
    mon: tuple[Lab, Prom], capsys: pytest.CaptureFixture[str]
) -> None:
    lab, prom = mon
    doc = json.loads(gd.DASHBOARD.read_text(encoding="utf-8"))
    try:
        panels_scenario(lab, prom)
        time.sleep(10)  # two scrapes of every target after the rules saw the scenario
        now = scene(lab, prom)
        offered = variable_values(prom, doc)
        assert offered["node"] == now.gpu_nodes()
        assert offered["team"] == sorted({now.team(a["namespace"]) for a in now.allocated()})
        values = {name: gd.multi_value(v) for name, v in offered.items()}
        queries = [(t, ref, gd.substituted(e, values)) for t, ref, e in gd.panel_targets(doc)]
        rows = [dp.check(t, ref, q, prom.series(q), now) for t, ref, q in queries]
    finally:
        policy = {"apiVersion": "v1", "kind": "List", "items": KEEP_ALLOCATION}
        lab.kubectl(
            "delete", "-f", "-", "--ignore-not-found", stdin=json.dumps(policy), check=False
        )
        for ns in PANELS_NS:
            lab.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    table = dp.table(rows)
    out = lab.tmp / f"dashboard-panels-{cluster.lab_name()}.md"
    out.write_text(table)
    RESULTS["panels"] = [{k: v for k, v in r.items() if k != "query"} for r in rows]
    with capsys.disabled():
        print(f"\ndashboard panels on the lab's Prometheus ({out}):\n{table}")
    titles = {p["title"] for p in doc["panels"] if p["type"] != "row"}
    assert titles == set(dp.EXPECTED), "every panel needs its expectation in dashboard_panels.py"
    assert [r for r in rows if not r["expected"]] == [], table
