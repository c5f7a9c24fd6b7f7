"""The scale benchmark's pure parts, run in the normal test run: the fleet plan at
10,000 nodes, the per-node way's extrapolation, the ratio to the floor, the goals printed
and then failed on when missed, and the comparison of two fleet sizes (the floor's own
client: ``tests/unit/bench/test_floor.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.bench import compare, fleet
from tests.bench.cluster import FloorRun, Measured, Requests
from tests.bench.floor import Floor, ListRequest
from tests.bench.test_scale import (
    Figure,
    cores_bound,
    extrapolate,
    figures,
    floor_goal,
    judge,
    missed,
    publish,
    ratio_to_floor,
)

pytestmark = pytest.mark.unit


def test_the_plan_of_10000_nodes_names_100000_distinct_claims() -> None:
    nodes = [f"gpu-node-{i}" for i in range(10_000)]
    devices = fleet.devices(fleet.node_state(nodes[0]))
    plans = fleet.plan_claims(nodes, devices)
    assert len(devices) == 16 and len(plans) == 100_000
    assert len({p.key for p in plans}) == 100_000
    assert len({(p.namespace, p.pod) for p in plans}) == 100_000
    assert sum(p.leaked for p in plans) == 5_000
    assert {(p.node, p.device) for p in plans if p.node == "gpu-node-9999"} == {
        ("gpu-node-9999", d) for d in [p.device for p in plans[:10]]
    }


def measured(wall: float, requests: int, cpu: float, rss: float) -> Measured:
    return Measured([], 0, wall, rss, Requests(requests, {}, 0), "", "", cpu, 0.0, (0.0, 0.0))


def test_the_per_node_way_is_extrapolated_from_its_fixed_cost() -> None:
    fixed, run = measured(2.0, 2, 1.0, 60), measured(22.0, 42, 21.0, 70)
    out, note = extrapolate(fixed, run, 20, 10_000)
    assert out["wall_s"] == pytest.approx(2.0 + 20.0 * 500)
    assert out["requests"] == pytest.approx(2 + 40 * 500)
    assert out["peak_rss_mib"] == 70
    assert note.startswith("EXTRAPOLATED to 10000 nodes from a run on 20")
    whole, note = extrapolate(None, run, 20, 20)
    assert whole["wall_s"] == 22.0 and note == "measured on all 20 nodes"


def test_a_figure_the_sample_measured_below_the_fixed_cost_is_not_extrapolated_negative() -> None:
    # the API server's CPU while 20 nodes ran came out below its CPU while none ran
    fixed = Measured([], 0, 2.0, 60, Requests(2, {}, 0), "", "", 1.0, 9.0, (0.0, 0.0))
    run = Measured([], 0, 22.0, 70, Requests(42, {}, 0), "", "", 21.0, 5.0, (0.0, 0.0))
    out, _ = extrapolate(fixed, run, 20, 10_000)
    assert out["server_cpu_s"] == 9.0
    assert out["wall_s"] == pytest.approx(2.0 + 20.0 * 500)


def test_the_cores_bound_shares_the_cpu_of_command_and_servers_over_the_cores() -> None:
    assert cores_bound(9.0, 19.0, 2) == 14.0
    assert cores_bound(3.0, 1.0, 0) == 4.0


def result(nodes: int, walls: dict[str, float], rss: float) -> dict[str, Any]:
    return {
        "nodes": nodes,
        "claims": 10 * nodes,
        "leaked": nodes // 2,
        "figures": [
            {
                "what": f"{what} {nodes} GPU nodes",
                "project": {"wall_s": wall, "requests": nodes / 100, "peak_rss_mib": rss},
            }
            for what, wall in walls.items()
        ],
    }


def test_two_fleet_sizes_are_compared_per_command(tmp_path: Path, capsys: Any) -> None:
    small = result(1000, {"validate": 4.0, "report": 2.0}, 120)
    large = result(10_000, {"validate": 40.0, "report": 30.0}, 150)
    rows = {r["command"]: r for r in compare.compare(small, large)}
    assert rows["validate"]["objects_ratio"] == pytest.approx(10.0)
    assert rows["validate"]["wall_s"] == (4.0, 40.0)
    assert rows["validate"]["wall_s_ratio"] == pytest.approx(10.0)
    assert rows["report"]["wall_s_ratio"] == pytest.approx(15.0)
    assert rows["report"]["peak_rss_mib_ratio"] == pytest.approx(1.25)
    files = [tmp_path / "a.json", tmp_path / "b.json"]
    for f, doc in zip(files, (small, large), strict=True):
        f.write_text(json.dumps(doc))
    assert compare.main([str(f) for f in files]) == 0
    printed = capsys.readouterr().out
    assert "1000 -> 10000 GPU nodes: objects x10.0" in printed
    assert "validate: wall s 4.00 -> 40.00 (x10.0)" in printed
    assert compare.main([str(tmp_path / "missing.json"), str(files[1])]) == 2


def test_the_floor_and_its_ratio_are_compared_when_both_runs_have_them() -> None:
    small = result(1000, {"validate": 4.0, "report": 2.0}, 120)
    large = result(10_000, {"validate": 40.0, "report": 30.0}, 150)
    for doc, floor_s in ((small, 1.0), (large, 8.0)):
        doc["figures"][0]["project"].update(floor_s=floor_s, ratio_to_floor=4.0 / floor_s)
    large["figures"][0]["project"]["ratio_to_floor"] = 5.0
    rows = {r["command"]: r for r in compare.compare(small, large)}
    assert rows["validate"]["floor_s"] == (1.0, 8.0)
    assert rows["validate"]["ratio_to_floor"] == (4.0, 5.0)
    assert rows["validate"]["ratio_to_floor_ratio"] == pytest.approx(1.25)
    assert "floor_s" not in rows["report"]  # results written before the floor
    printed = compare.render(small, large)
    assert "floor s 1.00 -> 8.00 (x8.0); wall/floor 4.0 -> 5.0 (x1.2)" in printed


def test_a_figure_names_its_command() -> None:
    assert compare.command("validate 10000 GPU nodes without smoke (x)") == "validate"
    assert compare.command("find the leaked claims among 100000 (y)") == (
        "find the leaked claims among"
    )


def with_floor(run: Measured, seconds: float) -> Measured:
    lists = [ListRequest("/api/v1/pods", (("limit", "2000"),), 3)]
    run.floor = FloorRun(Floor(seconds, 3, 3 << 20, 1, lists), measured(seconds + 0.1, 3, 0.5, 20))
    return run


def test_the_ratio_to_the_floor_is_wall_time_over_floor_time() -> None:
    assert ratio_to_floor(5.0, 2.0) == pytest.approx(2.5)
    assert ratio_to_floor(5.0, None) is None and ratio_to_floor(5.0, 0.0) is None
    shown = figures(with_floor(measured(5.0, 9, 4.0, 120), 2.0))
    assert shown["floor_s"] == 2.0 and shown["ratio_to_floor"] == pytest.approx(2.5)
    assert "floor_s" not in figures(measured(5.0, 9, 4.0, 120))


def test_the_floor_goal_names_both_times_and_the_ratio() -> None:
    assert floor_goal(with_floor(measured(3.0, 9, 1.0, 100), 1.5)) == (
        "wall/floor 3.00s / 1.500s = 2.0 <= 2.0",
        True,
    )
    assert floor_goal(with_floor(measured(5.0, 9, 1.0, 100), 2.0)) == (
        "wall/floor 5.00s / 2.000s = 2.5 <= 2.0",
        False,
    )
    assert floor_goal(measured(5.0, 9, 1.0, 100)) == (
        "wall/floor <= 2.0: no floor (the run read no list)",
        False,
    )


def test_every_goal_is_printed_then_a_missed_one_fails_naming_figure_and_goal() -> None:
    run = with_floor(measured(12.0, 9, 1.0, 310), 4.0)
    fig = Figure(
        "report 1000 GPU nodes",
        run,
        goals=[("wall 12s <= 10s", False), ("ok", True), floor_goal(run)],
    )
    printed: list[str] = []
    bench = SimpleNamespace(figures=[], out=printed.append)
    publish(bench, fig, [run])  # type: ignore[arg-type]
    assert "  goal MISS: wall 12s <= 10s" in printed and "  goal PASS: ok" in printed
    assert "  goal MISS: wall/floor 12.00s / 4.000s = 3.0 <= 2.0" in printed
    assert "    LIST /api/v1/pods?limit=2000 (3 pages)" in printed
    with pytest.raises(AssertionError) as failed:
        judge(bench.figures)
    assert str(failed.value).startswith("2 goal(s) missed:")
    assert "report 1000 GPU nodes: wall 12s <= 10s" in str(failed.value)
    assert "report 1000 GPU nodes: wall/floor 12.00s / 4.000s = 3.0 <= 2.0" in str(failed.value)
    assert missed(bench.figures) == [
        "report 1000 GPU nodes: wall 12s <= 10s",
        "report 1000 GPU nodes: wall/floor 12.00s / 4.000s = 3.0 <= 2.0",
    ]
    doc = fig.to_dict()
    assert doc["goals"][:2] == [
        {"goal": "wall 12s <= 10s", "met": False},
        {"goal": "ok", "met": True},
    ]
    assert doc["project"]["floor_s"] == 4.0 and doc["project"]["ratio_to_floor"] == 3.0
    assert doc["project_floor"]["lists"] == [{"uri": "/api/v1/pods?limit=2000", "pages": 3}]
    judge([Figure("labels", run, goals=[("ok", True)])])  # all met: passes


def test_a_cloned_dynamic_mig_slice_differs_only_in_node_pool_and_identity() -> None:
    """The plugin's own dynamic-MIG slices (the Go fixture) copied to another node: the
    devices and counters stay, node, pool, owner and the GPU UUID follow the node."""
    from tests.bench import dra_fleet
    from tests.unit import dynamic_mig_slices

    published = dynamic_mig_slices.slices(dynamic_mig_slices.H200_NODE)
    gpu_uuid = next(
        d["attributes"]["uuid"]["string"] for s in published for d in s["spec"].get("devices") or []
    )
    clones = [
        dra_fleet.clone_slice(s, "gpu-node-7", "uid-7", {gpu_uuid: "GPU-of-node-7"})
        for s in published
    ]
    for original, clone in zip(published, clones, strict=True):
        assert clone["spec"]["nodeName"] == clone["spec"]["pool"]["name"] == "gpu-node-7"
        assert clone["metadata"]["ownerReferences"][0]["uid"] == "uid-7"
        assert clone["spec"].get("sharedCounters") == original["spec"].get("sharedCounters")
        for d, o in zip(clone["spec"].get("devices") or [], original["spec"].get("devices") or [],
                        strict=True):  # fmt: skip
            identity = {k: v for k, v in d["attributes"].items() if k not in ("uuid", "parentUUID")}
            assert identity == {
                k: v for k, v in o["attributes"].items() if k not in ("uuid", "parentUUID")
            }
            assert d.get("consumesCounters") == o.get("consumesCounters")
            for attr in ("uuid", "parentUUID"):
                if attr in d["attributes"]:
                    assert d["attributes"][attr]["string"] == "GPU-of-node-7"
    # a UUID the map does not know is an error, never copied from the first node
    with pytest.raises(KeyError):
        dra_fleet.clone_slice(published[1], "gpu-node-8", "uid-8", {})


def test_static_mig_nodes_map_every_gpu_and_mig_uuid() -> None:
    """Two carved nodes: 8 GPU and 56 MIG (1g.18gb) UUIDs each, all different."""
    from tests.bench import dra_fleet

    a = dra_fleet.identities(dra_fleet.node_state("gpu-node-0", carved=True))
    b = dra_fleet.identities(dra_fleet.node_state("gpu-node-1", carved=True))
    assert len(a) == len(b) == 8 + 8 * dra_fleet.PROFILE_INSTANCES
    assert len(set(a) | set(b)) == 2 * len(a)
    assert sum(u.startswith("MIG-") for u in a) == 56
