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
  - On containerd 1.x an imported file replaces whole plugin sections, so there the
    drop-in carries the CRI section in effect before it (the main file's and earlier
    drop-ins', with the runtimes C(containerd config dump) shows) with the runtime added.
  - The main file changes in one place only, when its C(imports) does not load the
    drop-in yet, where the drop-in's directory glob is added. It is backed up first. A missing
    main file is created with C(version) and C(imports) only.
  - Fails before writing anything when the main file is version 1, when another file its
    imports load has a different version (containerd would not start), or when CDI is
    wanted on containerd older than 1.7.
  - With containerd on PATH, C(containerd config dump) is read before and after the
    write; when a setting in effect before is gone, or the runtime or CDI is not in
    effect, the files are put back as they were and the module fails naming the
    settings, so containerd is never restarted with them.
  - Restart containerd (a handler) when it reports a change; verify with C(containerd config dump).
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - Python 3.11 on the node, or the tomli or toml package
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
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
  writer:
    description:
      - Who writes the drop-in. C(nvidia-ctk) is NVIDIA's C(nvidia-ctk runtime configure
        --config-source=file --drop-in-config), run on a copy of the main file (it rewrites
        the file it reads, comments and layout lost), its drop-in installed here.
        C(gpufleet) is this module's own writer. C(auto) takes nvidia-ctk where it is right
        (containerd 2.0 and newer, toolkit 1.20 or newer, default CDI spec directories)
        and this module's writer elsewhere; on containerd 1.x only it keeps the settings
        of earlier drop-ins.
    type: str
    choices: [auto, nvidia-ctk, gpufleet]
    default: auto
  nvidia_ctk:
    description: The nvidia-ctk binary (a name is looked up on PATH).
    type: str
    default: nvidia-ctk
attributes:
  check_mode:
    support: full
    details: In check mode nothing is written or backed up; nvidia-ctk, when it writes the
      drop-in, runs on a temporary copy.
  diff_mode:
    support: full
    details: The main file and the drop-in, before and after, for each one that changes.
  platform:
    platforms: posix
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
  description: Whether the drop-in carries the whole CRI section in effect (containerd 1.x).
  returned: success
  type: bool
writer:
  description: Who wrote the drop-in (C(nvidia-ctk) or C(gpufleet)), and RV(writer_reason) why.
  returned: success
  type: str
  sample: nvidia-ctk
writer_reason:
  description: Why that writer.
  returned: success
  type: str
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
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.files import (
    backup_and_write,
    file_diff,
    write_atomic,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd_merge as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.containerd import (
    ConfigError,
    choose_writer,
    cri_plugin,
    dropin_glob,
    effective_problems,
    file_version,
    loads,
    parse_containerd_version,
    plan_dropin,
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


DUMP_FAILS = "containerd config dump fails"


def pick_writer(
    module: AnsibleModule, containerd: str, main_text: str | None, p: dict
) -> tuple[str, str]:
    """(writer, why): :func:`choose_writer` on the toolkit that nvidia-ctk reports; with
    ``auto``, this module's writer when nvidia-ctk is absent or there is no main file."""
    ctk = module.get_bin_path(p["nvidia_ctk"]) if p["writer"] != "gpufleet" else None
    toolkit = ""
    if ctk:
        rc, out, err = module.run_command([ctk, "--version"])
        match = re.search(r"version\s+v?(\d+\.\d+\.\d+)", out + err)
        toolkit = match.group(1) if rc == 0 and match else ""
    if p["writer"] == "auto" and (not ctk or not toolkit or main_text is None):
        missing = (
            "no main file" if ctk and toolkit else f"{p['nvidia_ctk']} not found or no version"
        )
        return "gpufleet", missing
    if p["writer"] == "nvidia-ctk" and not ctk:
        raise ConfigError(
            f"writer=nvidia-ctk but {p['nvidia_ctk']!r} is not on PATH; fix: install "
            "nvidia-container-toolkit-base, set nvidia_ctk to its path, or use writer=auto"
        )
    return choose_writer(p["writer"], containerd, toolkit, p["cdi_spec_dirs"])


def nvidia_ctk_dropin(module: AnsibleModule, main_text: str, version: int, p: dict) -> str:
    """The drop-in NVIDIA's ``nvidia-ctk runtime configure`` writes for ``main_text``,
    made in a temporary directory on a copy of the main file (which it rewrites)."""
    ctk = module.get_bin_path(p["nvidia_ctk"], required=True)
    with tempfile.TemporaryDirectory(prefix="gpufleet-ctk-") as tmp:
        main_copy, dropin = os.path.join(tmp, "config.toml"), os.path.join(tmp, "99-nvidia.toml")
        with open(main_copy, "w", encoding="utf-8") as fh:
            fh.write(main_text)
        argv = [
            ctk,
            "runtime",
            "configure",
            "--runtime=containerd",
            f"--config={main_copy}",
            f"--drop-in-config={dropin}",
            "--config-source=file",
            f"--nvidia-runtime-name={p['runtime_name']}",
            f"--nvidia-runtime-path={p['runtime_binary']}",
        ]
        argv += ["--enable-cdi"] if p["enable_cdi"] else []
        argv += ["--set-as-default"] if p["set_as_default"] else []
        rc, out, err = module.run_command(argv)
        if rc != 0 or not os.path.isfile(dropin):
            raise ConfigError(
                f"nvidia-ctk runtime configure failed (rc={rc}): {(err or out).strip()[-400:]}; "
                "fix: run it by hand to see why, or use writer=gpufleet"
            )
        with open(dropin, encoding="utf-8") as fh:
            text = fh.read()
    if file_version(loads(text, "nvidia-ctk's drop-in")) != version:
        raise ConfigError(
            f"nvidia-ctk wrote a drop-in of another version than the main file's ({version}); "
            "containerd would not start; fix: use writer=gpufleet"
        )
    return (
        "# Written by nvidia-ctk runtime configure --config-source=file for the gpufleet.cluster\n"
        "# nvidia_container_toolkit role (module containerd_runtime_config); edits here are\n"
        "# overwritten on the next run.\n" + text
    )


def config_dump(module: AnsibleModule, binary: str, main_path: str) -> dict | None:
    """``containerd --config MAIN config dump``, parsed; None when containerd cannot read
    the files (the plan's own checks then say why)."""
    rc, out, _unused = module.run_command([binary, "--config", main_path, "config", "dump"])
    if rc != 0:
        return None
    try:
        return loads(out, "containerd config dump")
    except ConfigError:
        return None


def judge_written(
    module: AnsibleModule, binary: str, main_path: str, before: dict, plugin: str, p: dict
) -> list[str]:
    """What is wrong with the files as written, read by the node's own containerd: it no
    longer loads them, a setting in effect before is gone, or the runtime or CDI is not in
    effect."""
    rc, out, err = module.run_command([binary, "--config", main_path, "config", "dump"])
    if rc != 0:
        return [f"{DUMP_FAILS}: {(err or out).strip()[-300:]}"]
    after = loads(out, "containerd config dump")
    owned = cm.owned_by_runtime_change(
        cri_plugin(file_version(after)), p["runtime_name"], set_as_default=p["set_as_default"]
    )
    problems = [f"lost {lost}" for lost in cm.lost_settings(before, after, owned)]
    return problems + effective_problems(
        after,
        runtime_name=p["runtime_name"],
        runtime_binary=p["runtime_binary"],
        enable_cdi=p["enable_cdi"],
        cdi_spec_dirs=p["cdi_spec_dirs"],
    )


def restore(module: AnsibleModule, path: str, text: str | None) -> None:
    """Put ``path`` back as it was (``text`` None: it did not exist)."""
    if text is None:
        if os.path.exists(path):
            os.unlink(path)
        return
    write_atomic(module, path, text)


def _containerd_version(module: AnsibleModule, binary: str | None, result: dict) -> str:
    """The ``containerd_version`` option, else what ``containerd --version`` prints. Fails
    the module when neither is there."""
    version = module.params["containerd_version"]
    if version:
        return version
    if not binary:
        module.fail_json(
            msg="containerd_version is empty and containerd is not on PATH; fix: install "
            "containerd first or pass containerd_version",
            **result,
        )
    rc, out, err = module.run_command([binary, "--version"])
    if rc != 0:
        module.fail_json(msg=f"containerd --version failed: {err or out}", **result)
    return out


def _other_files(main_text: str | None, main_path: str, dropin_path: str) -> dict[str, str]:
    """path -> text of the files already imported by the main file and of those the
    drop-in's glob will import once it is added (the drop-in itself left out). Raises
    ``InputError`` for a file that cannot be read."""
    others = {}
    candidates = imported_files(main_text, main_path)
    candidates += sorted(glob.glob(dropin_glob(dropin_path)))
    for path in candidates:
        if os.path.normpath(path) == os.path.normpath(dropin_path) or not os.path.isfile(path):
            continue
        others[path] = read(path, "imported file") or ""
    return others


#: The module's options (DOCUMENTATION describes each).
ARGUMENT_SPEC = dict(
    config=dict(type="path", default="/etc/containerd/config.toml"),
    dropin=dict(type="path", default="/etc/containerd/conf.d/99-nvidia.toml"),
    containerd_version=dict(type="str", default=""),
    runtime_name=dict(type="str", default="nvidia"),
    runtime_binary=dict(type="path", default="/usr/bin/nvidia-container-runtime"),
    set_as_default=dict(type="bool", default=False),
    enable_cdi=dict(type="bool", default=True),
    cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
    backup=dict(type="bool", default=True),
    writer=dict(type="str", default="auto", choices=["auto", "nvidia-ctk", "gpufleet"]),
    nvidia_ctk=dict(type="str", default="nvidia-ctk"),
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    p = module.params
    result: dict = {"changed": False, "changes": []}
    binary = module.get_bin_path("containerd")
    version = _containerd_version(module, binary, result)
    main_path, dropin_path = p["config"], p["dropin"]
    try:
        main_text = read(main_path)
        others = _other_files(main_text, main_path, dropin_path)
    except ig.InputError as err:
        module.fail_json(msg=str(err), **result)
    before = config_dump(module, binary, main_path) if binary and main_text is not None else None
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
            effective=before,
        )
    except ConfigError as err:
        module.fail_json(msg=str(err), **result)
    try:
        writer, why = pick_writer(module, version, main_text, p)
        if writer == "nvidia-ctk":
            plan.dropin_text = nvidia_ctk_dropin(module, main_text or "", plan.config_version, p)
    except ConfigError as err:
        module.fail_json(msg=str(err), **result)
    result.update(
        writer=writer,
        writer_reason=why,
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
        for path, _unused, after in writes
    ]
    if any(backups):
        result["backup_files"] = [b for b in backups if b]
    if before is not None and not module.check_mode:
        problems = judge_written(module, binary, main_path, before, plan.plugin, p)
        if problems:
            for path, before_text, _unused in writes:
                restore(module, path, before_text)
            module.fail_json(
                msg=f"{main_path}: the new drop-in would change what containerd runs with, so "
                f"the files were put back as they were: {'; '.join(problems[:8])}"
                + (f" (and {len(problems) - 8} more)" if len(problems) > 8 else "")
                + (
                    "; fix: correct the file containerd names, or switch the writer option "
                    "to the other writer, then run again"
                    if problems[0].startswith(DUMP_FAILS)
                    else "; fix: move the settings named into the main file or a drop-in "
                    f"that sorts before {os.path.basename(dropin_path)}, then run again"
                ),
                **result,
            )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
