"""``-i/--inventory`` of every command that takes one, given a path that names nothing
(missing, with a newline, longer than a path may be, with a NUL byte, empty) or a
directory without an inventory file in it: exit 2 naming the path (escaped, cut short)
and a fix, before any run (the tripwires of ``conftest``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.hostile.inputs import assert_refused, invoke

pytestmark = pytest.mark.unit

#: Command -> argv after ``-i PATH``.
COMMANDS = {
    "up": ["up"],
    "gates-apply": ["gates", "apply"],
    "gates-audit": ["gates", "audit"],
    "mig-apply": ["mig", "apply", "--layout", '{"1g.18gb": 7}'],
    "mig-mode": ["mig", "mode", "--to", "dynamic"],
    "migrate": ["migrate", "--pool", "gpu_nodes", "--to", "dra", "--plan"],
    "upgrade": ["upgrade", "--to", "1.37.2", "--plan"],
    "upgrade-gpu-stack": ["upgrade-gpu-stack", "--plan"],
    "validate": ["validate"],
}

PATHS = {
    "missing": "/nonexistent/hosts.yml",
    "newline": "inventory\nhosts.yml",
    "too-long": "inv/" + "x" * 5000,
    "nul": "hosts\x00.yml",
}


def _argv(command: str, path: str) -> list[str]:
    first, *rest = COMMANDS[command]
    words = [first]
    if rest and not rest[0].startswith("-"):
        words.append(rest.pop(0))
    return [*words, "-i", path, *rest]


@pytest.mark.parametrize("path", list(PATHS.values()), ids=list(PATHS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_path_that_names_nothing_is_refused(
    hostile: dict[str, str], command: str, path: str
) -> None:
    result = invoke(hostile, _argv(command, path))
    assert_refused(result, ("-i", "inventory", "'--inventory'"))
    assert "does not exist" in result.output
    assert len(result.output) < 2000, len(result.output)


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "validate"])
@pytest.mark.parametrize("content", ["empty", "readme"])
def test_a_directory_without_an_inventory_file_is_refused_with_a_fix(
    hostile: dict[str, str], tmp_path: Path, command: str, content: str
) -> None:
    folder = tmp_path / "inventory"
    folder.mkdir()
    if content == "readme":
        (folder / "README.md").write_text("# the cluster\n")
    result = invoke(hostile, _argv(command, str(folder)))
    assert_refused(result, (str(folder),))
    assert "put the inventory file(s) in it" in " ".join(result.output.split())
