#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Run several read-only commands of a host in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_commands
short_description: Run several read-only commands on a host in one module run
version_added: "0.1.0"
description:
  - Runs each command (an argument vector, no shell) one after the other and returns its
    exit status and output, as C(ansible.builtin.command) does for one command with
    C(failed_when=false) and C(changed_when=false); a command that is not installed has
    C(rc) 2 (the error number) and empty output instead of failing the task.
  - Returns one result per command in C(results), in the shape a loop of
    C(ansible.builtin.command) registers (C(item), C(rc), C(stdout), C(stderr),
    C(stdout_lines)), so that a task that looped over C(command) can be replaced by one
    run of this module. On a host reached over a connection each module run costs a round
    trip and a Python start; one run for many commands saves all but one.
  - Meant for commands that only read (versions, configuration dumps, package queries);
    it never reports a change.
author:
  - gpufleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  commands:
    description:
      - The commands. Each is a mapping with C(argv) (list of strings, required) and any
        other keys (such as C(name)), returned unchanged as the result's C(item).
    type: list
    elements: dict
    required: true
  timeout:
    description: Seconds each command may run before it is killed (C(rc) -9 then).
    type: int
    default: 60
attributes:
  check_mode:
    support: partial
    details: The commands run in check mode too and the module never reports a change; it
      cannot tell whether a command changes anything, so give only commands that read.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: ansible.builtin.command
"""

EXAMPLES = r"""
- name: Validate | Host commands
  gpufleet.cluster.host_commands:
    commands:
      - {name: containerd_version, argv: [containerd, --version]}
      - {name: holds, argv: [apt-mark, showhold]}
  register: host_cmd
"""

RETURN = r"""
results:
  description: One per command, in order, with its C(item), C(rc), C(stdout), C(stderr)
    (trailing newlines removed) and C(stdout_lines).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import (
    commands as host_command_run,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            commands=dict(type="list", elements="dict", required=True),
            timeout=dict(type="int", default=60),
        ),
        supports_check_mode=True,
    )
    problem = host_command_run.check_commands(module.params["commands"])
    if problem:
        module.fail_json(msg=problem)
    if module.params["timeout"] < 1:
        module.fail_json(msg=f"timeout={module.params['timeout']}: give seconds >= 1")
    results = [
        host_command_run.run_one(item, module.params["timeout"])
        for item in module.params["commands"]
    ]
    module.exit_json(changed=False, results=results)


if __name__ == "__main__":
    main()
