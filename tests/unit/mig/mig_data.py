"""The GPU captures' directory and a mig-parted style configuration, shared by the planner,
placement and configuration tests.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"

CONFIG = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}],
        "mixed": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.71gb": 2}},
            {"devices": [1], "mig-enabled": False},
        ],
        "by-device": [
            {
                "device-filter": ["0x233510DE"],
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
            },
            {
                "device-filter": "0x20B010DE",
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
            },
        ],
    },
}
