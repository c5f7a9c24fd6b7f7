# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The NVIDIA DRA driver as ResourceClaims see it: the attribute and capacity keys its
devices publish (and those it no longer publishes), the ``resource.nvidia.com/v1beta1``
opaque configuration kinds and the DeviceClass each is for, sharing strategies and
time-slice intervals, and the driver feature gate each strategy needs. The driver name and
its DeviceClasses are ``dra_driver.chart``'s.

From kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0: ``cmd/gpu-kubelet-plugin/deviceinfo.go``,
``api/nvidia.com/resource/v1beta1/{gpuconfig,sharing}.go``.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    GPU_CLASS,
    MIG_CLASS,
)

__all__ = [
    "CAPACITY_KEYS",
    "CONFIG_CLASS",
    "GPU_CONFIG_API_VERSION",
    "SHARING_STRATEGIES",
    "STRICT_CONFIG_CLASS_FROM",
    "TIME_SLICE_INTERVALS",
]


#: The opaque-parameter API of the driver (api/nvidia.com/resource/v1beta1).
GPU_CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"


CONFIG_KINDS = ("GpuConfig", "MigDeviceConfig", "VfioDeviceConfig")


#: The DeviceClass whose devices each opaque config kind is for: the driver's
#: per-device-type config decoding (GpuConfig for a GPU, MigDeviceConfig for a MIG device).
CONFIG_CLASS = {"GpuConfig": GPU_CLASS, "MigDeviceConfig": MIG_CLASS}


#: The first NVIDIA DRA driver release that fails a claim at prepare time when its opaque
#: config is for another device type (major, minor).
STRICT_CONFIG_CLASS_FROM = (25, 12)


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


MEMORY_SLICE_RE = re.compile(r"^memorySlice\d+$")
