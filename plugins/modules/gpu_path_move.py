#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Move one batch of a GPU pool's nodes to the other GPU path."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_path_move
short_description: Move a batch of GPU nodes between NVIDIA's device plugin and DRA
version_added: "0.1.0"
description:
  - Runs on the control host (role C(gpu_path_migrate)), once per batch of the plan that
    module M(gpufleet.cluster.gpu_path_plan) made. For every node of O(nodes), phase by
    phase - cordon (a node cordoned before stays so); evict the GPU pods on it through the
    Eviction API, which keeps PodDisruptionBudgets (an eviction one refuses is asked again
    until O(evict_timeout)), and wait until they are gone; set the node label
    C(gpufleet.io/gpu-path) to C(moving), which neither advertiser selects, and wait until
    the node advertises no GPU (the device plugin's C(nvidia.com/gpu) at 0, no devices of
    O(driver) in its ResourceSlices); set the label to O(to) and wait until the node
    advertises its GPUs that way; uncordon.
  - At no moment does a node advertise a GPU both ways; a node seen doing so fails the
    batch at once.
  - A batch that fails is put back - each node's label as it was, its old advertiser
    waited for, the cordon this run made undone - and the module fails naming node, phase
    and cause. Evicted pods are made again by their controllers.
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
  nodes:
    description: Kubernetes node names of the batch (at least one).
    type: list
    elements: str
    required: true
  to:
    description: The path to move the nodes to.
    type: str
    required: true
    choices: [dra, device-plugin]
  driver:
    description: The DRA driver whose ResourceSlices publish the GPUs.
    type: str
    default: gpu.nvidia.com
  evict_timeout:
    description: Seconds for the GPU pods of a node to be evicted and gone.
    type: int
    default: 600
  advertise_timeout:
    description: Seconds for a node to stop advertising its GPUs, and again to advertise
      them the new way.
    type: int
    default: 300
  interval:
    description: Seconds between two reads of a node while waiting (a finite number above 0).
    type: float
    default: 2
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: gpufleet.cluster.gpu_path_plan
"""

EXAMPLES = r"""
- name: Move the first batch to DRA
  delegate_to: localhost
  run_once: true
  gpufleet.cluster.gpu_path_move:
    nodes: [h200-01, h200-02]
    to: dra
"""

RETURN = r"""
nodes:
  description:
    - Per node - C(node), C(was_cordoned), C(label_before), the C(phase) reached, the pods
      C(evicted) (C(namespace/name)) and the C(seconds) of each phase.
  returned: always
  type: list
  elements: dict
restored:
  description: On failure, whether every node of the batch was put back as it was.
  returned: failure
  type: bool
phase:
  description: On failure, the phase that failed (read, cordon, evict, stop, start,
    uncordon).
  returned: failure
  type: str
"""

import math

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.migrate import move as mm


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **vk.kube_auth_argspec(),
            "nodes": {"type": "list", "elements": "str", "required": True},
            "to": {"type": "str", "required": True, "choices": list(gp.PATHS)},
            "driver": {"type": "str", "default": ddc.NVIDIA_DRIVER},
            "evict_timeout": {"type": "int", "default": 600},
            "advertise_timeout": {"type": "int", "default": 300},
            "interval": {"type": "float", "default": 2},
        },
        supports_check_mode=False,
    )
    p = module.params
    if not p["nodes"]:
        module.fail_json(
            msg="nodes is empty; fix: give the Node names of one batch of the plan", nodes=[]
        )
    for name in p["nodes"]:
        why = k8s_names.dns1123_subdomain(name)
        if why:
            module.fail_json(msg=f"node name {name!r} {why}; fix: give the Node's name", nodes=[])
    why = k8s_names.driver_name(p["driver"])
    if why:
        module.fail_json(
            msg=f"driver {p['driver']!r} {why}; fix: give the DRA driver's name, such as "
            f"{ddc.NVIDIA_DRIVER}",
            nodes=[],
        )
    for option in ("evict_timeout", "advertise_timeout", "interval"):
        if not math.isfinite(p[option]) or p[option] <= 0:
            module.fail_json(
                msg=f"{option} {p[option]} is not a number of seconds above 0; fix: give seconds",
                nodes=[],
            )
    try:
        kube = vk.Kube(p["kubeconfig"], p["context"])
    except vk.KubeError as err:
        module.fail_json(msg=str(err), nodes=[])
    try:
        records = mm.move_batch(
            kube.request,
            p["nodes"],
            p["to"],
            driver=p["driver"],
            evict_timeout=p["evict_timeout"],
            advertise_timeout=p["advertise_timeout"],
            clock=mm.Clock(interval=p["interval"]),
        )
    except mm.MoveFailed as err:
        back = "put back as it was" if err.restored else "NOT all put back: see each node"
        module.fail_json(
            msg=f"moving {', '.join(p['nodes'])} to {p['to']}: {err} (phase {err.phase}); "
            f"the batch was {back}",
            nodes=[r.to_dict() for r in err.records],
            restored=err.restored,
            phase=err.phase,
        )
    module.exit_json(changed=True, nodes=[r.to_dict() for r in records])


if __name__ == "__main__":
    main()
