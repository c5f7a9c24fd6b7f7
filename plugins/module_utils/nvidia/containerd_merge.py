# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""How containerd combines its main file with the files its ``imports`` load.

Pure Python; the node-side module ``containerd_runtime_config`` and the configuration
tests of the ``nvidia_container_toolkit`` role use it. Facts (containerd's
``cmd/containerd/server/config`` ``LoadConfig``/``mergeConfig``, checked against the
real binaries 1.7.35, 2.0.14, 2.1.9, 2.3.7 and 2.4.2 by
``tests/integration/test_containerd_matrix.py``):

* Load order: the main file, then each ``imports`` entry in its order, a glob expanded
  in lexical order. A later file wins.
* containerd 1.x: a later file that has a plugin's section replaces that whole section
  (``mergeConfig``: "Replace entire sections instead of merging map's values"), so every
  key the main file or an earlier import set there is gone, and a ``runtimes`` table
  replaces the default one (``runc`` included). From 2.0 sections merge key by key
  (``mergo`` with override: tables recursively, another value, list included, replaced).
"""

from __future__ import annotations

import copy
import fnmatch
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.merge import deep_merge

#: containerd release from which imported files merge plugin sections key by key
#: (``cmd/containerd/server/config`` of 2.0.0; 1.7.35 still replaces them).
DEEP_MERGE_MIN = (2, 0, 0)


def replaces_sections(release: tuple[int, int, int]) -> bool:
    """True when containerd ``release`` replaces a whole plugin section on import."""
    return release < DEEP_MERGE_MIN


def _expand(entry: str, base: str, glob: Callable[[str], list[str]]) -> list[str]:
    path = os.path.normpath(entry if os.path.isabs(entry) else os.path.join(base, entry))
    return sorted(glob(path)) if any(c in path for c in "*?[") else [path]


def load_order(
    imports: Sequence[str],
    main_path: str,
    dropin_path: str,
    *,
    glob: Callable[[str], list[str]],
    added_entry: str | None = None,
) -> list[str]:
    """The files containerd loads after the main file, in order, with ``dropin_path`` at
    the place it will take (``added_entry``: the imports entry that will be appended to
    load it, when none covers it yet). ``glob`` lists existing files (``glob.glob``).
    """
    base = os.path.dirname(main_path)
    dropin = os.path.normpath(dropin_path)
    entries = [*imports, *([added_entry] if added_entry else [])]
    order: list[str] = []
    for entry in entries:
        path = os.path.normpath(entry if os.path.isabs(entry) else os.path.join(base, entry))
        files = _expand(entry, base, glob)
        if dropin not in files and (path == dropin or fnmatch.fnmatch(dropin, path)):
            files = sorted([*files, dropin])
        for file in files:
            if file not in order:
                order.append(file)
    return order


def plugin_section(
    files: Iterable[Mapping[str, Any]], plugin: str, release: tuple[int, int, int]
) -> dict[str, Any]:
    """The ``plugins.<plugin>`` section that the parsed ``files`` (in load order, main
    first) give together, as containerd ``release`` combines them (no defaults)."""
    section: dict[str, Any] = {}
    for data in files:
        own = (data.get("plugins") or {}).get(plugin)
        if not isinstance(own, Mapping):
            continue
        section = (
            copy.deepcopy(dict(own)) if replaces_sections(release) else deep_merge(section, own)
        )
    return section


def leaves(data: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every non-table value of ``data`` by its key path."""
    if not isinstance(data, Mapping):
        return {prefix: data}
    out: dict[tuple[str, ...], Any] = {}
    for key, value in data.items():
        out.update(leaves(value, (*prefix, str(key))))
    return out


def lost_settings(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    owned: Callable[[tuple[str, ...]], bool],
) -> list[str]:
    """Settings of ``before`` (a parsed ``containerd config dump``) that ``after`` no
    longer has with the same value, outside the key paths ``owned`` accepts (those the
    change is meant to set). Each as ``plugins.<name>.a.b: <before> -> <after>``; the
    ``imports`` list (the files read) is not a setting."""
    now = leaves(after)
    out = []
    for path, value in leaves(before).items():
        if path[:1] == ("imports",) or owned(path):
            continue
        new = now.get(path, "<absent>")
        if new != value:
            out.append(f"{'.'.join(path)}: {value!r} -> {new!r}")
    return out


def owned_by_runtime_change(
    plugin: str, runtime_name: str, *, set_as_default: bool
) -> Callable[[tuple[str, ...]], bool]:
    """The key paths that adding runtime ``runtime_name`` and CDI to the ``plugin``
    section may change: the runtime's own entry, ``enable_cdi``, ``cdi_spec_dirs`` and,
    with ``set_as_default``, ``containerd.default_runtime_name``."""
    root = ("plugins", plugin)

    def owned(path: tuple[str, ...]) -> bool:
        if path[:2] != root:
            return False
        rest = path[2:]
        return (
            rest[:3] == ("containerd", "runtimes", runtime_name)
            or rest[:1] in (("enable_cdi",), ("cdi_spec_dirs",))
            or (set_as_default and rest == ("containerd", "default_runtime_name"))
        )

    return owned
