"""Exit codes of the ``gpufleet`` package are the named codes of ``gpufleet/exit.py``: no
``sys.exit(2)``, ``raise SystemExit(1)`` or ``return 0`` from a ``main``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpufleet import exit as gexit

PACKAGE = Path(__file__).resolve().parents[3] / "gpufleet"
#: Copied onto the lab's nodes and run there with the standard library only
#: (gpufleet/lab/gpusim/install.py): it cannot import gpufleet.exit (click).
ON_NODES = PACKAGE / "lab" / "gpusim"
#: Calls that end the process with their argument.
EXIT_CALLS = {"exit", "_exit", "exit_with", "SystemExit"}


def _called(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _int_literals(node: ast.AST) -> list[int]:
    """The integer literals an expression can evaluate to (``2``, ``0 if ok else 1``,
    ``code or 2``); not those it only uses (``argv[1]``, ``failed > 0``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:  # not True/False
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _int_literals(node.body) + _int_literals(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [v for value in node.values for v in _int_literals(value)]
    return []


def literal_exits(source: str, name: str) -> tuple[list[str], int]:
    """(``file:line: code`` of every exit given an integer literal, number of exits seen)
    in the Python ``source``: a call of ``sys.exit``, ``os._exit``, ``ctx.exit``,
    ``exit_with`` or ``SystemExit``, and ``return N`` in a function named ``main``."""
    tree = ast.parse(source, name)
    found: list[str] = []
    seen = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) in EXIT_CALLS:
            seen += 1
            if any(_int_literals(a) for a in node.args):
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.FunctionDef) and node.name == "main":
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and ret.value is not None:
                    seen += 1
                    if _int_literals(ret.value):
                        found.append(f"{name}:{ret.lineno}: {ast.unparse(ret)}")
    return found, seen


@pytest.mark.unit
def test_no_literal_exit_code_in_gpufleet() -> None:
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if ON_NODES not in p.parents]
    found: list[str] = []
    seen: dict[str, int] = {}
    for path in files:
        hits, count = literal_exits(path.read_text(), str(path.relative_to(PACKAGE)))
        found += hits
        seen[path.relative_to(PACKAGE).as_posix()] = count
    # the scan read the commands and found their exits
    commands = [p.name for p in (PACKAGE / "commands").glob("*.py")]
    assert {"up.py", "validate.py", "upgrade.py", "claims_gc.py"} <= set(commands)
    assert all(f"commands/{c}" in seen for c in commands)
    assert seen["commands/validate.py"] >= 3 and sum(seen.values()) >= 50
    assert found == []


@pytest.mark.unit
def test_the_scan_finds_literal_exits() -> None:
    source = (
        "import sys\n"
        "def f(ctx, ok):\n"
        "    sys.exit(2)\n"
        "    raise SystemExit(0 if ok else 1)\n"
        "    ctx.exit(1)\n"
        "    sys.exit(EXIT_OK)\n"
        "    sys.exit(run(sys.argv[1]) or EXIT_FAILED)\n"
        "def main():\n"
        "    return 2 if ctx else EXIT_OK\n"
    )
    found, seen = literal_exits(source, "x.py")
    assert sorted(int(f.split(":")[1]) for f in found) == [3, 4, 5, 9]
    assert seen == 6


@pytest.mark.unit
def test_the_codes_and_run_or_exit(capsys: pytest.CaptureFixture[str]) -> None:
    assert (gexit.EXIT_OK, gexit.EXIT_FAILED, gexit.EXIT_CANNOT_RUN) == (0, 1, 2)
    assert gexit.status_of(False) == 0 and gexit.status_of(True) == 1
    assert gexit.run_or_exit(lambda: "ran", ValueError) == "ran"

    def refused() -> None:
        raise ValueError("no playbook named 'x'")

    with pytest.raises(SystemExit) as stop:
        gexit.run_or_exit(refused, ValueError)
    assert stop.value.code == 2
    assert capsys.readouterr().err == "Error: no playbook named 'x'\n"
    with pytest.raises(KeyError):  # not refused: not turned into an exit
        gexit.run_or_exit(lambda: {}["x"], ValueError)
