"""GPU path names, inventory groups and what a Node's status advertises
(``plugins/module_utils/dra_driver/gpu_paths.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp

pytestmark = pytest.mark.unit


def test_path_groups_are_ansible_group_names() -> None:
    assert [gp.path_group(p) for p in gp.PATHS] == ["gpu_path_device_plugin", "gpu_path_dra"]
    assert gp.DEFAULT_PATH == "dra"


def test_inventory_paths_split_known_paths_from_unknown_groups() -> None:
    groups = ["gpu_nodes", "gpu_path_dra", "gpu_path_device_plugin", "gpu_path_x", "gpu_h200"]
    assert gp.inventory_paths(groups) == (["device-plugin", "dra"], ["gpu_path_x"])
    assert gp.inventory_paths(["gpu_nodes"]) == ([], [])


def test_gpu_drivers_are_nvidias_and_the_one_validated() -> None:
    assert gp.gpu_drivers("gpu.nvidia.com") == ("gpu.nvidia.com",)
    assert gp.gpu_drivers("gpu.example.com") == ("gpu.nvidia.com", "gpu.example.com")
    assert gp.gpu_drivers("") == ("gpu.nvidia.com",)


def test_device_plugin_resources_prefer_allocatable_over_capacity() -> None:
    status = {
        "capacity": {"cpu": "64", "nvidia.com/gpu": "8", "nvidia.com/mig-1g.18gb": "7"},
        "allocatable": {"cpu": "63", "nvidia.com/gpu": "7"},
    }
    assert gp.device_plugin_resources(status) == {
        "nvidia.com/gpu": ("allocatable", "7"),
        "nvidia.com/mig-1g.18gb": ("capacity", "7"),
    }


@pytest.mark.parametrize("status", [None, "up", {"allocatable": ["nvidia.com/gpu"]}, {}])
def test_device_plugin_resources_of_odd_status_are_none(status: object) -> None:
    assert gp.device_plugin_resources(status) == {}


@pytest.mark.parametrize(
    ("plugin", "dra", "path"),
    [
        (True, True, "both"),
        (True, False, "device-plugin"),
        (False, True, "dra"),
        (False, False, "none"),
    ],
)
def test_node_path(plugin: bool, dra: bool, path: str) -> None:
    assert gp.node_path(plugin, dra) == path


# ----------------------------------------------------------------------------- pools and labels


def test_the_path_label_is_the_collections_own_and_takes_the_path_names() -> None:
    assert gp.PATH_LABEL == "gpufleet.io/gpu-path"
    assert [{gp.PATH_LABEL: p} for p in gp.PATHS] == [
        {"gpufleet.io/gpu-path": "device-plugin"},
        {"gpufleet.io/gpu-path": "dra"},
    ]


def test_pools_put_each_host_on_its_declared_path_or_dra() -> None:
    hosts = [
        ("h100-01", ["gpu_nodes", "gpu_h100", "gpu_path_device_plugin"]),
        ("h200-01", ["gpu_nodes", "gpu_h200", "gpu_path_dra"]),
        ("a100-01", ["gpu_nodes", "gpu_a100"]),
        ("h100-02", ["gpu_nodes", "gpu_h100", "gpu_path_device_plugin"]),
    ]
    assert gp.pools(hosts) == {
        "device-plugin": ["h100-01", "h100-02"],
        "dra": ["h200-01", "a100-01"],
    }


def test_pools_of_an_inventory_without_paths_are_all_dra() -> None:
    assert gp.pools([("g1", ["gpu_nodes"]), ("g2", [])]) == {
        "device-plugin": [],
        "dra": ["g1", "g2"],
    }


def test_path_labels_name_each_node_with_its_path() -> None:
    hosts = [("h100-01.example", ["gpu_path_device_plugin"]), ("h200-01", ["gpu_nodes"])]
    assert gp.path_labels(hosts) == {
        "h100-01.example": {"gpufleet.io/gpu-path": "device-plugin"},
        "h200-01": {"gpufleet.io/gpu-path": "dra"},
    }


def test_a_host_on_both_paths_is_refused_naming_host_groups_and_fix() -> None:
    with pytest.raises(gp.GpuPathError) as info:
        gp.pools([("h1", ["gpu_path_dra", "gpu_path_device_plugin"])])
    err = info.value
    assert (err.variable, err.value) == ("group_names", ["gpu_path_device_plugin", "gpu_path_dra"])
    assert str(err) == (
        "group_names=['gpu_path_device_plugin', 'gpu_path_dra']: host h1 is on both GPU paths: "
        "the device plugin and the DRA driver would each advertise its GPUs, and the scheduler "
        "would hand one GPU out twice; fix: keep the host's node group in one of "
        "gpu_path_device_plugin or gpu_path_dra"
    )


def test_a_host_in_a_group_that_names_no_path_is_refused() -> None:
    with pytest.raises(gp.GpuPathError) as info:
        gp.path_labels([("h1", ["gpu_nodes", "gpu_path_device-plugin"])])
    assert str(info.value) == (
        "group_names=['gpu_path_device-plugin']: host h1 is in gpu_path_device-plugin, which "
        "names no GPU path; fix: put the host's node group in gpu_path_device_plugin or "
        "gpu_path_dra instead; a GPU host in neither is on the dra path"
    )


def test_the_filters_take_the_pairs_a_role_zips_and_refuse_in_ansibles_terms() -> None:
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.cluster.plugins.filter import gpu_paths as fgp

    pairs = zip(["h1", "h2"], [["gpu_path_device_plugin"], ["gpu_nodes"]], strict=True)
    assert fgp.gpu_path_pools(pairs) == {"device-plugin": ["h1"], "dra": ["h2"]}
    assert fgp.gpu_path_labels([["n1", ("gpu_path_dra",)]]) == {"n1": {gp.PATH_LABEL: "dra"}}
    with pytest.raises(AnsibleFilterError, match="host h1 is on both GPU paths"):
        fgp.gpu_path_pools([["h1", ["gpu_path_dra", "gpu_path_device_plugin"]]])
    with pytest.raises(AnsibleFilterError, match="the groups of h1 are 'gpu_path_dra'"):
        fgp.gpu_path_labels([["h1", "gpu_path_dra"]])
    with pytest.raises(AnsibleFilterError, match=r"pairs, not \['h1'\]"):
        fgp.gpu_path_pools([["h1"]])


INVENTORY = """
[gpu_h200]
h1
h2
[gpu_a100]
h3
[gpu_other]
h4
h5
[gpu_nodes:children]
gpu_h200
gpu_a100
gpu_other
[gpu_path_dra:children]
gpu_h200
[gpu_path_device_plugin]
h3
h5
[gpu_path_x]
h5
"""


def test_path_groups_of_reads_from_groups_what_group_names_says(tmp_path) -> None:
    """Ansible's own inventory: each host's gpu_path_* groups read from ``groups`` are those
    of its ``group_names`` (child groups included), in the order of the hosts given."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager
    from ansible_collections.gpufleet.cluster.plugins.filter import gpu_paths as fgp

    source = tmp_path / "hosts.ini"
    source.write_text(INVENTORY)
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(source)])
    variables = VariableManager(loader=loader, inventory=inventory)
    groups = inventory.get_groups_dict()
    hosts = ["h5", *groups["gpu_nodes"], "absent"]
    expected = []
    for name in hosts:
        host = inventory.get_host(name)
        names = variables.get_vars(host=host)["group_names"] if host else []
        expected.append(sorted(g for g in names if g.startswith(gp.PATH_GROUP_PREFIX)))

    assert gp.path_groups_of(hosts, groups) == expected
    assert expected[0] == ["gpu_path_device_plugin", "gpu_path_x"]
    assert expected[1:3] == [["gpu_path_dra"], ["gpu_path_dra"]]
    assert expected[-1] == []
    assert fgp.gpu_path_groups(hosts, groups) == expected


def test_gpu_path_groups_refuses_what_is_not_hosts_and_groups() -> None:
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.cluster.plugins.filter import gpu_paths as fgp

    with pytest.raises(AnsibleFilterError, match="a list of inventory hosts, not 'h1'"):
        fgp.gpu_path_groups("h1", {"gpu_path_dra": ["h1"]})
    with pytest.raises(AnsibleFilterError, match="group -> list of hosts"):
        fgp.gpu_path_groups(["h1"], {"gpu_path_dra": "h1"})
    with pytest.raises(AnsibleFilterError, match="group -> list of hosts"):
        fgp.gpu_path_groups(["h1"], ["gpu_path_dra"])
