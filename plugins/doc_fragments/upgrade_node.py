# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The options the upgrade's control-host node modules share (``upgrade_node_state``,
``upgrade_uncordon``): the Node, how long an API server that does not answer is asked
again, and ``record``, the node's entry in the upgrade report written in the same module
run (plugins/module_utils/upgrade/record.py)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  node:
    description: The Node's name.
    type: str
    required: true
  timeout:
    description: Seconds to keep asking an API server that fails to answer (or is not ready).
    type: int
    default: 60
  interval:
    description: Seconds between two attempts.
    type: float
    default: 5
  record:
    description:
      - The node's entry to write in the upgrade report (the fields of module
        C(upgrade_report); O(record.path) the report file), under the report's lock, as
        C(upgrade_report) writes it. Omitted - nothing is written.
    type: dict
    suboptions:
      path:
        description: Report file on the control host.
        type: path
        required: true
      target:
        description: The release being upgraded to.
        type: str
        required: true
      host:
        description: Inventory host.
        type: str
        required: true
      node:
        description: Kubernetes node name.
        type: str
        default: ""
      state:
        description: Where the node stands.
        type: str
        required: true
        choices: [upgraded, skipped, in-progress, failed]
      phase:
        description: The phase reached.
        type: str
        default: ""
      cordoned:
        description: Whether the node is left cordoned; omitted - kept.
        type: bool
      cordoned_by_upgrade:
        description: Whether the upgrade left it cordoned; omitted - kept.
        type: bool
      timings:
        description: Seconds per phase.
        type: dict
        default: {}
      started:
        description:
          - When the node's step began (epoch seconds); the entry's C(node_total_s) is then
            the time up to the write, the module's own work included.
        type: float
"""
