#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Set feature gates in the KubeletConfiguration file of a node."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kubelet_config_gates
short_description: Set feature gates in the KubeletConfiguration file of a node
version_added: "0.1.0"
description:
  - Merges feature gates into the C(featureGates) map of a KubeletConfiguration file
    (C(kubelet.config.k8s.io/v1beta1)), by default the file the kubelet of this node reads.
  - Wanted gates are set, gates listed as absent are removed, other gates keep their value
    and order; new gates are appended. A C(featureGates) map left empty is removed.
  - Without O(path) the file is found from the running kubelet (the C(--config) argument in
    C(/proc/<pid>/cmdline)), else from its systemd unit (C(systemctl cat kubelet) and the
    C(EnvironmentFile)s it names, such as C(/var/lib/kubelet/kubeadm-flags.env) and
    C(/etc/default/kubelet)), else C(/var/lib/kubelet/config.yaml) is used; RV(config_source)
    says which.
  - The kubelet reads the file when it starts; restart it (a handler) to apply the change.
  - C(kubeadm upgrade node) rewrites C(/var/lib/kubelet/config.yaml) from the
    C(kube-system/kubelet-config) ConfigMap; change the ConfigMap too, with
    M(gpufleet.cluster.kubeadm_config_gates).
  - C(--feature-gates) on the kubelet command line overrides the file; such arguments are
    returned in RV(command_line_feature_gates) and warned about. So does a drop-in
    directory (C(--config-dir), files C(*.conf) merged over the file); it is returned in
    RV(config_dir) and warned about.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  path:
    description:
      - The KubeletConfiguration file. Found from the kubelet when omitted (see above).
    type: path
  feature_gates:
    description:
      - Feature gates to set, name to boolean.
    type: dict
    default: {}
  absent_feature_gates:
    description:
      - Feature gates that must not appear in C(featureGates).
    type: list
    elements: str
    default: []
  backup:
    description:
      - Back up the file next to it (Ansible's C(<file>.<pid>.<date>~)) before changing it.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written or backed up.
  diff_mode:
    support: full
    details: The kubelet configuration file before and after.
  platform:
    platforms: posix
seealso:
  - module: gpufleet.cluster.static_pod_flags
  - module: gpufleet.cluster.kubeadm_config_gates
"""

EXAMPLES = r"""
- name: Kubelet | Enable DRA on a 1.33 kubelet
  gpufleet.cluster.kubelet_config_gates:
    feature_gates:
      DynamicResourceAllocation: true
  notify: Restart kubelet

- name: Kubelet | Remove a gate the target release no longer knows
  gpufleet.cluster.kubelet_config_gates:
    path: /var/lib/kubelet/config.yaml
    absent_feature_gates: [DRAControlPlaneController]
  notify: Restart kubelet
"""

RETURN = r"""
path:
  description: The KubeletConfiguration file edited.
  returned: always
  type: str
  sample: /var/lib/kubelet/config.yaml
config_source:
  description:
    - How RV(path) was found. C(param), C(process) (the running kubelet's C(--config)),
      C(systemd) (the kubelet unit), or C(default) (none of these gave one).
  returned: always
  type: str
  sample: process
kubelet_pid:
  description: The kubelet process whose command line gave RV(path).
  returned: when RV(config_source) is C(process)
  type: int
  sample: 812
config_dir:
  description:
    - The kubelet's C(--config-dir); its drop-ins override the file.
  returned: when the kubelet command line has one
  type: str
  sample: /etc/kubernetes/kubelet.conf.d
command_line_feature_gates:
  description:
    - C(--feature-gates) values on the kubelet command line; they override the file.
  returned: when the kubelet command line is known
  type: list
  elements: str
  sample: []
changes:
  description: One item per change (where, what, old, new, why).
  returned: always
  type: list
  elements: dict
  sample:
    - where: KubeletConfiguration featureGates
      what: DynamicResourceAllocation
      old: null
      new: "true"
      why: feature gate wanted, was missing
backup_file:
  description: The backup of the file before the change.
  returned: changed and O(backup) is true and not in check mode
  type: str
  sample: /var/lib/kubelet/config.yaml.4711.2026-02-01@10:12:44~
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.files import (
    backup_and_write,
    file_diff,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import processes as hp
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    ConfigEditError,
    FlagEdit,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.kubelet_config import (
    DEFAULT_KUBELET_CONFIG,
    edit_kubelet_configuration,
    kubelet_argv_from_systemd,
    kubelet_config_path_from_cmdline,
    kubelet_flag_values,
    parse_systemd_service,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.manifests import (
    HAS_YAML,
    YAML_IMPORT_ERROR,
)


def kubelet_processes() -> list[tuple[int, list[str]]]:
    """(pid, argv) of every kubelet of this host (``host.processes``: a kubelet in a
    container on this host reads other files)."""
    found = []
    for pid in hp.own_pids("/proc"):
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8") as fh:
                if fh.read().strip() != "kubelet":
                    continue
        except OSError:
            continue
        argv = hp.read_argv("/proc", pid)
        if argv:
            found.append((pid, argv))
    return found


def absolute(path: str, pid: int | None) -> str:
    """A relative --config is relative to the kubelet's working directory."""
    if os.path.isabs(path) or pid is None:
        return path
    try:
        return os.path.join(os.readlink(f"/proc/{pid}/cwd"), path)
    except OSError:
        return path


def read_optional(path: str) -> str | None:
    """The text of ``path``; None when it is missing or not a bounded UTF-8 text file."""
    try:
        return ig.read_text(path, f"EnvironmentFile {path}", missing_ok=True)
    except ig.InputError:
        return None


def note_command_line(result: dict, argv: list[str]) -> None:
    """Record what on the kubelet command line overrides the config file."""
    result["command_line_feature_gates"] = kubelet_flag_values(argv, "feature-gates")
    config_dirs = [d for d in kubelet_flag_values(argv, "config-dir") if d]
    if config_dirs:
        result["config_dir"] = config_dirs[-1]


def find_config(module: AnsibleModule, result: dict) -> str:
    """Path of the kubelet's config file; fills config_source and friends in result."""
    processes = kubelet_processes()
    paths = {}
    for pid, argv in processes:
        path = kubelet_config_path_from_cmdline(argv)
        if path:
            paths[absolute(path, pid)] = (pid, argv)
    if len(paths) > 1:
        module.fail_json(
            msg=f"several kubelet processes read different config files: {sorted(paths)}; "
            "fix: pass path",
            **result,
        )
    if paths:
        path, (pid, argv) = next(iter(paths.items()))
        result.update(config_source="process", kubelet_pid=pid)
        note_command_line(result, argv)
        return path
    systemctl = shutil.which("systemctl")
    if systemctl:
        rc, out, _err = module.run_command([systemctl, "cat", "kubelet"])
        if rc == 0 and out.strip():
            service = parse_systemd_service(out)
            env_files = {p: read_optional(p) for p, _unused in service.environment_files}
            try:
                argv = kubelet_argv_from_systemd(out, env_files)
            except ConfigEditError as err:
                module.fail_json(msg=str(err), **result)
            path = kubelet_config_path_from_cmdline(argv)
            if path:
                result["config_source"] = "systemd"
                note_command_line(result, argv)
                return path
    result["config_source"] = "default"
    module.warn(
        "no running kubelet and no kubelet unit name a --config file; using the kubeadm "
        f"default {DEFAULT_KUBELET_CONFIG}"
    )
    return DEFAULT_KUBELET_CONFIG


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            feature_gates=dict(type="dict", default={}),
            absent_feature_gates=dict(type="list", elements="str", default=[]),
            backup=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_IMPORT_ERROR)
    params = module.params
    result: dict = {"changed": False, "changes": []}
    if params["path"]:
        path = params["path"]
        result["config_source"] = "param"
    else:
        path = find_config(module, result)
    result["path"] = path
    if result.get("command_line_feature_gates"):
        module.warn(
            "the kubelet command line sets --feature-gates="
            + " --feature-gates=".join(result["command_line_feature_gates"])
            + f"; it overrides featureGates in {path}"
        )
    if result.get("config_dir"):
        module.warn(
            f"the kubelet reads drop-ins from --config-dir={result['config_dir']}; "
            f"featureGates set there override {path}"
        )
    if not os.path.isfile(path):
        module.fail_json(
            msg=f"path={path}: no such KubeletConfiguration file; fix: pass path, or run "
            "'kubeadm init phase kubelet-start' / 'kubeadm join' first",
            **result,
        )
    try:
        edit = FlagEdit.from_params(params)
        before = ig.read_text(path, f"path={path}") or ""
        edited = edit_kubelet_configuration(before, edit)
    except ig.InputError as err:
        module.fail_json(msg=str(err), **result)
    except ConfigEditError as err:
        module.fail_json(msg=f"{path}: {err}", **result)

    result["changes"] = edited.changes_as_dicts()
    result["changed"] = edited.changed
    if edited.changed:
        result["diff"] = file_diff(path, before, edited.text)
        made = backup_and_write(module, path, edited.text, backup=params["backup"])
        if made:
            result["backup_file"] = made
    module.exit_json(**result)


if __name__ == "__main__":
    main()
