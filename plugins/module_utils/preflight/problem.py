# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What every preflight rule shares: the finding (``Problem``), the host being judged
(``HostContext``), the readers of a variable's value, and the settings a host runs with.

Settings are the inventory's variables over the roles' own ``defaults/main.yml`` (read
from the collection's ``roles/`` directory, so preflight never keeps a copy of a role
default) over ``SITE_DEFAULTS``. A default that is a template (``"{{ dra_driver_namespace
| default('nvidia-dra-driver-gpu') }}"``) is rendered with Jinja against those settings, as
Ansible would when the role runs; one that needs more than Jinja's own filters (a lookup,
an Ansible filter) is left unset and the rules treat it as empty.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core

ERROR = "error"
WARNING = "warning"

#: The collection's roles (plugins/module_utils/preflight -> the collection root -> roles).
ROLES_DIR = Path(__file__).resolve().parents[3] / "roles"

#: Variables of the site playbook (not of a role) and their defaults (playbooks/site.yml).
SITE_DEFAULTS: dict[str, Any] = {
    "site_install_gpu_stack": True,
    "site_bootstrap": False,
}

#: Release variables, in the order the first non-empty one is taken as the cluster's.
RELEASE_VARIABLES = (
    "kubeadm_kubernetes_version",
    "dra_feature_gates_kubernetes_version",
    "dra_driver_kubernetes_version",
    "claim_templates_kubernetes_version",
)


@dataclass(frozen=True)
class Problem:
    """One finding. ``severity`` is ``error`` (the run stops) or ``warning``.

    ``rule`` is a stable id (``driver-branch``); ``variable`` the variable to change,
    ``value`` the value found, ``message`` what is wrong and why, ``fix`` what to write
    instead; ``hosts`` the inventory hosts it applies to (empty: the inventory as a whole).
    """

    rule: str
    severity: str
    variable: str
    value: Any
    message: str
    fix: str
    hosts: tuple[str, ...] = ()

    def key(self) -> tuple[str, str, str, str, str, str]:
        return (
            self.rule,
            self.severity,
            self.variable,
            short(self.value),
            self.message,
            self.fix,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "variable": self.variable,
            "value": self.value,
            "message": self.message,
            "fix": self.fix,
            "hosts": list(self.hosts),
        }


def short(value: Any, limit: int = 160) -> str:
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def problem(rule: str, severity: str, variable: str, value: Any, message: str, fix: str) -> Problem:
    return Problem(rule, severity, variable, value, message, fix)


# --- value readers ----------------------------------------------------------------------


class BadValue(Exception):
    """A variable whose value a rule cannot read; carries the Problem that says so."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(problem.message)


def as_bool(settings: Mapping[str, Any], name: str) -> bool:
    value = settings.get(name)
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, str) and not value.strip():
        return False
    parsed = ig.variable_bool(value)  # Ansible's own booleans, as the roles read them
    if parsed is not None:
        return parsed
    raise BadValue(
        problem(
            "value-type",
            ERROR,
            name,
            value,
            "is not a boolean",
            f"write {name}: true or {name}: false",
        )
    )


def text_of(settings: Mapping[str, Any], name: str) -> str:
    value = settings.get(name)
    return "" if value is None else str(value).strip()


def release_of(text: str) -> tuple[int, int, int] | None:
    try:
        v = dra_core.parse_version(text)
    except dra_core.VersionModelError:
        return None
    return (v.major, v.minor, v.patch or 0)


def vtext(v: Sequence[int]) -> str:
    return ".".join(str(p) for p in v)


def as_list(value: Any) -> list[str]:
    """A list variable as the roles read it: a string is split at commas."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def truth(value: Any) -> Any:
    """A gate value as Ansible reads a string boolean; anything else unchanged."""
    parsed = ig.variable_bool(value) if isinstance(value, str) else None
    return value if parsed is None else parsed


# --- the host being judged ---------------------------------------------------------------


@dataclass
class HostContext:
    host: str
    groups: tuple[str, ...]
    settings: dict[str, Any]
    user: Mapping[str, Any]
    gpus: list[Mapping[str, Any]]
    driver_version: str
    mig_config_file_text: str = ""
    problems: list[Problem] = field(default_factory=list)
    release: tuple[int, int, int] | None = None
    release_var: str = ""

    @property
    def gpu_group(self) -> str:
        return text_of(self.settings, "gpu_node_labels_group") or "gpu_nodes"

    @property
    def is_gpu(self) -> bool:
        return self.gpu_group in self.groups

    def add(self, problem: Problem) -> None:
        self.problems.append(problem)


# --- the roles' defaults ----------------------------------------------------------------


@lru_cache(maxsize=8)
def _role_defaults(roles_dir: str) -> tuple[tuple[str, Any], ...]:
    import yaml

    out: dict[str, Any] = {}
    for path in sorted(Path(roles_dir).glob("*/defaults/main.yml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise ValueError(f"{path} cannot be read as YAML: {err}") from None
        if isinstance(doc, Mapping):
            for name, value in doc.items():
                out.setdefault(str(name), value)
    return tuple(out.items())


def role_defaults(roles_dir: str | Path | None = None) -> dict[str, Any]:
    """Variable -> default as the roles' ``defaults/main.yml`` under ``roles_dir`` (the
    collection's own ``roles/`` when None) write it, templates unrendered. Raises
    ValueError naming a defaults file that is not YAML."""
    return copy.deepcopy(dict(_role_defaults(str(roles_dir or ROLES_DIR))))


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _render(template: str, context: Mapping[str, Any]) -> tuple[bool, Any]:
    """(rendered, value) of one templated default; (False, None) when plain Jinja cannot
    render it (an Ansible filter or lookup)."""
    from jinja2 import StrictUndefined, TemplateError
    from jinja2.nativetypes import NativeEnvironment

    try:
        value = NativeEnvironment(undefined=StrictUndefined).from_string(template).render(context)
    except (TemplateError, TypeError, ValueError):
        return False, None
    return True, value


def settings_for(
    variables: Mapping[str, Any], roles_dir: str | Path | None = None
) -> dict[str, Any]:
    """The settings a host runs with: ``variables`` (as the inventory sets them) over the
    roles' defaults over ``SITE_DEFAULTS``; templated defaults rendered against the rest
    (two passes, so a default may name another templated default)."""
    defaults = role_defaults(roles_dir)
    settings = {**SITE_DEFAULTS}
    settings.update({k: v for k, v in defaults.items() if not _is_template(v)})
    settings.update(variables)
    pending = {k: v for k, v in defaults.items() if _is_template(v) and k not in variables}
    for _round in range(2):
        for name, template in list(pending.items()):
            ok, value = _render(template, settings)
            if ok:
                settings[name] = value
                del pending[name]
    return settings
