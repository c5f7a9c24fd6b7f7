#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Plan a rolling Kubernetes upgrade from what the cluster runs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: upgrade_plan
short_description: Plan a rolling kubeadm upgrade, one minor at a time
version_added: "0.1.0"
description:
  - Reads, with one list call each, the Nodes (kubelet versions, cordon state), the
    C(kube-apiserver) static pods in C(kube-system) (apiserver versions from the image tag)
    and the ResourceSlices (GPU devices per node), plus the C(kubeadm-config) and
    C(kubelet-config) ConfigMaps (the DRA settings in force), and plans the upgrade to
    O(target) with the collection's planner (module_utils C(upgrade_plan)).
  - With O(host_facts) (what M(gpufleet.cluster.dra_gate_audit_facts) read on each node)
    it also judges every host's static pod manifests, kubelet configuration file and
    running processes against each step's target release.
  - An entry the target release refuses to start with and the upgrade does not change
    itself (a feature gate outside the DRA gates, such as C(CSIMigration); a runtime-config
    entry the transition does not drop) is returned in RV(blocking) with where it is, why
    and the fix. The module does not fail for it; the upgrade role refuses such a plan
    before any host is changed.
  - Returns the whole plan and, for convenience, its first step and the hosts of each
    kind in the order they are to be upgraded.
  - Changes nothing. Runs on the control host.
author:
  - gpufleet maintainers
requirements:
  - kubernetes (Python client)
  - PyYAML
options:
  kubeconfig:
    description: Admin kubeconfig on the control host.
    type: path
    required: true
  target:
    description: Release to upgrade to, for example C(1.37.2).
    type: str
    required: true
  hosts:
    description:
      - Inventory hosts in order, each C({host, name, control_plane}); C(name) is the
        Kubernetes node name.
    type: list
    elements: dict
    required: true
  kubeadm_versions:
    description: Host to C(kubeadm version -o short) output.
    type: dict
    default: {}
  via:
    description: Releases to pass through for the minors between the cluster's and O(target).
    type: list
    elements: str
    default: []
  batch_size:
    description: Workers per batch, a number or a percentage such as C(20%).
    type: str
    default: "1"
  min_gpu_available_percent:
    description: Floor on GPU devices left schedulable while a batch is drained.
    type: float
    default: 0
  features:
    description: DRA features wanted (as for the dra_feature_gates role).
    type: list
    elements: str
    default: []
  gates:
    description: Explicit feature-gate wishes.
    type: dict
    default: {}
  package_revision:
    description: Debian/RPM revision of the packages (C(1.1) on pkgs.k8s.io).
    type: str
    default: "1.1"
  repo_url:
    description: Package repository URL template with C({minor}).
    type: str
    default: "https://pkgs.k8s.io/core:/stable:/v{minor}/deb/"
  gpu_driver:
    description: DRA driver whose devices count as GPU capacity.
    type: str
    default: gpu.nvidia.com
  ignore_preflight_errors:
    description: kubeadm preflight errors to ignore (goes into the UpgradeConfiguration).
    type: list
    elements: str
    default: []
  resume_hosts:
    description:
      - Hosts an earlier run to O(target) drained and left cordoned (the upgrade report's
        C(cordoned_by_upgrade)). One that already runs O(target) is resumed rather than
        skipped (its kubelet part again, then uncordon); the plan is then not up to date.
    type: list
    elements: str
    default: []
  host_facts:
    description:
      - The C(facts) that M(gpufleet.cluster.dra_gate_audit_facts) returned on the nodes
        (each names its C(host)). Hosts not in O(hosts) are ignored; a host without facts
        is not judged (the plan warns).
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Upgrade | Plan
  gpufleet.cluster.upgrade_plan:
    kubeconfig: ~/.kube/config
    target: 1.37.2
    hosts:
      - {host: cp-1, name: cp-1, control_plane: true}
      - {host: gpu-1, name: gpu-1, control_plane: false}
    kubeadm_versions: {cp-1: v1.36.3, gpu-1: v1.36.3}
    batch_size: 20%
    min_gpu_available_percent: 50

- name: Upgrade | Plan, judging what each node's files and processes hold
  gpufleet.cluster.upgrade_plan:
    kubeconfig: ~/.kube/config
    target: 1.38.0
    hosts:
      - {host: cp-1, name: cp-1, control_plane: true}
      - {host: gpu-1, name: gpu-1, control_plane: false}
    # node_gates: registered from gpufleet.cluster.dra_gate_audit_facts on each node
    host_facts: >-
      {{ ['cp-1', 'gpu-1'] | map('extract', hostvars) | selectattr('node_gates', 'defined')
         | map(attribute='node_gates.facts') | list }}
  register: planned

- name: Upgrade | Refuse a blocked plan
  ansible.builtin.assert:
    that: planned.blocking | length == 0
    fail_msg: "{{ planned.blocking | map(attribute='fix') | join('; ') }}"
"""

RETURN = r"""
plan:
  description:
    - The plan (UpgradePlan.to_dict) - target, path, nodes, steps (waves, packages, DRA
      changes).
  returned: success
  type: dict
step:
  description: The first step of the plan, or null when every component runs the target.
  returned: success
  type: dict
steps:
  description: Number of steps on the path.
  returned: success
  type: int
blocking:
  description:
    - What stops the upgrade (the plan's C(blocking)), every step's. Each item has
      C(version) (the step's target), C(source) (C(configmap), C(file) or C(process)),
      C(host) (null for a ConfigMap), C(file), C(configmap), C(where), C(component),
      C(kind) (C(feature-gate) or C(runtime-config)), C(gate), C(name), C(entry),
      C(reason) and C(fix).
  returned: success
  type: list
  elements: dict
  sample:
    - version: 1.38.0
      source: file
      host: gpu-1
      file: /var/lib/kubelet/config.yaml
      configmap: null
      where: /var/lib/kubelet/config.yaml
      component: kubelet
      kind: feature-gate
      gate: CSIMigration
      name: CSIMigration
      entry: CSIMigration=true
      reason: >-
        Kubernetes 1.38.0-beta.0 registers no feature gate CSIMigration, nor does any
        release of the model: every component refuses to start with 'unrecognized feature
        gate: CSIMigration'
      fix: >-
        remove CSIMigration from featureGates in /var/lib/kubelet/config.yaml on gpu-1
        before upgrading to 1.38.0
"""

import importlib.util

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

#: The libraries the cluster reader needs (imported there, at call time).
IMPORT_ERROR = next(
    (
        ImportError(f"No module named {m!r}")
        for m in ("yaml", "kubernetes")
        if not importlib.util.find_spec(m)
    ),
    None,
)

from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils import upgrade_cluster as uc
from ansible_collections.gpufleet.cluster.plugins.module_utils import upgrade_plan as up
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_kube as vk


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            kubeconfig=dict(type="path", required=True),
            target=dict(type="str", required=True),
            hosts=dict(type="list", elements="dict", required=True),
            kubeadm_versions=dict(type="dict", default={}),
            via=dict(type="list", elements="str", default=[]),
            batch_size=dict(type="str", default="1"),
            min_gpu_available_percent=dict(type="float", default=0),
            features=dict(type="list", elements="str", default=[]),
            gates=dict(type="dict", default={}),
            package_revision=dict(type="str", default=up.DEFAULT_PACKAGE_REVISION),
            repo_url=dict(type="str", default=up.DEFAULT_REPO_URL),
            gpu_driver=dict(type="str", default=up.DEFAULT_GPU_DRIVER),
            ignore_preflight_errors=dict(type="list", elements="str", default=[]),
            resume_hosts=dict(type="list", elements="str", default=[]),
            host_facts=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    if IMPORT_ERROR is not None:
        module.fail_json(
            msg=missing_required_lib("kubernetes and PyYAML"), exception=str(IMPORT_ERROR)
        )
    p = module.params
    try:
        cluster = uc.read_cluster(p["kubeconfig"])
    except vk.KubeError as exc:  # the API or the kubeconfig: cannot plan
        module.fail_json(msg=f"reading the cluster through {p['kubeconfig']} failed: {exc}")
    try:
        nodes = up.nodes_from_objects(
            p["hosts"],
            cluster["nodes"],
            cluster["pods"],
            cluster["resourceslices"],
            {k: (v or None) for k, v in p["kubeadm_versions"].items()},
            p["gpu_driver"],
        )
        plan = up.build_plan(
            p["target"],
            nodes,
            batch_size=p["batch_size"],
            min_gpu_available_percent=p["min_gpu_available_percent"],
            via=p["via"],
            features=p["features"],
            gates=p["gates"],
            current_settings=up.settings_from_configmaps(
                cluster["cluster_configuration"], cluster["kubelet_configuration"]
            ),
            package_revision=p["package_revision"],
            repo_url_template=p["repo_url"],
            ignore_preflight_errors=p["ignore_preflight_errors"],
            resume_hosts=p["resume_hosts"],
            host_facts={str(f.get("host") or ""): f for f in p["host_facts"]},
            # the role passes its variables: messages name them, not the CLI's options
            input_names={"target": "upgrade_kubernetes_version", "via": "upgrade_via"},
        )
    except dv.VersionModelError as exc:
        module.fail_json(msg=str(exc), reason=exc.reason, fix=exc.fix)
    doc = plan.to_dict()
    module.exit_json(
        changed=False,
        plan=doc,
        step=doc["steps"][0] if doc["steps"] else None,
        steps=len(doc["steps"]),
        blocking=doc["blocking"],
    )


if __name__ == "__main__":
    main()
