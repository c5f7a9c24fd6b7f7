"""Filters of the device_plugin role: NVIDIA's device plugin chart plan and its checks."""

from __future__ import annotations

DOCUMENTATION = r"""
name: device_plugin_plan
short_description: Chart, Helm values and refusals for NVIDIA's device plugin
version_added: 0.1.0
description:
  - Chooses the chart (C(nvidia-device-plugin) from U(https://nvidia.github.io/k8s-device-plugin),
    a local copy, or a local chart that stands in for it) and builds its values from the
    role's variables, with the collection's module_utils C(device_plugin.values), namely the
    DaemonSet's node selector (the GPU labels and C(gpufleet.io/gpu-path=device-plugin)), a
    required node affinity of the same labels in place of the chart's, tolerations, and the
    plugin's settings.
  - Fails naming the variable, the value and the fix for a refused input (a chart version that
    is not one or is older than 0.17, an unknown MIG, device list or device ID strategy, a
    relative path, a selector of another GPU path, the C(default) namespace, a C(namespace)
    value, both C(config.name) and C(config.map), several configs without a default, a
    config whose C(flags.migStrategy) is not the MIG strategy the plugin gets as
    C(MIG_STRATEGY), which it takes over its config file).
  - The other filters of this file are C(device_plugin_decision) (whether the inventory has a
    device-plugin pool, with the message the role shows), C(device_plugin_node_problems),
    C(device_plugin_daemonset_verdict) and C(device_plugin_advertised_verdict).
options:
  _input:
    description: The inputs, as documented for C(device_plugin.values.plan).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Device plugin | Plan
  ansible.builtin.set_fact:
    device_plugin_plan_result: >-
      {{ {'chart_version': '0.17.4', 'release_name': 'nvidia-device-plugin',
          'namespace': 'nvidia-device-plugin',
          'node_selector': {'nvidia.com/gpu.present': 'true'}}
         | gpufleet.cluster.device_plugin_plan }}
"""

RETURN = r"""
_value:
  description: C(chart) (name, ref, version, repo_url, local, stand_in), C(chart_version),
    C(values), C(node_selector), C(action), C(installed), C(mig_strategy), C(warnings).
  type: dict
"""

from ansible.errors import AnsibleFilterError


def device_plugin_plan(inputs):
    """The plan dict described in RETURN; AnsibleFilterError with the refusal otherwise."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import chart as dpc
    from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import (
        values as dpv,
    )

    if not isinstance(inputs, dict):
        raise AnsibleFilterError(f"device_plugin_plan takes a dict, not {type(inputs).__name__}")
    try:
        return dpv.plan(inputs).to_dict()
    except dpc.DevicePluginError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def device_plugin_decision(pools, group):
    """``{run, message}`` from the GPU hosts by path (``gpu_path_pools``)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import (
        values as dpv,
    )

    if not isinstance(pools, dict):
        raise AnsibleFilterError(
            f"device_plugin_decision takes the dict of gpu_path_pools, not {type(pools).__name__}"
        )
    return dpv.pool_decision(pools, str(group))


def device_plugin_node_problems(nodes, plugin_nodes, dra_nodes, values, stand_in=False):
    """List of problems of the GPU nodes (see device_plugin.nodes.node_problems)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import nodes as dpn

    return dpn.node_problems(
        list(nodes or []),
        list(plugin_nodes or []),
        list(dra_nodes or []),
        dict(values or {}),
        stand_in=bool(stand_in),
    )


def device_plugin_daemonset_verdict(daemonsets, release, namespace, plugin_nodes, nodes, name=""):
    """``{ok, final, message}`` for the release's device-plugin DaemonSet."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import (
        health as dph,
    )

    ds = dph.find_daemonset(list(daemonsets or []), str(release), str(name or ""))
    return dph.daemonset_verdict(
        ds,
        list(plugin_nodes or []),
        list(nodes or []),
        release=str(release),
        namespace=str(namespace),
    )


def device_plugin_advertised_verdict(nodes, plugin_nodes, dra_nodes, mig_strategy="none"):
    """``{ok, gpus, problems}`` of what the GPU nodes advertise."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import (
        health as dph,
    )

    return dph.advertised_verdict(
        list(nodes or []), list(plugin_nodes or []), list(dra_nodes or []), str(mig_strategy)
    )


class FilterModule:
    def filters(self):
        return {
            "device_plugin_plan": device_plugin_plan,
            "device_plugin_decision": device_plugin_decision,
            "device_plugin_node_problems": device_plugin_node_problems,
            "device_plugin_daemonset_verdict": device_plugin_daemonset_verdict,
            "device_plugin_advertised_verdict": device_plugin_advertised_verdict,
        }
