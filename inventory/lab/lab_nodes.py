#!/usr/bin/env python3
"""Ansible inventory of the gpufleet lab (`gpufleet lab up`).

Reads the lab's state file, ${GPUFLEET_CACHE:-~/.cache/gpufleet}/labs/<name>/state.json
(<name> is $GPUFLEET_LAB_NAME, default gpufleet-lab), written
by `gpufleet lab up`: the node containers, their addresses, and the variables the lab
playbooks need (release, binaries, images, kubeconfig). Before the lab exists it
describes the default lab (one control-plane node, two GPU workers) so that
`ansible-inventory -i inventory/lab --graph` shows its shape. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def lab_name() -> str:
    return os.environ.get("GPUFLEET_LAB_NAME", "gpufleet-lab")


def default_nodes() -> list[dict]:
    """The default lab's shape: one control-plane node and two GPU workers."""
    name = lab_name()
    return [
        {"name": f"{name}-control-plane", "role": "control-plane", "ip": "10.89.50.10"},
        {"name": f"{name}-gpu-1", "role": "gpu-worker", "ip": "10.89.50.11"},
        {"name": f"{name}-gpu-2", "role": "gpu-worker", "ip": "10.89.50.12"},
    ]


def state_path() -> Path:
    cache = os.environ.get("GPUFLEET_CACHE")
    root = Path(cache).expanduser() if cache else Path.home() / ".cache" / "gpufleet"
    return root / "labs" / lab_name() / "state.json"


def load_state() -> dict:
    path = state_path()
    if path.is_file():
        return json.loads(path.read_text())
    return {"nodes": default_nodes(), "vars": {}}


def inventory(state: dict) -> dict:
    cp = [n["name"] for n in state["nodes"] if n["role"] == "control-plane"]
    gpu = [n["name"] for n in state["nodes"] if n["role"] == "gpu-worker"]
    hostvars = {}
    for n in state["nodes"]:
        hv = {
            "kubernetes_node_name": n["name"],
            "kubeadm_advertise_address": n["ip"],
            "lab_node_ip": n["ip"],
        }
        if n["role"] == "gpu-worker":
            hv["lab_node_gpu_simulator"] = True
            hv["lab_node_gpu_model"] = n.get("gpu_model", "NVIDIA H200")
            hv["lab_node_gpu_count"] = n.get("gpu_count", 1)
        hostvars[n["name"]] = hv
    return {
        "_meta": {"hostvars": hostvars},
        "all": {"children": ["k8s_cluster"], "vars": state.get("vars", {})},
        "k8s_cluster": {"children": ["kube_control_plane", "kube_node"]},
        "kube_control_plane": {"hosts": cp},
        "kube_node": {"hosts": gpu, "children": ["gpu_nodes"]},
        "gpu_nodes": {"hosts": gpu},
    }


def main(argv: list[str]) -> int:
    inv = inventory(load_state())
    if len(argv) > 1 and argv[1] == "--host":
        print(json.dumps(inv["_meta"]["hostvars"].get(argv[2], {})))
    else:
        print(json.dumps(inv, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
