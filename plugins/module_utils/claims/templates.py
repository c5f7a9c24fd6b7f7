# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""ResourceClaimTemplates for NVIDIA GPUs under DRA: the builders.

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
model (``dra.served_api_versions``) which one a Kubernetes release serves. Shapes:
``v1`` and ``v1beta2`` put the device class and selectors under ``requests[].exactly``,
``v1beta1`` directly on ``requests[]`` (``staging/src/k8s.io/api/resource/<version>/
types.go``, ``DeviceRequest`` / ``ExactDeviceRequest``, k8s.io/api v0.33.13 and v0.37.0).

The parts, one job each: ``claims.api`` (which ``resource.k8s.io`` version, its shapes),
``dra_driver.classes`` (the NVIDIA DRA driver's DeviceClasses, attributes, capacities and opaque
configuration), ``claims.cel`` (selector CEL: written, suggested, checked), ``claims.check``
(``check_claim_spec``: shapes that look plausible but are not the API) and
``claims.problems`` (what the checkers report).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import metadata as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.api import (
    RESOURCE_GROUP,
    resolve_api_version,
    split_api_version,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.cel import (
    cel_memory_at_least,
    cel_mig_profile,
    memory_quantity,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.metadata import (
    ClaimTemplateError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import resource_versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    GPU_CLASS,
    MIG_CLASS,
    NVIDIA_DRIVER,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.classes import (
    GPU_CONFIG_API_VERSION,
    SHARING_STRATEGIES,
    TIME_SLICE_INTERVALS,
)

__all__ = [
    "KINDS",
    "ClaimTemplateError",
    "build",
    "gpu_pair_same_product",
    "gpu_with_memory",
    "mig_slice",
    "shared_gpu",
]


#: Template kinds of ``build`` and the CLI.
KINDS = ("mig-slice", "gpu-with-memory", "shared-gpu", "gpu-pair-same-product")


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
    if version in resource_versions.EXACTLY_REQUEST_VERSIONS:
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
    version = split_api_version(resolve_api_version(api_version, kubernetes_version))
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
    version = split_api_version(resolve_api_version(api_version, kubernetes_version))
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
    version = split_api_version(resolve_api_version(api_version, kubernetes_version))
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
    version = split_api_version(resolve_api_version(api_version, kubernetes_version))
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
                "kind mig-slice needs profile=<MIG profile>.", "give e.g. profile=1g.18gb."
            )
        return mig_slice(params["profile"], count=params.get("count", 1), **extra, **common)
    if kind == "gpu-with-memory":
        if params.get("min_memory_gib") in (None, ""):
            raise ClaimTemplateError(
                "kind gpu-with-memory needs min_memory_gib=<GiB>.",
                "give e.g. min_memory_gib=40.",
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
