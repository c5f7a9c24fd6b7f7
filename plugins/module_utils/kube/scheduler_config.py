# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The ``DynamicResources`` plugin in a custom ``KubeSchedulerConfiguration``: whether a
profile disables it (``scheduler_config_has_dynamic_resources``) and the edit that enables
it again (``enable_dynamic_resources``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    Change,
    ConfigEditError,
    EditResult,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.manifests import (
    edit_document_of_kind,
    one_document,
)

__all__ = [
    "DYNAMIC_RESOURCES",
    "enable_dynamic_resources",
    "scheduler_config_has_dynamic_resources",
]


SCHEDULER_CONFIG_API = "kubescheduler.config.k8s.io/v1"


DYNAMIC_RESOURCES = "DynamicResources"


# ------------------------------------------------------------------ KubeSchedulerConfiguration

#: Extension points the DynamicResources plugin implements in every release with
#: structured parameters (1.31-1.37: PreEnqueue, PreFilter, Filter, PostFilter, Reserve,
#: PreBind; ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``).
#: Score (1.36+) is left out: it is optional and not implemented by older releases.
_DR_POINTS = ("preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind")


def _plugin_names(plugin_set: Any, key: str) -> list[str]:
    if not isinstance(plugin_set, Mapping):
        return []
    return [p.get("name") for p in plugin_set.get(key) or [] if isinstance(p, Mapping)]


def _scheduler_profiles(data: Mapping[str, Any], what: str) -> list[dict[str, Any]]:
    api = data.get("apiVersion")
    if api != SCHEDULER_CONFIG_API or data.get("kind") != "KubeSchedulerConfiguration":
        raise ConfigEditError(
            f"{what}: apiVersion {api!r} kind {data.get('kind')!r} is not a "
            f"KubeSchedulerConfiguration of {SCHEDULER_CONFIG_API} (older APIs were removed "
            "in 1.29); fix: migrate the scheduler configuration to "
            f"{SCHEDULER_CONFIG_API}"
        )
    profiles = data.get("profiles") or []
    if not isinstance(profiles, list):
        raise ConfigEditError(f"{what}: profiles is not a list; fix: write a list of profiles")
    return profiles


def _dr_problems(profile: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(extension point, problem) pairs that leave DynamicResources off in a profile."""
    plugins = profile.get("plugins") or {}
    problems: list[tuple[str, str]] = []
    for point, pset in plugins.items() if isinstance(plugins, Mapping) else ():
        disabled = _plugin_names(pset, "disabled")
        enabled = _plugin_names(pset, "enabled")
        if DYNAMIC_RESOURCES in disabled and DYNAMIC_RESOURCES not in enabled:
            problems.append((point, f"{point}.disabled names {DYNAMIC_RESOURCES}"))
        elif (
            "*" in disabled
            and DYNAMIC_RESOURCES not in enabled
            and (point == "multiPoint" or point in _DR_POINTS)
        ):
            problems.append(
                (point, f"{point}.disabled is '*' and {point}.enabled lacks {DYNAMIC_RESOURCES}")
            )
    return problems


def scheduler_config_has_dynamic_resources(text: str) -> bool:
    """True when no profile of a KubeSchedulerConfiguration (v1) leaves the
    DynamicResources plugin off: not disabled by name, and not dropped by a ``"*"``
    disable at ``multiPoint`` or at an extension point it implements without being listed
    in that point's ``enabled``. The default profile (no ``profiles``/``plugins``) has it
    whenever the DynamicResourceAllocation gate is on (``applyDynamicResources`` in
    ``pkg/scheduler/apis/config/v1/default_plugins.go``). Raises ConfigEditError for
    another API version."""
    data = one_document(text, "KubeSchedulerConfiguration")
    profiles = _scheduler_profiles(data, "KubeSchedulerConfiguration")
    return not any(_dr_problems(p) for p in profiles if isinstance(p, Mapping))


def enable_dynamic_resources(text: str) -> EditResult:
    """Make every profile of a KubeSchedulerConfiguration (v1) run DynamicResources.

    Removes ``DynamicResources`` from every ``disabled`` list; where ``"*"`` is disabled
    at ``multiPoint`` or at one of its extension points, adds ``{name: DynamicResources}``
    to that point's ``enabled`` (at ``multiPoint`` before ``DefaultPreemption`` when listed,
    the place the default puts it, so that an idle claim is deallocated before a pod is
    preempted). Raises ConfigEditError for another API version.
    """

    def apply(data: dict[str, Any]) -> list[Change]:
        changes: list[Change] = []
        for index, profile in enumerate(_scheduler_profiles(data, "KubeSchedulerConfiguration")):
            if not isinstance(profile, dict):
                continue
            name = profile.get("schedulerName", f"profiles[{index}]")
            plugins = profile.get("plugins")
            if not isinstance(plugins, dict):
                continue
            for point, pset in plugins.items():
                if not isinstance(pset, dict):
                    continue
                where = f"KubeSchedulerConfiguration profile {name} plugins.{point}"
                disabled = pset.get("disabled") or []
                kept = [
                    p
                    for p in disabled
                    if not (isinstance(p, Mapping) and p.get("name") == DYNAMIC_RESOURCES)
                ]
                if len(kept) != len(disabled):
                    pset["disabled"] = kept
                    if not kept:
                        del pset["disabled"]
                    changes.append(
                        Change(
                            where + ".disabled",
                            DYNAMIC_RESOURCES,
                            "disabled",
                            None,
                            "DRA needs the DynamicResources plugin",
                        )
                    )
                enabled_names = _plugin_names(pset, "enabled")
                if (
                    "*" in _plugin_names(pset, "disabled")
                    and DYNAMIC_RESOURCES not in enabled_names
                    and (point == "multiPoint" or point in _DR_POINTS)
                ):
                    enabled = list(pset.get("enabled") or [])
                    at = (
                        enabled_names.index("DefaultPreemption")
                        if point == "multiPoint" and "DefaultPreemption" in enabled_names
                        else len(enabled)
                    )
                    enabled.insert(at, {"name": DYNAMIC_RESOURCES})
                    pset["enabled"] = enabled
                    changes.append(
                        Change(
                            where + ".enabled",
                            DYNAMIC_RESOURCES,
                            None,
                            "enabled",
                            "'*' is disabled there; DRA needs the DynamicResources plugin",
                        )
                    )
        return changes

    return edit_document_of_kind(
        text, "KubeSchedulerConfiguration", "KubeSchedulerConfiguration", apply
    )
