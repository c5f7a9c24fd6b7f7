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
  ``constraints: [{matchAttribute: gpu.nvidia.com/productName}]``;
* ``mig_with_memory(min_memory)``: one MIG device from ``mig.nvidia.com`` whose capacity
  ``memory`` is at least ``min_memory`` (a quantity, ``20Gi``), the smallest that fits first:
  ``firstAvailable`` subrequests ordered by the MIG memory sizes of the known GPU models
  (feature gate ``DRAPrioritizedList``), the last one taking any size that fits.

MIG devices with the NVIDIA DRA driver's ``DynamicMIG`` gate (one device per profile and
placement, drawing on a CounterSet of its GPU) publish the same ``profile`` attribute and
``memory`` capacity as the devices of MIG instances made beforehand (static MIG), so
``mig_slice`` and ``mig_with_memory`` serve both.

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
    default_kubernetes_version,
    resolve_api_version,
    split_api_version,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.cel import (
    cel_memory_at_least,
    cel_memory_compare,
    cel_mig_profile,
    memory_quantity,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.metadata import (
    ClaimTemplateError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
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
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.quantity import (
    QuantityError,
    parse_quantity,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr

__all__ = [
    "KINDS",
    "ClaimTemplateError",
    "build",
    "gpu_pair_same_product",
    "gpu_with_memory",
    "mig_slice",
    "mig_with_memory",
    "shared_gpu",
]


#: Template kinds of ``build`` and the CLI.
KINDS = (
    "mig-slice",
    "mig-with-memory",
    "gpu-with-memory",
    "shared-gpu",
    "gpu-pair-same-product",
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
    gpu_model: str | Sequence[str] | None = None,
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
    (``mig-1g-18gb``). The selector matches static MIG devices and the devices of the
    driver's DynamicMIG gate alike (both publish ``profile``). ``gpu_model`` (an NVML name
    such as ``NVIDIA H200``) only checks that the model has the profile; it adds no
    selector. Raises ClaimTemplateError for a bad profile, name or count, an unknown
    ``gpu_model`` or a profile that model does not have."""
    cm.mig_profile_note(profile)  # raises ClaimTemplateError for a profile no GPU has
    if gpu_model is not None:
        _check_model_profile(profile, _gpu_models(gpu_model))
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


#: Feature gate of ``firstAvailable`` subrequests (the prioritized list).
PRIORITIZED_LIST_GATE = "DRAPrioritizedList"


#: Most subrequests of one request (``FirstAvailableMaxSize``,
#: ``staging/src/k8s.io/api/resource/v1/types.go``).
FIRST_AVAILABLE_MAX = 8


def _gpu_model(name: Any) -> mpr.GpuModel:
    """The ``mig.profiles`` model named ``name`` with a MIG table; else ClaimTemplateError."""
    try:
        found = mpr.model(str(name))
    except mpr.UnknownGpuModel:
        found = None
    if found is None or not found.profiles:
        raise ClaimTemplateError(
            f"gpu_model={str(name)[:80]!r} is not a GPU model with a MIG table here.",
            "give the name nvidia-smi -L prints, e.g. 'NVIDIA H200', 'NVIDIA B200', "
            "'NVIDIA H100 80GB HBM3', or leave it out.",
        )
    return found


def _gpu_models(gpu_model: str | Sequence[str] | None) -> list[mpr.GpuModel]:
    """The models named by ``gpu_model`` (one name or several; None: every model with a
    MIG table in ``mig.profiles``)."""
    if gpu_model is None:
        return [m for m in mpr.MODELS.values() if m.profiles]
    names = [gpu_model] if isinstance(gpu_model, str) else list(gpu_model)
    if not names:
        return [m for m in mpr.MODELS.values() if m.profiles]
    return [_gpu_model(n) for n in names]


def _check_model_profile(profile: str, gpus: Sequence[mpr.GpuModel]) -> None:
    """ClaimTemplateError unless one of ``gpus`` has the GPU-instance profile of
    ``profile``."""
    parts = mpr.parse_profile(profile)
    gi_name = parts.gi_profile if parts else profile
    for gpu in gpus:
        names = [p.name for p in gpu.profiles]
        if gi_name in names or gi_name.replace("+me.all", "+me") in names:
            return
    models = ", ".join(g.name for g in gpus)
    offered = sorted({p.name for g in gpus for p in g.profiles})
    raise ClaimTemplateError(
        f"profile={profile!r} is not a MIG profile of gpu_model={models!r}.",
        f"give one of {', '.join(offered)}.",
    )


def mig_memory_bands(min_mib: int, gpu_model: str | Sequence[str] | None = None) -> list[int]:
    """The upper bounds in MiB of the ``firstAvailable`` subrequests of
    ``mig_with_memory``, ascending, at most ``FIRST_AVAILABLE_MAX - 1``: first each model's
    smallest MIG memory size of at least ``min_mib`` (so the first subrequest that matches
    a GPU of that model takes its smallest fitting profile), then its next sizes while
    room is left. Sizes are the capacity ``memory`` the NVIDIA DRA driver publishes for a
    MIG device (memorySizeMB * 2^20 bytes: the ``memory_mib`` of ``mig.profiles``).
    ``gpu_model``: one NVML name or several (None: every model with a MIG table). Raises
    ClaimTemplateError for an unknown model."""
    room = FIRST_AVAILABLE_MAX - 1
    fitting = [sorted({p.memory_mib for p in g.profiles if p.memory_mib >= min_mib})
               for g in _gpu_models(gpu_model)]  # fmt: skip
    bands = sorted({sizes[0] for sizes in fitting if sizes})[:room]
    rest = sorted({mib for sizes in fitting for mib in sizes} - set(bands))
    return sorted(bands + rest[: room - len(bands)])


def _mib_quantity(mib: int) -> str:
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def check_min_memory(value: Any, name: str = "min_memory") -> tuple[str, int]:
    """``value`` (a Kubernetes quantity, ``20Gi``) as ``(text, bytes)``: more than 0 and at
    most ``MAX_MEMORY_GIB`` GiB. Raises ClaimTemplateError naming ``name`` and the value."""
    text = str(value).strip()
    try:
        size = parse_quantity(text) if not isinstance(value, bool) else None
    except QuantityError:
        size = None
    if size is None or not 0 < size <= cm.MAX_MEMORY_GIB * 1024**3:
        what = "not a Kubernetes quantity" if size is None else "not more than 0"
        if size is not None and size > 0:
            what = f"more than any GPU has ({cm.MAX_MEMORY_GIB}Gi)"
        raise ClaimTemplateError(
            f"{name}={text[:40]!r} is {what}.",
            "give the smallest memory the workload needs as a quantity, e.g. 20Gi or 40960Mi.",
        )
    return text, int(size)


def prioritized_list_refusal(kubernetes_version: str) -> str | None:
    """Why ``kubernetes_version`` cannot take ``firstAvailable`` subrequests as released
    (feature gate ``DRAPrioritizedList`` unknown or off by default, per the version
    model), or None when it can."""
    state = dra_gates.gate_state(PRIORITIZED_LIST_GATE, kubernetes_version)
    if state.known and state.default:
        return None
    first = next(
        m
        for m in range(dra_core.PROVISION_MIN_MINOR, dra_core.PROVISION_MAX_MINOR + 1)
        if dra_gates.gate_state(PRIORITIZED_LIST_GATE, f"1.{m}").default
    )
    return (
        f"in Kubernetes {kubernetes_version} feature gate {PRIORITIZED_LIST_GATE} "
        f"(firstAvailable subrequests) is {state.describe()}; it is on by default from 1.{first}"
    )


def _memory_subrequests(minimum: str, bands: Sequence[int], count: int) -> list[dict[str, Any]]:
    at_least = cel_memory_compare(minimum, ">=")
    subs = [
        _subrequest(
            f"up-to-{_mib_quantity(mib).lower()}",
            [at_least, cel_memory_compare(_mib_quantity(mib), "<=")],
            count,
        )
        for mib in bands
    ]
    return [*subs, _subrequest("any-size", [at_least], count)]


def _subrequest(name: str, selectors: Sequence[str], count: int) -> dict[str, Any]:
    """A ``firstAvailable`` entry (``DeviceSubRequest``: the same fields in v1beta1,
    v1beta2 and v1) for ``count`` MIG devices."""
    return {
        "name": name,
        "deviceClassName": MIG_CLASS,
        "selectors": [{"cel": {"expression": expr}} for expr in selectors],
        "allocationMode": "ExactCount",
        "count": count,
    }


def mig_with_memory(
    min_memory: str,
    *,
    gpu_model: str | Sequence[str] | None = None,
    prefer_smallest: bool = True,
    name: str | None = None,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    count: int = 1,
    request_name: str = "mig",
    api_version: str | None = None,
    kubernetes_version: str | None = None,
) -> dict[str, Any]:
    """A template for ``count`` MIG devices (DeviceClass ``mig.nvidia.com``) whose capacity
    ``memory`` is at least ``min_memory`` (a quantity, ``"20Gi"``), static or DynamicMIG.

    With ``prefer_smallest`` the request is a ``firstAvailable`` list: one subrequest per
    band of ``mig_memory_bands`` (``up-to-<size>``: at least ``min_memory`` and at most
    that size), smallest first, then ``any-size`` (at least ``min_memory``), at most
    ``FIRST_AVAILABLE_MAX`` in all; kube-scheduler takes the first subrequest it can
    satisfy. Name the fleet's GPU models in ``gpu_model`` (one or several NVML names):
    with every known model, more sizes fit than subrequests can hold, and a model whose
    smallest fitting size is left out gets any size that fits. Without ``prefer_smallest``,
    one request with the ``any-size`` selector. Name defaults to ``mig-<min_memory>``
    (``mig-20gi``). Raises ClaimTemplateError for a bad ``min_memory``, model, name or
    count, and, with ``prefer_smallest``, for a release whose ``DRAPrioritizedList`` is
    not on by default.
    """
    text, min_bytes = check_min_memory(min_memory)
    bands = mig_memory_bands(-(-min_bytes // 2**20), gpu_model)
    count = _count(count)
    release = kubernetes_version or default_kubernetes_version()
    refusal = prioritized_list_refusal(release) if prefer_smallest else None
    if refusal:
        raise ClaimTemplateError(
            f"prefer_smallest=True writes firstAvailable subrequests, but {refusal}.",
            "write for a release that has it on, or give prefer_smallest=False for one request "
            "that takes any MIG device with enough memory.",
        )
    version = split_api_version(resolve_api_version(api_version, kubernetes_version))
    _check_name(request_name, "request_name", subdomain=False)
    if prefer_smallest:
        subs = _memory_subrequests(text, bands, count)
        request: dict[str, Any] = {"name": request_name, "firstAvailable": subs}
    else:
        selector = cel_memory_compare(text, ">=")
        request = _request(version, request_name, MIG_CLASS, [selector], count)
    default_name = "mig-" + re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return _template(
        f"{RESOURCE_GROUP}/{version}", name or default_name, namespace, labels, [request]
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


def _build_mig_with_memory(
    params: Mapping[str, Any], extra: dict[str, Any], common: dict[str, Any]
) -> dict[str, Any]:
    if params.get("min_memory") in (None, ""):
        raise ClaimTemplateError(
            "kind mig-with-memory needs min_memory=<quantity>.", "give e.g. min_memory=20Gi."
        )
    prefer = params.get("prefer_smallest", True)
    if not isinstance(prefer, bool):
        raise ClaimTemplateError(
            f"prefer_smallest={prefer!r} is not a boolean.", "give true or false."
        )
    return mig_with_memory(
        params["min_memory"],
        gpu_model=params.get("gpu_model"),
        prefer_smallest=prefer,
        count=params.get("count", 1),
        **extra,
        **common,
    )


BUILD_PARAMS = {
    "mig-slice": ("profile", "gpu_model", "count", "request_name"),
    "mig-with-memory": ("min_memory", "gpu_model", "prefer_smallest", "count", "request_name"),
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
        {kind: mig-with-memory, min_memory: 20Gi, prefer_smallest: true}
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
        return mig_slice(
            params["profile"],
            gpu_model=params.get("gpu_model"),
            count=params.get("count", 1),
            **extra,
            **common,
        )
    if kind == "mig-with-memory":
        return _build_mig_with_memory(params, extra, common)
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
