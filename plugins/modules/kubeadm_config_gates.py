#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Set feature gates and runtime-config in the kubeadm ConfigMaps of a cluster."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kubeadm_config_gates
short_description: Set feature gates and runtime-config in the kubeadm ConfigMaps of a cluster
version_added: "0.1.0"
description:
  - Edits the cluster-wide configuration kubeadm keeps in the cluster, so that feature gates
    and runtime-config survive C(kubeadm upgrade) (which regenerates the static pod manifests
    and C(/var/lib/kubelet/config.yaml) from it).
  - The C(ClusterConfiguration) key of ConfigMap C(kube-system/kubeadm-config) gets the
    control-plane settings in C(apiServer), C(controllerManager) and C(scheduler)
    C(extraArgs) (C(kubeadm.k8s.io/v1beta3) map or C(v1beta4) list of name/value items).
  - The C(kubelet) key of ConfigMap C(kube-system/kubelet-config) (C(kubelet-config-1.X) on
    clusters older than 1.24) gets the kubelet gates in C(featureGates).
  - Wanted gates and entries are set, the ones listed as absent are removed, every other
    entry is kept. A ConfigMap is replaced only when its data changes, with its
    C(resourceVersion), so a concurrent change makes the module fail instead of being lost.
  - Before a ConfigMap is replaced its old content is saved as a ConfigMap manifest under
    O(backup_dir) (C(kubectl replace -f <file>) restores it).
  - 'Runs where the C(kubernetes) Python client is installed, normally the control host
    (C(delegate_to: localhost), C(run_once: true)).'
  - The manifests on the control-plane nodes and the kubelet files on each node are not
    changed; use M(gpufleet.cluster.static_pod_flags) and
    M(gpufleet.cluster.kubelet_config_gates) for those.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML
  - kubernetes (the Python client) and urllib3, which it installs
  - msgspec (recommended), which decodes the listed pages faster; without it the
    standard library's json decodes them, to the same result
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.kube_auth

options:
  apiserver:
    description:
      - kube-apiserver settings for C(ClusterConfiguration.apiServer.extraArgs).
    type: dict
    suboptions:
      feature_gates:
        description: Feature gates to set, name to boolean.
        type: dict
        default: {}
      absent_feature_gates:
        description: Feature gates that must not appear.
        type: list
        elements: str
        default: []
      runtime_config:
        description:
          - C(--runtime-config) entries to set, C(group/version) to C(true) or C(false).
        type: dict
        default: {}
      absent_runtime_config:
        description:
          - C(--runtime-config) keys that must not appear (a C(group/version) also removes
            its C(group/version/resource) entries).
        type: list
        elements: str
        default: []
  controller_manager:
    description:
      - kube-controller-manager settings for C(ClusterConfiguration.controllerManager.extraArgs).
    type: dict
    suboptions:
      feature_gates:
        description: Feature gates to set, name to boolean.
        type: dict
        default: {}
      absent_feature_gates:
        description: Feature gates that must not appear.
        type: list
        elements: str
        default: []
  scheduler:
    description:
      - kube-scheduler settings for C(ClusterConfiguration.scheduler.extraArgs).
    type: dict
    suboptions:
      feature_gates:
        description: Feature gates to set, name to boolean.
        type: dict
        default: {}
      absent_feature_gates:
        description: Feature gates that must not appear.
        type: list
        elements: str
        default: []
  kubelet:
    description:
      - Kubelet feature gates for C(featureGates) of the kubelet-config ConfigMap.
    type: dict
    suboptions:
      feature_gates:
        description: Feature gates to set, name to boolean.
        type: dict
        default: {}
      absent_feature_gates:
        description: Feature gates that must not appear.
        type: list
        elements: str
        default: []
  backup_dir:
    description:
      - Directory on the host running the module for the backups, named
        C(<namespace>.<configmap>.<UTC time YYYYMMDDTHHMMSS.ffffffZ>.yaml), mode 0600.
    type: path
    default: ~/.gpufleet/backups
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written, neither ConfigMaps nor backups.
  diff_mode:
    support: full
    details: One diff per ConfigMap key that changes.
  platform:
    platforms: posix
notes:
  - Which gates and runtime-config entries a Kubernetes release needs comes from the
    collection's DRA version model (module_utils C(dra)); this module only writes
    what it is given.
seealso:
  - module: gpufleet.cluster.static_pod_flags
  - module: gpufleet.cluster.kubelet_config_gates
"""

EXAMPLES = r"""
- name: Kubeadm | Keep DRA gates of a 1.33 cluster in the kubeadm ConfigMaps
  gpufleet.cluster.kubeadm_config_gates:
    kubeconfig: /etc/kubernetes/admin.conf
    apiserver:
      feature_gates: {DynamicResourceAllocation: true}
      runtime_config:
        resource.k8s.io/v1beta1: "true"
        resource.k8s.io/v1beta2: "true"
    controller_manager:
      feature_gates: {DynamicResourceAllocation: true}
    scheduler:
      feature_gates: {DynamicResourceAllocation: true}
    kubelet:
      feature_gates: {DynamicResourceAllocation: true}
  delegate_to: localhost
  run_once: true

- name: Kubeadm | Before upgrading, drop what the next release removed
  gpufleet.cluster.kubeadm_config_gates:
    apiserver:
      absent_feature_gates: [DRAControlPlaneController]
      absent_runtime_config: [resource.k8s.io/v1alpha3]
    controller_manager:
      absent_feature_gates: [DRAControlPlaneController]
    scheduler:
      absent_feature_gates: [DRAControlPlaneController]
    kubelet:
      absent_feature_gates: [DRAControlPlaneController]
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
changes:
  description: One item per change, with the ConfigMap it is in.
  returned: always
  type: list
  elements: dict
  sample:
    - configmap: kube-system/kubeadm-config
      where: ClusterConfiguration apiServer.extraArgs feature-gates
      what: DynamicResourceAllocation
      old: null
      new: "true"
      why: feature gate wanted, was missing
configmaps:
  description: The ConfigMaps read, with the data key edited and whether it changed.
  returned: always
  type: list
  elements: dict
  sample:
    - {name: kubeadm-config, namespace: kube-system, key: ClusterConfiguration, changed: true}
    - {name: kubelet-config, namespace: kube-system, key: kubelet, changed: false}
backup_files:
  description: Backups written, one per ConfigMap replaced.
  returned: always
  type: list
  elements: str
  sample: [/root/.gpufleet/backups/kube-system.kubeadm-config.20260201T101244.123456Z.yaml]
"""

import datetime
import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.files import file_diff
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    ConfigEditError,
    FlagEdit,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.kubelet_config import (
    edit_kubelet_configuration,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.manifests import (
    APISERVER,
    CONTROLLER_MANAGER,
    HAS_YAML,
    SCHEDULER,
    YAML_IMPORT_ERROR,
    edit_cluster_configuration,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import configmaps as kcm

try:
    # the client validate_kube builds
    import kubernetes  # noqa: F401  # pylint: disable=unused-import

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()

if HAS_YAML:
    import yaml

NAMESPACE = kcm.NAMESPACE

GATE_OPTIONS = dict(
    feature_gates=dict(type="dict", default={}),
    absent_feature_gates=dict(type="list", elements="str", default=[]),
)
APISERVER_OPTIONS = dict(
    GATE_OPTIONS,
    runtime_config=dict(type="dict", default={}),
    absent_runtime_config=dict(type="list", elements="str", default=[]),
)
PARAMS_TO_COMPONENT = {
    "apiserver": APISERVER,
    "controller_manager": CONTROLLER_MANAGER,
    "scheduler": SCHEDULER,
}


def write_backup(backup_dir: str, cm: dict) -> str:
    """Save the ConfigMap as read (name, namespace, labels, annotations, data) as a
    manifest ``kube-system.<name>.<UTC stamp>.yaml`` (mode 0600: it may hold settings an
    operator would not share); returns its path. Raises OSError."""
    os.makedirs(backup_dir, mode=0o700, exist_ok=True)
    meta = cm.get("metadata") or {}
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    path = os.path.join(backup_dir, f"{meta.get('namespace')}.{meta.get('name')}.{stamp}.yaml")
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            **({"labels": dict(meta["labels"])} if meta.get("labels") else {}),
            **({"annotations": dict(meta["annotations"])} if meta.get("annotations") else {}),
        },
        "data": dict(cm.get("data") or {}),
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(manifest, fh, sort_keys=False, default_flow_style=False, width=1 << 30)
    return path


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            **vk.kube_auth_argspec(),
            apiserver=dict(type="dict", options=APISERVER_OPTIONS),
            controller_manager=dict(type="dict", options=GATE_OPTIONS),
            scheduler=dict(type="dict", options=GATE_OPTIONS),
            kubelet=dict(type="dict", options=GATE_OPTIONS),
            backup_dir=dict(type="path", default="~/.gpufleet/backups"),
        ),
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_IMPORT_ERROR)
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    params = module.params
    result: dict = {"changed": False, "changes": [], "configmaps": [], "backup_files": []}
    try:
        control_plane = {
            component: FlagEdit.from_params(params[name], name)
            for name, component in PARAMS_TO_COMPONENT.items()
            if params[name]
        }
        kubelet = FlagEdit.from_params(params["kubelet"], "kubelet")
    except ConfigEditError as err:
        module.fail_json(msg=str(err), **result)

    try:
        kube = vk.Kube(params["kubeconfig"], params["context"])
        found = kcm.read_kubeadm_configmaps(kube, kubelet=not kubelet.empty)
    except vk.KubeError as err:
        module.fail_json(
            msg=f"cannot read the kubeadm ConfigMaps in {NAMESPACE}: {err}; fix: check "
            "kubeconfig/context, that kube-apiserver answers and that the user may read "
            "ConfigMaps in kube-system",
            **result,
        )
    work = _edits(module, found, control_plane, kubelet, result)
    to_write = _record(work, result)
    if not module.check_mode and to_write:
        _write(module, kube, to_write, params["backup_dir"], result)
    module.exit_json(**result)


def _edits(module, found: kcm.KubeadmConfigMaps, control_plane, kubelet, result) -> list:
    """(ConfigMap, key, edit) for kubeadm-config and, when the kubelet is edited, the
    kubelet's ConfigMap; fails the module when one is missing or does not parse."""
    if found.cluster_configuration is None:
        module.fail_json(
            msg=f"{NAMESPACE}/{kcm.KUBEADM_CONFIG} with key {kcm.CLUSTER_CONFIGURATION} does "
            "not exist; is this a kubeadm cluster? fix: run 'kubeadm init phase upload-config "
            "kubeadm --config <file>' or point kubeconfig at a kubeadm cluster",
            **result,
        )
    key = kcm.CLUSTER_CONFIGURATION
    try:
        work = [
            (
                found.kubeadm,
                key,
                edit_cluster_configuration(found.cluster_configuration, control_plane),
            )
        ]
    except ConfigEditError as err:
        module.fail_json(msg=f"{NAMESPACE}/{kcm.KUBEADM_CONFIG} key {key}: {err}", **result)
    if kubelet.empty:
        return work
    if found.kubelet_configuration is None:
        module.fail_json(
            msg=f"{NAMESPACE}/{kcm.KUBELET_CONFIG} (or kubelet-config-1.X) with key "
            f"{kcm.KUBELET_KEY} does not exist; fix: run 'kubeadm init phase "
            "upload-config kubelet --config <file>'",
            **result,
        )
    try:
        edit = edit_kubelet_configuration(found.kubelet_configuration, kubelet)
    except ConfigEditError as err:
        module.fail_json(msg=f"{found.kubelet_ref} key {kcm.KUBELET_KEY}: {err}", **result)
    work.append((found.kubelet, kcm.KUBELET_KEY, edit))
    return work


def _record(work: list, result: dict) -> list:
    """Each ConfigMap's change records and diff into ``result``; returns (ConfigMap, key,
    new text) of those that change."""
    diffs, to_write = [], []
    for cm, key, edited in work:
        where = kcm.ref(cm)
        meta = cm.get("metadata") or {}
        result["configmaps"].append(
            {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "key": key,
                "changed": edited.changed,
            }
        )
        result["changes"].extend(dict(c.to_dict(), configmap=where) for c in edited.changes)
        if edited.changed:
            diffs.append(file_diff(f"{where} data.{key}", cm["data"][key], edited.text))
            to_write.append((cm, key, edited.text))
    result["changed"] = bool(to_write)
    if diffs:
        result["diff"] = diffs
    return to_write


def _write(module, kube: vk.Kube, to_write: list, backup_dir: str, result: dict) -> None:
    """Back up every ConfigMap that changes, then replace each; a failure names what was
    already replaced and the backups."""
    for cm, _key, _text in to_write:
        try:
            result["backup_files"].append(write_backup(backup_dir, cm))
        except OSError as err:
            module.fail_json(
                msg=f"cannot write the backup of {kcm.ref(cm)} to {backup_dir}: {err}; "
                "nothing was changed in the cluster; fix: pass a writable backup_dir",
                **result,
            )
    replaced: list[str] = []
    for cm, key, text in to_write:
        cm["data"][key] = text
        try:
            kcm.replace_configmap(kube, cm)
        except vk.KubeError as err:
            hint = (
                "it changed since it was read; run again"
                if err.status == 409
                else "check that the user may update ConfigMaps in kube-system and that "
                "kube-apiserver answers"
            )
            module.fail_json(
                msg=f"cannot replace {kcm.ref(cm)}: {err}; already replaced: "
                f"{replaced or 'none'} (backups: {result['backup_files']}); fix: {hint}",
                **result,
            )
        replaced.append(kcm.ref(cm))


if __name__ == "__main__":
    main()
