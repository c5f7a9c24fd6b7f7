# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Preflight rules on the Kubernetes side: removed and unknown variables, the release
(format, one per cluster, the provision range), feature gates and runtime-config per
release (the version model: ``dra.plan_components``, ``sanitize``), and
cgroup v1.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import sanitize as dra_sanitize
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.kubernetes_facts import (
    FAIL_CGROUP_V1_SINCE,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import (
    ERROR,
    WARNING,
    HostContext,
    as_bool,
    as_list,
    release_of,
    short,
    text_of,
    truth,
    vtext,
)


def _removed_entry(entry: Any) -> tuple[str, str]:
    if isinstance(entry, Mapping):
        return str(entry.get("new") or ""), str(entry.get("fix") or "")
    return str(entry or ""), ""


def rule_removed(ctx: HostContext, removed: Mapping[str, Any]) -> None:
    for old in sorted(set(ctx.user) & set(removed)):
        new, fix = _removed_entry(removed[old])
        if new:
            text = f"rename it to {new}" + (f" ({fix})" if fix else "")
            message = f"was removed; {new} replaces it and this value is ignored"
        else:
            text = fix or "remove it"
            message = "was removed and this value is ignored"
        ctx.add(pp.problem("removed-variable", ERROR, old, ctx.user[old], message, text))


#: Prefixes of role variables that the unknown-variable rule looks at.
ROLE_PREFIXES = (
    "nvidia_driver_",
    "nvidia_container_toolkit_",
    "kubeadm_",
    "dra_feature_gates_",
    "gpu_node_labels_",
    "dra_driver_",
    "mig_",
    "claim_templates_",
    "site_",
    "upgrade_",
    "validate_",
    "monitoring_",
    "gpufleet_",
)


def rule_unknown(ctx: HostContext, known: set[str], removed: Mapping[str, Any]) -> None:
    known = known | set(pp.role_defaults()) | set(pp.SITE_DEFAULTS)
    for name in sorted(ctx.user):
        if name in known or name in removed:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        if not close and not name.startswith(ROLE_PREFIXES):
            continue  # a variable of the site's own, not a misspelt role prefix
        fix = f"did you mean {close[0]}?" if close else "remove it, or check the role's spelling"
        ctx.add(
            pp.problem(
                "unknown-variable",
                WARNING,
                name,
                ctx.user[name],
                "has the prefix of a role variable but no role declares it; it has no effect",
                fix,
            )
        )


def rule_release(ctx: HostContext) -> None:
    found = [
        (n, text_of(ctx.settings, n)) for n in pp.RELEASE_VARIABLES if text_of(ctx.settings, n)
    ]
    bootstrap = as_bool(ctx.settings, "site_bootstrap")
    if bootstrap and not text_of(ctx.settings, "kubeadm_kubernetes_version"):
        ctx.add(
            pp.problem(
                "release-missing",
                ERROR,
                "kubeadm_kubernetes_version",
                ctx.settings.get("kubeadm_kubernetes_version"),
                "site_bootstrap=true bootstraps the cluster with kubeadm, which needs the "
                "release to install",
                "set the cluster's release once, gpufleet_kubernetes_version: "
                f'"{dra_core.example_release()}" (the kubeadm role takes it)',
            )
        )
    parsed = []
    for name, text in found:
        v = release_of(text)
        if v is None:
            ctx.add(
                pp.problem(
                    "release-format",
                    ERROR,
                    name,
                    text,
                    "is not a Kubernetes release",
                    f'write it as MAJOR.MINOR.PATCH, for example "{dra_core.example_release()}"',
                )
            )
            continue
        parsed.append((name, text, v))
    if not parsed:
        return
    first_name, first_text, first = parsed[0]
    for name, text, v in parsed[1:]:
        if v[:2] != first[:2] or (v[2] and first[2] and v != first):
            ctx.add(
                pp.problem(
                    "release-mismatch",
                    ERROR,
                    name,
                    text,
                    f"differs from {first_name}={first_text}; every role must plan for the "
                    "release the cluster runs",
                    f"set {name} to {first_text}, or leave it empty to read the apiserver's",
                )
            )
    ctx.release, ctx.release_var = first, first_name
    verdict = dra_skew.supported_for_provision(first_text)
    if not verdict.ok:
        ctx.add(
            pp.problem(
                "release-range",
                ERROR,
                first_name,
                first_text,
                verdict.reason,
                f"choose a release from 1.{dra_core.PROVISION_MIN_MINOR} "
                f"to 1.{dra_core.PROVISION_MAX_MINOR} "
                "(upgrade an older cluster first: gpufleet upgrades one minor at a time)",
            )
        )


def rule_gates(ctx: HostContext) -> None:
    if ctx.release is None or not dra_skew.supported_for_provision(vtext(ctx.release)).ok:
        return
    version = vtext(ctx.release)
    pairs = [("dra_feature_gates_features", "dra_feature_gates_extra")]
    if as_bool(ctx.settings, "site_bootstrap"):
        pairs.append(("kubeadm_dra_features", "kubeadm_dra_gates"))
    for feat_var, gate_var in pairs:
        features = as_list(ctx.settings.get(feat_var))
        gates = ctx.settings.get(gate_var) or {}
        if not isinstance(gates, Mapping):
            ctx.add(
                pp.problem(
                    "gates-shape",
                    ERROR,
                    gate_var,
                    gates,
                    "must map feature-gate names to booleans",
                    f"write e.g. {gate_var}: {{DRAPrioritizedList: true}}",
                )
            )
            continue
        try:
            dra_plan.plan_components(version, features, gates)
        except dra_core.VersionModelError as exc:
            variable = gate_var if gates else feat_var
            ctx.add(
                pp.problem(
                    "gates-release",
                    ERROR,
                    variable,
                    gates if gates else features,
                    f"cannot be applied on Kubernetes {version}: {exc}",
                    f"change {feat_var} / {gate_var} to what {version} accepts "
                    f"(gpufleet gates plan --to {version} lists it)",
                )
            )
    if as_bool(ctx.settings, "site_bootstrap"):
        for a, b in (
            ("kubeadm_dra_features", "dra_feature_gates_features"),
            ("kubeadm_dra_gates", "dra_feature_gates_extra"),
        ):
            va, vb = ctx.settings.get(a) or [], ctx.settings.get(b) or []
            if isinstance(va, Mapping) and isinstance(vb, Mapping):
                same = {k: truth(v) for k, v in va.items()} == {k: truth(v) for k, v in vb.items()}
            else:
                same = sorted(as_list(va)) == sorted(as_list(vb))
            if not same:
                ctx.add(
                    pp.problem(
                        "gates-differ",
                        WARNING,
                        a,
                        va,
                        f"differs from {b}={short(vb)}: kubeadm bootstraps with one set and "
                        "dra_feature_gates then rewrites every component with the other "
                        "(a restart of each)",
                        f"give {a} the same value as {b}",
                    )
                )


def rule_kubelet_extra_gates(ctx: HostContext) -> None:
    """``featureGates`` in ``kubeadm_kubelet_extra`` (merged into the KubeletConfiguration
    the kubeadm role writes) judged against the release's full gate table: a gate the
    release does not register, or only another component registers, or a locked gate at
    the other value stops the kubelet."""
    if ctx.release is None or not as_bool(ctx.settings, "site_bootstrap"):
        return
    extra = ctx.settings.get("kubeadm_kubelet_extra") or {}
    if not isinstance(extra, Mapping):
        return
    gates = extra.get("featureGates")
    if gates is None:
        return
    version = vtext(ctx.release)
    if not isinstance(gates, Mapping) or not all(isinstance(k, str) for k in gates):
        ctx.add(
            pp.problem(
                "gates-shape",
                ERROR,
                "kubeadm_kubelet_extra",
                gates,
                "featureGates must map feature-gate names to booleans",
                "write e.g. kubeadm_kubelet_extra: {featureGates: {DRAPrioritizedList: true}}",
            )
        )
        return
    try:
        report = dra_sanitize.sanitize(dict(gates), [], version, component=dra_core.KUBELET)
    except dra_core.VersionModelError as exc:
        ctx.add(
            pp.problem(
                "gates-shape", ERROR, "kubeadm_kubelet_extra", gates, str(exc), exc.fix or ""
            )
        )
        return
    for finding in report.must_remove:
        ctx.add(
            pp.problem(
                "gates-release",
                ERROR,
                "kubeadm_kubelet_extra",
                finding.entry,
                f"featureGates {finding.entry} stops the kubelet of {version}: {finding.reason}",
                f"remove {finding.entry.partition('=')[0]} from kubeadm_kubelet_extra.featureGates "
                f"(gpufleet gates plan --to {version} --json lists the gates {version} registers)",
            )
        )


def rule_cgroup_v1(ctx: HostContext) -> None:
    if ctx.release is None or not as_bool(ctx.settings, "kubeadm_allow_cgroup_v1"):
        return
    if ctx.release[:2] < (1, FAIL_CGROUP_V1_SINCE):
        ctx.add(
            pp.problem(
                "cgroup-v1-noop",
                WARNING,
                "kubeadm_allow_cgroup_v1",
                ctx.settings.get("kubeadm_allow_cgroup_v1"),
                f"has no effect on Kubernetes {vtext(ctx.release)}: "
                f"KubeletConfiguration.failCgroupV1 exists from 1.{FAIL_CGROUP_V1_SINCE} (older "
                "kubelets run on cgroup v1 without it)",
                "remove it for this release",
            )
        )
