"""The upgrade's wait for a node's devices (plugins/module_utils/upgrade/node_api.py); the
node's state, the retry and the uncordon are tested in tests/unit/cluster/test_node_state.py,
the report writer in ``test_record.py``. The modules that use them run against a real
kube-apiserver in tests/integration/test_upgrade_node_modules.py."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import node_api as ua

pytestmark = pytest.mark.unit


def test_wait_devices_until_the_slices_publish_as_many_as_before() -> None:
    t = [0.0]
    counts: list[Any] = [vk.KubeError(None, "no answer"), 4, 7, 8]

    def state() -> dict[str, Any]:
        got = counts.pop(0)
        if isinstance(got, Exception):
            raise got
        return {"devices": got}

    def sleep(s: float) -> None:
        t[0] += s

    assert ua.wait_devices(state, 8, 30, 1, sleep=sleep, clock=lambda: t[0]) == (8, 4)
    assert t[0] == 3


def test_wait_devices_names_the_count_at_the_deadline_and_stops_on_a_refusal() -> None:
    t = [0.0]

    def sleep(s: float) -> None:
        t[0] += s

    with pytest.raises(ua.DevicesNotBack) as err:
        ua.wait_devices(lambda: {"devices": 2}, 8, 3, 1, sleep=sleep, clock=lambda: t[0])
    assert err.value.devices == 2
    assert str(err.value) == "2 device(s) published, fewer than the 8 before the upgrade, after 3s"

    def forbidden() -> dict[str, Any]:
        raise vk.KubeError(403, "resourceslices is forbidden")

    with pytest.raises(vk.KubeError):
        ua.wait_devices(forbidden, 8, 30, 1, sleep=sleep, clock=lambda: t[0])
