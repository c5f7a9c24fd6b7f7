"""Filters of the kueue role: the objects to apply, and the preflight quota findings."""

from __future__ import annotations

DOCUMENTATION = r"""
name: kueue_plan
short_description: Kueue's manifests, per-profile DeviceClasses and quota objects to apply
version_added: 0.3.0
description:
  - Reads Kueue's release manifests (multi-document YAML text), sets the controller image,
    Kueue's DRA feature gate for the version (the Kueue version table,
    C(plugins/module_utils/kueue/versions.py)) and the device-class mappings, and builds
    the per-profile DeviceClasses, ResourceFlavor, Cohorts, ClusterQueues, LocalQueues and
    WorkloadPriorityClasses from the kueue role's variables.
  - The companion filter C(kueue_quota_findings) judges C(kueue_teams) against the devices
    the inventory's MIG layouts publish (used by preflight).
options:
  _input:
    description: Kueue's manifests.yaml text.
    type: str
    required: true
  settings:
    description: The kueue role's variables without the C(kueue_) prefix (version, image,
      device_classes, profile_classes, teams, cohorts, flavor, flavor_node_labels,
      priority_classes, extra_gates, host_network, api_server, node_selector, tolerations,
      visibility_api).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Kueue | Plan
  ansible.builtin.set_fact:
    kueue_planned: "{{ lookup('file', kueue_manifests) | gpufleet.cluster.kueue_plan(settings) }}"
"""

RETURN = r"""
_value:
  description: Dict with install, device_classes, queues (lists of objects), feature_gates
    and mappings.
  type: dict
"""

from ansible.errors import AnsibleFilterError


def kueue_plan(manifests, settings):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import install as ki
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import versions as kv

    try:
        docs = ig.load_yaml_documents(str(manifests), "kueue_manifests")
    except ig.InputError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    config = None
    for doc in docs:
        if doc.get("kind") == "ConfigMap" and doc["metadata"].get("name") == ki.MANAGER_CONFIG:
            try:
                text = str((doc.get("data") or {}).get(ki.CONFIG_KEY) or "")
                config = ig.load_yaml(text, f"{ki.MANAGER_CONFIG} {ki.CONFIG_KEY}")
            except ig.InputError as exc:
                raise AnsibleFilterError(str(exc)) from exc
    try:
        return ki.plan(docs, dict(settings or {}), config)
    except (kv.KueueVersionError, kq.KueueInputError, ki.KueueManifestError) as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {"kueue_plan": kueue_plan}
