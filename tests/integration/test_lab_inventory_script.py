"""The lab's dynamic inventory (``inventory/lab/lab_nodes.py``) run as Ansible runs it, on
a lab state file written by the test: no lab is started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_inventory_script_describes_the_lab_groups(tmp_path: Path) -> None:
    state = {
        "nodes": [
            {"name": "l-control-plane", "role": "control-plane", "ip": "10.0.0.10"},
            {"name": "l-gpu-1", "role": "gpu-worker", "ip": "10.0.0.11",
             "gpu_model": "NVIDIA A30", "gpu_count": 2},
        ],
        "vars": {"kubeadm_kubernetes_version": "1.37.2"},
    }  # fmt: skip
    labs = tmp_path / "labs" / "l"
    labs.mkdir(parents=True)
    (labs / "state.json").write_text(json.dumps(state))
    out = subprocess.run(
        [sys.executable, str(REPO / "inventory" / "lab" / "lab_nodes.py"), "--list"],
        env={"GPUFLEET_CACHE": str(tmp_path), "GPUFLEET_LAB_NAME": "l", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    inv = json.loads(out)
    assert inv["kube_control_plane"]["hosts"] == ["l-control-plane"]
    assert inv["gpu_nodes"]["hosts"] == ["l-gpu-1"]
    # every string of a variable is marked as data (Ansible's JSON form of an unsafe string)
    assert inv["all"]["vars"] == {"kubeadm_kubernetes_version": {"__ansible_unsafe": "1.37.2"}}
    hv = inv["_meta"]["hostvars"]["l-gpu-1"]
    assert hv["kubeadm_advertise_address"] == {"__ansible_unsafe": "10.0.0.11"}
    assert hv["lab_node_gpu_model"] == {"__ansible_unsafe": "NVIDIA A30"}
    assert hv["lab_node_gpu_count"] == 2
    assert hv["lab_node_gpu_simulator"] is True
    assert "lab_node_gpu_simulator" not in inv["_meta"]["hostvars"]["l-control-plane"]
