# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The inventory's values of every role's variables judged by that role's own argument
spec, before any play changes a host.

A role judges its variables (``meta/argument_specs.yml``) only when its play comes, so a
wrong type for a later role (``mig_layout: 7g``) would stop the run after the driver, the
toolkit and the cluster had been changed. Preflight runs Ansible's own validator
(``ansible.module_utils.common.arg_spec.ArgumentSpecValidator``, the code behind the
roles' argument validation) on each value the inventory sets, option by option: the same
conversions (Ansible's booleans, ``int``, ``list`` from a comma string), choices,
``elements`` and suboptions. ``required`` is not judged here (a role that does not run
needs none of its variables; the role still requires them at its entry).

Shapes: ``specs`` is role name -> ``{option: spec}`` (the ``options`` of the role's
``main`` entry point); ``variables`` the values one host sets. Answers
``(role, option, value, message)`` tuples.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

try:
    import yaml

    YAML_IMPORT_ERROR: str | None = None
except ImportError as _err:  # PyYAML comes with ansible-core on the control host
    yaml = None  # type: ignore[assignment]
    YAML_IMPORT_ERROR = str(_err)

__all__ = ["argument_spec_problems", "load_role_specs"]


def load_role_specs(roles_dir: str | Path, roles: list[str]) -> dict[str, dict[str, Any]]:
    """``{role: options of its main entry point}`` for each role of ``roles`` under
    ``roles_dir`` that has ``meta/argument_specs.yml`` (a role without one is left out).
    Raises ValueError naming a spec file that is not YAML or not a mapping, or PyYAML
    missing."""
    if yaml is None:
        raise ValueError(
            f"PyYAML is required to read the roles' argument specs ({YAML_IMPORT_ERROR}); "
            "fix: pip install PyYAML where ansible-core runs"
        )
    out: dict[str, dict[str, Any]] = {}
    for role in roles:
        path = Path(roles_dir) / role / "meta" / "argument_specs.yml"
        if not path.is_file():
            continue
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise ValueError(f"{path} cannot be read as YAML: {err}") from None
        entry = ((doc.get("argument_specs") or {}) if isinstance(doc, Mapping) else {}).get("main")
        if not isinstance(entry, Mapping):
            continue
        out[role] = dict(entry.get("options") or {})
    return out


def _not_required(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` without ``required``, at every level of ``options``."""
    out = {k: v for k, v in spec.items() if k != "required"}
    if isinstance(spec.get("options"), Mapping):
        out["options"] = {k: _not_required(v) for k, v in spec["options"].items()}
    return out


def argument_spec_problems(
    variables: Mapping[str, Any], specs: Mapping[str, Mapping[str, Any]]
) -> Iterator[tuple[str, str, Any, str]]:
    """``(role, option, value, message)`` for each value in ``variables`` that its role's
    argument spec refuses (Ansible's validator's message)."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    for role, options in specs.items():
        for name in sorted(set(options) & set(variables)):
            spec = options[name]
            if not isinstance(spec, Mapping):
                continue
            validator = ArgumentSpecValidator({name: _not_required(spec)})
            result = validator.validate({name: variables[name]})
            messages = [str(getattr(e, "msg", e)) for e in result.errors]
            if messages:
                yield role, name, variables[name], "; ".join(messages)
