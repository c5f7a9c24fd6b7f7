# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The feature gates in force as a component's ``/metrics`` reports them: the Prometheus
text exposition format (``parse_prometheus_text``) and the samples of
``kubernetes_feature_enabled{name,stage}`` (``feature_readings``,
``feature_metric_lines``; ``staging/src/k8s.io/component-base/metrics/prometheus/feature/
metrics.go``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit.terms import (
    FEATURE_METRIC,
    GateAuditError,
)

__all__ = [
    "FeatureReading",
    "Sample",
    "feature_metric_lines",
    "feature_readings",
    "parse_prometheus_text",
]


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
        return {"": dra_core.GA}.get(self.stage, self.stage.lower())

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
