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


def _inventory(tmp_path: Path, nodes: list[dict]) -> subprocess.CompletedProcess[str]:
    labs = tmp_path / "labs" / "l"
    labs.mkdir(parents=True, exist_ok=True)
    (labs / "state.json").write_text(json.dumps({"nodes": nodes, "vars": {}}))
    return subprocess.run(
        [sys.executable, str(REPO / "inventory" / "lab" / "lab_nodes.py"), "--list"],
        env={"GPUFLEET_CACHE": str(tmp_path), "GPUFLEET_LAB_NAME": "l", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def _worker(i: int, path: str | None) -> dict:
    node = {"name": f"l-gpu-{i}", "role": "gpu-worker", "ip": f"10.0.0.{10 + i}"}
    return node if path is None else {**node, "gpu_path": path}


CONTROL_PLANE = {"name": "l-control-plane", "role": "control-plane", "ip": "10.0.0.10"}


def test_a_lab_with_a_device_plugin_pool_has_one_pool_per_path(tmp_path: Path) -> None:
    nodes = [CONTROL_PLANE, _worker(1, "dra"), _worker(2, "device-plugin")]
    inv = json.loads(_inventory(tmp_path, nodes).stdout)
    assert inv["lab_pool_1"] == {"hosts": ["l-gpu-1"]}
    assert inv["lab_pool_2"] == {"hosts": ["l-gpu-2"]}
    assert inv["gpu_path_dra"] == {"children": ["lab_pool_1"]}
    assert inv["gpu_path_device_plugin"] == {"children": ["lab_pool_2"]}
    # Ansible's own reading of it: each worker in one path group
    graph = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-inventory")), "-i",
         str(REPO / "inventory" / "lab" / "lab_nodes.py"), "--graph"],
        env={"GPUFLEET_CACHE": str(tmp_path), "GPUFLEET_LAB_NAME": "l", "PATH": "/usr/bin:/bin",
             "HOME": str(tmp_path)},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "@gpu_path_device_plugin:\n  |  |--@lab_pool_2:\n  |  |  |--l-gpu-2" in graph, graph
    assert "@gpu_path_dra:\n  |  |--@lab_pool_1:\n  |  |  |--l-gpu-1" in graph, graph


@pytest.mark.parametrize("paths", [[None, None], ["dra", "dra"]])
def test_a_lab_without_device_plugin_workers_has_no_pool_groups(
    tmp_path: Path, paths: list[str | None]
) -> None:
    nodes = [CONTROL_PLANE, *(_worker(i, p) for i, p in enumerate(paths, 1))]
    inv = json.loads(_inventory(tmp_path, nodes).stdout)
    assert not [g for g in inv if g.startswith(("lab_pool", "gpu_path"))]


def test_a_state_with_an_unknown_path_is_refused(tmp_path: Path) -> None:
    proc = _inventory(tmp_path, [CONTROL_PLANE, _worker(1, "{{ lookup('pipe', 'id') }}")])
    assert proc.returncode == 1
    assert "is not a GPU path (dra, device-plugin)" in proc.stderr
    assert "gpufleet lab down" in proc.stderr
