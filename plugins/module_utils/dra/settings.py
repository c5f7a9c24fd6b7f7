# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: a component's DRA settings, parsed and planned:
``--feature-gates`` and ``--runtime-config`` values read and written
(``parse_feature_gates``, ``feature_gates_string``, ``parse_runtime_config``), and the
records of a plan (``ComponentSettings``, ``Forbidden``, ``ComponentPlan``).

Importers import the part that defines what they use (no module re-exports another's names)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.api import (
    KubeadmConfigAPI,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    APISERVER,
    COMPONENTS,
    PROJECTED_MINORS,
    KubeVersion,
    VersionParseError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.skew import (
    ProvisionVerdict,
    supported_for_provision,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl

# --------------------------------------------------------------------------------------
# Parsing of existing settings
# --------------------------------------------------------------------------------------


def parse_feature_gates(value: str, name: str = "feature-gates") -> dict[str, bool]:
    """Parse ``"A=true,B=0"`` (the --feature-gates flag) into ``{"A": True, "B": False}``
    by the one flag parser (:func:`kube_flags.parse_feature_gates`: Go's
    ``strconv.ParseBool`` values, as the components read them; a later entry wins).

    Raises VersionParseError naming ``name`` and the bad entry.
    """
    try:
        entries = kfl.parse_feature_gates(value, name)
    except kfl.FlagValueError as exc:
        text, fix = msg.split_fix(str(exc))
        raise VersionParseError(text + ".", fix or "write NAME=true or NAME=false.") from None
    return {e.key: bool(kfl.parse_go_bool(e.value)) for e in entries}


def parse_gate_bool(value: str | bool, what: str) -> bool:
    """A gate's value: a boolean, or a string Go's ``strconv.ParseBool`` reads (``1``,
    ``t``, ``TRUE``, ...), as the components read it. Raises VersionParseError."""
    if isinstance(value, bool):
        return value
    parsed = kfl.parse_go_bool(str(value).strip())
    if parsed is None:
        raise VersionParseError(
            f"{what} has value {value!r}, not a boolean.", f"use {kfl.GO_BOOL_HELP}."
        )
    return parsed


def feature_gates_string(gates: Mapping[str, bool]) -> str:
    """``{"B": False, "A": True}`` -> ``"A=true,B=false"`` (sorted, the --feature-gates form)."""
    return ",".join("{}={}".format(k, "true" if gates[k] else "false") for k in sorted(gates))


def parse_runtime_config(value: str | Sequence[str]) -> list[tuple[str, str]]:
    """Split --runtime-config (a string ``"a/b=true,c/d"`` or a list of entries) into
    ``[(key, value)]``; an entry without ``=`` means ``true``."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for raw in items:
        for part in raw.split(","):
            entry = part.strip()
            if not entry:
                continue
            key, sep, val = entry.partition("=")
            out.append((key.strip(), val.strip() if sep else "true"))
    return out


# --------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Forbidden:
    """A feature-gate entry that must not appear: ``values`` are the forbidden values
    (both for an unknown gate); ``reason`` says why."""

    values: tuple[bool, ...]
    reason: str


@dataclass
class ComponentSettings:
    """What one component needs at one version.

    ``feature_gates``: entries to set (name -> value); ``forbidden_gates``: entries that
    would stop the component (name -> Forbidden); ``runtime_config``: entries to add
    (kube-apiserver only, e.g. "resource.k8s.io/v1beta1=true");
    ``runtime_config_absent``: group/versions that must not appear in --runtime-config
    (-> reason), kube-apiserver only.
    """

    component: str
    feature_gates: dict[str, bool] = field(default_factory=dict)
    forbidden_gates: dict[str, Forbidden] = field(default_factory=dict)
    runtime_config: list[str] = field(default_factory=list)
    runtime_config_absent: dict[str, str] = field(default_factory=dict)

    @property
    def feature_gates_flag(self) -> str:
        return feature_gates_string(self.feature_gates)

    def to_dict(self) -> dict:
        return {
            "component": self.component,
            "feature_gates": {k: self.feature_gates[k] for k in sorted(self.feature_gates)},
            "feature_gates_flag": self.feature_gates_flag,
            "forbidden_gates": {
                k: {"values": list(v.values), "reason": v.reason}
                for k, v in sorted(self.forbidden_gates.items())
            },
            "runtime_config": sorted(self.runtime_config),
            "runtime_config_absent": dict(sorted(self.runtime_config_absent.items())),
        }


@dataclass
class ComponentPlan:
    """Settings per component for DRA at ``version``.

    ``features``: features planned; ``wishes``: effective gate wishes (name -> value);
    ``components``: component name -> ComponentSettings (all four always present);
    ``omitted``: wished gates deliberately not emitted -> reason (GA on by default, locked);
    ``kubeadm``: the kubeadm configuration API; ``warnings``: projections, known-bad patches.
    """

    version: KubeVersion
    features: tuple[str, ...]
    wishes: dict[str, bool]
    components: dict[str, ComponentSettings]
    omitted: dict[str, str]
    kubeadm: KubeadmConfigAPI
    warnings: list[str] = field(default_factory=list)
    dropped_wishes: dict[str, str] = field(default_factory=dict)

    @property
    def runtime_config(self) -> list[str]:
        return sorted(self.components[APISERVER].runtime_config)

    @property
    def runtime_config_flag(self) -> str:
        return ",".join(self.runtime_config)

    def emitted(self) -> dict[str, dict[str, bool]]:
        """component -> feature-gate entries."""
        return {c: dict(self.components[c].feature_gates) for c in COMPONENTS}

    def to_dict(self) -> dict:
        return {
            "version": str(self.version),
            "minor": self.version.minor_version,
            "projected": self.version.minor in PROJECTED_MINORS,
            "features": list(self.features),
            "wishes": {k: self.wishes[k] for k in sorted(self.wishes)},
            "components": {c: self.components[c].to_dict() for c in COMPONENTS},
            "runtime_config_flag": self.runtime_config_flag,
            "omitted": dict(sorted(self.omitted.items())),
            "kubeadm": {
                "preferred": self.kubeadm.preferred,
                "accepted": list(self.kubeadm.accepted),
                "deprecated": list(self.kubeadm.deprecated),
                "experimental": list(self.kubeadm.experimental),
                "extra_args_shape": self.kubeadm.extra_args_shape,
            },
            "provision": _verdict_dict(supported_for_provision(self.version)),
            "warnings": list(self.warnings),
        }


def _verdict_dict(v: ProvisionVerdict) -> dict:
    return {"supported": v.ok, "reason": v.reason}
