#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Declare the NVIDIA runtime and CDI for containerd in a drop-in of the right version."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: containerd_runtime_config
short_description: Declare the NVIDIA runtime and CDI for containerd in a drop-in file
version_added: "0.1.0"
description:
  - Writes a containerd drop-in (default C(/etc/containerd/conf.d/99-nvidia.toml)) with the
    NVIDIA runtime (C(runtime_type = "io.containerd.runc.v2"), C(options.BinaryName) the
    NVIDIA container runtime, the other runc options copied from the main file's C(runc)
    runtime) and, when O(enable_cdi), C(enable_cdi = true) and C(cdi_spec_dirs).
  - The drop-in's C(version) is the main configuration file's (2 for containerd 1.x, 3 or 4
    for 2.x) and its plugin names follow it (C(io.containerd.grpc.v1.cri) for version 2,
    C(io.containerd.cri.v1.runtime) for 3 and 4). The version is read from the file, never
    from C(containerd config dump), which prints the newest version the binary knows.
  - Below containerd 2.1 an imported file replaces whole plugin sections, so there the
    drop-in carries the main file's whole CRI section with the runtime added.
  - The main file changes in one place only, when its C(imports) does not load the
    drop-in yet, where the drop-in's directory glob is added. It is backed up first. A missing
    main file is created with C(version) and C(imports) only.
  - Fails before writing anything when the main file is version 1, when another file its
    imports load has a different version (containerd would not start), or when CDI is
    wanted on containerd older than 1.7.
  - Restart containerd (a handler) when RV(changed); verify with C(containerd config dump).
author:
  - gpufleet maintainers
requirements:
  - Python 3.11 on the node, or the tomli or toml package
options:
  config:
    description: The main containerd configuration file.
    type: path
    default: /etc/containerd/config.toml
  dropin:
    description: The drop-in this module owns. Rewritten on every change of its content.
    type: path
    default: /etc/containerd/conf.d/99-nvidia.toml
  containerd_version:
    description:
      - containerd release (C(2.1.4)) or C(containerd --version) output. Empty runs
        C(containerd --version).
    type: str
    default: ""
  runtime_name:
    description: Name of the runtime (the RuntimeClass C(handler)).
    type: str
    default: nvidia
  runtime_binary:
    description: The OCI runtime the NVIDIA runtime entry starts.
    type: path
    default: /usr/bin/nvidia-container-runtime
  set_as_default:
    description: Make the NVIDIA runtime containerd's default runtime.
    type: bool
    default: false
  enable_cdi:
    description: Set C(enable_cdi = true) and O(cdi_spec_dirs) in the CRI plugin.
    type: bool
    default: true
  cdi_spec_dirs:
    description: Directories containerd reads CDI specs from.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  backup:
    description: Back up the main file and an existing drop-in before changing them.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
seealso:
  - module: gpufleet.cluster.nvidia_cdi_spec_check
"""

EXAMPLES = r"""
- name: Containerd | NVIDIA runtime and CDI
  gpufleet.cluster.containerd_runtime_config:
    containerd_version: "{{ containerd_version_output.stdout }}"
  notify: Restart containerd
"""

RETURN = r"""
config_version:
  description: Version of the main file, and so of the drop-in.
  returned: success
  type: int
  sample: 3
plugin:
  description: CRI plugin section the runtime and CDI settings are in.
  returned: success
  type: str
  sample: io.containerd.cri.v1.runtime
containerd_version:
  description: The containerd release the drop-in was written for.
  returned: success
  type: str
  sample: 2.1.4
copied_section:
  description: Whether the drop-in carries the main file's whole CRI section (containerd below 2.1).
  returned: success
  type: bool
changes:
  description: What changed, one sentence each.
  returned: always
  type: list
  elements: str
backup_files:
  description: Backups made, one per changed existing file.
  returned: changed and O(backup) and not in check mode
  type: list
  elements: str
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils import input_guard as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.containerd_config import (
    ConfigError,
    dropin_glob,
    loads,
    parse_containerd_version,
    plan_dropin,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.file_write import (
    backup_and_write,
    file_diff,
)


def read(path: str, option: str = "config") -> str | None:
    """The text of ``path``, None when it does not exist. Raises InputError naming
    ``option`` and the file when it is a directory, binary, not UTF-8 or over 4 MiB."""
    return ig.read_text(path, f"{option}={path}", missing_ok=True)


def imported_files(main_text: str | None, main_path: str) -> list[str]:
    """Files containerd loads through the main file's imports (globs expanded)."""
    if main_text is None:
        return []
    try:
        imports = loads(main_text, main_path).get("imports", [])
    except ConfigError:
        return []
    base = os.path.dirname(main_path)
    files = []
    for entry in imports:
        path = os.path.normpath(entry if os.path.isabs(entry) else os.path.join(base, entry))
        files.extend(sorted(glob.glob(path)) if "*" in path else [path])
    return files


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            config=dict(type="path", default="/etc/containerd/config.toml"),
            dropin=dict(type="path", default="/etc/containerd/conf.d/99-nvidia.toml"),
            containerd_version=dict(type="str", default=""),
            runtime_name=dict(type="str", default="nvidia"),
            runtime_binary=dict(type="path", default="/usr/bin/nvidia-container-runtime"),
            set_as_default=dict(type="bool", default=False),
            enable_cdi=dict(type="bool", default=True),
            cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
            backup=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result: dict = {"changed": False, "changes": []}
    version = p["containerd_version"]
    if not version:
        binary = module.get_bin_path("containerd")
        if not binary:
            module.fail_json(
                msg="containerd_version is empty and containerd is not on PATH; fix: install "
                "containerd first or pass containerd_version",
                **result,
            )
        rc, out, err = module.run_command([binary, "--version"])
        if rc != 0:
            module.fail_json(msg=f"containerd --version failed: {err or out}", **result)
        version = out
    main_path, dropin_path = p["config"], p["dropin"]
    try:
        main_text = read(main_path)
        others = {}
        # files already imported, and those the drop-in's glob will import once it is added
        candidates = imported_files(main_text, main_path)
        candidates += sorted(glob.glob(dropin_glob(dropin_path)))
        for path in candidates:
            if os.path.normpath(path) == os.path.normpath(dropin_path) or not os.path.isfile(path):
                continue
            others[path] = read(path, "imported file") or ""
    except ig.InputError as err:
        module.fail_json(msg=str(err), **result)
    try:
        plan = plan_dropin(
            main_text=main_text,
            main_path=main_path,
            dropin_path=dropin_path,
            containerd_version=version,
            other_dropins=others,
            runtime_name=p["runtime_name"],
            runtime_binary=p["runtime_binary"],
            enable_cdi=p["enable_cdi"],
            cdi_spec_dirs=p["cdi_spec_dirs"],
            set_as_default=p["set_as_default"],
        )
    except ConfigError as err:
        module.fail_json(msg=str(err), **result)
    result.update(
        config_version=plan.config_version,
        plugin=plan.plugin,
        copied_section=plan.copied_section,
        containerd_version=".".join(str(x) for x in parse_containerd_version(version)),
    )
    dropin_before = read(dropin_path)
    writes = []
    if plan.main_text is not None and plan.main_text != main_text:
        writes.append((main_path, main_text, plan.main_text))
    if plan.dropin_text != dropin_before:
        writes.append((dropin_path, dropin_before, plan.dropin_text))
    if not writes:
        module.exit_json(**result)
    result["changed"] = True
    result["changes"] = list(plan.notes)
    if dropin_before is None:
        result["changes"].append(f"{dropin_path} created")
    elif plan.dropin_text != dropin_before:
        result["changes"].append(f"{dropin_path} rewritten")
    result["diff"] = [file_diff(path, before, after) for path, before, after in writes]
    backups = [
        # a new file: root-owned, world-readable, as containerd's own files
        backup_and_write(module, path, after, backup=p["backup"], new_file_mode=0o644)
        for path, _, after in writes
    ]
    if any(backups):
        result["backup_files"] = [b for b in backups if b]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
