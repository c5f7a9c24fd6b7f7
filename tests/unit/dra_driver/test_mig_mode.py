"""Which MIG mode a node's DRA kubelet plugin runs and publishes, and the claims not yet
unprepared on it (``plugins/module_utils/dra_driver/mig_mode.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import mig_mode as mm

pytestmark = pytest.mark.unit

DRIVER = "gpu.nvidia.com"


def _pod(node: str, *, env: dict[str, str] | None = None, args: list[str] | None = None,
         name: str = "plugin-x", deleting: bool = False) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    container = {
        "name": "gpus",
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
        "args": args or [],
    }
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [container]}}


def _slice(node: str, devices: list[dict[str, Any]], counters: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "driver": DRIVER, "devices": devices}
    if counters:
        spec["sharedCounters"] = [{"name": "gpu-0-counter-set", "counters": {}}]
    return {"spec": spec}


@pytest.mark.parametrize(
    ("pod", "mode"),
    [
        # NVIDIA's chart: featureGates rendered into FEATURE_GATES with a trailing comma
        (_pod("n", env={"FEATURE_GATES": "DynamicMIG=true,ContextualLogging=true,"}), "dynamic"),
        (_pod("n", env={"FEATURE_GATES": "DynamicMIG=false,"}), "static"),
        (_pod("n", env={"FEATURE_GATES": "TimeSlicingSettings=true,"}), "static"),
        # the lab's GPU simulator
        (_pod("n", args=["--dynamic-mig"]), "dynamic"),
        (_pod("n", env={"GPUFLEET_GPUSIM_DYNAMIC_MIG": "true"}), "dynamic"),
        (_pod("n"), "static"),
    ],
)  # fmt: skip
def test_the_plugin_mode_is_read_from_the_gate_or_the_simulator_flag(
    pod: dict[str, Any], mode: str
) -> None:
    assert mm.pod_mode(pod["spec"]) == mode


def test_slices_with_counters_are_dynamic_devices_alone_static_nothing_none() -> None:
    dynamic = [
        _slice("n", [], counters=True),
        _slice("n", [{"name": "gpu-0-mig-1g18gb-19-0", "consumesCounters": [{}]}]),
    ]
    static = [_slice("n", [{"name": "gpu-0-mig-1g18gb-0"}]), _slice("m", [], counters=True)]
    assert mm.slices_mode(dynamic, "n", DRIVER) == "dynamic"
    assert mm.slices_mode(static, "n", DRIVER) == "static"
    assert mm.slices_mode(static, "other", DRIVER) == "none"
    other_driver = [{"spec": {"nodeName": "n", "driver": "x", "devices": [{"name": "a"}]}}]
    assert mm.slices_mode(other_driver, "n", DRIVER) == "none"


def test_a_node_is_done_when_its_plugin_and_its_slices_are_at_the_target() -> None:
    pods = [
        _pod("n", env={"FEATURE_GATES": "DynamicMIG=true,"}, name="new"),
        _pod("n", name="old", deleting=True),  # the static pod on its way out
        _pod("m", name="elsewhere"),
    ]
    slices = [_slice("n", [{"name": "gpu-0", "consumesCounters": [{}]}])]
    state = mm.node_state("n", pods, slices, DRIVER, "dynamic")
    assert state == {
        "node": "n",
        "plugin": "dynamic",
        "pods": ["new"],
        "slices": "dynamic",
        "done": True,
    }
    # the plugin restarted, its slices not yet republished
    stale = [_slice("n", [{"name": "gpu-0-mig-1g18gb-0"}])]
    assert mm.node_state("n", pods, stale, DRIVER, "dynamic")["done"] is False
    assert mm.node_state("n", [], slices, DRIVER, "dynamic")["plugin"] == "none"


def test_a_target_that_is_no_mode_is_refused_naming_the_variable_and_the_fix() -> None:
    with pytest.raises(mm.MigModeError, match=r"mig_mode_to='partitioned' is not a MIG mode"):
        mm.node_state("n", [], [], DRIVER, "partitioned")
    with pytest.raises(mm.MigModeError, match="fix: set mig_mode_to to dynamic"):
        mm.check_target(None)
    assert mm.check_target("static") == "static"


def _claim(ns: str, name: str, pool: str, reserved: bool, driver: str = DRIVER) -> dict[str, Any]:
    result = {"driver": driver, "pool": pool, "device": "gpu-0", "request": "gpu"}
    status: dict[str, Any] = {"allocation": {"devices": {"results": [result]}}}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u"}]
    return {"metadata": {"namespace": ns, "name": name}, "status": status}


def test_claims_still_reserved_on_the_node_are_the_ones_the_kubelet_holds() -> None:
    claims = [
        _claim("b", "held", "n", True),
        _claim("a", "held", "n", True),
        _claim("a", "released", "n", False),  # allocated, no pod left: unprepared
        _claim("a", "other-node", "m", True),
        _claim("a", "other-driver", "n", True, driver="compute-domain.nvidia.com"),
        {"metadata": {"namespace": "a", "name": "pending"}, "status": {}},
        "not a claim",
    ]
    assert mm.claims_on_node(claims, "n", DRIVER) == ["a/held", "b/held"]


def test_nodes_behind_are_those_whose_plugin_pod_does_not_run_the_target() -> None:
    pods = [
        _pod("a", env={"FEATURE_GATES": "DynamicMIG=true,"}, name="pa"),
        _pod("b", name="pb"),
        _pod("c", env={"FEATURE_GATES": "DynamicMIG=true,"}, name="pc", deleting=True),
    ]
    assert mm.nodes_behind(pods, "dynamic") == ["b", "c"]
    assert mm.nodes_behind(pods, "static") == ["a", "c"]
    with pytest.raises(mm.MigModeError, match="mig_mode_to"):
        mm.nodes_behind(pods, "")
