#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Read what a node has of the NVIDIA driver: GPUs on the PCI bus, the loaded module."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_driver_facts
short_description: Read the NVIDIA GPUs and the loaded NVIDIA driver of a node
version_added: "0.1.0"
description:
  - Lists the NVIDIA GPUs on the PCI bus from sysfs (vendor C(0x10de), class VGA or 3D
    controller; the data C(lspci) prints), with the architecture each PCI device ID belongs
    to.
  - Reads the loaded kernel module's release and flavor (open or proprietary) from
    C(/proc/driver/nvidia/version), whether C(nouveau) is loaded, and, when C(nvidia-smi)
    is on the node, the GPUs it lists (C(nvidia-smi -L)) and the driver release it reports
    (C(nvidia-smi --query-gpu=driver_version)).
  - Changes nothing.
author:
  - gpufleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  sysfs_root:
    description: Root of sysfs.
    type: path
    default: /sys
  proc_version:
    description: The file the loaded NVIDIA kernel module describes itself in.
    type: path
    default: /proc/driver/nvidia/version
  nvidia_smi:
    description: C(nvidia-smi) command (a name looked up on PATH, or a path).
    type: str
    default: nvidia-smi
attributes:
  check_mode:
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: gpufleet.cluster.nvidia_cdi_spec_check
"""

EXAMPLES = r"""
- name: Driver | Read GPUs and the loaded driver
  gpufleet.cluster.nvidia_driver_facts:
  register: nvidia_driver_host
"""

RETURN = r"""
pci_gpus:
  description: NVIDIA GPUs on the PCI bus.
  returned: always
  type: list
  elements: dict
  sample:
    - {address: "0000:00:06.0", device_id: "0x2335", pci_class: "0x030200", architecture: Hopper}
architectures:
  description: Architectures of RV(pci_gpus), sorted, each once.
  returned: always
  type: list
  elements: str
  sample: [Hopper]
loaded_version:
  description: Release of the loaded NVIDIA kernel module; null when none is loaded.
  returned: always
  type: str
  sample: 580.159.04
loaded_flavor:
  description: C(open) or C(proprietary); null when no module is loaded.
  returned: always
  type: str
  sample: open
nouveau_loaded:
  description: Whether the nouveau kernel module is loaded.
  returned: always
  type: bool
smi_present:
  description: Whether nvidia-smi was found.
  returned: always
  type: bool
smi_gpus:
  description: GPUs listed by C(nvidia-smi -L).
  returned: always
  type: list
  elements: dict
  sample:
    - {index: 0, name: NVIDIA H200, uuid: GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80}
smi_driver_versions:
  description: C(nvidia-smi --query-gpu=driver_version) lines, one per GPU.
  returned: always
  type: list
  elements: str
  sample: [580.159.04]
smi_error:
  description: What nvidia-smi printed when it failed (it fails when no driver is loaded).
  returned: when nvidia-smi exited non-zero
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.driver import (
    PciGpu,
    is_gpu,
    parse_proc_version,
    parse_smi_list,
)


def read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def pci_gpus(sysfs_root: str) -> list[PciGpu]:
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    found = []
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return found
    for entry in entries:
        values = [read(os.path.join(base, entry, name)) for name in ("vendor", "device", "class")]
        if any(v is None for v in values):
            continue
        try:
            vendor, device, pci_class = (int(v.strip(), 16) for v in values)
        except ValueError:
            continue
        if is_gpu(vendor, pci_class):
            found.append(PciGpu(entry, device, pci_class))
    return found


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            proc_version=dict(type="path", default="/proc/driver/nvidia/version"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    gpus = pci_gpus(params["sysfs_root"])
    loaded, flavor = parse_proc_version(read(params["proc_version"]))
    result: dict = {
        "changed": False,
        "pci_gpus": [
            {
                "address": g.address,
                "device_id": f"0x{g.device_id:04x}",
                "pci_class": f"0x{g.pci_class:06x}",
                "architecture": g.architecture,
            }
            for g in gpus
        ],
        "architectures": sorted({g.architecture for g in gpus}),
        "loaded_version": loaded,
        "loaded_flavor": flavor,
        "nouveau_loaded": os.path.isdir(os.path.join(params["sysfs_root"], "module", "nouveau")),
        "smi_present": False,
        "smi_gpus": [],
        "smi_driver_versions": [],
    }
    smi = params["nvidia_smi"]
    smi_path = smi if os.path.isabs(smi) else module.get_bin_path(smi)
    if smi_path and os.path.exists(smi_path):
        result["smi_present"] = True
        rc, out, err = module.run_command([smi_path, "-L"])
        if rc == 0:
            result["smi_gpus"] = [
                {"index": g.index, "name": g.name, "uuid": g.uuid} for g in parse_smi_list(out)
            ]
            rc, out, err = module.run_command(
                [smi_path, "--query-gpu=driver_version", "--format=csv,noheader"]
            )
        if rc == 0:
            result["smi_driver_versions"] = [
                line.strip() for line in out.splitlines() if line.strip()
            ]
        else:
            result["smi_error"] = (err or out).strip()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
