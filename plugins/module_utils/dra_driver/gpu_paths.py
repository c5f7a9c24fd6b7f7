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

On the cluster a GPU node carries its pool's path as the label ``PATH_LABEL``
(``gpufleet.io/gpu-path=device-plugin`` or ``=dra``, set by the gpu_node_labels role from the
inventory groups, ``path_labels``), which the DaemonSets of the two paths select; what a node
advertises is its path as the cluster shows it (``node_path``): ``device-plugin``, ``dra``,
``both`` or ``none``.

The roles read the inventory through ``host_path`` and ``pools``, which refuse a host on both
paths or in a ``gpu_path_*`` group that names no path (preflight's ``gpu-path-both`` and
``gpu-path-unknown``, for a role run without preflight).

Sources: the device plugin's resource names (NVIDIA/k8s-device-plugin
``internal/rm/rm.go``, ``api/config/v1/resources.go``); the kubelet keeps an extended
resource listed at 0 after its plugin stops (``pkg/kubelet/nodestatus/setters.go``
``MachineInfo``: the resources ``devicemanager`` ``GetCapacity`` reports as removed get a
capacity of 0), so only a positive quantity advertises GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import RefusedValue
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
    "PATH_LABEL",
    "GpuPathError",
    "device_plugin_resources",
    "gpu_drivers",
    "host_path",
    "inventory_paths",
    "node_path",
    "path_group",
    "path_groups_of",
    "path_labels",
    "pools",
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
#: The Node label that carries a GPU node's path (value ``device-plugin`` or ``dra``, both
#: valid label values); the prefix is the collection's own (``gpufleet.io/``), as on its
#: other objects.
PATH_LABEL = "gpufleet.io/gpu-path"


class GpuPathError(RefusedValue):
    """A host whose groups declare no single known path: ``variable`` is ``group_names``,
    ``value`` the offending groups; ``str()`` names the host, the groups and the fix."""


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


def path_groups_of(hosts: Iterable[str], groups: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The ``gpu_path_*`` groups of each of ``hosts`` (sorted, in the order of ``hosts``),
    read from ``groups``, Ansible's group -> hosts mapping: what ``host_path`` reads of a
    host's ``group_names``, without asking Ansible for every host's variables (at 10,000
    hosts that alone takes seconds)."""
    members: dict[str, list[str]] = {}
    for group, group_hosts in sorted((str(g), m) for g, m in groups.items()):
        if group.startswith(PATH_GROUP_PREFIX):
            for host in group_hosts or ():
                members.setdefault(str(host), []).append(group)
    return [list(members.get(str(h), ())) for h in hosts]


def host_path(host: str, groups: Iterable[str]) -> str:
    """The path of the GPU host ``host`` from its inventory ``groups``: the one it declares,
    else ``DEFAULT_PATH``. Raises GpuPathError for a host on both paths or in a
    ``gpu_path_*`` group that names no known path."""
    paths, unknown = inventory_paths(groups)
    known = " or ".join(path_group(p) for p in PATHS)
    if unknown:
        raise GpuPathError(
            "group_names",
            unknown,
            f"host {host} is in {', '.join(unknown)}, which names no GPU path",
            f"put the host's node group in {known} instead; a GPU host in neither is on the "
            f"{DEFAULT_PATH} path",
        )
    if len(paths) > 1:
        groups_of = [path_group(p) for p in paths]
        raise GpuPathError(
            "group_names",
            groups_of,
            f"host {host} is on both GPU paths: the device plugin and the DRA driver would "
            "each advertise its GPUs, and the scheduler would hand one GPU out twice",
            f"keep the host's node group in one of {' or '.join(groups_of)}",
        )
    return paths[0] if paths else DEFAULT_PATH


def pools(hosts: Iterable[tuple[str, Iterable[str]]]) -> dict[str, list[str]]:
    """The GPU hosts by path: ``hosts`` is ``(name, groups)`` pairs (an inventory host or its
    node name, and the host's inventory groups); returns path -> names, with every path of
    ``PATHS`` as a key and the names in the order given. Raises GpuPathError as
    ``host_path`` does."""
    out: dict[str, list[str]] = {p: [] for p in PATHS}
    for name, groups in hosts:
        out[host_path(str(name), groups)].append(str(name))
    return out


def path_labels(hosts: Iterable[tuple[str, Iterable[str]]]) -> dict[str, dict[str, str]]:
    """``{name: {PATH_LABEL: path}}`` for ``(name, groups)`` pairs (a node name and its
    host's inventory groups): the label each GPU node gets. Raises GpuPathError as
    ``host_path`` does."""
    return {str(name): {PATH_LABEL: host_path(str(name), groups)} for name, groups in hosts}


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
