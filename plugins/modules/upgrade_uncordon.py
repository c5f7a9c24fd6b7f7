#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Wait for a node's devices to come back, uncordon it from the control host and record it
in the upgrade report, in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: upgrade_uncordon
short_description: Wait for a node's devices, uncordon it and record it in the upgrade report
version_added: "0.1.0"
description:
  - Runs on the control host (the C(upgrade) role) once a node is upgraded, and after a
    drain that failed.
  - With O(driver) and O(devices), it first waits until the node's ResourceSlices of
    O(driver) publish at least O(devices) devices again (the DRA kubelet plugin
    republishes them after the kubelet restart), asking every O(poll) seconds for up to
    O(devices_timeout) seconds (ResourceSlices in the most stable C(resource.k8s.io)
    version served); then it fails with RV(failed_step) C(devices) and nothing
    uncordoned. O(devices_since) (epoch seconds the wait for the plugin began) makes the
    recorded timing C(dra_plugin_s) run from then to when the devices were back.
  - With O(uncordon), it reads the Node and, when it is cordoned
    (C(spec.unschedulable)), removes the mark with a JSON merge patch, the change
    C(kubectl uncordon) makes; the drain itself stays C(kubectl drain).
  - An API server that does not answer (it may be restarting), or answers with a server
    error, is asked again every O(interval) seconds until O(timeout); then the module fails
    naming the server and the cause. So is a refusal (401, 403) while the server's
    C(/readyz) is not C(ok), since a kube-apiserver that has just restarted refuses even the
    cluster's admin until it has read the RBAC bindings. A refusal from a ready server
    fails at once. The credentials of O(kubeconfig) must allow patching
    Nodes (the cluster's admin kubeconfig does).
  - With O(record), the node's entry in the upgrade report is written after the uncordon
    (and only if it succeeded), as module C(upgrade_report) writes it.
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
    description: DRA driver whose ResourceSlices are waited for; empty - no wait.
    type: str
    default: ""
  devices:
    description: Devices the node's ResourceSlices must publish (as many as before the upgrade).
    type: int
    default: 0
  driver_version:
    description:
      - Count only the devices whose C(driverVersion) attribute is this NVIDIA driver
        release (C(580.159.04), or as published, C(580.159.4)), so that the wait ends when
        the DRA kubelet plugin republished them after a driver change; empty - any.
    type: str
    default: ""
  devices_timeout:
    description: Seconds to wait for O(devices).
    type: int
    default: 300
  devices_since:
    description: When the wait for the DRA kubelet plugin began (epoch seconds).
    type: float
  poll:
    description: Seconds between two reads of the ResourceSlices.
    type: float
    default: 1
  uncordon:
    description: Whether to uncordon; false - only O(record) is written.
    type: bool
    default: true
attributes:
  check_mode:
    support: none
    details: The module patches the Node and writes the report, so it does not run in check
      mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Upgrade | Kubelet | Uncordon and record the node upgraded
  delegate_to: localhost
  gpufleet.cluster.upgrade_uncordon:
    kubeconfig: /etc/kubernetes/admin.conf
    node: gpu-1
    record:
      path: /var/log/gpufleet/upgrade-report.json
      target: 1.37.2
      host: gpu-1
      state: upgraded
      phase: done
      cordoned: false
"""

RETURN = r"""
devices:
  description: Devices the node's ResourceSlices publish (with O(driver)).
  returned: when O(driver) and O(devices) are given
  type: int
failed_step:
  description: On failure, C(devices) (the wait), C(uncordon) or C(record).
  returned: failure
  type: str
uncordoned:
  description: Whether the Node was cordoned and this run uncordoned it.
  returned: success
  type: bool
attempts:
  description: Request rounds the uncordon took (0 without O(uncordon)).
  returned: always
  type: int
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_state
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import (
    driver as nvidia_driver,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import (
    node_api as upgrade_api,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import (
    record as upgrade_record,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=upgrade_api.node_module_argspec(
            uncordon=dict(type="bool", default=True),
            driver=dict(type="str", default=""),
            devices=dict(type="int", default=0),
            devices_timeout=dict(type="int", default=300),
            devices_since=dict(type="float"),
            driver_version=dict(type="str", default=""),
            poll=dict(type="float", default=1),
        ),
        supports_check_mode=False,
    )
    p = module.params
    uncordoned, attempts, result = False, 0, {}
    kube = None
    if p["uncordon"] or (p["driver"] and p["devices"] > 0):
        try:
            kube = vk.Kube(p["kubeconfig"], p["context"])
        except vk.KubeError as err:
            module.fail_json(msg=str(err), attempts=0, failed_step="uncordon")
    record = dict(p["record"] or {})
    try:
        published = nvidia_driver.published_driver_version(p["driver_version"])
    except nvidia_driver.PlanError as err:
        module.fail_json(msg=str(err), attempts=0, failed_step="devices")
    if kube is not None and p["driver"] and p["devices"] > 0:
        try:
            seen, _unused = upgrade_api.wait_devices(
                lambda: node_state.kube_node_state(kube, p["node"], p["driver"], published),
                p["devices"],
                p["devices_timeout"],
                p["poll"],
            )
        except (upgrade_api.DevicesNotBack, vk.KubeError) as err:
            module.fail_json(
                msg=f"ResourceSlices of {p['driver']} on {p['node']} ({kube.server}): {err}",
                devices=getattr(err, "devices", None),
                failed_step="devices",
            )
        result["devices"] = seen
        if p["devices_since"] is not None and record:
            waited = time.time() - p["devices_since"]
            record["timings"] = {**(record.get("timings") or {}), "dra_plugin_s": waited}
    if p["uncordon"] and kube is not None:
        try:
            uncordoned, attempts = node_state.retrying(
                lambda: node_state.uncordon(kube.request, p["node"]),
                p["timeout"],
                p["interval"],
                starting=node_state.server_starting(kube),
            )
        except vk.KubeError as err:
            attempts = getattr(err, "attempts", 1)
            module.fail_json(
                msg=f"uncordoning Node {p['node']} through {kube.server}: {err} (after "
                f"{attempts} attempt(s)); fix: kubectl uncordon {p['node']}, with a "
                "kubeconfig allowed to patch Nodes",
                attempts=attempts,
                failed_step="uncordon",
                **result,
            )
    if record:
        try:
            upgrade_record.write(record["path"], [record])
        except OSError as err:
            module.fail_json(
                msg=f"cannot write the upgrade report {record['path']}: {err}",
                uncordoned=uncordoned,
                attempts=attempts,
                failed_step="record",
                **result,
            )
    module.exit_json(changed=uncordoned, uncordoned=uncordoned, attempts=attempts, **result)


if __name__ == "__main__":
    main()
