"""Ansible's own reading of an extra-vars file, in this process: what ``ansible-playbook
-e @FILE`` loads (``ansible.utils.vars.load_extra_vars`` with the file as its ``-e``), and
each variable as a task's template of it gives it back (``Templar``, ``to_json`` of the
variable, which resolves every nested value). A template inside a value that is not marked
as data runs here, on ansible-core 2.17 and 2.19 alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible import context
from ansible.module_utils.common.collections import ImmutableDict
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.utils import vars as ansible_vars

try:  # ansible-core 2.19: a template written by a playbook is trusted, one made here is not
    from ansible.template import trust_as_template
except ImportError:  # ansible-core 2.17: every string not marked unsafe is a template

    def trust_as_template(value: str) -> str:
        return value


def load_extra_vars(path: Path) -> dict[str, Any]:
    """The variables of ``-e @path`` as ansible-playbook loads them."""
    saved = context.CLIARGS
    context.CLIARGS = ImmutableDict(extra_vars=(f"@{path}",))
    ansible_vars.load_extra_vars.extra_vars = None  # its cache of the last -e
    try:
        return dict(ansible_vars.load_extra_vars(DataLoader()))
    finally:
        ansible_vars.load_extra_vars.extra_vars = None
        context.CLIARGS = saved


def templated(variables: dict[str, Any], name: str) -> Any:
    """The value of variable ``name`` as a task's ``{{ name }}`` resolves it (through JSON,
    so that the nested values are resolved too)."""
    templar = Templar(loader=DataLoader(), variables=variables)
    return json.loads(templar.template(trust_as_template("{{ " + name + " | to_json }}")))


def as_ansible_sees_it(path: Path) -> dict[str, Any]:
    """Every variable of the extra-vars file ``path``, templated as a task would."""
    loaded = load_extra_vars(path)
    return {name: templated(loaded, name) for name in loaded}


def pipe_template(marker: Path | str) -> str:
    """A template that, templated, runs ``touch marker`` on the control host."""
    return "{{ lookup('pipe', 'touch " + str(marker) + "') }}"


def flat_tasks(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A task file's ``tasks`` with the tasks of each block (``block``, ``rescue``,
    ``always``) after it, as a reader looking for one task by its module wants them."""
    out = []
    for task in tasks:
        out.append(task)
        for part in ("block", "rescue", "always"):
            out += flat_tasks(task.get(part) or [])
    return out
