"""Inputs of the driver's values plan, shared by the values, node and health tests (their
Node objects come from ``tests.unit.kube.api_objects``).
"""

from __future__ import annotations

from typing import Any

GPU_LABEL = {"nvidia.com/gpu.present": "true"}


def inputs(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "chart_version": "0.4.0",
        "kubernetes_version": "v1.37.2",
        "namespace": "nvidia-dra-driver-gpu",
        "node_selector": dict(GPU_LABEL),
    }
    base.update(over)
    return base
