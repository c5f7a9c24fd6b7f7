#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Check that every GPU of a node has a usable CDI device named by its UUID."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_cdi_spec_check
short_description: Check that every GPU of a node has a usable CDI device named by its UUID
version_added: "0.1.0"
description:
  - Reads the CDI specs (C(*.yaml), C(*.yml), C(*.json)) in O(spec_dirs) and the GPUs
    C(nvidia-smi -L) lists, and fails naming each GPU (index, UUID, name) that has no
    device C(<kind>=<UUID>) in any spec. A spec generated before the driver was loaded, or
    one that holds only C(all), fails this check.
  - Fails too when C(nvidia-smi -L) lists no GPU (nothing to check means the driver does
    not see the GPUs).
  - >-
    Judges each spec of O(kind) C(nvidia.com/gpu) as the CDI library that containerd uses
    loads it (a device with empty C(containerEdits), an invalid name, kind or
    C(cdiVersion), an unknown field: the whole spec is refused) and as a container given
    one of its devices needs it (each device has a C(/dev/nvidia<N>) node, C(/dev/nvidiactl)
    and C(/dev/nvidia-uvm) are in the device or the common edits, every device node's host
    path exists on this host).
  - >-
    C(nvidia-ctk cdi generate --driver-root=DIR) without C(--dev-root) writes devices
    without device nodes when C(DIR/dev) is empty; the failure names the command with
    C(--dev-root).
  - Changes nothing.
author:
  - gpufleet maintainers
requirements:
  - PyYAML for YAML specs
options:
  spec_dirs:
    description: Directories holding CDI specs.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  kind:
    description: CDI kind of the GPU devices.
    type: str
    default: nvidia.com/gpu
  nvidia_smi:
    description: C(nvidia-smi) command (a name looked up on PATH, or a path).
    type: str
    default: nvidia-smi
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
seealso:
  - module: gpufleet.cluster.containerd_runtime_config
"""

EXAMPLES = r"""
- name: Toolkit | Every GPU has a CDI device
  gpufleet.cluster.nvidia_cdi_spec_check:
    spec_dirs: [/etc/cdi, /var/run/cdi]
"""

RETURN = r"""
spec_files:
  description: Spec files read.
  returned: always
  type: list
  elements: str
  sample: [/var/run/cdi/nvidia.yaml]
gpus:
  description: GPUs listed by C(nvidia-smi -L).
  returned: always
  type: list
  elements: dict
devices:
  description: Device names of O(kind) found in the specs.
  returned: always
  type: list
  elements: str
  sample: ["0", "GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80", all]
missing:
  description: GPUs without a device named by their UUID.
  returned: always
  type: list
  elements: dict
spec_problems:
  description: Why a spec of O(kind) C(nvidia.com/gpu) gives no usable GPU, each prefixed
    with its file.
  returned: always
  type: list
  elements: str
  sample:
    - "/var/run/cdi/nvidia.yaml: device '0' has no /dev/nvidia<N> device node: the container
      sees no GPU"
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.cdi import (
    devices_of,
    missing_gpus,
    missing_message,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.cdi_spec import (
    GPU_KIND,
    generate_command,
    gpu_problems,
    library_problems,
    spec_driver_root,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.driver import (
    parse_smi_list,
)

try:
    import yaml  # noqa: F401  (input_guard.load_yaml imports it where YAML is read)

    HAS_YAML = True
except ImportError:  # pragma: no cover - depends on the node
    HAS_YAML = False


def parse_spec(name: str, text: str) -> object:
    """Parsed spec file; raises ValueError (input_guard.InputError) for bad JSON or YAML,
    or data nested deeper than any CDI spec."""
    if name.endswith(".json"):
        return ig.load_json(text, name)
    if not HAS_YAML:
        raise ValueError("PyYAML is needed to read YAML CDI specs")
    return ig.load_yaml(text, name)


def judge_spec(spec: object, path: str, kind: str) -> list[str]:
    """Problems of one spec of ``kind`` (see DOCUMENTATION); [] for another kind."""
    if kind != GPU_KIND or not isinstance(spec, dict) or spec.get("kind") != kind:
        return []
    refused = library_problems(spec)
    if refused:
        return [f"{path}: the CDI library refuses the spec ({p})" for p in refused]
    return [f"{path}: {p}" for p in gpu_problems(spec, os.path.exists)]


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
            kind=dict(type="str", default="nvidia.com/gpu"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    result: dict = {
        "changed": False,
        "spec_files": [],
        "gpus": [],
        "devices": [],
        "missing": [],
        "spec_problems": [],
    }
    devices = []
    roots = []
    for directory in p["spec_dirs"]:
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if not name.endswith((".yaml", ".yml", ".json")) or not os.path.isfile(path):
                continue
            try:
                spec = parse_spec(name, ig.read_text(path) or "")
            except ValueError as err:
                module.fail_json(msg=f"{path} is not a CDI spec: {err}", **result)
            result["spec_files"].append(path)
            devices.extend(devices_of(spec, path))
            problems = judge_spec(spec, path, p["kind"])
            if problems:
                roots.append(spec_driver_root(spec))
            result["spec_problems"].extend(problems)
    result["devices"] = sorted({d.name for d in devices if d.kind == p["kind"]})
    smi = p["nvidia_smi"]
    smi_path = smi if os.path.isabs(smi) else module.get_bin_path(smi)
    if not smi_path or not os.path.exists(smi_path):
        module.fail_json(msg=f"nvidia_smi={smi}: not found; the driver is not installed", **result)
    rc, out, err = module.run_command([smi_path, "-L"])
    if rc != 0:
        module.fail_json(msg=f"nvidia-smi -L failed ({rc}): {(err or out).strip()}", **result)
    gpus = parse_smi_list(out)
    result["gpus"] = [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in gpus]
    if not gpus:
        module.fail_json(msg="nvidia-smi -L lists no GPU; the driver sees none", **result)
    missing = missing_gpus(devices, gpus, p["kind"])
    result["missing"] = [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in missing]
    if missing:
        module.fail_json(msg=missing_message(missing, devices, p["kind"], p["spec_dirs"]), **result)
    if result["spec_problems"]:
        module.fail_json(
            msg="; ".join(result["spec_problems"])
            + "; fix: "
            + "; ".join(dict.fromkeys(generate_command(r) for r in roots))
            + " (--dev-root=/: the device nodes are in the host's /dev), or set "
            "nvidia_container_toolkit_driver_root and nvidia_container_toolkit_dev_root and run "
            "the nvidia_container_toolkit role",
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
