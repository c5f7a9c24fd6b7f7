"""Every module's DOCUMENTATION, EXAMPLES and RETURN are YAML that ansible-doc can read (a
plain scalar with ": " in it breaks the whole page), and DOCUMENTATION names the module;
every filter plugin file's DOCUMENTATION is YAML too (ansible-doc -t filter reads it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
MODULES = sorted((PLUGINS / "modules").glob("*.py"))
FILTERS = sorted((PLUGINS / "filter").glob("*.py"))


def doc_strings(path: Path) -> dict[str, str]:
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in (
                    "DOCUMENTATION",
                    "EXAMPLES",
                    "RETURN",
                ):
                    out[target.id] = node.value.value
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_module_documentation_is_yaml(path: Path) -> None:
    docs = doc_strings(path)
    assert set(docs) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}, path.name
    parsed = {k: yaml.safe_load(v) for k, v in docs.items()}
    assert parsed["DOCUMENTATION"]["module"] == path.stem
    assert isinstance(parsed["DOCUMENTATION"].get("options", {}), dict)


@pytest.mark.parametrize("path", FILTERS, ids=lambda p: p.stem)
def test_filter_documentation_is_yaml(path: Path) -> None:
    docs = doc_strings(path)
    assert "DOCUMENTATION" in docs, path.name
    parsed = yaml.safe_load(docs["DOCUMENTATION"])
    assert parsed["short_description"], path.name
