#!/usr/bin/env python3
"""Ansible inventory of the gpufleet lab (`gpufleet lab up`).

Reads the lab's state file, ${GPUFLEET_CACHE:-~/.cache/gpufleet}/labs/<name>/state.json
(<name> is $GPUFLEET_LAB_NAME, default gpufleet-lab), written
by `gpufleet lab up`: the node containers, their addresses, and the variables the lab
playbooks need (release, binaries, images, kubeconfig). Before the lab exists it
describes the default lab (one control-plane node, two GPU workers) so that
`ansible-inventory -i inventory/lab --graph` shows its shape. Every variable's strings are
marked as data (the collection's plugins/module_utils/common/unsafe.py, loaded by path):
Ansible templates an inventory script's variables otherwise. Standard library only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

#: The collection's root (this file is inventory/lab/lab_nodes.py in it).
COLLECTION = Path(__file__).resolve().parents[2]


def unsafe_module():
    """plugins/module_utils/common/unsafe.py of the collection, loaded by path (the
    interpreter that runs this script need not have the collection importable)."""
    path = COLLECTION / "plugins" / "module_utils" / "common" / "unsafe.py"
    spec = importlib.util.spec_from_file_location("gpufleet_lab_inventory_unsafe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: A lab's name (gpufleet/lab/cluster.py, lab_name) and a node's: Kubernetes node names
#: (DNS subdomains). A host name is not a variable Ansible lets one mark as data: a name
#: of another shape (a ``{{ }}``) is refused.
LAB_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?")
NODE_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?")


def lab_name() -> str:
    """``$GPUFLEET_LAB_NAME`` or ``gpufleet-lab``; ValueError for another shape."""
    name = os.environ.get("GPUFLEET_LAB_NAME", "gpufleet-lab")
    if not LAB_NAME.fullmatch(name):
        raise ValueError(
            f"GPUFLEET_LAB_NAME={name[:80]!r}: use 1-32 lowercase letters, digits and '-'"
        )
    return name


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


#: The GPU pools of a lab with a device-plugin pool (``gpufleet lab up
#: --device-plugin-workers N``): the workers it brought up on DRA, and those on the device
#: plugin, each pool a child of its ``gpu_path_*`` group. A lab without device-plugin
#: workers has no pool groups: every GPU node is on DRA.
POOLS = (("lab_pool_1", "dra"), ("lab_pool_2", "device-plugin"))


def path_groups(gpu_nodes: list[dict]) -> dict:
    """The pool groups and the ``gpu_path_*`` groups that hold them, for GPU worker entries
    of the state (``gpu_path``: ``dra`` or ``device-plugin``, absent before paths were
    recorded: ``dra``). Empty when no worker is on the device plugin."""
    paths = [n.get("gpu_path") or "dra" for n in gpu_nodes]
    if "device-plugin" not in paths:
        return {}
    out = {}
    for pool, path in POOLS:
        members = [n["name"] for n, p in zip(gpu_nodes, paths, strict=True) if p == path]
        if members:
            out[pool] = {"hosts": members}
            out["gpu_path_" + path.replace("-", "_")] = {"children": [pool]}
    return out


def check_shape(state: object) -> None:
    """ValueError unless ``state`` has the shape `gpufleet lab up` writes: a mapping whose
    ``nodes`` is a list of mappings, each with a ``role`` and an ``ip`` that are strings,
    and whose ``vars`` (if any) is a mapping."""
    nodes = state.get("nodes") if isinstance(state, dict) else None
    fields = ("role", "ip")
    if (
        not isinstance(nodes, list)
        or not isinstance(state.get("vars", {}), dict)
        or not all(
            isinstance(n, dict) and all(isinstance(n.get(k), str) for k in fields) for n in nodes
        )
    ):
        raise ValueError(
            f"the lab state {state_path()} is not what `gpufleet lab up` writes (nodes, each "
            "with a name, role and ip; vars a mapping); fix: remove the lab with "
            "`gpufleet lab down` and bring it up again"
        )


def inventory(state: dict) -> dict:
    """The inventory of the lab ``state`` describes. ValueError for a state of another
    shape (``check_shape``) and for a node whose name is not a Kubernetes node name."""
    check_shape(state)
    for n in state["nodes"]:
        if not isinstance(n.get("name"), str) or not NODE_NAME.fullmatch(n["name"]):
            raise ValueError(
                f"node name {str(n.get('name'))[:80]!r} is not a Kubernetes node name "
                "(lowercase letters, digits, '-' and '.'); fix: remove the lab with "
                "`gpufleet lab down` and bring it up again"
            )
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
            if n.get("gpu_path") not in (None, "", "dra", "device-plugin"):
                raise ValueError(
                    f"node {n['name']}: gpu_path {str(n['gpu_path'])[:80]!r} is not a GPU "
                    "path (dra, device-plugin); fix: remove the lab with `gpufleet lab down` "
                    "and bring it up again"
                )
        hostvars[n["name"]] = hv
    return {
        "_meta": {"hostvars": hostvars},
        "all": {"children": ["k8s_cluster"], "vars": state.get("vars", {})},
        "k8s_cluster": {"children": ["kube_control_plane", "kube_node"]},
        "kube_control_plane": {"hosts": cp},
        "kube_node": {"hosts": gpu, "children": ["gpu_nodes"]},
        "gpu_nodes": {"hosts": gpu},
        **path_groups([n for n in state["nodes"] if n["role"] == "gpu-worker"]),
    }


def as_data(inv: dict) -> dict:
    """``inv`` with the values of ``all.vars`` and of each host's variables marked as data."""
    mark = unsafe_module().mark_unsafe
    out = dict(inv)
    out["all"] = {**inv["all"], "vars": mark(inv["all"]["vars"], "lab state vars")}
    out["_meta"] = {
        "hostvars": {h: mark(hv, f"host {h}") for h, hv in inv["_meta"]["hostvars"].items()}
    }
    return out


def main(argv: list[str]) -> int:
    try:
        inv = as_data(inventory(load_state()))
    except ValueError as err:  # a name or a variable of the state cannot be used as data
        print(f"gpufleet lab inventory: {err}", file=sys.stderr)
        return 1
    if len(argv) > 1 and argv[1] == "--host":
        print(json.dumps(inv["_meta"]["hostvars"].get(argv[2], {})))
    else:
        print(json.dumps(inv, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
