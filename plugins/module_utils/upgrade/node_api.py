"""The upgrade's side of its control-host node modules: their options, and the wait for
a node's devices to come back after the kubelet restart. The node's state, the retry and
the uncordon are ``cluster.node_state``'s. Module ``upgrade_node_state`` reads, module
``upgrade_uncordon`` waits and writes; the drain stays ``kubectl drain`` (evictions,
DaemonSets, grace periods are kubectl's own logic)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import (
    record as upgrade_record,
)


def node_module_argspec(**more: Any) -> dict[str, Any]:
    """The argument spec of the upgrade's control-host node modules, as the doc fragments
    ``kube_auth`` and ``upgrade_node`` document it (``kubeconfig``, ``context``, ``node``,
    ``timeout``, ``interval``, ``record``), plus ``more``; a new copy per call."""
    return {
        **vk.kube_auth_argspec(),
        "node": {"type": "str", "required": True},
        "timeout": {"type": "int", "default": 60},
        "interval": {"type": "float", "default": 5},
        "record": upgrade_record.record_argspec(),
        **more,
    }


class DevicesNotBack(Exception):
    """The node's ResourceSlices still publish fewer devices than wanted at the deadline;
    ``devices`` is the last count seen (None: never read)."""

    def __init__(self, devices: int | None, message: str) -> None:
        super().__init__(message)
        self.devices = devices


def wait_devices(
    state: Callable[[], Mapping[str, Any]],
    devices: int,
    timeout: float,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[int, int]:
    """Ask ``state()`` (``node_state``'s answer) every ``interval`` seconds until its
    ``devices`` is at least ``devices``; returns ``(devices seen, requests rounds)``. A
    KubeError with no answer, a server error or 404 counts as not yet; any other raises.
    Raises DevicesNotBack when ``timeout`` seconds pass first."""
    deadline = clock() + max(timeout, 0)
    seen: int | None = None
    rounds = 0
    why = ""
    while True:
        rounds += 1
        try:
            seen = int(state()["devices"])
            if seen >= devices:
                return seen, rounds
            why = f"{seen} device(s) published"
        except vk.KubeError as err:
            if not (err.status is None or err.status >= 500 or err.status == 404):
                raise
            why = str(err)
        if clock() + interval > deadline:
            raise DevicesNotBack(
                seen, f"{why}, fewer than the {devices} before the upgrade, after {timeout:g}s"
            )
        sleep(interval)
