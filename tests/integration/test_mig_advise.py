"""``gpufleet mig advise`` and ``gpufleet mig apply --proposal`` against a real control
plane: the real kube-scheduler allocates a MIG device of a ResourceSlice published for a
KWOK node (shaped as the GPU simulator's kubelet plugin publishes it), claims that no
device fits wait, and the advice the command writes is checked; then ``mig apply
--proposal --check`` runs ``playbooks/mig.yml`` on the local host against the GPU
simulator's ``nvidia-smi`` (check mode: the GPU simulator's state is not changed), and
the refusals (stale proposal, disturbance not confirmed, outside the window) are checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gpufleet.cli import main
from gpufleet.lab import gpusim_plugin
from tests.integration.conftest import StartControlPlane
from tests.integration.test_validate_claims import CONTROLLERS, apply, claim_spec, wait_for
from tests.unit.report.test_mig_advice import MIG_CEL, mig, rslice, whole

pytestmark = pytest.mark.integration

NS = "advise"
REPO = Path(__file__).resolve().parents[2]


def obj_claim(name: str, profile: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": claim_spec("mig.nvidia.com", MIG_CEL.format(profile)),
    }


def obj_pod(name: str, claim_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "tolerations": [{"operator": "Exists"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


def publish(cp: Any, node: str, devices: list[dict[str, Any]], generation: int) -> None:
    s = rslice(node, devices)
    s["spec"]["pool"]["generation"] = generation
    s.update(apiVersion="resource.k8s.io/v1", kind="ResourceSlice")
    s["metadata"] = {"name": f"{node}-gpu"}
    apply(cp, [s])


def run(args: list[str]) -> Any:
    return CliRunner().invoke(main, args, env={"COLUMNS": "200"})


def simulator(tmp_path: Path, node: str) -> Path:
    """A GPU simulator of two H200s, MIG off, and an ``nvidia-smi`` that runs it."""
    state = tmp_path / "gpusim.json"
    env = {**os.environ, "GPUFLEET_GPUSIM_STATE": str(state)}
    subprocess.run(
        [sys.executable, "-m", "gpufleet.lab.gpusim", "admin", "init", "--count", "2",
         "--node-name", node],
        env=env, capture_output=True, text=True, check=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        f"#!/bin/sh\nexport GPUFLEET_GPUSIM_STATE={state}\nexport PYTHONPATH={REPO}\n"
        f'exec {sys.executable} -m gpufleet.lab.gpusim "$@"\n'
    )
    smi.chmod(0o755)
    return smi


def test_advise_and_apply_a_proposal(
    start_control_plane: StartControlPlane, tmp_path: Path
) -> None:
    cp = start_control_plane(extra_args={"kube-controller-manager": {"controllers": CONTROLLERS}})
    (node,) = cp.start_kwok(1, labels={"nvidia.com/gpu.product": "NVIDIA-H200"}, name_prefix="gpu-")
    cp.wait_nodes_ready([node])
    # GPU 0: 3g.71gb at 0 and 2g.35gb at 4; GPU 1: whole
    devices = [mig(node, 0, "3g.71gb", 0), mig(node, 0, "2g.35gb", 4), whole(node, 1)]
    cp.create_namespace(NS)
    apply(cp, gpusim_plugin.device_classes())
    publish(cp, node, devices, 1)
    apply(cp, [obj_claim("train", "3g.71gb"), obj_pod("trainer", "train")])
    wait_for(
        "claim train allocated",
        lambda: (
            json.loads(cp.kubectl("-n", NS, "get", "resourceclaim", "train", "-o", "json").stdout)
            .get("status", {})
            .get("allocation")
        ),
    )
    waiting = [obj_claim(f"half-{i}", "3g.71gb") for i in range(3)]
    waiting += [obj_pod(f"job-{i}", f"half-{i}") for i in range(3)]
    apply(cp, waiting)

    proposal = tmp_path / "proposal.json"
    result = run(["mig", "advise", "--kubeconfig", str(cp.kubeconfig), "--json", str(proposal)])
    assert result.exit_code == 0, result.output
    doc = json.loads(proposal.read_text())
    changes = {(c["node"], c["gpu"]): c for c in doc["changes"]}
    # the whole GPU 1 is idle: two 3g.71gb; GPU 0 keeps train's 3g.71gb at 0 and gets
    # a second at 4 in place of the free 2g.35gb
    assert sorted(changes) == [(node, 0), (node, 1)]
    assert (changes[(node, 1)]["tier"], changes[(node, 1)]["proposed"]["layout"]) == (
        "idle",
        {"3g.71gb": 2},
    )
    assert changes[(node, 1)]["serves"] == [f"{NS}/half-0", f"{NS}/half-1"]
    g0 = changes[(node, 0)]
    assert g0["tier"] == "keep" and g0["serves"] == [f"{NS}/half-2"] and g0["disturbs"] == []
    assert g0["current"]["placements"][0]["claims"] == [f"{NS}/train"]
    assert [(p["start"], p["size"]) for p in g0["proposed"]["placements"]] == [(0, 4), (4, 4)]
    assert doc["summary"]["served"] == 3 and doc["summary"]["unserved"] == 0
    assert "3g.71gb" in result.output and f"{NS}/half-2" in result.output

    # apply the proposal in check mode on this host, standing in for the KWOK node
    smi = simulator(tmp_path, node)
    inventory = tmp_path / "hosts.yml"
    host = {
        "kubernetes_node_name": node,
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "ansible_become_method": "su",
        "mig_nvidia_smi_path": str(smi),
        "mig_persist": False,
        "mig_dra_driver": True,
        "mig_kubeconfig": str(cp.kubeconfig),
    }
    inventory.write_text(
        yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"local-gpu": host}}}}})
    )
    base = ["mig", "apply", "-i", str(inventory), "--proposal", str(proposal)]
    base += ["--kubeconfig", str(cp.kubeconfig)]
    result = run([*base, "--check", "--maintenance-window", "2026-01-01T00:00Z/2099-01-01T00:00Z"])
    assert result.exit_code == 0, result.output
    # both GPUs get one layout: mig_layout with mig_devices [0, 1] for the node
    assert f'{node}: GPUs [0, 1] -> {{"3g.71gb": 2}}' in result.output
    log = Path(result.output.split("ansible log: ")[1].split()[0]).read_text()
    # module nvidia_mig in check mode on the GPU simulator's two H200s (MIG off there)
    assert "2 GPU(s), 4 MIG device(s); created 4, destroyed 0" in log
    assert "changed=1" in log and "failed=0" in log
    # the GPU simulator ran in check mode: its MIG mode is still off
    listed = subprocess.run([str(smi), "-L"], capture_output=True, text=True, timeout=60)
    assert "MIG" not in listed.stdout

    result = run([*base, "--maintenance-window", "2020-01-01T00:00Z/2020-01-02T00:00Z"])
    assert result.exit_code == 1 and "outside the maintenance window" in result.output

    # the cluster moved: GPU 1 was carved meanwhile, the proposal is stale
    publish(cp, node, [*devices[:2], mig(node, 1, "7g.141gb", 0)], 2)
    result = run([*base, "--check"])
    assert result.exit_code == 1, result.output
    assert f"node {node} GPU 1: the proposal was made for MIG disabled" in result.output

    # a proposal that drops train's instance is refused unless made and confirmed so
    publish(cp, node, devices, 3)
    doc["changes"] = [g0]
    g0["proposed"]["placements"] = [{"profile": "7g.141gb", "profile_id": 0, "start": 0, "size": 8}]
    g0["proposed"]["layout"] = {"7g.141gb": 1}
    proposal.write_text(json.dumps(doc))
    result = run([*base, "--check", "--allow-disturb"])
    assert result.exit_code == 2, result.output
    assert f"would disturb running claims: {node} GPU 0: {NS}/train" in result.output
