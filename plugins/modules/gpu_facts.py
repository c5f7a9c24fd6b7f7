#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Read the NVIDIA GPUs of a host as Ansible facts."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read the NVIDIA GPUs of a host (identity, memory, driver, MIG, NVLink)
version_added: "0.1.0"
description:
  - Reads, without changing anything, every NVIDIA GPU of the host and sets the facts
    C(gpufleet_gpus), C(gpufleet_gpu_count), C(gpufleet_gpu_driver_version) and
    C(gpufleet_gpu_cuda_driver_version).
  - Per GPU it returns index, UUID, product name, PCI bus id, framebuffer memory in MiB,
    driver and CUDA driver version (also as the semantic versions the NVIDIA DRA driver
    publishes, C(580.159.04) -> C(580.159.4)), CUDA compute capability, architecture, MIG
    capability, current and pending MIG mode, the MIG devices (GPU instance and compute
    instance IDs, profile such as C(1g.18gb), GPU instance profile ID, placement, UUID,
    memory), NVLink peers, serial number and minor number.
  - Two backends. C(nvml) uses NVML through the Python module C(pynvml) (PyPI package
    C(nvidia-ml-py)) when the Python running the module can import it. C(nvidia-smi) runs
    C(nvidia-smi -q -x), C(nvidia-smi --query-gpu=... --format=csv) and C(nvidia-smi -L),
    plus C(nvidia-smi mig -lgi) and C(mig -lci) when a GPU has MIG enabled and
    C(nvidia-smi topo -m) and C(nvlink -s) on hosts with two GPUs or more. C(auto) tries
    NVML first and falls back to nvidia-smi.
  - An C(N/A) or C(Not Supported) answer (for example MIG mode on a GPU without MIG) means
    the GPU lacks the feature; the field is null (C(mig_capable) false), not an error.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - nvidia-ml-py (C(pynvml)) for O(backend=nvml); O(backend=auto) reads nvidia-smi
    without it
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  backend:
    description:
      - Where to read the GPUs from. C(auto) uses NVML when C(pynvml) is importable and
        NVML initialises, else nvidia-smi.
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  nvidia_smi_path:
    description:
      - The nvidia-smi program to run. Defaults to C(nvidia-smi) found on C(PATH) (and in
        C(/usr/bin), C(/usr/local/bin), C(/usr/local/nvidia/bin)).
    type: path
  missing_ok:
    description:
      - When the host has neither nvidia-smi nor NVML (no NVIDIA driver installed), return
        an empty C(gpufleet_gpus) instead of failing.
    type: bool
    default: false
  mig_profiles:
    description:
      - On hosts with a MIG-capable GPU and nvidia-smi, also read the GPU-instance
        profiles and placements the GPU reports (C(nvidia-smi mig -lgip) and C(-lgipp),
        read-only, MIG on or off) into each GPU's C(mig.profiles). Preflight then judges
        a MIG layout against them, also for a GPU model the built-in tables lack.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Without root, C(nvidia-smi mig -lgi) and C(-lci) answer C(Insufficient Permissions);
    MIG devices are then returned without GPU instance profile and placement, with a
    warning. Use C(become) for complete MIG facts.
  - NVLink link counts come from C(nvidia-smi topo -m) (C(NV18) is 18 links) or from the
    active links NVML reports; on NVSwitch systems every active link counts for every
    peer, as C(topo -m) prints it.
seealso:
  - name: NVIDIA MIG user guide
    description: The nvidia-smi MIG commands and output formats read here.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
  - name: nvidia-ml-py
    description: The Python NVML bindings used by the C(nvml) backend.
    link: https://pypi.org/project/nvidia-ml-py/
"""

EXAMPLES = r"""
- name: GPU facts | Read the GPUs of the host
  gpufleet.cluster.gpu_facts:
  become: true

- name: GPU facts | Every GPU has the expected driver
  ansible.builtin.assert:
    that: gpufleet_gpu_driver_version == "580.159.04"
    fail_msg: "driver {{ gpufleet_gpu_driver_version }} found, 580.159.04 expected"

- name: GPU facts | Hosts of a mixed inventory, some without a driver yet
  gpufleet.cluster.gpu_facts:
    missing_ok: true

- name: GPU facts | nvidia-smi of a driver container, no NVML
  gpufleet.cluster.gpu_facts:
    backend: nvidia-smi
    nvidia_smi_path: /run/nvidia/driver/usr/bin/nvidia-smi

- name: GPU facts | MIG-enabled GPUs
  ansible.builtin.debug:
    msg: "{{ gpufleet_gpus | selectattr('mig_mode_current', 'equalto', 'Enabled')
             | map(attribute='index') | list }}"
"""

RETURN = r"""
backend:
  description: The backend that answered (C(nvml), C(nvidia-smi)), or C(none) with
    O(missing_ok) on a host without a driver.
  returned: always
  type: str
  sample: nvidia-smi
ansible_facts:
  description: The GPU facts.
  returned: always
  type: dict
  contains:
    gpufleet_gpu_count:
      description: Number of GPUs.
      type: int
      sample: 2
    gpufleet_gpu_driver_version:
      description: The driver version as the driver reports it; null without a driver.
      type: str
      sample: "580.159.04"
    gpufleet_gpu_driver_version_semver:
      description: The driver version as a semantic version, as the NVIDIA DRA driver
        publishes its C(driverVersion) attribute.
      type: str
      sample: "580.159.4"
    gpufleet_gpu_cuda_driver_version:
      description: The highest CUDA version the driver supports (C(major.minor)).
      type: str
      sample: "13.0"
    gpufleet_gpus:
      description:
        - One entry per GPU, in index order. C(memory_mib) and the MIG devices'
          C(memory_mib) are MiB. C(mig_mode_current)/C(mig_mode_pending) are C(Enabled),
          C(Disabled) or null (GPU without MIG). C(placement_start)/C(placement_size) are
          memory slices. C(nvlink_peers) lists the other GPUs reached over NVLink with
          their link count; C(nvlink_active_links) is null on single-GPU hosts.
        - C(mig.profiles) (MIG-capable GPUs, with O(mig_profiles)) lists the GPU-instance
          profiles the GPU reports, one mapping each with C(name), C(profile_id),
          C(slices), C(memory_mib) (MiB), C(multiprocessors), C(copy_engines),
          C(decoders), C(encoders), C(jpeg_engines), C(ofa_engines), C(max_instances)
          and C(placements) (allowed start slices).
      type: list
      elements: dict
      sample:
        - index: 0
          uuid: GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80
          name: NVIDIA H200
          pci_bus_id: "00000000:00:06.0"
          memory_mib: 143771
          driver_version: "580.159.04"
          driver_version_semver: "580.159.4"
          cuda_driver_version: "13.0"
          cuda_driver_version_semver: "13.0.0"
          compute_capability: "9.0"
          compute_capability_semver: "9.0.0"
          architecture: Hopper
          mig_capable: true
          mig_mode_current: Disabled
          mig_mode_pending: Disabled
          mig_devices: []
          nvlink_peers:
            - index: 1
              uuid: GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c61
              pci_bus_id: "00000000:00:07.0"
              links: 18
          nvlink_active_links: 18
          serial: "1650000000003"
          minor_number: 0
        - index: 0
          uuid: GPU-a0000000-0000-4000-8000-000000000001
          name: NVIDIA A100-PCIE-40GB
          mig_capable: true
          mig_mode_current: Enabled
          mig_mode_pending: Enabled
          mig_devices:
            - index: 0
              gi_id: 11
              ci_id: 0
              profile: 1g.5gb
              gi_profile: 1g.5gb
              gi_profile_id: 19
              ci_profile_id: 0
              placement_start: 0
              placement_size: 1
              uuid: MIG-b0000000-0000-4000-8000-000000000001
              memory_mib: 4864
warnings:
  description: Parts that could not be read (for example MIG placements without root).
  returned: when there are any
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import gpu_facts as gpu_query
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import gpu as ginfo

#: Where drivers put nvidia-smi besides PATH (distribution packages, the .run installer,
#: NVIDIA's CUDA containers).
EXTRA_PATHS = ["/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin"]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "backend": {"type": "str", "choices": list(gpu_query.BACKENDS), "default": "auto"},
            "nvidia_smi_path": {"type": "path"},
            "missing_ok": {"type": "bool", "default": False},
            "mig_profiles": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    smi = params["nvidia_smi_path"]
    if smi:
        if not (os.path.isfile(smi) and os.access(smi, os.X_OK)):
            module.fail_json(
                msg=(
                    f"nvidia_smi_path={smi} is not an executable file; fix: give the path of "
                    "nvidia-smi, or leave nvidia_smi_path unset to search PATH"
                )
            )
        smi_where = f"nvidia_smi_path={smi}"
    else:
        smi = module.get_bin_path("nvidia-smi", required=False, opt_dirs=EXTRA_PATHS)
        smi_where = "nvidia-smi on PATH, " + ", ".join(EXTRA_PATHS)

    def run(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv)

    try:
        host = gpu_query.collect_host(run, params["backend"], smi)
    except ginfo.NoDriverError as err:
        if params["missing_ok"]:
            host = ginfo.HostGpus("none", None, None, [], [f"no NVIDIA driver found: {err}"])
        else:
            module.fail_json(
                msg=(
                    f"no NVIDIA driver found: {err} (looked for {smi_where} and the NVML "
                    "library libnvidia-ml.so.1 through pynvml); fix: install the driver with "
                    "role gpufleet.cluster.nvidia_driver, set nvidia_smi_path to the "
                    "nvidia-smi to run, or set missing_ok=true for hosts without GPUs"
                )
            )
    except ginfo.GpuQueryError as err:
        module.fail_json(msg=f"reading the GPUs failed (backend={params['backend']}): {err}")

    gpus = [gpu.to_dict() for gpu in host.gpus]
    warnings = list(host.warnings)
    if params["mig_profiles"]:
        found, more = gpu_query.collect_mig_profiles(run, smi, host.gpus)
        warnings.extend(more)
        for gpu, record in zip(host.gpus, gpus, strict=True):
            if gpu.index in found:
                record["mig_profiles"] = found[gpu.index]
    for warning in warnings:
        module.warn(warning)
    module.exit_json(
        changed=False,
        backend=host.backend,
        ansible_facts={
            "gpufleet_gpus": gpus,
            "gpufleet_gpu_count": len(gpus),
            "gpufleet_gpu_driver_version": host.driver_version,
            "gpufleet_gpu_driver_version_semver": ginfo.semver(host.driver_version),
            "gpufleet_gpu_cuda_driver_version": host.cuda_driver_version,
        },
    )


if __name__ == "__main__":
    main()
