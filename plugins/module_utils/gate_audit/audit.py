# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA gate audit: what every source says about feature gates and runtime-config, and
where the sources disagree with each other or with the DRA version model.

Sources, per host and component (kube-apiserver, kube-controller-manager, kube-scheduler,
kubelet):

* ``process``: the running process's command line (``/proc/<pid>/cmdline``). For the
  kubelet, the ``featureGates`` of the KubeletConfiguration its ``--config`` names (then the
  ``--config-dir`` drop-ins) with ``--feature-gates`` applied on top: flags win, gates only
  in the file are kept (``kubeletConfigFlagPrecedence`` in ``cmd/kubelet/app/server.go``).
* ``file``: the static pod manifest's container ``command``
  (``/etc/kubernetes/manifests/<component>.yaml``) or the kubelet configuration file: what
  the component runs with after its next start.
* ``configmap``: ``kube-system/kubeadm-config`` (``ClusterConfiguration``
  ``apiServer``/``controllerManager``/``scheduler`` ``extraArgs``, a map in
  ``kubeadm.k8s.io/v1beta3``, a list of ``{name, value}`` in ``v1beta4``) and
  ``kube-system/kubelet-config`` (key ``kubelet``): what ``kubeadm upgrade`` regenerates the
  files from. Cluster-wide: a ConfigMap finding has no host.
* ``metric``: ``kubernetes_feature_enabled{name="...",stage="..."}`` (1 or 0) of the
  component's ``/metrics`` (``staging/src/k8s.io/component-base/metrics/prometheus/feature/
  metrics.go``): the value actually in force, defaults included.

``audit`` compares them and returns findings with a stable ``id``:

=================================  ========  ==============================================
id                                 severity  meaning
=================================  ========  ==============================================
``gates.process-file-drift``       fail/warn running process and file on the same host differ
``gates.kubelet-flag-override``    warn      a kubelet ``--feature-gates`` flag overrides
                                             (or adds to) its configuration file
``gates.restart-pending``          warn      the kubelet configuration changed after the
                                             kubelet started
``gates.metric-drift``             fail      ``/metrics`` says another value than the flags
``gates.metric-stage``             warn      the running binary's gate stages or defaults
                                             are not those of the target version
``gates.configmap-drift``          fail/warn file and kubeadm ConfigMap differ (an upgrade
                                             would drop or change the entry)
``gates.node-drift``               fail/warn one component differs between hosts
``gates.model-missing``            fail/warn an entry the version model plans is absent
``gates.model-mismatch``           fail      an entry has the value the model does not want
``gates.model-forbidden``          fail      a gate that stops the component at the target
                                             version (removed, unknown, locked, dependency)
``gates.model-advice``             warn      an entry that works but should go (GA/locked)
``gates.runtime-config-unserved``  fail      ``--runtime-config`` names a ``resource.k8s.io``
                                             version the target does not serve
``gates.runtime-config-missing``   fail/warn a ``resource.k8s.io`` version the plan needs is
                                             not enabled
``gates.process-absent``           fail      a manifest/configuration exists, the process
                                             does not run
``gates.facts-missing``            fail      a host of the inventory could not be read
``gates.component-not-found``      warn      a component runs on no host and has no file
``gates.configmap-absent``         warn      a kubeadm ConfigMap does not exist
``gates.source-unreadable``        warn      a source could not be read or parsed
=================================  ========  ==============================================

``fail/warn``: fail when the value in force differs (an absent entry means the gate's
default at the target version, from the version model or from ``/metrics``); warn when
only the spelling differs (one side sets the default explicitly, the other leaves it out).

Pure: no I/O but ``read_configmap_facts`` (through the ``Kube`` it is given). The audit
in parts, one job each: ``gate_audit.terms`` (components, kinds, sources, severities,
``GateAuditError``), ``gate_audit.facts`` (the node-side records and readers:
``argv_flags``, ``kubelet_process_flags``, ``metrics_url``),
``gate_audit.metrics`` (``/metrics``: ``parse_prometheus_text``, ``feature_readings``),
``gate_audit.checks`` (sources compared with each other), ``gate_audit.model_checks``
(sources judged against the version model) and ``gate_audit.report`` (``Finding``,
``AuditResult``, ``format_table``). The node-side parts are used by the module
``dra_gate_audit_facts`` on each node (standard library and PyYAML only), ``audit`` and
``read_configmap_facts`` by the module ``dra_gate_audit`` on the control host. Every record
has ``to_dict`` (JSON types only) and ``from_dict``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.checks import (
    configmap_flags,
    host_checks,
    node_drift,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.facts import (
    ConfigMapFacts,
    FlagSet,
    HostFacts,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.model_checks import (
    model_checks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.report import (
    AuditResult,
    Finding,
    build_summary,
    dedupe,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.terms import (
    COMPONENTS,
    CONFIGMAP,
    FAIL,
    KUBEADM_CONFIGMAP,
    KUBELET,
    KUBELET_CONFIGMAP,
    WARN,
    GateAuditError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import configmaps as kcm

# ConfigMapFacts, HostFacts (gate_facts) and GateAuditError (gate_terms) are named here too:
# the audit's inputs and error, for the callers that import them with ``audit``.

__all__ = [
    "ConfigMapFacts",
    "GateAuditError",
    "HostFacts",
    "audit",
]


# ------------------------------------------------------------------ audit


def _missing_facts(hosts: Mapping[str, HostFacts], expected_hosts: Iterable[str]) -> list[Finding]:
    """``gates.facts-missing``: no host read at all, or an expected host without facts."""
    findings: list[Finding] = []
    if not hosts and not set(expected_hosts):
        findings.append(
            Finding(
                "gates.facts-missing",
                FAIL,
                None,
                None,
                None,
                None,
                {},
                "no host was read, so nothing was audited: the inventory has no host in the "
                "groups kube_control_plane and kube_node, or none gave facts",
                "put the cluster's nodes into the inventory groups kube_control_plane and "
                "kube_node and run the audit again",
            )
        )
    for host in sorted(set(expected_hosts) - set(hosts)):
        findings.append(
            Finding(
                "gates.facts-missing",
                FAIL,
                host,
                None,
                None,
                None,
                {},
                f"no facts from {host}: it was unreachable or the facts task failed there, so "
                "its components are not audited",
                f"make {host} reachable (the run's recap names the error) and run the audit "
                "again, or remove it from the inventory",
            )
        )
    return findings


def _components_not_found(
    hosts: Mapping[str, HostFacts], components: Sequence[str]
) -> list[Finding]:
    """``gates.component-not-found``: a component that runs on none of the hosts read and
    has its manifest or configuration file on none."""
    findings: list[Finding] = []
    for c in components:
        seen = any(
            c in hf.components
            and (hf.components[c].running or hf.components[c].file_flags is not None)
            for hf in hosts.values()
        )
        if hosts and not seen:
            findings.append(
                Finding(
                    "gates.component-not-found",
                    WARN,
                    None,
                    c,
                    None,
                    None,
                    {},
                    f"{c} runs on none of the {len(hosts)} hosts read and none has its "
                    "manifest or configuration file: nothing was audited for it",
                    "check the inventory groups (kube_control_plane, kube_node), "
                    "dra_gate_audit_manifest_dir and dra_gate_audit_kubelet_config",
                )
            )
    return findings


def audit(
    hosts: Mapping[str, HostFacts],
    version: dra_core.VersionLike,
    features: Iterable[str] = (),
    gates: Mapping[str, Any] | None = None,
    configmaps: ConfigMapFacts | None = None,
    expected_hosts: Iterable[str] = (),
    components: Sequence[str] = COMPONENTS,
) -> AuditResult:
    """Compare every source of every host with each other and with the version model.

    ``hosts``: inventory host -> HostFacts; ``version``: the Kubernetes version to judge
    against (what runs, or an upgrade target); ``features``/``gates``: what was asked of the
    version model (as for ``dra.plan_components``); ``configmaps``: the kubeadm
    ConfigMaps (None: not read, no ConfigMap comparison); ``expected_hosts``: hosts that must
    have facts (``gates.facts-missing`` otherwise); ``components``: the components audited.

    Returns an AuditResult whose ``summary`` is ``{"hosts": [...], "components": [...],
    "cells": {component: {host: {"state", "pid", "source", "feature_gates",
    "runtime_config", "metrics", "flagged", "fail", "warn"}}}, "configmaps": {component:
    flags} | None}``, ``state`` one of ``running``, ``not running``, ``absent``.

    Raises ``dra.VersionParseError`` for a malformed version, feature or gate
    value, ``dra.VersionModelError`` for a request the model refuses at
    ``version``, GateAuditError for an unknown component.
    """
    unknown = [c for c in components if c not in COMPONENTS]
    if unknown:
        raise GateAuditError(
            f"components={list(components)!r} names {', '.join(unknown)}; fix: use "
            f"{', '.join(COMPONENTS)}"
        )
    v = dra_core.parse_version(version if isinstance(version, str) else str(version), "version")
    gate_wishes = dict(gates or {})
    plan = dra_plan.plan_components(v, tuple(features), gate_wishes)
    findings: list[Finding] = []
    cm_flags: dict[str, FlagSet] = {}
    cm_name = KUBELET_CONFIGMAP
    if configmaps is not None:
        cm_flags, cm_findings = configmap_flags(configmaps)
        cm_name = configmaps.kubelet_name
        control_plane = any(c != KUBELET for c in components)
        findings += [
            f
            for f in cm_findings
            if (f.component == KUBELET and KUBELET in components)
            or (f.component != KUBELET and control_plane)
        ]
    findings += _missing_facts(hosts, expected_hosts)
    for host, hf in sorted(hosts.items()):
        for c in components:
            cf = hf.components.get(c)
            if cf is None:
                continue
            name = cm_name if c == KUBELET else KUBEADM_CONFIGMAP
            findings += host_checks(host, cf, plan, v, cm_flags.get(c), name)
    findings += node_drift(hosts, components, plan, v)
    for c in components:
        if c in cm_flags:
            findings += model_checks(None, c, {CONFIGMAP: cm_flags[c]}, plan, v, {}, {})
    findings += _components_not_found(hosts, components)
    findings = dedupe(findings)
    findings.sort(key=Finding.sort_key)
    return AuditResult(
        str(v),
        list(plan.features),
        {k: _as_bool(val) for k, val in gate_wishes.items()},
        findings,
        build_summary(hosts, components, findings, cm_flags if configmaps is not None else None),
        {
            c: {
                "feature_gates": dict(sorted(plan.components[c].feature_gates.items())),
                "runtime_config": sorted(plan.components[c].runtime_config),
            }
            for c in components
        },
    )


def read_configmap_facts(kube: Any, version: str) -> ConfigMapFacts:
    """The kubeadm ConfigMaps ``kubeadm.configmaps.read_kubeadm_configmaps`` finds through
    ``kube`` (a ``kube.client.Kube``) for a cluster at ``version``, as the audit's
    ``configmaps``. Raises KubeError. Here, on the control host, so that the node-side
    ``gate_audit.facts`` ships without the API client."""
    found = kcm.read_kubeadm_configmaps(kube, version)
    return ConfigMapFacts(
        found.cluster_configuration, found.kubelet_configuration, found.kubelet_ref
    )


def _as_bool(value: Any) -> bool:
    """A gate wish already accepted by ``plan_components`` (a bool or "true"/"false")."""
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"
