"""The dra_driver role on the lab: a real kubeadm cluster whose only stand-in is the GPU.

NVIDIA's images cannot be pulled here, so the GPU simulator's chart (same values shape for
``kubeletPlugin.nodeSelector/tolerations/affinity``, DeviceClasses gpu.nvidia.com and
mig.nvidia.com, a kubelet plugin publishing ResourceSlices of driver gpu.nvidia.com) stands
in for NVIDIA's, from a local chart path with the lab's image and API-server values in
``dra_driver_extra_values``. Each step runs ``playbooks/dra_driver.yml`` with
``inventory/lab`` (the lab of ``$GPUFLEET_LAB_NAME``) and checks the cluster with kubectl:

1. install into an empty namespace; DaemonSet ready on every GPU node, slices per GPU;
2. the same run again reports no change;
3. one GPU carved into two MIG devices: the expected count follows gpu_facts (1 + 2);
4. upgrade to a copy of the chart with a new version, a CRD in crds/ and a changed value;
5. a GPU node without its label is refused before any change, naming the node;
6. a chart whose kubelet plugin schedules nowhere (0 of 0) is refused naming node and label.

The lab's own simulator release is taken out first and put back afterwards.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from gpufleet import runner
from gpufleet.lab import cluster

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventory" / "lab"
RELEASE = "nvidia-dra-driver-gpu"
NAMESPACE = "nvidia-dra-driver-gpu"
LAB_RELEASE = "gpufleet-gpu-simulator"
LAB_NAMESPACE = "gpufleet-gpu-simulator"
GPU_LABEL = "nvidia.com/gpu.present"
TEST_CRD = "gpufleettests.dra.gpufleet.test"
TIMINGS: dict[str, float] = {}


@dataclass
class Lab:
    state: dict[str, Any]
    kubeconfig: Path
    kubectl: Path
    helm: Path
    gpu_nodes: dict[str, int]  # node -> simulated GPUs

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, capture_output=True, text=True, timeout=300, check=check)

    def k(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args, check=check)

    def helm_cmd(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.helm), "--kubeconfig", str(self.kubeconfig), *args, check=check)

    def get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.k("get", *args, "-o", "json").stdout)


def _lab() -> Lab:
    state = cluster.load_state()
    if not state:
        pytest.skip(f"no lab {cluster.lab_name()!r}: run `gpufleet lab up` (GPUFLEET_LAB_NAME)")
    lab_vars = state.get("vars") or {}
    if not lab_vars.get("lab_gpu_simulator_chart"):
        pytest.skip("the lab was brought up without the GPU simulator chart (no plugin image)")
    kubeconfig = Path(lab_vars.get("lab_kubeconfig") or cluster.kubeconfig_path())
    helm = Path(lab_vars.get("lab_helm", ""))
    version = lab_vars.get("kubeadm_kubernetes_version", "")
    kubectl = Path.home() / ".cache/gpufleet/bin/kubernetes" / f"v{version.lstrip('v')}" / "kubectl"
    for what, path in (("kubeconfig", kubeconfig), ("helm", helm), ("kubectl", kubectl)):
        if not path.is_file():
            pytest.skip(f"lab {cluster.lab_name()!r}: {what} {path} is missing")
    gpu_nodes = {
        n["name"]: int(n.get("gpu_count") or 1) for n in state["nodes"] if n["role"] == "gpu-worker"
    }
    lab = Lab(state, kubeconfig, kubectl, helm, gpu_nodes)
    ready = lab.k("get", "--raw", "/readyz", check=False)
    if ready.returncode != 0:
        pytest.skip(
            f"lab {cluster.lab_name()!r} API server does not answer: {ready.stderr.strip()}"
        )
    return lab


@pytest.fixture(scope="module")
def lab(lab) -> Iterator[Lab]:
    """The session's lab (tests/lab/conftest.py) with the simulator chart swapped out."""
    lab = _lab()
    lab_vars = lab.state["vars"]
    lab.helm_cmd("uninstall", LAB_RELEASE, "-n", LAB_NAMESPACE, "--wait", check=False)
    try:
        yield lab
    finally:
        for node in lab.gpu_nodes:
            lab.k("label", "node", node, f"{GPU_LABEL}=true", "--overwrite", check=False)
        lab.helm_cmd("uninstall", RELEASE, "-n", NAMESPACE, "--wait", check=False)
        lab.k("delete", "crd", TEST_CRD, "--ignore-not-found", check=False)
        values = Path(lab.kubeconfig).parent / "dra-driver-test-lab-values.json"
        values.write_text(json.dumps(lab_vars.get("lab_gpu_simulator_values") or {}))
        lab.helm_cmd("upgrade", "--install", LAB_RELEASE, lab_vars["lab_gpu_simulator_chart"],
                     "-n", LAB_NAMESPACE, "--create-namespace", "-f", str(values),
                     "--wait", "--timeout", "5m", check=False)  # fmt: skip
        values.unlink(missing_ok=True)
        print("\ndra_driver lab timings (s): " + json.dumps(TIMINGS))


def crd_manifest() -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": TEST_CRD},
        "spec": {
            "group": "dra.gpufleet.test",
            "names": {"kind": "GpufleetTest", "plural": "gpufleettests"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
        },
    }


def chart_copy(
    lab: Lab, dest: Path, version: str, *, crd: bool = False, affinity_label: str = ""
) -> Path:
    """A copy of the GPU simulator chart with another version (and a CRD in crds/, or a
    default kubelet-plugin affinity on a label no node has)."""
    src = Path(lab.state["vars"]["lab_gpu_simulator_chart"])
    shutil.copytree(src, dest)
    meta = yaml.safe_load((dest / "Chart.yaml").read_text())
    meta["version"] = version
    (dest / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    if crd:
        (dest / "crds").mkdir()
        (dest / "crds" / "gpufleettests.yaml").write_text(yaml.safe_dump(crd_manifest()))
    if affinity_label:
        term = {"matchExpressions": [{"key": affinity_label, "operator": "In", "values": ["true"]}]}
        required = {"nodeSelectorTerms": [term]}
        values = yaml.safe_load((dest / "values.yaml").read_text())
        values["kubeletPlugin"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
        (dest / "values.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    return dest


def play(
    lab: Lab, tmp_path: Path, chart: Path, step: str, **extra: Any
) -> tuple[runner.RunResult, str]:
    lab_vars = lab.state["vars"]
    extravars = {
        "dra_driver_chart_path": str(chart),
        "dra_driver_chart_stand_in": True,
        "dra_driver_extra_values": lab_vars.get("lab_gpu_simulator_values") or {},
        "dra_driver_helm": str(lab.helm),
        "dra_driver_kubeconfig": str(lab.kubeconfig),
        "dra_driver_wait_timeout": 240,
        # this module installs its own release, whatever the lab inventory manages
        "dra_driver_release_name": RELEASE,
        "dra_driver_namespace": NAMESPACE,
        **extra,
    }
    t = time.monotonic()
    result = runner.run_playbook(
        "dra_driver",
        str(INVENTORY),
        extravars=extravars,
        console=Console(file=io.StringIO(), width=400),
        artifact_root=tmp_path / "artifacts",
    )
    TIMINGS[step] = round(time.monotonic() - t, 1)
    messages = " ".join(" ".join(msg.split()) for _, _, msg in result.progress.failures)
    return result, messages


def changed(result: runner.RunResult) -> int:
    return sum((result.progress.stats or {}).get("changed", {}).values())


def release(lab: Lab) -> dict[str, Any]:
    out = lab.helm_cmd("list", "-n", NAMESPACE, "-o", "json").stdout
    return next(r for r in json.loads(out) if r["name"] == RELEASE)


def devices_per_node(lab: Lab) -> dict[str, int]:
    out: dict[str, int] = {}
    for sl in lab.get("resourceslices")["items"]:
        spec = sl["spec"]
        if spec.get("driver") == "gpu.nvidia.com" and spec.get("nodeName"):
            out[spec["nodeName"]] = out.get(spec["nodeName"], 0) + len(spec.get("devices") or [])
    return out


def kubelet_plugin(lab: Lab) -> dict[str, Any]:
    items = lab.get("daemonsets", "-n", NAMESPACE)["items"]
    return next(d for d in items if "kubelet-plugin" in d["metadata"]["name"])


@pytest.fixture(scope="module")
def installed(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Step 1: install from the chart path into an empty namespace."""
    tmp = tmp_path_factory.mktemp("dra-install")
    chart = chart_copy(lab, tmp / "chart", "0.1.0")
    result, messages = play(lab, tmp, chart, "install")
    assert result.status == 0, messages
    return chart


def test_install_runs_the_plugin_on_every_gpu_node(lab: Lab, installed: Path) -> None:
    ds = kubelet_plugin(lab)
    status = ds["status"]
    assert status["desiredNumberScheduled"] == len(lab.gpu_nodes) > 0
    assert status["numberReady"] == status["desiredNumberScheduled"]
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {GPU_LABEL: "true"}
    names = {d["metadata"]["name"] for d in lab.get("deviceclasses")["items"]}
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= names
    # the simulated GPUs have MIG disabled: one device per GPU
    assert devices_per_node(lab) == lab.gpu_nodes
    assert release(lab)["chart"] == "gpufleet-gpu-simulator-0.1.0"


def test_second_run_changes_nothing(lab: Lab, installed: Path, tmp_path: Path) -> None:
    revision = release(lab)["revision"]
    result, messages = play(lab, tmp_path, installed, "rerun")
    assert result.status == 0, messages
    assert changed(result) == 0, result.progress.stats
    assert release(lab)["revision"] == revision


def test_mig_layout_sets_the_expected_device_count(
    lab: Lab, installed: Path, tmp_path: Path
) -> None:
    """Two 1g MIG devices on one GPU: gpu_facts says 1 + 2 devices and so must the slices."""
    node, gpus = sorted(lab.gpu_nodes.items())[0]
    if gpus < 2:
        pytest.skip("needs a lab with 2 GPUs per node (gpufleet lab up --gpus-per-node 2)")
    smi = ["podman", "exec", node, "nvidia-smi"]
    lab.run(*smi, "-i", "1", "-mig", "1")
    try:
        lab.run(*smi, "mig", "-i", "1", "-cgi", "19,19", "-C")
        result, messages = play(lab, tmp_path, installed, "mig_layout", dra_driver_wait_timeout=120)
        assert result.status == 0, messages
        assert devices_per_node(lab)[node] == gpus + 1
    finally:
        lab.run(*smi, "mig", "-i", "1", "-dci", check=False)
        lab.run(*smi, "mig", "-i", "1", "-dgi", check=False)
        lab.run(*smi, "-i", "1", "-mig", "0", check=False)


def test_upgrade_applies_crds_first_and_rolls_the_plugin(
    lab: Lab, installed: Path, tmp_path: Path
) -> None:
    revision = int(release(lab)["revision"])
    chart = chart_copy(lab, tmp_path / "chart", "0.1.1", crd=True)
    extra = dict(lab.state["vars"].get("lab_gpu_simulator_values") or {})
    extra["logVerbosity"] = "5"
    result, messages = play(lab, tmp_path, chart, "upgrade", dra_driver_extra_values=extra)
    assert result.status == 0, messages
    assert changed(result) > 0
    rel = release(lab)
    assert rel["chart"] == "gpufleet-gpu-simulator-0.1.1" and int(rel["revision"]) == revision + 1
    # Helm never creates crds/ on upgrade: the role applied it
    assert lab.get("crd", TEST_CRD)["spec"]["group"] == "dra.gpufleet.test"
    ds = kubelet_plugin(lab)
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--v=5" in args
    assert (
        ds["status"]["updatedNumberScheduled"] == ds["status"]["numberReady"] == len(lab.gpu_nodes)
    )
    assert devices_per_node(lab) == lab.gpu_nodes


def test_unlabelled_gpu_node_is_refused_before_any_change(
    lab: Lab, installed: Path, tmp_path: Path
) -> None:
    node = sorted(lab.gpu_nodes)[0]
    revision = release(lab)["revision"]
    lab.k("label", "node", node, f"{GPU_LABEL}-")
    try:
        chart = chart_copy(lab, tmp_path / "chart", "0.1.9")
        result, messages = play(lab, tmp_path, chart, "unlabelled_node_refused")
    finally:
        lab.k("label", "node", node, f"{GPU_LABEL}=true", "--overwrite")
    assert result.status != 0
    assert f"GPU node {node} lacks the label(s) {GPU_LABEL}=true" in messages
    assert "gpu_node_labels" in messages
    assert release(lab)["revision"] == revision  # refused before helm ran


def test_zero_of_zero_daemonset_is_refused(lab: Lab, installed: Path, tmp_path: Path) -> None:
    chart = chart_copy(lab, tmp_path / "chart", "0.1.2", affinity_label="gpufleet.test/never")
    result, messages = play(
        lab, tmp_path, chart, "zero_of_zero_refused", dra_driver_wait_timeout=90
    )
    assert result.status != 0
    node = sorted(lab.gpu_nodes)[0]
    assert "is scheduled on 0 node(s)" in messages and "0 of 0" in messages
    assert f"{node} matches none of the kubelet plugin's required node affinity terms" in messages
    assert "gpufleet.test/never=true" in messages
    status = kubelet_plugin(lab)["status"]
    assert status["desiredNumberScheduled"] == 0
