"""The collection's filter plugin files import their module_utils when a filter is called.

For any ``gpufleet.cluster.*`` filter, ansible-core loads every file of ``plugins/filter``
(``Jinja2Loader.get_with_context`` walks the package's modules to find the name), in the
worker process of each task and host that templates one, from source: an import at the top
of a file is paid by every such task, whichever filter it uses. With the imports at the top
of the files that load cost 0.29 s per task; with them in the functions, 0.09 s."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
FILTERS = ROOT / "plugins" / "filter"
PREFIX = "ansible_collections.gpufleet.cluster.plugins.module_utils."

#: What a filter file may import on load: the DRA version model's names (``dra.core``, a
#: few constants that ``filter/dra.py``'s ``MODULE_KEYS`` is built of, and tests import).
LOADED_WITH_THE_FILES = {"dra.core"}


def top_level_imports(path: Path) -> set[str]:
    """The module_utils modules (dotted, relative to module_utils) that ``path`` imports
    outside its functions."""
    out = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX):
            package = node.module[len(PREFIX) :]
            out.update(f"{package}.{alias.name}" for alias in node.names)
    return out


def test_the_files_are_found() -> None:
    assert len(sorted(FILTERS.glob("*.py"))) >= 13


@pytest.mark.parametrize("path", sorted(FILTERS.glob("*.py")), ids=lambda p: p.name)
def test_a_filter_file_imports_its_module_utils_in_its_functions(path: Path) -> None:
    extra = top_level_imports(path) - LOADED_WITH_THE_FILES
    assert not extra, (
        f"{path.name} imports {sorted(extra)} when it is loaded; import them in the "
        "functions that use them (every task that calls any gpufleet filter loads this file)"
    )


def test_the_rule_sees_a_top_level_import(tmp_path: Path) -> None:
    source = tmp_path / "f.py"
    source.write_text(
        f"from {PREFIX[:-1]}.claims import api as capi\n"
        "def f():\n"
        f"    from {PREFIX[:-1]}.kueue import queues\n",
        encoding="utf-8",
    )
    assert top_level_imports(source) == {"claims.api"}
