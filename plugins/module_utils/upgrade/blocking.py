# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What stops an upgrade step before any host is touched: every feature gate and
runtime-config entry that the cluster carries, that the step's target release refuses to
start with, and that the upgrade does not change itself.

The upgrade manages (removes or rewrites itself) the DRA gates and their dependencies
(``dra.GATES``: ``plan_transition`` and the sanitize step drop e.g.
``DynamicResourceAllocation`` when 1.38 removes it) and the runtime-config entries that
``dra.plan_transition`` drops or its target plan removes (the
``resource.k8s.io`` versions the target does not serve). Any other entry that
``dra.sanitize`` judges fatal at the target (a gate the release does not
register, a locked gate at the other value, a gate only another component registers, a
group/version of another API group it does not register) would stop the component when
the upgrade restarts it: the plan is blocked until someone removes it. A ``Blocking``
item names where the entry is, why the target refuses it and the fix.

Sources judged, per step and against the step's target release:

* ``configmap``: ``kube-system/kubeadm-config`` (``ClusterConfiguration``
  ``apiServer``/``controllerManager``/``scheduler`` ``extraArgs``; kubeadm regenerates the
  static pod manifests from it) and ``kube-system/kubelet-config`` (``kubeadm upgrade
  node`` writes every kubelet's configuration file from it): the sanitize reports of
  ``upgrade_plan.build_plan``.
* ``file``: per host and component, the static pod manifest or the kubelet configuration
  file (the one its ``--config`` names), as module ``dra_gate_audit_facts`` read it.
* ``process``: per host and component, what the running process runs with, for the
  entries its file does not explain (a kubelet ``--feature-gates`` flag, a
  ``--config-dir`` drop-in, a control-plane process started from another file).

Pure: no I/O. Facts are the ``facts`` that ``dra_gate_audit_facts`` returns
(``gate_audit.facts.HostFacts.to_dict``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import sanitize as dra_sanitize
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    transition as dra_transition,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import terms as gt

__all__ = [
    "CONFIGMAP",
    "FILE",
    "PROCESS",
    "Blocking",
    "configmap_blocking",
    "host_blocking",
    "managed",
    "parse_host_facts",
    "unread_warnings",
    "with_fixes",
]

CONFIGMAP = "configmap"
FILE = "file"
PROCESS = "process"
FEATURE_GATE = "feature-gate"
RUNTIME_CONFIG = "runtime-config"

KUBEADM_CONFIGMAP = gt.KUBEADM_CONFIGMAP
KUBELET_CONFIGMAP = gt.KUBELET_CONFIGMAP
_SECTIONS = {
    dra_core.APISERVER: "apiServer",
    dra_core.CONTROLLER_MANAGER: "controllerManager",
    dra_core.SCHEDULER: "scheduler",
}
#: Where a kubelet flag is set on a kubeadm node (kubeadm writes kubeadm-flags.env; the
#: kubelet unit of the Debian/RPM packages reads KUBELET_EXTRA_ARGS from the other).
KUBELET_FLAG_FILES = (
    "KUBELET_EXTRA_ARGS in /etc/default/kubelet or /var/lib/kubelet/kubeadm-flags.env"
)
#: Other places of the same entry named in one fix, at most.
_OTHERS_NAMED = 3


@dataclass(frozen=True)
class Blocking:
    """One entry that stops the upgrade to ``version``.

    ``source``: ``configmap``, ``file`` or ``process``; ``host`` (None for a ConfigMap);
    ``file``: the path (a ``file`` item, or the drop-in of a kubelet ``process`` item);
    ``configmap``: ``kube-system/kubeadm-config`` or ``kube-system/kubelet-config``;
    ``origin``: where a ``process`` item comes from, in words; ``component``; ``kind``:
    ``feature-gate`` or ``runtime-config``; ``entry`` as found (``CSIMigration=true``);
    ``reason``: ``dra.sanitize``'s, naming the release; ``fix``: what to do
    (``with_fixes`` fills it).
    """

    version: str
    source: str
    component: str
    kind: str
    entry: str
    reason: str
    host: str | None = None
    file: str | None = None
    configmap: str | None = None
    origin: str = ""
    fix: str = ""

    @property
    def name(self) -> str:
        """The gate or the runtime-config key (``resource.k8s.io/v1beta1``)."""
        return self.entry.split("=", 1)[0]

    @property
    def where(self) -> str:
        """The file, the ConfigMap or the process, in words (no host)."""
        if self.source == CONFIGMAP:
            return str(self.configmap)
        if self.source == FILE:
            return str(self.file)
        return self.origin

    def key(self) -> tuple:
        """Identity across steps: the same entry at the same place."""
        return (self.source, self.host, self.where, self.component, self.kind, self.name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "source": self.source,
            "host": self.host,
            "file": self.file,
            "configmap": self.configmap,
            "where": self.where,
            "component": self.component,
            "kind": self.kind,
            "gate": self.name if self.kind == FEATURE_GATE else None,
            "name": self.name,
            "entry": self.entry,
            "reason": self.reason,
            "fix": self.fix,
        }


def managed(kind: str, entry: str, transition: dra_transition.TransitionPlan) -> bool:
    """True when the upgrade changes the entry itself: a DRA gate or a dependency of one
    (``dra.GATES``), or a runtime-config entry that ``transition`` drops or whose
    removal its target plan includes (``runtime_config_absent`` of kube-apiserver: the
    ``resource.k8s.io`` versions the target does not serve, which the upgrade role removes
    from kubeadm-config and the manifests as ``absent_runtime_config``)."""
    name = entry.split("=", 1)[0]
    if kind == FEATURE_GATE:
        return name in dra_gates.GATES
    dropped = {
        c.entry.split("=", 1)[0] for c in transition.runtime_config_changes if c.action == "drop"
    }
    return (
        name in dropped
        or name in transition.target.components[dra_core.APISERVER].runtime_config_absent
    )


def _unmanaged(
    findings: Iterable[Mapping[str, Any]], transition: dra_transition.TransitionPlan
) -> list[Mapping[str, Any]]:
    return [
        f
        for f in findings
        if f.get("fatal") and not managed(str(f["kind"]), str(f["entry"]), transition)
    ]


def configmap_blocking(
    reports: Mapping[str, Mapping[str, Any]],
    version: dra_core.KubeVersion | str,
    transition: dra_transition.TransitionPlan,
) -> list[Blocking]:
    """Blocking items of the kubeadm ConfigMaps. ``reports``: component -> the sanitize
    report of ``upgrade_plan`` (``{"remove": [Finding.to_dict()], ...}``) of what the
    ConfigMaps hold, judged at ``version``."""
    out = []
    for c in dra_core.COMPONENTS:
        cm = KUBELET_CONFIGMAP if c == dra_core.KUBELET else KUBEADM_CONFIGMAP
        for f in _unmanaged((reports.get(c) or {}).get("remove") or [], transition):
            kind, entry, reason = str(f["kind"]), str(f["entry"]), str(f["reason"])
            out.append(Blocking(str(version), CONFIGMAP, c, kind, entry, reason, configmap=cm))
    return out


def parse_host_facts(
    host_facts: Mapping[str, Any] | None, hosts: Iterable[str]
) -> dict[str, gf.HostFacts | None]:
    """Host -> HostFacts, in the order of ``hosts`` and only for them, from host -> the
    ``facts`` of ``dra_gate_audit_facts`` (a dict, a HostFacts, or None when the host could
    not be read). Raises ``dra.VersionModelError`` naming the host and the bad
    field."""
    given = dict(host_facts or {})
    out: dict[str, gf.HostFacts | None] = {}
    for host in hosts:
        if host not in given:
            continue
        data = given[host]
        if data is None or isinstance(data, gf.HostFacts):
            out[str(host)] = data
            continue
        try:
            out[str(host)] = gf.HostFacts.from_dict(data, str(host))
        except gt.GateAuditError as exc:
            raise dra_core.VersionModelError(
                f"the gate facts of host {host!r} cannot be used: {exc}",
                "read them again (gpufleet upgrade --save-snapshot, or the module "
                "gpufleet.cluster.dra_gate_audit_facts of this collection version).",
            ) from None
    return out


def unread_warnings(facts: Mapping[str, gf.HostFacts | None]) -> list[str]:
    """A warning per host whose facts could not be read (None)."""
    return [
        f"{h}: the feature gates of its components could not be read (module "
        "dra_gate_audit_facts did not answer): its files and processes are not judged"
        for h, f in facts.items()
        if f is None
    ]


def _fatal(
    flags: gf.FlagSet, version: dra_core.KubeVersion | str, component: str
) -> list[dra_sanitize.Finding]:
    report = dra_sanitize.sanitize(
        dict(flags.feature_gates), flags.runtime_config_entries(), version, component=component
    )
    return report.must_remove


def _process_origin(cf: gf.ComponentFacts, kind: str, name: str) -> tuple[str, str | None]:
    """(origin in words, drop-in file or None) of an entry of the running process that
    its file does not explain."""
    c = cf.component
    if c != dra_core.KUBELET:
        pid = f" (pid {cf.pid})" if cf.pid is not None else ""
        return f"the running {c}{pid}", None
    try:
        flags = gf.argv_flags(cf.argv, "kubelet command line")
    except ValueError:
        flags = gf.FlagSet()
    if kind == FEATURE_GATE and name in flags.feature_gates:
        return "the kubelet's --feature-gates flag", None
    main = cf.file.path if cf.file is not None else None
    drop_ins = [p for p in cf.config_files if p != main]
    if len(drop_ins) == 1:
        return f"the kubelet drop-in {drop_ins[0]}", drop_ins[0]
    if drop_ins:
        return f"a kubelet drop-in ({', '.join(drop_ins)})", None
    files = ", ".join(cf.config_files) or "its --config"
    return f"the running kubelet ({files})", None


def host_blocking(
    facts: Mapping[str, gf.HostFacts | None],
    version: dra_core.KubeVersion | str,
    transition: dra_transition.TransitionPlan,
) -> list[Blocking]:
    """Blocking items of every host's file and process sources, per component, judged at
    ``version`` (``dra.sanitize`` with the component). An entry of the process
    that its file holds with the same value is the file's item (for the kubelet: unless
    its ``--feature-gates`` flag sets it too). Hosts in ``facts`` order; a host without
    facts (None) is skipped."""
    out: list[Blocking] = []
    v = str(version)
    for host, hf in facts.items():
        if hf is None:
            continue
        for c in dra_core.COMPONENTS:
            cf = hf.components.get(c)
            if cf is None:
                continue
            in_file: set[str] = set()
            file_flags = cf.file_flags
            if file_flags is not None and cf.file is not None:
                for f in _fatal(file_flags, version, c):
                    if managed(f.kind, f.entry, transition):
                        continue
                    in_file.add(f.entry)
                    out.append(Blocking(v, FILE, c, f.kind, f.entry, f.reason, host, cf.file.path))
            if cf.process is None:
                continue
            for f in _fatal(cf.process, version, c):
                if managed(f.kind, f.entry, transition):
                    continue
                name = f.entry.split("=", 1)[0]
                origin, drop_in = _process_origin(cf, f.kind, name)
                explained = f.entry in in_file and (
                    c != dra_core.KUBELET or not origin.startswith("the kubelet's --feature-gates")
                )
                if explained:
                    continue
                out.append(
                    Blocking(v, PROCESS, c, f.kind, f.entry, f.reason, host, drop_in, origin=origin)
                )
    return out


def _flag(kind: str) -> str:
    return "--feature-gates" if kind == FEATURE_GATE else "--runtime-config"


def _place(b: Blocking) -> str:
    """``from ...``: where to remove the entry, precisely."""
    if b.source == CONFIGMAP:
        if b.component == dra_core.KUBELET:
            return f"from featureGates in key kubelet of {KUBELET_CONFIGMAP}"
        return (
            f"from {_flag(b.kind)} in ClusterConfiguration {_SECTIONS[b.component]}.extraArgs "
            f"of {KUBEADM_CONFIGMAP}"
        )
    if b.source == FILE:
        if b.component == dra_core.KUBELET:
            return f"from featureGates in {b.file} on {b.host}"
        return f"from {_flag(b.kind)} in {b.file} on {b.host}"
    if b.component == dra_core.KUBELET:
        if b.origin.startswith("the kubelet's --feature-gates"):
            return f"from the kubelet's --feature-gates flag on {b.host} ({KUBELET_FLAG_FILES})"
        if b.file:
            return f"from featureGates in {b.file} on {b.host}"
        return f"from {b.origin} on {b.host}"
    return f"from {_flag(b.kind)} of {b.origin} on {b.host}"


def _note(b: Blocking) -> str:
    if b.source == PROCESS and b.component != dra_core.KUBELET:
        return (
            f"; its static pod manifest does not hold it: {b.component} was started from "
            "another file or by hand (crictl inspect, systemctl cat show how)"
        )
    return ""


def _short(b: Blocking) -> str:
    if b.source == CONFIGMAP:
        return f"from {b.configmap}"
    if b.source == FILE:
        return f"from {b.file} on {b.host}"
    return f"from {b.origin} on {b.host}"


def _edit(b: Blocking) -> str:
    if b.source != CONFIGMAP:
        return ""
    name = str(b.configmap).split("/", 1)[1]
    return f" (kubectl -n kube-system edit configmap {name})"


def with_fixes(items: Iterable[Blocking]) -> list[Blocking]:
    """The items with ``fix`` filled: remove the entry from its place and from the other
    places that hold the same entry for the same component (up to three named, the rest
    counted), before upgrading to the release."""
    items = list(items)
    by_entry: dict[tuple, list[Blocking]] = {}
    for b in items:
        by_entry.setdefault((b.version, b.component, b.kind, b.name), []).append(b)
    out = []
    for b in items:
        others = [o for o in by_entry[(b.version, b.component, b.kind, b.name)] if o is not b]
        also = [_short(o) for o in others[:_OTHERS_NAMED]]
        if len(others) > _OTHERS_NAMED:
            also.append(f"from {len(others) - _OTHERS_NAMED} more place(s) listed")
        fix = (
            f"remove {b.name} {_place(b)}{_edit(b)}"
            + (f" and {', '.join(also)}" if also else "")
            + f" before upgrading to {b.version}"
            + _note(b)
        )
        out.append(replace(b, fix=fix))
    return out
