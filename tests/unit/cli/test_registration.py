"""gpufleet/cli.py registers every command; a command file neither registers commands nor
imports another command; importing the CLI (``gpufleet --help``) loads no lab module."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "gpufleet"
COMMANDS = PACKAGE / "commands"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a import b`` gives ``a`` and ``a.b``), at any
    depth (lazy imports in functions included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _command_modules() -> list[str]:
    """The files of commands/ that define a click command or group (not the renderers and
    shared helpers beside them)."""
    marks = ("@click.command(", "@click.group(", ".command(")
    return sorted(p.stem for p in COMMANDS.glob("*.py") if any(m in p.read_text() for m in marks))


@pytest.mark.unit
def test_commands_do_not_import_each_other_nor_register_commands() -> None:
    commands = _command_modules()
    assert {"claims", "claims_gc", "mig", "mig_apply", "upgrade", "validate"} <= set(commands)
    for name in commands:
        path = COMMANDS / f"{name}.py"
        others = {f"gpufleet.commands.{c}" for c in commands if c != name}
        assert not _imports(path) & others, f"{name}.py imports another command"
        assert ".add_command(" not in path.read_text(), f"{name}.py registers a command"


@pytest.mark.unit
def test_no_command_file_imports_a_module_file() -> None:
    # shared code is module_utils'; plugins/modules/*.py are Ansible's entry points
    modules = "ansible_collections.gpufleet.cluster.plugins.modules"
    files = sorted(COMMANDS.glob("*.py"))
    assert len(files) > 10
    for path in files:
        assert not {m for m in _imports(path) if m.startswith(modules)}, path.name


@pytest.mark.unit
def test_cli_registers_every_command() -> None:
    from gpufleet import cli

    def names(group, prefix: str = "") -> set[str]:
        out = set()
        for sub_name, sub in group.commands.items():
            out.add(prefix + sub_name)
            if hasattr(sub, "commands"):
                out |= names(sub, f"{prefix}{sub_name} ")
        return out

    assert {"claims gc", "claims explain", "claims check", "mig apply", "mig advise",
            "mig plan", "lab up", "upgrade", "up", "validate", "report", "doctor",
            "gates audit"} <= names(cli.main)  # fmt: skip


@pytest.mark.unit
def test_importing_the_cli_loads_no_lab_module(monkeypatch: pytest.MonkeyPatch) -> None:
    # a clean interpreter state for gpufleet: its modules are put back after the test
    for name in [m for m in sys.modules if m == "gpufleet" or m.startswith("gpufleet.")]:
        monkeypatch.delitem(sys.modules, name)
    import gpufleet.cli
    import gpufleet.runner  # noqa: F401

    loaded = sorted(m for m in sys.modules if m.startswith("gpufleet."))
    assert "gpufleet.commands.upgrade" in loaded and "gpufleet.commands.lab" in loaded
    assert [m for m in loaded if m.startswith("gpufleet.lab")] == []


@pytest.mark.unit
def test_the_runner_imports_no_lab_module() -> None:
    assert not {m for m in _imports(PACKAGE / "runner.py") if m.startswith("gpufleet.lab")}
