#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Plan the move of a GPU pool from one GPU path to the other."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_path_plan
short_description: Plan moving a GPU pool between NVIDIA's device plugin and DRA
version_added: "0.1.0"
description:
  - Runs on the control host (role C(gpu_path_migrate)). Reads the cluster's version, the
    Nodes of the pool, the pods on them (one list per node, field selector
    C(spec.nodeName)), the ResourceSlices of O(driver) and the DeviceClasses, and returns
    the plan of moving the pool O(pool) to the path O(to) - the nodes in batches of
    O(batch_size), the GPU pods each batch evicts, the DeviceClass that serves each
    extended resource those pods ask for after a move to DRA, and what blocks the move
    (among it, advertisers whose DaemonSets do not select nodes by the path label
    C(gpufleet.io/gpu-path)).
  - The path each host is on now is the one its inventory groups declare
    (C(gpu_path_device_plugin), C(gpu_path_dra); a GPU host in neither is on DRA).
  - Changes nothing.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML
  - kubernetes (the Python client) and urllib3, which it installs
  - msgspec (recommended), which decodes the listed pages faster; without it the
    standard library's json decodes them, to the same result
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.kube_auth
options:
  pool:
    description: The inventory group of the pool's nodes.
    type: str
    required: true
  to:
    description: The path to move the pool to.
    type: str
    required: true
    choices: [dra, device-plugin]
  hosts:
    description:
      - The pool's hosts, each with its Kubernetes node name and its inventory groups.
    type: list
    elements: dict
    required: true
    suboptions:
      host:
        description: Inventory host name.
        type: str
        required: true
      node:
        description: Kubernetes node name.
        type: str
        required: true
      groups:
        description: The host's inventory groups (C(group_names)).
        type: list
        elements: str
        default: []
  batch_size:
    description: Nodes moved at a time.
    type: int
    default: 1
  driver:
    description: The DRA driver whose ResourceSlices publish the GPUs.
    type: str
    default: gpu.nvidia.com
attributes:
  check_mode:
    support: full
    details: The module only reads.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: gpufleet.cluster.gpu_path_move
"""

EXAMPLES = r"""
- name: Plan moving the H200 pool to DRA
  delegate_to: localhost
  run_once: true
  gpufleet.cluster.gpu_path_plan:
    pool: gpu_h200
    to: dra
    batch_size: 2
    hosts:
      - {host: h200-01, node: h200-01, groups: [gpu_nodes, gpu_h200, gpu_path_device_plugin]}
"""

RETURN = r"""
plan:
  description:
    - The plan - C(pool), C(from), C(to), C(batches) (node names per batch), C(nodes) (per
      node its C(host), what it C(advertises) now, its C(batch) and the GPU C(pods) the move
      evicts), C(served_by), C(blocked), C(blockers) (each C(rule), C(node), C(message),
      C(fix)), C(notes), C(evicted_pods) and C(kubernetes_version).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import list_cluster
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.migrate import plan as mp

HOST_OPTIONS = {
    "host": {"type": "str", "required": True},
    "node": {"type": "str", "required": True},
    "groups": {"type": "list", "elements": "str", "default": []},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **vk.kube_auth_argspec(),
            "pool": {"type": "str", "required": True},
            "to": {"type": "str", "required": True, "choices": list(gp.PATHS)},
            "hosts": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": HOST_OPTIONS,
            },
            "batch_size": {"type": "int", "default": 1},
            "driver": {"type": "str", "default": ddc.NVIDIA_DRIVER},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not p["hosts"]:
        module.fail_json(
            msg=f"pool {p['pool']} has no hosts; fix: name an inventory group of GPU nodes"
        )
    if p["batch_size"] < 1:
        module.fail_json(
            msg=f"batch_size {p['batch_size']} is below 1; fix: move 1 or more nodes at a time"
        )
    why = k8s_names.driver_name(p["driver"])
    if why:
        module.fail_json(
            msg=f"driver {p['driver']!r} {why}; fix: give the DRA driver's name, such as "
            f"{ddc.NVIDIA_DRIVER}"
        )
    hosts = []
    for h in p["hosts"]:
        paths, unknown = gp.inventory_paths(h["groups"])
        if len(paths) > 1 or unknown:
            named = ", ".join([gp.path_group(x) for x in paths] + unknown)
            module.fail_json(
                msg=f"host {h['host']} of pool {p['pool']} is in {named}; fix: keep it in one "
                f"of {' or '.join(gp.path_group(x) for x in gp.PATHS)} (the preflight role "
                "refuses it too)"
            )
        why = k8s_names.dns1123_subdomain(h["node"])
        if why:
            module.fail_json(
                msg=f"host {h['host']}: its node name {h['node']!r} {why}; fix: set "
                "kubernetes_node_name to the host's Node name"
            )
        hosts.append(mp.PoolHost(h["host"], h["node"], paths[0] if paths else gp.DEFAULT_PATH))
    try:
        kube = vk.Kube(p["kubeconfig"], p["context"])
        listing = list_cluster(
            kube, kinds=("nodes", "resourceslices", "deviceclasses", "daemonsets")
        )
        pods = [
            pod
            for h in hosts
            for pod in kube.list(
                "/api/v1/pods", query=[("fieldSelector", f"spec.nodeName={h.node}")]
            )
        ]
    except vk.KubeError as err:
        module.fail_json(msg=f"reading the cluster: {err}")
    for kind, error in listing.errors.items():
        if kind in ("nodes", "deviceclasses", "daemonsets"):
            module.fail_json(msg=f"listing {kind}: {error}")
    version = str((listing.version or {}).get("gitVersion") or "")
    try:
        served = dra_plan.extended_resource_served(version)
    except dra_core.VersionModelError as err:
        served = (False, f"Kubernetes {version} is outside the version model ({err})")
    plan = mp.build_plan(
        p["pool"],
        p["to"],
        hosts,
        list(listing.nodes),
        pods,
        list(listing.slices),
        list(listing.classes),
        batch_size=p["batch_size"],
        drivers=gp.gpu_drivers(p["driver"]),
        extended_resource_served=served,
        daemonsets=list(listing.daemonsets),
    )
    module.exit_json(changed=False, plan={**plan.to_dict(), "kubernetes_version": version})


if __name__ == "__main__":
    main()
