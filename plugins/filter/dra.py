"""Filters that expose the DRA version model to playbooks and roles."""

from __future__ import annotations

DOCUMENTATION = r"""
name: dra_component_settings
short_description: DRA feature gates and runtime-config per component for a Kubernetes release
version_added: 0.1.0
description:
  - Asks the collection's DRA version model what kube-apiserver, kube-controller-manager,
    kube-scheduler and the kubelet need at a Kubernetes release, and returns it in the shape
    the modules C(kubeadm_config_gates), C(static_pod_flags) and C(kubelet_config_gates) take.
  - Fails with the model's reason and fix for an impossible request (a removed gate, a locked
    gate at the other value, a feature the release lacks, a gate without its dependencies).
options:
  _input:
    description: Kubernetes version, C(1.37.2) or C(v1.37.2).
    type: str
    required: true
  features:
    description: DRA features wanted by name (for example C(prioritized-list), C(admin-access)).
    type: list
    elements: str
    default: []
  gates:
    description: Explicit feature-gate wishes, name to boolean.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: DRA | Plan the settings of every component
  ansible.builtin.set_fact:
    dra_settings: "{{ '1.37.2' | gpufleet.cluster.dra_component_settings(['prioritized-list']) }}"
"""

RETURN = r"""
_value:
  description:
    - C(apiserver), C(controller_manager), C(scheduler), C(kubelet), each with
      C(feature_gates), C(absent_feature_gates) (and for the apiserver C(runtime_config),
      C(absent_runtime_config)); C(kubeadm_api) (preferred kubeadm config API), C(omitted)
      (wished gates not emitted, with the reason) and C(warnings).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core

# module option names of each component, as the modules of this collection take them
MODULE_KEYS = {
    dra_core.APISERVER: "apiserver",
    dra_core.CONTROLLER_MANAGER: "controller_manager",
    dra_core.SCHEDULER: "scheduler",
    dra_core.KUBELET: "kubelet",
}


def dra_component_settings(version, features=None, gates=None):
    """Return the per-component settings dict described in RETURN.

    Raises AnsibleFilterError carrying the version model's message for an impossible
    request or a malformed version.
    """
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan

    if isinstance(features, str):
        # the reading Ansible's argument spec gives a list option: comma-separated
        features = [f.strip() for f in features.split(",") if f.strip()]
    if gates is not None and not isinstance(gates, dict):
        raise AnsibleFilterError(
            f"gates={gates!r} is not a mapping; fix: give gate name to boolean, "
            "e.g. {DRAPrioritizedList: true}"
        )
    try:
        plan = dra_plan.plan_components(str(version), features or (), gates or {})
    except dra_core.VersionModelError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    out = {}
    for component, key in MODULE_KEYS.items():
        settings = plan.components[component]
        entry = {
            "feature_gates": dict(sorted(settings.feature_gates.items())),
            "absent_feature_gates": sorted(settings.forbidden_gates),
        }
        if component == dra_core.APISERVER:
            entry["runtime_config"] = dict(
                item.split("=", 1) for item in sorted(settings.runtime_config)
            )
            entry["absent_runtime_config"] = sorted(settings.runtime_config_absent)
        out[key] = entry
    out["kubeadm_api"] = plan.kubeadm.preferred
    out["omitted"] = dict(plan.omitted)
    out["warnings"] = list(plan.warnings)
    return out


class FilterModule:
    """DRA version model filters."""

    def filters(self):
        return {"dra_component_settings": dra_component_settings}
