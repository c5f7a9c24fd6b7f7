"""The lab end to end: real kubelets Ready, the GPU simulator's ResourceSlices published,
and a pod that claims one MIG slice (carved with the simulator's own nvidia-smi) runs on
that node with the simulated device injected through CDI."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    templates as claim_templates,
)

from .running import Lab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NS = "lab-e2e"


def _slice_devices(lab: Lab, node: str) -> list[str]:
    slices = lab.kubectl_json("get", "resourceslices", "--field-selector", f"spec.nodeName={node}")
    return sorted(
        d["name"]
        for s in slices["items"]
        if s["spec"]["driver"] == "gpu.nvidia.com"
        for d in s["spec"].get("devices", [])
    )


def test_every_node_ready_with_a_real_kubelet(lab: Lab) -> None:
    nodes = lab.kubectl_json("get", "nodes")["items"]
    assert len(nodes) == 1 + len(lab.workers())
    version = "v" + lab.status["kubernetes_version"]
    for node in nodes:
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        info = node["status"]["nodeInfo"]
        assert ready == "True", node["metadata"]["name"]
        assert info["kubeletVersion"] == version
        assert info["containerRuntimeVersion"].startswith("containerd://2.")
        # the kubelet is a real process on the node, not a simulated one
        out = lab.node_exec(node["metadata"]["name"], "systemctl", "is-active", "kubelet")
        assert out.strip() == "active"
    print(f"\nlab up took {lab.up_seconds:.0f}s")


def test_simulator_publishes_one_gpu_per_worker(lab: Lab) -> None:
    for node in lab.workers():
        devices = lab.wait_for(f"ResourceSlices of {node}", lambda n=node: _slice_devices(lab, n))
        assert devices == ["gpu-0"], (node, devices)
    classes = {c["metadata"]["name"] for c in lab.kubectl_json("get", "deviceclasses")["items"]}
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= classes


def test_pod_claiming_a_mig_slice_runs_on_the_carved_node(lab: Lab) -> None:
    node = lab.workers()[0]
    smi = ["nvidia-smi"]
    lab.node_exec(node, *smi, "-i", "0", "-mig", "1")
    try:
        out = lab.node_exec(node, *smi, "mig", "-cgi", ",".join(["19"] * 7), "-C")
        assert out.count("Successfully created compute instance") == 7, out
        listed = lab.node_exec(node, *smi, "-L")
        mig_uuids = re.findall(r"MIG 1g\.18gb\s+Device\s+\d+: \(UUID: (MIG-[0-9a-f-]+)\)", listed)
        assert len(mig_uuids) == 7, listed
        want = [f"gpu-0-mig-1g18gb-19-{i}" for i in range(7)]
        lab.wait_for(
            f"7 MIG devices in {node}'s ResourceSlices",
            lambda: _slice_devices(lab, node) == want,
        )

        lab.kubectl_run("create", "namespace", NS)
        rct = claim_templates.build(
            "mig-slice", {"profile": "1g.18gb", "name": "mig-1g18gb", "namespace": NS}
        )
        lab.kubectl_run("apply", "-f", "-", stdin=yaml.safe_dump(rct))
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "mig-smoke", "namespace": NS},
            "spec": {
                "restartPolicy": "Never",
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "resourceClaims": [{"name": "mig", "resourceClaimTemplateName": "mig-1g18gb"}],
                "containers": [
                    {
                        "name": "show",
                        "image": lab.status.get("smoke_image", "localhost/gpufleet/busybox:1"),
                        "imagePullPolicy": "Never",
                        "command": [
                            "/bin/busybox",
                            "sh",
                            "-c",
                            "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; "
                            "cat /run/gpufleet-gpu-simulator/device; "
                            # the link the CDI spec's createContainer hook (NVIDIA's
                            # nvidia-cdi-hook on the node) made in the container
                            "printf hooked=; /bin/busybox readlink "
                            "/run/gpufleet-gpu-simulator/hooked/$GPUFLEET_SIMULATED_GPU; "
                            "sleep 600",
                        ],
                        "resources": {"claims": [{"name": "mig"}]},
                    }
                ],
            },
        }
        lab.kubectl_run("apply", "-f", "-", stdin=json.dumps(pod))
        lab.kubectl_run(
            "wait", "-n", NS, "pod/mig-smoke", "--for=condition=Ready", "--timeout=180s"
        )
        placed = lab.kubectl_json("get", "-n", NS, "pod", "mig-smoke")
        assert placed["spec"]["nodeName"] == node
        claims = lab.kubectl_json("get", "-n", NS, "resourceclaims")["items"]
        assert len(claims) == 1
        status = claims[0]["status"]
        results = status["allocation"]["devices"]["results"]
        assert [(r["driver"], r["pool"]) for r in results] == [("gpu.nvidia.com", node)]
        assert results[0]["device"] in want
        assert [r["name"] for r in status["reservedFor"]] == ["mig-smoke"]
        logs = lab.kubectl_run("logs", "-n", NS, "mig-smoke")
        injected = dict(
            line.split("=", 1)
            for line in logs.splitlines()
            if "=" in line and not line.startswith("#")
        )
        assert injected["NVIDIA_VISIBLE_DEVICES"] in mig_uuids
        assert injected["device"] == results[0]["device"]
        assert injected["profile"] == "1g.18gb"
        assert injected["hooked"] == f"/run/gpufleet-gpu-simulator/devices/{results[0]['device']}"
    finally:
        lab.kubectl_run("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)
        lab.node_exec(node, *smi, "mig", "-dci", check=False)
        lab.node_exec(node, *smi, "mig", "-dgi", check=False)
        lab.node_exec(node, *smi, "-i", "0", "-mig", "0", check=False)
    lab.wait_for(f"{node} back to one whole GPU", lambda: _slice_devices(lab, node) == ["gpu-0"])


def test_kubeadm_role_set_the_kernel_prerequisites_persistently(lab: Lab) -> None:
    # kubeadm's preflight refuses a node without IPv4 forwarding; the kubeadm role sets it
    # in the running kernel and in a sysctl file that holds after a reboot.
    for node in [n["name"] for n in lab.status["nodes"]]:
        assert lab.node_exec(node, "cat", "/proc/sys/net/ipv4/ip_forward").strip() == "1", node
        conf = lab.node_exec(node, "cat", "/etc/sysctl.d/99-kubernetes.conf")
        assert "net.ipv4.ip_forward=1" in conf.replace(" ", ""), (node, conf)
