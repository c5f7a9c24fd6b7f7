# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The NVIDIA DRA driver's own feature gates: ``DRIVER_GATES`` (first chart release of each
gate, its default and mutual exclusions; pkg/featuregates/featuregates.go,
``ValidateFeatureGates``) and ``driver_feature_gates``, which turns the role's wishes
(sharing strategies, dynamic MIG, gates given) into the chart's ``featureGates`` or refuses
them with the variable to change.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    CALENDAR_LEVEL,
    DYNAMIC_MIG_KUBERNETES_MIN,
    LEGACY_CHART,
    SEMVER_CHART,
    SHARING_CHOICES,
    ChartVersion,
    DraDriverError,
    bool_variable,
)

__all__ = [
    "DRIVER_GATES",
    "driver_feature_gates",
]


# --------------------------------------------------------------------------------------
# Driver feature gates
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DriverGate:
    """A feature gate of the DRA driver itself (not a Kubernetes gate).

    ``since``: the driver level that introduced it ((0, 2) = chart 25.8.x);
    ``requires``: gates that must be on with it; ``excludes``: gates that must be off.
    Source: pkg/featuregates/featuregates.go.
    """

    name: str
    default: bool
    stage: str
    since: tuple[int, int]
    requires: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()


DRIVER_GATES: dict[str, DriverGate] = {
    g.name: g
    for g in (
        DriverGate("TimeSlicingSettings", False, "Alpha", (0, 2)),
        DriverGate("MPSSupport", False, "Alpha", (0, 2)),
        DriverGate("IMEXDaemonsWithDNSNames", True, "Beta", (0, 2)),
        DriverGate(
            "PassthroughSupport", False, "Alpha", (0, 3), excludes=("NVMLDeviceHealthCheck",)
        ),
        DriverGate(
            "DynamicMIG",
            False,
            "Alpha",
            (0, 3),
            excludes=("PassthroughSupport", "NVMLDeviceHealthCheck", "MPSSupport"),
        ),
        DriverGate("NVMLDeviceHealthCheck", False, "Alpha", (0, 3)),
        DriverGate(
            "ComputeDomainCliques", True, "Beta", (0, 3), requires=("IMEXDaemonsWithDNSNames",)
        ),
        DriverGate("CrashOnNVLinkFabricErrors", True, "Beta", (0, 3)),
        DriverGate("DeviceMetadata", False, "Alpha", (0, 4), requires=("PassthroughSupport",)),
    )
}


_SHARING_GATES = {"time-slicing": "TimeSlicingSettings", "mps": "MPSSupport"}


def _first_release(level: tuple[int, int]) -> str:
    for (year, month), lv in CALENDAR_LEVEL.items():
        if lv == level:
            return f"{year}.{month}.0 (chart {LEGACY_CHART})"
    return f"{level[0]}.{level[1]}.0 (chart {SEMVER_CHART})"


def driver_feature_gates(
    chart: ChartVersion,
    *,
    sharing: Sequence[str] = (),
    dynamic_mig: bool = False,
    gates: Mapping[str, Any] | None = None,
) -> dict[str, bool]:
    """The chart's ``featureGates`` map for what the user asked.

    ``sharing`` items ``time-slicing``/``mps`` turn on TimeSlicingSettings/MPSSupport,
    ``dynamic_mig`` turns on DynamicMIG, ``gates`` are explicit wishes (name -> bool) that may
    not contradict those. Only asked-for gates are returned (defaults are left to the driver).

    Raises DraDriverError for an unknown gate, a gate the chart release predates, a
    contradiction, a missing dependency, or a mutually exclusive pair (the driver refuses
    to start with DynamicMIG and MPSSupport, PassthroughSupport or NVMLDeviceHealthCheck,
    and with PassthroughSupport and NVMLDeviceHealthCheck).
    """
    wanted: dict[str, bool] = {}
    why: dict[str, str] = {}
    for item in sharing or ():
        if item not in _SHARING_GATES:
            raise DraDriverError(
                "dra_driver_sharing",
                list(sharing),
                f"{item!r} is not a sharing strategy",
                f"use items from {list(SHARING_CHOICES)}",
            )
        wanted[_SHARING_GATES[item]] = True
        why[_SHARING_GATES[item]] = f"dra_driver_sharing item {item}"
    if dynamic_mig:
        wanted["DynamicMIG"] = True
        why["DynamicMIG"] = "dra_driver_dynamic_mig=true"
    for name, raw in dict(gates or {}).items():
        if name not in DRIVER_GATES:
            close = difflib.get_close_matches(str(name), list(DRIVER_GATES), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise DraDriverError(
                "dra_driver_feature_gates",
                {name: raw},
                f"{name!r} is not a feature gate of the NVIDIA DRA driver{hint}",
                "use one of " + ", ".join(sorted(DRIVER_GATES)),
            )
        value = bool_variable(raw, "dra_driver_feature_gates", {name: raw})
        if name in wanted and wanted[name] != value:
            raise DraDriverError(
                "dra_driver_feature_gates",
                {name: raw},
                f"contradicts {why[name]}, which needs {name}=true",
                f"drop {name} from dra_driver_feature_gates or change {why[name].split('=')[0]}",
            )
        wanted[name] = value
        why.setdefault(name, f"dra_driver_feature_gates.{name}")
    for name, value in wanted.items():
        gate = DRIVER_GATES[name]
        if value and chart.level < gate.since:
            raise DraDriverError(
                "dra_driver_chart_version",
                chart.text,
                f"the driver of this release does not know the feature gate {name} "
                f"(asked by {why[name]}; first in {_first_release(gate.since)})",
                f"use chart {_first_release(gate.since).split(' ')[0]} or later, "
                f"or drop {why[name]}",
            )
        if not value and chart.level < gate.since:
            # an unknown gate fails the driver's flag parsing even when set to false
            raise DraDriverError(
                "dra_driver_feature_gates",
                {name: value},
                f"chart {chart.text} predates the gate (first in {_first_release(gate.since)})",
                f"drop {name} from dra_driver_feature_gates",
            )
    effective = {n: g.default for n, g in DRIVER_GATES.items() if chart.level >= g.since}
    effective.update(wanted)
    for name, on in sorted(effective.items()):
        if not on:
            continue
        gate = DRIVER_GATES[name]
        for other in gate.excludes:
            if effective.get(other):
                raise DraDriverError(
                    variable_for(why, name, other),
                    {name: True, other: True},
                    f"the NVIDIA DRA driver refuses {name} together with {other} "
                    "(ValidateFeatureGates, pkg/featuregates/featuregates.go)",
                    f"turn one of them off ({gate_origin(why, name)} or {gate_origin(why, other)})",
                )
        for dep in gate.requires:
            if not effective.get(dep):
                raise DraDriverError(
                    variable_for(why, name, dep),
                    {name: True, dep: False},
                    f"{name} requires {dep}",
                    f"set dra_driver_feature_gates.{dep}: true or turn {name} off",
                )
    return dict(sorted(wanted.items()))


def variable_for(why: Mapping[str, str], *names: str) -> str:
    for n in names:
        if n in why:
            return why[n].split(" ")[0].split("=")[0].split(".")[0]
    return "dra_driver_feature_gates"


def gate_origin(why: Mapping[str, str], name: str) -> str:
    return why.get(name, f"the driver default {name}=true")


def check_dynamic_mig_release(major_minor: tuple[int, int], variable: str, value: Any) -> None:
    """Refuse DynamicMIG on a Kubernetes release (``(1, 33)``) older than
    ``DYNAMIC_MIG_KUBERNETES_MIN``: it publishes partitionable devices (KEP-4815), which the
    driver supports from that release. ``variable``/``value``: what asked for DynamicMIG.
    Raises DraDriverError."""
    if tuple(major_minor) < DYNAMIC_MIG_KUBERNETES_MIN:
        need = ".".join(map(str, DYNAMIC_MIG_KUBERNETES_MIN))
        have = ".".join(map(str, major_minor))
        raise DraDriverError(
            variable,
            value,
            f"DynamicMIG publishes partitionable devices, which the driver supports from "
            f"Kubernetes {need} (the cluster is {have})",
            f"provision {need} or newer, or set dra_driver_dynamic_mig: false and carve MIG "
            "statically (the mig role)",
        )
