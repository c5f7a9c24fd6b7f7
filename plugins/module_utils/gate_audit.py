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

Pure: no I/O. The node-side functions (``split_cmdline``, ``argv_flags``,
``kubelet_process_flags``, ``metrics_url``, ``feature_readings``) are used by the module
``dra_gate_audit_facts`` on each node (standard library and PyYAML only), ``audit`` by
the module ``dra_gate_audit`` on the control host. Every record has ``to_dict`` (JSON
types only) and ``from_dict``.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils import kube_config_edit as kce

__all__ = [
    "COMPONENTS",
    "DEFAULT_SECURE_PORTS",
    "FEATURE_METRIC",
    "AuditResult",
    "ComponentFacts",
    "ConfigMapFacts",
    "FeatureReading",
    "FileSource",
    "Finding",
    "FlagSet",
    "GateAuditError",
    "HostFacts",
    "MetricSource",
    "Sample",
    "argv_flags",
    "audit",
    "component_of",
    "feature_metric_lines",
    "feature_readings",
    "format_table",
    "kubelet_process_flags",
    "metrics_url",
    "parse_prometheus_text",
    "process_start_time",
    "split_cmdline",
]

COMPONENTS = dv.COMPONENTS
APISERVER, CONTROLLER_MANAGER, SCHEDULER, KUBELET = dv.COMPONENTS

FEATURE_GATE = "feature-gate"
RUNTIME_CONFIG = "runtime-config"

PROCESS = "process"
FILE = "file"
CONFIGMAP = "configmap"
METRIC = "metric"
MODEL = "model"

FAIL = "fail"
WARN = "warn"
_SEVERITY_ORDER = {FAIL: 0, WARN: 1}

#: Secure ports the components serve /metrics on when no flag says otherwise:
#: kube-apiserver ``--secure-port`` 6443 (kubeadm's default), kube-controller-manager
#: 10257 (``KubeControllerManagerPort``), kube-scheduler 10259 (``KubeSchedulerPort``),
#: kubelet 10250 (``KubeletPort``); ``staging/src/k8s.io/cloud-provider/ports.go`` and
#: ``pkg/cluster/ports/ports.go``.
DEFAULT_SECURE_PORTS = {
    APISERVER: 6443,
    CONTROLLER_MANAGER: 10257,
    SCHEDULER: 10259,
    KUBELET: 10250,
}

#: The metric every component registers with one sample per feature gate
#: (component-base/metrics/prometheus/feature/metrics.go, ``featureInfo``).
FEATURE_METRIC = "kubernetes_feature_enabled"

#: kubeadm ConfigMaps (cmd/kubeadm/app/constants: KubeadmConfigConfigMap,
#: KubeletBaseConfigurationConfigMap) and their keys.
KUBEADM_CONFIGMAP = "kube-system/kubeadm-config"
KUBELET_CONFIGMAP = "kube-system/kubelet-config"

_SECTIONS = kce.CLUSTER_CONFIGURATION_SECTIONS


class GateAuditError(ValueError):
    """Input the audit cannot use (malformed facts, a bad parameter); the message names
    the value and the fix."""


# ------------------------------------------------------------------ flag sets


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


def _rc_value(value: str) -> str:
    """A runtime-config value as kube-apiserver reads it: ``""`` is true, Go booleans are
    normalised to ``true``/``false``, anything else is kept."""
    if value == "":
        return "true"
    parsed = kce.parse_go_bool(value)
    return value if parsed is None else _bool_text(parsed)


@dataclass
class FlagSet:
    """Explicit feature gates (name -> bool) and runtime-config entries (key -> ``"true"``
    or ``"false"``, normalised as kube-apiserver reads them) of one source."""

    feature_gates: dict[str, bool] = field(default_factory=dict)
    runtime_config: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_component_flags(cls, flags: kce.ComponentFlags) -> FlagSet:
        return cls(
            dict(flags.feature_gates),
            {k: _rc_value(v) for k, v in flags.runtime_config.items()},
        )

    def entries(self) -> dict[tuple[str, str], str]:
        """``(kind, name) -> value text`` for every entry."""
        out: dict[tuple[str, str], str] = {
            (FEATURE_GATE, k): _bool_text(v) for k, v in self.feature_gates.items()
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
            raise GateAuditError(f"{where}={data!r} is not a mapping; {_FACTS_FIX}")
        gates = data.get("feature_gates") or {}
        rc = data.get("runtime_config") or {}
        if not isinstance(gates, Mapping) or not all(isinstance(v, bool) for v in gates.values()):
            raise GateAuditError(
                f"{where}.feature_gates={gates!r} is not a map of gate name to boolean; "
                f"{_FACTS_FIX}"
            )
        if not isinstance(rc, Mapping):
            raise GateAuditError(f"{where}.runtime_config={rc!r} is not a mapping; {_FACTS_FIX}")
        return cls(
            {str(k): v for k, v in gates.items()},
            {str(k): _rc_value(str(v)) for k, v in rc.items()},
        )


_FACTS_FIX = (
    "fix: pass what the module gpufleet.cluster.dra_gate_audit_facts of the same collection "
    "version returned (its 'facts')"
)


# ------------------------------------------------------------------ node side: processes


def split_cmdline(raw: bytes) -> list[str]:
    """``/proc/<pid>/cmdline`` (NUL-separated, NUL-terminated) -> argv. Bytes that are not
    UTF-8 are replaced (``surrogateescape`` would not survive JSON)."""
    text = raw.decode("utf-8", errors="replace")
    if text.endswith("\0"):
        text = text[:-1]
    return text.split("\0") if text else []


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

    Raises ``kube_config_edit.FlagValueError`` naming ``where`` for a malformed value.
    """
    gates: dict[str, bool] = {}
    for value in kce.kubelet_flag_values(argv, "feature-gates"):
        for e in kce.parse_feature_gates(value, f"{where} --feature-gates"):
            gates[e.key] = bool(kce.parse_go_bool(e.value))
    runtime: dict[str, str] = {}
    for value in kce.kubelet_flag_values(argv, "runtime-config"):
        for e in kce.parse_runtime_config(value, f"{where} --runtime-config"):
            runtime[e.key] = _rc_value(e.value)
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
    values = kce.kubelet_flag_values(argv, flag)
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


# ------------------------------------------------------------------ Prometheus text format


@dataclass(frozen=True)
class Sample:
    """One sample of the Prometheus text exposition format: ``name``, ``labels``,
    ``value`` (float; NaN and +/-Inf as Python floats)."""

    name: str
    labels: dict[str, str]
    value: float


_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _parse_labels(line: str, pos: int, lineno: int) -> tuple[dict[str, str], int]:
    labels: dict[str, str] = {}
    pos += 1  # after "{"
    while True:
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == "}":
            return labels, pos + 1
        m = _LABEL_NAME.match(line, pos)
        if not m:
            raise GateAuditError(f"metrics line {lineno}: bad label name at {line[pos:][:40]!r}")
        name = m.group(0)
        pos = m.end()
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if line[pos : pos + 2] != '="':
            raise GateAuditError(f"metrics line {lineno}: label {name} has no quoted value")
        pos += 2
        value = []
        while True:
            if pos >= len(line):
                raise GateAuditError(f"metrics line {lineno}: unterminated label value")
            ch = line[pos]
            if ch == "\\" and pos + 1 < len(line):
                value.append(_ESCAPES.get(line[pos + 1], "\\" + line[pos + 1]))
                pos += 2
                continue
            if ch == '"':
                pos += 1
                break
            value.append(ch)
            pos += 1
        labels[name] = "".join(value)
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == ",":
            pos += 1


def parse_prometheus_text(text: str) -> list[Sample]:
    """Parse the Prometheus text exposition format (version 0.0.4, what every Kubernetes
    component serves on /metrics): ``# HELP``/``# TYPE`` and comments are skipped, each
    other line is ``name[{label="value",...}] value [timestamp]`` with ``\\\\``, ``\\"``
    and ``\\n`` escapes in label values. Raises GateAuditError naming the line number for
    a malformed line."""
    samples: list[Sample] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _METRIC_NAME.match(line)
        if not m:
            raise GateAuditError(f"metrics line {lineno}: {line[:60]!r} has no metric name")
        name, pos = m.group(0), m.end()
        labels: dict[str, str] = {}
        if pos < len(line) and line[pos] == "{":
            labels, pos = _parse_labels(line, pos, lineno)
        parts = line[pos:].split()
        if not parts:
            raise GateAuditError(f"metrics line {lineno}: {line[:60]!r} has no value")
        try:
            value = float(parts[0])
        except ValueError as err:
            raise GateAuditError(
                f"metrics line {lineno}: value {parts[0]!r} is not a number"
            ) from err
        samples.append(Sample(name, labels, value))
    return samples


@dataclass(frozen=True)
class FeatureReading:
    """One ``kubernetes_feature_enabled`` sample: ``enabled`` and ``stage`` as the
    component reports it (``ALPHA``, ``BETA``, ``DEPRECATED``, or ``""`` for GA)."""

    enabled: bool
    stage: str

    @property
    def model_stage(self) -> str:
        """The stage in the version model's words (``alpha``, ``beta``, ``ga``,
        ``deprecated``)."""
        return {"": dv.GA}.get(self.stage, self.stage.lower())

    def to_dict(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "stage": self.stage}


def feature_readings(text: str) -> dict[str, FeatureReading]:
    """Gate name -> FeatureReading from a /metrics text (only ``kubernetes_feature_enabled``
    samples are read). Raises GateAuditError for a malformed line of that metric."""
    lines = [ln for ln in text.splitlines() if ln.startswith(FEATURE_METRIC + "{")]
    out: dict[str, FeatureReading] = {}
    for s in parse_prometheus_text("\n".join(lines)):
        if s.name == FEATURE_METRIC and "name" in s.labels:
            out[s.labels["name"]] = FeatureReading(s.value == 1.0, s.labels.get("stage", ""))
    return out


def feature_metric_lines(text: str) -> list[str]:
    """The lines of ``kubernetes_feature_enabled`` (samples, HELP and TYPE) of a /metrics
    text: what the facts module returns instead of the whole text (megabytes on
    kube-apiserver)."""
    return [
        ln
        for ln in text.splitlines()
        if ln.startswith(FEATURE_METRIC + "{")
        or ln.startswith(f"# HELP {FEATURE_METRIC} ")
        or ln.startswith(f"# TYPE {FEATURE_METRIC} ")
    ]


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
            raise GateAuditError(f"{where}={data!r} has no path; {_FACTS_FIX}")
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
            raise GateAuditError(f"{where}={data!r} is not a mapping; {_FACTS_FIX}")
        features: dict[str, FeatureReading] = {}
        for name, item in (data.get("features") or {}).items():
            if not isinstance(item, Mapping) or not isinstance(item.get("enabled"), bool):
                raise GateAuditError(f"{where}.features.{name}={item!r} is malformed; {_FACTS_FIX}")
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
            raise GateAuditError(f"{where}={data!r} is not a mapping; {_FACTS_FIX}")
        component = str(data.get("component") or "")
        if component not in COMPONENTS:
            raise GateAuditError(
                f"{where}.component={component!r} is not one of {', '.join(COMPONENTS)}; "
                f"{_FACTS_FIX}"
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
            raise GateAuditError(f"{where} has no 'components' mapping; {_FACTS_FIX}")
        name = host or str(data.get("host") or "")
        if not name:
            raise GateAuditError(f"{where} has no host name; {_FACTS_FIX}")
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
        raise GateAuditError(f"{where}={value!r} is not a number; {_FACTS_FIX}") from err


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


# ------------------------------------------------------------------ findings


@dataclass(frozen=True)
class Finding:
    """One disagreement.

    ``id``: stable identifier (``gates.node-drift``); ``severity``: ``fail`` or ``warn``;
    ``host``: inventory host (None: cluster-wide, e.g. a ConfigMap); ``component``;
    ``kind``: ``feature-gate`` or ``runtime-config`` (None for component-level findings);
    ``name``: the gate or runtime-config key; ``values``: what each source says (source ->
    value text, None: absent); ``message``; ``fix``.
    """

    id: str
    severity: str
    host: str | None
    component: str | None
    kind: str | None
    name: str | None
    values: dict[str, str | None]
    message: str
    fix: str

    def sort_key(self) -> tuple:
        comp = COMPONENTS.index(self.component) if self.component in COMPONENTS else 9
        return (
            _SEVERITY_ORDER[self.severity],
            self.id,
            comp,
            self.host or "",
            self.kind or "",
            self.name or "",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "host": self.host,
            "component": self.component,
            "kind": self.kind,
            "name": self.name,
            "values": dict(self.values),
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class AuditResult:
    """``version`` judged against, ``features``/``gates`` asked for, ``findings`` (fail
    first), ``summary`` (table data, see ``audit``) and ``plan`` (what the version model
    wants per component)."""

    version: str
    features: list[str]
    gates: dict[str, bool]
    findings: list[Finding]
    summary: dict[str, Any]
    plan: dict[str, Any]

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == FAIL]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARN]

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "features": list(self.features),
            "gates": dict(sorted(self.gates.items())),
            "ok": self.ok,
            "counts": {FAIL: len(self.failed), WARN: len(self.warnings)},
            "findings": [f.to_dict() for f in self.findings],
            "summary": self.summary,
            "plan": self.plan,
        }


# ------------------------------------------------------------------ comparison helpers


def _default(
    kind: str, name: str, version: dv.KubeVersion, metric: FeatureReading | None = None
) -> str | None:
    """The value in force when ``name`` is not set: the metric's when read, else the version
    model's default; None when unknown (a gate outside the model, another API group)."""
    if kind == FEATURE_GATE:
        if metric is not None:
            return _bool_text(metric.enabled)
        if name in dv.GATES:
            st = dv.gate_state(name, version)
            return _bool_text(st.default) if st.known else None
        return None
    parts = name.split("/")
    if parts[0] == dv.RESOURCE_GROUP and len(parts) == 2:
        for api in dv.served_api_versions(version):
            if api.version == parts[1]:
                return _bool_text(api.enabled_by_default)
        return "false"
    return None


def _severity(a: str | None, b: str | None, default: str | None) -> str:
    """fail when the values in force differ (or cannot be told), warn when only the
    spelling differs."""
    ea = a if a is not None else default
    eb = b if b is not None else default
    return WARN if ea is not None and ea == eb else FAIL


def _entry(kind: str, name: str, value: str | None) -> str:
    if value is None:
        return f"no {name}"
    return f"{name}={value}"


def _flag_name(kind: str) -> str:
    return "--feature-gates" if kind == FEATURE_GATE else "--runtime-config"


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


def _process_file_checks(host: str, cf: ComponentFacts, version: dv.KubeVersion) -> list[Finding]:
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
                    f"{_entry(kind, name, pv)}, {path} says {_entry(kind, name, fv)}: the flag "
                    "wins, and neither the file nor kube-system/kubelet-config shows it",
                    f"set {name}: {pv} in featureGates of {path} and of kube-system/kubelet-"
                    "config (gpufleet gates apply), then remove it from --feature-gates of the "
                    "kubelet (KUBELET_EXTRA_ARGS in /etc/default/kubelet or "
                    "/var/lib/kubelet/kubeadm-flags.env) and restart the kubelet",
                )
            )
            continue
        default = _default(kind, name, version, metric.get(name) if kind == FEATURE_GATE else None)
        if c == KUBELET:
            message = (
                f"the running kubelet has {_entry(kind, name, pv)}, its configuration file "
                f"{path} says {_entry(kind, name, fv)}"
            )
            fix = (
                f"make {path} hold the wanted value (gpufleet gates apply) and restart the "
                "kubelet (systemctl restart kubelet); its --config names "
                f"{', '.join(cf.config_files) or 'another file'}"
            )
        else:
            message = (
                f"{c} runs with {_flag_name(kind)} {_entry(kind, name, pv)} but its static pod "
                f"manifest {path} says {_entry(kind, name, fv)}: the kubelet has not recreated "
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
                _severity(pv, fv, default),
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


def _metric_checks(host: str, cf: ComponentFacts, version: dv.KubeVersion) -> list[Finding]:
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
                {PROCESS: _bool_text(value), METRIC: _bool_text(reading.enabled)},
                f'{c} reports {FEATURE_METRIC}{{name="{name}"}} {int(reading.enabled)} on '
                f"{cf.metrics.url}, but its "
                + ("configuration and flags say" if c == KUBELET else "command line says")
                + f" {name}={_bool_text(value)}: the running process uses another value",
                "restart the component so that it reads its configuration again"
                + (" (systemctl restart kubelet)" if c == KUBELET else "")
                + ", then run the audit again",
            )
        )
    stages = {}
    for name, reading in sorted(features.items()):
        if name not in dv.GATES:
            continue
        st = dv.gate_state(name, version)
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
    plan: dv.ComponentPlan,
    version: dv.KubeVersion,
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
        cm_place = f"ClusterConfiguration.{_SECTIONS[c]}.extraArgs of {KUBEADM_CONFIGMAP}"
        dropped_by = (
            f"kubeadm upgrade regenerates the static pod manifests from {KUBEADM_CONFIGMAP}"
        )
    judged = {
        **_model_actions(base, version, c),
        **_model_actions(cm, version, c),
    }
    for key in list(judged):
        if judged[key] == "advise-remove" and _plan_value(plan, c, *key) is not None:
            del judged[key]  # the plan wants it: not advice to drop
    for kind, name, bv, cv in _diff(base, cm):
        default = _default(kind, name, version, metric.get(name) if kind == FEATURE_GATE else None)
        action = judged.get((kind, name))
        if bv is not None and cv != bv:
            message = (
                f"{where} has {_entry(kind, name, bv)} but {cm_place} has "
                f"{_entry(kind, name, cv)}: {dropped_by}, so the next upgrade "
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
                f"{cm_place} has {_entry(kind, name, cv)} but {where} has "
                f"{_entry(kind, name, bv)}: the file is behind the ConfigMap, and the next "
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
                _severity(bv, cv, default),
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


def _model_actions(
    flags: FlagSet, version: dv.KubeVersion, component: str | None = None
) -> dict[tuple[str, str], str]:
    """(kind, name) -> ``remove`` (fatal) or ``advise-remove`` for the entries of ``flags``
    that ``dra_versions.sanitize`` objects to at ``version``."""
    report = dv.sanitize(
        dict(flags.feature_gates), flags.runtime_config_entries(), version, component=component
    )
    out = {}
    for f in report.findings:
        if f.action in ("remove", "advise-remove"):
            kind = FEATURE_GATE if f.kind == "feature-gate" else RUNTIME_CONFIG
            out[(kind, f.entry.partition("=")[0])] = f.action
    return out


def _plan_value(plan: dv.ComponentPlan, component: str, kind: str, name: str) -> str | None:
    settings = plan.components[component]
    if kind == FEATURE_GATE:
        if name in settings.feature_gates:
            return _bool_text(settings.feature_gates[name])
        if name in plan.wishes and name in dv.GATES and component in dv.GATES[name].components:
            return _bool_text(plan.wishes[name])
        return None
    for entry in settings.runtime_config:
        key, _, value = entry.partition("=")
        if key == name:
            return _rc_value(value)
    return None


def _model_checks(
    host: str | None,
    component: str,
    sources: Mapping[str, FlagSet],
    plan: dv.ComponentPlan,
    version: dv.KubeVersion,
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
    planned_entries = {(FEATURE_GATE, k): _bool_text(v) for k, v in settings.feature_gates.items()}
    for entry in settings.runtime_config:
        key, _, value = entry.partition("=")
        planned_entries[(RUNTIME_CONFIG, key)] = _rc_value(value)
    grouped: dict[tuple[str, str, str], dict[str, Any]] = {}
    for source, flags in sources.items():
        report = dv.sanitize(
            {k: v for k, v in flags.feature_gates.items()},
            flags.runtime_config_entries(),
            version,
            component=component,
        )
        for f in report.findings:
            if f.action == "keep":
                continue
            name, _, value = f.entry.partition("=")
            kind = FEATURE_GATE if f.kind == "feature-gate" else RUNTIME_CONFIG
            if f.fatal:
                fid = (
                    "gates.model-forbidden"
                    if kind == FEATURE_GATE
                    else ("gates.runtime-config-unserved")
                )
            else:
                if planned_entries.get((kind, name)) == _rc_value(value):
                    continue
                fid = "gates.model-advice"
            item = grouped.setdefault(
                (fid, kind, name), {"values": {}, "reason": f.reason, "fatal": f.fatal}
            )
            item["values"][source] = _rc_value(value)
    where = ", ".join((labels or {}).get(src, src) for src in sorted(sources))
    out = []
    forbidden_names = {(k, n) for (fid, k, n) in grouped if fid != "gates.model-advice"}
    for (fid, kind, name), item in sorted(grouped.items()):
        sev = FAIL if item["fatal"] else WARN
        if fid == "gates.model-forbidden":
            fix = (
                f"remove {name} from {_flag_name(kind)} of {component} everywhere it is set "
                f"({where}"
                + ("" if host is None else f"; and {_cm_for(component)}")
                + f") before {component} {version} starts: gpufleet gates apply removes it"
            )
        elif fid == "gates.runtime-config-unserved":
            fix = (
                f"remove {name} from --runtime-config of kube-apiserver ({where}"
                + ("" if host is None else f"; and {KUBEADM_CONFIGMAP}")
                + ") before kube-apiserver "
                + f"{version} starts: gpufleet gates apply removes it"
            )
        else:
            fix = (
                f"remove {name} from {_flag_name(kind)} of {component} ({where}) when "
                "convenient: gpufleet gates apply does so"
            )
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
                fix,
            )
        )
    # Wishes with the other value.
    for name, wish in sorted(plan.wishes.items()):
        if name not in dv.GATES or component not in dv.GATES[name].components:
            continue
        if (FEATURE_GATE, name) in forbidden_names:
            continue
        wrong = {
            s: _bool_text(f.feature_gates[name])
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
                {**wrong, MODEL: _bool_text(wish)},
                f"{component} has {name}={next(iter(wrong.values()))} ({', '.join(sorted(wrong))})"
                f"; the version model plans {name}={_bool_text(wish)} at {version} for the "
                "features asked for",
                f"set {name}={_bool_text(wish)} on {component} (gpufleet gates apply), or stop "
                "asking for the feature that needs it",
            )
        )
    # Planned gates absent from every source.
    for name, value in sorted(settings.feature_gates.items()):
        if any(name in f.feature_gates for f in sources.values()):
            continue
        reading = metric.get(name)
        default = _default(FEATURE_GATE, name, version, reading)
        values: dict[str, str | None] = dict.fromkeys(sources)
        for label, extra in extra_values.items():
            values[label] = (
                _bool_text(extra.feature_gates[name])
                if extra is not None and name in extra.feature_gates
                else None
            )
        if reading is not None:
            values[METRIC] = _bool_text(reading.enabled)
        values[MODEL] = _bool_text(value)
        in_force = "in force" if reading is not None else "the default"
        out.append(
            Finding(
                "gates.model-missing",
                WARN if default == _bool_text(value) else FAIL,
                host,
                component,
                FEATURE_GATE,
                name,
                values,
                f"the version model plans {name}={_bool_text(value)} on {component} at {version}"
                f", but {where} does not set it ({in_force}: {default or 'unknown'})",
                f"set {name}={_bool_text(value)} on {component}: gpufleet gates apply writes it "
                "to the manifests, the kubelet configuration and the kubeadm ConfigMaps",
            )
        )
    # Planned runtime-config (kube-apiserver).
    for entry in settings.runtime_config:
        key, _, raw = entry.partition("=")
        value = _rc_value(raw)
        have = {s: f.runtime_config.get(key) for s, f in sources.items()}
        if all(v == value for v in have.values()):
            continue
        default = _default(RUNTIME_CONFIG, key, version)
        absent_everywhere = all(v is None for v in have.values())
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
                f"{version} (DRA objects of that version are off by default), but "
                + ", ".join(f"{s} has {_entry(RUNTIME_CONFIG, key, v)}" for s, v in have.items()),
                f"add {key}={value} to --runtime-config of kube-apiserver: gpufleet gates apply "
                f"writes it to the manifest and to {KUBEADM_CONFIGMAP}",
            )
        )
    return out


def _cm_for(component: str) -> str:
    return KUBELET_CONFIGMAP if component == KUBELET else KUBEADM_CONFIGMAP


def _host_checks(
    host: str,
    cf: ComponentFacts,
    plan: dv.ComponentPlan,
    version: dv.KubeVersion,
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
    out += _model_checks(host, c, sources, plan, version, metric, {CONFIGMAP: cm}, labels)
    return out


def _node_drift(
    hosts: Mapping[str, HostFacts],
    components: Sequence[str],
    plan: dv.ComponentPlan,
    version: dv.KubeVersion,
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
            default = _default(kind, name, version)
            wanted = _plan_value(plan, c, kind, name)
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
                        _severity(val, reference, default),
                        h,
                        c,
                        kind,
                        name,
                        {"this host": val, "reference": reference},
                        f"{c} on {h} runs with {_entry(kind, name, val)}; {same} of "
                        f"{len(vals)} hosts run {_entry(kind, name, reference)}"
                        + (
                            " (the version model's value)"
                            if wanted is not None and reference == wanted
                            else ""
                        ),
                        f"give {c} the same {_flag_name(kind)} on every host: gpufleet gates "
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
        except kce.ConfigEditError as err:
            out.append(_cm_unreadable(KUBEADM_CONFIGMAP, str(err)))
    if facts.kubelet is None:
        out.append(_cm_absent(facts.kubelet_name, "kubelet"))
    else:
        try:
            flags[KUBELET] = FlagSet(kce.kubelet_feature_gates(facts.kubelet), {})
        except kce.ConfigEditError as err:
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


# ------------------------------------------------------------------ audit


def audit(
    hosts: Mapping[str, HostFacts],
    version: dv.VersionLike,
    features: Iterable[str] = (),
    gates: Mapping[str, Any] | None = None,
    configmaps: ConfigMapFacts | None = None,
    expected_hosts: Iterable[str] = (),
    components: Sequence[str] = COMPONENTS,
) -> AuditResult:
    """Compare every source of every host with each other and with the version model.

    ``hosts``: inventory host -> HostFacts; ``version``: the Kubernetes version to judge
    against (what runs, or an upgrade target); ``features``/``gates``: what was asked of the
    version model (as for ``dra_versions.plan_components``); ``configmaps``: the kubeadm
    ConfigMaps (None: not read, no ConfigMap comparison); ``expected_hosts``: hosts that must
    have facts (``gates.facts-missing`` otherwise); ``components``: the components audited.

    Returns an AuditResult whose ``summary`` is ``{"hosts": [...], "components": [...],
    "cells": {component: {host: {"state", "pid", "source", "feature_gates",
    "runtime_config", "metrics", "flagged", "fail", "warn"}}}, "configmaps": {component:
    flags} | None}``, ``state`` one of ``running``, ``not running``, ``absent``.

    Raises ``dra_versions.VersionParseError`` for a malformed version, feature or gate
    value, ``dra_versions.VersionModelError`` for a request the model refuses at
    ``version``, GateAuditError for an unknown component.
    """
    unknown = [c for c in components if c not in COMPONENTS]
    if unknown:
        raise GateAuditError(
            f"components={list(components)!r} names {', '.join(unknown)}; fix: use "
            f"{', '.join(COMPONENTS)}"
        )
    v = dv.parse_version(version if isinstance(version, str) else str(version), "version")
    gate_wishes = dict(gates or {})
    plan = dv.plan_components(v, tuple(features), gate_wishes)
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
    for host, hf in sorted(hosts.items()):
        for c in components:
            cf = hf.components.get(c)
            if cf is None:
                continue
            name = cm_name if c == KUBELET else KUBEADM_CONFIGMAP
            findings += _host_checks(host, cf, plan, v, cm_flags.get(c), name)
    findings += _node_drift(hosts, components, plan, v)
    for c in components:
        if c in cm_flags:
            findings += _model_checks(None, c, {CONFIGMAP: cm_flags[c]}, plan, v, {}, {})
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
    findings = _dedupe(findings)
    findings.sort(key=Finding.sort_key)
    return AuditResult(
        str(v),
        list(plan.features),
        {k: _as_bool(val) for k, val in gate_wishes.items()},
        findings,
        _summary(hosts, components, findings, cm_flags if configmaps is not None else None),
        {
            c: {
                "feature_gates": dict(sorted(plan.components[c].feature_gates.items())),
                "runtime_config": sorted(plan.components[c].runtime_config),
            }
            for c in components
        },
    )


def _as_bool(value: Any) -> bool:
    """A gate wish already accepted by ``plan_components`` (a bool or "true"/"false")."""
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out = []
    for f in findings:
        key = (f.id, f.host, f.component, f.kind, f.name, tuple(sorted(f.values.items())))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _summary(
    hosts: Mapping[str, HostFacts],
    components: Sequence[str],
    findings: Sequence[Finding],
    cm_flags: Mapping[str, FlagSet] | None,
) -> dict[str, Any]:
    cells: dict[str, dict[str, Any]] = {c: {} for c in components}
    for host, hf in sorted(hosts.items()):
        for c in components:
            cf = hf.components.get(c)
            if cf is None:
                continue
            if cf.running and cf.process is not None:
                state, source, flags = "running", PROCESS, cf.process
            elif cf.file_flags is not None:
                state, source, flags = "not running", FILE, cf.file_flags
            else:
                state, source, flags = "absent", None, FlagSet()
            if state == "absent" and not cf.errors:
                continue
            mine = [f for f in findings if f.host == host and f.component == c]
            metrics = None
            if cf.metrics is not None:
                metrics = (
                    "read"
                    if cf.metrics.read
                    else f"skipped: {cf.metrics.skipped}"
                    if cf.metrics.skipped
                    else f"error: {cf.metrics.error}"
                )
            flagged: dict[str, str] = {}
            for f in mine:
                if f.name is not None and flagged.get(f.name) != FAIL:
                    flagged[f.name] = f.severity
            cells[c][host] = {
                "state": state,
                "pid": cf.pid,
                "source": source,
                **flags.to_dict(),
                "metrics": metrics,
                "flagged": dict(sorted(flagged.items())),
                FAIL: sum(1 for f in mine if f.severity == FAIL),
                WARN: sum(1 for f in mine if f.severity == WARN),
            }
    return {
        "hosts": sorted(hosts),
        "components": list(components),
        "cells": cells,
        "configmaps": {c: cm_flags[c].to_dict() for c in components if c in cm_flags}
        if cm_flags is not None
        else None,
    }


# ------------------------------------------------------------------ text rendering


def _cell_entries(cell: Mapping[str, Any]) -> list[str]:
    flagged = cell.get("flagged") or {}
    marks = {FAIL: "!", WARN: "~"}
    out = []
    for name, value in (cell.get("feature_gates") or {}).items():
        out.append(f"{name}={_bool_text(value)}{marks.get(flagged.get(name, ''), '')}")
    for key, value in (cell.get("runtime_config") or {}).items():
        out.append(f"{key}={value}{marks.get(flagged.get(key, ''), '')}")
    return out


def format_table(result: Mapping[str, Any]) -> list[str]:
    """Plain-text lines for a terminal or an Ansible debug message: one line per host and
    component (entries with a failed finding end in ``!``, with a warning in ``~``), the
    ConfigMaps, then the findings, failures first. ``result``: ``AuditResult.to_dict()``."""
    summary = result.get("summary") or {}
    counts = result.get("counts") or {}
    lines = [
        f"DRA gate audit against Kubernetes {result.get('version')}: "
        f"{counts.get(FAIL, 0)} failed, {counts.get(WARN, 0)} warnings "
        "(! failed, ~ warning)"
    ]
    rows = []
    for c in summary.get("components") or []:
        for host, cell in sorted((summary.get("cells") or {}).get(c, {}).items()):
            entries = _cell_entries(cell)
            state = cell.get("state", "")
            if cell.get("metrics") == "read":
                state += ", /metrics read"
            rows.append((host, c, state, " ".join(entries) or "-"))
    for c, flags in sorted((summary.get("configmaps") or {}).items()):
        entries = _cell_entries(flags)
        rows.append(("(configmap)", c, _cm_for(c), " ".join(entries) or "-"))
    if rows:
        header = ("host", "component", "state", "feature-gates / runtime-config")
        widths = [max(len(r[i]) for r in [*rows, header]) for i in (0, 1, 2)]
        for r in [header, *rows]:
            lines.append(
                f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip()
            )
    for f in result.get("findings") or []:
        where = " ".join(x for x in (f.get("host") or "(cluster)", f.get("component") or "") if x)
        subject = f" {f['name']}" if f.get("name") else ""
        lines.append(f"{f['severity'].upper()} {f['id']} {where}{subject}: {f['message']}")
        lines.append(f"  fix: {f['fix']}")
    return lines
