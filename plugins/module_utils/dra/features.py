# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: the DRA features (capabilities a user asks for by name:
``FEATURES``), each with the gates and API kinds it needs and the minor from which it is
core DRA.

Importers import the part that defines what they use (no module re-exports another's names)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.api import (
    _DTR,
    _RPSR,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    VersionParseError,
)

# --------------------------------------------------------------------------------------
# Features asked for by name
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureDef:
    """A DRA capability a user asks for by name.

    ``gates``: gates to enable (their dependencies are added); ``api_kinds``:
    resource.k8s.io kinds it needs served (the most stable served version carrying the kind
    is enabled with --runtime-config when off by default); ``core_before``: before this
    minor the capability is part of DynamicResourceAllocation itself.
    """

    name: str
    gates: tuple[str, ...]
    description: str
    api_kinds: tuple[str, ...] = ()
    core_before: int | None = None


_FEATURE_LIST = (
    FeatureDef(
        "admin-access", ("DRAAdminAccess",), "privileged claims (adminAccess) for monitoring"
    ),
    FeatureDef("binding-conditions", ("DRADeviceBindingConditions",), "device binding conditions"),
    FeatureDef("consumable-capacity", ("DRAConsumableCapacity",), "share a device by capacity"),
    FeatureDef(
        "control-plane-controller",
        ("DRAControlPlaneController",),
        "classic DRA with a driver control-plane controller",
        core_before=31,
    ),
    FeatureDef("derived-attributes", ("DRADerivedAttributes",), "derived device attributes"),
    FeatureDef(
        "device-compatibility-groups",
        ("DRADeviceCompatibilityGroups",),
        "compatibility groups of partitionable devices",
    ),
    FeatureDef("device-health", ("ResourceHealthStatus",), "device health in Pod status"),
    FeatureDef("device-status", ("DRAResourceClaimDeviceStatus",), "driver-reported device status"),
    FeatureDef(
        "device-taint-rules",
        ("DRADeviceTaintRules",),
        "DeviceTaintRule objects",
        api_kinds=(_DTR,),
    ),
    FeatureDef("device-taints", ("DRADeviceTaints",), "device taints and tolerations"),
    FeatureDef(
        "extended-resource",
        ("DRAExtendedResource",),
        "extended resources (e.g. nvidia.com/gpu) backed by DRA (DeviceClass extendedResourceName)",
    ),
    FeatureDef(
        "fractional-capacity-range", ("DRAFractionalCapacityRange",), "fractional capacity ranges"
    ),
    FeatureDef(
        "granular-status-authorization",
        ("DRAResourceClaimGranularStatusAuthorization",),
        "per-field ResourceClaim status authorization",
    ),
    FeatureDef("list-type-attributes", ("DRAListTypeAttributes",), "list-typed device attributes"),
    FeatureDef(
        "node-allocatable-resources",
        ("DRANodeAllocatableResources",),
        "node allocatable resources backed by DRA",
    ),
    FeatureDef(
        "optional-node-operations", ("DRAOptionalNodeOperations",), "optional node operations"
    ),
    FeatureDef(
        "partitionable-devices", ("DRAPartitionableDevices",), "partitionable devices (MIG)"
    ),
    FeatureDef(
        "partitionable-devices-type",
        ("DRAPartitionableDevicesType",),
        "partitionable device types in pool status",
    ),
    FeatureDef(
        "pod-resources-api",
        ("KubeletPodResourcesDynamicResources",),
        "DRA devices in the kubelet PodResources API",
    ),
    FeatureDef("prioritized-list", ("DRAPrioritizedList",), "firstAvailable sub-requests"),
    FeatureDef(
        "resource-pool-status",
        ("DRAResourcePoolStatus",),
        "ResourcePoolStatusRequest objects",
        api_kinds=(_RPSR,),
    ),
    FeatureDef(
        "scheduler-filter-timeout", ("DRASchedulerFilterTimeout",), "scheduler Filter timeout"
    ),
    FeatureDef(
        "workload-resource-claims",
        ("DRAWorkloadResourceClaims",),
        "ResourceClaims for workloads (GenericWorkload)",
    ),
)


#: feature name -> FeatureDef.
FEATURES: dict[str, FeatureDef] = {f.name: f for f in _FEATURE_LIST}


ALL_FEATURES = tuple(sorted(FEATURES))


def feature_def(name: str) -> FeatureDef:
    try:
        return FEATURES[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(FEATURES), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise VersionParseError(
            f"feature {name!r} is not a DRA feature the version model knows{hint}.",
            "use one of: {}.".format(", ".join(ALL_FEATURES)),
        ) from None
