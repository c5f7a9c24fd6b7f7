# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA gate audit's comparisons of sources with each other: per host (unreadable
sources, process against file, restart pending, ``/metrics`` against the flags, the file
against the kubeadm ConfigMap: ``host_checks``), between hosts (``node_drift``), and the
kubeadm ConfigMaps read as flag sets (``configmap_flags``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.facts import (
    ComponentFacts,
    ConfigMapFacts,
    FlagSet,
    HostFacts,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.model_checks import (
    default_value,
    entry_text,
    flag_name,
    model_actions,
    model_checks,
    plan_value,
    severity_of,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.report import (
    Finding,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.terms import (
    CLUSTER_SECTIONS,
    CONFIGMAP,
    FAIL,
    FEATURE_GATE,
    FEATURE_METRIC,
    FILE,
    KUBEADM_CONFIGMAP,
    KUBELET,
    METRIC,
    PROCESS,
    WARN,
    bool_text,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce


def _diff(a: FlagSet, b: FlagSet) -> list[tuple[str, str, str | None, str | None]]:
    ea, eb = a.entries(), b.entries()
    out = []
    for key in sorted(set(ea) | set(eb)):
        if ea.get(key) != eb.get(key):
            out.append((key[0], key[1], ea.get(key), eb.get(key)))
    return out


def _component_word(component: str) -> str:
    return component.removeprefix("kube-")


def _manifest_dir(path: str) -> str:
    return os.path.dirname(path) or "."


# ------------------------------------------------------------------ per host checks


def _source_errors(host: str, cf: ComponentFacts) -> list[Finding]:
    out = []
    problems = [(PROCESS, e) for e in cf.errors]
    if cf.file is not None and cf.file.error:
        problems.append((FILE, f"{cf.file.path}: {cf.file.error}"))
    if cf.metrics is not None and cf.metrics.error:
        problems.append((METRIC, f"{cf.metrics.url}: {cf.metrics.error}"))
    for source, text in problems:
        out.append(
            Finding(
                "gates.source-unreadable",
                WARN,
                host,
                cf.component,
                None,
                None,
                {source: None},
                f"the {source} source of {cf.component} could not be read: {text}",
                "fix the cause named in the message and run the audit again; until then "
                f"this host's {cf.component} is audited without its {source} source",
            )
        )
    return out


def _process_file_checks(
    host: str, cf: ComponentFacts, version: dra_core.KubeVersion
) -> list[Finding]:
    proc, file = cf.process, cf.file_flags
    if proc is None or file is None or cf.file is None:
        return []
    c = cf.component
    path = cf.file.path
    metric = cf.metrics.features if cf.metrics is not None and cf.metrics.read else {}
    out = []
    flag_override = c == KUBELET and path in cf.config_files
    for kind, name, pv, fv in _diff(proc, file):
        values = {PROCESS: pv, FILE: fv}
        if flag_override:
            out.append(
                Finding(
                    "gates.kubelet-flag-override",
                    WARN,
                    host,
                    c,
                    kind,
                    name,
                    values,
                    f"the kubelet's --feature-gates flag (or a --config-dir drop-in) gives "
                    f"{entry_text(kind, name, pv)}, {path} says {entry_text(kind, name, fv)}: "
                    "the flag "
                    "wins, and neither the file nor kube-system/kubelet-config shows it",
                    f"set {name}: {pv} in featureGates of {path} and of kube-system/kubelet-"
                    "config (gpufleet gates apply), then remove it from --feature-gates of the "
                    "kubelet (KUBELET_EXTRA_ARGS in /etc/default/kubelet or "
                    "/var/lib/kubelet/kubeadm-flags.env) and restart the kubelet",
                )
            )
            continue
        default = default_value(
            kind, name, version, metric.get(name) if kind == FEATURE_GATE else None
        )
        if c == KUBELET:
            message = (
                f"the running kubelet has {entry_text(kind, name, pv)}, its configuration file "
                f"{path} says {entry_text(kind, name, fv)}"
            )
            fix = (
                f"make {path} hold the wanted value (gpufleet gates apply) and restart the "
                "kubelet (systemctl restart kubelet); its --config names "
                f"{', '.join(cf.config_files) or 'another file'}"
            )
        else:
            message = (
                f"{c} runs with {flag_name(kind)} {entry_text(kind, name, pv)} but its static pod "
                f"manifest {path} says {entry_text(kind, name, fv)}: the kubelet has not recreated "
                "the pod since the manifest changed (often because the new one fails to start), "
                "or the process was started another way"
            )
            fix = (
                f"check the pod (crictl ps -a --name {c}; journalctl -u kubelet); to recreate "
                f"it, move {path} out of {_manifest_dir(path)} and back; if the manifest is the "
                "wrong side, correct it with gpufleet gates apply"
            )
        out.append(
            Finding(
                "gates.process-file-drift",
                severity_of(pv, fv, default),
                host,
                c,
                kind,
                name,
                values,
                message,
                fix,
            )
        )
    return out


def _restart_pending(host: str, cf: ComponentFacts) -> list[Finding]:
    if cf.component != KUBELET or cf.started_at is None or cf.file is None:
        return []
    if cf.file.mtime is None or cf.file.mtime <= cf.started_at + 1.0:
        return []
    if cf.file.path not in cf.config_files:
        return []
    return [
        Finding(
            "gates.restart-pending",
            WARN,
            host,
            KUBELET,
            None,
            None,
            {PROCESS: f"started {cf.started_at:.0f}", FILE: f"modified {cf.file.mtime:.0f}"},
            f"{cf.file.path} was modified after the kubelet started (seconds since the epoch: "
            f"{cf.file.mtime:.0f} > {cf.started_at:.0f}); the running kubelet may use other "
            "feature gates than the file shows",
            "restart the kubelet (systemctl restart kubelet) and run the audit again; with "
            "metrics enabled the audit reads the gates in force from /metrics",
        )
    ]


def _metric_checks(host: str, cf: ComponentFacts, version: dra_core.KubeVersion) -> list[Finding]:
    if cf.metrics is None or not cf.metrics.read or cf.process is None:
        return []
    c = cf.component
    features = cf.metrics.features
    out = []
    for name, value in sorted(cf.process.feature_gates.items()):
        reading = features.get(name)
        if reading is None or reading.enabled == value:
            continue
        out.append(
            Finding(
                "gates.metric-drift",
                FAIL,
                host,
                c,
                FEATURE_GATE,
                name,
                {PROCESS: bool_text(value), METRIC: bool_text(reading.enabled)},
                f'{c} reports {FEATURE_METRIC}{{name="{name}"}} {int(reading.enabled)} on '
                f"{cf.metrics.url}, but its "
                + ("configuration and flags say" if c == KUBELET else "command line says")
                + f" {name}={bool_text(value)}: the running process uses another value",
                "restart the component so that it reads its configuration again"
                + (" (systemctl restart kubelet)" if c == KUBELET else "")
                + ", then run the audit again",
            )
        )
    stages = {}
    for name, reading in sorted(features.items()):
        if name not in dra_gates.GATES:
            continue
        st = dra_gates.gate_state(name, version)
        if not st.known:
            stages[name] = f"{reading.model_stage} (model: {st.describe()})"
        elif reading.model_stage != st.stage:
            stages[name] = f"{reading.model_stage} (model: {st.stage})"
        elif name not in cf.process.feature_gates and reading.enabled != st.default:
            stages[name] = "{} by default (model: {})".format(
                "on" if reading.enabled else "off", st.describe()
            )
    if stages:
        out.append(
            Finding(
                "gates.metric-stage",
                WARN,
                host,
                c,
                None,
                None,
                dict(stages),
                f"{c} reports gate stages or defaults that Kubernetes {version.minor_version} "
                "does not have "
                f"({', '.join(f'{k}: {v}' for k, v in sorted(stages.items())[:5])}"
                + (", ..." if len(stages) > 5 else "")
                + "): it runs another release than the audit's target version",
                f"run the audit with the version this {c} runs, or upgrade it to {version}",
            )
        )
    return out


def _configmap_checks(
    host: str,
    cf: ComponentFacts,
    cm: FlagSet | None,
    plan: dra_settings.ComponentPlan,
    version: dra_core.KubeVersion,
    cm_name: str,
) -> list[Finding]:
    if cm is None:
        return []
    c = cf.component
    if cf.file_flags is not None and cf.file is not None:
        base, source, where = cf.file_flags, FILE, cf.file.path
    elif cf.running and cf.process is not None:
        base, source, where = cf.process, PROCESS, f"the running {c}"
    else:
        return []
    metric = cf.metrics.features if cf.metrics is not None and cf.metrics.read else {}
    out = []
    if c == KUBELET:
        base = FlagSet(base.feature_gates, {})
        regenerate = "kubeadm upgrade node phase kubelet-config (then systemctl restart kubelet)"
        cm_place = f"featureGates of {cm_name} (key kubelet)"
        dropped_by = f"kubeadm upgrade rewrites /var/lib/kubelet/config.yaml from {cm_name}"
    else:
        part = _component_word(c)
        regenerate = (
            f"kubeadm init phase control-plane {part} --config <file matching {KUBEADM_CONFIGMAP}>"
        )
        cm_place = f"ClusterConfiguration.{CLUSTER_SECTIONS[c]}.extraArgs of {KUBEADM_CONFIGMAP}"
        dropped_by = (
            f"kubeadm upgrade regenerates the static pod manifests from {KUBEADM_CONFIGMAP}"
        )
    judged = {
        **model_actions(base, version, c),
        **model_actions(cm, version, c),
    }
    for key in list(judged):
        if judged[key] == "advise-remove" and plan_value(plan, c, *key) is not None:
            del judged[key]  # the plan wants it: not advice to drop
    for kind, name, bv, cv in _diff(base, cm):
        default = default_value(
            kind, name, version, metric.get(name) if kind == FEATURE_GATE else None
        )
        action = judged.get((kind, name))
        if bv is not None and cv != bv:
            message = (
                f"{where} has {entry_text(kind, name, bv)} but {cm_place} has "
                f"{entry_text(kind, name, cv)}: {dropped_by}, so the next upgrade "
                + ("drops it" if cv is None else f"changes it to {cv}")
            )
            if action == "remove":
                fix = (
                    f"remove {name} from {where} and do not copy it into the ConfigMap: the "
                    f"version model forbids it at {version} (see gates.model-forbidden)"
                )
            elif action == "advise-remove":
                fix = (
                    f"remove {name} from {where}: it has no use at {version} (see "
                    "gates.model-advice); letting the upgrade drop it is also fine"
                )
            else:
                fix = (
                    f"put {name}={bv} into {cm_place} (gpufleet gates apply writes the ConfigMap "
                    "and the files together), or remove it from the file if it is not wanted"
                )
        else:
            message = (
                f"{cm_place} has {entry_text(kind, name, cv)} but {where} has "
                f"{entry_text(kind, name, bv)}: the file is behind the ConfigMap, and the next "
                "kubeadm upgrade changes the component"
            )
            if action in ("remove", "advise-remove"):
                fix = (
                    f"remove {name} from {cm_place} instead of copying it into the file: the "
                    f"version model {'forbids' if action == 'remove' else 'advises against'} it "
                    f"at {version}"
                )
            else:
                fix = f"regenerate it: {regenerate}; or run gpufleet gates apply"
        out.append(
            Finding(
                "gates.configmap-drift",
                severity_of(bv, cv, default),
                host,
                c,
                kind,
                name,
                {source: bv, CONFIGMAP: cv},
                message,
                fix,
            )
        )
    return out


def host_checks(
    host: str,
    cf: ComponentFacts,
    plan: dra_settings.ComponentPlan,
    version: dra_core.KubeVersion,
    cm: FlagSet | None,
    cm_name: str,
) -> list[Finding]:
    out = _source_errors(host, cf)
    has_file = cf.file_flags is not None
    if not cf.running and not has_file:
        return out
    c = cf.component
    if not cf.running and cf.file is not None:
        out.append(
            Finding(
                "gates.process-absent",
                FAIL,
                host,
                c,
                None,
                None,
                {PROCESS: None, FILE: cf.file.path},
                f"{cf.file.path} exists but no {c} process runs on {host}: a gate or "
                "runtime-config entry the binary refuses ('unrecognized feature gate', 'cannot "
                "set feature gate ... locked', 'group version ... that has not been registered') "
                "stops it at start-up",
                (
                    "read the kubelet's log (journalctl -u kubelet)"
                    if c == KUBELET
                    else f"read the container log (crictl ps -a --name {c}; crictl logs <id>)"
                )
                + ", fix the entry it names (see the model findings of this host), and start it",
            )
        )
    out += _process_file_checks(host, cf, version)
    out += _restart_pending(host, cf)
    out += _metric_checks(host, cf, version)
    out += _configmap_checks(host, cf, cm, plan, version, cm_name)
    sources: dict[str, FlagSet] = {}
    if cf.running and cf.process is not None:
        sources[PROCESS] = cf.process
    if has_file and cf.file_flags is not None:
        sources[FILE] = cf.file_flags
    metric = cf.metrics.features if cf.metrics is not None and cf.metrics.read else {}
    labels = {FILE: f"{FILE} {cf.file.path}"} if has_file and cf.file is not None else {}
    out += model_checks(host, c, sources, plan, version, metric, {CONFIGMAP: cm}, labels)
    return out


def node_drift(
    hosts: Mapping[str, HostFacts],
    components: Sequence[str],
    plan: dra_settings.ComponentPlan,
    version: dra_core.KubeVersion,
) -> list[Finding]:
    out = []
    for c in components:
        running = {
            h: hf.components[c].process
            for h, hf in sorted(hosts.items())
            if c in hf.components
            and hf.components[c].running
            and hf.components[c].process is not None
        }
        if len(running) < 2:
            continue
        entries = {h: fs.entries() for h, fs in running.items() if fs is not None}
        keys = sorted({k for e in entries.values() for k in e})
        for kind, name in keys:
            vals = {h: e.get((kind, name)) for h, e in entries.items()}
            if len(set(vals.values())) == 1:
                continue
            default = default_value(kind, name, version)
            wanted = plan_value(plan, c, kind, name)
            counts = Counter(vals.values())
            if wanted is not None and wanted in counts:
                reference = wanted
            else:
                reference = sorted(counts, key=lambda x: (-counts[x], str(x)))[0]
            same = counts[reference]
            for h, val in vals.items():
                if val == reference:
                    continue
                out.append(
                    Finding(
                        "gates.node-drift",
                        severity_of(val, reference, default),
                        h,
                        c,
                        kind,
                        name,
                        {"this host": val, "reference": reference},
                        f"{c} on {h} runs with {entry_text(kind, name, val)}; {same} of "
                        f"{len(vals)} hosts run {entry_text(kind, name, reference)}"
                        + (
                            " (the version model's value)"
                            if wanted is not None and reference == wanted
                            else ""
                        ),
                        f"give {c} the same {flag_name(kind)} on every host: gpufleet gates "
                        "apply -i INVENTORY",
                    )
                )
    return out


def configmap_flags(
    facts: ConfigMapFacts,
) -> tuple[dict[str, FlagSet], list[Finding]]:
    """Per component the flags the kubeadm ConfigMaps hold, and the findings about the
    ConfigMaps themselves (absent, unparseable)."""
    flags: dict[str, FlagSet] = {}
    out: list[Finding] = []
    if facts.cluster_configuration is None:
        out.append(_cm_absent(KUBEADM_CONFIGMAP, "ClusterConfiguration"))
    else:
        try:
            for comp, cf in kce.cluster_configuration_flags(facts.cluster_configuration).items():
                flags[comp] = FlagSet.from_component_flags(cf)
        except kfl.ConfigEditError as err:
            out.append(_cm_unreadable(KUBEADM_CONFIGMAP, str(err)))
    if facts.kubelet is None:
        out.append(_cm_absent(facts.kubelet_name, "kubelet"))
    else:
        try:
            flags[KUBELET] = FlagSet(kcfg.kubelet_feature_gates(facts.kubelet), {})
        except kfl.ConfigEditError as err:
            out.append(_cm_unreadable(facts.kubelet_name, str(err), KUBELET))
    return flags, out


def _cm_absent(name: str, key: str) -> Finding:
    return Finding(
        "gates.configmap-absent",
        WARN,
        None,
        KUBELET if "kubelet" in name else None,
        None,
        None,
        {CONFIGMAP: None},
        f"ConfigMap {name} (key {key}) does not exist: not a kubeadm cluster, or kubeadm did "
        "not upload its configuration; the ConfigMap comparisons are skipped",
        "on a kubeadm cluster: kubeadm init phase upload-config all --config <file>; "
        "otherwise run the audit with configmaps disabled (dra_gate_audit_configmaps=false)",
    )


def _cm_unreadable(name: str, error: str, component: str | None = None) -> Finding:
    return Finding(
        "gates.source-unreadable",
        WARN,
        None,
        component,
        None,
        None,
        {CONFIGMAP: None},
        f"ConfigMap {name} could not be parsed: {error}",
        "fix the ConfigMap (kubectl -n kube-system edit configmap ...) as the message says",
    )
