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
  - With O(record), the devices it returns are those the node published before the
    upgrade to the record's target began on it, kept in the node's entry of the report
    until the node is at the target - the most any read of a run of that target found. A
    run that resumes a node whose kubelet was down (the kubelet withdraws the node's
    ResourceSlices until its plugin registers again) so waits for the devices the node
    had, not for none.
  - An API server that does not answer (it may be restarting after the control-plane
    step), or a Node not yet found, is asked again every O(interval) seconds until
    O(timeout); then the module fails naming the server and the cause. So is a refusal
    (401, 403) while the server's C(/readyz) is not C(ok), since a kube-apiserver that
    has just restarted refuses even the cluster's admin until it has read the RBAC
    bindings. A refusal from a ready server fails at once.
  - With O(record), the node's entry in the upgrade report is written first (state
    C(in-progress) as a rule), in the same run, as module C(upgrade_report) writes it.
  - Changes nothing in the cluster.
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
  - gpufleet.cluster.upgrade_node
options:
  driver:
    description: DRA driver whose ResourceSlices are read; empty - none are read.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    details: The Node and its ResourceSlices are read in check mode too; O(record) is not
      written.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Upgrade | Kubelet | Node and its ResourceSlices before the drain
  delegate_to: localhost
  gpufleet.cluster.upgrade_node_state:
    kubeconfig: /etc/kubernetes/admin.conf
    node: gpu-1
    driver: gpu.nvidia.com
    record:
      path: /var/log/gpufleet/upgrade-report.json
      target: 1.37.2
      host: gpu-1
      state: in-progress
      phase: prepare
"""

RETURN = r"""
unschedulable:
  description: The Node's C(spec.unschedulable) (cordoned).
  returned: success
  type: bool
devices:
  description: Devices in the node's ResourceSlices of O(driver) before the upgrade began
    on it (with O(record)), else now; 0 when O(driver) is empty.
  returned: success
  type: int
devices_now:
  description: Devices in the node's ResourceSlices of O(driver) now.
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

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_state
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import (
    node_api as upgrade_api,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import (
    record as upgrade_record,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=upgrade_api.node_module_argspec(driver=dict(type="str", default="")),
        supports_check_mode=True,
    )
    p = module.params
    if p["record"] and not module.check_mode:
        try:
            upgrade_record.write(p["record"]["path"], [p["record"]])
        except OSError as err:
            module.fail_json(msg=f"cannot write the upgrade report {p['record']['path']}: {err}")
    try:
        kube = vk.Kube(p["kubeconfig"], p["context"])
    except vk.KubeError as err:
        module.fail_json(msg=str(err), attempts=0)
    try:
        state, attempts = node_state.retrying(
            lambda: node_state.kube_node_state(kube, p["node"], p["driver"]),
            p["timeout"],
            p["interval"],
            starting=node_state.server_starting(kube),
        )
    except vk.KubeError as err:
        attempts = getattr(err, "attempts", 1)
        module.fail_json(
            msg=f"reading Node {p['node']} and its ResourceSlices from "
            f"{kube.server}: {err} (after {attempts} attempt(s))",
            attempts=attempts,
        )
    # the report is the run's own bookkeeping, not a change to the node or the cluster
    read = {k: state[k] for k in ("unschedulable", "devices", "slices")}
    read["devices_now"] = state["devices"]
    if p["record"] and not module.check_mode:
        record = p["record"]
        try:
            read["devices"] = upgrade_record.devices_before(
                record["path"], record["host"], record["target"], state["devices"]
            )
        except OSError as err:
            module.fail_json(msg=f"cannot write the upgrade report {record['path']}: {err}")
    module.exit_json(changed=False, attempts=attempts, **read)


if __name__ == "__main__":
    main()
