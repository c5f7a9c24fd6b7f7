"""What a plugin's source imports, read from the source (never imported).

``closure``: the collection files AnsiballZ packs with a module, or a controller plugin
loads: ``from <PREFIX>.<package>[.<module>] import name`` to a module or to a name of a
module, transitively, at any depth of a file (lazy imports count, as they do for
ansible-core's ``recursive_finder``). ``third_party``: the top-level names of the Python
libraries a file imports that are neither the standard library nor Ansible's."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
PREFIX = "ansible_collections.gpufleet.cluster.plugins.module_utils"


def imported(source: str) -> set[str]:
    """The module_utils files (relative to plugins/) that ``source`` imports, at any depth."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(PREFIX):
            continue
        package = "module_utils/" + node.module[len(PREFIX) :].strip(".").replace(".", "/")
        for alias in node.names:
            module = f"{package.rstrip('/')}/{alias.name}.py"
            out.add(module if (PLUGINS / module).is_file() else f"{package}.py")
    return out


def closure(start: str) -> set[str]:
    """``start`` (relative to plugins/) and every file its imports reach."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(imported((PLUGINS / current).read_text(encoding="utf-8")))
    return seen


def _top_names(node: ast.AST) -> set[str]:
    """Top-level module names of an import statement or of ``importlib.import_module("x")``."""
    if isinstance(node, ast.Import):
        return {a.name.split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return {node.module.split(".")[0]}
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return {node.args[0].value.split(".")[0]}
    return set()


def _stdlib_fallbacks(tree: ast.AST) -> set[ast.AST]:
    """Import nodes in the ``except ImportError`` handlers of a ``try`` that imports a
    standard library module (``tomllib``, else ``tomli``): the standard library is the
    import, the handler only serves older Pythons."""
    out: set[ast.AST] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        tried = set().union(*(_top_names(n) for s in node.body for n in ast.walk(s)))
        if not tried & sys.stdlib_module_names:
            continue
        for handler in node.handlers:
            out.update(n for s in handler.body for n in ast.walk(s) if _top_names(n))
    return out


def third_party(source: str) -> set[str]:
    """Top-level names of the libraries ``source`` imports (at any depth, and through
    ``importlib.import_module`` of a literal name) that are neither the standard library
    (``sys.stdlib_module_names``) nor Ansible's, leaving out alternatives to a standard
    library module."""
    tree = ast.parse(source)
    fallbacks = _stdlib_fallbacks(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if node not in fallbacks:
            names |= _top_names(node)
    return {
        n
        for n in names
        if n not in sys.stdlib_module_names and n not in ("ansible", "ansible_collections")
    }


def third_party_of(start: str) -> dict[str, set[str]]:
    """Library name -> the files of ``start``'s closure (relative to plugins/) importing it."""
    out: dict[str, set[str]] = {}
    for path in closure(start):
        for name in third_party((PLUGINS / path).read_text(encoding="utf-8")):
            out.setdefault(name, set()).add(path)
    return out
