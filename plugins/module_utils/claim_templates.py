# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""ResourceClaimTemplates for NVIDIA GPUs under DRA: builders and a shape checker.

Builders (pure functions, each returns a ``ResourceClaimTemplate`` dict ready for
``kubectl apply`` or ``kubernetes.core.k8s``):

* ``mig_slice(profile)``: one MIG device of a profile from DeviceClass ``mig.nvidia.com``,
  CEL ``device.attributes['gpu.nvidia.com'].profile == '1g.18gb'``;
* ``gpu_with_memory(min_gib)``: one full GPU from DeviceClass ``gpu.nvidia.com`` with at
  least that much memory, CEL
  ``device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0``;
* ``shared_gpu(strategy)``: one full GPU shared by every container of the claim with the
  driver's ``GpuConfig`` opaque parameters (``sharing.strategy`` ``TimeSlicing`` or ``MPS``);
* ``gpu_pair_same_product(count)``: ``count`` full GPUs that share one product name,
  ``constraints: [{matchAttribute: gpu.nvidia.com/productName}]``.

Each takes the ``resource.k8s.io`` version to write; ``api_version_for`` asks the DRA version
model (``dra_versions.served_api_versions``) which one a Kubernetes release serves. Shapes:
``v1`` and ``v1beta2`` put the device class and selectors under ``requests[].exactly``,
``v1beta1`` directly on ``requests[]`` (``staging/src/k8s.io/api/resource/<version>/
types.go``, ``DeviceRequest`` / ``ExactDeviceRequest``, k8s.io/api v0.33.13 and v0.37.0).

``check_claim_spec(obj)`` refuses shapes that look plausible but are not the API (an
``attributes:`` map on a request, a ``matchExpression`` constraint, ``deviceClassName`` at
the wrong level for the version, a selector that is not CEL, a CEL expression that does not
compile...). Every problem names its path and shows the shape to write instead.

What the CEL check covers. Expressions are parsed with ``cel-python`` (``celpy``), which
implements the CEL grammar but not Kubernetes' CEL environment: it knows neither the
``device`` variable's type nor the Kubernetes extension libraries (``quantity()``,
``compareTo``, ``isGreaterThan``, ``semver()``, ``lowerAscii``, RE2 ``matches``...). So the
checker parses (syntax errors are found exactly) and then walks the parse tree for what
Kubernetes' DRA CEL compiler (``k8s.io/dynamic-resource-allocation/cel/compile.go``) would
refuse at create time: a variable other than ``device`` (or a macro's bound variable), a
``device`` field other than ``driver``, ``attributes``, ``capacity``,
``allowMultipleAllocations``, and an ordering operator (``<``, ``<=``, ``>``, ``>=``) or
``==`` applied to a capacity (a ``Quantity``, which has no such overloads; use
``compareTo``). It does not type-check function arguments, check function names, or
estimate the CEL cost. Attribute and capacity names of ``gpu.nvidia.com`` that the NVIDIA
DRA driver does not publish (or no longer publishes, such as ``index``) are warnings: the
API accepts them, but the selector never matches.

Facts about the NVIDIA DRA driver (DeviceClass names, attribute and capacity keys, the
``resource.nvidia.com/v1beta1`` opaque configuration kinds and fields) come from
kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0: ``deployments/helm/*/templates/
deviceclass-*.yaml``, ``cmd/gpu-kubelet-plugin/deviceinfo.go``,
``api/nvidia.com/resource/v1beta1/{gpuconfig,sharing}.go``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils import claim_metadata as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils.claim_metadata import (
    ClaimTemplateError,
)

__all__ = [
    "CAPACITY_KEYS",
    "CHART_DEVICE_CLASSES",
    "GPU_CLASS",
    "GPU_CONFIG_API_VERSION",
    "KINDS",
    "MIG_CLASS",
    "NVIDIA_DRIVER",
    "SHAPED_VERSIONS",
    "SHARING_STRATEGIES",
    "TIME_SLICE_INTERVALS",
    "ApiChoice",
    "ClaimTemplateError",
    "Problem",
    "api_choice_for",
    "api_version_for",
    "build",
    "cel_memory_at_least",
    "cel_mig_profile",
    "check_cel",
    "check_claim_spec",
    "gpu_pair_same_product",
    "gpu_with_memory",
    "mig_slice",
    "shared_gpu",
    "suggest_cel",
]

RESOURCE_GROUP = dv.RESOURCE_GROUP
#: resource.k8s.io versions whose ResourceClaim shape this module writes and checks, most
#: stable first.
SHAPED_VERSIONS = ("v1", "v1beta2", "v1beta1")
_EXACTLY_VERSIONS = frozenset({"v1", "v1beta2"})

NVIDIA_DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
#: DeviceClasses the NVIDIA DRA driver chart creates (templates/deviceclass-*.yaml).
CHART_DEVICE_CLASSES = (
    GPU_CLASS,
    MIG_CLASS,
    "vfio.gpu.nvidia.com",
    "compute-domain-daemon.nvidia.com",
    "compute-domain-default-channel.nvidia.com",
)
#: The opaque-parameter API of the driver (api/nvidia.com/resource/v1beta1).
GPU_CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
_CONFIG_KINDS = ("GpuConfig", "MigDeviceConfig", "VfioDeviceConfig")
SHARING_STRATEGIES = ("TimeSlicing", "MPS")
TIME_SLICE_INTERVALS = ("Default", "Short", "Medium", "Long")
#: Driver feature gate each sharing strategy needs (pkg/featuregates/featuregates.go).
DRIVER_GATE_FOR_STRATEGY = {"TimeSlicing": "TimeSlicingSettings", "MPS": "MPSSupport"}

#: Attribute keys the driver publishes under the gpu.nvidia.com domain (deviceinfo.go).
ATTRIBUTE_KEYS = frozenset(
    {
        "type",
        "uuid",
        "parentUUID",
        "profile",
        "productName",
        "brand",
        "architecture",
        "cudaComputeCapability",
        "driverVersion",
        "cudaDriverVersion",
        "addressingMode",
        # vfio devices (PassthroughSupport)
        "deviceID",
        "vendorID",
        "numa",
        "iommuFDEnabled",
    }
)
#: Attribute keys older driver releases published, with what to use now.
REMOVED_ATTRIBUTE_KEYS = {
    "index": "removed in v25.8 (commit 36fc80ab); select on uuid or "
    "resource.kubernetes.io/pciBusID instead",
    "minor": "removed in v25.8 (commit 50d90da0); select on uuid instead",
    "parentIndex": "removed in v25.8; select on parentUUID instead",
    "pcieBusID": "replaced in v25.12 by the standard attribute "
    "device.attributes['resource.kubernetes.io'].pciBusID",
}
#: Capacity keys the driver publishes under the gpu.nvidia.com domain.
CAPACITY_KEYS = frozenset(
    {
        "memory",
        "multiprocessors",
        "copyEngines",
        "decoders",
        "encoders",
        "jpegEngines",
        "ofaEngines",
        "addressableMemory",
    }
)
_MEMORY_SLICE_RE = re.compile(r"^memorySlice\d+$")

#: Template kinds of ``build`` and the CLI.
KINDS = ("mig-slice", "gpu-with-memory", "shared-gpu", "gpu-pair-same-product")

_DNS_LABEL_RE, _DNS_SUBDOMAIN_RE = cm.DNS_LABEL_RE, cm.DNS_SUBDOMAIN_RE
_QUALIFIED_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/([A-Za-z][-_.A-Za-z0-9]*)$"
)
#: MIG profile names as nvidia-smi prints them: 1g.18gb, 1g.10gb+me, 1c.3g.20gb.
_PROFILE_RE = re.compile(r"^(\d+c\.)?\d+g\.\d+gb(\+me|\+gfx|-me|\+me\.all)?$")
_QUANTITY_RE = re.compile(r"^\+?\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")


# --------------------------------------------------------------------------------------
# Which resource.k8s.io version
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiChoice:
    """The resource.k8s.io version to write for a release: ``api_version``
    (``"resource.k8s.io/v1"``), ``version`` (``"v1"``), ``runtime_config`` (the
    kube-apiserver ``--runtime-config`` entry that must be set for it, or None when it is on
    by default), ``kubernetes_version`` (as given)."""

    api_version: str
    version: str
    runtime_config: str | None
    kubernetes_version: str


def default_kubernetes_version() -> str:
    """The newest release the provision roles accept, per the version model (``"1.37"``)."""
    return f"1.{dv.PROVISION_MAX_MINOR}"


def api_choice_for(kubernetes_version: str) -> ApiChoice:
    """The most stable resource.k8s.io version that ``kubernetes_version`` serves with the
    ResourceClaimTemplate kind and whose shape this module writes (v1, v1beta2, v1beta1).

    Asks ``dra_versions.served_api_versions`` (pkg/controlplane/instance.go of each release).
    Raises ClaimTemplateError when the release serves none of them (1.31 and older serve only
    alpha versions with another shape), VersionModelError/VersionParseError for a version
    outside the model or malformed.
    """
    served = dv.served_api_versions(kubernetes_version)
    for state in served:
        if state.version in SHAPED_VERSIONS and "ResourceClaimTemplate" in state.kinds:
            return ApiChoice(
                state.group_version,
                state.version,
                None if state.enabled_by_default else state.runtime_config,
                str(kubernetes_version),
            )
    raise ClaimTemplateError(
        f"kubernetes_version={kubernetes_version!r} serves only "
        f"{', '.join(s.group_version for s in served)}; ResourceClaimTemplates with structured "
        "parameters need resource.k8s.io/v1beta1 (Kubernetes 1.32) or newer.",
        f"use Kubernetes 1.{dv.PROVISION_MIN_MINOR} or newer.",
    )


def api_version_for(kubernetes_version: str) -> str:
    """``"resource.k8s.io/v1"`` for 1.34+, ``"resource.k8s.io/v1beta2"`` for 1.33,
    ``"resource.k8s.io/v1beta1"`` for 1.32, as the version model says (see
    ``api_choice_for`` for the errors raised)."""
    return api_choice_for(kubernetes_version).api_version


def _split_api_version(api_version: str, name: str = "api_version") -> str:
    group, _, version = str(api_version).partition("/")
    if group != RESOURCE_GROUP or version not in SHAPED_VERSIONS:
        raise ClaimTemplateError(
            f"{name}={api_version!r} is not a resource.k8s.io version this module writes.",
            "give one of " + ", ".join(f"{RESOURCE_GROUP}/{v}" for v in SHAPED_VERSIONS) + ".",
        )
    return version


def _resolve_api_version(api_version: str | None, kubernetes_version: str | None) -> str:
    if api_version:
        _split_api_version(api_version)
        return api_version
    return api_version_for(kubernetes_version or default_kubernetes_version())


# --------------------------------------------------------------------------------------
# CEL snippets
# --------------------------------------------------------------------------------------


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cel_mig_profile(profile: str) -> str:
    """``device.attributes['gpu.nvidia.com'].profile == '1g.18gb'``.

    Raises ClaimTemplateError when ``profile`` is not a MIG profile name as nvidia-smi prints
    it (``<n>g.<m>gb`` with an optional ``+me``/``+gfx``/``-me``/``+me.all`` suffix).
    """
    if not isinstance(profile, str) or not _PROFILE_RE.match(profile):
        raise ClaimTemplateError(
            f"profile={profile!r} is not a MIG profile name.",
            "give the name nvidia-smi mig -lgip prints, e.g. 1g.18gb (H200), 3g.40gb "
            "(H100 80GB), 1g.10gb+me.",
        )
    return f"device.attributes['{NVIDIA_DRIVER}'].profile == {_cel_string(profile)}"


def memory_quantity(min_gib: float | int | str, name: str = "min_gib") -> str:
    """A memory size in GiB as a Kubernetes quantity: 40 -> ``"40Gi"``, 40.5 ->
    ``"41472Mi"``. The driver publishes GPU memory in bytes as a BinarySI quantity
    (nvmlDeviceGetMemoryInfo total; MIG: memorySizeMB * 2^20). Raises ClaimTemplateError
    for a value that is not a positive number."""
    try:
        gib = float(min_gib)
    except (TypeError, ValueError):
        gib = float("nan")
    if isinstance(min_gib, bool) or not 1 / 1024 <= gib <= cm.MAX_MEMORY_GIB:  # NaN too
        raise ClaimTemplateError(
            f"{name}={str(min_gib)[:40]} is not a positive number of GiB up to "
            f"{cm.MAX_MEMORY_GIB} (1 MiB at least; no GPU has more than {cm.MAX_MEMORY_GIB} GB).",
            "give the smallest GPU memory the workload needs in GiB, e.g. 40.",
        )
    if gib.is_integer():
        return f"{int(gib)}Gi"
    return f"{round(gib * 1024)}Mi"


def cel_memory_at_least(min_gib: float | int | str) -> str:
    """``device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0``
    (a capacity is a Quantity: compare with compareTo, not with ``>=``)."""
    return (
        f"device.capacity['{NVIDIA_DRIVER}'].memory.compareTo("
        f"quantity('{memory_quantity(min_gib)}')) >= 0"
    )


# --------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------


_check_name, _check_labels, _count = cm.check_name, cm.check_labels, cm.check_count


def _request(
    version: str,
    name: str,
    device_class: str,
    selectors: Sequence[str] = (),
    count: int | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class}
    if selectors:
        body["selectors"] = [{"cel": {"expression": expr}} for expr in selectors]
    if count is not None:
        body["allocationMode"] = "ExactCount"
        body["count"] = count
    if version in _EXACTLY_VERSIONS:
        return {"name": name, "exactly": body}
    return {"name": name, **body}


def _template(
    api_version: str,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None,
    requests: list[dict[str, Any]],
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    _check_name(name, "name")
    _check_name(namespace, "namespace", subdomain=False)
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    label_map = _check_labels(labels)
    if label_map:
        metadata["labels"] = label_map
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaimTemplate",
        "metadata": metadata,
        "spec": {"spec": {"devices": devices}},
    }


def mig_slice(
    profile: str,
    *,
    name: str | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    count: int = 1,
    request_name: str = "mig",
    api_version: str | None = None,
    kubernetes_version: str | None = None,
) -> dict[str, Any]:
    """A template for ``count`` MIG devices of ``profile`` (``"1g.18gb"``) from DeviceClass
    ``mig.nvidia.com``. Name defaults to ``mig-<profile with dots as dashes>``
    (``mig-1g-18gb``). Raises ClaimTemplateError for a bad profile, name or count."""
    cm.mig_profile_note(profile)  # raises ClaimTemplateError for a profile no GPU has
    selector = cel_mig_profile(profile)
    version = _split_api_version(_resolve_api_version(api_version, kubernetes_version))
    default_name = "mig-" + re.sub(r"[^a-z0-9]+", "-", profile.lower()).strip("-")
    _check_name(request_name, "request_name", subdomain=False)
    return _template(
        f"{RESOURCE_GROUP}/{version}",
        name or default_name,
        namespace,
        labels,
        [_request(version, request_name, MIG_CLASS, [selector], _count(count))],
    )


def gpu_with_memory(
    min_gib: float | int,
    *,
    name: str | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    count: int = 1,
    request_name: str = "gpu",
    api_version: str | None = None,
    kubernetes_version: str | None = None,
) -> dict[str, Any]:
    """A template for ``count`` full GPUs (DeviceClass ``gpu.nvidia.com``) with at least
    ``min_gib`` GiB of memory each. Name defaults to ``gpu-<min_gib>gi``."""
    selector = cel_memory_at_least(min_gib)
    version = _split_api_version(_resolve_api_version(api_version, kubernetes_version))
    quantity = memory_quantity(min_gib).lower()
    _check_name(request_name, "request_name", subdomain=False)
    return _template(
        f"{RESOURCE_GROUP}/{version}",
        name or f"gpu-{quantity}",
        namespace,
        labels,
        [_request(version, request_name, GPU_CLASS, [selector], _count(count))],
    )


def gpu_config_parameters(
    strategy: str,
    *,
    interval: str | None = None,
    mps_active_thread_percentage: int | None = None,
    mps_pinned_memory_limit: str | None = None,
) -> dict[str, Any]:
    """The driver's ``GpuConfig`` opaque parameters (api/nvidia.com/resource/v1beta1/
    gpuconfig.go, sharing.go)::

        {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig,
         sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}}
        {..., sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50,
                                                   defaultPinnedDeviceMemoryLimit: 10Gi}}}

    ``interval`` only with TimeSlicing (Default, Short, Medium, Long);
    ``mps_active_thread_percentage`` (0-100) and ``mps_pinned_memory_limit`` (a quantity)
    only with MPS. Raises ClaimTemplateError for anything else.
    """
    if strategy not in SHARING_STRATEGIES:
        raise ClaimTemplateError(
            f"strategy={strategy!r} is not a GPU sharing strategy of the NVIDIA DRA driver.",
            f"give one of {', '.join(SHARING_STRATEGIES)}.",
        )
    sharing: dict[str, Any] = {"strategy": strategy}
    if strategy == "TimeSlicing":
        if mps_active_thread_percentage is not None or mps_pinned_memory_limit is not None:
            raise ClaimTemplateError(
                "mps_active_thread_percentage/mps_pinned_memory_limit are MPS settings but "
                "strategy='TimeSlicing'.",
                "drop them or use strategy='MPS'.",
            )
        if interval is not None:
            if interval not in TIME_SLICE_INTERVALS:
                raise ClaimTemplateError(
                    f"interval={interval!r} is not a time-slice interval.",
                    f"give one of {', '.join(TIME_SLICE_INTERVALS)}.",
                )
            sharing["timeSlicingConfig"] = {"interval": interval}
    else:
        if interval is not None:
            raise ClaimTemplateError(
                f"interval={interval!r} is a TimeSlicing setting but strategy='MPS'.",
                "drop interval or use strategy='TimeSlicing'.",
            )
        mps: dict[str, Any] = {}
        if mps_active_thread_percentage is not None:
            pct = mps_active_thread_percentage
            if isinstance(pct, bool) or not isinstance(pct, int) or not 0 <= pct <= 100:
                raise ClaimTemplateError(
                    f"mps_active_thread_percentage={pct!r} is not an integer from 0 to 100.",
                    "give a percentage of the GPU's threads, e.g. 50.",
                )
            mps["defaultActiveThreadPercentage"] = pct
        if mps_pinned_memory_limit is not None:
            limit = cm.check_memory_quantity(mps_pinned_memory_limit, "mps_pinned_memory_limit")
            mps["defaultPinnedDeviceMemoryLimit"] = limit
        if mps:
            sharing["mpsConfig"] = mps
    return {"apiVersion": GPU_CONFIG_API_VERSION, "kind": "GpuConfig", "sharing": sharing}


def shared_gpu(
    strategy: str = "TimeSlicing",
    *,
    interval: str | None = None,
    mps_active_thread_percentage: int | None = None,
    mps_pinned_memory_limit: str | None = None,
    name: str | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    request_name: str = "gpu",
    api_version: str | None = None,
    kubernetes_version: str | None = None,
) -> dict[str, Any]:
    """A template for one full GPU with the driver's GpuConfig sharing settings (see
    ``gpu_config_parameters``). The driver honours TimeSlicing only with its feature gate
    ``TimeSlicingSettings`` and MPS only with ``MPSSupport`` (chart value ``featureGates``);
    without them the claim fails at prepare time. Name defaults to
    ``shared-gpu-<strategy lower-case>``."""
    parameters = gpu_config_parameters(
        strategy,
        interval=interval,
        mps_active_thread_percentage=mps_active_thread_percentage,
        mps_pinned_memory_limit=mps_pinned_memory_limit,
    )
    version = _split_api_version(_resolve_api_version(api_version, kubernetes_version))
    _check_name(request_name, "request_name", subdomain=False)
    return _template(
        f"{RESOURCE_GROUP}/{version}",
        name or f"shared-gpu-{strategy.lower()}",
        namespace,
        labels,
        [_request(version, request_name, GPU_CLASS, count=1)],
        config=[
            {
                "requests": [request_name],
                "opaque": {"driver": NVIDIA_DRIVER, "parameters": parameters},
            }
        ],
    )


def gpu_pair_same_product(
    count: int = 2,
    *,
    name: str | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    request_name: str = "gpus",
    api_version: str | None = None,
    kubernetes_version: str | None = None,
) -> dict[str, Any]:
    """A template for ``count`` (>= 2) full GPUs that all have the same
    ``gpu.nvidia.com/productName`` (a constraint, ``matchAttribute``), e.g. two H200s rather
    than an H200 and an H100. Name defaults to ``gpu-<count>-same-product``."""
    count = _count(count, minimum=2)
    version = _split_api_version(_resolve_api_version(api_version, kubernetes_version))
    _check_name(request_name, "request_name", subdomain=False)
    return _template(
        f"{RESOURCE_GROUP}/{version}",
        name or f"gpu-{count}-same-product",
        namespace,
        labels,
        [_request(version, request_name, GPU_CLASS, count=count)],
        constraints=[
            {"requests": [request_name], "matchAttribute": f"{NVIDIA_DRIVER}/productName"}
        ],
    )


BUILD_PARAMS = {
    "mig-slice": ("profile", "count", "request_name"),
    "gpu-with-memory": ("min_memory_gib", "count", "request_name"),
    "shared-gpu": (
        "strategy",
        "interval",
        "mps_active_thread_percentage",
        "mps_pinned_memory_limit",
        "request_name",
    ),
    "gpu-pair-same-product": ("count", "request_name"),
}
_COMMON_PARAMS = ("kind", "name", "namespace", "labels", "api_version", "kubernetes_version")


def build(
    kind: str, params: Mapping[str, Any], kubernetes_version: str | None = None
) -> dict[str, Any]:
    """Build one template from a flat mapping, the shape role variables and the CLI use::

        {kind: mig-slice, profile: 1g.18gb, name: ..., namespace: ..., labels: {...}}
        {kind: gpu-with-memory, min_memory_gib: 40}
        {kind: shared-gpu, strategy: MPS, mps_active_thread_percentage: 50}
        {kind: gpu-pair-same-product, count: 2}

    ``kubernetes_version`` applies unless ``params`` has ``api_version`` or its own
    ``kubernetes_version``. Raises ClaimTemplateError naming an unknown kind, an unknown or
    missing key, or a bad value.
    """
    if not isinstance(kind, str) or kind not in KINDS:
        raise ClaimTemplateError(
            f"kind={kind!r} is not a template kind.", f"give one of {', '.join(KINDS)}."
        )
    if not isinstance(params, Mapping):
        raise ClaimTemplateError(
            f"the {kind} parameters are a {type(params).__name__}.",
            "give a mapping of parameter -> value.",
        )
    allowed = set(BUILD_PARAMS[kind]) | set(_COMMON_PARAMS)
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ClaimTemplateError(
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
            f"parameter(s) of kind {kind}.",
            f"{kind} takes {', '.join(sorted(allowed - {'kind'}))}.",
        )
    common: dict[str, Any] = {
        k: params[k] for k in ("name", "namespace", "labels", "api_version") if params.get(k)
    }
    common["kubernetes_version"] = params.get("kubernetes_version") or kubernetes_version
    extra = {k: params[k] for k in ("request_name",) if params.get(k)}
    if kind == "mig-slice":
        if not params.get("profile"):
            raise ClaimTemplateError(
                "kind mig-slice needs profile.", "give profile, e.g. profile: 1g.18gb."
            )
        return mig_slice(params["profile"], count=params.get("count", 1), **extra, **common)
    if kind == "gpu-with-memory":
        if params.get("min_memory_gib") in (None, ""):
            raise ClaimTemplateError(
                "kind gpu-with-memory needs min_memory_gib.",
                "give min_memory_gib, e.g. min_memory_gib: 40.",
            )
        return gpu_with_memory(
            params["min_memory_gib"], count=params.get("count", 1), **extra, **common
        )
    if kind == "shared-gpu":
        return shared_gpu(
            params.get("strategy") or "TimeSlicing",
            interval=params.get("interval"),
            mps_active_thread_percentage=params.get("mps_active_thread_percentage"),
            mps_pinned_memory_limit=params.get("mps_pinned_memory_limit"),
            **extra,
            **common,
        )
    return gpu_pair_same_product(params.get("count", 2), **extra, **common)


# --------------------------------------------------------------------------------------
# Checker
# --------------------------------------------------------------------------------------

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One finding of ``check_claim_spec``: ``path`` (``spec.spec.devices.requests[0]``),
    ``message`` (what is wrong and the shape to write instead), ``severity``: ``"error"``
    (the API refuses it, or strict field validation as kubectl uses it does) or
    ``"warning"`` (the API takes it but it cannot do what it looks like)."""

    path: str
    message: str
    severity: str = ERROR

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "severity": self.severity, "message": self.message}

    def __str__(self) -> str:
        return f"{self.severity}: {self.path}: {self.message}"


# Fields per object, union over the versions that have them (k8s.io/api v0.37.0 types.go).
_REQUEST_V1 = frozenset({"name", "exactly", "firstAvailable"})
_EXACT_FIELDS = frozenset(
    {
        "deviceClassName",
        "selectors",
        "allocationMode",
        "count",
        "adminAccess",
        "tolerations",
        "capacity",
        "derivedAttributes",
    }
)
_SUBREQUEST_FIELDS = (_EXACT_FIELDS - {"adminAccess"}) | {"name"}
_REQUEST_V1BETA1 = _EXACT_FIELDS | {"name", "firstAvailable"}
_DEVICES_FIELDS = frozenset({"requests", "constraints", "config"})
_CONSTRAINT_FIELDS = frozenset({"requests", "matchAttribute", "distinctAttribute"})
_CONFIG_FIELDS = frozenset({"requests", "opaque"})
_ALLOCATION_MODES = ("ExactCount", "All")

_MEMORY_EXAMPLE = cel_memory_at_least(40)
_SELECTOR_EXAMPLE = f'selectors: [{{cel: {{expression: "{_MEMORY_EXAMPLE}"}}}}]'


def _selectors_text(expression: str) -> str:
    return f'selectors: [{{cel: {{expression: "{expression}"}}}}]'


_VALUE_RE = re.compile(r"^\s*(>=|=>|>|<=|=<|<|==|=)?\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_OP_MAP = {
    ">=": ">=",
    "=>": ">=",
    ">": ">",
    "<=": "<=",
    "=<": "<=",
    "<": "<",
    "==": "==",
    "=": "==",
}
_UNIT_TO_SUFFIX = {
    "": "Gi",
    "g": "Gi",
    "gb": "Gi",
    "gib": "Gi",
    "gi": "Gi",
    "m": "Mi",
    "mb": "Mi",
    "mib": "Mi",
    "mi": "Mi",
    "t": "Ti",
    "tb": "Ti",
    "tib": "Ti",
    "ti": "Ti",
}


def _memory_unit_from_key(key: str) -> str:
    low = key.lower()
    for unit in ("gib", "gb", "mib", "mb", "tib", "tb"):
        if low.endswith(unit):
            return unit
    return ""


def suggest_cel(mapping: Mapping[str, Any], domain: str = NVIDIA_DRIVER) -> str:
    """Turn a made-up ``attributes:``-style map into the CEL expression that means it.

    ``{memoryGB: ">=40"}`` -> ``device.capacity['gpu.nvidia.com'].memory.compareTo(
    quantity('40Gi')) >= 0`` (GPU "GB" are GiB: the driver publishes BinarySI bytes);
    ``{productName: "NVIDIA H200"}`` -> ``device.attributes['gpu.nvidia.com'].productName ==
    'NVIDIA H200'``; a capacity key with a number (``multiprocessors: ">=16"``) -> a
    ``compareTo(quantity('16'))``. Clauses are joined with ``&&``.
    """
    clauses = []
    for key, raw in mapping.items():
        key_s = str(key)
        low = key_s.lower()
        value = raw
        if isinstance(raw, Mapping) and len(raw) == 1:
            # {memory: {min: 40}} or {memory: {">=": 40}}
            op_key, value = next(iter(raw.items()))
            value = f"{'>=' if str(op_key).lower() in ('min', 'gte', '>=') else op_key}{value}"
        match = _VALUE_RE.match(str(value)) if not isinstance(value, bool) else None
        if "mem" in low and match:
            op = _OP_MAP[match.group(1) or ">="]
            unit = (match.group(3) or _memory_unit_from_key(key_s)).lower()
            suffix = _UNIT_TO_SUFFIX.get(unit, "Gi")
            clauses.append(
                f"device.capacity['{domain}'].memory.compareTo(quantity('{match.group(2)}"
                f"{suffix}')) {op} 0"
            )
        elif key_s in CAPACITY_KEYS and match:
            op = _OP_MAP[match.group(1) or ">="]
            clauses.append(
                f"device.capacity['{domain}'].{key_s}.compareTo(quantity('{match.group(2)}"
                f"')) {op} 0"
            )
        elif isinstance(value, bool):
            clauses.append(f"device.attributes['{domain}'].{key_s} == {str(value).lower()}")
        elif isinstance(value, int | float):
            clauses.append(f"device.attributes['{domain}'].{key_s} == {value}")
        elif isinstance(value, list | tuple):
            items = ", ".join(_cel_string(str(v)) for v in value)
            clauses.append(f"device.attributes['{domain}'].{key_s} in [{items}]")
        else:
            clauses.append(f"device.attributes['{domain}'].{key_s} == {_cel_string(str(value))}")
    return " && ".join(clauses) if clauses else _MEMORY_EXAMPLE


# ---- CEL


_DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
#: Ordering operators: Kubernetes' Quantity type has none (k8s.io/apiserver/pkg/cel/library/
#: quantity.go offers isLessThan, isGreaterThan, compareTo instead).
_ORDER_OPS = {"relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">="}
_COMPARE_OPS = {"<": "< 0", "<=": "<= 0", ">": "> 0", ">=": ">= 0"}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _celpy():
    try:
        import celpy  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise RuntimeError(
            "the CEL checker needs the cel-python package (import name celpy); install it "
            "with: pip install 'cel-python>=0.4,<0.6'"
        ) from exc
    return celpy


def _token_text(node: Any) -> str | None:
    """The text of a tree node that is a single token (ident, field name)."""
    from lark import Token

    if isinstance(node, Token):
        return str(node)
    return None


def _unwrap(node: Any) -> Any:
    """Descend through single-child wrapper nodes (expr -> ... -> member)."""
    from lark import Tree

    while (
        isinstance(node, Tree)
        and len(node.children) == 1
        and isinstance(node.children[0], Tree)
        and node.data
        in {
            "expr",
            "conditionalor",
            "conditionaland",
            "relation",
            "addition",
            "multiplication",
            "unary",
            "member",
            "primary",
            "paren_expr",
        }
    ):
        node = node.children[0]
    return node


def _chain(node: Any) -> list[str] | None:
    """A member chain rooted at an identifier as a list: ``device.capacity['x'].memory`` ->
    ``['device', 'capacity', "['x']", 'memory']``; None for anything else (a call...)."""
    from lark import Tree

    node = _unwrap(node)
    if not isinstance(node, Tree):
        return None
    if node.data == "ident":
        text = _token_text(node.children[0])
        return [text] if text else None
    if node.data == "member_dot":
        inner = _chain(node.children[0])
        name = _token_text(node.children[1])
        return [*inner, name] if inner is not None and name else None
    if node.data == "member_index":
        inner = _chain(node.children[0])
        key = _unwrap(node.children[1])
        if inner is None:
            return None
        if isinstance(key, Tree) and key.data == "literal":
            lit = _token_text(key.children[0]) or ""
            return [*inner, f"[{lit}]"]
        return [*inner, "[?]"]
    return None


def _literal_key(part: str) -> str | None:
    """``"['gpu.nvidia.com']"`` -> ``"gpu.nvidia.com"``; None when not a string literal."""
    if len(part) >= 4 and part[0] == "[" and part[-1] == "]" and part[1] in "'\"":
        inner = part[1:-1]
        if inner[0] == inner[-1]:
            return inner[1:-1]
    return None


def check_cel(expression: Any) -> list[tuple[str, str]]:
    """Check one DRA selector expression; returns ``[(severity, message)]``, empty when
    nothing was found. See the module docstring for what is and is not checked."""
    if not isinstance(expression, str) or not expression.strip():
        return [
            (
                ERROR,
                f"expression {expression!r} is not a non-empty CEL string; use "
                + _selectors_text(_MEMORY_EXAMPLE),
            )
        ]
    celpy = _celpy()
    from lark import Tree

    try:
        tree = celpy.Environment().compile(expression)
    except Exception as exc:  # celpy raises CELParseError (and lark errors) on bad syntax
        first = str(exc).strip().splitlines()
        detail = " ".join(line.strip() for line in first if line.strip())[:300]
        return [
            (
                ERROR,
                f"CEL expression {expression!r} does not parse ({detail}); a DRA selector is "
                "a boolean CEL expression over `device`, e.g. " + _MEMORY_EXAMPLE,
            )
        ]
    found: list[tuple[str, str]] = []
    bound: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg" and len(node.children) >= 3:
            method = _token_text(node.children[1])
            args = node.children[2]
            if method in _MACROS and isinstance(args, Tree) and args.children:
                chain = _chain(args.children[0])
                if chain and len(chain) == 1:
                    bound.add(chain[0])
    seen: set[str] = set()
    for node in tree.iter_subtrees_topdown():
        if node.data == "ident":
            name = _token_text(node.children[0])
            if name and name != "device" and name not in bound and name not in seen:
                seen.add(name)
                found.append(
                    (
                        ERROR,
                        f"CEL expression uses undeclared variable {name!r}: a DRA selector "
                        "sees only `device` (driver, attributes, capacity), e.g. "
                        + (
                            _MEMORY_EXAMPLE
                            if "mem" in name.lower()
                            else f"device.attributes['{NVIDIA_DRIVER}'].{name} == '...'"
                        ),
                    )
                )
        elif node.data == "member_dot":
            chain = _chain(node)
            if (
                chain
                and len(chain) == 2
                and chain[0] == "device"
                and chain[1] not in _DEVICE_FIELDS
            ):
                found.append(
                    (
                        ERROR,
                        f"`device` has no field {chain[1]!r} (fields: "
                        f"{', '.join(_DEVICE_FIELDS)}); attributes are "
                        f"device.attributes['{NVIDIA_DRIVER}'].<name>, capacities "
                        f"device.capacity['{NVIDIA_DRIVER}'].<name>",
                    )
                )
            elif (
                chain
                and len(chain) == 3
                and chain[0] == "device"
                and chain[1]
                in (
                    "attributes",
                    "capacity",
                )
            ):
                found.append(
                    (
                        WARNING,
                        f"device.{chain[1]}.{chain[2]} looks up a domain named {chain[2]!r}: "
                        f"{chain[1]} are grouped by domain, use device.{chain[1]}"
                        f"['{NVIDIA_DRIVER}'].{chain[2]}",
                    )
                )
            if chain and len(chain) == 4 and chain[0] == "device":
                found.extend(_check_key(chain[1], _literal_key(chain[2]), chain[3]))
        elif node.data in _ORDER_OPS:
            op = _ORDER_OPS[node.data]
            # relation_xx(left relation, right addition): left is the first child
            for side in node.children[:1]:
                chain = _chain(side)
                if chain and len(chain) >= 4 and chain[:2] == ["device", "capacity"]:
                    key = _literal_key(chain[2]) or NVIDIA_DRIVER
                    found.append(
                        (
                            ERROR,
                            f"capacity {'.'.join(chain[3:])} is a Quantity: `{op}` does not "
                            "apply to it (Kubernetes: no matching overload); compare with "
                            f"device.capacity['{key}'].{'.'.join(chain[3:])}"
                            f".compareTo(quantity('40Gi')) {_COMPARE_OPS[op]}",
                        )
                    )
    # The right operand is the second child of the parent relation: `40 <= device.capacity..`
    for node in tree.iter_subtrees():
        if node.data == "relation" and len(node.children) == 2:
            op_node, right = node.children
            if isinstance(op_node, Tree) and op_node.data in _ORDER_OPS:
                chain = _chain(right)
                if chain and len(chain) >= 4 and chain[:2] == ["device", "capacity"]:
                    op = _ORDER_OPS[op_node.data]
                    key = _literal_key(chain[2]) or NVIDIA_DRIVER
                    found.append(
                        (
                            ERROR,
                            f"capacity {'.'.join(chain[3:])} is a Quantity: `{op}` does not "
                            "apply to it (Kubernetes: no matching overload); compare with "
                            f"device.capacity['{key}'].{'.'.join(chain[3:])}"
                            f".compareTo(quantity('40Gi')) {_COMPARE_OPS[_FLIP[op]]}",
                        )
                    )
    return found


def _check_key(field_name: str, domain: str | None, key: str) -> list[tuple[str, str]]:
    if domain != NVIDIA_DRIVER:
        return []
    if field_name == "attributes":
        if key in ATTRIBUTE_KEYS:
            return []
        if key in REMOVED_ATTRIBUTE_KEYS:
            return [
                (
                    WARNING,
                    f"attribute {NVIDIA_DRIVER}/{key} is no longer published by the NVIDIA DRA "
                    f"driver: {REMOVED_ATTRIBUTE_KEYS[key]}",
                )
            ]
        if key in CAPACITY_KEYS or _MEMORY_SLICE_RE.match(key):
            return [
                (
                    WARNING,
                    f"{key} is a capacity, not an attribute, of {NVIDIA_DRIVER} devices: use "
                    f"device.capacity['{NVIDIA_DRIVER}'].{key}.compareTo(quantity('40Gi')) >= 0",
                )
            ]
        return [
            (
                WARNING,
                f"the NVIDIA DRA driver publishes no attribute {key!r} (attributes: "
                f"{', '.join(sorted(ATTRIBUTE_KEYS))}); the selector never matches",
            )
        ]
    if field_name == "capacity":
        if key in CAPACITY_KEYS or _MEMORY_SLICE_RE.match(key):
            return []
        if key in ATTRIBUTE_KEYS:
            return [
                (
                    WARNING,
                    f"{key} is an attribute, not a capacity, of {NVIDIA_DRIVER} devices: use "
                    f"device.attributes['{NVIDIA_DRIVER}'].{key}",
                )
            ]
        return [
            (
                WARNING,
                f"the NVIDIA DRA driver publishes no capacity {key!r} (capacities: "
                f"{', '.join(sorted(CAPACITY_KEYS))}, memorySlice<N>); the selector never "
                "matches",
            )
        ]
    return []


# ---- objects


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def error(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message, ERROR))

    def warn(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message, WARNING))


def check_claim_spec(obj: Any, kubernetes_version: str | None = None) -> list[Problem]:
    """Check a ResourceClaimTemplate or ResourceClaim dict; returns the problems found
    (empty: the shape is the API's, as far as this checker sees, see the module docstring).

    ``kubernetes_version`` (optional): also check that the release serves the object's
    resource.k8s.io version (error when not served, warning naming the ``--runtime-config``
    entry when it is off by default). Never raises for a malformed object: that is a
    problem too.
    """
    out = _Collector()
    if not isinstance(obj, Mapping):
        out.error("", f"expected a ResourceClaimTemplate mapping, got {type(obj).__name__}")
        return out.problems
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    group, _, version = str(api_version or "").partition("/")
    if group != RESOURCE_GROUP or version not in SHAPED_VERSIONS:
        out.error(
            "apiVersion",
            f"apiVersion {api_version!r} is not one this checker knows; use "
            + " or ".join(f"{RESOURCE_GROUP}/{v}" for v in SHAPED_VERSIONS)
            + " (gpufleet claims template --kubernetes-version <release> picks it)",
        )
        version = "v1"
    elif kubernetes_version:
        _check_served(out, version, kubernetes_version)
    cm.check_metadata(obj, str(kind), out.error)
    if kind == "ResourceClaimTemplate":
        spec_path = "spec.spec"
        outer = obj.get("spec")
        if not isinstance(outer, Mapping):
            out.error("spec", "a ResourceClaimTemplate needs spec: {spec: {devices: ...}}")
            return out.problems
        if "devices" in outer and "spec" not in outer:
            out.error(
                "spec.devices",
                "a ResourceClaimTemplate wraps the claim spec once more: write "
                "spec: {spec: {devices: ...}} (spec.metadata optional), not spec: {devices: ...}",
            )
            return out.problems
        for key in outer:
            if key not in ("metadata", "spec"):
                out.error(f"spec.{key}", f"unknown field {key!r}; spec has metadata and spec")
        spec = outer.get("spec")
    elif kind == "ResourceClaim":
        spec_path = "spec"
        spec = obj.get("spec")
    else:
        out.error("kind", f"kind {kind!r} is not ResourceClaimTemplate or ResourceClaim")
        return out.problems
    if not isinstance(spec, Mapping):
        out.error(spec_path, "the claim spec must be a mapping with devices: {requests: [...]}")
        return out.problems
    for key in spec:
        if key not in ("devices", "controller"):
            out.error(f"{spec_path}.{key}", f"unknown field {key!r}; the claim spec has devices")
    devices = spec.get("devices")
    if not isinstance(devices, Mapping):
        out.error(f"{spec_path}.devices", "devices must be a mapping with requests: [...]")
        return out.problems
    path = f"{spec_path}.devices"
    for key in devices:
        if key not in _DEVICES_FIELDS:
            out.error(
                f"{path}.{key}",
                f"unknown field {key!r}; devices has {', '.join(sorted(_DEVICES_FIELDS))}",
            )
    names = _check_requests(out, path, devices.get("requests"), version)
    _check_constraints(out, path, devices.get("constraints"), names)
    _check_config(out, path, devices.get("config"), names)
    return out.problems


def _check_served(out: _Collector, version: str, kubernetes_version: str) -> None:
    try:
        served = {s.version: s for s in dv.served_api_versions(kubernetes_version)}
    except dv.VersionModelError as exc:
        out.error("apiVersion", f"kubernetes_version: {exc}")
        return
    state = served.get(version)
    if state is None or "ResourceClaimTemplate" not in state.kinds:
        try:
            better = api_version_for(kubernetes_version)
        except ClaimTemplateError as exc:
            better = str(exc)
        out.error(
            "apiVersion",
            f"Kubernetes {kubernetes_version} does not serve {RESOURCE_GROUP}/{version}; "
            f"use {better}",
        )
    elif not state.enabled_by_default:
        out.warn(
            "apiVersion",
            f"{RESOURCE_GROUP}/{version} is off by default on Kubernetes {kubernetes_version}: "
            f"kube-apiserver needs --runtime-config={state.runtime_config}",
        )


def _check_requests(out: _Collector, path: str, requests: Any, version: str) -> list[str]:
    names: list[str] = []
    if requests is None:
        out.error(f"{path}.requests", "devices needs requests: [{name: ..., ...}]")
        return names
    if not isinstance(requests, list):
        out.error(f"{path}.requests", "requests must be a list of requests")
        return names
    for i, req in enumerate(requests):
        rpath = f"{path}.requests[{i}]"
        if not isinstance(req, Mapping):
            out.error(rpath, "a request must be a mapping with a name")
            continue
        name = req.get("name")
        if not isinstance(name, str) or not _DNS_LABEL_RE.match(name):
            out.error(f"{rpath}.name", f"name {name!r} must be a DNS label (e.g. gpu)")
        elif name in names:
            out.error(f"{rpath}.name", f"request name {name!r} is used twice")
        else:
            names.append(name)
        if version in _EXACTLY_VERSIONS:
            _check_request_v1(out, rpath, req, version)
        else:
            _check_request_v1beta1(out, rpath, req)
    return names


_MISPLACED_V1 = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess")


def _check_request_v1(out: _Collector, rpath: str, req: Mapping[str, Any], version: str) -> None:
    misplaced = [k for k in req if k in _MISPLACED_V1]
    if misplaced:
        moved = ", ".join(f"{k}: {_short(req[k])}" for k in misplaced)
        out.error(
            f"{rpath}.{misplaced[0]}",
            f"{', '.join(misplaced)} at the wrong level for {RESOURCE_GROUP}/{version}: it goes "
            f"under exactly: write {{name: {req.get('name', 'gpu')}, exactly: {{{moved}}}}} "
            f"({RESOURCE_GROUP}/v1beta1 is the version with deviceClassName on the request)",
        )
    for key in req:
        if key in _REQUEST_V1 or key in _MISPLACED_V1:
            continue
        _unknown_request_field(out, rpath, key, req[key], "name, exactly, firstAvailable")
    has_exact = "exactly" in req
    has_first = "firstAvailable" in req
    if has_exact and has_first:
        out.error(rpath, "a request has exactly or firstAvailable, not both")
    elif not has_exact and not has_first and not misplaced:
        out.error(
            rpath,
            f"a {RESOURCE_GROUP}/{version} request needs exactly: {{deviceClassName: "
            f"{GPU_CLASS}}} (or firstAvailable: [...])",
        )
    if has_exact:
        _check_exact(out, f"{rpath}.exactly", req["exactly"], _EXACT_FIELDS, version)
    if has_first:
        _check_first_available(out, f"{rpath}.firstAvailable", req["firstAvailable"], version)


def _check_request_v1beta1(out: _Collector, rpath: str, req: Mapping[str, Any]) -> None:
    if "exactly" in req:
        out.error(
            f"{rpath}.exactly",
            f"{RESOURCE_GROUP}/v1beta1 has no exactly: put deviceClassName, selectors, count "
            f"directly on the request, or use apiVersion {RESOURCE_GROUP}/v1 (Kubernetes 1.34+)",
        )
    body = {k: v for k, v in req.items() if k not in ("name", "exactly", "firstAvailable")}
    for key in list(body):
        if key not in _REQUEST_V1BETA1:
            _unknown_request_field(
                out, rpath, key, body.pop(key), ", ".join(sorted(_REQUEST_V1BETA1))
            )
    if "firstAvailable" in req:
        if body.get("deviceClassName"):
            out.error(
                f"{rpath}.deviceClassName",
                "a request with firstAvailable must not set deviceClassName (each subrequest "
                "names its class)",
            )
        _check_first_available(out, f"{rpath}.firstAvailable", req["firstAvailable"], "v1beta1")
    elif "exactly" not in req:
        _check_exact(out, rpath, body, _REQUEST_V1BETA1, "v1beta1", fields_checked=True)


def _check_first_available(out: _Collector, path: str, subs: Any, version: str) -> None:
    if not isinstance(subs, list) or not subs:
        out.error(path, "firstAvailable must be a non-empty list of subrequests")
        return
    for j, sub in enumerate(subs):
        spath = f"{path}[{j}]"
        if not isinstance(sub, Mapping):
            out.error(spath, "a subrequest must be a mapping")
            continue
        if not isinstance(sub.get("name"), str) or not _DNS_LABEL_RE.match(sub["name"]):
            out.error(f"{spath}.name", f"subrequest name {sub.get('name')!r} must be a DNS label")
        _check_exact(
            out, spath, {k: v for k, v in sub.items() if k != "name"}, _SUBREQUEST_FIELDS, version
        )


def _check_exact(
    out: _Collector,
    path: str,
    body: Any,
    fields: frozenset,
    version: str,
    fields_checked: bool = False,
) -> None:
    if not isinstance(body, Mapping):
        out.error(path, f"expected a mapping with deviceClassName, got {_short(body)}")
        return
    if not fields_checked:
        for key in body:
            if key not in fields:
                if key == "exactly":
                    out.error(f"{path}.exactly", "exactly is nested twice")
                    continue
                _unknown_request_field(
                    out, path, key, body[key], ", ".join(sorted(fields - {"name"}))
                )
    dc = body.get("deviceClassName")
    if dc is None:
        out.error(
            f"{path}.deviceClassName",
            f"deviceClassName is required, e.g. deviceClassName: {GPU_CLASS} (full GPUs) or "
            f"{MIG_CLASS} (MIG devices)",
        )
    elif not isinstance(dc, str) or not _DNS_SUBDOMAIN_RE.match(dc):
        hint = ""
        if isinstance(dc, str) and dc.startswith("nvidia.com/"):
            hint = f" ({dc} is the device plugin's extended resource name, not a DeviceClass)"
        out.error(
            f"{path}.deviceClassName",
            f"deviceClassName {dc!r} is not a DeviceClass name (a DNS subdomain){hint}; use "
            f"{GPU_CLASS} or {MIG_CLASS}",
        )
    elif dc not in CHART_DEVICE_CLASSES:
        out.warn(
            f"{path}.deviceClassName",
            f"DeviceClass {dc!r} is not one the NVIDIA DRA driver chart creates "
            f"({', '.join(CHART_DEVICE_CLASSES)}); make sure it exists, or claims stay "
            f"pending with 'device class {dc} does not exist'",
        )
    mode = body.get("allocationMode")
    if mode is not None and mode not in _ALLOCATION_MODES:
        out.error(
            f"{path}.allocationMode",
            f"allocationMode {mode!r} is not one of {', '.join(_ALLOCATION_MODES)}",
        )
    count = body.get("count")
    if count is not None:
        if (
            isinstance(count, bool)
            or not isinstance(count, int)
            or not 0 < count <= cm.ALLOCATION_RESULTS_MAX
        ):
            out.error(
                f"{path}.count",
                f"count {str(count)[:40]} must be an integer from 1 to {cm.ALLOCATION_RESULTS_MAX}",
            )
        elif mode == "All":
            out.error(f"{path}.count", "count must not be set with allocationMode: All")
    if "capacity" in body:
        cap = body["capacity"]
        if not (isinstance(cap, Mapping) and set(cap) <= {"requests"}):
            out.error(
                f"{path}.capacity",
                "capacity on a request is consumable capacity ({requests: {<name>: <quantity>}}, "
                "DRAConsumableCapacity), not a device filter; to pick devices by memory use "
                + _selectors_text(
                    suggest_cel(cap) if isinstance(cap, Mapping) and cap else _MEMORY_EXAMPLE
                ),
            )
    if "selectors" in body:
        _check_selectors(out, f"{path}.selectors", body["selectors"])


def _unknown_request_field(out: _Collector, path: str, key: str, value: Any, allowed: str) -> None:
    low = key.lower()
    if low in ("attributes", "attribute", "properties", "requirements", "match", "filter"):
        cel = suggest_cel(value) if isinstance(value, Mapping) and value else _MEMORY_EXAMPLE
        out.error(
            f"{path}.{key}",
            f"{key} is not a field of a device request: devices are picked with CEL; use "
            + _selectors_text(cel),
        )
    elif low in ("matchlabels", "matchexpressions", "selector", "nodeselector", "labelselector"):
        out.error(
            f"{path}.{key}",
            f"{key} is not a field of a device request (devices have no labels); use "
            + _selectors_text(_MEMORY_EXAMPLE),
        )
    elif "mem" in low or low in ("resources", "limits", "gpumemory"):
        cel = suggest_cel({key: value}) if not isinstance(value, Mapping) else suggest_cel(value)
        out.error(
            f"{path}.{key}",
            f"{key} is not a field of a device request; to pick GPUs by memory use "
            + _selectors_text(cel),
        )
    else:
        out.error(f"{path}.{key}", f"unknown field {key!r}; this level has {allowed}")


def _check_selectors(out: _Collector, path: str, selectors: Any) -> None:
    if isinstance(selectors, str):
        out.error(
            path,
            "selectors is a list of {cel: {expression: ...}}, not a string; use "
            + _selectors_text(selectors),
        )
        return
    if isinstance(selectors, Mapping):
        cel = suggest_cel(selectors) if "cel" not in selectors else _MEMORY_EXAMPLE
        out.error(path, "selectors is a list, not a mapping; use " + _selectors_text(cel))
        return
    if not isinstance(selectors, list):
        out.error(path, "selectors must be a list; use " + _SELECTOR_EXAMPLE)
        return
    for k, sel in enumerate(selectors):
        spath = f"{path}[{k}]"
        if isinstance(sel, str):
            out.error(
                spath,
                "a selector is {cel: {expression: ...}}, not a bare string; use "
                + _selectors_text(sel),
            )
            continue
        if not isinstance(sel, Mapping):
            out.error(spath, "a selector must be a mapping {cel: {expression: ...}}")
            continue
        if "cel" not in sel:
            if "expression" in sel:
                out.error(
                    spath,
                    "the expression belongs under cel:, use "
                    + _selectors_text(str(sel["expression"])),
                )
            else:
                cel = suggest_cel(
                    {k2: v for k2, v in sel.items() if not isinstance(v, Mapping | list)}
                    or {"memory": ">=40"}
                )
                if "matchLabels" in sel or "matchExpressions" in sel:
                    cel = _MEMORY_EXAMPLE
                out.error(
                    spath,
                    f"selector {_short(sel)} is not CEL (a DRA selector has only cel:); use "
                    + _selectors_text(cel),
                )
            continue
        extra = [k2 for k2 in sel if k2 != "cel"]
        if extra:
            out.error(f"{spath}.{extra[0]}", f"unknown field {extra[0]!r}; a selector has cel")
        cel = sel["cel"]
        if isinstance(cel, str):
            out.error(
                f"{spath}.cel",
                "cel is a mapping {expression: ...}, not a string; use " + _selectors_text(cel),
            )
            continue
        if not isinstance(cel, Mapping) or "expression" not in cel:
            out.error(f"{spath}.cel", "cel needs expression: use " + _SELECTOR_EXAMPLE)
            continue
        for severity, message in check_cel(cel["expression"]):
            out.problems.append(Problem(f"{spath}.cel.expression", message, severity))


def _check_constraints(out: _Collector, path: str, constraints: Any, names: list[str]) -> None:
    if constraints is None:
        return
    if not isinstance(constraints, list):
        out.error(f"{path}.constraints", "constraints must be a list")
        return
    for i, con in enumerate(constraints):
        cpath = f"{path}.constraints[{i}]"
        if not isinstance(con, Mapping):
            out.error(cpath, "a constraint must be a mapping {requests, matchAttribute}")
            continue
        for key in con:
            if key in _CONSTRAINT_FIELDS:
                continue
            if key.lower() in ("matchexpression", "matchexpressions", "expression", "cel"):
                out.error(
                    f"{cpath}.{key}",
                    f"{key} is not a field of a constraint: a constraint only says that the "
                    "devices of its requests share one attribute value, with matchAttribute: "
                    f"<domain>/<attribute>, e.g. {{matchAttribute: {NVIDIA_DRIVER}/productName}}; "
                    "to restrict the values put a CEL selector on the request: "
                    + _selectors_text(_constraint_cel(con[key])),
                )
            elif key.lower() in ("matchlabels", "matchattributes", "attribute"):
                out.error(
                    f"{cpath}.{key}",
                    f"{key} is not a field of a constraint; write matchAttribute: "
                    f"{NVIDIA_DRIVER}/productName (one attribute, fully qualified)",
                )
            else:
                out.error(
                    f"{cpath}.{key}",
                    f"unknown field {key!r}; a constraint has "
                    f"{', '.join(sorted(_CONSTRAINT_FIELDS))}",
                )
        attrs = [k for k in ("matchAttribute", "distinctAttribute") if k in con]
        if not attrs:
            out.error(
                cpath,
                f"a constraint needs matchAttribute (e.g. {NVIDIA_DRIVER}/productName) or "
                "distinctAttribute",
            )
        for key in attrs:
            value = con[key]
            if not isinstance(value, str) or not _QUALIFIED_RE.match(value):
                fix = (
                    f"{NVIDIA_DRIVER}/{value}"
                    if isinstance(value, str) and "/" not in value and value
                    else f"{NVIDIA_DRIVER}/productName"
                )
                out.error(
                    f"{cpath}.{key}",
                    f"{key} {value!r} is not a fully qualified attribute name "
                    f"(<domain>/<name>); write {key}: {fix}",
                )
        _check_request_refs(out, f"{cpath}.requests", con.get("requests"), names)


def _constraint_cel(value: Any) -> str:
    """A CEL selector from a made-up matchExpression(s) value."""
    items = value if isinstance(value, list) else [value]
    clauses = []
    for item in items:
        if isinstance(item, str):
            clauses.append(item)
            continue
        if not isinstance(item, Mapping):
            continue
        key = str(item.get("key") or item.get("attribute") or "productName")
        key = key.split("/", 1)[1] if "/" in key else key
        values = item.get("values") or []
        op = str(item.get("operator", "In"))
        if op == "In" and values:
            if len(values) == 1:
                clauses.append(
                    f"device.attributes['{NVIDIA_DRIVER}'].{key} == {_cel_string(str(values[0]))}"
                )
            else:
                listed = ", ".join(_cel_string(str(v)) for v in values)
                clauses.append(f"device.attributes['{NVIDIA_DRIVER}'].{key} in [{listed}]")
        elif op == "NotIn" and values:
            listed = ", ".join(_cel_string(str(v)) for v in values)
            clauses.append(f"!(device.attributes['{NVIDIA_DRIVER}'].{key} in [{listed}])")
    return (
        " && ".join(clauses) or f"device.attributes['{NVIDIA_DRIVER}'].productName == 'NVIDIA H200'"
    )


def _check_request_refs(out: _Collector, path: str, refs: Any, names: list[str]) -> None:
    if refs is None:
        return
    if not isinstance(refs, list):
        out.error(path, "requests must be a list of request names")
        return
    for ref in refs:
        base = str(ref).split("/", 1)[0]
        if base not in names:
            out.error(
                path,
                f"request {ref!r} is not a request of this claim (requests: "
                f"{', '.join(names) or 'none'})",
            )


def _check_config(out: _Collector, path: str, config: Any, names: list[str]) -> None:
    if config is None:
        return
    if not isinstance(config, list):
        out.error(f"{path}.config", "config must be a list of {requests, opaque}")
        return
    for i, entry in enumerate(config):
        cpath = f"{path}.config[{i}]"
        if not isinstance(entry, Mapping):
            out.error(cpath, "a config entry must be a mapping {requests, opaque}")
            continue
        for key in entry:
            if key not in _CONFIG_FIELDS:
                hint = ""
                if key in ("parameters", "sharing", "driver"):
                    hint = (
                        "; the driver's parameters go under opaque: {driver: gpu.nvidia.com, "
                        "parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, "
                        "sharing: ...}}"
                    )
                out.error(
                    f"{cpath}.{key}",
                    f"unknown field {key!r}; a config entry has requests, opaque{hint}",
                )
        _check_request_refs(out, f"{cpath}.requests", entry.get("requests"), names)
        opaque = entry.get("opaque")
        if opaque is None:
            out.error(f"{cpath}.opaque", "a config entry needs opaque: {driver, parameters}")
            continue
        if not isinstance(opaque, Mapping):
            out.error(f"{cpath}.opaque", "opaque must be a mapping {driver, parameters}")
            continue
        for key in opaque:
            if key not in ("driver", "parameters"):
                out.error(
                    f"{cpath}.opaque.{key}", f"unknown field {key!r}; opaque has driver, parameters"
                )
        if not opaque.get("driver"):
            out.error(f"{cpath}.opaque.driver", f"opaque needs driver: {NVIDIA_DRIVER}")
        params = opaque.get("parameters")
        if not isinstance(params, Mapping):
            out.error(f"{cpath}.opaque.parameters", "parameters must be a mapping (a JSON object)")
            continue
        if opaque.get("driver") == NVIDIA_DRIVER:
            _check_nvidia_parameters(out, f"{cpath}.opaque.parameters", params)


def _check_nvidia_parameters(out: _Collector, path: str, params: Mapping[str, Any]) -> None:
    if params.get("apiVersion") != GPU_CONFIG_API_VERSION:
        out.error(
            f"{path}.apiVersion",
            f"apiVersion {params.get('apiVersion')!r}: the NVIDIA DRA driver decodes "
            f"apiVersion: {GPU_CONFIG_API_VERSION}",
        )
    kind = params.get("kind")
    if kind not in _CONFIG_KINDS:
        out.error(f"{path}.kind", f"kind {kind!r} is not one of {', '.join(_CONFIG_KINDS)}")
        return
    allowed = (
        {"apiVersion", "kind", "sharing"}
        if kind != "VfioDeviceConfig"
        else {"apiVersion", "kind", "iommu"}
    )
    for key in params:
        if key not in allowed:
            out.error(
                f"{path}.{key}",
                f"unknown field {key!r} in {kind}: the driver decodes strictly and fails the "
                f"claim at prepare time; {kind} has "
                + ", ".join(sorted(allowed - {"apiVersion", "kind"})),
            )
    sharing = params.get("sharing")
    if kind == "VfioDeviceConfig" or sharing is None:
        return
    if not isinstance(sharing, Mapping):
        out.error(f"{path}.sharing", "sharing must be a mapping {strategy: TimeSlicing|MPS, ...}")
        return
    strategy = sharing.get("strategy")
    if strategy not in SHARING_STRATEGIES:
        out.error(
            f"{path}.sharing.strategy",
            f"strategy {strategy!r} is not one of {', '.join(SHARING_STRATEGIES)}",
        )
    allowed_sharing = {"strategy", "mpsConfig"} | (
        {"timeSlicingConfig"} if kind == "GpuConfig" else set()
    )
    for key in sharing:
        if key not in allowed_sharing:
            out.error(
                f"{path}.sharing.{key}",
                f"unknown field {key!r} in {kind}.sharing; it has "
                + ", ".join(sorted(allowed_sharing)),
            )
    ts = sharing.get("timeSlicingConfig")
    if ts is not None:
        if strategy != "TimeSlicing":
            out.error(
                f"{path}.sharing.timeSlicingConfig", "timeSlicingConfig needs strategy: TimeSlicing"
            )
        interval = ts.get("interval") if isinstance(ts, Mapping) else None
        if interval is not None and interval not in TIME_SLICE_INTERVALS:
            out.error(
                f"{path}.sharing.timeSlicingConfig.interval",
                f"interval {interval!r} is not one of {', '.join(TIME_SLICE_INTERVALS)}",
            )
    mps = sharing.get("mpsConfig")
    if mps is not None:
        if strategy != "MPS":
            out.error(f"{path}.sharing.mpsConfig", "mpsConfig needs strategy: MPS")
        if isinstance(mps, Mapping):
            pct = mps.get("defaultActiveThreadPercentage")
            if pct is not None and (
                isinstance(pct, bool) or not isinstance(pct, int) or not 0 <= pct <= 100
            ):
                out.error(
                    f"{path}.sharing.mpsConfig.defaultActiveThreadPercentage",
                    f"{pct!r} is not an integer from 0 to 100",
                )
    if isinstance(strategy, str) and strategy in DRIVER_GATE_FOR_STRATEGY:
        gate = DRIVER_GATE_FOR_STRATEGY[strategy]
        out.warn(
            f"{path}.sharing.strategy",
            f"{strategy} needs the driver feature gate {gate} (chart value "
            f"featureGates.{gate}=true); without it the claim fails at prepare time",
        )


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def problems_by_severity(problems: Iterable[Problem]) -> dict[str, list[Problem]]:
    """``{"error": [...], "warning": [...]}``."""
    out: dict[str, list[Problem]] = {ERROR: [], WARNING: []}
    for p in problems:
        out.setdefault(p.severity, []).append(p)
    return out
