"""``gpufleet upgrade-gpu-stack --plan`` end to end: playbooks/upgrade_gpu_stack.yml in check
mode reads a GPU node (module nvidia_driver_facts on a sysfs and /proc/driver/nvidia/version
laid out as a host's, ``nvidia-ctk --version`` absent), a real kube-apiserver (its release,
the Nodes) and helm (no release of the chart), and plans; the roles' defaults give what no
option gives, and an option names itself in the refusal it causes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpufleet.cli import main
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_OK
from tests.harness.component_flags import kwok_node_manifest
from tests.harness.controlplane import ControlPlane
from tests.integration.conftest import DEFAULT_VERSION

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROC = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build  "
    "(dvs-builder@U16-I3-B03-4-1)  Tue Jul  8 18:13:01 UTC 2025\n"
)


def _create(api: Any, manifest: dict[str, Any]) -> None:
    from kubernetes import client

    client.CoreV1Api(api).create_node(dict(manifest))


def fake_host(root: Path, device: str) -> tuple[Path, Path]:
    """A sysfs with one NVIDIA 3D controller of PCI device ID ``device`` and a /proc
    version file of driver 570.172.08."""
    dev = root / "sys" / "bus" / "pci" / "devices" / "0000:19:00.0"
    dev.mkdir(parents=True)
    for name, value in (("vendor", "0x10de"), ("device", device), ("class", "0x030200")):
        (dev / name).write_text(value + "\n")
    proc = root / "proc-version"
    proc.write_text(PROC)
    return root / "sys", proc


def write_inventory(tmp_path: Path, cp: ControlPlane, helm: Path, device: str) -> Path:
    sysfs, proc = fake_host(tmp_path / "host", device)
    path = tmp_path / "hosts.ini"
    path.write_text(
        "[gpu_nodes]\n"
        "gpu-host-0 kubernetes_node_name=gpu-node-0\n"
        "[all:vars]\n"
        "ansible_connection=local\n"
        'ansible_python_interpreter="{{ ansible_playbook_python }}"\n'
        f"dra_driver_kubeconfig={cp.kubeconfig}\n"
        f"dra_driver_helm={helm}\n"
        f"nvidia_driver_sysfs_root={sysfs}\n"
        f"nvidia_driver_proc_version={proc}\n"
        "nvidia_driver_nvidia_smi=/nonexistent/nvidia-smi\n"
    )
    return path


def test_the_plan_reads_the_host_and_the_cluster_and_refuses_an_unsupported_gpu(
    apiserver: ControlPlane, helm: Path, tmp_path: Path
) -> None:
    cp = apiserver
    cp.create_objects_concurrently(
        [kwok_node_manifest("gpu-node-0", kubelet_version=DEFAULT_VERSION)], _create
    )
    # a Hopper GPU (0x2335, H200): the roles' default targets plan without refusal
    inventory = write_inventory(tmp_path / "hopper", cp, helm, "0x2335")
    result = CliRunner().invoke(
        main, ["upgrade-gpu-stack", "-i", str(inventory), "--plan", "--json"]
    )
    assert result.exit_code == EXIT_OK, result.output[-3000:]
    plan = json.loads(result.stdout)
    (node,) = plan["nodes"]
    assert (node["host"], node["name"]) == ("gpu-host-0", "gpu-node-0")
    assert node["driver"]["current"] == "570.172.08"
    assert node["toolkit"]["current"] is None
    # another release is loaded: reloaded in place after the drain, unless reboots are allowed
    assert node["load"] == "reload"
    assert plan["kubernetes_version"].lstrip("v") == DEFAULT_VERSION
    assert plan["chart"]["current"] is None and plan["chart"]["steps"][0].startswith("helm install")
    assert plan["refused"] == []
    result = CliRunner().invoke(
        main, ["upgrade-gpu-stack", "-i", str(inventory), "--plan", "--json",
               "--components", "driver", "-e", "nvidia_driver_reboot=true"],
    )  # fmt: skip
    assert result.exit_code == EXIT_OK, result.output[-3000:]
    plan = json.loads(result.stdout)
    (node,) = plan["nodes"]
    assert node["load"] == "reboot" and node["toolkit"] == {"current": None, "target": None}
    assert plan["chart"]["position"] == "none" and plan["target"]["kept"] == ["toolkit", "chart"]

    # a Volta GPU (0x1db4, V100) and --driver of branch 590: refused, naming the option
    inventory = write_inventory(tmp_path / "volta", cp, helm, "0x1db4")
    result = CliRunner().invoke(
        main, ["upgrade-gpu-stack", "-i", str(inventory), "--plan", "--driver", "590.44.01"]
    )
    assert result.exit_code == EXIT_CANNOT_RUN, result.output[-3000:]
    said = " ".join(result.stderr.split())
    assert "Error: gpu-host-0: --driver=590.44.01: Volta GPUs are supported up to branch 580" in (
        said
    )
