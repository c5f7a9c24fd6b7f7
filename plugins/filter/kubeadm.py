"""Filters that render kubeadm configuration with DRA enabled from day 0."""

from __future__ import annotations

DOCUMENTATION = r"""
name: kubeadm_init_documents
short_description: kubeadm init configuration documents with the DRA settings of a release
version_added: 0.2.0
description:
  - Renders InitConfiguration, ClusterConfiguration and KubeletConfiguration for the first
    control-plane node, in the kubeadm config API the release takes, with the DRA feature
    gates and runtime-config that the version model gives (pass the output of
    C(gpufleet.cluster.dra_component_settings) as C(dra)).
  - The companion filters C(kubeadm_join_documents) and C(kubeadm_join_command) render a
    JoinConfiguration and parse C(kubeadm token create --print-join-command).
options:
  _input:
    description: Bootstrap settings, the keys of C(BootstrapSpec) in
      C(plugins/module_utils/kubeadm/bootstrap.py) (version, control_plane_endpoint,
      advertise_address, pod_subnet, ...).
    type: dict
    required: true
  node_name:
    description: Kubernetes node name of the host.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Kubeadm | Render the init configuration
  ansible.builtin.set_fact:
    kubeadm_docs: "{{ kubeadm_spec | gpufleet.cluster.kubeadm_init_documents(inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: List of configuration documents (dicts), to be written with to_nice_yaml.
  type: list
"""

from ansible.errors import AnsibleFilterError


def _spec(settings):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import bootstrap as kb

    if not isinstance(settings, dict):
        raise AnsibleFilterError(f"kubeadm settings must be a dict, got {type(settings).__name__}")
    known = set(kb.BootstrapSpec.__dataclass_fields__)
    unknown = sorted(set(settings) - known)
    if unknown:
        raise AnsibleFilterError(f"unknown kubeadm settings {unknown}; known: {sorted(known)}")
    data = dict(settings)
    data["version"] = str(data.get("version", "")).lstrip("v")
    if "ignore_preflight_errors" in data:
        data["ignore_preflight_errors"] = tuple(data["ignore_preflight_errors"] or ())
    return kb.BootstrapSpec(**data)


def kubeadm_init_documents(settings, node_name):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import bootstrap as kb

    try:
        return kb.init_documents(_spec(settings), node_name)
    except (kb.BootstrapConfigError, dra_core.VersionModelError) as e:
        raise AnsibleFilterError(str(e)) from e


def kubeadm_join_documents(settings, node_name, join, control_plane=False, certificate_key=""):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import bootstrap as kb

    try:
        return kb.join_documents(
            _spec(settings),
            node_name,
            token=join["token"],
            ca_cert_hash=join["ca_cert_hash"],
            control_plane=control_plane,
            certificate_key=certificate_key,
        )
    except (kb.BootstrapConfigError, dra_core.VersionModelError, KeyError) as e:
        raise AnsibleFilterError(f"kubeadm join configuration: {e}") from e


def kubeadm_join_command(text):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import bootstrap as kb

    try:
        return kb.parse_join_command(text)
    except kb.BootstrapConfigError as e:
        raise AnsibleFilterError(str(e)) from e


class FilterModule:
    def filters(self):
        return {
            "kubeadm_init_documents": kubeadm_init_documents,
            "kubeadm_join_documents": kubeadm_join_documents,
            "kubeadm_join_command": kubeadm_join_command,
        }
