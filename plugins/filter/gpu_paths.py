"""Filters of the GPU path each pool declares in the inventory (module_utils
dra_driver.gpu_paths): the GPU hosts by path, and the path label of each GPU node."""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_path_pools
short_description: The GPU hosts of a group by the GPU path their inventory groups declare
version_added: 0.1.0
description:
  - A GPU pool hands out its GPUs through NVIDIA's device plugin (inventory group
    C(gpu_path_device_plugin)) or through DRA (C(gpu_path_dra)); a GPU host in neither is on
    DRA. Returns the names given, by path.
  - Fails naming the host, its groups and the fix for a host on both paths or in a
    C(gpu_path_*) group that names no path (preflight's C(gpu-path-both) and
    C(gpu-path-unknown)), so that a role run without preflight refuses it too.
  - Filter C(gpu_path_labels) takes the same pairs, with Kubernetes node names, and returns
    the label each node gets (node name to C(gpufleet.io/gpu-path=PATH)), for the
    C(node_labels) option of the C(gpu_node_labels) module.
  - Filter C(gpu_path_groups) takes inventory hosts and Ansible's C(groups) and returns the
    C(gpu_path_*) groups of each host, the part of its C(group_names) these filters read,
    without asking Ansible for each host's variables (seconds at 10,000 hosts).
options:
  _input:
    description:
      - Pairs C([name, group_names]), an inventory host (or its node name) and the host's
        inventory groups (C(gpu_path_groups) gives them); for C(gpu_path_groups), the
        inventory hosts.
    type: list
    elements: raw
    required: true
  groups:
    description:
      - C(gpu_path_groups) only, its one argument; Ansible's C(groups), group to hosts.
    type: dict
"""

EXAMPLES = r"""
- name: DRA driver | GPU hosts by path
  ansible.builtin.set_fact:
    dra_driver_pools: >-
      {{ groups['gpu_nodes']
         | zip(groups['gpu_nodes'] | gpufleet.cluster.gpu_path_groups(groups))
         | gpufleet.cluster.gpu_path_pools }}
"""

RETURN = r"""
_value:
  description:
    - C(gpu_path_pools) gives path to names, with both paths as keys (C(device-plugin) and
      C(dra)); C(gpu_path_labels) gives node name to the mapping of the label
      C(gpufleet.io/gpu-path) to the node's path; C(gpu_path_groups) gives a list of group
      names per host, in the order of the hosts.
  type: raw
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def _is_list(value):
    return hasattr(value, "__iter__") and not isinstance(value, (str, bytes, Mapping))


def _pairs(value, name):
    """``[(name, [group, ...]), ...]`` from what the role passes (``zip`` gives tuples, a
    template's list gives lists); AnsibleFilterError for another shape."""
    if not _is_list(value):
        raise AnsibleFilterError(f"{name} takes a list of [name, group_names] pairs")
    out = []
    for item in value:
        pair = list(item) if _is_list(item) else None
        if pair is None or len(pair) != 2:
            raise AnsibleFilterError(f"{name} takes [name, group_names] pairs, not {item!r}")
        groups = pair[1]
        if not _is_list(groups):
            raise AnsibleFilterError(
                f"{name}: the groups of {pair[0]} are {groups!r}, not a list of group names"
            )
        out.append((str(pair[0]), [str(g) for g in groups]))
    return out


def gpu_path_pools(pairs):
    """``{path: [names]}`` (see gpu_paths.pools); AnsibleFilterError with the refusal."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp

    try:
        return gp.pools(_pairs(pairs, "gpu_path_pools"))
    except gp.GpuPathError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def gpu_path_labels(pairs):
    """``{node: {PATH_LABEL: path}}`` (see gpu_paths.path_labels)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp

    try:
        return gp.path_labels(_pairs(pairs, "gpu_path_labels"))
    except gp.GpuPathError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def gpu_path_groups(hosts, groups):
    """``[[group, ...], ...]``: the ``gpu_path_*`` groups of each host (see
    gpu_paths.path_groups_of); AnsibleFilterError for another shape."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp

    if not _is_list(hosts):
        raise AnsibleFilterError(f"gpu_path_groups takes a list of inventory hosts, not {hosts!r}")
    if not isinstance(groups, Mapping) or not all(_is_list(m) for m in groups.values()):
        raise AnsibleFilterError("gpu_path_groups takes Ansible's groups: group -> list of hosts")
    return gp.path_groups_of(hosts, groups)


class FilterModule:
    def filters(self):
        return {
            "gpu_path_pools": gpu_path_pools,
            "gpu_path_labels": gpu_path_labels,
            "gpu_path_groups": gpu_path_groups,
        }
