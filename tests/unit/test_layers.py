"""The shape of ``plugins/module_utils``: packages by concept in layers that only look down.

Every file lives in a package of ``LAYERS``; a module imports only packages of lower layers
or its own package (packages of one layer are independent of each other); no package has a
non-empty ``__init__.py`` (ansible-test's ``empty-init``); and no module passes on a name it
did not define: an importer names the module that defines what it uses (no re-exports).
Imports are read from the source (any depth: lazy and ``TYPE_CHECKING`` imports count)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MODULE_UTILS = ROOT / "plugins" / "module_utils"
PREFIX = "ansible_collections.gpufleet.cluster.plugins.module_utils"

#: Bottom layer first. A package imports only packages of lower layers, and itself.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("common",),
    ("kube", "nvidia"),
    ("dra", "mig"),
    ("cel", "kubeadm", "dra_driver", "cluster", "host"),
    ("claims", "kueue", "device_plugin"),
    ("gate_audit", "report"),
    ("preflight", "validate", "upgrade", "migrate"),
)
LAYER = {package: i for i, layer in enumerate(LAYERS) for package in layer}


@dataclass(frozen=True)
class Import:
    """``module`` (dotted, relative to module_utils) imports ``target`` (a module), naming
    ``names`` of it (empty for a module import), at ``line``."""

    module: str
    target: str
    names: tuple[str, ...]
    line: int


def modules() -> dict[str, Path]:
    """Dotted name relative to module_utils (``dra.api``) -> file."""
    return {
        ".".join(p.relative_to(MODULE_UTILS).with_suffix("").parts): p
        for p in sorted(MODULE_UTILS.rglob("*.py"))
        if p.name != "__init__.py"
    }


MODULES = modules()


def imports_of(path: Path, name: str | None = None) -> Iterator[Import]:
    """Every module_utils import of ``path``, resolved to modules of ``MODULES``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(PREFIX):
            continue
        base = node.module[len(PREFIX) :].lstrip(".")
        for alias in node.names:
            full = f"{base}.{alias.name}" if base else alias.name
            if full in MODULES:
                yield Import(name or str(path), full, (), node.lineno)
            else:
                yield Import(name or str(path), base, (alias.name,), node.lineno)


def defined(path: Path) -> set[str]:
    """Names a module binds itself (functions, classes, assignments, at any nesting of
    module-level ``if``/``try``), not the names it imports."""
    out: set[str] = set()
    todo = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.If | ast.Try):
            todo += node.body + node.orelse
            todo += [s for h in getattr(node, "handlers", []) for s in h.body]
            todo += getattr(node, "finalbody", [])
    return out


def test_every_file_is_in_a_package_of_a_layer() -> None:
    flat = sorted(m for m in MODULES if "." not in m)
    assert not flat, f"module_utils files outside a package: {flat}"
    unknown = sorted({m.split(".")[0] for m in MODULES} - set(LAYER))
    assert not unknown, f"packages in no layer (add them to LAYERS): {unknown}"


def test_init_files_are_empty() -> None:
    inits = [p for p in MODULE_UTILS.rglob("__init__.py") if p.read_text(encoding="utf-8").strip()]
    assert not inits, f"non-empty __init__.py (ansible-test empty-init): {inits}"


def upward(imp: Import) -> str | None:
    """Why ``imp`` breaks the layers, or None."""
    src, dst = imp.module.split(".")[0], imp.target.split(".")[0]
    if src == dst:
        return None
    if dst not in LAYER:
        return f"{dst} is no package of a layer"
    if LAYER[dst] > LAYER[src]:
        return f"{src} (layer {LAYER[src]}) imports {dst} (layer {LAYER[dst]}): upward"
    if LAYER[dst] == LAYER[src]:
        return f"{src} imports {dst}: packages of one layer are independent"
    return None


def test_imports_only_look_down() -> None:
    problems = [
        f"{imp.module}:{imp.line}: {why}"
        for module, path in MODULES.items()
        for imp in imports_of(path, module)
        if (why := upward(imp))
    ]
    assert not problems, "\n".join(problems)


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "api.py"
    module.write_text(f"from {PREFIX}.validate import report\n", encoding="utf-8")
    (imp,) = imports_of(module, "kube.api")
    assert upward(imp) == "kube (layer 1) imports validate (layer 6): upward"
    module.write_text(f"from {PREFIX}.report import fleet\n", encoding="utf-8")
    (imp,) = imports_of(module, "gate_audit.audit")
    assert upward(imp) == "gate_audit imports report: packages of one layer are independent"


def python_files() -> list[Path]:
    dirs = ("plugins", "gpufleet", "tests", "lab")
    return [p for d in dirs for p in sorted((ROOT / d).rglob("*.py")) if ".venv" not in p.parts]


def test_no_name_is_imported_through_a_module_that_does_not_define_it() -> None:
    """``from module_utils.X import name`` and ``alias_of_X.name`` only for names X
    defines: an importer imports the part it uses, no module re-exports another's names."""
    own = {m: defined(p) for m, p in MODULES.items()}
    problems = []
    for path in python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for imp in imports_of(path):
            if imp.target not in MODULES:
                problems.append(f"{path.relative_to(ROOT)}:{imp.line}: no module {imp.target}")
            for name in imp.names:
                if imp.target in own and name not in own[imp.target]:
                    problems.append(
                        f"{path.relative_to(ROOT)}:{imp.line}: {name} is not defined in "
                        f"{imp.target}"
                    )
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX):
                base = node.module[len(PREFIX) :].lstrip(".")
                for alias in node.names:
                    full = f"{base}.{alias.name}" if base else alias.name
                    if full in MODULES:
                        aliases[alias.asname or alias.name] = full
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and not node.attr.startswith("__")
                and node.attr not in own[aliases[node.value.id]]
            ):
                problems.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr} is "
                    f"not defined in {aliases[node.value.id]}"
                )
    assert not problems, "\n".join(problems)
