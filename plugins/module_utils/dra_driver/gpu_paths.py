# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The GPU path of a node pool: how its GPUs reach pods. One path per node, never both:
NVIDIA's device plugin and a DRA driver each advertise every GPU of the node, so with both
the scheduler hands one GPU out twice (once as ``nvidia.com/gpu`` through the kubelet's
device manager, once as a DRA device through a ResourceClaim).

* ``device-plugin``: NVIDIA's device plugin advertises the extended resource
  ``nvidia.com/gpu`` (and ``nvidia.com/mig-<profile>`` with its mixed MIG strategy) in the
  Node's ``status.capacity`` and ``status.allocatable``;
* ``dra``: a DRA driver publishes the GPUs as devices in ResourceSlices of the node
  (``spec.nodeName``, ``spec.driver`` ``gpu.nvidia.com``).

In the inventory a pool takes its path by group: ``gpu_path_device_plugin`` or
``gpu_path_dra`` (``path_group``), usually with the pool's node group (``gpu_h200``) as a
child; a GPU host in neither is on ``DEFAULT_PATH``. A group named ``gpu_path_<other>``
names an unknown path.

On the cluster a node's path is what it advertises (``node_path``): ``device-plugin``,
``dra``, ``both`` or ``none``.

Sources: the device plugin's resource names (NVIDIA/k8s-device-plugin
``internal/rm/rm.go``, ``api/config/v1/resources.go``); the kubelet keeps an extended
resource listed at 0 after its plugin stops (``pkg/kubelet/nodestatus/setters.go``
``MachineInfo``: the resources ``devicemanager`` ``GetCapacity`` reports as removed get a
capacity of 0), so only a positive quantity advertises GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    DEVICE_PLUGIN_RESOURCE,
    NVIDIA_DRIVER,
)

__all__ = [
    "BOTH",
    "DEFAULT_PATH",
    "DEVICE_PLUGIN",
    "DEVICE_PLUGIN_MIG_PREFIX",
    "DRA",
    "NONE",
    "PATHS",
    "PATH_GROUP_PREFIX",
    "device_plugin_resources",
    "gpu_drivers",
    "inventory_paths",
    "node_path",
    "path_group",
]

DEVICE_PLUGIN = "device-plugin"
DRA = "dra"
#: Node paths only the cluster can show: advertised both ways, or not at all.
BOTH = "both"
NONE = "none"
#: The paths a pool can declare, in the order messages list them.
PATHS = (DEVICE_PLUGIN, DRA)
#: The path of a GPU host in no ``gpu_path_*`` group: DRA, what the roles provision.
DEFAULT_PATH = DRA
#: Inventory groups that declare a path: ``gpu_path_`` + the path with ``_`` for ``-``
#: (Ansible group names take no ``-``).
PATH_GROUP_PREFIX = "gpu_path_"
#: The device plugin's MIG resources with its mixed strategy (``nvidia.com/mig-1g.18gb``).
DEVICE_PLUGIN_MIG_PREFIX = "nvidia.com/mig-"


def path_group(path: str) -> str:
    """The inventory group of ``path``: ``gpu_path_device_plugin``, ``gpu_path_dra``."""
    return PATH_GROUP_PREFIX + path.replace("-", "_")


def inventory_paths(groups: Iterable[str]) -> tuple[list[str], list[str]]:
    """``(paths, unknown)`` a host's groups declare: the known paths (``PATHS`` order)
    and the ``gpu_path_*`` groups that name no known path (sorted)."""
    by_group = {path_group(p): p for p in PATHS}
    names = {str(g) for g in groups}
    paths = [p for p in PATHS if path_group(p) in names]
    unknown = sorted(g for g in names if g.startswith(PATH_GROUP_PREFIX) and g not in by_group)
    return paths, unknown


def gpu_drivers(driver: str) -> tuple[str, ...]:
    """DRA drivers whose devices are GPUs: NVIDIA's (``gpu.nvidia.com``, also the lab's GPU
    simulator's) and ``driver``, the one validated, when it has another name."""
    return tuple(dict.fromkeys((NVIDIA_DRIVER, driver or NVIDIA_DRIVER)))


def device_plugin_resources(status: Any) -> dict[str, tuple[str, Any]]:
    """The device plugin's resources in a Node's ``status``: resource name -> (the member
    that lists it, its quantity as the API wrote it), from ``allocatable`` where it lists
    the resource (the scheduler reads it), else ``capacity``. Names: ``nvidia.com/gpu``
    and ``nvidia.com/mig-*``. A ``status`` or member that is not an object lists none."""
    out: dict[str, tuple[str, Any]] = {}
    if not isinstance(status, Mapping):
        return out
    for member in ("capacity", "allocatable"):  # allocatable, read last, wins
        values = status.get(member)
        if not isinstance(values, Mapping):
            continue
        for name, value in values.items():
            if name == DEVICE_PLUGIN_RESOURCE or str(name).startswith(DEVICE_PLUGIN_MIG_PREFIX):
                out[str(name)] = (member, value)
    return out


def node_path(device_plugin: bool, dra: bool) -> str:
    """``device-plugin``, ``dra``, ``both`` or ``none`` from what a node advertises."""
    if device_plugin and dra:
        return BOTH
    if device_plugin:
        return DEVICE_PLUGIN
    return DRA if dra else NONE
