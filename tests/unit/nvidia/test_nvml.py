"""GPU facts through NVML (``plugins/module_utils/nvidia/nvml.py``), against a stand-in for
``pynvml`` with one H200; the same facts through nvidia-smi are in ``test_smi.py``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import gpu as ginfo
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import nvml as gnvml

pytestmark = pytest.mark.unit


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNvml:
    """One H200 with MIG disabled, driver 580.159.04, CUDA 13.0; no serial number."""

    NVMLError = NVMLError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_INVALID_ARGUMENT = 2

    def __init__(self, init_error: int | None = None) -> None:
        self.init_error = init_error
        self.shut_down = False

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"580.159.04"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 13000

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetCudaComputeCapability(self, h: str) -> tuple[int, int]:
        return (9, 0)

    def nvmlDeviceGetArchitecture(self, h: str) -> int:
        raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetMigMode(self, h: str) -> tuple[int, int]:
        return (0, 0)

    def nvmlDeviceGetSerial(self, h: str) -> str:
        raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetMinorNumber(self, h: str) -> int:
        return 0

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return "GPU-4dd5ee60-0000-0000-0000-000000000000"

    def nvmlDeviceGetName(self, h: str) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetPciInfo(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(busId=b"00000000:19:00.0")

    def nvmlDeviceGetMemoryInfo(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(total=143771 * 1024 * 1024)


def test_one_gpu_through_nvml() -> None:
    nv = FakeNvml()
    host = gnvml.collect_nvml(nv)
    assert (host.driver_version, host.cuda_driver_version) == ("580.159.04", "13.0")
    [gpu] = host.gpus
    assert (gpu.index, gpu.name, gpu.memory_mib) == (0, "NVIDIA H200", 143771)
    assert gpu.pci_bus_id == ginfo.normalize_bus_id("00000000:19:00.0")
    assert gpu.compute_capability == "9.0"
    assert gpu.architecture == ginfo.architecture_from_compute_capability("9.0")
    assert gpu.mig_capable and gpu.mig_mode_current == "Disabled"
    assert gpu.serial is None
    assert nv.shut_down


def test_nvml_without_its_library_is_no_driver() -> None:
    with pytest.raises(ginfo.NoDriverError, match="NVML library not found"):
        gnvml.collect_nvml(FakeNvml(init_error=FakeNvml.NVML_ERROR_LIBRARY_NOT_FOUND))


def test_other_init_failures_are_query_errors() -> None:
    with pytest.raises(ginfo.GpuQueryError, match="nvmlInit failed"):
        gnvml.collect_nvml(FakeNvml(init_error=9))
