"""Which GPUs a CDI spec names (``plugins/module_utils/nvidia/cdi.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import cdi as cdi_spec
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.driver import SmiGpu

pytestmark = pytest.mark.unit


UUIDS = ("GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80", "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c61")

GPUS = [SmiGpu(0, "NVIDIA H200", UUIDS[0]), SmiGpu(1, "NVIDIA H200", UUIDS[1])]


def test_cdi_spec_with_every_uuid_passes() -> None:
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [{"name": n} for n in ("0", "1", *UUIDS, "all")],
    }
    assert cdi_spec.missing_gpus(cdi_spec.devices_of(spec, "/var/run/cdi/nvidia.yaml"), GPUS) == []


def test_cdi_spec_with_only_all_names_every_gpu() -> None:
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "all"}]}
    devices = cdi_spec.devices_of(spec, "/var/run/cdi/nvidia.yaml")
    missing = cdi_spec.missing_gpus(devices, GPUS)
    assert missing == GPUS
    text = cdi_spec.missing_message(
        missing, devices, "nvidia.com/gpu", ["/etc/cdi", "/var/run/cdi"]
    )
    assert f"GPU 0 {UUIDS[0]} (NVIDIA H200); GPU 1 {UUIDS[1]} (NVIDIA H200)" in text
    assert "they hold ['nvidia.com/gpu=all']" in text


def test_cdi_device_of_another_kind_does_not_count() -> None:
    spec = {"kind": "example.com/gpu", "devices": [{"name": UUIDS[0]}]}
    assert cdi_spec.missing_gpus(cdi_spec.devices_of(spec, "x"), GPUS[:1]) == GPUS[:1]
    assert cdi_spec.devices_of(["not", "a", "spec"], "x") == []
