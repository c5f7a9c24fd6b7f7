# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The NVML backend of the GPU query: ``pynvml`` (PyPI package ``nvidia-ml-py``; calls
and constants of ``pynvml.py`` in nvidia-ml-py 13.615.71), imported only when the backend
is tried (``load_nvml``); ``collect_nvml`` reads identity, memory, driver, MIG state and
devices and NVLink peers, read-only.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.gpu import (
    MIB,
    NVML_ARCHITECTURES,
    GpuInfo,
    GpuQueryError,
    HostGpus,
    MigDevice,
    NoDriverError,
    NvLinkPeer,
    absent,
    architecture_from_compute_capability,
    cuda_version_from_int,
    mig_mode,
    normalize_bus_id,
    profile_name,
)

# ------------------------------------------------------------------ NVML backend


def load_nvml() -> Any | None:
    """The ``pynvml`` module (nvidia-ml-py), or ``None`` when it is not importable."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def _nvml_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def collect_nvml(nv: Any) -> HostGpus:
    """Query every GPU through NVML (``nv`` is the imported ``pynvml``).

    Per GPU: ``nvmlDeviceGetName``, ``GetUUID``, ``GetPciInfo().busId``,
    ``GetMemoryInfo().total`` (bytes -> MiB), ``GetCudaComputeCapability``,
    ``GetArchitecture`` (:data:`NVML_ARCHITECTURES`), ``GetMigMode``, ``GetSerial``,
    ``GetMinorNumber``; MIG devices by ``GetMaxMigDeviceCount`` and
    ``GetMigDeviceHandleByIndex`` with ``GetGpuInstanceId``/``GetComputeInstanceId``,
    ``GetGpuInstanceById`` + ``nvmlGpuInstanceGetInfo`` (profile ID, placement) and the
    GI/CI profile tables for names; with two GPUs or more, NVLink peers by
    ``GetP2PStatus(.., NVML_P2P_CAPS_INDEX_NVLINK)`` and the active links' remote PCI bus
    ids. ``NVML_ERROR_NOT_SUPPORTED`` means absent.

    Raises:
        NoDriverError: ``nvmlInit`` cannot find ``libnvidia-ml.so.1``.
        GpuQueryError: ``nvmlInit`` failed otherwise (driver not loaded, …) or an NVML call
            that every GPU answers failed.
    """
    not_supported = {
        nv.NVML_ERROR_NOT_SUPPORTED,
        getattr(nv, "NVML_ERROR_FUNCTION_NOT_FOUND", 13),
    }
    warnings: list[str] = []

    def optional(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except nv.NVMLError as exc:
            if exc.value in not_supported:
                return None
            raise GpuQueryError(f"NVML {fn.__name__}: {exc}") from exc

    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        if exc.value == nv.NVML_ERROR_LIBRARY_NOT_FOUND:
            raise NoDriverError(f"NVML library not found: {exc}") from exc
        raise GpuQueryError(f"nvmlInit failed: {exc}") from exc
    try:
        driver = _nvml_text(nv.nvmlSystemGetDriverVersion())
        cuda = cuda_version_from_int(optional(nv.nvmlSystemGetCudaDriverVersion))
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        gpus = []
        for index, h in enumerate(handles):
            cc = optional(nv.nvmlDeviceGetCudaComputeCapability, h)
            cc_text = f"{cc[0]}.{cc[1]}" if cc else None
            arch = optional(nv.nvmlDeviceGetArchitecture, h)
            modes = optional(nv.nvmlDeviceGetMigMode, h)
            serial = optional(nv.nvmlDeviceGetSerial, h)
            gpu = GpuInfo(
                index=index,
                uuid=_nvml_text(nv.nvmlDeviceGetUUID(h)),
                name=_nvml_text(nv.nvmlDeviceGetName(h)),
                pci_bus_id=normalize_bus_id(_nvml_text(nv.nvmlDeviceGetPciInfo(h).busId)),
                memory_mib=int(nv.nvmlDeviceGetMemoryInfo(h).total) // MIB,
                driver_version=driver,
                cuda_driver_version=cuda,
                compute_capability=cc_text,
                architecture=NVML_ARCHITECTURES.get(arch) if arch is not None else None,
                mig_capable=modes is not None,
                mig_mode_current=mig_mode(str(modes[0])) if modes else None,
                mig_mode_pending=mig_mode(str(modes[1])) if modes else None,
                serial=absent(_nvml_text(serial)) if serial is not None else None,
                minor_number=optional(nv.nvmlDeviceGetMinorNumber, h),
            )
            if gpu.architecture is None:
                gpu.architecture = architecture_from_compute_capability(cc_text)
            if gpu.mig_mode_current == "Enabled":
                gpu.mig_devices = _nvml_mig_devices(nv, h, optional, warnings)
            gpus.append(gpu)
        if len(gpus) > 1:
            _nvml_nvlink(nv, handles, gpus, optional)
        return HostGpus("nvml", driver, cuda, gpus, warnings)
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


def _nvml_mig_devices(
    nv: Any, h: Any, optional: Callable[..., Any], warnings: list[str]
) -> list[MigDevice]:
    gi_profiles: dict[int, tuple[str | None, int]] = {}
    for p in range(nv.NVML_GPU_INSTANCE_PROFILE_COUNT):
        info = optional(nv.nvmlDeviceGetGpuInstanceProfileInfo, h, p)
        if info is not None:
            gi_profiles[int(info.id)] = (profile_name(_nvml_text(info.name)), int(info.sliceCount))
    devices = []
    for mi in range(optional(nv.nvmlDeviceGetMaxMigDeviceCount, h) or 0):
        try:
            mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, mi)
        except nv.NVMLError as exc:
            if exc.value in (nv.NVML_ERROR_NOT_FOUND, nv.NVML_ERROR_INVALID_ARGUMENT):
                continue
            raise GpuQueryError(f"NVML nvmlDeviceGetMigDeviceHandleByIndex({mi}): {exc}") from exc
        name = _nvml_text(nv.nvmlDeviceGetName(mh))
        dev = MigDevice(
            index=mi,
            gi_id=int(nv.nvmlDeviceGetGpuInstanceId(mh)),
            ci_id=int(nv.nvmlDeviceGetComputeInstanceId(mh)),
            profile=name.split(" MIG ", 1)[1].strip() if " MIG " in name else None,
            uuid=_nvml_text(nv.nvmlDeviceGetUUID(mh)),
            memory_mib=int(nv.nvmlDeviceGetMemoryInfo(mh).total) // MIB,
        )
        try:
            gi = nv.nvmlDeviceGetGpuInstanceById(h, dev.gi_id)
            gi_info = nv.nvmlGpuInstanceGetInfo(gi)
            dev.gi_profile_id = int(gi_info.profileId)
            dev.placement_start = int(gi_info.placement.start)
            dev.placement_size = int(gi_info.placement.size)
            dev.gi_profile, gi_slices = gi_profiles.get(dev.gi_profile_id, (None, 0))
            ci_info = nv.nvmlComputeInstanceGetInfo(
                nv.nvmlGpuInstanceGetComputeInstanceById(gi, dev.ci_id)
            )
            dev.ci_profile_id = int(ci_info.profileId)
            for p in range(nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
                ci_prof = optional(
                    nv.nvmlGpuInstanceGetComputeInstanceProfileInfo,
                    gi,
                    p,
                    nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                )
                if ci_prof is not None and int(ci_prof.id) == dev.ci_profile_id:
                    if dev.gi_profile and int(ci_prof.sliceCount) < gi_slices:
                        dev.profile = f"{int(ci_prof.sliceCount)}c.{dev.gi_profile}"
                    elif dev.gi_profile:
                        dev.profile = dev.gi_profile
                    break
        except nv.NVMLError as exc:
            warnings.append(
                f"MIG device {mi}: GPU/compute instance details not read ({exc}); "
                "root is needed for them"
            )
        devices.append(dev)
    return devices


def _nvml_nvlink(
    nv: Any, handles: list[Any], gpus: list[GpuInfo], optional: Callable[..., Any]
) -> None:
    by_bus = {g.pci_bus_id: g for g in gpus}
    for gpu, h in zip(gpus, handles, strict=True):
        remote_links: dict[str | None, int] = {}
        active = 0
        for link in range(nv.NVML_NVLINK_MAX_LINKS):
            try:
                state = nv.nvmlDeviceGetNvLinkState(h, link)
            except nv.NVMLError:
                break
            if not state:
                continue
            active += 1
            remote = optional(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
            bus = normalize_bus_id(_nvml_text(remote.busId)) if remote is not None else None
            remote_links[bus] = remote_links.get(bus, 0) + 1
        gpu.nvlink_active_links = active
        for other, oh in zip(gpus, handles, strict=True):
            if other is gpu:
                continue
            status = optional(nv.nvmlDeviceGetP2PStatus, h, oh, nv.NVML_P2P_CAPS_INDEX_NVLINK)
            if status != nv.NVML_P2P_STATUS_OK:
                continue
            direct = remote_links.get(other.pci_bus_id, 0)
            # Through NVSwitch every active link reaches every peer (topo -m prints NV<all>).
            switched = sum(n for bus, n in remote_links.items() if bus not in by_bus)
            gpu.nvlink_peers.append(
                NvLinkPeer(other.index, other.uuid, other.pci_bus_id, direct or switched)
            )
