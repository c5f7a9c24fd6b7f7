"""The parts of a batch's move that need no API server (plugins/module_utils/migrate/move.py);
the move itself runs against a real kube-apiserver in
tests/integration/test_gpu_path_move.py."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.migrate import move as mm

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({"allocatable": {"nvidia.com/gpu": "8"}, "devices": 0}, "device-plugin"),
        ({"allocatable": {"nvidia.com/gpu": "0"}, "devices": 8}, "dra"),
        ({"allocatable": {"nvidia.com/gpu": "0"}, "devices": 0}, "none"),
        ({"allocatable": {"nvidia.com/gpu": "2"}, "devices": 8}, "both"),
        ({}, "none"),
    ],
)
def test_what_a_node_advertises_from_its_state(state: dict[str, Any], expected: str) -> None:
    assert mm.advertised(state) == expected


def test_the_move_label_is_selected_by_neither_advertiser() -> None:
    assert mm.MOVING not in ("device-plugin", "dra")


def test_only_gpu_pods_that_still_run_are_evicted() -> None:
    asked: list[tuple[str, str, Any]] = []
    pods = [
        {"metadata": {"namespace": "a", "name": "gpu"},
         "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
        {"metadata": {"namespace": "a", "name": "claim"},
         "spec": {"containers": [{}], "resourceClaims": [{"name": "g"}]}},
        {"metadata": {"namespace": "a", "name": "cpu"}, "spec": {"containers": [{}]}},
        {"metadata": {"namespace": "a", "name": "done"}, "status": {"phase": "Succeeded"},
         "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
        {"metadata": {"namespace": "a", "name": "going", "deletionTimestamp": "x"},
         "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
    ]  # fmt: skip

    def request(method: str, path: str, query: Any = ()) -> dict[str, Any]:
        asked.append((method, path, list(query)))
        return {"items": pods}

    assert mm._gpu_pods_on(request, "gpu-1") == [("a", "claim"), ("a", "gpu")]
    assert asked == [("GET", "/api/v1/pods", [("fieldSelector", "spec.nodeName=gpu-1")])]


def test_a_path_that_is_none_is_refused_before_any_request() -> None:
    def request(*_args: Any, **_kw: Any) -> Any:
        raise AssertionError("no request may be sent")

    with pytest.raises(ValueError, match="to_path 'moving' is not one of device-plugin, dra"):
        mm.move_batch(request, ["gpu-1"], "moving", driver="gpu.nvidia.com")


def test_a_record_says_what_the_node_was_and_how_long_each_phase_took() -> None:
    record = mm.NodeRecord("gpu-1", was_cordoned=True, label_before="device-plugin")
    record.seconds = {"stop": 3.14159}
    assert record.to_dict() == {
        "node": "gpu-1",
        "was_cordoned": True,
        "label_before": "device-plugin",
        "phase": "read",
        "evicted": [],
        "seconds": {"stop": 3.1},
    }
