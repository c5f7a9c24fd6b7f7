#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Apply a MIG layout (GPU instances at planned placements) to the GPUs of a host."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_mig
short_description: Carve NVIDIA GPUs into MIG GPU instances at planned placements
version_added: "0.1.0"
description:
  - Reads the GPUs with C(nvidia-smi) (C(-q -x), C(--query-compute-apps), C(mig -lgi),
    C(mig -lci), C(mig -lgip), C(mig -lgipp)), plans the wanted layout with the placement
    planner (the profiles and placements the driver prints win over built-in data) and,
    when the GPUs differ from the plan, changes only what differs.
  - Before a MIG mode change it finds the GPU clients (GPU processes, active systemd units
    C(nvidia-persistenced), C(nvidia-dcgm), C(dcgm-exporter), C(nvidia-fabricmanager), the
    C(nvidia_drm) kernel module, the DRA kubelet plugin and device plugin containers) and
    stops those named in O(allow_stop); any other client stops the run before a change,
    with a message naming it and the option that allows it. Stopped clients are restarted
    at the end, also when the change fails.
  - Order of changes, per GPU. Compute instances then GPU instances not in the plan are
    destroyed; the MIG mode is set (C(nvidia-smi -i N -mig 0|1)); a mode left pending is
    reset (C(nvidia-smi -i N -r)) when O(allow_gpu_reset), else reported as
    C(reboot_required) when O(allow_reboot), else refused naming the holder; the missing
    GPU instances are created at their placements with one default compute instance each
    (C(nvidia-smi mig -i N -cgi 19:0,19:1 -C)); the GPUs are read again and compared with
    the plan.
  - MIG mode is never left on with zero instances. O(mig_enabled=true) with an empty
    layout is refused; a GPU on which this run enabled MIG and then failed to create the
    instances is switched back off.
  - A GPU without MIG (C(nvidia-smi) answers C(Not Supported), mode C(N/A)) is reported
    with MIG disabled and left alone, unless the layout asks it for instances (an error).
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML, for a mig-parted configuration written in YAML (JSON needs none)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  layout:
    description:
      - Wanted GPU instances, a dict of MIG profile to count (C(1g.18gb) to C(7)), the same
        on every GPU of O(devices). Mutually exclusive with O(config).
    type: dict
  config:
    description:
      - A mig-parted config (keys C(version) and C(mig-configs)), of which O(config_name) is
        applied; entries may differ per GPU index and C(device-filter).
    type: dict
  config_name:
    description: The entry of O(config) C(mig-configs) to apply.
    type: str
  devices:
    description:
      - GPUs to change, C(all) or a list of indices (as C(nvidia-smi -L) numbers them).
    type: raw
    default: all
  mig_enabled:
    description:
      - With O(layout), C(false) turns MIG off (the layout must then be empty).
    type: bool
    default: true
  allow_stop:
    description:
      - GPU clients the module may stop during a MIG mode change and restart after.
    type: list
    elements: str
    choices: [nvidia-persistenced, nvidia-dcgm, dcgm-exporter, nvidia-fabricmanager,
              dra-kubelet-plugin, k8s-device-plugin, nvidia-drm]
    default: []
  allow_gpu_reset:
    description: Reset a GPU whose MIG mode stayed pending (C(nvidia-smi -i N -r)).
    type: bool
    default: true
  allow_reboot:
    description:
      - When a GPU process holds the GPU (or the mode stays pending after a reset), leave
        the mode pending and return C(reboot_required=true) instead of failing; the caller
        reboots and the C(gpufleet-mig.service) unit (role C(mig)) re-applies the layout.
    type: bool
    default: false
  nvidia_smi_path:
    description: The nvidia-smi to run (default C(nvidia-smi) on C(PATH)).
    type: path
  dra_driver:
    description:
      - The node runs NVIDIA's DRA driver (driver C(gpu.nvidia.com)). A MIG profile it
        cannot serve is then refused before any change, naming the profile and why (a
        compute instance narrower than its GPU instance (C(1c.3g.71gb)), on which NVIDIA's
        DRA kubelet plugin exits at start and crash-loops).
    type: bool
    default: false
  dynamic_mig:
    description:
      - The node's DRA driver creates MIG devices per claim (NVIDIA's C(DynamicMIG) gate).
        Then C(layout={}) with C(mig_enabled=true) is accepted and destroys every compute and
        GPU instance with MIG mode left on, the state the driver starts from (role C(mig),
        C(tasks_from=mode)).
    type: bool
    default: false
  variable_prefix:
    description:
      - How error messages name the options; role C(mig) passes C(mig_) so that a
        refusal names C(mig_allow_stop) rather than C(allow_stop).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    details: Reads and plans; reports what would change and which clients would stop.
  diff_mode:
    support: full
    details: Before and after layout, one line per GPU and per GPU instance.
  platform:
    platforms: posix
notes:
  - Needs root (MIG management reads C(/proc/driver/nvidia/capabilities/mig/config)).
  - On Hopper and newer GPUs MIG mode does not survive a reboot or driver reload; role
    C(gpufleet.cluster.mig) installs C(gpufleet-mig.service) to re-apply it at boot.
seealso:
  - name: NVIDIA MIG user guide
    description: MIG profiles, placements and the nvidia-smi MIG commands.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
  - name: NVIDIA mig-parted
    description: The config format accepted by O(config).
    link: https://github.com/NVIDIA/mig-parted
"""

EXAMPLES = r"""
- name: MIG | Seven 1g.18gb instances on every H200
  gpufleet.cluster.nvidia_mig:
    layout: {"1g.18gb": 7}
    allow_stop: [dra-kubelet-plugin, nvidia-persistenced]
  become: true

- name: MIG | A mig-parted config entry
  gpufleet.cluster.nvidia_mig:
    config: "{{ lookup('ansible.builtin.file', 'mig-config.yaml') | from_yaml }}"
    config_name: all-balanced
  become: true

- name: MIG | Turn MIG off on GPU 1
  gpufleet.cluster.nvidia_mig:
    layout: {}
    mig_enabled: false
    devices: [1]
  become: true
"""

RETURN = r"""
gpus:
  description:
    - One entry per selected GPU. C(before)/C(after) hold C(mig_mode_current),
      C(mig_mode_pending) and C(instances) (profile, profile_id, start, size in memory
      slices, instance_id, compute_instances). C(created)/C(destroyed) list GPU instances.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA H200
      mig_capable: true
      changed: true
      before: {mig_mode_current: Disabled, mig_mode_pending: Disabled, instances: []}
      after:
        mig_mode_current: Enabled
        mig_mode_pending: Enabled
        instances: [{profile: 1g.18gb, profile_id: 19, start: 0, size: 1}]
      created: [{profile: 1g.18gb, profile_id: 19, start: 0, size: 1}]
      destroyed: []
      stopped_clients: [dra-kubelet-plugin container gpufleet-gpu-simulator-kubelet-plugin-x/gpus]
      reset: false
      reboot_required: false
stopped_clients:
  description: The clients stopped (or, in check mode, to stop).
  returned: always
  type: list
  elements: str
restarted_clients:
  description: What was done to bring each stopped client back.
  returned: always
  type: list
  elements: str
reboot_required:
  description: A GPU's MIG mode stays pending until the host reboots.
  returned: always
  type: bool
mig_devices:
  description: MIG devices (GPU instances with their compute instance) on the host once the
    layout is applied, all GPUs counted.
  returned: always
  type: int
  sample: 7
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import apply as mig_apply
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import clients as mcl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import gpu_state as mgs
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import request as mrq


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "layout": {"type": "dict"},
            "config": {"type": "dict"},
            "config_name": {"type": "str"},
            "devices": {"type": "raw", "default": "all"},
            "mig_enabled": {"type": "bool", "default": True},
            "allow_stop": {
                "type": "list",
                "elements": "str",
                "default": [],
                "choices": list(mcl.CLIENT_KINDS),
            },
            "allow_gpu_reset": {"type": "bool", "default": True},
            "allow_reboot": {"type": "bool", "default": False},
            "nvidia_smi_path": {"type": "path"},
            "variable_prefix": {"type": "str", "default": ""},
            "dra_driver": {"type": "bool", "default": False},
            "dynamic_mig": {"type": "bool", "default": False},
        },
        mutually_exclusive=[("layout", "config")],
        required_one_of=[("layout", "config")],
        required_together=[("config", "config_name")],
        supports_check_mode=True,
    )
    p = module.params
    devices = p["devices"]
    if devices != "all":
        if not isinstance(devices, list) or not all(str(d).isdigit() for d in devices):
            module.fail_json(
                msg=f"devices={devices!r}: give 'all' or a list of GPU indices such as [0, 1]"
            )
        devices = tuple(int(d) for d in devices)
    smi = p["nvidia_smi_path"] or module.get_bin_path(
        "nvidia-smi", required=False, opt_dirs=["/usr/bin", "/usr/local/bin"]
    )
    if not smi:
        module.fail_json(
            msg="nvidia-smi not found on PATH; fix: install the NVIDIA driver (role "
            "gpufleet.cluster.nvidia_driver) or set nvidia_smi_path"
        )
    req = mrq.Request(
        layout=p["layout"],
        config=p["config"],
        config_name=p["config_name"],
        devices=devices,
        mig_enabled=p["mig_enabled"],
        allow_stop=tuple(p["allow_stop"]),
        allow_gpu_reset=p["allow_gpu_reset"],
        allow_reboot=p["allow_reboot"],
        nvidia_smi=smi,
        var_prefix=p["variable_prefix"],
        dra_driver=p["dra_driver"],
        dynamic_mig=p["dynamic_mig"],
    )

    def run(argv: list[str]) -> tuple[int, str, str]:
        if module.get_bin_path(argv[0]) is None and "/" not in argv[0]:
            raise FileNotFoundError(argv[0])
        return module.run_command(argv)

    try:
        res = mig_apply.apply(req, run, check_mode=module.check_mode)
    except mgs.MigApplyError as exc:
        module.fail_json(msg=str(exc), gpus=exc.results)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    out = res.to_dict()
    diff = out.pop("diff")
    if res.changed:
        out["diff"] = diff
    module.exit_json(**out)


if __name__ == "__main__":
    main()
