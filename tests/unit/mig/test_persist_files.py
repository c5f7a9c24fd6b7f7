"""The boot-time MIG apply (roles/mig/tasks/persist.yml) copies mig/apply.py and the
module_utils it imports onto the node (mig__code_files, roles/mig/vars/main.yml): the list
must hold every file of the import closure, or python3 -m ...mig.apply stops with an
ImportError on the node."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
MODULE_UTILS = ROOT / "plugins" / "module_utils"
PREFIX = "ansible_collections.gpufleet.cluster.plugins.module_utils"


def imported(name: str) -> set[str]:
    """The module_utils files ``name`` imports (any depth of the module, lazy imports too)."""
    tree = ast.parse((MODULE_UTILS / name).read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX + "."):
            package = node.module[len(PREFIX) + 1 :].replace(".", "/")
            for alias in node.names:
                module = f"{package}/{alias.name}.py"
                out.add(module if (MODULE_UTILS / module).is_file() else f"{package}.py")
    return out


def closure(name: str) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(imported(current))
    return seen


def copied() -> set[str]:
    tasks = yaml.safe_load((ROOT / "roles/mig/tasks/persist.yml").read_text())
    (block,) = [t for t in tasks if t["name"] == "MIG | Copy the boot-time apply's code"]
    (task,) = [t for t in block["block"] if t["name"] == "MIG | Code of the boot-time apply"]
    assert task["loop"] == "{{ mig__code_files }}"
    return set(yaml.safe_load((ROOT / "roles/mig/vars/main.yml").read_text())["mig__code_files"])


def test_the_boot_time_apply_gets_every_file_it_imports() -> None:
    need = closure("mig/apply.py")
    assert {"mig/apply.py", "mig/planner.py", "common/limits.py"} <= need  # the scan works
    assert need == copied(), f"missing {sorted(need - copied())}, extra {sorted(copied() - need)}"
