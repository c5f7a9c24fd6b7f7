# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Facts of the whole cluster, set once in the inventory, and the role variables that
default to them.

Every role has its own variable for the Kubernetes release, the kubeconfig and the NVIDIA
DRA driver's namespace (``dra_feature_gates_kubernetes_version``, ``mig_kubeconfig``, ...)
and each one defaults to the cluster-wide variable (``gpufleet_kubernetes_version``,
``gpufleet_kubeconfig``, ``gpufleet_dra_driver_namespace``) in its role's
``defaults/main.yml``. An inventory sets the cluster-wide variable once; a role variable
that is also set and says something else would make one role work on another cluster,
release or namespace than the rest, so preflight refuses it (:func:`disagreements`).

:func:`effective_variables` gives the role variables the values the roles will see, so
that the other preflight rules judge a release set only cluster-wide.

Shapes: ``variables`` is what one inventory host sets (name -> value). Problems are dicts
``{rule, severity, variable, value, message, fix}`` as the preflight filter reports them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew

__all__ = [
    "CLUSTER_FACTS",
    "ClusterFact",
    "check_hosts",
    "disagreements",
    "effective_variables",
]

ERROR = "error"


@dataclass(frozen=True)
class ClusterFact:
    """One cluster-wide variable: ``name``, what it holds (``what``), the role variables
    that default to it (``role_variables``, each role's ``defaults/main.yml``) and how two
    values are compared (``kind``: ``release``, ``path`` or ``text``)."""

    name: str
    what: str
    role_variables: tuple[str, ...]
    kind: str = "text"


#: The cluster-wide variables and the role variables that default to each. The upgrade
#: role's release (``upgrade_kubernetes_version``) is the upgrade's target, not the running
#: release, and is not listed.
CLUSTER_FACTS: tuple[ClusterFact, ...] = (
    ClusterFact(
        "gpufleet_kubernetes_version",
        "the Kubernetes release the cluster runs",
        (
            "kubeadm_kubernetes_version",
            "dra_feature_gates_kubernetes_version",
            "dra_driver_kubernetes_version",
            "claim_templates_kubernetes_version",
        ),
        "release",
    ),
    ClusterFact(
        "gpufleet_kubeconfig",
        "the cluster's kubeconfig on the control host",
        (
            "kubeadm_kubeconfig_dest",
            "nvidia_container_toolkit_kubeconfig",
            "dra_feature_gates_kubeconfig",
            "gpu_node_labels_kubeconfig",
            "device_plugin_kubeconfig",
            "dra_driver_kubeconfig",
            "mig_kubeconfig",
            "claim_templates_kubeconfig",
            "validate_kubeconfig",
            "upgrade_kubeconfig",
        ),
        "path",
    ),
    ClusterFact(
        "gpufleet_dra_driver_namespace",
        "the namespace of the NVIDIA DRA driver's release and kubelet plugin pods",
        (
            "dra_driver_namespace",
            "mig_dra_plugin_namespace",
            "validate_plugin_namespace",
            "upgrade_dra_plugin_namespace",
        ),
    ),
)


def _set(variables: Mapping[str, Any], name: str) -> bool:
    """``name`` is set to something other than an empty string or null."""
    value = variables.get(name)
    return value is not None and str(value).strip() != ""


def _same(kind: str, a: Any, b: Any) -> bool:
    x, y = str(a).strip(), str(b).strip()
    if kind == "release":
        return x.lstrip("v") == y.lstrip("v")
    if kind == "path":
        return os.path.normpath(os.path.expanduser(x)) == os.path.normpath(os.path.expanduser(y))
    return x == y


def _release_problem(fact: ClusterFact, value: Any) -> dict[str, Any] | None:
    """The cluster-wide release is not a release, or is outside the provisioning range of
    the version model."""
    text = str(value).strip()
    try:
        dra_core.parse_version(text)
    except dra_core.VersionModelError:
        return {
            "rule": "release-format",
            "severity": ERROR,
            "variable": fact.name,
            "value": value,
            "message": "is not a Kubernetes release",
            "fix": (
                f"write {fact.name} as MAJOR.MINOR.PATCH, "
                f'for example "{dra_core.example_release()}"'
            ),
        }
    verdict = dra_skew.supported_for_provision(text)
    if not verdict.ok:
        return {
            "rule": "release-range",
            "severity": ERROR,
            "variable": fact.name,
            "value": value,
            "message": verdict.reason,
            "fix": (
                f"choose a release from 1.{dra_core.PROVISION_MIN_MINOR} to "
                f"1.{dra_core.PROVISION_MAX_MINOR} (upgrade an older cluster first: gpufleet "
                "upgrades one minor at a time)"
            ),
        }
    return None


def disagreements(variables: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An error for each role variable that ``variables`` sets to another value than its
    cluster-wide variable (both set; an empty string counts as not set), naming both
    variables and both values, and one for a cluster-wide release that the version model
    does not parse or does not provision. Releases compare without a leading
    ``v``, paths after ``~`` expansion and normalisation, namespaces as text."""
    out: list[dict[str, Any]] = []
    for fact in CLUSTER_FACTS:
        if not _set(variables, fact.name):
            continue
        wanted = variables[fact.name]
        if fact.kind == "release":
            problem = _release_problem(fact, wanted)
            if problem is not None:
                out.append(problem)
                continue
        for name in fact.role_variables:
            if not _set(variables, name) or _same(fact.kind, variables[name], wanted):
                continue
            out.append(
                {
                    "rule": "cluster-fact-mismatch",
                    "severity": ERROR,
                    "variable": name,
                    "value": variables[name],
                    "message": (
                        f"disagrees with {fact.name}={_show(wanted)} ({fact.what}): the "
                        "role would work on another value than the rest of the cluster"
                    ),
                    "fix": (
                        f"remove {name} from the inventory (it defaults to {fact.name}) or "
                        f"set it to {_show(wanted)}; if {_show(variables[name])} is right, "
                        f"set {fact.name}: {_show(variables[name])} instead"
                    ),
                }
            )
    return out


def _show(value: Any) -> str:
    """``value`` as JSON (a string in double quotes), as the preflight report shows values."""
    return json.dumps(value, sort_keys=True, default=str)


def _hosts_text(hosts: list[str], limit: int = 5) -> str:
    shown = ", ".join(hosts[:limit])
    return shown if len(hosts) <= limit else f"{shown} and {len(hosts) - limit} more"


def effective_variables(variables: Mapping[str, Any]) -> dict[str, Any]:
    """``variables`` with each role variable that is not set given its cluster-wide
    variable's value, as the role's default gives it. A cluster-wide release that
    :func:`disagreements` refuses is not passed on (its error names the cluster-wide
    variable, not each role's)."""
    out = dict(variables)
    for fact in CLUSTER_FACTS:
        if not _set(variables, fact.name):
            continue
        wanted = variables[fact.name]
        if fact.kind == "release" and _release_problem(fact, wanted) is not None:
            continue
        for name in fact.role_variables:
            if not _set(variables, name):
                out[name] = wanted
    return out


def check_hosts(hosts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`disagreements` of every host, merged: ``{"ok", "errors", "report"}``, each
    error with the ``hosts`` it applies to (sorted) and ``report`` one line per error
    (``ERROR [rule] variable=value (on HOSTS): message; fix: ...``). ``hosts`` maps an
    inventory host to its ``variables``."""
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for host in sorted(hosts):
        for p in disagreements(dict((hosts[host] or {}).get("variables") or {})):
            key = (p["rule"], p["variable"], p["message"])
            merged.setdefault(key, {**p, "hosts": []})["hosts"].append(host)
    errors = sorted(merged.values(), key=lambda p: (p["rule"], p["variable"], p["hosts"]))
    lines = [f"preflight: {len(errors)} error(s) in the cluster-wide variables"] if errors else []
    for p in errors:
        lines.append(
            f"ERROR [{p['rule']}] {p['variable']}={_show(p['value'])} "
            f"(on {_hosts_text(p['hosts'])}): {p['message']}; fix: {p['fix']}"
        )
    return {"ok": not errors, "errors": errors, "report": "\n".join(lines)}
