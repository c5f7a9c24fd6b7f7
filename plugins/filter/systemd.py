"""Filters that write values into systemd unit files as data (module_utils common.systemd)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: systemd_exec_word
short_description: A value as one quoted word of a systemd command line
version_added: 0.1.0
description:
  - Quotes a value as one word of C(ExecStart=) by the rules of systemd.syntax(7) and
    systemd.service(5) (backslash and double quote escaped, C(%) as C(%%), C($) as C($$)),
    and refuses a value with a control character (a line break would add a setting).
  - The companion filter C(systemd_environment) writes C("NAME=value") for C(Environment=).
options:
  _input:
    description: The value.
    type: str
    required: true
  what:
    description: The variable the value comes from, named by the error.
    type: str
    default: value
"""

EXAMPLES = r"""
- name: Write the unit
  ansible.builtin.copy:
    content: >
      ExecStart=/usr/bin/tool
      {{ ('--dir=' ~ tool_dir) | gpufleet.cluster.systemd_exec_word('tool_dir') }}
    dest: /etc/systemd/system/tool.service
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The quoted word.
  type: str
"""

from ansible.errors import AnsibleFilterError


def systemd_exec_word(value, what="value"):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import systemd

    try:
        return systemd.exec_word(value, what)
    except systemd.UnitValueError as err:
        raise AnsibleFilterError(str(err)) from None


def systemd_environment(value, name, what="value"):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import systemd

    try:
        return systemd.environment(name, value, what)
    except systemd.UnitValueError as err:
        raise AnsibleFilterError(str(err)) from None


class FilterModule:
    """systemd unit file filters."""

    def filters(self):
        return {"systemd_exec_word": systemd_exec_word, "systemd_environment": systemd_environment}
