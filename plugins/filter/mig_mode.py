"""Filters of the MIG mode move (roles/mig/tasks/mode.yml, module_utils dra_driver.mig_mode):
where a node stands, and the claims the kubelet has not unprepared on it."""

from __future__ import annotations

DOCUMENTATION = r"""
name: mig_mode_node
short_description: Where a GPU node stands in a move between static and dynamic MIG
version_added: 0.1.0
description:
  - Reads the DRA kubelet-plugin pods and the ResourceSlices listed for a node and says which
    MIG mode the plugin runs (C(dynamic) when NVIDIA's C(FEATURE_GATES) has C(DynamicMIG=true),
    or the lab's simulator has C(--dynamic-mig)), which the slices publish (C(dynamic) with
    shared counters, C(static) with devices only, C(none)), and whether both are the target.
  - Filter C(mig_mode_claims_on_node) takes the ResourceClaims and returns
    C(namespace/name) of each claim with a device of the driver from the node's pool that a
    pod still reserves.
  - Filter C(mig_mode_nodes_behind) takes every kubelet-plugin pod and the target and returns
    the nodes whose plugin pod does not run the target yet (or is being deleted).
  - Filter C(mig_mode_batch_problem) takes C(mig_mode_batch) and returns why it is not a
    batch (a count from 1, or a percentage from 1% to 100%), or an empty string.
  - Fails naming the variable C(mig_mode_to) and the fix when the target is not C(dynamic) or
    C(static).
options:
  _input:
    description: The kubelet-plugin pods of the node (k8s_info resources), or for
      C(mig_mode_claims_on_node) the ResourceClaims.
    type: list
    elements: dict
    required: true
  node:
    description: The Kubernetes node name.
    type: str
    required: true
  slices:
    description: ResourceSlices (k8s_info resources); C(mig_mode_node) only.
    type: list
    elements: dict
  driver:
    description: The DRA driver name, C(gpu.nvidia.com).
    type: str
    required: true
  target:
    description: C(dynamic) or C(static); C(mig_mode_node) only.
    type: str
"""

EXAMPLES = r"""
- name: MIG mode | Where the node stands
  ansible.builtin.set_fact:
    mig__mode_state: >-
      {{ mig__mode_pods.resources | gpufleet.cluster.mig_mode_node(
           mig__node, mig__mode_slices.resources, 'gpu.nvidia.com', 'dynamic') }}
"""

RETURN = r"""
_value:
  description:
    - C(mig_mode_node) gives C(node), C(plugin) (C(dynamic), C(static), C(mixed) or C(none)),
      C(pods), C(slices) and C(done); C(mig_mode_claims_on_node) a sorted list of
      C(namespace/name).
  type: raw
"""

from ansible.errors import AnsibleFilterError


def mig_mode_node(pods, node, slices, driver, target):
    """See dra_driver.mig_mode.node_state; AnsibleFilterError for a bad target."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_list
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import mig_mode as mm

    try:
        return mm.node_state(str(node), as_list(pods), as_list(slices), str(driver), target)
    except mm.MigModeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def mig_mode_nodes_behind(pods, target):
    """See dra_driver.mig_mode.nodes_behind; AnsibleFilterError for a bad target."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_list
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import mig_mode as mm

    try:
        return mm.nodes_behind(as_list(pods), target)
    except mm.MigModeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def mig_mode_batch_problem(value):
    """See dra_driver.mig_mode.check_batch: its message, or '' for a batch it takes."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import mig_mode as mm

    try:
        mm.check_batch(value)
    except mm.MigModeError as exc:
        return str(exc)
    return ""


def mig_mode_claims_on_node(claims, node, driver):
    """See dra_driver.mig_mode.claims_on_node."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_list
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import mig_mode as mm

    return mm.claims_on_node(as_list(claims), str(node), str(driver))


class FilterModule:
    def filters(self):
        return {
            "mig_mode_node": mig_mode_node,
            "mig_mode_claims_on_node": mig_mode_claims_on_node,
            "mig_mode_nodes_behind": mig_mode_nodes_behind,
            "mig_mode_batch_problem": mig_mode_batch_problem,
        }
