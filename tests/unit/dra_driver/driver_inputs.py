"""Inputs of the driver's values plan and the nodes it runs on, shared by the values, node and
health tests.
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


def node(name: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": name, "labels": labels or {}}, "spec": {}}
    if "taints" in extra:
        out["spec"]["taints"] = extra["taints"]
    if "allocatable" in extra:
        out["status"] = {"allocatable": extra["allocatable"]}
    return out
