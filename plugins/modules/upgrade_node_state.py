#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Read a node's cordon state and its GPU devices (ResourceSlices) in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: upgrade_node_state
short_description: Read a Node's cordon state and the devices its ResourceSlices publish
version_added: "0.1.0"
description:
  - Runs on the control host before a node is drained (the C(upgrade) role). It sends one
    GET of the Node and one list of the ResourceSlices of O(driver) on it (field selector
    C(spec.nodeName) and C(spec.driver), in the most stable C(resource.k8s.io) version the
    server serves, v1 first). The upgrade uncordons the node afterwards unless it was
    cordoned before, and waits for as many devices as it published before.
  - An API server that does not answer (it may be restarting after the control-plane
    step), or a Node not yet found, is asked again every O(interval) seconds until
    O(timeout); then the module fails naming the server and the cause.
  - Changes nothing.
author:
  - gpufleet maintainers
extends_documentation_fragment:
  - gpufleet.cluster.kube_auth
options:
  node:
    description: The Node's name.
    type: str
    required: true
  driver:
    description: DRA driver whose ResourceSlices are read; empty - none are read.
    type: str
    default: ""
  timeout:
    description: Seconds to keep asking an API server that fails to answer.
    type: int
    default: 60
  interval:
    description: Seconds between two attempts.
    type: float
    default: 5
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Upgrade | Kubelet | Node and its ResourceSlices before the drain
  delegate_to: localhost
  gpufleet.cluster.upgrade_node_state:
    kubeconfig: /etc/kubernetes/admin.conf
    node: gpu-1
    driver: gpu.nvidia.com
"""

RETURN = r"""
unschedulable:
  description: The Node's C(spec.unschedulable) (cordoned).
  returned: success
  type: bool
devices:
  description: Devices in the node's ResourceSlices of O(driver) (0 when O(driver) is empty).
  returned: success
  type: int
slices:
  description: How many ResourceSlices of O(driver) the node has.
  returned: success
  type: int
attempts:
  description: Requests rounds it took (1 when the server answered at once).
  returned: always
  type: int
"""

import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_kube as vk


def node_state(
    get: Callable[[str], Any],
    list_items: Callable[[str, Sequence[tuple[str, Any]]], list[Any]],
    node: str,
    driver: str,
    versions: Sequence[str] = vk.RESOURCE_VERSIONS,
) -> dict[str, Any]:
    """``{unschedulable, devices, slices}`` of ``node``, from ``get(path)`` (the Node) and
    ``list_items(path, query)`` (ResourceSlices, the first of ``versions`` the server
    serves: a 404 tries the next). Raises KubeError as the callables do; a 404 on every
    version reads as no slices (resource.k8s.io not served)."""
    obj = get(f"/api/v1/nodes/{urllib.parse.quote(node, safe='')}")
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    out = {
        "unschedulable": bool(spec.get("unschedulable")) if isinstance(spec, Mapping) else False,
        "devices": 0,
        "slices": 0,
    }
    if not driver:
        return out
    query = [("fieldSelector", f"spec.nodeName={node},spec.driver={driver}")]
    for version in versions:
        try:
            items = list_items(f"/apis/resource.k8s.io/{version}/resourceslices", query)
        except vk.KubeError as err:
            if err.status == 404:
                continue
            raise
        for item in items:
            s = item.get("spec") if isinstance(item, Mapping) else None
            devices = s.get("devices") if isinstance(s, Mapping) else None
            out["devices"] += len(devices) if isinstance(devices, list) else 0
        out["slices"] = len(items)
        break
    return out


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            **vk.kube_auth_argspec(),
            node=dict(type="str", required=True),
            driver=dict(type="str", default=""),
            timeout=dict(type="int", default=60),
            interval=dict(type="float", default=5),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        kube = vk.Kube(p["kubeconfig"], p["context"])
    except vk.KubeError as err:
        module.fail_json(msg=str(err), attempts=0)
    deadline = time.monotonic() + max(p["timeout"], 0)
    attempts = 0
    while True:
        attempts += 1
        try:
            state = node_state(
                kube.get,
                lambda path, query: kube.list(path, query=query),
                p["node"],
                p["driver"],
            )
            module.exit_json(changed=False, attempts=attempts, **state)
        except vk.KubeError as err:
            # no answer, a server error or the Node not (yet) there: ask again
            retry = err.status is None or err.status >= 500 or err.status == 404
            if not retry or time.monotonic() + p["interval"] > deadline:
                module.fail_json(
                    msg=f"reading Node {p['node']} and its ResourceSlices from "
                    f"{kube.server}: {err} (after {attempts} attempt(s))",
                    attempts=attempts,
                )
        time.sleep(p["interval"])


if __name__ == "__main__":
    main()
