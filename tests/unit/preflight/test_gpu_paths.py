"""Preflight rules of the GPU path a pool declares (``plugins/module_utils/preflight/
gpu_paths.py``): one of the groups ``gpu_path_device_plugin``/``gpu_path_dra``, as a GPU
host, never both and never an unknown path."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

from tests.unit.preflight.hosts import CP, GOOD, GPU, _host, _rules

pytestmark = pytest.mark.unit

PATH_RULES = {"gpu-path-both", "gpu-path-unknown", "gpu-path-not-gpu"}


@pytest.mark.parametrize("groups", [[], ["gpu_path_dra"], ["gpu_path_device_plugin"]])
def test_a_gpu_host_on_one_path_or_the_default_passes(groups: list[str]) -> None:
    assert not PATH_RULES & set(_rules(_host({}, GPU + groups)))


def test_a_host_on_both_paths_is_refused_naming_the_groups_and_the_fix() -> None:
    p = _rules(_host({}, [*GPU, "gpu_path_dra", "gpu_path_device_plugin"]))["gpu-path-both"]
    assert p.severity == pp.ERROR
    assert p.variable == "group_names"
    assert p.value == ["gpu_path_device_plugin", "gpu_path_dra"]
    assert p.message == (
        "on both GPU paths (gpu_path_device_plugin and gpu_path_dra): the device plugin and "
        "the DRA driver would each advertise its GPUs, and the scheduler would hand one GPU "
        "out twice"
    )
    assert p.fix.startswith("keep the host's node group in one of gpu_path_device_plugin or ")


@pytest.mark.parametrize("group", ["gpu_path_device-plugin", "gpu_path_mig", "gpu_path_"])
def test_a_group_naming_an_unknown_path_is_refused(group: str) -> None:
    p = _rules(_host({}, [*GPU, group]))["gpu-path-unknown"]
    assert p.severity == pp.ERROR and p.value == group
    assert f"in group {group}, which names the GPU path" in p.message
    assert "device-plugin (group gpu_path_device_plugin), dra (group gpu_path_dra)" in p.message
    assert "gpu_path_device_plugin or gpu_path_dra instead of " + group in p.fix


def test_a_host_on_a_path_outside_the_gpu_group_is_refused() -> None:
    p = _rules(_host({}, [*CP, "gpu_path_device_plugin"]))["gpu-path-not-gpu"]
    assert p.value == "gpu_path_device_plugin"
    assert "not in the GPU group 'gpu_nodes'" in p.message


def test_the_gpu_group_variable_names_the_gpu_group() -> None:
    groups = ["kube_node", "gpus", "gpu_path_dra"]
    assert "gpu-path-not-gpu" not in _rules(_host({"gpu_node_labels_group": "gpus"}, groups))


def test_the_report_names_the_host_the_value_and_the_fix() -> None:
    hosts = {
        "h200-01": {"groups": [*GPU, "gpu_path_dra", "gpu_path_device_plugin"], "variables": GOOD},
        "h200-02": {"groups": [*GPU, "gpu_path_dra"], "variables": GOOD},
        "cp-1": {"groups": CP, "variables": GOOD},
    }
    problems = [p for p in pf.check_inventory(hosts) if p.rule in PATH_RULES]
    assert [(p.rule, p.hosts) for p in problems] == [("gpu-path-both", ("h200-01",))]
    report = pf.format_report(problems, hosts)
    assert (
        'ERROR [gpu-path-both] group_names=["gpu_path_device_plugin", "gpu_path_dra"] '
        "(on h200-01): on both GPU paths" in report
    )
    assert "; fix: keep the host's node group in one of" in report


def test_the_hosts_of_one_pool_share_one_finding() -> None:
    hosts = {
        f"a100-{i:02d}": {"groups": [*GPU, "gpu_a100", "gpu_path_dra_mig"], "variables": GOOD}
        for i in range(1, 9)
    }
    (p,) = [p for p in pf.check_inventory(hosts) if p.rule in PATH_RULES]
    assert p.rule == "gpu-path-unknown" and len(p.hosts) == 8
    assert "(on all 8 hosts)" in pf.format_report([p], hosts)
