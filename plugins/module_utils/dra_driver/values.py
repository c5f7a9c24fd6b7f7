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

The parts, one job each: ``dra_driver.chart`` (chart names, versions, sources, the
minimums, ``DraDriverError``), ``dra_driver.gates`` (the driver's feature gates),
``dra_driver.nodes`` (where the kubelet plugin can schedule, the GPU nodes' problems),
``dra_driver.health`` (the DaemonSet and the ResourceSlices of a running driver); this
module checks the inputs and builds the Helm values (``plan``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.merge import deep_merge
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import resource_versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    BELOW_CHART_KUBE_VERSION,
    BELOW_DOCUMENTED_MINIMUM,
    CHART_MIN,
    COMPUTE_DOMAIN_DEVICE_CLASSES,
    DOCUMENTED_MIN,
    GPU_CLASS,
    GPU_DEVICE_CLASSES,
    GPU_TOLERATION,
    HOST_DRIVER_ROOT,
    NAME_OVERRIDE_FROM_LEGACY,
    NVIDIA_CHARTS,
    OPERATOR_DRIVER_ROOT,
    VFIO_DEVICE_CLASS,
    VFIO_DEVICE_CLASS_LEVEL,
    ChartSource,
    ChartVersion,
    DraDriverError,
    chart_downgrade,
    chart_kubernetes_minimum,
    chart_source,
    parse_chart_version,
    parse_release_chart,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.gates import (
    check_dynamic_mig_release,
    driver_feature_gates,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.scheduling import (
    tolerations_for,
)

__all__ = [
    "DraDriverPlan",
    "deep_merge",
    "driver_root",
    "plan",
]


# --------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------


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


def _release(v: dra_core.KubeVersion) -> tuple[int, int, int]:
    return v.major, v.minor, v.patch if v.patch is not None else 0


def _kube_checks(
    kubernetes_version: str,
    kubelet_versions: Mapping[str, str],
    accept_below_documented: bool,
    warnings: list[str],
) -> dra_core.KubeVersion:
    var = "dra_driver_kubernetes_version"
    try:
        kv = dra_core.parse_version(kubernetes_version, var)
    except dra_core.VersionModelError as exc:
        raise DraDriverError(var, kubernetes_version, exc.reason, exc.fix) from None
    versions = [(var, kv)]
    for node, raw in sorted(kubelet_versions.items()):
        try:
            versions.append((f"kubelet of node {node}", dra_core.parse_version(raw, node)))
        except dra_core.VersionModelError as exc:
            raise DraDriverError(f"kubelet of node {node}", raw, exc.reason, exc.fix) from None
    for what, v in versions:
        if chart_kubernetes_minimum(_release(v)) == BELOW_CHART_KUBE_VERSION:
            raise DraDriverError(
                what,
                str(v),
                f"below the chart's kubeVersion >={CHART_MIN}.0-0 (DRA with structured parameters)",
                f"upgrade the cluster to {DOCUMENTED_MIN} or later before installing the "
                "NVIDIA DRA driver",
            )
        bad = dra_skew.known_bad_releases(v)
        if bad:
            raise DraDriverError(
                what,
                str(v),
                f"a known-bad release for DRA: {bad[0].problem} ({bad[0].source})",
                bad[0].advice,
            )
    verdict = dra_skew.supported_for_provision(kv)
    if not verdict.ok:
        raise DraDriverError(
            var,
            str(kv),
            verdict.reason,
            "use a release the provision roles support "
            f"(1.{dra_core.PROVISION_MIN_MINOR} to 1.{dra_core.PROVISION_MAX_MINOR})",
        )
    for what, v in versions:
        if chart_kubernetes_minimum(_release(v)) == BELOW_DOCUMENTED_MINIMUM:
            text = (
                f"below the NVIDIA DRA driver's documented minimum Kubernetes v{DOCUMENTED_MIN} "
                "(docs/prerequisites.md)"
            )
            if not accept_below_documented:
                raise DraDriverError(
                    what,
                    str(v),
                    text,
                    f"upgrade to {DOCUMENTED_MIN} or later, or set "
                    "dra_driver_accept_below_documented_minimum: true on a cluster whose "
                    "DynamicResourceAllocation gate and resource.k8s.io runtime-config are set "
                    "(the dra_feature_gates role)",
                )
            warnings.append(
                f"{what}={v}: {text}; accepted by dra_driver_accept_below_documented_minimum"
            )
    return kv


def _read_api_version(kv: dra_core.KubeVersion) -> str:
    """The resource.k8s.io version to read DeviceClasses and ResourceSlices with: v1 where it
    is on by default (1.34+), else the newest beta the provision roles enable (1.33 v1beta2,
    1.32 v1beta1). Source: the version model (served_api_versions)."""
    served = dra_api.served_api_versions(kv)
    for state in served:
        if state.enabled_by_default and "ResourceSlice" in state.kinds:
            return state.group_version
    betas = [
        s
        for s in served
        if s.version in resource_versions.BETA_RESOURCE_VERSIONS and "ResourceSlice" in s.kinds
    ]
    if betas:
        return betas[0].group_version
    first = dra_api.first_release_serving("ResourceSlice", resource_versions.BETA_RESOURCE_VERSIONS)
    raise DraDriverError(
        "dra_driver_kubernetes_version",
        str(kv),
        "serves no resource.k8s.io version with ResourceSlices",
        f"use Kubernetes {first} or later",
    )


_RESOURCE_API_CHOICES = tuple(
    f"{dra_core.RESOURCE_GROUP}/{v}" for v in resource_versions.OBJECT_RESOURCE_VERSIONS
)


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
    - ``node_selector`` (dict), ``node_taints`` (list of ``{key, value?, effect}``),
      ``device_plugin_pool`` (bool: a GPU host of the inventory is on the device-plugin path;
      the selector then also asks for ``gpufleet.io/gpu-path: dra``)
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

    root = driver_root(inputs)
    gates, dynamic_mig = _driver_gates(inputs, chart_v, kv, warnings)
    read_api, want_api = _resource_api(inputs, kv, warnings)
    node_selector, tolerations = _kubelet_plugin_placement(inputs)

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

    if source.stand_in:
        # the stand-in (the lab's GPU simulator chart) renders what this release renders,
        # e.g. DeviceClass vfio.gpu.nvidia.com from 25.12.0 on
        values["simulator"] = {"nvidiaChartVersion": chart_v.text}
    action, installed_text, name_override = _release_action(inputs, source, chart_v)
    if name_override:
        values["nameOverride"] = NAME_OVERRIDE_FROM_LEGACY

    merged = deep_merge(values, extra)
    _check_values(merged, namespace, name_override)
    device_classes = GPU_DEVICE_CLASSES
    if chart_v.level >= VFIO_DEVICE_CLASS_LEVEL:
        device_classes += (VFIO_DEVICE_CLASS,)
    if merged["resources"].get("computeDomains", {}).get("enabled"):
        device_classes += COMPUTE_DOMAIN_DEVICE_CLASSES
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


def driver_root(inputs: Mapping[str, Any]) -> str:
    """``nvidiaDriverRoot``: ``inputs["nvidia_driver_root"]`` when given, else by
    ``inputs["gpu_operator"]`` (``/run/nvidia/driver``, the GPU Operator's driver container,
    or ``/``, a driver installed on the host). The one owner of that decision: the chart
    values here, and the validate role's ``validate_nvidia_driver_root`` through the filter
    ``dra_driver_root``. Raises DraDriverError for ``/`` with the GPU Operator or a relative
    path."""
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
    return root


def _driver_gates(
    inputs: Mapping[str, Any], chart_v: ChartVersion, kv: dra_core.KubeVersion, warnings: list[str]
) -> tuple[dict[str, bool], bool]:
    """The driver's ``featureGates`` and whether DynamicMIG is on; DynamicMIG refused below
    ``DYNAMIC_MIG_KUBERNETES_MIN`` and warned about (``warnings``) where it needs care."""
    dynamic_mig = bool(inputs.get("dynamic_mig"))
    gates = driver_feature_gates(
        chart_v,
        sharing=list(inputs.get("sharing") or ()),
        dynamic_mig=dynamic_mig,
        gates=inputs.get("feature_gates") or {},
    )
    dynamic_mig = bool(gates.get("DynamicMIG"))
    if dynamic_mig:
        check_dynamic_mig_release((kv.major, kv.minor), "dra_driver_dynamic_mig", True)
        state = dra_gates.gate_state("DRAPartitionableDevices", kv)
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
    return gates, dynamic_mig


def _resource_api(
    inputs: Mapping[str, Any], kv: dra_core.KubeVersion, warnings: list[str]
) -> tuple[str, str]:
    """``(read_api, want_api)``: the ``resource.k8s.io`` version to read with, and the
    ``resourceApiVersion`` asked for ("" = the chart detects it), refused where the cluster
    does not serve it."""
    read_api = _read_api_version(kv)
    want_api = str(inputs.get("resource_api_version") or "")
    if want_api:
        served = {s.group_version: s for s in dra_api.served_api_versions(kv)}
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
        ext = dra_gates.gate_state("DRAExtendedResource", kv)
        if not ext.default:
            warnings.append(
                "the chart sets extendedResourceName: nvidia.com/gpu on DeviceClass "
                f"{GPU_CLASS} (resource.k8s.io/v1), but DRAExtendedResource is "
                f"{ext.describe()} in {kv.minor_version}: pods asking for nvidia.com/gpu are "
                "served by DRA only with that gate on kube-apiserver, kube-scheduler, "
                "kube-controller-manager and the kubelet (dra_feature_gates_features: "
                "[extended-resource])"
            )
    return read_api, want_api


def _kubelet_plugin_placement(
    inputs: Mapping[str, Any],
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The kubelet plugin's ``nodeSelector`` and ``tolerations``. Where the inventory has a
    device-plugin pool (``device_plugin_pool``) the selector also asks for the DRA path label
    (``gpufleet.io/gpu-path: dra``, set by the gpu_node_labels role), so that the plugin
    stays off the device-plugin pools; without one the selector is the one given, as before
    the inventory declared paths."""
    node_selector = inputs.get("node_selector") or {}
    if not isinstance(node_selector, Mapping):
        raise DraDriverError(
            "dra_driver_node_selector", node_selector, "not a mapping", "give label key -> value"
        )
    node_selector = {str(k): str(v) for k, v in node_selector.items()}
    if gp.PATH_LABEL in node_selector and node_selector[gp.PATH_LABEL] != gp.DRA:
        raise DraDriverError(
            "dra_driver_node_selector",
            node_selector,
            f"selects {gp.PATH_LABEL}={node_selector[gp.PATH_LABEL]}, the nodes of another GPU "
            "path than DRA: the kubelet plugin would advertise the GPUs the device plugin "
            "already hands out",
            f"drop {gp.PATH_LABEL} from it (the role adds {gp.PATH_LABEL}: {gp.DRA} itself "
            "where the inventory has a device-plugin pool)",
        )
    if bool(inputs.get("device_plugin_pool")):
        node_selector[gp.PATH_LABEL] = gp.DRA
    tolerations = tolerations_for(
        inputs.get("node_taints") or [],
        [GPU_TOLERATION],
        variable="dra_driver_node_taints",
        error=DraDriverError,
    )
    return node_selector, tolerations


def _release_action(
    inputs: Mapping[str, Any], source: ChartSource, chart_v: ChartVersion
) -> tuple[str, str, bool]:
    """``(action, installed, name_override)`` from the installed release: ``install``,
    ``upgrade`` or ``reconcile``; ``"<chart> <version>"``; whether ``nameOverride`` keeps
    the 25.12 object names. Refuses a downgrade from 0.4 to a calendar release."""
    action, installed_text, name_override = "install", "", False
    installed = inputs.get("installed")
    if installed:
        inst_name, inst_version = parse_release_chart(str(installed.get("chart") or ""))
        inst_values = installed.get("values") or {}
        installed_text = f"{inst_name} {inst_version}".strip()
        action = "upgrade"
        if inst_name in NVIDIA_CHARTS and inst_version and not source.stand_in:
            inst_v = parse_chart_version(inst_version, "installed chart version")
            refused = chart_downgrade(inst_v, chart_v)
            if refused:
                raise DraDriverError(
                    "dra_driver_chart_version",
                    chart_v.text,
                    refused,
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
    return action, installed_text, name_override


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
            f"without the GPU kubelet plugin there is no DeviceClass {GPU_CLASS} and no GPU "
            f"ResourceSlice, and claims fail with 'device class {GPU_CLASS} does not exist'",
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
