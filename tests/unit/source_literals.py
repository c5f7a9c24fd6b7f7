"""The string literals of the product's Python (``plugins/`` and ``gpufleet/``), for tests
that hold a fact to one owner: each literal with its file and line, docstrings and the
module documentation (``DOCUMENTATION``, ``EXAMPLES``, ``RETURN``: prose for ansible-doc)
left out. f-strings count by their literal parts."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The trees whose Python is the product (the collection's plugins and the CLI).
PRODUCT_TREES = ("plugins", "gpufleet")
#: Module-level strings that are documentation, not code (ansible-doc's YAML).
DOC_ASSIGNMENTS = frozenset({"DOCUMENTATION", "EXAMPLES", "RETURN"})


@dataclass(frozen=True)
class Literal:
    """``text`` written at ``path`` (relative to the repository root, POSIX) ``line``."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text[:100]!r}"


def product_files() -> list[Path]:
    """Every ``*.py`` of ``PRODUCT_TREES``, sorted."""
    return sorted(p for tree in PRODUCT_TREES for p in (ROOT / tree).rglob("*.py"))


def _prose(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings or module documentation."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in DOC_ASSIGNMENTS for t in node.targets
        ):
            out.add(id(node.value))
    return out


def literals(files: list[Path] | None = None) -> Iterator[Literal]:
    """Every string literal of ``files`` (default: ``product_files()``) but prose."""
    for path in files if files is not None else product_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = _prose(tree)
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and id(node) not in prose:
                yield Literal(rel, node.lineno, text)


def written_outside(pattern: str, owners: set[str]) -> list[str]:
    """The literals matching ``pattern`` (a regular expression, searched) in files not in
    ``owners`` (paths relative to the repository root), as ``path:line: text``."""
    rx = re.compile(pattern)
    return [str(lit) for lit in literals() if lit.path not in owners and rx.search(lit.text)]
