"""Role ``mig`` (playbooks/mig.yml, through ``gpufleet mig apply``) on a running lab.

Runs on the test session's lab (tests/lab/conftest.py). On the first GPU worker the GPU
simulator's MIG state is cleared, the playbook carves seven ``1g.18gb`` instances, the node's
ResourceSlices
must then list ``gpu-0-mig-1g18gb-19-0`` … ``-6`` (the NVIDIA DRA driver's MIG device
names: profile without dots, GI profile ID, placement start), a pod with a
``mig.nvidia.com`` ResourceClaimTemplate must reach Running, and a second run must change
nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    templates as claim_templates,
)

from .running import LAB_ENV, Lab

pytestmark = [pytest.mark.slow, pytest.mark.lab]

REPO = Path(__file__).resolve().parents[2]
GPUFLEET = Path(sys.executable).parent / "gpufleet"
KUBECTL = Path.home() / ".cache/gpufleet/bin/kubernetes/v1.37.2/kubectl"
NAMESPACE = "mig-role-test"
SIM_NAMESPACE = "gpufleet-gpu-simulator"
SIM_SELECTOR = "app.kubernetes.io/component=kubelet-plugin"


@pytest.fixture(scope="module")
def mig_lab(lab: Lab) -> Iterator[dict[str, Any]]:
    """The session's lab, seen from this module: its kubeconfig and first GPU worker.
    Afterwards the worker is put back to MIG off with no layout persisted."""
    node = lab.workers()[0]
    yield {"kubeconfig": str(lab.kubeconfig), "node": node}
    node_smi(node, "mig", "-dci")
    node_smi(node, "mig", "-dgi")
    node_smi(node, "-i", "0", "-mig", "0")
    subprocess.run(
        ["podman", "exec", node, "sh", "-c",
         "systemctl disable gpufleet-mig.service; rm -f /etc/gpufleet/mig/layout.yaml"],
        capture_output=True,
    )  # fmt: skip

    def whole_gpu() -> bool:
        slices = lab.kubectl_json(
            "get", "resourceslices", "--field-selector", f"spec.nodeName={node}"
        )
        return [d["name"] for s in slices["items"] for d in s["spec"].get("devices", [])] == [
            "gpu-0"
        ]

    lab.wait_for(f"{node} back to one whole GPU", whole_gpu)


def kubectl(lab: dict[str, Any], *args: str, data: str | None = None) -> str:
    proc = subprocess.run(
        [str(KUBECTL), "--kubeconfig", lab["kubeconfig"], *args],
        input=data,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc.stdout


def node_smi(node: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", "exec", node, "nvidia-smi", *args], capture_output=True, text=True, timeout=60
    )


def mig_device_names(lab: dict[str, Any]) -> list[str]:
    slices = json.loads(
        kubectl(
            lab,
            "get",
            "resourceslices",
            "--field-selector",
            f"spec.nodeName={lab['node']}",
            "-o",
            "json",
        )
    )
    return sorted(
        d["name"]
        for s in slices["items"]
        if s["spec"]["driver"] == "gpu.nvidia.com"
        for d in s["spec"].get("devices", [])
        if d.get("attributes", {}).get("type", {}).get("string") == "mig"
    )


def ran(result: Any, task: str) -> bool:
    """Whether ``task`` ran (ok or changed) on some host of a :func:`gpufleet.runner.run_playbook`
    result, read from its job events."""
    for path in (result.artifact_dir / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        if event.get("event") == "runner_on_ok" and event["event_data"].get("task") == task:
            return True
    return False


def apply_again(lab: dict[str, Any]) -> Any:
    """The same 1g.18gb x 7 layout on the lab's node, by :func:`gpufleet.runner.run_playbook`."""
    from gpufleet import runner

    return runner.run_playbook(
        "mig",
        [str(REPO / "inventory" / "lab")],
        extravars={
            "mig_layout": {"1g.18gb": 7},
            "mig_kubeconfig": lab["kubeconfig"],
            "mig_dra_plugin_namespace": SIM_NAMESPACE,
            "mig_dra_plugin_selector": SIM_SELECTOR,
        },
        limit=lab["node"],
    )


def run_apply(lab: dict[str, Any], *extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    argv = [
        str(GPUFLEET), "mig", "apply", "-i", str(REPO / "inventory" / "lab"),
        "--layout", '{"1g.18gb": 7}', "--limit", lab["node"],
        "-e", f"mig_kubeconfig={lab['kubeconfig']}",
        "-e", f"mig_dra_plugin_namespace={SIM_NAMESPACE}",
        "-e", f"mig_dra_plugin_selector={SIM_SELECTOR}",
        *extra,
    ]  # fmt: skip
    t0 = time.monotonic()
    env = {**os.environ, **LAB_ENV}
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=1200, env=env)
    return proc, time.monotonic() - t0


def test_mig_role_carves_and_republishes(mig_lab: dict[str, Any]) -> None:
    lab = mig_lab
    node = lab["node"]
    # Start from MIG off: destroy what a previous run left, then disable MIG.
    node_smi(node, "mig", "-dci")
    node_smi(node, "mig", "-dgi")
    assert node_smi(node, "-i", "0", "-mig", "0").returncode in (0, 6)

    first, first_s = run_apply(lab)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    print(f"first apply: {first_s:.1f} s")

    lgi = node_smi(node, "mig", "-lgi").stdout
    assert lgi.count("MIG 1g.18gb") == 7, lgi
    expected = [f"gpu-0-mig-1g18gb-19-{s}" for s in range(7)]
    assert mig_device_names(lab) == expected
    unit = subprocess.run(
        ["podman", "exec", node, "systemctl", "is-enabled", "gpufleet-mig.service"],
        capture_output=True,
        text=True,
    )
    assert unit.stdout.strip() == "enabled"
    layout = subprocess.run(
        ["podman", "exec", node, "cat", "/etc/gpufleet/mig/layout.yaml"],
        capture_output=True,
        text=True,
    )
    assert yaml.safe_load(layout.stdout)["layout"] == {"1g.18gb": 7}

    # A pod with a mig.nvidia.com claim template is scheduled and started.
    subprocess.run(
        [str(KUBECTL), "--kubeconfig", lab["kubeconfig"], "create", "namespace", NAMESPACE],
        capture_output=True,
    )
    template = claim_templates.mig_slice("1g.18gb", namespace=NAMESPACE, kubernetes_version="1.37")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "mig-user", "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [
                {"name": "mig", "resourceClaimTemplateName": template["metadata"]["name"]}
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "localhost/gpufleet/busybox:1",
                    "imagePullPolicy": "Never",
                    "command": ["/bin/busybox", "sleep", "3600"],
                    "resources": {"claims": [{"name": "mig"}]},
                }
            ],
        },
    }
    try:
        kubectl(lab, "apply", "-f", "-", data=json.dumps(template))
        kubectl(lab, "apply", "-f", "-", data=json.dumps(pod))
        t0 = time.monotonic()
        kubectl(
            lab, "wait", "-n", NAMESPACE, "pod/mig-user", "--for=jsonpath={.status.phase}=Running",
            "--timeout=180s",
        )  # fmt: skip
        print(f"pod Running after {time.monotonic() - t0:.1f} s")
        claims = json.loads(kubectl(lab, "get", "resourceclaims", "-n", NAMESPACE, "-o", "json"))
        results = [
            r for c in claims["items"] for r in c["status"]["allocation"]["devices"]["results"]
        ]
        assert [r["device"] in expected for r in results] == [True]
    finally:
        subprocess.run(
            [str(KUBECTL), "--kubeconfig", lab["kubeconfig"], "delete", "namespace", NAMESPACE,
             "--wait=true", "--timeout=120s"],
            capture_output=True,
        )  # fmt: skip

    # Second run, same layout: nothing changes on the node.
    t0 = time.monotonic()
    second = apply_again(lab)
    print(f"second apply: {time.monotonic() - t0:.1f} s")
    assert second.status == 0
    assert second.progress.recap()[node]["changed"] == 0, second.progress.recap()
    # the plan play found nothing to carve: the carve play matched no host, without a warning
    stdout = (second.artifact_dir / "stdout").read_text()
    assert "skipping: no hosts matched" in stdout, stdout[-3000:]
    assert "[WARNING]" not in stdout, stdout[-3000:]
    # the node has the boot-time apply's code of this run: one stat, no copy
    assert ran(second, "MIG | The code's SHA-256 the node has")
    assert not ran(second, "MIG | Code of the boot-time apply")

    # A copy cut short (a code file and the stamp gone): the next run copies the code again.
    code = "/usr/local/lib/gpufleet-mig/ansible_collections/gpufleet/cluster/plugins/module_utils"
    subprocess.run(
        ["podman", "exec", node, "rm", f"{code}/mig/tables.py", f"{code}/CODE_SHA256"],
        check=True,
    )
    third = apply_again(lab)
    assert third.status == 0
    assert ran(third, "MIG | Code of the boot-time apply")
    script = f"test -s {code}/mig/tables.py && cat {code}/CODE_SHA256"
    check = subprocess.run(
        ["podman", "exec", node, "sh", "-c", script],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0 and len(check.stdout.strip()) == 64, check
