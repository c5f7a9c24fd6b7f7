"""Kueue quota checks with dynamic MIG fed odd values: ``dra_driver_dynamic_mig`` that is
no boolean (``maybe``, ``2``, a list), Ansible booleans of other spellings (``yes``,
``1``), ``gpu_model`` unset, unknown, of another type or 100,000 characters long
(``preflight.kueue.kueue_problems``); ResourceSlices of odd shape and ten thousand
CounterSets (``validate.kueue.published_devices``, ``kueue.checks.published_counts``).

A host whose mode cannot be read is reported naming the variable, and no quota is judged
on a guessed mode; a message quotes a value cut short; nothing raises."""

from __future__ import annotations

import time
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import checks as kc
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import kueue as pk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import kueue as vk

pytestmark = pytest.mark.unit


def _hosts(dynamic: Any, model: Any, mig_quota: int = 4) -> dict[str, dict[str, Any]]:
    teams = [{"name": "team-a", "quotas": {"mig.nvidia.com": mig_quota, "gpu.nvidia.com": 1}}]
    return {
        f"gpu-{i}": {
            "groups": ["gpu_nodes"],
            "variables": {
                "site_kueue": True,
                "dra_driver_dynamic_mig": dynamic,
                "gpu_model": model,
                "kueue_teams": teams,
            },
        }
        for i in range(2)
    }


@pytest.mark.parametrize("dynamic", ["maybe", 2, "1e3", ["true"], {"a": 1}, b"\xff"])
def test_a_mode_that_is_no_boolean_is_reported_not_guessed(dynamic: Any) -> None:
    problems = pk.kueue_problems(_hosts(dynamic, "NVIDIA H200"))
    assert [(p.severity, p.variable) for p in problems] == [("error", "dra_driver_dynamic_mig")]
    assert "boolean" in problems[0].message and "true" in problems[0].fix


@pytest.mark.parametrize("dynamic", ["yes", 1, "true", "on", True])
def test_ansible_booleans_turn_dynamic_mig_on(dynamic: Any) -> None:
    # 2 hosts of 8 H200s (kueue_node_gpu_count by default): 7 x 1g.18gb at once each
    assert pk.kueue_problems(_hosts(dynamic, "NVIDIA H200", mig_quota=112)) == []
    [problem] = pk.kueue_problems(_hosts(dynamic, "NVIDIA H200", mig_quota=113))
    assert problem.variable.endswith("mig.nvidia.com")


@pytest.mark.parametrize("dynamic", [None, 0, "no", False, ""])
def test_off_values_leave_the_host_static(dynamic: Any) -> None:
    [problem] = pk.kueue_problems(_hosts(dynamic, "NVIDIA H200"))
    assert problem.variable == "kueue_teams[0].quotas.mig.nvidia.com"


@pytest.mark.parametrize(
    "model",
    ["weird", "m" * 100_000, None, 5, ["NVIDIA H200"], {"a": "b"}, "\x00", "NVIDIA H200\x1b[2J"],
    ids=["unknown", "100000-chars", "none", "number", "list", "map", "nul", "escape"],
)
def test_an_unknown_gpu_model_is_one_short_warning(model: Any) -> None:
    [problem] = pk.kueue_problems(_hosts(True, model))
    assert (problem.severity, problem.variable) == ("warning", "gpu_model")
    assert "gpu-0, gpu-1" in problem.message
    assert len(problem.message) + len(problem.fix) < 700, len(problem.message)
    assert "\x00" not in problem.message and "\x1b" not in problem.message


ODD_SLICES = [
    "x",
    None,
    5,
    [1],
    {"spec": "x"},
    {"spec": {"devices": "abc", "sharedCounters": {"a": 1}}},
    {
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": "p",
            "nodeName": ["n"],
            "devices": [
                None,
                "x",
                {"name": ["a"]},
                {
                    "name": "d",
                    "attributes": "x",
                    "capacity": [1],
                    "consumesCounters": {"counterSet": "s"},
                },
            ],
        }
    },
]


@pytest.mark.parametrize("odd", ODD_SLICES, ids=[repr(o)[:16] for o in ODD_SLICES])
def test_published_devices_of_odd_slices_do_not_raise(odd: Any) -> None:
    devices, at_once = vk.published_devices([odd])
    counts = kc.published_counts(devices, {"mig-1g": "1g.18gb"}, at_once)
    assert counts["mig.nvidia.com"] == 0 and counts["mig-1g"] == 0


def test_ten_thousand_counter_sets_are_counted_in_linear_time() -> None:
    n = 10_000
    counters = {
        "memory": {"value": "140Gi"},
        **{f"memory-slice-{i}": {"value": "1"} for i in range(8)},
    }
    devices = [
        {
            "name": f"gpu-{g}-mig-1g-{s}",
            "attributes": {"profile": {"string": "1g.18gb"}, "type": {"string": "mig"}},
            "consumesCounters": [
                {
                    "counterSet": f"gpu-{g}-counter-set",
                    "counters": {"memory": {"value": "16Gi"}, f"memory-slice-{s}": {"value": "1"}},
                }
            ],
        }
        for g in range(n // 7)
        for s in range(7)
    ]
    slices = [
        {
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "gpu-1",
                "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1},
                "sharedCounters": [
                    {"name": f"gpu-{g}-counter-set", "counters": counters} for g in range(n // 7)
                ],
                "devices": devices,
            }
        }
    ]
    start = time.process_time()
    published, at_once = vk.published_devices(slices)
    counts = kc.published_counts(published, {"mig-1g": "1g.18gb"}, at_once)
    assert time.process_time() - start < 5
    assert counts["mig-1g"] == counts["mig.nvidia.com"] == 7 * (n // 7)
