# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Preflight rules of the GPU path a host's pool declares (``dra_driver.gpu_paths``): the
inventory groups ``gpu_path_device_plugin`` and ``gpu_path_dra``.

* ``gpu-path-both``: a host in both groups. NVIDIA's device plugin and the DRA driver
  would each advertise every GPU of the node, and the scheduler would hand one GPU out
  twice; a pool moves from one path to the other, it is never on both.
* ``gpu-path-unknown``: a host in a ``gpu_path_*`` group that names no known path
  (``gpu_path_device-plugin``, ``gpu_path_dra_mig``): without this rule the host would
  silently stay on the default path.
* ``gpu-path-not-gpu``: a host on a path but not in the GPU group (``gpu_nodes``): it gets
  neither the GPU stack nor the labels, so nothing would advertise its GPUs.

The finding's variable is ``group_names`` (Ansible's list of the host's groups) and its
value the offending groups; the messages leave the host out, so that the hosts of one pool
share one finding and the report names them (``rules.format_report``).
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import (
    ERROR,
    HostContext,
    problem,
)

__all__ = ["rule_gpu_path"]

_KNOWN = ", ".join(f"{p} (group {gp.path_group(p)})" for p in gp.PATHS)


def rule_gpu_path(ctx: HostContext) -> None:
    """The host declares at most one known GPU path, and only as a GPU host."""
    paths, unknown = gp.inventory_paths(ctx.groups)
    for group in unknown:
        named = group[len(gp.PATH_GROUP_PREFIX) :] or "(empty)"
        ctx.add(
            problem(
                "gpu-path-unknown",
                ERROR,
                "group_names",
                group,
                f"in group {group}, which names the GPU path {named!r}; "
                f"the known paths are {_KNOWN}",
                f"put the host (or its node group) in {gp.path_group(gp.DEVICE_PLUGIN)} or "
                f"{gp.path_group(gp.DRA)} instead of {group}; a GPU host in neither is on "
                f"the {gp.DEFAULT_PATH} path",
            )
        )
    if len(paths) > 1:
        groups = [gp.path_group(p) for p in paths]
        ctx.add(
            problem(
                "gpu-path-both",
                ERROR,
                "group_names",
                groups,
                f"on both GPU paths ({' and '.join(groups)}): the device "
                "plugin and the DRA driver would each advertise its GPUs, and the scheduler "
                "would hand one GPU out twice",
                f"keep the host's node group in one of {' or '.join(groups)}; to move a pool, "
                "take it out of one group and put it in the other",
            )
        )
    if paths and not ctx.is_gpu:
        group = gp.path_group(paths[0])
        ctx.add(
            problem(
                "gpu-path-not-gpu",
                ERROR,
                "group_names",
                group,
                f"in {group} but not in the GPU group {ctx.gpu_group!r}: it "
                "would get no GPU stack and no GPU labels, so nothing would advertise its GPUs",
                f"put the host in {ctx.gpu_group!r} too (the path groups hold GPU node groups "
                f"such as gpu_h200), or take it out of {group}",
            )
        )
