# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Filters of the GPU-stack upgrade plan (playbooks/upgrade_gpu_stack.yml)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_stack_plan
short_description: Plan an upgrade of the NVIDIA driver, container toolkit and DRA driver chart
version_added: 0.1.0
description:
  - Plans, per GPU node, the change of the NVIDIA driver and the NVIDIA Container Toolkit and,
    for the cluster, of the NVIDIA DRA driver chart, with the collection's module_utils
    C(upgrade.gpu_stack) (C(plan_from_inputs)); changes nothing.
  - Lists the refusals in C(refused) (each with the variable, the value, the reason, the fix and
    the upstream source of the rule) rather than failing, so that every one is shown.
  - Fails naming the field and the fix for a state it cannot read or bad batch or floor values.
  - C(gpu_stack_state) builds the state from what the playbook read (C(state_from_facts)).
options:
  _input:
    description: The inputs, as documented for C(upgrade.gpu_stack.plan_from_inputs).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: GPU stack | Plan
  ansible.builtin.set_fact:
    gpu_stack_plan: >-
      {{ {'state': {'kubernetes_version': '1.36.3', 'chart': 'nvidia-dra-driver-gpu-25.12.0',
                    'nodes': []},
          'targets': {'driver': '580.159.04', 'toolkit': '1.20.2', 'chart': '0.4.0'}}
         | gpufleet.cluster.gpu_stack_plan }}
"""

RETURN = r"""
_value:
  description: C(kubernetes_version), C(target), C(up_to_date), C(chart), C(nodes), C(waves),
    C(batch_size), C(min_gpu_available_percent), C(warnings), C(refused).
  type: dict
"""

from ansible.errors import AnsibleFilterError


def gpu_stack_plan(inputs):
    """The plan's dict (RETURN); AnsibleFilterError with the reason and the fix otherwise."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import gpu_stack as gs
    from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.input import (
        UpgradePlanError,
    )

    if not isinstance(inputs, dict):
        raise AnsibleFilterError(f"gpu_stack_plan takes a dict, not {type(inputs).__name__}")
    try:
        return gs.plan_from_inputs(inputs)
    except UpgradePlanError as exc:
        raise AnsibleFilterError(f"{exc.reason} Fix: {exc.fix}") from exc


def gpu_stack_state(hosts, kubernetes_version, release=None, nodes=None):
    """The stack state from what the playbook read (upgrade.gpu_stack.state_from_facts)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import gpu_stack as gs

    return gs.state_from_facts(
        str(kubernetes_version or ""), release or None, list(hosts or []), list(nodes or [])
    )


class FilterModule:
    def filters(self):
        return {"gpu_stack_plan": gpu_stack_plan, "gpu_stack_state": gpu_stack_state}
