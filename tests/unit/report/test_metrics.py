"""The report's object state as Prometheus metrics (``plugins/module_utils/report/metrics.py``)
on a small fleet built from API-shaped objects: a GPU node with two published devices (one
allocated to a running pod, one leaked), a GPU node that publishes nothing, a CPU node, and a
claim that no device can satisfy. Every figure is derived by hand from those objects."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import metrics as fm

from tests.unit.report.test_fleet import DRIVER, claim, device, pod, rslice

pytestmark = pytest.mark.unit


def gpu_node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}}}


def fleet() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    nodes = [gpu_node("w1"), gpu_node("w2"), {"metadata": {"name": "cpu-1", "labels": {}}}]
    slices = [
        rslice(
            "w1", [device("gpu-0", "NVIDIA H200", "141Gi"), device("gpu-1", "NVIDIA H200", "141Gi")]
        )
    ]
    claims = [
        claim("train", allocated=[("w1", "gpu-0")], reserved=["trainer"]),
        claim("old", allocated=[("w1", "gpu-1")], reserved=["gone"]),
        claim("huge", selector='device.attributes["gpu.nvidia.com"].productName == "NVIDIA B300"'),
    ]
    pods = [pod("trainer", "train"), pod("waiter", "huge", phase="Pending")]
    report = fr.build_report(slices, claims, pods, nodes, driver=DRIVER)
    return report, nodes


def samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


def test_leaked_pending_and_node_devices_are_series() -> None:
    report, nodes = fleet()
    got = samples(fm.render(report, nodes))
    assert got['gpufleet_dra_claim_leaked{namespace="ml",claim="old",kind="dead-reservation"}'] == 1
    assert [s for s in got if s.startswith("gpufleet_dra_claim_leaked{")] == [
        'gpufleet_dra_claim_leaked{namespace="ml",claim="old",kind="dead-reservation"}'
    ]
    pending = [s for s in got if s.startswith("gpufleet_dra_claim_pending{")]
    assert len(pending) == 1 and 'claim="huge"' in pending[0]
    assert got['gpufleet_gpu_node_resourceslice_devices{node="w1"}'] == 2
    # a GPU node with no ResourceSlice is 0, a node without the GPU label is absent
    assert got['gpufleet_gpu_node_resourceslice_devices{node="w2"}'] == 0
    assert not any('node="cpu-1"' in s for s in got)
    assert got['gpufleet_dra_devices{state="allocated"}'] == 2
    assert got['gpufleet_dra_devices{state="free"}'] == 0
    assert got["gpufleet_dra_claims_leaked"] == 1
    assert got["gpufleet_dra_claims_pending"] == 1


def test_the_devices_by_state_add_up_to_those_published_on_a_dynamic_gpu() -> None:
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, device_names, slices

    held = [n for n in device_names(H200_NODE) if n.startswith("gpu-0-mig-1g18gb-19-")]
    claims = [allocated_claim(f"c{i}", H200_NODE, n) for i, n in enumerate(held)]
    report = fr.build_report(slices(H200_NODE), claims, [], [gpu_node(H200_NODE)])
    got = samples(fm.render(report, [gpu_node(H200_NODE)]))
    c = report["cluster"]
    states = {
        s: got[f'gpufleet_dra_devices{{state="{s}"}}'] for s in ("allocated", "free", "blocked")
    }
    assert states == {"allocated": len(held), "free": 0, "blocked": c["devices_blocked"]}
    assert sum(states.values()) == c["devices_published"]


def test_every_family_has_help_and_type_once() -> None:
    report, nodes = fleet()
    text = fm.render(report, nodes)
    types = re.findall(r"^# TYPE (\S+) gauge$", text, re.M)
    # 7 of the cluster, 12 per team and per namespace (allocated, idle, leaked x2), 7 per
    # GPU of shared counters
    assert len(types) == len(set(types)) == 26
    for name in types:
        assert f"# HELP {name} " in text


def test_label_values_are_escaped() -> None:
    report = {"leaked": [{"claim": 'ns/we"ird\\name', "kind": "a\nb"}], "nodes": [], "cluster": {}}
    text = fm.render(report, [])
    assert 'claim="we\\"ird\\\\name",kind="a\\nb"' in text


def test_serve_address_is_checked() -> None:
    import click

    from gpufleet.commands import report_serve as rs

    assert rs.parse_address(":9477") == ("0.0.0.0", 9477)
    assert rs.parse_address("10.89.73.1:9477") == ("10.89.73.1", 9477)
    for bad in ("9477", "host:", "host:99999", "host:port"):
        with pytest.raises(click.BadParameter) as err:
            rs.parse_address(bad)
        assert repr(bad) in err.value.message and "--serve" in str(err.value.param_hint)


def with_allocatable(node: dict[str, Any], resources: dict[str, Any]) -> dict[str, Any]:
    return {**node, "status": {"capacity": dict(resources), "allocatable": dict(resources)}}


def test_device_plugin_resources_in_allocatable_are_series_per_node_and_resource() -> None:
    report, nodes = fleet()
    nodes = [
        with_allocatable(nodes[0], {"cpu": "64", "nvidia.com/gpu": "2"}),  # and 2 DRA devices
        with_allocatable(nodes[1], {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.18gb": 7}),
        with_allocatable(nodes[2], {"cpu": "8", "example.com/fpga": "1"}),
    ]
    got = samples(fm.render(report, nodes))
    plugin = {s: v for s, v in got.items() if s.startswith("gpufleet_node_device_plugin_")}
    assert plugin == {
        'gpufleet_node_device_plugin_allocatable{node="w1",resource="nvidia.com/gpu"}': 2,
        'gpufleet_node_device_plugin_allocatable{node="w2",resource="nvidia.com/gpu"}': 0,
        'gpufleet_node_device_plugin_allocatable{node="w2",resource="nvidia.com/mig-1g.18gb"}': 7,
    }


def test_a_node_publishing_devices_without_the_gpu_label_is_a_series_too() -> None:
    slices = [rslice("spare", [device("gpu-0", "NVIDIA H200", "141Gi")])]
    nodes = [{"metadata": {"name": "spare", "labels": {}}}]
    report = fr.build_report(slices, [], [], nodes, driver=DRIVER)
    got = samples(fm.render(report, nodes))
    assert got['gpufleet_gpu_node_resourceslice_devices{node="spare"}'] == 1
    # a device published for no listed node names no node
    report = fr.build_report(slices, [], [], [], driver=DRIVER)
    assert not any("resourceslice_devices{" in s for s in samples(fm.render(report, [])))


def test_teams_and_namespaces_hold_allocated_idle_and_leaked_memory() -> None:
    from tests.unit.report import test_teams as tt

    got = samples(fm.render(tt.build(), tt.NODES))
    gi = tt.GI
    assert got['gpufleet_team_allocated_gpu_memory_bytes{team="vision"}'] == 322 * gi
    assert got['gpufleet_team_idle_gpu_memory_bytes{team="vision"}'] == 282 * gi
    assert got['gpufleet_team_leaked_gpu_memory_bytes{team="vision"}'] == 141 * gi
    assert got['gpufleet_team_idle_devices{team="vision"}'] == 2
    assert got['gpufleet_team_idle_gpu_memory_bytes{team="(no team)"}'] == 10 * gi
    assert (
        got['gpufleet_namespace_leaked_gpu_memory_bytes{namespace="ml-dev",team="vision"}']
        == 141 * gi
    )
    assert got['gpufleet_namespace_allocated_devices{namespace="sandbox",team="(no team)"}'] == 1


def test_idle_per_team_has_no_sample_without_activity() -> None:
    from tests.unit.report import test_teams as tt

    text = fm.render(tt.build(activity=None), tt.NODES)
    assert "# TYPE gpufleet_team_idle_gpu_memory_bytes gauge" in text
    assert not any(
        s.startswith(("gpufleet_team_idle_", "gpufleet_namespace_idle_")) for s in samples(text)
    )
    assert samples(text)['gpufleet_team_leaked_devices{team="vision"}'] == 1


def test_team_label_values_are_escaped() -> None:
    row = {
        "team": 'a"b\\c',
        "namespace": "n",
        **dict.fromkeys(
            (
                "devices_allocated",
                "memory_allocated",
                "devices_idle",
                "memory_idle",
                "devices_leaked",
                "memory_leaked",
            ),
            1,
        ),
    }
    report = {"teams": {"idle_measured": True, "teams": [row], "namespaces": [row]}}
    text = fm.render(report, [])
    assert 'gpufleet_team_idle_devices{team="a\\"b\\\\c"} 1' in text


def test_gpus_with_shared_counters_are_series_per_gpu() -> None:
    from tests.unit.report.test_fleet import counters_fleet

    found = samples(fm.render(counters_fleet(), []))
    h200 = '{node="h200-node",gpu="gpu-0",model="NVIDIA H200"}'
    b200 = '{node="b200-node",gpu="gpu-0",model="NVIDIA B200"}'
    assert found[f"gpufleet_gpu_memory_slices{h200}"] == 8
    assert found[f"gpufleet_gpu_memory_slices_free{h200}"] == 1
    assert found[f"gpufleet_gpu_stranded_memory_slices{h200}"] == 1
    assert found[f"gpufleet_gpu_stranded_memory_bytes{h200}"] == 140 * 2**30 // 8
    assert found[f"gpufleet_gpu_multiprocessors{b200}"] == 126
    assert found[f"gpufleet_gpu_multiprocessors_free{b200}"] == 18
    assert found[f"gpufleet_gpu_stranded_multiprocessors{b200}"] == 18
    assert found[f"gpufleet_gpu_stranded_memory_bytes{b200}"] == 0
