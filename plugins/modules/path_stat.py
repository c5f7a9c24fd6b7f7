#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Stat several paths of a host in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: path_stat
short_description: Whether several paths of a host exist, in one module run
version_added: "0.1.0"
description:
  - Reads, without changing anything, whether each path exists and what it is, following
    symbolic links, as C(ansible.builtin.stat) with C(follow=true) does for one path.
  - Returns one result per path in C(results), in the shape a loop of
    C(ansible.builtin.stat) registers (C(item), C(stat.exists), C(stat.path),
    C(stat.isdir), C(stat.isreg), C(stat.islnk), C(stat.mode)), so that a task that looped
    over C(stat) can be replaced by one run of this module. On a host reached over a
    connection each module run costs a round trip and a Python start; one run for many
    paths saves all but one.
author:
  - gpufleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  root:
    description: Directory the items are relative to (a trailing slash is dropped).
    type: path
    default: /
  items:
    description: Paths relative to O(root), each returned as C(item) of its result.
    type: list
    elements: str
    required: true
attributes:
  check_mode:
    support: full
    details: Read-only.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: ansible.builtin.stat
"""

EXAMPLES = r"""
- name: Validate | The DRA driver's files under its driver root
  gpufleet.cluster.path_stat:
    root: /run/nvidia/driver
    items: [usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1, usr/bin/nvidia-smi, dev]
  register: root_files
"""

RETURN = r"""
results:
  description:
    - One per item, in order. C(stat.exists) is false for a path that does not exist or
      cannot be reached (a dangling link, a directory without search permission); then
      only C(exists) and C(path) are set.
  returned: always
  type: list
  elements: dict
  sample:
    - item: usr/bin/nvidia-smi
      stat:
        exists: true
        path: /usr/bin/nvidia-smi
        isdir: false
        isreg: true
        islnk: false
        mode: "0755"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import paths as path_facts


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            items=dict(type="list", elements="str", required=True),
        ),
        supports_check_mode=True,
    )
    results = path_facts.stat_items(module.params["root"], module.params["items"])
    module.exit_json(changed=False, results=results)


if __name__ == "__main__":
    main()
