# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What the MIG apply is asked to do, checked, and what each GPU should become.

Standard library only (copied to hosts with ``mig.apply``). A ``Request`` comes from the
module's options (module ``nvidia_mig``) or from the layout file role ``mig`` writes
(``request_from_file``, the boot-time apply); ``check_request`` refuses bad option
combinations and ``targets`` gives each selected GPU its ``Target`` from a layout
(profile -> count) or a mig-parted config (``mig.config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mpl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.clients import CLIENT_KINDS
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.gpu_state import (
    GpuState,
    MigApplyError,
)


@dataclass(frozen=True)
class Request:
    """What to apply. Exactly one of ``layout`` (profile -> count, the same for every
    selected GPU) and ``config`` (a mig-parted config mapping) with ``config_name``.

    ``devices`` is ``"all"`` or GPU indices; ``mig_enabled`` applies to ``layout``;
    ``allow_stop`` lists client kinds (``CLIENT_KINDS``) that may be stopped;
    ``var_prefix`` is how error messages name the options (``""`` for the module,
    ``"mig_"`` for the role); ``dra_driver``: the node runs NVIDIA's DRA driver, so a
    profile it cannot serve is refused (``mig.planner.check_dra_driver``).
    """

    layout: Mapping[str, int] | None = None
    config: Any = None
    config_name: str | None = None
    devices: str | tuple[int, ...] = "all"
    mig_enabled: bool = True
    allow_stop: tuple[str, ...] = ()
    allow_gpu_reset: bool = True
    allow_reboot: bool = False
    nvidia_smi: str = "nvidia-smi"
    var_prefix: str = ""
    dra_driver: bool = False
    dynamic_mig: bool = False

    def name(self, option: str) -> str:
        """``option`` as the caller spells it (``var_prefix`` first)."""
        return f"{self.var_prefix}{option}"


@dataclass(frozen=True)
class Target:
    """What one GPU should become: MIG on with ``layout``, or MIG off."""

    mig_enabled: bool
    layout: dict[str, int]


def check_request(req: Request) -> None:
    """Validate option combinations. Raises ``MigApplyError`` naming the option."""
    if (req.layout is None) == (req.config is None):
        raise MigApplyError(
            f"give exactly one of {req.name('layout')} (profile -> count) and "
            f"{req.name('config')} (a mig-parted config) with {req.name('config_name')}"
        )
    if req.config is not None and not req.config_name:
        raise MigApplyError(
            f"{req.name('config')} is set but {req.name('config_name')} is empty; fix: name "
            "the mig-configs entry to apply"
        )
    bad = [k for k in req.allow_stop if k not in CLIENT_KINDS]
    if bad:
        raise MigApplyError(
            f"{req.name('allow_stop')}={list(req.allow_stop)!r}: unknown client kind "
            f"{bad[0]!r}; fix: use only {', '.join(CLIENT_KINDS)}"
        )
    if req.layout is not None:
        layout = mpl.parse_layout(dict(req.layout), name=req.name("layout"))
        _check_dra_driver(req, layout, req.name("layout"))
        wanted = {k: v for k, v in layout.items() if v}
        if req.mig_enabled and not wanted and not req.dynamic_mig:
            raise MigApplyError(
                f"{req.name('layout')}={dict(req.layout)!r} with {req.name('mig_enabled')}=true "
                "would leave MIG mode on with zero GPU instances, which no workload can use; "
                f"fix: list the profiles to create, or set {req.name('mig_enabled')}=false to "
                "turn MIG off"
            )
        if not req.mig_enabled and wanted:
            raise MigApplyError(
                f"{req.name('layout')}={dict(req.layout)!r} asks for MIG instances but "
                f"{req.name('mig_enabled')}=false; fix: set it to true or empty the layout"
            )


def _check_dra_driver(req: Request, layout: Mapping[str, int], name: str) -> None:
    if req.dra_driver:
        try:
            mpl.check_dra_driver(layout, name=name)
        except mpl.DraDriverCannotServe as exc:
            raise MigApplyError(
                f"{exc} (the node runs the DRA driver: {req.name('dra_driver')}=true)"
            ) from None


def targets(req: Request, gpus: list[GpuState]) -> dict[int, Target]:
    """The target of each selected GPU (GPUs a mig-parted config leaves out are absent).

    Raises ``MigApplyError`` for an unknown device index, a bad config or a config entry
    with MIG on and zero instances.
    """
    indices = [g.index for g in gpus]
    if req.devices == "all":
        selected = indices
    else:
        missing = [d for d in req.devices if d not in indices]
        if missing:
            raise MigApplyError(
                f"{req.name('devices')}={list(req.devices)!r}: GPU {missing[0]} does not exist "
                f"on this host (GPUs: {indices}); fix: list indices nvidia-smi -L shows, or 'all'"
            )
        selected = list(req.devices)
    if req.layout is not None:
        layout = mpl.parse_layout(dict(req.layout), name=req.name("layout"))
        # zero counts stay: the planner refuses a profile the GPU lacks whatever its count
        return {i: Target(req.mig_enabled, dict(layout)) for i in selected}
    try:
        config = mcfg.load_mig_config(req.config)
        ids = {g.index: g.device_id for g in gpus if g.device_id}
        entries = mcfg.select_entries(config, str(req.config_name), selected, ids or None)
    except mcfg.MigConfigError as exc:
        raise MigApplyError(f"{req.name('config')}: {exc}") from None
    out: dict[int, Target] = {}
    for i, entry in entries.items():
        where = f"{req.name('config')} {req.config_name!r} GPU {i} mig-devices"
        _check_dra_driver(req, entry.mig_devices, where)
        wanted = {k: v for k, v in entry.mig_devices.items() if v}
        if entry.mig_enabled and not wanted:
            raise MigApplyError(
                f"{req.name('config')} entry {req.config_name!r} for GPU {i} has "
                "mig-enabled: true and no mig-devices: that leaves MIG mode on with zero GPU "
                "instances; fix: list the profiles to create, or set mig-enabled: false"
            )
        out[i] = Target(entry.mig_enabled, dict(entry.mig_devices))
    return out


def request_from_file(data: Mapping[str, Any]) -> Request:
    """A ``Request`` from the layout file role ``mig`` writes (JSON, a YAML subset):
    ``{"layout": {...}}`` or ``{"config": {...}, "config_name": "..."}``, plus
    ``devices``, ``mig_enabled``, ``allow_stop``, ``allow_gpu_reset``, ``nvidia_smi_path``,
    ``dra_driver``. A boot-time apply never reboots (``allow_reboot`` false)."""
    devices = data.get("devices", "all")
    return Request(
        layout=data.get("layout"),
        config=data.get("config"),
        config_name=data.get("config_name"),
        devices="all" if devices in ("all", None) else tuple(int(d) for d in devices),
        mig_enabled=bool(data.get("mig_enabled", True)),
        allow_stop=tuple(data.get("allow_stop") or ()),
        allow_gpu_reset=bool(data.get("allow_gpu_reset", True)),
        allow_reboot=False,
        nvidia_smi=data.get("nvidia_smi_path") or "nvidia-smi",
        var_prefix="mig_",
        dra_driver=bool(data.get("dra_driver", False)),
    )
