# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The NVIDIA DRA driver Helm chart: which chart, which values, and what refuses.

Pure functions; the role ``dra_driver`` (through the filters in ``plugins/filter/dra_driver.py``)
gathers the facts (the cluster's version, the Node list, the installed release, a local
chart's ``Chart.yaml``) and calls them before it changes anything.

Facts and their sources (kubernetes-sigs/dra-driver-nvidia-gpu, formerly
NVIDIA/k8s-dra-driver-gpu):

- Chart names: ``nvidia-dra-driver-gpu`` up to the calendar release 25.12.0, from the NGC
  repository ``https://helm.ngc.nvidia.com/nvidia``; ``dra-driver-nvidia-gpu`` from the
  SemVer release 0.4.0, at ``oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu``
  (docs/install.md, docs/upgrade.md; deployments/helm/*/Chart.yaml).
- ``kubeVersion: >=1.32.0-0`` in every Chart.yaml from 25.3.2 on; the documented minimum
  is Kubernetes v1.34.2 (docs/prerequisites.md; 1.32/1.33 need the DynamicResourceAllocation
  gate and ``--runtime-config`` for the beta API).
- Upgrade 25.12 -> 0.4: apply the chart's CRDs first (Helm never updates CRDs), pass
  ``nameOverride=nvidia-dra-driver-gpu`` on the first upgrade so that object names and
  selector labels stay, and never downgrade (the plugin checkpoint format changed)
  (docs/upgrade.md).
- Values (deployments/helm/*/values.yaml, templates/validation.yaml): ``nvidiaDriverRoot``
  (``/`` for a host driver, ``/run/nvidia/driver`` with the GPU Operator's driver
  container), ``resources.gpus.enabled`` which renders only with
  ``gpuResourcesEnabledOverride: true``, ``resources.computeDomains.enabled``,
  ``featureGates`` (map name -> bool), ``kubeletPlugin.nodeSelector/tolerations/affinity``,
  ``resourceApiVersion``, ``allowDefaultNamespace``; ``nvidiaCtkPath`` was removed and
  setting it fails the chart; a ``namespace`` value is rejected.
- Driver feature gates and their mutual exclusions: pkg/featuregates/featuregates.go
  (``ValidateFeatureGates``). The gate-to-release mapping of that file's comment
  (~25.3 -> 0.1, ~25.8 -> 0.2, ~25.12 -> 0.3, 0.4) gives the first chart release of each gate.
- The kubelet plugin's default required node affinity (values.yaml ``kubeletPlugin.affinity``)
  and the field cases kubernetes-sigs/dra-driver-nvidia-gpu#1084 (DaemonSet schedules
  nowhere, a 0 == 0 readiness check passes) and #438/#338 (no ``gpu.nvidia.com`` DeviceClass
  when ``resources.gpus.enabled`` is false).

Every error is a ``DraDriverError`` whose text names the variable, the value and the fix.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils import input_guard as ig

__all__ = [
    "CHART_KUBE_VERSION_MIN",
    "DOCUMENTED_KUBERNETES_MIN",
    "DRIVER_GATES",
    "ChartSource",
    "ChartVersion",
    "DraDriverError",
    "DraDriverPlan",
    "chart_source",
    "daemonset_verdict",
    "deep_merge",
    "driver_feature_gates",
    "expected_devices",
    "node_problems",
    "parse_chart_version",
    "parse_release_chart",
    "plan",
    "slice_verdict",
]

LEGACY_CHART = "nvidia-dra-driver-gpu"
SEMVER_CHART = "dra-driver-nvidia-gpu"
NVIDIA_CHARTS = (LEGACY_CHART, SEMVER_CHART)
NGC_REPO_URL = "https://helm.ngc.nvidia.com/nvidia"
OCI_CHART_REF = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"

#: Chart.yaml ``kubeVersion`` of every release from 25.3.2 on: ``>=1.32.0-0``.
CHART_KUBE_VERSION_MIN = (1, 32)
#: docs/prerequisites.md: "Kubernetes v1.34.2 or newer".
DOCUMENTED_KUBERNETES_MIN = (1, 34, 2)
_DOCUMENTED_MIN = ".".join(map(str, DOCUMENTED_KUBERNETES_MIN))
#: DynamicMIG publishes partitionable devices (KEP-4815), which the driver supports from
#: Kubernetes 1.34 (the driver's partitions code: combined slices on 1.34, split from 1.35).
DYNAMIC_MIG_KUBERNETES_MIN = (1, 34)
_CHART_MIN = ".".join(map(str, CHART_KUBE_VERSION_MIN))

DRIVER_NAME = "gpu.nvidia.com"
HOST_DRIVER_ROOT = "/"
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
NAME_OVERRIDE_FROM_LEGACY = LEGACY_CHART
GPU_DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")
COMPUTE_DOMAIN_DEVICE_CLASSES = (
    "compute-domain-daemon.nvidia.com",
    "compute-domain-default-channel.nvidia.com",
)
#: The chart's own toleration (0.4 values.yaml); kept when tolerations are set.
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SHARING_CHOICES = ("time-slicing", "mps")
#: The extended resource the classic NVIDIA device plugin advertises.
DEVICE_PLUGIN_RESOURCE = "nvidia.com/gpu"


class DraDriverError(ValueError):
    """A refused input. ``variable``, ``value``, ``reason``, ``fix``;
    ``str()`` is ``"<variable>=<value>: <reason>; fix: <fix>"``."""

    def __init__(self, variable: str, value: Any, reason: str, fix: str) -> None:
        self.variable = variable
        self.value = value
        self.reason = reason
        self.fix = fix
        super().__init__(f"{variable}={_show(value)}: {reason}; fix: {fix}")


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value if value else '""'
    return repr(value)


# --------------------------------------------------------------------------------------
# Chart versions and where the chart comes from
# --------------------------------------------------------------------------------------

_CHART_VERSION_RE = re.compile(
    r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.\-]+))?(?:\+[0-9A-Za-z.\-]+)?$"
)
#: Calendar releases of the chart (year 25, month) and their driver-gate level.
_CALENDAR_LEVEL = {(25, 3): (0, 1), (25, 8): (0, 2), (25, 12): (0, 3)}


@dataclass(frozen=True, order=True)
class ChartVersion:
    """A release of NVIDIA's DRA driver chart.

    ``level`` is the SemVer line its driver corresponds to ((0, 3) for 25.12.x, (0, 4) for
    0.4.x), used to order releases across the rename; ``legacy`` is True for the calendar
    releases (chart ``nvidia-dra-driver-gpu``).
    """

    level: tuple[int, int]
    patch: int
    text: str = field(compare=False)
    legacy: bool = field(compare=False)

    @property
    def chart_name(self) -> str:
        return LEGACY_CHART if self.legacy else SEMVER_CHART


def parse_chart_version(value: Any, variable: str = "dra_driver_chart_version") -> ChartVersion:
    """Parse ``"25.12.0"``, ``"v25.8.1"``, ``"0.4.0"`` or ``"0.5.0-dev"`` into a ChartVersion.

    Raises DraDriverError for text that is not a version, a calendar release that does not
    exist (25.3, 25.8 and 25.12 do), or a SemVer release before 0.4.0 (0.1-0.3 were never
    chart releases: those lines shipped as 25.3-25.12).
    """
    match = _CHART_VERSION_RE.match(str(value).strip()) if value is not None else None
    if not match:
        raise DraDriverError(
            variable,
            value,
            "not a chart version",
            "give a release of the NVIDIA DRA driver chart such as 0.4.0 (dra-driver-nvidia-gpu) "
            "or 25.12.0 (nvidia-dra-driver-gpu)",
        )
    major, minor, patch = int(match.group(1)), int(match.group(2)), int(match.group(3))
    text = f"{major}.{minor}.{patch}" + (f"-{match.group(4)}" if match.group(4) else "")
    if major >= 25:
        level = _CALENDAR_LEVEL.get((major, minor))
        if level is None:
            raise DraDriverError(
                variable,
                value,
                "no such calendar release of the chart (there are 25.3.x, 25.8.x and 25.12.x; "
                "after 25.12.0 the chart is dra-driver-nvidia-gpu 0.4.0 and later)",
                "give 25.12.0 or 0.4.0",
            )
        return ChartVersion(level, patch, text, True)
    if (major, minor) < (0, 4):
        raise DraDriverError(
            variable,
            value,
            "SemVer releases of the chart start at 0.4.0 (0.1-0.3 shipped as 25.3, 25.8, 25.12)",
            "give 0.4.0 or later, or the calendar release 25.12.0",
        )
    return ChartVersion((major, minor), patch, text, False)


@dataclass(frozen=True)
class ChartSource:
    """Where Helm gets the chart: ``ref`` (chart reference or path), ``version`` (None for a
    local chart), ``repo_url`` (None unless a classic repository), ``name`` (the chart's
    name), ``local``, ``stand_in`` (a local chart that is not NVIDIA's but takes its values)."""

    name: str
    ref: str
    version: Optional[str]  # noqa: UP045 (evaluated at run time on old Pythons)
    repo_url: Optional[str]  # noqa: UP045
    local: bool = False
    stand_in: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ref": self.ref,
            "version": self.version,
            "repo_url": self.repo_url,
            "local": self.local,
            "stand_in": self.stand_in,
        }


def chart_source(
    version: ChartVersion,
    *,
    chart_path: str = "",
    local_chart: Mapping[str, Any] | None = None,
    stand_in: bool = False,
    chart_ref: str = "",
    repo_url: str = "",
) -> ChartSource:
    """Choose the chart for ``version``.

    - ``chart_path`` set (air-gapped sites, the lab): that directory; ``local_chart`` is its
      parsed ``Chart.yaml``. An NVIDIA chart there must be of ``version``; any other chart is
      refused unless ``stand_in`` (a chart with the same values shape, such as the lab's GPU
      simulator chart).
    - else 25.x: ``nvidia-dra-driver-gpu`` from NGC (``repo_url`` overrides the repository);
      0.4+: the OCI chart at registry.k8s.io (``chart_ref`` overrides it, e.g. a mirror).

    Raises DraDriverError naming ``dra_driver_chart_path``/``dra_driver_chart_version``.
    """
    if chart_path:
        meta = dict(local_chart or {})
        name = str(meta.get("name") or "")
        if not name:
            raise DraDriverError(
                "dra_driver_chart_path",
                chart_path,
                "no Chart.yaml with a name was found there",
                "give the directory of an unpacked chart (the one holding Chart.yaml)",
            )
        if name in NVIDIA_CHARTS:
            found = parse_chart_version(meta.get("version"), f"{chart_path}/Chart.yaml version")
            if found.text != version.text or name != version.chart_name:
                raise DraDriverError(
                    "dra_driver_chart_version",
                    version.text,
                    f"dra_driver_chart_path={chart_path} holds {name} {found.text}",
                    f"set dra_driver_chart_version: {found.text}, or point "
                    "dra_driver_chart_path at the chart of that release",
                )
        elif not stand_in:
            raise DraDriverError(
                "dra_driver_chart_path",
                chart_path,
                f"holds chart {name!r}, not NVIDIA's DRA driver chart "
                f"({' or '.join(NVIDIA_CHARTS)})",
                "point it at NVIDIA's chart, or set dra_driver_chart_stand_in: true for a chart "
                "that takes the same values (the lab's GPU simulator chart)",
            )
        return ChartSource(name, chart_path, None, None, True, name not in NVIDIA_CHARTS)
    if version.legacy:
        return ChartSource(LEGACY_CHART, LEGACY_CHART, version.text, repo_url or NGC_REPO_URL)
    return ChartSource(SEMVER_CHART, chart_ref or OCI_CHART_REF, version.text, repo_url or None)


_RELEASE_CHART_RE = re.compile(r"^(?P<name>.+?)-(?P<version>v?\d+\.\d+\.\d+(?:[-+].*)?)$")


def parse_release_chart(chart: str) -> tuple[str, str]:
    """Split Helm's ``<name>-<version>`` chart field (``helm list``/``helm status``), e.g.
    ``"dra-driver-nvidia-gpu-0.5.0-dev"`` -> ``("dra-driver-nvidia-gpu", "0.5.0-dev")``.
    Returns ``(chart, "")`` when no version can be split off."""
    match = _RELEASE_CHART_RE.match(chart or "")
    if not match:
        return chart or "", ""
    return match.group("name"), match.group("version")


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
    for (year, month), lv in _CALENDAR_LEVEL.items():
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
        value = _bool(raw, "dra_driver_feature_gates", {name: raw})
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
                    _var_for(why, name, other),
                    {name: True, other: True},
                    f"the NVIDIA DRA driver refuses {name} together with {other} "
                    "(ValidateFeatureGates, pkg/featuregates/featuregates.go)",
                    f"turn one of them off ({_what(why, name)} or {_what(why, other)})",
                )
        for dep in gate.requires:
            if not effective.get(dep):
                raise DraDriverError(
                    _var_for(why, name, dep),
                    {name: True, dep: False},
                    f"{name} requires {dep}",
                    f"set dra_driver_feature_gates.{dep}: true or turn {name} off",
                )
    return dict(sorted(wanted.items()))


def _var_for(why: Mapping[str, str], *names: str) -> str:
    for n in names:
        if n in why:
            return why[n].split(" ")[0].split("=")[0].split(".")[0]
    return "dra_driver_feature_gates"


def _what(why: Mapping[str, str], name: str) -> str:
    return why.get(name, f"the driver default {name}=true")


def _bool(value: Any, variable: str, shown: Any) -> bool:
    parsed = ig.variable_bool(value)  # Ansible's own booleans, as the role reads them
    if parsed is None:
        raise DraDriverError(variable, shown, "not a boolean", "give true or false")
    return parsed


# --------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``: mappings merge key by key, everything else
    (lists included) is replaced, as Helm merges values files."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def tolerations_for(taints: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tolerations for the GPU nodes' taints (as ``gpu_node_labels_taints`` gives them,
    ``{key, value?, effect}``), always with the chart's own ``nvidia.com/gpu:NoSchedule``
    toleration first. Each taint is tolerated by key and effect (``operator: Exists``)."""
    out = [dict(GPU_TOLERATION)]
    for taint in taints or ():
        if not isinstance(taint, Mapping) or not taint.get("key"):
            raise DraDriverError(
                "dra_driver_node_taints",
                taint,
                "each taint needs a key (and an effect)",
                "give taints as {key: nvidia.com/gpu, effect: NoSchedule}",
            )
        tol = {"key": str(taint["key"]), "operator": "Exists"}
        if taint.get("effect"):
            tol["effect"] = str(taint["effect"])
        if tol not in out:
            out.append(tol)
    return out


@dataclass(frozen=True)
class DraDriverPlan:
    """What the role does: ``chart`` (ChartSource), ``values`` (the whole values mapping
    passed to Helm), ``action`` (``install``, ``upgrade`` or ``reconcile``), ``installed``
    (``"<chart> <version>"`` or ""), ``name_override`` (set because of a 25.12 -> 0.4 upgrade),
    ``resource_api_version`` (the ``resource.k8s.io`` group-version to read DeviceClasses and
    ResourceSlices with), ``device_classes`` (names that must exist), ``dynamic_mig``,
    ``warnings``."""

    chart: ChartSource
    chart_version: ChartVersion
    values: dict[str, Any]
    action: str
    installed: str
    name_override: bool
    resource_api_version: str
    device_classes: tuple[str, ...]
    dynamic_mig: bool
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "chart": self.chart.to_dict(),
            "chart_version": self.chart_version.text,
            "legacy_chart": self.chart_version.legacy,
            "values": self.values,
            "action": self.action,
            "installed": self.installed,
            "name_override": self.name_override,
            "resource_api_version": self.resource_api_version,
            "device_classes": list(self.device_classes),
            "dynamic_mig": self.dynamic_mig,
            "warnings": list(self.warnings),
        }


def _kube_checks(
    kubernetes_version: str,
    kubelet_versions: Mapping[str, str],
    accept_below_documented: bool,
    warnings: list[str],
) -> dv.KubeVersion:
    var = "dra_driver_kubernetes_version"
    try:
        kv = dv.parse_version(kubernetes_version, var)
    except dv.VersionModelError as exc:
        raise DraDriverError(var, kubernetes_version, exc.reason, exc.fix) from None
    versions = [(var, kv)]
    for node, raw in sorted(kubelet_versions.items()):
        try:
            versions.append((f"kubelet of node {node}", dv.parse_version(raw, node)))
        except dv.VersionModelError as exc:
            raise DraDriverError(f"kubelet of node {node}", raw, exc.reason, exc.fix) from None
    for what, v in versions:
        if (v.major, v.minor) < CHART_KUBE_VERSION_MIN:
            raise DraDriverError(
                what,
                str(v),
                f"below the chart's kubeVersion >={_CHART_MIN}.0-0 (DRA with structured "
                "parameters)",
                f"upgrade the cluster to {_DOCUMENTED_MIN} or later before installing the "
                "NVIDIA DRA driver",
            )
        bad = dv.known_bad_releases(v)
        if bad:
            raise DraDriverError(
                what,
                str(v),
                f"a known-bad release for DRA: {bad[0].problem} ({bad[0].source})",
                bad[0].advice,
            )
    verdict = dv.supported_for_provision(kv)
    if not verdict.ok:
        raise DraDriverError(
            var,
            str(kv),
            verdict.reason,
            "use a release the provision roles support "
            f"(1.{dv.PROVISION_MIN_MINOR} to 1.{dv.PROVISION_MAX_MINOR})",
        )
    for what, v in versions:
        patch = v.patch if v.patch is not None else 0
        if (v.major, v.minor, patch) < DOCUMENTED_KUBERNETES_MIN:
            text = (
                f"below the NVIDIA DRA driver's documented minimum Kubernetes v{_DOCUMENTED_MIN} "
                "(docs/prerequisites.md)"
            )
            if not accept_below_documented:
                raise DraDriverError(
                    what,
                    str(v),
                    text,
                    f"upgrade to {_DOCUMENTED_MIN} or later, or set "
                    "dra_driver_accept_below_documented_minimum: true on a cluster whose "
                    "DynamicResourceAllocation gate and resource.k8s.io runtime-config are set "
                    "(the dra_feature_gates role)",
                )
            warnings.append(
                f"{what}={v}: {text}; accepted by dra_driver_accept_below_documented_minimum"
            )
    return kv


def _read_api_version(kv: dv.KubeVersion) -> str:
    """The resource.k8s.io version to read DeviceClasses and ResourceSlices with: v1 where it
    is on by default (1.34+), else the newest beta the provision roles enable (1.33 v1beta2,
    1.32 v1beta1). Source: the version model (served_api_versions)."""
    served = dv.served_api_versions(kv)
    for state in served:
        if state.enabled_by_default and "ResourceSlice" in state.kinds:
            return state.group_version
    betas = [s for s in served if s.version.startswith("v1beta") and "ResourceSlice" in s.kinds]
    if betas:
        return betas[0].group_version
    raise DraDriverError(
        "dra_driver_kubernetes_version",
        str(kv),
        "serves no resource.k8s.io version with ResourceSlices",
        "use Kubernetes 1.32 or later",
    )


_RESOURCE_API_CHOICES = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")


def plan(inputs: Mapping[str, Any]) -> DraDriverPlan:
    """Check every input and build the Helm values. Raises DraDriverError on the first refusal.

    ``inputs`` keys (the role's variables without the ``dra_driver_`` prefix, plus facts):

    - ``chart_version`` (str), ``chart_path`` (str), ``chart_ref``, ``chart_repo_url``,
      ``chart_stand_in`` (bool), ``local_chart`` (parsed Chart.yaml of ``chart_path``)
    - ``kubernetes_version`` (the API server's, str), ``kubelet_versions`` (node -> version
      of the GPU nodes), ``accept_below_documented_minimum`` (bool)
    - ``gpu_operator`` (bool), ``nvidia_driver_root`` (str, "" = by ``gpu_operator``)
    - ``compute_domains`` (bool), ``sharing`` (list), ``dynamic_mig`` (bool),
      ``feature_gates`` (dict), ``resource_api_version`` (str, "" = the chart detects it)
    - ``node_selector`` (dict), ``node_taints`` (list of ``{key, value?, effect}``)
    - ``namespace`` (str), ``extra_values`` (dict merged last)
    - ``installed`` (None or ``{"chart": "<name>-<version>", "values": {...}}`` of the release)
    """
    warnings: list[str] = []
    chart_v = parse_chart_version(inputs.get("chart_version"))
    source = chart_source(
        chart_v,
        chart_path=str(inputs.get("chart_path") or ""),
        local_chart=inputs.get("local_chart"),
        stand_in=bool(inputs.get("chart_stand_in")),
        chart_ref=str(inputs.get("chart_ref") or ""),
        repo_url=str(inputs.get("chart_repo_url") or ""),
    )
    kv = _kube_checks(
        str(inputs.get("kubernetes_version") or ""),
        dict(inputs.get("kubelet_versions") or {}),
        bool(inputs.get("accept_below_documented_minimum")),
        warnings,
    )

    namespace = str(inputs.get("namespace") or "")
    extra = inputs.get("extra_values") or {}
    if not isinstance(extra, Mapping):
        raise DraDriverError(
            "dra_driver_extra_values", extra, "not a mapping", "give Helm values as a dict"
        )

    # --- the driver root
    gpu_operator = bool(inputs.get("gpu_operator"))
    root = str(inputs.get("nvidia_driver_root") or "")
    if not root:
        root = OPERATOR_DRIVER_ROOT if gpu_operator else HOST_DRIVER_ROOT
    elif gpu_operator and root == HOST_DRIVER_ROOT:
        raise DraDriverError(
            "dra_driver_nvidia_driver_root",
            root,
            "the GPU Operator's driver container puts the driver under /run/nvidia/driver, "
            "not on the host root (dra_driver_gpu_operator is true)",
            "leave dra_driver_nvidia_driver_root empty, or set it to /run/nvidia/driver",
        )
    if not root.startswith("/"):
        raise DraDriverError(
            "dra_driver_nvidia_driver_root",
            root,
            "not an absolute path",
            "give / or /run/nvidia/driver",
        )

    # --- feature gates
    dynamic_mig = bool(inputs.get("dynamic_mig"))
    gates = driver_feature_gates(
        chart_v,
        sharing=list(inputs.get("sharing") or ()),
        dynamic_mig=dynamic_mig,
        gates=inputs.get("feature_gates") or {},
    )
    dynamic_mig = bool(gates.get("DynamicMIG"))
    if dynamic_mig:
        need = ".".join(map(str, DYNAMIC_MIG_KUBERNETES_MIN))
        if (kv.major, kv.minor) < DYNAMIC_MIG_KUBERNETES_MIN:
            raise DraDriverError(
                "dra_driver_dynamic_mig",
                True,
                f"dynamic MIG needs partitionable devices, which the driver supports from "
                f"Kubernetes {need} (the cluster is {kv})",
                f"upgrade to {need} or later, or carve MIG statically (the mig role)",
            )
        state = dv.gate_state("DRAPartitionableDevices", kv)
        if not state.default:
            warnings.append(
                f"DynamicMIG: DRAPartitionableDevices is {state.describe()} in {kv.minor_version}; "
                "enable it on kube-apiserver and kube-scheduler (dra_feature_gates_features: "
                "[partitionable-devices]) or the dynamic MIG devices are dropped"
            )
        warnings.append(
            "DynamicMIG: the driver destroys MIG devices it did not create at start; do not "
            "also carve MIG with the mig role or a MIG manager on these nodes"
        )

    # --- resource API version
    read_api = _read_api_version(kv)
    want_api = str(inputs.get("resource_api_version") or "")
    if want_api:
        served = {s.group_version: s for s in dv.served_api_versions(kv)}
        if want_api not in _RESOURCE_API_CHOICES or want_api not in served:
            raise DraDriverError(
                "dra_driver_resource_api_version",
                want_api,
                f"Kubernetes {kv.minor_version} serves "
                + ", ".join(v for v in _RESOURCE_API_CHOICES if v in served)
                + " of those the chart takes",
                "leave it empty so that the chart picks the newest one the cluster serves, or "
                "give one of those",
            )
        if not served[want_api].enabled_by_default:
            warnings.append(
                f"resourceApiVersion {want_api} is off by default in {kv.minor_version}: "
                f"kube-apiserver needs --runtime-config={want_api}=true"
            )
    effective_api = want_api or read_api
    if effective_api == "resource.k8s.io/v1":
        ext = dv.gate_state("DRAExtendedResource", kv)
        if not ext.default:
            warnings.append(
                "the chart sets extendedResourceName: nvidia.com/gpu on DeviceClass "
                f"gpu.nvidia.com (resource.k8s.io/v1), but DRAExtendedResource is "
                f"{ext.describe()} in {kv.minor_version}: pods asking for nvidia.com/gpu are "
                "served by DRA only with that gate on kube-apiserver, kube-scheduler, "
                "kube-controller-manager and the kubelet (dra_feature_gates_features: "
                "[extended-resource])"
            )

    # --- scheduling of the kubelet plugin
    node_selector = inputs.get("node_selector") or {}
    if not isinstance(node_selector, Mapping):
        raise DraDriverError(
            "dra_driver_node_selector", node_selector, "not a mapping", "give label key -> value"
        )
    node_selector = {str(k): str(v) for k, v in node_selector.items()}
    tolerations = tolerations_for(inputs.get("node_taints") or [])

    values: dict[str, Any] = {
        "nvidiaDriverRoot": root,
        "gpuResourcesEnabledOverride": True,
        "resources": {
            "gpus": {"enabled": True},
            "computeDomains": {"enabled": bool(inputs.get("compute_domains"))},
        },
        "kubeletPlugin": {"nodeSelector": node_selector, "tolerations": tolerations},
    }
    if gates:
        values["featureGates"] = gates
    if want_api:
        values["resourceApiVersion"] = want_api

    # --- the installed release: upgrade path, nameOverride, downgrade
    action, installed_text, name_override = "install", "", False
    installed = inputs.get("installed")
    if installed:
        inst_name, inst_version = parse_release_chart(str(installed.get("chart") or ""))
        inst_values = installed.get("values") or {}
        installed_text = f"{inst_name} {inst_version}".strip()
        action = "upgrade"
        if inst_name in NVIDIA_CHARTS and inst_version and not source.stand_in:
            inst_v = parse_chart_version(inst_version, "installed chart version")
            if inst_v.legacy is False and chart_v.legacy:
                raise DraDriverError(
                    "dra_driver_chart_version",
                    chart_v.text,
                    f"the release has {inst_name} {inst_v.text}; going back to the calendar "
                    "releases is not supported (the kubelet plugin's checkpoint format changed "
                    "in 0.4, docs/upgrade.md)",
                    f"keep dra_driver_chart_version at {inst_v.text} or later",
                )
            if inst_v == chart_v and inst_name == chart_v.chart_name:
                action = "reconcile"
            if not chart_v.legacy and (
                inst_v.legacy or inst_values.get("nameOverride") == NAME_OVERRIDE_FROM_LEGACY
            ):
                name_override = True
        elif inst_name == source.name and inst_version == (
            source.version or str((inputs.get("local_chart") or {}).get("version") or "")
        ):
            action = "reconcile"
    if name_override:
        values["nameOverride"] = NAME_OVERRIDE_FROM_LEGACY

    merged = deep_merge(values, extra)
    _check_values(merged, namespace, name_override)
    device_classes = GPU_DEVICE_CLASSES
    if merged["resources"].get("computeDomains", {}).get("enabled"):
        device_classes = GPU_DEVICE_CLASSES + COMPUTE_DOMAIN_DEVICE_CLASSES
    if source.stand_in:
        warnings.append(
            f"chart {source.name} at {source.ref} stands in for NVIDIA's {chart_v.chart_name} "
            f"{chart_v.text} (dra_driver_chart_stand_in)"
        )
    return DraDriverPlan(
        chart=source,
        chart_version=chart_v,
        values=merged,
        action=action,
        installed=installed_text,
        name_override=name_override,
        resource_api_version=read_api,
        device_classes=device_classes,
        dynamic_mig=dynamic_mig,
        warnings=tuple(warnings),
    )


def _check_values(values: Mapping[str, Any], namespace: str, name_override: bool) -> None:
    """The chart's own refusals (templates/validation.yaml), checked before Helm runs."""
    if "nvidiaCtkPath" in values:
        raise DraDriverError(
            "dra_driver_extra_values.nvidiaCtkPath",
            values["nvidiaCtkPath"],
            "the chart removed nvidiaCtkPath and fails when it is set",
            "drop it (set nvidiaCDIHookPath only if a separate nvidia-cdi-hook must be used)",
        )
    if "namespace" in values:
        raise DraDriverError(
            "dra_driver_extra_values.namespace",
            values["namespace"],
            "the chart rejects a namespace value",
            "drop it and set dra_driver_namespace",
        )
    if not namespace or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", namespace):
        raise DraDriverError(
            "dra_driver_namespace",
            namespace,
            "not a namespace name",
            "give e.g. nvidia-dra-driver-gpu",
        )
    if namespace == "default" and values.get("allowDefaultNamespace") is not True:
        raise DraDriverError(
            "dra_driver_namespace",
            namespace,
            "the chart refuses to install into the default namespace",
            "use a namespace of its own (nvidia-dra-driver-gpu), or set "
            "dra_driver_extra_values.allowDefaultNamespace: true",
        )
    gpus = values.get("resources", {}).get("gpus", {})
    if gpus.get("enabled") is not True:
        raise DraDriverError(
            "dra_driver_extra_values.resources.gpus.enabled",
            gpus.get("enabled"),
            "without the GPU kubelet plugin there is no DeviceClass gpu.nvidia.com and no GPU "
            "ResourceSlice, and claims fail with 'device class gpu.nvidia.com does not exist'",
            "drop the override (the role sets resources.gpus.enabled: true)",
        )
    if values.get("gpuResourcesEnabledOverride") is not True:
        raise DraDriverError(
            "dra_driver_extra_values.gpuResourcesEnabledOverride",
            values.get("gpuResourcesEnabledOverride"),
            "the chart refuses to render resources.gpus.enabled without it",
            "drop the override (the role sets gpuResourcesEnabledOverride: true)",
        )
    if name_override and values.get("nameOverride") != NAME_OVERRIDE_FROM_LEGACY:
        raise DraDriverError(
            "dra_driver_extra_values.nameOverride",
            values.get("nameOverride"),
            "a release first installed from nvidia-dra-driver-gpu (25.x) keeps its object "
            "names only with nameOverride: nvidia-dra-driver-gpu (docs/upgrade.md)",
            "drop nameOverride from dra_driver_extra_values",
        )


# --------------------------------------------------------------------------------------
# Nodes: scheduling of the kubelet plugin, the classic device plugin
# --------------------------------------------------------------------------------------

#: values.yaml ``kubeletPlugin.affinity`` defaults: any one of these labels.
_DEFAULT_AFFINITY_LABELS = {
    True: (
        ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
        ("nvidia.com/gpu.present", "true"),
    ),
    False: (
        ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
        ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
        ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
        ("nvidia.com/gpu.present", "true"),
    ),
}


def default_affinity(legacy: bool) -> dict[str, Any]:
    """The chart's default ``kubeletPlugin.affinity`` (25.x: ``legacy`` True; 0.4+: False)."""
    terms = [
        {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]}
        for k, v in _DEFAULT_AFFINITY_LABELS[legacy]
    ]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def _expr_matches(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key, op = expr.get("key"), expr.get("operator")
    vals = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return key in labels and labels[key] in vals
    if op == "NotIn":
        return key not in labels or labels[key] not in vals
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and vals:
        try:
            have, want = int(labels[key]), int(vals[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _describe_expr(expr: Mapping[str, Any]) -> str:
    op, key, vals = expr.get("operator"), expr.get("key"), expr.get("values") or []
    if op == "In":
        return f"{key}={'|'.join(str(v) for v in vals)}"
    if op == "Exists":
        return f"{key} (any value)"
    if op == "DoesNotExist":
        return f"no {key}"
    if op == "NotIn":
        return f"{key} not in {list(vals)}"
    return f"{key} {op} {list(vals)}"


def scheduling_problem(
    node: Mapping[str, Any],
    node_selector: Mapping[str, str] | None,
    affinity: Mapping[str, Any] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
) -> str:
    """Why a DaemonSet pod with this nodeSelector/affinity/tolerations cannot run on
    ``node`` (a Node object), or "" when it can. Only required node affinity counts, and
    only NoSchedule/NoExecute taints other than the node-condition taints every DaemonSet
    pod tolerates (the DaemonSet controller's rules, pkg/controller/daemon/daemon_controller.go
    NodeShouldRunDaemonPod)."""
    labels = node.get("metadata", {}).get("labels") or {}
    missing = [f"{k}={v}" for k, v in (node_selector or {}).items() if labels.get(k) != str(v)]
    if missing:
        return (
            "lacks the label(s) " + ", ".join(missing) + " that kubeletPlugin.nodeSelector requires"
        )
    required = ((affinity or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(
        all(_expr_matches(labels, e) for e in t.get("matchExpressions") or []) for t in terms
    ):
        wants = [
            " and ".join(_describe_expr(e) for e in t.get("matchExpressions") or []) for t in terms
        ]
        return (
            "matches none of the kubelet plugin's required node affinity terms: it needs one of "
            + "; ".join(wants)
        )
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if taint.get("key") in DAEMONSET_TOLERATED_TAINTS:
            continue
        if not any(_tolerates(t, taint) for t in tolerations or []):
            value = f"={taint['value']}" if taint.get("value") else ""
            return (
                f"has the taint {taint.get('key')}{value}:{taint.get('effect')} that "
                "kubeletPlugin.tolerations do not tolerate"
            )
    return ""


#: Taints every DaemonSet pod tolerates: the DaemonSet controller adds these tolerations
#: itself (pkg/controller/daemon/util/daemonset_util.go AddOrUpdateDaemonPodTolerations).
DAEMONSET_TOLERATED_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable",
    }
)


def _tolerates(tol: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if tol.get("effect") and tol.get("effect") != taint.get("effect"):
        return False
    op = tol.get("operator") or "Equal"
    if not tol.get("key"):
        return op == "Exists"
    if tol.get("key") != taint.get("key"):
        return False
    return op == "Exists" or str(tol.get("value") or "") == str(taint.get("value") or "")


def _node_name(node: Mapping[str, Any]) -> str:
    return str(node.get("metadata", {}).get("name") or "")


def node_problems(
    nodes: Sequence[Mapping[str, Any]],
    gpu_nodes: Sequence[str],
    values: Mapping[str, Any],
    *,
    legacy_chart: bool = False,
    coexist_with_device_plugin: bool = False,
) -> list[str]:
    """Problems of the GPU nodes found in one Node list, each naming the node and the fix.

    - a GPU host without a Node object;
    - a GPU node the kubelet plugin would not be scheduled on with ``values`` (its
      ``kubeletPlugin.nodeSelector``, ``affinity`` or the chart default, ``tolerations``);
    - a GPU node whose ``status.allocatable`` has ``nvidia.com/gpu`` (the classic NVIDIA
      device plugin runs there), unless ``coexist_with_device_plugin``.
    """
    by_name = {_node_name(n): n for n in nodes}
    plugin = values.get("kubeletPlugin") or {}
    affinity = plugin.get("affinity") or default_affinity(legacy_chart)
    out: list[str] = []
    for name in gpu_nodes:
        node = by_name.get(name)
        if node is None:
            out.append(
                f"GPU node {name}: no Node object of that name; fix: join the node to the cluster "
                "or set kubernetes_node_name for the host"
            )
            continue
        why = scheduling_problem(
            node, plugin.get("nodeSelector"), affinity, plugin.get("tolerations")
        )
        if why:
            out.append(
                f"GPU node {name} {why}, so the kubelet plugin would not run there; fix: label it "
                "with the gpu_node_labels role (playbooks/gpu_node_labels.yml) or set "
                "dra_driver_node_selector/dra_driver_node_taints to what it carries"
            )
        alloc = (node.get("status") or {}).get("allocatable") or {}
        plugin_gpus = str(alloc.get(DEVICE_PLUGIN_RESOURCE, "0"))
        if plugin_gpus not in ("0", "") and not coexist_with_device_plugin:
            out.append(
                f"GPU node {name} advertises {DEVICE_PLUGIN_RESOURCE}="
                f"{alloc[DEVICE_PLUGIN_RESOURCE]} in status.allocatable: the classic NVIDIA "
                "device plugin runs there and would hand out the same GPUs as DRA; fix: remove "
                "the device plugin (GPU Operator devicePlugin.enabled=false) or set "
                "dra_driver_coexist_with_device_plugin: true"
            )
    return out


# --------------------------------------------------------------------------------------
# Verification: the kubelet-plugin DaemonSet and the ResourceSlices
# --------------------------------------------------------------------------------------


def find_kubelet_plugin_daemonset(
    daemonsets: Sequence[Mapping[str, Any]], release: str, name: str = ""
) -> Mapping[str, Any] | None:
    """The release's kubelet-plugin DaemonSet from one DaemonSet list: ``name`` when given,
    else the one with Helm's ``meta.helm.sh/release-name`` annotation equal to ``release``
    and ``kubelet-plugin`` or ``kubeletplugin`` in its name."""
    for ds in daemonsets:
        meta = ds.get("metadata") or {}
        if name:
            if meta.get("name") == name:
                return ds
            continue
        ann = meta.get("annotations") or {}
        ds_name = str(meta.get("name") or "").replace("-", "")
        if ann.get("meta.helm.sh/release-name") == release and "kubeletplugin" in ds_name:
            return ds
    return None


def daemonset_verdict(
    ds: Mapping[str, Any] | None,
    gpu_nodes: Sequence[str],
    nodes: Sequence[Mapping[str, Any]],
    *,
    release: str = "",
    namespace: str = "",
) -> dict[str, Any]:
    """Whether the kubelet-plugin DaemonSet runs on every GPU node.

    Returns ``{"ok": bool, "final": bool, "message": str}``. ``ok`` needs the controller to
    have seen the newest spec (``status.observedGeneration >= metadata.generation``),
    ``desiredNumberScheduled == len(gpu_nodes) > 0`` and ``numberReady`` and
    ``updatedNumberScheduled`` equal to it. ``final`` is True when waiting cannot help: the
    controller has seen the spec and schedules the wrong number of pods (for example 0 of 0:
    kubernetes-sigs/dra-driver-nvidia-gpu#1084). The message names the GPU nodes the pod
    template does not fit (missing labels, untolerated taints) from the live DaemonSet.
    """
    where = f"{namespace}/" if namespace else ""
    if ds is None:
        return {
            "ok": False,
            "final": False,
            "message": f"no kubelet-plugin DaemonSet of release {release!r} in namespace "
            f"{namespace!r} yet",
        }
    meta, status = ds.get("metadata") or {}, ds.get("status") or {}
    name = f"{where}{meta.get('name')}"
    desired = int(status.get("desiredNumberScheduled") or 0)
    ready = int(status.get("numberReady") or 0)
    updated = int(status.get("updatedNumberScheduled") or 0)
    seen = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    want = len(gpu_nodes)
    counts = f"desiredNumberScheduled {desired}, numberReady {ready}, updated {updated}"
    if not seen:
        return {
            "ok": False,
            "final": False,
            "message": f"DaemonSet {name}: rollout not observed yet ({counts})",
        }
    if desired != want or desired == 0:
        spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        by_name = {_node_name(n): n for n in nodes}
        misfits = []
        for node_name in gpu_nodes:
            node = by_name.get(node_name)
            why = (
                "has no Node object"
                if node is None
                else scheduling_problem(
                    node, spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")
                )
            )
            if why:
                misfits.append(f"{node_name} {why}")
        extra = [
            _node_name(n)
            for n in nodes
            if _node_name(n) not in gpu_nodes
            and not scheduling_problem(
                n, spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")
            )
        ]
        text = (
            f"DaemonSet {name} is scheduled on {desired} node(s) but there are {want} GPU "
            f"node(s) ({counts})"
        )
        if desired == 0:
            text += "; a DaemonSet with 0 of 0 pods ready serves no GPU"
        if misfits:
            text += "; " + "; ".join(misfits)
        if extra:
            text += "; it also fits non-GPU node(s) " + ", ".join(sorted(extra))
        text += (
            "; fix: label the GPU nodes (playbooks/gpu_node_labels.yml, "
            "nvidia.com/gpu.present=true) or set dra_driver_node_selector or "
            "dra_driver_extra_values.kubeletPlugin to match them"
        )
        return {"ok": False, "final": True, "message": text}
    if ready != desired or updated != desired:
        return {
            "ok": False,
            "final": False,
            "message": f"DaemonSet {name}: {ready} of {desired} pods ready, {updated} updated",
        }
    return {
        "ok": True,
        "final": True,
        "message": f"DaemonSet {name}: {ready} of {desired} pods ready",
    }


def expected_devices(gpus: Sequence[Mapping[str, Any]] | None) -> int | None:
    """Devices the driver publishes for a node with these GPUs (``gpu_facts``'
    ``gpufleet_gpus``): one per MIG device of a GPU whose current MIG mode is Enabled, else one
    per GPU (the static path of the driver: nvlib.go GetPerGpuAllocatableDevices). None when
    the facts are unknown."""
    if gpus is None:
        return None
    total = 0
    for gpu in gpus:
        if gpu.get("mig_mode_current") == "Enabled":
            total += len(gpu.get("mig_devices") or [])
        else:
            total += 1
    return total


def slice_verdict(
    slices: Sequence[Mapping[str, Any]],
    expected: Mapping[str, int | None],
    *,
    driver: str = DRIVER_NAME,
    dynamic_mig: bool = False,
) -> dict[str, Any]:
    """Compare the ResourceSlices of ``driver`` (one list of every slice) with the devices
    each GPU node should publish (``expected``: node -> count, None = at least one).

    Per node, only the slices of the newest generation of each pool count, and a pool whose
    ``resourceSliceCount`` slices are not all there yet is incomplete. With ``dynamic_mig``
    the driver publishes every possible MIG placement, so only "at least one" is checked.
    Returns ``{"ok": bool, "devices": {node: n}, "problems": [str]}``.
    """
    pools: dict[tuple[str, str], dict[str, Any]] = {}
    for sl in slices:
        spec = sl.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") != driver or not node:
            continue
        pool = spec.get("pool") or {}
        key = (str(node), str(pool.get("name") or node))
        gen = int(pool.get("generation") or 0)
        entry = pools.setdefault(key, {"generation": gen, "slices": [], "count": 0})
        if gen > entry["generation"]:
            entry.update(generation=gen, slices=[], count=0)
        if gen == entry["generation"]:
            entry["slices"].append(sl)
            entry["count"] = max(entry["count"], int(pool.get("resourceSliceCount") or 1))
    devices: dict[str, int] = {}
    incomplete: set[str] = set()
    for (node, _), entry in pools.items():
        devices[node] = devices.get(node, 0) + sum(
            len((s.get("spec") or {}).get("devices") or []) for s in entry["slices"]
        )
        if len(entry["slices"]) < entry["count"]:
            incomplete.add(node)
    problems = []
    for node, want in sorted(expected.items()):
        have = devices.get(node)
        if have is None:
            problems.append(f"GPU node {node} has no ResourceSlice of driver {driver}")
        elif node in incomplete:
            problems.append(f"GPU node {node}: its ResourceSlice pool is incomplete")
        elif dynamic_mig or want is None:
            if have < 1:
                problems.append(f"GPU node {node} publishes no device of driver {driver}")
        elif have != want:
            problems.append(
                f"GPU node {node} publishes {have} device(s) of driver {driver}, its GPU facts "
                f"say {want} (one per GPU, one per MIG device of a MIG-enabled GPU)"
            )
    return {"ok": not problems, "devices": devices, "problems": problems}
