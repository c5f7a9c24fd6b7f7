# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The waves of one upgrade step: which node does what, in which order, in which batch.

Pure: no I/O. Order per step (kubernetes/website
``docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade.md`` and the version-skew policy
``content/en/releases/version-skew-policy.md``): the first control-plane node runs
``kubeadm upgrade apply``, the other control-plane nodes ``kubeadm upgrade node``, one per
wave; workers last, in batches.

Batches: ``batch_size`` is a number of nodes or a percentage of the workers to upgrade
(rounded down, at least 1, as Ansible's ``serial``). A batch is also cut short so that
the GPU devices left schedulable (nodes neither in the batch nor cordoned before) stay at
or above ``min_gpu_available_percent`` of all GPU devices of the cluster. A node that
alone would break the floor makes the plan refuse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.input import UpgradePlanError
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade.nodes import NodeState, needs

FIRST_CONTROL_PLANE = "first-control-plane"
CONTROL_PLANE = "control-plane"
WORKER = "worker"
RESUME_REASON = "at the target, left cordoned by an earlier run: resumed"


@dataclass
class NodeStep:
    """What one node does in a step: ``role`` (first-control-plane, control-plane, worker),
    ``wave`` index, ``actions`` in order, or ``skip`` with the reason. ``resume``: the node
    already runs the step's release but an earlier run of this step drained it and left it
    cordoned (``reason`` says so); its kubelet part runs again and it is uncordoned."""

    host: str
    name: str
    role: str
    wave: int
    actions: list[str]
    skip: bool = False
    reason: str = ""
    gpu_devices: int = 0
    resume: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "name": self.name,
            "role": self.role,
            "wave": self.wave,
            "actions": list(self.actions),
            "skip": self.skip,
            "reason": self.reason,
            "gpu_devices": self.gpu_devices,
            "resume": self.resume,
        }


@dataclass
class Wave:
    """Nodes upgraded together; ``gpu_available_percent``: GPU devices left schedulable
    while they are drained (100.0 when the cluster has none)."""

    index: int
    kind: str
    hosts: list[str]
    gpu_devices_drained: int
    gpu_available_percent: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "hosts": list(self.hosts),
            "gpu_devices_drained": self.gpu_devices_drained,
            "gpu_available_percent": self.gpu_available_percent,
        }


@dataclass(frozen=True)
class GpuBudget:
    """GPU devices of the cluster (``total``), those cordoned before the upgrade, and the
    floor: ``required`` devices stay schedulable (``floor`` percent, named ``name``)."""

    total: int
    cordoned: int
    required: int
    floor: float
    name: str

    def available(self, drained: int) -> float:
        """Percent of the GPU devices schedulable while ``drained`` more are drained."""
        if not self.total:
            return 100.0
        return round(100.0 * (self.total - self.cordoned - drained) / self.total, 1)


def gpu_budget(nodes: Sequence[NodeState], floor: float, name: str) -> GpuBudget:
    """The GPU budget of ``nodes``: ``floor`` percent (named ``name`` in messages) of
    their GPU devices, rounded up, stay schedulable."""
    total = sum(n.gpu_devices for n in nodes)
    cordoned = sum(n.gpu_devices for n in nodes if n.unschedulable)
    return GpuBudget(total, cordoned, math.ceil(total * floor / 100), floor, name)


def _batches(
    workers: list[NodeState],
    batch_size: int,
    total_gpu: int,
    cordoned_gpu: int,
    required_gpu: int,
    floor: float,
    floor_name: str = "upgrade_min_gpu_available_percent",
) -> list[list[NodeState]]:
    allowance = total_gpu - required_gpu - cordoned_gpu
    batches: list[list[NodeState]] = []
    current: list[NodeState] = []
    used = 0
    for n in workers:
        cost = 0 if n.unschedulable else n.gpu_devices
        if total_gpu and cost > allowance:
            raise UpgradePlanError(
                f"{floor_name}={floor:g}: draining {n.name} alone "
                f"({n.gpu_devices} GPU devices) leaves {total_gpu - cordoned_gpu - cost} of "
                f"{total_gpu} schedulable, below the floor of {required_gpu}.",
                f"lower {floor_name}, or uncordon nodes cordoned by hand "
                "so that more GPU capacity stays schedulable.",
            )
        if current and (len(current) >= batch_size or used + cost > allowance):
            batches.append(current)
            current, used = [], 0
        current.append(n)
        used += cost
    if current:
        batches.append(current)
    return batches


def control_plane_waves(
    version: dra_core.KubeVersion,
    nodes: Sequence[NodeState],
    resumed: set[str],
    budget: GpuBudget,
    pkg: str,
) -> tuple[list[NodeStep], list[Wave], str | None, list[str]]:
    """The control-plane nodes of a step, one per wave in inventory order: the first that
    needs it runs ``kubeadm upgrade apply`` (unless an apiserver already runs ``version``),
    the others ``kubeadm upgrade node``; resumed ones only their kubelet part. Returns
    ``(node steps, waves, apply host, warnings)``. Raises UpgradePlanError when draining
    one breaks the GPU floor. ``pkg``: the version of the kubeadm, kubelet and kubectl
    packages."""
    cps = [n for n in nodes if n.control_plane]
    apply_done = any(n.apiserver and dra_core.parse_version(n.apiserver) >= version for n in cps)
    steps: list[NodeStep] = []
    waves: list[Wave] = []
    apply_host: str | None = None
    for n in cps:
        if not needs(n, version) and n.host not in resumed:
            steps.append(NodeStep(n.host, n.name, CONTROL_PLANE, -1, [], True, f"at {version}"))
            continue
        cost = 0 if n.unschedulable else n.gpu_devices
        if budget.total and budget.cordoned + cost > budget.total - budget.required:
            raise UpgradePlanError(
                f"{budget.name}={budget.floor:g}: draining control-plane node "
                f"{n.name} ({n.gpu_devices} GPU devices) breaks the floor of "
                f"{budget.required} of {budget.total}.",
                f"lower {budget.name}.",
            )
        if n.host in resumed:
            role, upgrade = CONTROL_PLANE, ""
        elif not apply_done and apply_host is None:
            role, apply_host = FIRST_CONTROL_PLANE, n.host
            upgrade = f"kubeadm upgrade apply v{version}"
        else:
            role, upgrade = CONTROL_PLANE, "kubeadm upgrade node"
        actions = [
            f"kubeadm {pkg}",
            "sanitize kubeadm-config and manifests" if role == FIRST_CONTROL_PLANE else "",
            upgrade,
            "assert DRA settings" if upgrade else "",
            "drain",
            f"kubelet+kubectl {pkg}",
            "restart kubelet, wait Ready",
            "uncordon",
        ]
        index = len(waves)
        steps.append(
            NodeStep(
                n.host,
                n.name,
                role,
                index,
                [a for a in actions if a],
                reason=RESUME_REASON if n.host in resumed else "",
                gpu_devices=n.gpu_devices,
                resume=n.host in resumed,
            )
        )
        waves.append(Wave(index, role, [n.host], cost, budget.available(cost)))
    warnings = []
    if not apply_done and apply_host is None and any(needs(n, version) for n in cps):
        warnings.append("no control-plane node needs kubeadm upgrade apply")
    return steps, waves, apply_host, warnings


#: What a worker goes through in a step (``{pkg}``: the packages' version).
WORKER_ACTIONS = (
    "kubeadm {pkg}",
    "drain",
    "kubeadm upgrade node",
    "kubelet+kubectl {pkg}",
    "assert kubelet DRA gates",
    "restart kubelet, wait Ready",
    "DRA plugin Ready, ResourceSlices republished",
    "uncordon",
)


def worker_waves(
    version: dra_core.KubeVersion,
    nodes: Sequence[NodeState],
    resumed: set[str],
    budget: GpuBudget,
    batch_size: int,
    pkg: str,
    first_wave: int,
) -> tuple[list[NodeStep], list[Wave], list[int]]:
    """The workers of a step: those at ``version`` skipped, the others (and the resumed)
    in batches (``_batches``: batch size and GPU floor), waves numbered from
    ``first_wave``. Returns ``(node steps, waves, serial)``, serial the batch sizes."""
    workers = [n for n in nodes if not n.control_plane]
    pending = [n for n in workers if needs(n, version) or n.host in resumed]
    steps = [
        NodeStep(n.host, n.name, WORKER, -1, [], True, f"at {version}")
        for n in workers
        if n not in pending
    ]
    actions = [a.format(pkg=pkg) for a in WORKER_ACTIONS]
    b = budget
    waves: list[Wave] = []
    serial: list[int] = []
    batches = _batches(pending, batch_size, b.total, b.cordoned, b.required, b.floor, b.name)
    for index, batch in enumerate(batches, first_wave):
        drained = sum(0 if n.unschedulable else n.gpu_devices for n in batch)
        waves.append(Wave(index, WORKER, [n.host for n in batch], drained, b.available(drained)))
        serial.append(len(batch))
        steps += [
            NodeStep(
                n.host,
                n.name,
                WORKER,
                index,
                list(actions),
                reason=RESUME_REASON if n.host in resumed else "",
                gpu_devices=n.gpu_devices,
                resume=n.host in resumed,
            )
            for n in batch
        ]
    return steps, waves, serial
