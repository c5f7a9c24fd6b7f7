"""mig-parted style MIG configurations: loading, and choosing a layout per GPU
(``plugins/module_utils/mig/config.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg

from tests.unit.mig.mig_data import CONFIG

pytestmark = pytest.mark.unit


def test_load_and_select() -> None:
    cfg = mcfg.load_mig_config(CONFIG)
    assert cfg.names == ("all-disabled", "all-1g", "mixed", "by-device")
    assert mcfg.select_layout(cfg, "all-1g", [0, 1]) == {0: {"1g.18gb": 7}, 1: {"1g.18gb": 7}}
    assert mcfg.select_layout(cfg, "mixed", [0, 1]) == {0: {"3g.71gb": 2}, 1: {}}
    entries = mcfg.select_entries(cfg, "mixed", [0, 1])
    assert (entries[0].mig_enabled, entries[1].mig_enabled) == (True, False)
    assert mcfg.select_layout(cfg, "by-device", [0], "0x233510DE") == {
        0: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    }
    assert mcfg.select_layout(cfg, "by-device", [0, 1], {0: "0x20B010DE", 1: "0x233510DE"}) == {
        0: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        1: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    }


def test_load_yaml_text() -> None:
    text = (
        "version: v1\n"
        "mig-configs:\n"
        "  one:\n"
        "    - devices: [0]\n"
        "      mig-enabled: true\n"
        "      mig-devices:\n"
        '        "1g.18gb": 7\n'
    )
    assert mcfg.select_layout(mcfg.load_mig_config(text), "one", [0]) == {0: {"1g.18gb": 7}}


def test_select_unknown_name_lists_names() -> None:
    with pytest.raises(mcfg.MigConfigError, match="all-1g, mixed"):
        mcfg.select_layout(mcfg.load_mig_config(CONFIG), "all-2g", [0])


def test_select_missing_gpu_index() -> None:
    with pytest.raises(mcfg.MigConfigError) as exc:
        mcfg.select_layout(mcfg.load_mig_config(CONFIG), "mixed", [0])
    assert exc.value.key == "mig-configs.mixed[1].devices"
    assert "GPU index 1 does not exist" in str(exc.value)


def test_select_device_filter_needs_device_id() -> None:
    with pytest.raises(mcfg.MigConfigError, match="device-filter"):
        mcfg.select_layout(mcfg.load_mig_config(CONFIG), "by-device", [0])


def _with(entry: dict, top: dict | None = None) -> dict:
    base = {"version": "v1", "mig-configs": {"c": [entry]}}
    base.update(top or {})
    return base


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        ({"version": "v1", "mig-configs": {}, "extra": 1}, "extra", "allowed keys"),
        ({"version": "v2", "mig-configs": {"c": []}}, "version", "version: v1"),
        ({"version": "v1"}, "mig-configs", "non-empty mapping"),
        (
            _with({"devices": "some", "mig-enabled": True}),
            "mig-configs.c[0].devices",
            "devices: all",
        ),
        (
            _with({"devices": [0, 0], "mig-enabled": True}),
            "mig-configs.c[0].devices",
            "listed twice",
        ),
        (_with({"devices": [-1], "mig-enabled": True}), "mig-configs.c[0].devices", ">= 0"),
        (
            _with({"devices": "all", "mig-enabled": "yes"}),
            "mig-configs.c[0].mig-enabled",
            "boolean",
        ),
        (_with({"devices": "all"}), "mig-configs.c[0].mig-enabled", "required"),
        (_with({"mig-enabled": True}), "mig-configs.c[0].devices", "required"),
        (
            _with({"devices": "all", "mig-enabled": True, "mig_devices": {}}),
            "mig-configs.c[0].mig_devices",
            "'mig-devices'",
        ),
        (
            _with({"devices": "all", "mig-enabled": True, "mig-devices": {"1g18gb": 7}}),
            "mig-configs.c[0].mig-devices.1g18gb",
            "not a MIG profile",
        ),
        (
            _with({"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": -1}}),
            "mig-configs.c[0].mig-devices.1g.18gb",
            "integer >= 0",
        ),
        (
            _with({"devices": "all", "mig-enabled": False, "mig-devices": {"1g.18gb": 7}}),
            "mig-configs.c[0].mig-devices",
            "mig-enabled: false",
        ),
        (
            _with({"devices": "all", "mig-enabled": True, "device-filter": "H200"}),
            "mig-configs.c[0].device-filter",
            "0x233510DE",
        ),
        (
            {
                "version": "v1",
                "mig-configs": {
                    "c": [
                        {"devices": "all", "mig-enabled": False},
                        {"devices": [1], "mig-enabled": True},
                    ]
                },
            },
            "mig-configs.c[1].devices",
            "entries 0 and 1",
        ),
    ],
)
def test_config_errors_name_key_value_and_fix(data: dict, key: str, fragment: str) -> None:
    with pytest.raises(mcfg.MigConfigError) as exc:
        mcfg.load_mig_config(data)
    assert exc.value.key == key
    assert fragment in str(exc.value)
    assert exc.value.fix


def test_config_accepts_mig_parted_profile_forms() -> None:
    entry = {
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"1g.24gb+gfx": 1, "1g.24gb-me": 1, "1g.24gb+me.all": 1, "1c.3g.20gb": 2},
    }
    assert mcfg.load_mig_config(_with(entry)).configs["c"][0].mig_devices["1c.3g.20gb"] == 2
