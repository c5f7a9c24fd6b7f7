"""Preflight rules of MIG: layouts and mig-parted configs against the GPU model, and the
role's settings (``plugins/module_utils/preflight/mig.py``).
"""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp

from tests.unit.preflight.hosts import _host, _rules

pytestmark = pytest.mark.unit


def test_mig_layout_that_does_not_fit_the_gpu_model_names_the_fix() -> None:
    p = _rules(_host({"gpu_model": "NVIDIA H200", "mig_layout": {"3g.71gb": 3}}))["mig-layout-fit"]
    assert p.variable == "mig_layout" and p.value == {"3g.71gb": 3}
    assert "does not fit on NVIDIA H200" in p.message
    assert "at most 2 x 3g.71gb" in p.fix


def test_mig_layout_with_a_profile_of_another_model_is_refused() -> None:
    p = _rules(_host({"gpu_model": "NVIDIA H200", "mig_layout": {"1g.10gb": 7}}))["mig-layout-fit"]
    assert "1g.18gb" in p.message  # the valid H200 profiles are listed


def test_mig_layout_uses_the_gathered_gpu_model_when_no_gpu_model_is_set() -> None:
    gpus = [{"name": "NVIDIA A100-SXM4-40GB"}]
    p = _rules(_host({"mig_layout": {"1g.18gb": 1}}, gpus=gpus))["mig-layout-fit"]
    assert "A100-SXM4-40GB" in p.message
    assert "mig-layout-fit" not in _rules(_host({"mig_layout": {"1g.5gb": 7}}, gpus=gpus))


def test_mig_layout_without_a_gpu_model_is_a_warning() -> None:
    p = _rules(_host({"mig_layout": {"1g.18gb": 7}}))["mig-gpu-model-unknown"]
    assert p.severity == pp.WARNING and "gpu_model" in p.fix


def test_unknown_gpu_model_is_refused_with_the_known_ones() -> None:
    p = _rules(_host({"gpu_model": "NVIDIA L4", "mig_layout": {"1g.18gb": 7}}))["mig-gpu-model"]
    assert p.variable == "gpu_model" and "NVIDIA H200" in p.message


MIG_CONFIG = {
    "version": "v1",
    "mig-configs": {
        "h200-big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.71gb": 2}}],
        "h200-ok": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}],
        "a100-only": [
            {
                "device-filter": "0x20B010DE",
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.5gb": 9},
            }
        ],
    },
}


def test_selected_mig_parted_config_is_checked_against_the_node_group_model() -> None:
    v = {
        "gpu_model": "NVIDIA H200",
        "mig_config": MIG_CONFIG,
        "mig_dra_plugin_namespace": "nvidia-dra-driver-gpu",
    }
    p = _rules(_host({**v, "mig_config_name": "h200-big"}))["mig-layout-fit"]
    assert p.variable == "mig_config.mig-configs.h200-big[0].mig-devices"
    assert p.value == {"4g.71gb": 2} and "mig_config_name=h200-big" in p.message
    # the A100 config does not fit an A100 either, but it is not the one this group selects
    assert _host({**v, "mig_config_name": "h200-ok"}) == []


def test_unknown_mig_config_name_lists_the_names() -> None:
    v = {"gpu_model": "h200", "mig_config": MIG_CONFIG, "mig_config_name": "nope"}
    p = _rules(_host(v))["mig-config-name"]
    assert p.value == "nope" and "h200-ok" in p.fix


def test_malformed_mig_config_names_the_key() -> None:
    bad = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig_enabled": True}]}}
    p = _rules(_host({"mig_config": bad, "mig_config_name": "x"}))["mig-config-format"]
    assert p.variable == "mig_config.mig-configs.x[0].mig_enabled"
    assert "mig-enabled" in p.fix


def test_mig_config_file_read_on_the_control_host_is_checked() -> None:
    text = yaml.safe_dump(MIG_CONFIG)
    v = {"gpu_model": "h200", "mig_config_file": "/srv/mig.yaml", "mig_config_name": "h200-big"}
    p = _rules(_host(v, mig_config_file_text=text))["mig-layout-fit"]
    assert p.value == {"4g.71gb": 2}
    missing = _rules(_host(v))["mig-config-file"]
    assert missing.value == "/srv/mig.yaml"


def test_mig_layout_and_mig_config_name_together_are_refused() -> None:
    v = {"gpu_model": "h200", "mig_layout": {"1g.18gb": 7}, "mig_config_name": "x"}
    p = _rules(_host(v))["mig-layout-and-config"]
    assert p.variable == "mig_layout" and "mig_config_name" in p.message


def test_mig_layout_with_mig_disabled_is_refused() -> None:
    p = _rules(_host({"mig_layout": {"1g.18gb": 7}, "mig_enabled": False}))["mig-layout-disabled"]
    assert p.value == {"1g.18gb": 7}


def test_mig_role_restarting_the_plugin_in_another_namespace_is_refused() -> None:
    v = {"gpu_model": "h200", "mig_layout": {"1g.18gb": 7}}
    p = _rules(_host({**v, "mig_dra_plugin_namespace": "elsewhere"}))["mig-plugin-namespace"]
    assert p.value == "elsewhere" and p.fix == "set mig_dra_plugin_namespace: nvidia-dra-driver-gpu"
    # the mig role's default follows dra_driver_namespace: a site that moves the driver
    # and leaves the mig role's variable unset is right
    moved = {k: x for k, x in v.items() if k != "mig_dra_plugin_namespace"}
    assert "mig-plugin-namespace" not in _rules(_host({**moved, "dra_driver_namespace": "gpu"}))
    assert "mig-plugin-namespace" not in _rules(_host(moved))
    same = {**v, "mig_dra_plugin_namespace": "gpu", "dra_driver_namespace": "gpu"}
    assert _host(same) == []


def test_static_mig_layout_with_dynamic_mig_is_refused() -> None:
    v = {"gpu_model": "h200", "mig_layout": {"1g.18gb": 7}, "dra_driver_dynamic_mig": True}
    p = _rules(_host(v))["mig-with-dynamic-mig"]
    assert p.variable == "mig_layout" and "DestroyUnknownMIGDevices" in p.message
