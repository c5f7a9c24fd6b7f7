"""A playbook run for real against this machine as one GPU node (``ansible_connection=local``,
no become): for tests of refusals that come before a role reads or changes anything."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from gpufleet import runner

#: The inventory: ``node1`` in ``gpu_nodes``, run locally with the playbook's Python.
INVENTORY = """\
[gpu_nodes]
node1 ansible_connection=local
[all:vars]
ansible_python_interpreter="{{ ansible_playbook_python }}"
"""


def run_local(
    tmp_path: Path, playbook: str, extravars: dict[str, Any], inventory: str = INVENTORY
) -> runner.RunResult:
    """Run ``playbook`` with ``extravars`` (and ``ansible_become: false``) on ``inventory``
    written under ``tmp_path``; output goes to a string, artifacts under ``tmp_path``."""
    path = tmp_path / "inventory.ini"
    path.write_text(inventory)
    return runner.run_playbook(
        playbook,
        str(path),
        extravars={**extravars, "ansible_become": False},
        console=Console(file=io.StringIO(), width=400),
        artifact_root=tmp_path / "artifacts",
    )
