#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Set feature gates and runtime-config in a kubeadm static pod manifest."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: static_pod_flags
short_description: Set feature gates and runtime-config in a kubeadm static pod manifest
version_added: "0.1.0"
description:
  - Edits the C(--feature-gates) and C(--runtime-config) arguments of one control-plane
    component in its kubeadm static pod manifest
    (C(/etc/kubernetes/manifests/kube-apiserver.yaml) and the like).
  - Only those arguments of the component container's C(command) change. Wanted gates and
    runtime-config entries are set, entries listed as absent are removed, every other entry
    keeps its text and position. A missing flag is added after the last command item; a flag
    left without entries is removed. When the flag appears more than once its values are
    merged into the last occurrence (the component applies each occurrence in turn).
  - The rest of the file is kept byte for byte when the command is a block list of one-line
    items, as kubeadm writes it; otherwise the manifest is re-written as YAML with the same
    content and key order.
  - The kubelet restarts the static pod by itself when the manifest changes.
  - Hand edits to a manifest are lost at the next C(kubeadm upgrade apply) or
    C(kubeadm init phase control-plane), which regenerate the manifests from the
    C(kube-system/kubeadm-config) ConfigMap. Change the ConfigMap too, with
    M(gpufleet.cluster.kubeadm_config_gates).
  - The backup is written outside the static pod directory (to O(backup_dir)), because the
    kubelet runs every non-hidden file of that directory as a static pod, backups included.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  path:
    description:
      - The static pod manifest.
      - Defaults to C(/etc/kubernetes/manifests/<component>.yaml).
    type: path
  component:
    description:
      - The control-plane component; its container in the manifest has this name.
    type: str
    required: true
    choices: [kube-apiserver, kube-controller-manager, kube-scheduler]
  feature_gates:
    description:
      - 'Feature gates to set, name to boolean, for example C({DRAPrioritizedList: true}).'
    type: dict
    default: {}
  absent_feature_gates:
    description:
      - Feature gates that must not appear in C(--feature-gates), for example gates the
        target release removed (C(DRAControlPlaneController) from 1.32).
    type: list
    elements: str
    default: []
  runtime_config:
    description:
      - 'C(--runtime-config) entries to set, C(group/version) to C(true) or C(false), for
        example C({"resource.k8s.io/v1beta1": "true"}). kube-apiserver only.'
    type: dict
    default: {}
  absent_runtime_config:
    description:
      - C(--runtime-config) keys that must not appear. A C(group/version) also removes its
        C(group/version/resource) entries. kube-apiserver only.
    type: list
    elements: str
    default: []
  backup:
    description:
      - Copy the manifest to O(backup_dir) before changing it.
    type: bool
    default: true
  backup_dir:
    description:
      - Directory for backups, named C(<file name>.<pid>.<YYYY-MM-DD@HH:MM:SS>~) as
        Ansible's own backups. Must not be the static pod directory.
      - The default is where kubeadm keeps its own manifest backups.
    type: path
    default: /etc/kubernetes/tmp
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written or backed up.
  diff_mode:
    support: full
    details: The manifest before and after.
  platform:
    platforms: posix
notes:
  - Which gates and runtime-config entries a Kubernetes release needs comes from the
    collection's DRA version model (module_utils C(dra)); this module only writes
    what it is given.
seealso:
  - module: gpufleet.cluster.kubeadm_config_gates
  - module: gpufleet.cluster.kubelet_config_gates
"""

EXAMPLES = r"""
- name: DRA | Enable DRA beta gates and the v1beta1/v1beta2 API on kube-apiserver 1.33
  gpufleet.cluster.static_pod_flags:
    component: kube-apiserver
    feature_gates:
      DynamicResourceAllocation: true
    runtime_config:
      resource.k8s.io/v1beta1: "true"
      resource.k8s.io/v1beta2: "true"

- name: DRA | Drop gates and API versions the next release no longer knows
  gpufleet.cluster.static_pod_flags:
    path: /etc/kubernetes/manifests/kube-apiserver.yaml
    component: kube-apiserver
    absent_feature_gates: [DRAControlPlaneController]
    absent_runtime_config: [resource.k8s.io/v1alpha3]

- name: DRA | Same gates on the scheduler, without a backup
  gpufleet.cluster.static_pod_flags:
    component: kube-scheduler
    feature_gates:
      DynamicResourceAllocation: true
    backup: false
"""

RETURN = r"""
path:
  description: The manifest edited.
  returned: always
  type: str
  sample: /etc/kubernetes/manifests/kube-apiserver.yaml
changes:
  description: One item per change, in order.
  returned: always
  type: list
  elements: dict
  contains:
    where:
      description: The place changed.
      type: str
      sample: kube-apiserver command --feature-gates
    what:
      description: The gate, runtime-config key or flag.
      type: str
      sample: DynamicResourceAllocation
    old:
      description: The value before (null when it was absent).
      type: str
      sample: null
    new:
      description: The value after (null when it was removed).
      type: str
      sample: "true"
    why:
      description: Why it changed.
      type: str
      sample: feature gate wanted, was missing
  sample:
    - where: kube-apiserver command --feature-gates
      what: DynamicResourceAllocation
      old: null
      new: "true"
      why: feature gate wanted, was missing
backup_file:
  description: The backup of the manifest before the change.
  returned: changed and O(backup) is true and not in check mode
  type: str
  sample: /etc/kubernetes/tmp/kube-apiserver.yaml.2319.2026-02-01@10:12:44~
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.files import (
    backup_and_write,
    file_diff,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    ConfigEditError,
    FlagEdit,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.manifests import (
    COMPONENTS,
    HAS_YAML,
    YAML_IMPORT_ERROR,
    edit_static_pod_manifest,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            component=dict(type="str", required=True, choices=list(COMPONENTS)),
            feature_gates=dict(type="dict", default={}),
            absent_feature_gates=dict(type="list", elements="str", default=[]),
            runtime_config=dict(type="dict", default={}),
            absent_runtime_config=dict(type="list", elements="str", default=[]),
            backup=dict(type="bool", default=True),
            backup_dir=dict(type="path", default="/etc/kubernetes/tmp"),
        ),
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_IMPORT_ERROR)
    params = module.params
    component = params["component"]
    path = params["path"] or f"/etc/kubernetes/manifests/{component}.yaml"
    result: dict = {"changed": False, "path": path, "changes": []}
    if not os.path.isfile(path):
        module.fail_json(
            msg=f"path={path}: no such manifest; fix: pass the static pod manifest of "
            f"{component} (kubeadm writes /etc/kubernetes/manifests/{component}.yaml)",
            **result,
        )
    try:
        edit = FlagEdit.from_params(params)
        before = ig.read_text(path, f"path={path}") or ""
        edited = edit_static_pod_manifest(before, component, edit)
    except ig.InputError as err:
        module.fail_json(msg=str(err), **result)
    except ConfigEditError as err:
        module.fail_json(msg=f"{path}: {err}", **result)

    result["changes"] = edited.changes_as_dicts()
    result["changed"] = edited.changed
    if edited.changed:
        result["diff"] = file_diff(path, before, edited.text)
        made = backup_and_write(
            module, path, edited.text, backup=params["backup"], backup_dir=params["backup_dir"]
        )
        if made:
            result["backup_file"] = made
    module.exit_json(**result)


if __name__ == "__main__":
    main()
