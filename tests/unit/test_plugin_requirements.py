"""Every Python library a plugin imports, itself or through the module_utils it ships
(``tests/unit/plugin_imports``), is named in its DOCUMENTATION ``requirements`` (with those
of the documentation fragments it extends, which ansible-doc merges in), so that
ansible-doc tells what to install where the plugin runs.

An entry names a library by its import name or by a distribution that provides it
(``yaml``: PyYAML, ``celpy``: cel-python, from the installed distributions' metadata).
A controller plugin (a filter) runs inside ansible-core, so the libraries ansible-core
itself requires (Jinja2, PyYAML) are there; a module runs under the host's Python, where
nothing but the standard library is given."""

from __future__ import annotations

import ast
import importlib.metadata
import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from tests.unit.plugin_imports import PLUGINS, third_party, third_party_of

pytestmark = pytest.mark.unit

#: The plugin types whose files carry DOCUMENTATION (doc_fragments lend theirs).
PLUGIN_TYPES = ("modules", "filter", "inventory", "lookup", "callback", "connection")
PLUGIN_FILES = sorted(
    p.relative_to(PLUGINS).as_posix()
    for kind in PLUGIN_TYPES
    for p in (PLUGINS / kind).glob("*.py")
    if p.name != "__init__.py"
)
FRAGMENT_PREFIX = "gpufleet.cluster."
#: Plugin -> library -> why the plugin needs it not: a file it ships imports the library only
#: inside functions the plugin never calls. Each entry is checked by reading the callers.
NOT_CALLED: dict[str, dict[str, str]] = {
    "modules/containerd_runtime_config.py": {
        "yaml": "reads TOML and JSON; common.limits imports PyYAML in load_yaml only",
    },
    "filter/claims.py": {
        "celpy": "writes CEL selectors as text (claims.cel.cel_mig_profile), compiles none",
        "lark": "writes CEL selectors as text (claims.cel.cel_mig_profile), compiles none",
    },
}


def documentation(path: Path) -> dict:
    """The parsed ``DOCUMENTATION`` assigned at module level, or in a class (fragments)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "DOCUMENTATION" for t in node.targets
        ):
            return yaml.safe_load(node.value.value) or {}
    return {}


def requirements(plugin: str) -> list[str]:
    """The plugin's requirements and those of the collection's fragments it extends."""
    doc = documentation(PLUGINS / plugin)
    out = list(doc.get("requirements") or [])
    for fragment in doc.get("extends_documentation_fragment") or []:
        if fragment.startswith(FRAGMENT_PREFIX):
            name = fragment[len(FRAGMENT_PREFIX) :]
            out += documentation(PLUGINS / "doc_fragments" / f"{name}.py").get("requirements") or []
    return out


def names_for(library: str) -> set[str]:
    """The import name and the installed distributions that provide it, lower case."""
    dists = importlib.metadata.packages_distributions().get(library) or []
    return {library.lower()} | {d.lower() for d in dists}


def ansible_core_libraries() -> set[str]:
    """Import names of the distributions ansible-core requires (jinja2, yaml, ...)."""
    required = {
        Requirement(r).name.lower() for r in importlib.metadata.requires("ansible-core") or []
    }
    return {
        name
        for name, dists in importlib.metadata.packages_distributions().items()
        if required & {d.lower() for d in dists}
    }


def named(library: str, entries: list[str]) -> bool:
    words = {w.lower() for e in entries for w in re.findall(r"[A-Za-z0-9_.-]*[A-Za-z0-9]", e)}
    return bool(names_for(library) & words)


@pytest.mark.parametrize("plugin", PLUGIN_FILES, ids=lambda p: p.removesuffix(".py"))
def test_a_plugin_lists_every_library_it_imports(plugin: str) -> None:
    libraries = third_party_of(plugin)
    if not plugin.startswith("modules/"):
        libraries = {k: v for k, v in libraries.items() if k not in ansible_core_libraries()}
    entries = requirements(plugin)
    exempt = NOT_CALLED.get(plugin, {})
    stale = set(exempt) - set(libraries)
    assert not stale, f"{plugin} no longer imports {stale}: remove it from NOT_CALLED"
    missing = {
        k: sorted(v) for k, v in libraries.items() if k not in exempt and not named(k, entries)
    }
    assert not missing, (
        f"{plugin} imports libraries its DOCUMENTATION requirements do not name "
        f"(library: the files importing it): {missing}; requirements: {entries}"
    )


def test_the_scan_finds_lazy_dynamic_and_fallback_imports() -> None:
    source = (
        "import json\n"
        "from ansible.module_utils.basic import AnsibleModule\n"
        "try:\n"
        "    import tomllib\n"
        "except ImportError:\n"
        "    import tomli as tomllib\n"
        "try:\n"
        "    import yaml\n"
        "except ImportError:\n"
        "    yaml = None\n"
        "def later():\n"
        "    from kubernetes.client import CoreV1Api\n"
        "    return importlib.import_module('pynvml')\n"
    )
    assert third_party(source) == {"yaml", "kubernetes", "pynvml"}
    assert named("yaml", ["PyYAML (to read manifests)"])
    assert named("celpy", ["cel-python, to explain pending claims"])
    assert not named("kubernetes", ["PyYAML"])
    assert {"jinja2", "yaml"} <= ansible_core_libraries()
