#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Keep the DynamicResources plugin enabled in a custom KubeSchedulerConfiguration."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: scheduler_dynamic_resources
short_description: Keep the DynamicResources scheduler plugin enabled in a custom scheduler config
version_added: "0.1.0"
description:
  - Reads the C(--config) flag of the kube-scheduler container in its kubeadm static pod
    manifest. Without it the scheduler runs its default profile, which has the
    C(DynamicResources) plugin whenever the C(DynamicResourceAllocation) feature gate is on
    (C(pkg/scheduler/apis/config/v1/default_plugins.go)); the module then changes nothing and
    returns RV(custom_config=false).
  - With it, the KubeSchedulerConfiguration (C(kubescheduler.config.k8s.io/v1)) is edited so
    that no profile disables C(DynamicResources). The plugin is removed from every
    C(disabled) list, and where C("*") is disabled at C(multiPoint) or at one of its
    extension points it is added to that point's C(enabled) list. Other content is kept;
    comments in the scheduler config file are lost (it is re-written as YAML).
  - The C(--config) path is the path inside the scheduler container. It is resolved to the
    host path through the container's C(volumeMounts) and the pod's C(hostPath) C(volumes)
    (kubeadm mounts a host file at the same path through C(scheduler.extraVolumes)). Pass
    O(config) when the file is not mounted from a host path.
  - The scheduler reads its config file only at start, and the kubelet does not watch that
    file. When the file changes and O(restart) is true, the module sets the pod annotation
    C(gpufleet.io/config-hash) (SHA-256 of the config file) in the scheduler manifest, so that
    the kubelet recreates the static pod. The annotation is also updated when it is present
    but no longer matches the file. With O(restart=false) the manifest is left alone and
    RV(restart_needed) says the kube-scheduler pod must be restarted by hand.
  - The annotation is lost at the next C(kubeadm upgrade apply), which re-writes the
    manifest and restarts the scheduler anyway.
  - Backups go to O(backup_dir), outside the static pod directory, because the kubelet runs
    every non-hidden file of that directory as a static pod, backups included.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  manifest:
    description:
      - The kube-scheduler static pod manifest.
    type: path
    default: /etc/kubernetes/manifests/kube-scheduler.yaml
  config:
    description:
      - Host path of the KubeSchedulerConfiguration file, used instead of the path resolved
        from the manifest's C(volumeMounts) and C(volumes).
      - Ignored (with a warning) when the manifest has no C(--config) flag, because the
        scheduler then reads no file.
    type: path
  restart:
    description:
      - Set the C(gpufleet.io/config-hash) annotation in the manifest when the config file
        changed, so that the kubelet restarts the scheduler with the new file.
    type: bool
    default: true
  backup:
    description:
      - Copy each file to O(backup_dir) before changing it.
    type: bool
    default: true
  backup_dir:
    description:
      - Directory for backups, named C(<file name>.<pid>.<YYYY-MM-DD@HH:MM:SS>~) as
        Ansible's own backups. Must not be the static pod directory.
    type: path
    default: /etc/kubernetes/tmp
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written or backed up.
  diff_mode:
    support: full
    details: The scheduler configuration file and the kube-scheduler manifest, before and
      after, for each one that changes.
  platform:
    platforms: posix
notes:
  - Whether the C(DynamicResourceAllocation) gate is on is set by
    M(gpufleet.cluster.static_pod_flags); this module only looks after the plugin.
seealso:
  - module: gpufleet.cluster.static_pod_flags
"""

EXAMPLES = r"""
- name: DRA | Keep the DynamicResources scheduler plugin enabled
  gpufleet.cluster.scheduler_dynamic_resources:
    backup_dir: /var/backups/gpufleet

- name: DRA | Same, for a config file that is not mounted from a host path
  gpufleet.cluster.scheduler_dynamic_resources:
    manifest: /etc/kubernetes/manifests/kube-scheduler.yaml
    config: /srv/kube/scheduler-config.yaml
    restart: false
"""

RETURN = r"""
custom_config:
  description: Whether the scheduler runs with a C(--config) file.
  returned: always
  type: bool
  sample: true
message:
  description: What was found, in one sentence.
  returned: always
  type: str
  sample: kube-scheduler has no --config flag; the default profile runs DynamicResources
    whenever the DynamicResourceAllocation feature gate is on
manifest:
  description: The manifest read.
  returned: always
  type: str
  sample: /etc/kubernetes/manifests/kube-scheduler.yaml
container_path:
  description: The C(--config) value, a path inside the scheduler container.
  returned: custom_config
  type: str
  sample: /etc/kubernetes/scheduler-config.yaml
path:
  description: The host path of the config file.
  returned: custom_config
  type: str
  sample: /etc/kubernetes/scheduler-config.yaml
changes:
  description: One item per change to the config file, in order.
  returned: always
  type: list
  elements: dict
  sample:
    - where: KubeSchedulerConfiguration profile default-scheduler plugins.multiPoint.disabled
      what: DynamicResources
      old: disabled
      new: null
      why: DRA needs the DynamicResources plugin
config_hash:
  description: SHA-256 (hex) of the config file after the run.
  returned: custom_config
  type: str
annotation_changed:
  description: Whether the C(gpufleet.io/config-hash) annotation in the manifest changed.
  returned: custom_config
  type: bool
restart_needed:
  description: The config file changed but the manifest was not touched (O(restart=false));
    the kube-scheduler pod must be restarted to read it.
  returned: always
  type: bool
backup_file:
  description: The backup of the config file before the change.
  returned: the config changed and O(backup) is true and not in check mode
  type: str
manifest_backup_file:
  description: The backup of the manifest before the annotation changed.
  returned: the annotation changed and O(backup) is true and not in check mode
  type: str
"""

import hashlib
import os
import posixpath
import re

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.files import (
    backup_and_write,
    file_diff,
    refuse_static_pod_backup_dir,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    ConfigEditError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.manifests import (
    HAS_YAML,
    SCHEDULER,
    YAML_IMPORT_ERROR,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.scheduler_config import (
    enable_dynamic_resources,
)

if HAS_YAML:
    import yaml

ANNOTATION = "gpufleet.io/config-hash"


def _container(pod: dict, what: str) -> dict:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if isinstance(c, dict) and c.get("name") == SCHEDULER:
            return c
    raise ConfigEditError(
        f"{what}: no container named {SCHEDULER}; fix: pass the kube-scheduler static pod "
        "manifest (kubeadm writes /etc/kubernetes/manifests/kube-scheduler.yaml)"
    )


def config_flag(pod: dict, what: str) -> str | None:
    """The last ``--config`` value of the scheduler container (``command`` then ``args``),
    as ``--config=PATH`` or ``--config PATH``; None when absent."""
    argv = [str(a) for a in (_container(pod, what).get("command") or [])]
    argv += [str(a) for a in (_container(pod, what).get("args") or [])]
    found = None
    for i, arg in enumerate(argv):
        if arg.startswith("--config="):
            found = arg.split("=", 1)[1]
        elif arg == "--config" and i + 1 < len(argv):
            found = argv[i + 1]
    return found


def host_path(pod: dict, container_path: str, what: str) -> str:
    """Resolve a path inside the scheduler container to the host path, through the longest
    matching ``volumeMounts[].mountPath`` and its ``hostPath`` volume."""
    target = posixpath.normpath(container_path)
    best = None
    for m in _container(pod, what).get("volumeMounts") or []:
        mount = posixpath.normpath(str(m.get("mountPath", "")))
        if (target == mount or target.startswith(mount.rstrip("/") + "/")) and (
            best is None or len(mount) > len(best[0])
        ):
            best = (mount, m)
    fix = "fix: mount the file from the host (kubeadm scheduler.extraVolumes) or pass config"
    if best is None:
        raise ConfigEditError(
            f"{what}: --config={container_path} is under no volumeMount of {SCHEDULER}; {fix}"
        )
    mount, m = best
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if isinstance(v, dict) and v.get("name") == m.get("name"):
            hp = (v.get("hostPath") or {}).get("path")
            if not hp:
                raise ConfigEditError(
                    f"{what}: volume {m.get('name')!r} holding --config={container_path} is "
                    f"not a hostPath volume; {fix}"
                )
            rest = target[len(mount) :].lstrip("/")
            return posixpath.join(hp, rest) if rest else hp
    raise ConfigEditError(
        f"{what}: volumeMount {m.get('name')!r} has no volume of that name; {fix}"
    )


def set_annotation(text: str, value: str, what: str) -> str:
    """Set ``metadata.annotations[ANNOTATION]`` of a pod manifest to ``value``, editing the
    text in place for kubeadm's block layout and re-dumping the document otherwise."""
    expected = ig.load_yaml(text, what)
    meta = expected.setdefault("metadata", {})
    if not isinstance(meta.get("annotations"), dict):
        meta["annotations"] = {}
    meta["annotations"][ANNOTATION] = value
    edited = _annotation_in_text(text, value)
    if edited is not None and ig.load_yaml(edited, what) == expected:
        return edited
    return yaml.safe_dump(expected, sort_keys=False, default_flow_style=False)


def _get(node, key):
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return k, v
    return None, None


def _annotation_in_text(text: str, value: str) -> str | None:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    meta_key, meta = _get(root, "metadata")
    if not isinstance(meta, yaml.MappingNode) or meta.flow_style or not meta.value:
        return None
    indent = meta.value[0][0].start_mark.column
    _unused, ann = _get(meta, "annotations")
    if ann is None:
        at = text.find("\n", meta_key.end_mark.index) + 1
        if at == 0:
            return None
        pad = " " * indent
        return text[:at] + f"{pad}annotations:\n{pad}  {ANNOTATION}: {value}\n" + text[at:]
    if not isinstance(ann, yaml.MappingNode) or ann.flow_style or not ann.value:
        return None
    _unused, old = _get(ann, ANNOTATION)
    if isinstance(old, yaml.ScalarNode):
        start, end = old.start_mark.index, old.end_mark.index
        if "\n" in text[start:end]:
            return None
        return text[:start] + value + text[end:]
    last = ann.value[-1][1]
    at = text.find("\n", last.end_mark.index) + 1
    if at == 0 or re.search(r"\S", text[last.end_mark.index : at - 1]):
        return None
    pad = " " * ann.value[0][0].start_mark.column
    return text[:at] + f"{pad}{ANNOTATION}: {value}\n" + text[at:]


def _read(module: AnsibleModule, path: str, what: str, fix: str, result: dict) -> str:
    if not os.path.isfile(path):
        module.fail_json(msg=f"{what}={path}: no such file; fix: {fix}", **result)
    try:
        return ig.read_text(path, f"{what}={path}") or ""
    except ig.InputError as err:  # binary, not UTF-8, over 4 MiB
        module.fail_json(msg=str(err), **result)


def _config_of(module: AnsibleModule, manifest_text: str, what: str, result: dict) -> tuple:
    """``(static pod, --config path in the container, its host path)`` of the
    kube-scheduler manifest ``manifest_text``; the host path is the ``config`` option when
    given. Exits the module unchanged when the scheduler has no ``--config`` flag; fails
    it for a manifest that is no YAML mapping or a path it cannot map to the host."""
    params = module.params
    try:
        pod = ig.load_yaml(manifest_text, what)
        if not isinstance(pod, dict):
            raise ConfigEditError(f"{what} is not a YAML mapping; fix: pass the manifest file")
        container_path = config_flag(pod, what)
        if container_path is None:
            if params["config"]:
                module.warn(
                    f"config={params['config']} ignored: {SCHEDULER} has no --config flag in "
                    f"{params['manifest']}, so it reads no configuration file"
                )
            result["message"] = (
                f"{SCHEDULER} has no --config flag; the default profile runs DynamicResources "
                "whenever the DynamicResourceAllocation feature gate is on"
            )
            module.exit_json(**result)
        path = params["config"] or host_path(pod, container_path, what)
    except (ConfigEditError, ig.InputError) as err:
        module.fail_json(msg=str(err), **result)
    return pod, container_path, path


#: The module's options (DOCUMENTATION describes each).
ARGUMENT_SPEC = dict(
    manifest=dict(type="path", default="/etc/kubernetes/manifests/kube-scheduler.yaml"),
    config=dict(type="path"),
    restart=dict(type="bool", default=True),
    backup=dict(type="bool", default=True),
    backup_dir=dict(type="path", default="/etc/kubernetes/tmp"),
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_IMPORT_ERROR)
    params = module.params
    manifest = params["manifest"]
    result: dict = {
        "changed": False,
        "manifest": manifest,
        "custom_config": False,
        "changes": [],
        "restart_needed": False,
    }
    manifest_text = _read(
        module,
        manifest,
        "manifest",
        "pass the kube-scheduler static pod manifest "
        "(kubeadm writes /etc/kubernetes/manifests/kube-scheduler.yaml)",
        result,
    )
    what = f"manifest={manifest}"
    pod, container_path, path = _config_of(module, manifest_text, what, result)
    result.update(custom_config=True, container_path=container_path, path=path)
    before = _read(
        module,
        path,
        "config",
        f"the file named by {SCHEDULER} --config={container_path} must exist on this host "
        "(pass its host path as config)",
        result,
    )
    try:
        edited = enable_dynamic_resources(before)
    except ConfigEditError as err:
        module.fail_json(msg=f"config={path}: {err}", **result)
    after = edited.text
    digest = hashlib.sha256(after.encode("utf-8")).hexdigest()
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    current = annotations.get(ANNOTATION) if isinstance(annotations, dict) else None
    bump = params["restart"] and (
        edited.changed or (current is not None and str(current) != digest)
    )
    new_manifest = set_annotation(manifest_text, digest, what) if bump else manifest_text
    result.update(
        changes=edited.changes_as_dicts(),
        config_hash=digest,
        annotation_changed=new_manifest != manifest_text,
        restart_needed=bool(edited.changed and not params["restart"]),
    )
    result["changed"] = edited.changed or result["annotation_changed"]
    result["message"] = (
        f"{SCHEDULER} reads {container_path} (host path {path}); "
        + (
            f"DynamicResources enabled ({len(edited.changes)} change(s))"
            if edited.changed
            else "DynamicResources already enabled"
        )
        + ("; manifest annotated to restart the scheduler" if result["annotation_changed"] else "")
        + ("; restart the kube-scheduler pod to load it" if result["restart_needed"] else "")
    )
    diffs = []
    if edited.changed:
        diffs.append(file_diff(path, before, after))
    if result["annotation_changed"]:
        diffs.append(file_diff(manifest, manifest_text, new_manifest))
    if diffs:
        result["diff"] = diffs
    if result["changed"] and not module.check_mode:
        if params["backup"]:
            # judged before either file is written: no half-done edit
            refuse_static_pod_backup_dir(
                module, params["backup_dir"], os.path.dirname(manifest), **result
            )
        backup = {"backup": params["backup"], "backup_dir": params["backup_dir"]}
        if edited.changed:
            made = backup_and_write(module, path, after, **backup)
            if made:
                result["backup_file"] = made
        if result["annotation_changed"]:
            made = backup_and_write(module, manifest, new_manifest, **backup)
            if made:
                result["manifest_backup_file"] = made
    module.exit_json(**result)


if __name__ == "__main__":
    main()
