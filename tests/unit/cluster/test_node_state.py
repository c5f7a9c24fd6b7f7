"""One Node over the API (plugins/module_utils/cluster/node_state.py): the uncordon's
requests and the bounded retry. The modules that use them run against a real
kube-apiserver in tests/integration/test_upgrade_node_modules.py."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_state as ua
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

pytestmark = pytest.mark.unit


def _api(node: dict[str, Any]) -> tuple[Any, list[tuple[str, str, Any]]]:
    sent: list[tuple[str, str, Any]] = []

    def request(method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        sent.append((method, path, body))
        if method == "PATCH":
            assert content_type == ua.MERGE_PATCH
            node["spec"].pop("unschedulable", None)
        return node

    return request, sent


def test_uncordon_patches_only_a_cordoned_node_and_quotes_its_name() -> None:
    node = {"spec": {"unschedulable": True}}
    request, sent = _api(node)
    assert ua.uncordon(request, "gpu/1") is True
    assert sent == [
        ("GET", "/api/v1/nodes/gpu%2F1", None),
        ("PATCH", "/api/v1/nodes/gpu%2F1", {"spec": {"unschedulable": None}}),
    ]
    sent.clear()
    assert ua.uncordon(request, "gpu/1") is False
    assert [s[0] for s in sent] == ["GET"]


def test_retrying_asks_again_for_no_answer_and_server_errors_within_the_timeout() -> None:
    t = [0.0]
    answers: list[Any] = [vk.KubeError(None, "refused"), vk.KubeError(503, "starting"), "ok"]

    def call() -> Any:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    def sleep(s: float) -> None:
        t[0] += s

    assert ua.retrying(call, 60, 5, sleep=sleep, clock=lambda: t[0]) == ("ok", 3)
    assert t[0] == 10


def test_retrying_stops_at_the_timeout_and_at_once_for_a_refusal() -> None:
    t = [0.0]
    calls = [0]

    def down() -> Any:
        calls[0] += 1
        raise vk.KubeError(None, "no answer")

    def sleep(s: float) -> None:
        t[0] += s

    with pytest.raises(vk.KubeError) as err:
        ua.retrying(down, 12, 5, sleep=sleep, clock=lambda: t[0])
    assert calls[0] == 3 and err.value.attempts == 3  # t = 0, 5, 10; 15 is past 12

    def forbidden() -> Any:
        raise vk.KubeError(403, "nodes is forbidden")

    with pytest.raises(vk.KubeError) as err:
        ua.retrying(forbidden, 60, 5, sleep=sleep, clock=lambda: t[0])
    assert err.value.attempts == 1 and err.value.status == 403


def test_retrying_asks_again_for_a_refusal_only_while_the_server_is_starting() -> None:
    t = [0.0]
    ready = [False, False, True]
    answers: list[Any] = [
        vk.KubeError(403, 'nodes "cp" is forbidden: User "kubernetes-admin" cannot get'),
        vk.KubeError(401, "Unauthorized"),
        "ok",
    ]
    asked = [0]

    def call() -> Any:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    def starting() -> bool:
        asked[0] += 1
        return not ready.pop(0)

    def sleep(s: float) -> None:
        t[0] += s

    got = ua.retrying(call, 60, 5, sleep=sleep, clock=lambda: t[0], starting=starting)
    assert got == ("ok", 3) and asked[0] == 2

    # a ready server's refusal is final: one attempt, the refusal raised
    def forbidden() -> Any:
        raise vk.KubeError(403, "nodes is forbidden")

    with pytest.raises(vk.KubeError) as err:
        ua.retrying(forbidden, 60, 5, sleep=sleep, clock=lambda: t[0], starting=lambda: False)
    assert err.value.attempts == 1 and err.value.status == 403

    # a server that never gets ready: the refusal is raised at the timeout
    t[0] = 0.0
    with pytest.raises(vk.KubeError) as err:
        ua.retrying(forbidden, 12, 5, sleep=sleep, clock=lambda: t[0], starting=lambda: True)
    assert err.value.attempts == 3 and err.value.status == 403

    # other refusals are never asked again, starting or not
    def bad() -> Any:
        raise vk.KubeError(422, "invalid")

    with pytest.raises(vk.KubeError) as err:
        ua.retrying(bad, 60, 5, sleep=sleep, clock=lambda: t[0], starting=lambda: True)
    assert err.value.attempts == 1


class _Readyz:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.sent: list[tuple[str, str, bool]] = []

    def request(self, method: str, path: str, raw: bool = False) -> Any:
        self.sent.append((method, path, raw))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "starting"),
    [
        ("ok", False),
        ("ok\n", False),
        ("[-]informer-sync failed: reason withheld\nreadyz check failed", True),
        (vk.KubeError(500, "readyz check failed"), True),
        (vk.KubeError(403, "forbidden"), True),
        (vk.KubeError(None, "connection refused"), True),
    ],
)
def test_server_starting_reads_readyz(answer: Any, starting: bool) -> None:
    kube = _Readyz(answer)
    assert ua.server_starting(kube)() is starting  # type: ignore[arg-type]
    assert kube.sent == [("GET", "/readyz", True)]


def _slice(*versions: str | None, basic: bool = False) -> dict[str, Any]:
    devices = []
    for i, v in enumerate(versions):
        attrs = {} if v is None else {"driverVersion": {"version": v}}
        devices.append(
            {
                "name": f"gpu-{i}",
                **({"basic": {"attributes": attrs}} if basic else {"attributes": attrs}),
            }
        )
    return {"spec": {"devices": devices}}


def test_with_a_driver_version_only_the_devices_that_publish_it_count() -> None:
    slices = [_slice("580.159.4", "575.57.8", None), _slice("580.159.4", basic=True)]

    def get(path: str) -> Any:
        return {"spec": {"unschedulable": True}, "metadata": {"name": "gpu-1"}}

    def list_items(path: str, query: Any) -> list[Any]:
        return slices

    every = ua.node_state(get, list_items, "gpu-1", "gpu.nvidia.com")
    new = ua.node_state(get, list_items, "gpu-1", "gpu.nvidia.com", driver_version="580.159.4")
    old = ua.node_state(get, list_items, "gpu-1", "gpu.nvidia.com", driver_version="575.57.8")
    assert (every["devices"], new["devices"], old["devices"]) == (4, 2, 1)
    assert every["slices"] == new["slices"] == 2
    assert ua.device_driver_version({"attributes": {"driverVersion": "x"}}) == ""
    assert ua.device_driver_version("not a device") == ""
