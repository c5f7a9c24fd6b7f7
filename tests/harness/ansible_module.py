"""Run an Ansible module's ``main()`` in this process, as Ansible would on a host."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest


@contextlib.contextmanager
def module_args(args: Mapping[str, Any]) -> Iterator[None]:
    """Run an AnsibleModule's main() in this process with ``args`` as its parameters."""
    try:
        from ansible.module_utils.testing import patch_module_args  # ansible-core >= 2.19
    except ImportError:  # ansible-core 2.17: the module reads basic._ANSIBLE_ARGS
        from ansible.module_utils import basic

        saved = basic._ANSIBLE_ARGS
        basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": dict(args)}).encode()
        try:
            yield
        finally:
            basic._ANSIBLE_ARGS = saved
        return
    with patch_module_args(dict(args)):
        yield


def run_module(module: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """The result a module prints (exit_json or fail_json), run in this process."""
    out = io.StringIO()
    with module_args(args), contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        module.main()
    return json.loads(out.getvalue())
