"""Inputs of the device plugin's values plan and the labels of its nodes, shared by the
values, node and health tests (their Node objects come from ``tests.unit.kube.api_objects``)."""

from __future__ import annotations

from typing import Any

GPU_LABEL = {"nvidia.com/gpu.present": "true"}
ON_PLUGIN = {"gpufleet.io/gpu-path": "device-plugin"}
ON_DRA = {"gpufleet.io/gpu-path": "dra"}
STAND_IN_CHART = {"name": "gpufleet-gpu-simulator", "version": "0.1.0"}


def inputs(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "chart_version": "0.17.4",
        "release_name": "nvidia-device-plugin",
        "namespace": "nvidia-device-plugin",
        "node_selector": dict(GPU_LABEL),
        "mig_strategy": "none",
    }
    base.update(over)
    return base
