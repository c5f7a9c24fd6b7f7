"""The ResourceSlices the lab's GPU simulator publishes with dynamic MIG (NVIDIA's
``DynamicMIG`` shape: one CounterSet per GPU, every MIG placement a device consuming from
it), read from ``tests/unit/data/dra/gpusim-dynamic-mig-resourceslices.json``. The Go
plugin writes that file and checks it on every ``go test``
(``lab/gpu-simulator/kubelet-plugin/fixture_test.go``): these are its own objects, not a
copy. Nodes: ``h200-node`` (one NVIDIA H200) and ``b200-node`` (one NVIDIA B200)."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).parent / "data" / "dra" / "gpusim-dynamic-mig-resourceslices.json"
H200_NODE, B200_NODE = "h200-node", "b200-node"


@cache
def _items() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(FIXTURE.read_text(encoding="utf-8"))["items"])


def slices(*nodes: str) -> list[dict[str, Any]]:
    """Fresh copies of the ResourceSlices of ``nodes`` (all nodes when none is named)."""
    return [copy.deepcopy(s) for s in _items() if not nodes or s["spec"]["pool"]["name"] in nodes]


def device_names(node: str) -> list[str]:
    """The names of the devices published on ``node``, in the plugin's order."""
    return [d["name"] for s in slices(node) for d in s["spec"].get("devices") or []]


def allocated_claim(name: str, node: str, *devices: str, namespace: str = "default") -> dict:
    """A ResourceClaim allocated ``devices`` of ``node``'s pool (driver gpu.nvidia.com)."""
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "mig.nvidia.com"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": d}
            for d in devices
        ]}}},
    }  # fmt: skip
