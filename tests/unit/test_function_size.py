"""No function of ``plugins/`` or ``gpufleet/`` is over 100 lines: a longer one is split
along its steps into helpers whose names say what they do.

A function's length runs from its ``def`` line to its last line (docstring, comments and
blank lines inside included; decorators not), as ``ast`` gives them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 100
#: Functions still over the limit, by ``path:name``, each with why it is allowed for now.
EXCEPTIONS: set[str] = set()


def function_lengths(path: Path) -> list[tuple[str, int]]:
    """``(name, lines)`` of every function and method of ``path``, nested ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def all_functions() -> dict[str, int]:
    """``path:name`` (path relative to the repository) -> lines, over plugins/ and gpufleet/;
    the longest wins when a file has two functions of one name."""
    out: dict[str, int] = {}
    for directory in ("plugins", "gpufleet"):
        for path in sorted((ROOT / directory).rglob("*.py")):
            for name, lines in function_lengths(path):
                where = f"{path.relative_to(ROOT).as_posix()}:{name}"
                out[where] = max(lines, out.get(where, 0))
    return out


def test_no_function_is_over_100_lines() -> None:
    functions = all_functions()
    assert len(functions) > 1000, f"found only {len(functions)} functions: the walk is broken"
    unknown = sorted(EXCEPTIONS - set(functions))
    assert not unknown, f"exceptions that name no function: {unknown}"
    short = sorted(w for w in EXCEPTIONS if functions[w] <= MAX_LINES)
    assert not short, f"exceptions now at most {MAX_LINES} lines (remove them): {short}"
    long = sorted(
        f"{where} ({lines} lines)"
        for where, lines in functions.items()
        if lines > MAX_LINES and where not in EXCEPTIONS
    )
    assert not long, "functions over 100 lines (split them along their steps):\n" + "\n".join(long)


def test_the_walk_measures_a_long_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    module = tmp_path / "long.py"
    module.write_text(f"def long():\n{body}\n\ndef short():\n    return 1\n", encoding="utf-8")
    assert dict(function_lengths(module)) == {"long": MAX_LINES + 1, "short": 2}
