"""Filters of the dra_driver role: the NVIDIA DRA driver chart plan and its checks."""

from __future__ import annotations

DOCUMENTATION = r"""
name: dra_driver_plan
short_description: Chart, Helm values and refusals for the NVIDIA DRA driver
version_added: 0.1.0
description:
  - Chooses the chart (C(nvidia-dra-driver-gpu) up to 25.12 from NGC, C(dra-driver-nvidia-gpu)
    from 0.4 at C(oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu), or a
    local chart) and builds its values from the role's variables, with the collection's
    module_utils C(dra_driver.values).
  - Fails naming the variable, the value and the fix for a refused input (Kubernetes release
    below the chart's kubeVersion or the documented minimum, a known-bad release, mutually
    exclusive driver feature gates, a gate the chart release predates, C(nvidiaCtkPath), the
    C(default) namespace, a downgrade from 0.4 to 25.x).
  - The other filters of this file are C(dra_driver_node_problems),
    C(dra_driver_daemonset_verdict), C(dra_driver_expected_devices),
    C(dra_driver_slice_verdict), C(dra_driver_root) (the chart's C(nvidiaDriverRoot) alone,
    from C(gpu_operator) and C(nvidia_driver_root), for the validate role) and
    C(dra_driver_root_search_items) (the paths under the driver root where the kubelet plugin
    looks for C(libnvidia-ml.so.1) and C(nvidia-smi), in its order, from module_utils
    C(dra_driver.driver_root)) and C(dra_driver_chart_drivers) (the DRA drivers whose
    kubelet plugins run with a driver's; both of NVIDIA's chart for C(gpu.nvidia.com)).
options:
  _input:
    description: The inputs, as documented for C(dra_driver.values.plan).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: DRA driver | Plan
  ansible.builtin.set_fact:
    dra_driver_plan_result: >-
      {{ {'chart_version': '0.4.0', 'kubernetes_version': '1.37.2',
          'namespace': 'nvidia-dra-driver-gpu'} | gpufleet.cluster.dra_driver_plan }}
"""

RETURN = r"""
_value:
  description: C(chart) (name, ref, version, repo_url, local, stand_in), C(values), C(action),
    C(installed), C(name_override), C(resource_api_version), C(device_classes),
    C(dynamic_mig), C(warnings).
  type: dict
"""

from ansible.errors import AnsibleFilterError


def _fail(exc):
    raise AnsibleFilterError(str(exc)) from exc


def dra_driver_plan(inputs):
    """The plan dict described in RETURN; AnsibleFilterError with the refusal otherwise."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

    if not isinstance(inputs, dict):
        raise AnsibleFilterError(f"dra_driver_plan takes a dict, not {type(inputs).__name__}")
    try:
        return ddv.plan(inputs).to_dict()
    except ddc.DraDriverError as exc:
        _fail(exc)


def dra_driver_root(inputs):
    """``nvidiaDriverRoot`` for ``{gpu_operator, nvidia_driver_root}`` (see
    dra_driver_values.driver_root); AnsibleFilterError with the refusal otherwise."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

    if not isinstance(inputs, dict):
        raise AnsibleFilterError(f"dra_driver_root takes a dict, not {type(inputs).__name__}")
    try:
        return ddv.driver_root(inputs)
    except ddc.DraDriverError as exc:
        _fail(exc)


def dra_driver_root_search_items(names):
    """Paths relative to the driver root where the kubelet plugin looks for each of
    ``names`` (``libnvidia-ml.so.1``, ``nvidia-smi``), in its order; AnsibleFilterError for
    another name."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
        driver_root as ddr,
    )

    if not isinstance(names, (list, tuple)):
        raise AnsibleFilterError(
            f"dra_driver_root_search_items takes a list, not {type(names).__name__}"
        )
    try:
        return ddr.search_items([str(n) for n in names])
    except ValueError as exc:
        _fail(exc)


def dra_driver_chart_drivers(driver):
    """The DRA drivers whose kubelet plugins run with ``driver``'s (dra_driver.chart
    .chart_drivers), as a list."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc

    return list(ddc.chart_drivers(str(driver or "")))


def dra_driver_node_problems(
    nodes, gpu_nodes, values, legacy_chart=False, coexist=False, device_plugin_nodes=None
):
    """List of problems of the GPU nodes: ``gpu_nodes`` those of the DRA pools,
    ``device_plugin_nodes`` those of the device-plugin pools (see
    dra_driver.nodes.node_problems)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import nodes as ddn

    return ddn.node_problems(
        list(nodes or []),
        list(gpu_nodes or []),
        dict(values or {}),
        legacy_chart=bool(legacy_chart),
        coexist_with_device_plugin=bool(coexist),
        device_plugin_nodes=list(device_plugin_nodes or []),
    )


def dra_driver_daemonset_verdict(daemonsets, release, namespace, gpu_nodes, nodes, name=""):
    """``{ok, final, message}`` for the release's kubelet-plugin DaemonSet."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import health as ddh

    ds = ddh.find_kubelet_plugin_daemonset(list(daemonsets or []), str(release), str(name or ""))
    return ddh.daemonset_verdict(
        ds, list(gpu_nodes or []), list(nodes or []), release=str(release), namespace=str(namespace)
    )


def dra_driver_expected_devices(pairs):
    """``[[node, gpufleet_gpus or None], ...]`` -> ``{node: count or None}``."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import health as ddh

    out = {}
    for pair in pairs or []:
        node, gpus = pair[0], pair[1] if len(pair) > 1 else None
        out[str(node)] = ddh.expected_devices(gpus if isinstance(gpus, list) else None)
    return out


def dra_driver_slice_verdict(slices, expected, dynamic_mig=False):
    """``{ok, devices, problems}`` for the ResourceSlices of gpu.nvidia.com."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import health as ddh

    return ddh.slice_verdict(
        list(slices or []), dict(expected or {}), dynamic_mig=bool(dynamic_mig)
    )


class FilterModule:
    def filters(self):
        return {
            "dra_driver_plan": dra_driver_plan,
            "dra_driver_root": dra_driver_root,
            "dra_driver_root_search_items": dra_driver_root_search_items,
            "dra_driver_chart_drivers": dra_driver_chart_drivers,
            "dra_driver_node_problems": dra_driver_node_problems,
            "dra_driver_daemonset_verdict": dra_driver_daemonset_verdict,
            "dra_driver_expected_devices": dra_driver_expected_devices,
            "dra_driver_slice_verdict": dra_driver_slice_verdict,
        }
