#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Record the state of one node in the JSON report of a rolling upgrade."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: upgrade_report
short_description: Record one node's upgrade state in a JSON report file
version_added: "0.1.0"
description:
  - Merges one node's entry into the upgrade report, a JSON file on the control host
    (C(upgrade_report_path)), under an exclusive lock so that the hosts of one batch can
    write at the same time.
  - "The report is data first; C(gpufleet upgrade) and a rerun read it. Shape:
    C({target, updated, nodes: {<host>: {node, state, phase, version, cause, cordoned,
    cordoned_by_upgrade, timings_s, updated}}, events: [...]}) (timestamps in UTC, ISO
    8601; timings in seconds)."
  - C(cordoned_by_upgrade) marks a node that the upgrade drained and left cordoned (a
    failure after the drain); a rerun to the same target resumes it and uncordons it. A
    node cordoned by someone else before the upgrade is never marked.
  - C(state) is one of C(upgraded), C(skipped), C(in-progress), C(failed); a failed node keeps
    its C(phase) (where it stopped) and C(cause) (the error). Timings of one attempt are
    merged into C(timings_s); an C(in-progress) entry starts them afresh.
author:
  - gpufleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  path:
    description: Report file on the control host (its directory is created).
    type: path
    required: true
  target:
    description: The release being upgraded to.
    type: str
    required: true
  host:
    description: Inventory host. One of O(host) and O(hosts) is required.
    type: str
  node:
    description: Kubernetes node name (with O(host)).
    type: str
    default: ""
  hosts:
    description:
      - Several nodes given the same state, phase and cause at once (one file write), each
        C({host, name}) as the upgrade_plan module returns them.
    type: list
    elements: dict
  state:
    description: Where the node stands.
    type: str
    required: true
    choices: [upgraded, skipped, in-progress, failed]
  phase:
    description:
      - The phase reached (drain, kubeadm-upgrade-node, packages, kubelet-restart, ready,
        dra-plugin, uncordon).
    type: str
    default: ""
  cause:
    description: Why the node failed (the task's message).
    type: str
    default: ""
  cordoned:
    description: Whether the node is left cordoned.
    type: bool
  cordoned_by_upgrade:
    description:
      - Whether the upgrade itself left the node cordoned (it drained it); a rerun
        uncordons such a node once it is upgraded. Omitted - the entry keeps its value
        (false for a new entry).
    type: bool
  timings:
    description: Seconds per phase (merged into the node's timings_s).
    type: dict
    default: {}
attributes:
  check_mode:
    support: none
    details: The module writes the report file, so it does not run in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Upgrade | Report the node as failed
  gpufleet.cluster.upgrade_report:
    path: /var/log/gpufleet/upgrade-report.json
    target: 1.37.2
    host: gpu-1
    node: gpu-1
    state: failed
    phase: drain
    cause: "Cannot evict pod as it would violate the pod's disruption budget."
    cordoned: false
  delegate_to: localhost
"""

RETURN = r"""
entry:
  description: The node's entry as written (the last one with O(hosts)).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import (
    record as upgrade_record,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.record import merge, now

__all__ = ["merge", "now"]


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            target=dict(type="str", required=True),
            host=dict(type="str"),
            node=dict(type="str", default=""),
            hosts=dict(type="list", elements="dict"),
            state=dict(type="str", required=True, choices=list(upgrade_record.STATES)),
            phase=dict(type="str", default=""),
            cause=dict(type="str", default=""),
            cordoned=dict(type="bool"),
            cordoned_by_upgrade=dict(type="bool"),
            timings=dict(type="dict", default={}),
        ),
        required_one_of=[("host", "hosts")],
        mutually_exclusive=[("host", "hosts")],
        supports_check_mode=False,
    )
    p = module.params
    if p["host"]:
        records = [p]
    else:
        records = [
            {**p, "host": str(h["host"]), "node": str(h.get("name") or h.get("node") or "")}
            for h in p["hosts"]
        ]
    try:
        entry = upgrade_record.write(p["path"], records)
    except OSError as err:
        module.fail_json(msg=f"cannot write the upgrade report {p['path']}: {err}")
    module.exit_json(changed=True, entry=entry)


if __name__ == "__main__":
    main()
