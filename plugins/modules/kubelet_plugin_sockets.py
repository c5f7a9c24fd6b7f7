#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Find the kubelet plugin sockets of DRA drivers on a host and whether each is live."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kubelet_plugin_sockets
short_description: Kubelet plugin sockets of DRA drivers and whether anything listens on them
version_added: "0.1.0"
description:
  - Lists the registration sockets (C(<driver>-*.sock) in O(registry_dir)) and service
    sockets (C(<plugins_dir>/<driver>/*.sock)) of each driver in O(drivers), and connects
    to each as the kubelet does, to tell a live socket from one that a plugin pod that is
    gone left behind (the connection is refused). Nothing is sent; the connection is closed
    at once.
  - Changes nothing.
author:
  - gpufleet maintainers
options:
  drivers:
    description: DRA driver names, such as C(gpu.nvidia.com) and C(compute-domain.nvidia.com).
    type: list
    elements: str
    required: true
  registry_dir:
    description: The kubelet's plugin registry.
    type: path
    default: /var/lib/kubelet/plugins_registry
  plugins_dir:
    description: The kubelet's plugins directory.
    type: path
    default: /var/lib/kubelet/plugins
  timeout:
    description: Seconds for all the connection attempts together.
    type: int
    default: 10
attributes:
  check_mode:
    support: full
    details: Read-only.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Validate | Kubelet plugin sockets of NVIDIA's DRA drivers
  gpufleet.cluster.kubelet_plugin_sockets:
    drivers: [gpu.nvidia.com, compute-domain.nvidia.com]
  register: plugin_sockets
"""

RETURN = r"""
sockets:
  description: One per socket file found; C(listening) is null when it could not be told.
  returned: always
  type: list
  elements: dict
  sample:
    - driver: gpu.nvidia.com
      path: /var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock
      listening: false
truncated:
  description: Whether more sockets were found than were probed (64).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import plugin_sockets


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            drivers=dict(type="list", elements="str", required=True),
            registry_dir=dict(type="path", default=plugin_sockets.KUBELET_REGISTRY_DIR),
            plugins_dir=dict(type="path", default=plugin_sockets.KUBELET_PLUGINS_DIR),
            timeout=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["timeout"] < 1:
        module.fail_json(msg=f"timeout={p['timeout']}: give a number of seconds of at least 1")
    found = plugin_sockets.read_sockets(
        p["drivers"], p["registry_dir"], p["plugins_dir"], float(p["timeout"])
    )
    module.exit_json(changed=False, sockets=found["sockets"], truncated=found["truncated"])


if __name__ == "__main__":
    main()
