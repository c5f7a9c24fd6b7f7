# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The Python libraries of the control host: the modules the roles run there
(``delegate_to: localhost``: gpu_node_labels, kubeadm_config_gates, upgrade_node_state,
upgrade_uncordon, upgrade_report) import them, and a module that
misses one fails only when its task comes, after hosts were changed.

The distributions and their ranges are the collection's ``meta/ee-requirements.txt`` (what
the execution environment installs), read here, so the install command is the image's.
Pure: the caller says which import names its Python finds (the ``preflight_check`` filter
asks the Python that runs ansible-playbook, which the implicit ``localhost`` runs modules
with).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import (
    ERROR,
    WARNING,
    Problem,
    problem,
)

#: The collection's Python requirements of the control host (preflight -> module_utils ->
#: plugins -> the collection root).
REQUIREMENTS_FILE = Path(__file__).resolve().parents[3] / "meta" / "ee-requirements.txt"

#: Distribution (as ``meta/ee-requirements.txt`` names it) -> the top-level names the
#: plugins import from it (urllib3 comes with kubernetes, lark with cel-python).
IMPORTS: dict[str, tuple[str, ...]] = {
    "kubernetes": ("kubernetes", "urllib3"),
    "pyyaml": ("yaml",),
    "cel-python": ("celpy", "lark"),
    "msgspec": ("msgspec",),
}

#: Distributions the modules run without, more slowly -> what they do without it; a
#: missing one is a warning.
RECOMMENDED: dict[str, str] = {
    "msgspec": "the modules that list the cluster decode its lists with the standard "
    "library's json instead, to the same result, more slowly",
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def requirements(text: str) -> dict[str, str]:
    """Distribution name (lower case, ``_`` as ``-``) -> its requirement line
    (``kubernetes>=30,<38``), from the text of a pip requirements file; comments and blank
    lines are skipped."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        match = _NAME.match(line)
        if match:
            out[match.group(0).lower().replace("_", "-")] = line
    return out


def import_names() -> tuple[str, ...]:
    """Every top-level name to ask the control host's Python for, sorted."""
    return tuple(sorted(n for names in IMPORTS.values() for n in names))


def library_problems(
    importable: Mapping[str, bool], python: str, requirements_text: str | None = None
) -> list[Problem]:
    """One error per distribution of ``meta/ee-requirements.txt`` (``requirements_text``
    when given) with an import name that ``python`` (the control host's interpreter, a path)
    cannot import, a warning for one of ``RECOMMENDED``; ``importable`` maps import name ->
    found, and a name it lacks was not asked and counts as found."""
    if requirements_text is None:
        requirements_text = REQUIREMENTS_FILE.read_text(encoding="utf-8")
    out = []
    for dist, line in sorted(requirements(requirements_text).items()):
        missing = [n for n in IMPORTS.get(dist, ()) if not importable.get(n, True)]
        if missing:
            without = RECOMMENDED.get(dist)
            why = without or "the modules that run on the control host need it"
            out.append(
                problem(
                    "controller-library",
                    WARNING if without else ERROR,
                    "ansible_playbook_python",
                    python,
                    f"the control host's Python cannot import {', '.join(missing)} (package "
                    f"{dist}): {why}",
                    f"{python} -m pip install '{line}'",
                )
            )
    return out
