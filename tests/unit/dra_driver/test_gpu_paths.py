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
