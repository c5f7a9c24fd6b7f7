# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA gate audit's judgement of flag sources against the DRA version model: entries
that stop a component or should go (``gates.model-forbidden``,
``gates.runtime-config-unserved``, ``gates.model-advice``), wishes set the other way
(``gates.model-mismatch``), planned gates and runtime-config absent
(``gates.model-missing``, ``gates.runtime-config-missing``); and the defaults in force when
an entry is absent (``default_value``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import sanitize as dra_sanitize
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.facts import (
    FlagSet,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.metrics import (
    FeatureReading,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.report import (
    Finding,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.terms import (
    FAIL,
    FEATURE_GATE,
    KUBEADM_CONFIGMAP,
    METRIC,
    MODEL,
    RUNTIME_CONFIG,
    WARN,
    bool_text,
    configmap_for,
    rc_value,
)

# ------------------------------------------------------------------ comparison helpers


def default_value(
    kind: str, name: str, version: dra_core.KubeVersion, metric: FeatureReading | None = None
) -> str | None:
    """The value in force when ``name`` is not set: the metric's when read, else the version
    model's default; None when unknown (a gate outside the model, another API group)."""
    if kind == FEATURE_GATE:
        if metric is not None:
            return bool_text(metric.enabled)
        if name in dra_gates.GATES:
            st = dra_gates.gate_state(name, version)
            return bool_text(st.default) if st.known else None
        return None
    parts = name.split("/")
    if parts[0] == dra_core.RESOURCE_GROUP and len(parts) == 2:
        for api in dra_api.served_api_versions(version):
            if api.version == parts[1]:
                return bool_text(api.enabled_by_default)
        return "false"
    return None


def severity_of(a: str | None, b: str | None, default: str | None) -> str:
    """fail when the values in force differ (or cannot be told), warn when only the
    spelling differs."""
    ea = a if a is not None else default
    eb = b if b is not None else default
    return WARN if ea is not None and ea == eb else FAIL


def entry_text(kind: str, name: str, value: str | None) -> str:
    if value is None:
        return f"no {name}"
    return f"{name}={value}"


def flag_name(kind: str) -> str:
    return "--feature-gates" if kind == FEATURE_GATE else "--runtime-config"


def model_actions(
    flags: FlagSet, version: dra_core.KubeVersion, component: str | None = None
) -> dict[tuple[str, str], str]:
    """(kind, name) -> ``remove`` (fatal) or ``advise-remove`` for the entries of ``flags``
    that ``dra.sanitize`` objects to at ``version``."""
    report = dra_sanitize.sanitize(
        dict(flags.feature_gates), flags.runtime_config_entries(), version, component=component
    )
    out = {}
    for f in report.findings:
        if f.action in ("remove", "advise-remove"):
            kind = FEATURE_GATE if f.kind == "feature-gate" else RUNTIME_CONFIG
            out[(kind, f.entry.partition("=")[0])] = f.action
    return out


def plan_value(
    plan: dra_settings.ComponentPlan, component: str, kind: str, name: str
) -> str | None:
    settings = plan.components[component]
    if kind == FEATURE_GATE:
        if name in settings.feature_gates:
            return bool_text(settings.feature_gates[name])
        if (
            name in plan.wishes
            and name in dra_gates.GATES
            and component in dra_gates.GATES[name].components
        ):
            return bool_text(plan.wishes[name])
        return None
    for entry in settings.runtime_config:
        key, _sep, value = entry.partition("=")
        if key == name:
            return rc_value(value)
    return None


def model_checks(
    host: str | None,
    component: str,
    sources: Mapping[str, FlagSet],
    plan: dra_settings.ComponentPlan,
    version: dra_core.KubeVersion,
    metric: Mapping[str, FeatureReading],
    extra_values: Mapping[str, FlagSet | None],
    labels: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Judge the given sources of one component (host sources, or the ConfigMap with
    ``host`` None) against the version model. ``labels``: how the fixes name a source
    (``{"file": "file /var/lib/kubelet/config.yaml"}``)."""
    if not sources:
        return []
    settings = plan.components[component]
    grouped = _sanitize_groups(sources, version, component, _planned_entries(settings))
    where = ", ".join((labels or {}).get(src, src) for src in sorted(sources))
    forbidden_names = {(k, n) for (fid, k, n) in grouped if fid != "gates.model-advice"}
    return [
        *_sanitize_findings(grouped, host, component, version, where),
        *_mismatch_findings(host, component, sources, plan, version, forbidden_names),
        *_missing_gate_findings(
            host, component, sources, settings, version, metric, extra_values, where
        ),
        *_missing_runtime_config_findings(host, component, sources, settings, version),
    ]


def _planned_entries(settings: dra_settings.ComponentSettings) -> dict[tuple[str, str], str]:
    """(kind, name) -> value text of what the plan sets on one component."""
    planned = {(FEATURE_GATE, k): bool_text(v) for k, v in settings.feature_gates.items()}
    for entry in settings.runtime_config:
        key, _sep, value = entry.partition("=")
        planned[(RUNTIME_CONFIG, key)] = rc_value(value)
    return planned


def _sanitize_groups(
    sources: Mapping[str, FlagSet],
    version: dra_core.KubeVersion,
    component: str,
    planned_entries: Mapping[tuple[str, str], str],
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """What ``dra.sanitize`` objects to in each source, grouped by (finding id,
    kind, name): ``{"values": {source: value}, "reason", "fatal"}``. Advice to drop an
    entry the plan itself sets is left out."""
    grouped: dict[tuple[str, str, str], dict[str, Any]] = {}
    for source, flags in sources.items():
        report = dra_sanitize.sanitize(
            dict(flags.feature_gates),
            flags.runtime_config_entries(),
            version,
            component=component,
        )
        for f in report.findings:
            if f.action == "keep":
                continue
            name, _sep, value = f.entry.partition("=")
            kind = FEATURE_GATE if f.kind == "feature-gate" else RUNTIME_CONFIG
            if f.fatal:
                fid = (
                    "gates.model-forbidden"
                    if kind == FEATURE_GATE
                    else ("gates.runtime-config-unserved")
                )
            else:
                if planned_entries.get((kind, name)) == rc_value(value):
                    continue
                fid = "gates.model-advice"
            item = grouped.setdefault(
                (fid, kind, name), {"values": {}, "reason": f.reason, "fatal": f.fatal}
            )
            item["values"][source] = rc_value(value)
    return grouped


def _sanitize_fix(
    fid: str,
    kind: str,
    name: str,
    host: str | None,
    component: str,
    version: dra_core.KubeVersion,
    where: str,
) -> str:
    """The fix of a sanitize finding: remove before the start at ``version`` (fatal) or
    when convenient (advice)."""
    if fid == "gates.model-forbidden":
        return (
            f"remove {name} from {flag_name(kind)} of {component} everywhere it is set "
            f"({where}"
            + ("" if host is None else f"; and {configmap_for(component)}")
            + f") before {component} {version} starts: gpufleet gates apply removes it"
        )
    if fid == "gates.runtime-config-unserved":
        return (
            f"remove {name} from --runtime-config of kube-apiserver ({where}"
            + ("" if host is None else f"; and {KUBEADM_CONFIGMAP}")
            + ") before kube-apiserver "
            + f"{version} starts: gpufleet gates apply removes it"
        )
    return (
        f"remove {name} from {flag_name(kind)} of {component} ({where}) when "
        "convenient: gpufleet gates apply does so"
    )


def _sanitize_findings(
    grouped: Mapping[tuple[str, str, str], Mapping[str, Any]],
    host: str | None,
    component: str,
    version: dra_core.KubeVersion,
    where: str,
) -> list[Finding]:
    """``gates.model-forbidden``, ``gates.runtime-config-unserved`` and
    ``gates.model-advice``, one per grouped entry."""
    out = []
    for (fid, kind, name), item in sorted(grouped.items()):
        sev = FAIL if item["fatal"] else WARN
        out.append(
            Finding(
                fid,
                sev,
                host,
                component,
                kind,
                name,
                {**item["values"], MODEL: None},
                f"{component}: {name}={next(iter(item['values'].values()))} at Kubernetes "
                f"{version}: {item['reason']}",
                _sanitize_fix(fid, kind, name, host, component, version, where),
            )
        )
    return out


def _mismatch_findings(
    host: str | None,
    component: str,
    sources: Mapping[str, FlagSet],
    plan: dra_settings.ComponentPlan,
    version: dra_core.KubeVersion,
    forbidden_names: set[tuple[str, str]],
) -> list[Finding]:
    """``gates.model-mismatch``: wishes a source sets to the other value."""
    out = []
    for name, wish in sorted(plan.wishes.items()):
        if name not in dra_gates.GATES or component not in dra_gates.GATES[name].components:
            continue
        if (FEATURE_GATE, name) in forbidden_names:
            continue
        wrong = {
            s: bool_text(f.feature_gates[name])
            for s, f in sources.items()
            if name in f.feature_gates and f.feature_gates[name] != wish
        }
        if not wrong:
            continue
        out.append(
            Finding(
                "gates.model-mismatch",
                FAIL,
                host,
                component,
                FEATURE_GATE,
                name,
                {**wrong, MODEL: bool_text(wish)},
                f"{component} has {name}={next(iter(wrong.values()))} ({', '.join(sorted(wrong))})"
                f"; the version model plans {name}={bool_text(wish)} at {version} for the "
                "features asked for",
                f"set {name}={bool_text(wish)} on {component} (gpufleet gates apply), or stop "
                "asking for the feature that needs it",
            )
        )
    return out


def _missing_gate_findings(
    host: str | None,
    component: str,
    sources: Mapping[str, FlagSet],
    settings: dra_settings.ComponentSettings,
    version: dra_core.KubeVersion,
    metric: Mapping[str, FeatureReading],
    extra_values: Mapping[str, FlagSet | None],
    where: str,
) -> list[Finding]:
    """``gates.model-missing``: planned gates absent from every source."""
    out = []
    for name, value in sorted(settings.feature_gates.items()):
        if any(name in f.feature_gates for f in sources.values()):
            continue
        reading = metric.get(name)
        default = default_value(FEATURE_GATE, name, version, reading)
        values: dict[str, str | None] = dict.fromkeys(sources)
        for label, extra in extra_values.items():
            values[label] = (
                bool_text(extra.feature_gates[name])
                if extra is not None and name in extra.feature_gates
                else None
            )
        if reading is not None:
            values[METRIC] = bool_text(reading.enabled)
        values[MODEL] = bool_text(value)
        in_force = "in force" if reading is not None else "the default"
        out.append(
            Finding(
                "gates.model-missing",
                WARN if default == bool_text(value) else FAIL,
                host,
                component,
                FEATURE_GATE,
                name,
                values,
                f"the version model plans {name}={bool_text(value)} on {component} at {version}"
                f", but {where} does not set it ({in_force}: {default or 'unknown'})",
                f"set {name}={bool_text(value)} on {component}: gpufleet gates apply writes it "
                "to the manifests, the kubelet configuration and the kubeadm ConfigMaps",
            )
        )
    return out


def _missing_runtime_config_findings(
    host: str | None,
    component: str,
    sources: Mapping[str, FlagSet],
    settings: dra_settings.ComponentSettings,
    version: dra_core.KubeVersion,
) -> list[Finding]:
    """``gates.runtime-config-missing``: planned runtime-config (kube-apiserver) that a
    source does not enable."""
    out = []
    for entry in settings.runtime_config:
        key, _sep, raw = entry.partition("=")
        value = rc_value(raw)
        have = {s: f.runtime_config.get(key) for s, f in sources.items()}
        if all(v == value for v in have.values()):
            continue
        default = default_value(RUNTIME_CONFIG, key, version)
        absent_everywhere = all(v is None for v in have.values())
        have_text = ", ".join(
            f"{s} has {entry_text(RUNTIME_CONFIG, key, v)}" for s, v in have.items()
        )
        out.append(
            Finding(
                "gates.runtime-config-missing",
                WARN if absent_everywhere and default == value else FAIL,
                host,
                component,
                RUNTIME_CONFIG,
                key,
                {**have, MODEL: value},
                f"the version model plans --runtime-config {key}={value} on {component} at "
                f"{version} (DRA objects of that version are off by default), but " + have_text,
                f"add {key}={value} to --runtime-config of kube-apiserver: gpufleet gates apply "
                f"writes it to the manifest and to {KUBEADM_CONFIGMAP}",
            )
        )
    return out
