"""Where the tests of a module live: a ``plugins/module_utils`` file with logic of its own (one
that defines at least one function or method) has its pure tests in
``tests/unit/<package>/test_<file>.py``, so that the tests of
``plugins/module_utils/dra/skew.py`` are found in ``tests/unit/dra/test_skew.py``.

A module that only holds data (tables, constants, records without methods) needs no file of
its own; its data is checked by the tests of the modules that read it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MODULE_UTILS = ROOT / "plugins" / "module_utils"
UNIT = ROOT / "tests" / "unit"

#: Modules with logic that have no test file of their own, each with the reason. Keep it
#: empty where possible: an entry here is a module whose behaviour breaks unnoticed.
WITHOUT_TEST_FILE: dict[str, str] = {
    # None today: every module_utils file that defines a function has its test file.
    # Data-only modules are outside the rule (dra/releases/v1_*.py, dra/kubernetes_facts.py,
    # dra/resource_versions.py, dra_driver/classes.py, mig/tables.py); their data is
    # checked by the tests of the modules that read it.
}


def has_logic(path: Path) -> bool:
    """True when the module defines a function or a method."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(tree))


def unit_test_file(module: Path) -> Path:
    """``plugins/module_utils/dra/skew.py`` -> ``tests/unit/dra/test_skew.py``."""
    relative = module.relative_to(MODULE_UTILS)
    return UNIT / relative.parent / f"test_{relative.name}"


def modules_with_logic() -> list[str]:
    return [
        p.relative_to(MODULE_UTILS).as_posix()
        for p in sorted(MODULE_UTILS.rglob("*.py"))
        if p.name != "__init__.py" and has_logic(p)
    ]


def test_every_module_with_logic_has_its_test_file() -> None:
    found = modules_with_logic()
    assert len(found) >= 80, f"found only {len(found)} modules with logic under {MODULE_UTILS}"
    missing = [
        f"plugins/module_utils/{m}: no {unit_test_file(MODULE_UTILS / m).relative_to(ROOT)}"
        for m in found
        if m not in WITHOUT_TEST_FILE and not unit_test_file(MODULE_UTILS / m).is_file()
    ]
    assert not missing, "modules without their test file:\n  " + "\n  ".join(missing)


def test_the_allow_list_names_only_modules_that_still_need_it() -> None:
    found = set(modules_with_logic())
    stale = [
        m for m in WITHOUT_TEST_FILE if m not in found or unit_test_file(MODULE_UTILS / m).is_file()
    ]
    assert not stale, f"remove from WITHOUT_TEST_FILE (gone, without logic or tested): {stale}"


def test_the_rule_tells_logic_from_data(tmp_path: Path) -> None:
    data = tmp_path / "tables.py"
    data.write_text('"""Tables."""\nGPUS = {"h200": 7}\n')
    record = tmp_path / "record.py"
    record.write_text("class R:\n    x: int = 0\n")
    logic = tmp_path / "logic.py"
    logic.write_text("class R:\n    def f(self):\n        return 1\n")
    assert (has_logic(data), has_logic(record), has_logic(logic)) == (False, False, True)
    assert unit_test_file(MODULE_UTILS / "dra" / "skew.py") == UNIT / "dra" / "test_skew.py"
