"""docs/troubleshooting.md names every check id that ``validate`` reports and every gate
audit finding id, so a report's id can always be looked up."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted((REPO / "plugins" / "module_utils").rglob("*.py"))
ID = re.compile(r"(?:versions|gates|api|nodes|hosts|claims|kueue|smoke)\.[a-z0-9-]*[a-z0-9]")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of the module, its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            out.add(id(first.value))
    return out


def emitted_ids() -> set[str]:
    """Every string literal of module_utils (docstrings left out: they name modules such
    as ``claims.api``) that is a check id as a whole."""
    ids = set()
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and id(node) not in docs and ID.fullmatch(text):
                ids.add(text)
    return ids


def test_the_sources_name_ids() -> None:
    ids = emitted_ids()
    # one of each area, so a change of the pattern cannot make the next test vacuous
    assert {i.split(".")[0] for i in ids} >= {"versions", "gates", "api", "nodes", "hosts"}
    assert len(ids) > 30


def test_every_id_is_in_the_troubleshooting_page() -> None:
    doc = (REPO / "docs" / "troubleshooting.md").read_text()
    missing = sorted(i for i in emitted_ids() if f"`{i}`" not in doc)
    assert missing == []
