# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What ``dra_gate_audit_facts`` reads on a node, as records: a component's running
process (its command line, split by ``host.processes``: ``component_of``, ``argv_flags``,
``kubelet_process_flags``, ``process_start_time``), its file (static pod manifest or
KubeletConfiguration), its ``/metrics`` (``metrics_url``), and the kubeadm ConfigMaps
(``ConfigMapFacts``). Every record has ``to_dict`` (JSON types only) and ``from_dict``,
which raises ``GateAuditError`` naming the bad field.

Pure: no I/O; the module ``dra_gate_audit_facts`` does the reading.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.metrics import (
    FeatureReading,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.terms import (
    COMPONENTS,
    DEFAULT_SECURE_PORTS,
    FACTS_FIX,
    FEATURE_GATE,
    KUBELET,
    KUBELET_CONFIGMAP,
    RUNTIME_CONFIG,
    GateAuditError,
    bool_text,
    rc_value,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg

__all__ = [
    "ComponentFacts",
    "ConfigMapFacts",
    "FileSource",
    "FlagSet",
    "HostFacts",
    "MetricSource",
    "argv_flags",
    "component_of",
    "kubelet_process_flags",
    "metrics_url",
    "process_start_time",
]


@dataclass
class FlagSet:
    """Explicit feature gates (name -> bool) and runtime-config entries (key -> ``"true"``
    or ``"false"``, normalised as kube-apiserver reads them) of one source."""

    feature_gates: dict[str, bool] = field(default_factory=dict)
    runtime_config: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_component_flags(cls, flags: kfl.ComponentFlags) -> FlagSet:
        return cls(
            dict(flags.feature_gates),
            {k: rc_value(v) for k, v in flags.runtime_config.items()},
        )

    def entries(self) -> dict[tuple[str, str], str]:
        """``(kind, name) -> value text`` for every entry."""
        out: dict[tuple[str, str], str] = {
            (FEATURE_GATE, k): bool_text(v) for k, v in self.feature_gates.items()
        }
        out.update({(RUNTIME_CONFIG, k): v for k, v in self.runtime_config.items()})
        return out

    def runtime_config_entries(self) -> list[str]:
        return [f"{k}={v}" for k, v in sorted(self.runtime_config.items())]

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature_gates": {k: self.feature_gates[k] for k in sorted(self.feature_gates)},
            "runtime_config": {k: self.runtime_config[k] for k in sorted(self.runtime_config)},
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> FlagSet:
        if not isinstance(data, Mapping):
            raise GateAuditError(f"{where}={data!r} is not a mapping; {FACTS_FIX}")
        gates = data.get("feature_gates") or {}
        rc = data.get("runtime_config") or {}
        if not isinstance(gates, Mapping) or not all(isinstance(v, bool) for v in gates.values()):
            raise GateAuditError(
                f"{where}.feature_gates={gates!r} is not a map of gate name to boolean; {FACTS_FIX}"
            )
        if not isinstance(rc, Mapping):
            raise GateAuditError(f"{where}.runtime_config={rc!r} is not a mapping; {FACTS_FIX}")
        return cls(
            {str(k): v for k, v in gates.items()},
            {str(k): rc_value(str(v)) for k, v in rc.items()},
        )


# ------------------------------------------------------------------ node side: processes


def component_of(argv: Sequence[str], wanted: Iterable[str] = COMPONENTS) -> str | None:
    """The component whose executable basename is ``argv[0]``'s (``/usr/bin/kubelet`` ->
    ``kubelet``), or None."""
    if not argv:
        return None
    name = os.path.basename(argv[0])
    return name if name in set(wanted) else None


def argv_flags(argv: Sequence[str], where: str = "command line") -> FlagSet:
    """Feature gates and runtime-config of a component command line (``argv[0]`` is the
    program; ``--flag=value`` and ``--flag value``; every occurrence applies in order and a
    later entry for the same name wins, as pflag and ``featureGate.Set`` do).

    Raises ``kube.flags.FlagValueError`` naming ``where`` for a malformed value.
    """
    gates: dict[str, bool] = {}
    for value in kcfg.kubelet_flag_values(argv, "feature-gates"):
        for e in kfl.parse_feature_gates(value, f"{where} --feature-gates"):
            gates[e.key] = bool(kfl.parse_go_bool(e.value))
    runtime: dict[str, str] = {}
    for value in kcfg.kubelet_flag_values(argv, "runtime-config"):
        for e in kfl.parse_runtime_config(value, f"{where} --runtime-config"):
            runtime[e.key] = rc_value(e.value)
    return FlagSet(gates, runtime)


def kubelet_process_flags(argv: Sequence[str], config_gates: Mapping[str, bool]) -> FlagSet:
    """The kubelet's gates: ``config_gates`` (its ``--config`` file and drop-ins, merged in
    order) with ``--feature-gates`` on top (cmd/kubelet/app/server.go
    ``kubeletConfigFlagPrecedence``: flags win, gates only in the file are kept)."""
    flags = argv_flags(argv, "kubelet command line")
    gates = dict(config_gates)
    gates.update(flags.feature_gates)
    return FlagSet(gates, {})


def process_start_time(stat_text: str, boot_time: float, clock_ticks: int) -> float:
    """Start time of a process in seconds since the epoch, from ``/proc/<pid>/stat``
    (field 22, ``starttime``, clock ticks after boot; proc(5)), ``btime`` of ``/proc/stat``
    and ``os.sysconf("SC_CLK_TCK")``. Raises GateAuditError for a malformed stat line."""
    try:
        rest = stat_text[stat_text.rindex(")") + 2 :].split()
        return boot_time + int(rest[19]) / clock_ticks
    except (ValueError, IndexError) as err:
        raise GateAuditError(f"/proc/<pid>/stat line {stat_text[:80]!r} is malformed") from err


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    values = kcfg.kubelet_flag_values(argv, flag)
    return values[-1] if values else None


def metrics_url(
    component: str, argv: Sequence[str], kubelet_config: Mapping[str, Any] | None = None
) -> str:
    """``https://<address>:<port>/metrics`` of a running component.

    Port: ``--secure-port`` (kubelet: ``--port``, else ``port`` of its configuration), else
    ``DEFAULT_SECURE_PORTS``. Address: ``--bind-address`` (kubelet: ``--address`` or
    ``address``) when it names one interface, else 127.0.0.1 (a wildcard bind includes
    loopback). Raises GateAuditError for a port that is not a number.
    """
    config = kubelet_config or {}
    if component == KUBELET:
        port = _flag_value(argv, "port") or config.get("port")
        address = _flag_value(argv, "address") or config.get("address")
    else:
        port = _flag_value(argv, "secure-port")
        address = _flag_value(argv, "bind-address")
    port = port if port not in (None, "") else DEFAULT_SECURE_PORTS[component]
    try:
        number = int(port)
    except (TypeError, ValueError) as err:
        raise GateAuditError(f"{component}: secure port {port!r} is not a number") from err
    host = str(address or "")
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"https://{host}:{number}/metrics"


# ------------------------------------------------------------------ facts records


@dataclass
class FileSource:
    """A file read on a host: ``path``, whether it ``exists``, the ``flags`` in it (None
    when missing or unreadable), its ``mtime`` (seconds since the epoch) and the ``error``
    that stopped reading it."""

    path: str
    exists: bool = False
    flags: FlagSet | None = None
    mtime: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "exists": self.exists,
            "flags": self.flags.to_dict() if self.flags is not None else None,
            "mtime": self.mtime,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> FileSource:
        if not isinstance(data, Mapping) or "path" not in data:
            raise GateAuditError(f"{where}={data!r} has no path; {FACTS_FIX}")
        flags = data.get("flags")
        return cls(
            str(data["path"]),
            bool(data.get("exists")),
            FlagSet.from_dict(flags, f"{where}.flags") if flags is not None else None,
            _float_or_none(data.get("mtime"), f"{where}.mtime"),
            data.get("error"),
        )


@dataclass
class MetricSource:
    """``/metrics`` of a component: ``url``, ``features`` read from it, ``error`` when the
    read failed, ``skipped`` (the reason) when it was not attempted; ``lines``: the
    ``kubernetes_feature_enabled`` lines as served."""

    url: str
    features: dict[str, FeatureReading] = field(default_factory=dict)
    error: str | None = None
    skipped: str | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def read(self) -> bool:
        return self.error is None and self.skipped is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "features": {k: self.features[k].to_dict() for k in sorted(self.features)},
            "error": self.error,
            "skipped": self.skipped,
            "lines": list(self.lines),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> MetricSource:
        if not isinstance(data, Mapping):
            raise GateAuditError(f"{where}={data!r} is not a mapping; {FACTS_FIX}")
        features: dict[str, FeatureReading] = {}
        for name, item in (data.get("features") or {}).items():
            if not isinstance(item, Mapping) or not isinstance(item.get("enabled"), bool):
                raise GateAuditError(f"{where}.features.{name}={item!r} is malformed; {FACTS_FIX}")
            features[str(name)] = FeatureReading(item["enabled"], str(item.get("stage") or ""))
        return cls(
            str(data.get("url") or ""),
            features,
            data.get("error"),
            data.get("skipped"),
            [str(x) for x in data.get("lines") or []],
        )


@dataclass
class ComponentFacts:
    """What a host says about one component.

    ``running``: a process was found (``pid``, ``argv``, ``started_at`` in seconds since the
    epoch); ``process``: its flags (see ``argv_flags``/``kubelet_process_flags``);
    ``config_files``: the kubelet configuration files the process source read (``--config``
    then drop-ins); ``file``: the static pod manifest or kubelet configuration file;
    ``metrics``: ``/metrics`` when asked for; ``errors``: what could not be read.
    """

    component: str
    running: bool = False
    pid: int | None = None
    argv: list[str] = field(default_factory=list)
    started_at: float | None = None
    process: FlagSet | None = None
    config_files: list[str] = field(default_factory=list)
    file: FileSource | None = None
    metrics: MetricSource | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def file_flags(self) -> FlagSet | None:
        return self.file.flags if self.file is not None and self.file.exists else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "running": self.running,
            "pid": self.pid,
            "argv": list(self.argv),
            "started_at": self.started_at,
            "process": self.process.to_dict() if self.process is not None else None,
            "config_files": list(self.config_files),
            "file": self.file.to_dict() if self.file is not None else None,
            "metrics": self.metrics.to_dict() if self.metrics is not None else None,
            "errors": list(self.errors),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ComponentFacts:
        if not isinstance(data, Mapping):
            raise GateAuditError(f"{where}={data!r} is not a mapping; {FACTS_FIX}")
        component = str(data.get("component") or "")
        if component not in COMPONENTS:
            raise GateAuditError(
                f"{where}.component={component!r} is not one of {', '.join(COMPONENTS)}; "
                f"{FACTS_FIX}"
            )
        pid = data.get("pid")
        return cls(
            component,
            bool(data.get("running")),
            int(pid) if pid is not None else None,
            [str(a) for a in data.get("argv") or []],
            _float_or_none(data.get("started_at"), f"{where}.started_at"),
            FlagSet.from_dict(data["process"], f"{where}.process")
            if data.get("process") is not None
            else None,
            [str(p) for p in data.get("config_files") or []],
            FileSource.from_dict(data["file"], f"{where}.file")
            if data.get("file") is not None
            else None,
            MetricSource.from_dict(data["metrics"], f"{where}.metrics")
            if data.get("metrics") is not None
            else None,
            [str(e) for e in data.get("errors") or []],
        )


@dataclass
class HostFacts:
    """Everything ``dra_gate_audit_facts`` read on one ``host``: component -> facts (only
    the components it was asked to look for)."""

    host: str
    components: dict[str, ComponentFacts] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "components": {c: self.components[c].to_dict() for c in sorted(self.components)},
        }

    @classmethod
    def from_dict(cls, data: Any, host: str | None = None) -> HostFacts:
        """Build from the facts module's ``facts``; ``host`` (the inventory name) wins over
        the name inside. Raises GateAuditError naming the bad field."""
        where = f"facts[{host!r}]" if host else "facts"
        if not isinstance(data, Mapping) or not isinstance(data.get("components"), Mapping):
            raise GateAuditError(f"{where} has no 'components' mapping; {FACTS_FIX}")
        name = host or str(data.get("host") or "")
        if not name:
            raise GateAuditError(f"{where} has no host name; {FACTS_FIX}")
        return cls(
            name,
            {
                str(c): ComponentFacts.from_dict(item, f"{where}.components.{c}")
                for c, item in data["components"].items()
            },
        )


def _float_or_none(value: Any, where: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        raise GateAuditError(f"{where}={value!r} is not a number; {FACTS_FIX}") from err


@dataclass
class ConfigMapFacts:
    """The kubeadm ConfigMaps as read from the cluster: ``cluster_configuration`` (key
    ``ClusterConfiguration`` of ``kube-system/kubeadm-config``) and ``kubelet`` (key
    ``kubelet`` of ``kube-system/kubelet-config``); None when the ConfigMap or key does not
    exist. ``kubelet_name``: the ConfigMap the kubelet text came from (``kubelet-config-1.X``
    on old clusters)."""

    cluster_configuration: str | None = None
    kubelet: str | None = None
    kubelet_name: str = KUBELET_CONFIGMAP
