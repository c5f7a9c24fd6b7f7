# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Preflight rules on MIG: the layout or mig-parted config against ``mig_enabled``,
DynamicMIG and the DRA plugin's namespace, and its fit on the node group's GPU model
(``mig.planner.plan`` / ``check_config`` with the models of ``mig.profiles``); on a node
that runs NVIDIA's DRA driver, the profiles it cannot serve (``mig.planner.check_dra_driver``,
the rule the ``nvidia_mig`` module asks too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mig_placement
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mp
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import (
    ERROR,
    WARNING,
    HostContext,
    as_bool,
    text_of,
)


def rule_mig(ctx: HostContext) -> None:
    """The MIG layout (``mig_layout``) or mig-parted config (``mig_config`` /
    ``mig_config_file`` with ``mig_config_name``) of a host: what excludes it, whether it
    reads, and whether it fits each GPU model of the host."""
    layout = ctx.settings.get("mig_layout") or {}
    name = text_of(ctx.settings, "mig_config_name")
    if not _exclusions(ctx, layout, name):
        return
    if layout:
        wanted = _layout(ctx, layout)
        if wanted is not None and not _refused_by_dra_driver(ctx, wanted):
            _judge_models(ctx, lambda model: _check_layout(ctx, model, wanted))
        return
    selected = _selected_config(ctx, name)
    if selected is not None:
        _judge_models(ctx, lambda model: _check_config(ctx, model, selected, name))


def runs_dra_driver(ctx: HostContext) -> bool:
    """Whether the host runs NVIDIA's DRA driver, as role ``mig`` decides it: its
    ``mig_dra_driver`` when set, else membership of ``dra_driver_group`` (``gpu_nodes``)."""
    value = ctx.settings.get("mig_dra_driver")
    if value is not None and not (isinstance(value, str) and "{{" in value):
        return as_bool(ctx.settings, "mig_dra_driver")
    return (text_of(ctx.settings, "dra_driver_group") or "gpu_nodes") in ctx.groups


def _refused_by_dra_driver(ctx: HostContext, wanted: Mapping[str, int]) -> bool:
    """Report (and return True for) a ``mig_layout`` profile that the DRA driver the host
    runs cannot serve."""
    if not runs_dra_driver(ctx):
        return False
    try:
        mp.check_dra_driver(wanted, name="mig_layout")
    except mp.DraDriverCannotServe as exc:
        ctx.add(
            pp.problem(
                "mig-dra-driver-profile",
                ERROR,
                "mig_layout",
                dict(wanted),
                exc.reason,
                f"{exc.fix}; or set mig_dra_driver: false on a node that runs no DRA driver",
            )
        )
        return True
    return False


def _exclusions(ctx: HostContext, layout: Any, name: str) -> bool:
    """Layout against mig_enabled, a config, DynamicMIG and the plugin namespace. False
    when there is nothing to carve."""
    config = ctx.settings.get("mig_config") or {}
    config_file = text_of(ctx.settings, "mig_config_file")
    if layout and not as_bool(ctx.settings, "mig_enabled"):
        ctx.add(
            pp.problem(
                "mig-layout-disabled",
                ERROR,
                "mig_layout",
                layout,
                "mig_enabled=false turns MIG off, and MIG devices cannot exist without it",
                "set mig_layout: {} to turn MIG off, or mig_enabled: true",
            )
        )
    if layout and (config or config_file or name):
        other = "mig_config_name" if name else ("mig_config" if config else "mig_config_file")
        ctx.add(
            pp.problem(
                "mig-layout-and-config",
                ERROR,
                "mig_layout",
                layout,
                f"and {other} both say what to carve; the mig role takes one",
                f"keep mig_layout, or {other} (with mig_config_name) alone",
            )
        )
    if not layout and not name:
        return False
    _rule_mig_plugin_namespace(ctx)
    if as_bool(ctx.settings, "dra_driver_dynamic_mig"):
        var = "mig_layout" if layout else ("mig_config_name" if name else "mig_config")
        ctx.add(
            pp.problem(
                "mig-with-dynamic-mig",
                ERROR,
                var,
                ctx.settings.get(var),
                "a static MIG layout and the DRA driver's DynamicMIG exclude each other: at "
                "start the driver destroys the MIG devices it did not create "
                "(DestroyUnknownMIGDevices), and it carves MIG itself per claim",
                f"remove {var} on this node group, or set dra_driver_dynamic_mig: false",
            )
        )
    return True


def _layout(ctx: HostContext, layout: Any) -> dict[str, int] | None:
    """``mig_layout`` parsed by the MIG planner; None (reported) when it does not read."""
    try:
        return mp.parse_layout(layout, name="mig_layout")
    except ValueError as exc:
        ctx.add(
            pp.problem(
                "mig-layout-format",
                ERROR,
                "mig_layout",
                layout,
                str(exc),
                'write MIG profile -> count per GPU, e.g. {"1g.18gb": 7}',
            )
        )
        return None


def _selected_config(ctx: HostContext, name: str) -> mig_config.MigConfig | None:
    """The config ``mig_config_name`` of ``mig_config`` (or of ``mig_config_file``, read on
    the control host); None (reported) when it is missing or does not read."""
    config = ctx.settings.get("mig_config") or {}
    config_file = text_of(ctx.settings, "mig_config_file")
    if not config and config_file:
        text = ctx.mig_config_file_text
        if not text:
            ctx.add(
                pp.problem(
                    "mig-config-file",
                    ERROR,
                    "mig_config_file",
                    config_file,
                    "cannot be read on the control host",
                    "give the path of a mig-parted config file on the control host",
                )
            )
            return None
        config = text
    if not config:
        ctx.add(
            pp.problem(
                "mig-config-missing",
                ERROR,
                "mig_config_name",
                name,
                "names a config but mig_config and mig_config_file are empty",
                "set mig_config to a mig-parted config (version: v1, mig-configs: ...)",
            )
        )
        return None
    try:
        parsed = mig_config.load_mig_config(config)
    except mig_config.MigConfigError as exc:
        ctx.add(
            pp.problem(
                "mig-config-format",
                ERROR,
                f"mig_config.{exc.key}",
                exc.value,
                exc.problem,
                exc.fix,
            )
        )
        return None
    if name not in parsed.configs:
        ctx.add(
            pp.problem(
                "mig-config-name",
                ERROR,
                "mig_config_name",
                name,
                "is not a config of mig_config",
                "choose one of: " + ", ".join(parsed.names),
            )
        )
        return None
    return mig_config.MigConfig(parsed.version, {name: parsed.configs[name]})


def _judge_models(ctx: HostContext, judge: Callable[[mprof.GpuModel], None]) -> None:
    """``judge`` on every GPU model of the host (``gpu_model``, else the gathered GPUs); an
    unknown model is an error, no model at all a warning."""
    models = _models(ctx)
    if not models:
        ctx.add(
            pp.problem(
                "mig-gpu-model-unknown",
                WARNING,
                "gpu_model",
                None,
                "the MIG layout cannot be checked against the GPU: the node group has no "
                "gpu_model and no GPU facts were gathered",
                'set gpu_model on the node group, e.g. gpu_model: "NVIDIA H200" (or run '
                "preflight with preflight_gather_gpu_facts: true)",
            )
        )
        return
    for var, value, model, error, fix in models:
        if model is None:
            ctx.add(pp.problem("mig-gpu-model", ERROR, var, value, error, fix))
            continue
        judge(model)


def _check_config(
    ctx: HostContext, model: mprof.GpuModel, selected: mig_config.MigConfig, name: str
) -> None:
    """The problems ``mig.planner.check_config`` finds in config ``name`` on ``model``."""
    for prob in mp.check_config(selected, model, dra_driver=runs_dra_driver(ctx)):
        entries = selected.configs[name]
        value: Any = name
        if prob.entry is not None and prob.entry < len(entries):
            value = dict(entries[prob.entry].mig_devices)
        message, _sep, fix = prob.message.partition(". Fix: ")
        ctx.add(
            pp.problem(
                "mig-layout-fit",
                ERROR if prob.severity == "error" else WARNING,
                f"mig_config.{prob.key}",
                value,
                f"mig_config_name={name} on {model.name}: {message}",
                fix
                or "change the config's mig-devices to a layout the GPU model takes "
                "(gpufleet mig plan shows one)",
            )
        )


def _rule_mig_plugin_namespace(ctx: HostContext) -> None:
    if not as_bool(ctx.settings, "mig_restart_dra_plugin"):
        return
    ns_driver = text_of(ctx.settings, "dra_driver_namespace")
    ns_mig = text_of(ctx.settings, "mig_dra_plugin_namespace") or ns_driver  # the role's default
    if ns_mig and ns_driver and ns_mig != ns_driver:
        ctx.add(
            pp.problem(
                "mig-plugin-namespace",
                ERROR,
                "mig_dra_plugin_namespace",
                ns_mig,
                f"differs from dra_driver_namespace={ns_driver}: after carving, the mig role "
                "restarts the node's DRA kubelet plugin pod in its namespace and would not "
                "find it",
                f"set mig_dra_plugin_namespace: {ns_driver}",
            )
        )


def _check_layout(ctx: HostContext, model: mprof.GpuModel, wanted: Mapping[str, int]) -> None:
    try:
        mp.plan(model, wanted)
    except mprof.UnknownProfile as exc:
        ctx.add(
            pp.problem(
                "mig-layout-fit",
                ERROR,
                "mig_layout",
                dict(wanted),
                str(exc),
                f"use the profiles of {model.name}",
            )
        )
    except mig_placement.LayoutDoesNotFit as exc:
        reason, _sep, fix = exc.reason.partition(". Fix: ")
        ctx.add(
            pp.problem(
                "mig-layout-fit",
                ERROR,
                "mig_layout",
                dict(wanted),
                reason,
                fix or "ask for fewer or smaller instances",
            )
        )


# --- whole inventory --------------------------------------------------------------------


#: The way out for a GPU model with neither a built-in table nor reported profiles.
NO_TABLE_FIX = (
    "gather the node's GPU facts with their MIG profiles (preflight_gather_gpu_facts: "
    "true; module gpufleet.cluster.gpu_facts, mig_profiles: true, reads nvidia-smi mig "
    "-lgip/-lgipp), or add the GPU's nvidia-smi mig -lgip/-lgipp capture as a table in "
    "plugins/module_utils/mig/tables.py"
)


def _models(ctx: HostContext) -> list[tuple[str, Any, mprof.GpuModel | None, str, str]]:
    """GPU models of the host: (variable, value, model or None, error text, fix).
    ``gpu_model`` names a built-in table; one the tables lack is judged by the profiles
    the node reported (``mig.profiles`` of the gathered GPU facts) when there are some.
    Without ``gpu_model``, each gathered GPU name, with the profiles the node reported
    when it has them, else its built-in table."""
    name = text_of(ctx.settings, "gpu_model")
    if name:
        try:
            return [("gpu_model", name, mprof.model(name), "", "")]
        except mprof.UnknownGpuModel as exc:
            reported = [row for row in _gathered(ctx) if row[4] == "reported"]
            if reported:
                return [(*row[:4], NO_TABLE_FIX if row[2] is None else "") for row in reported]
            return [
                (
                    "gpu_model",
                    name,
                    None,
                    f"{exc}; and the node reported no MIG profiles (no gathered GPU facts "
                    "with mig_profiles)",
                    "set gpu_model to the GPU's NVML name (nvidia-smi --query-gpu=name) "
                    f"when it is a known model; else {NO_TABLE_FIX}",
                )
            ]
    return [(*row[:4], NO_TABLE_FIX if row[2] is None else "") for row in _gathered(ctx)]


def _gathered(ctx: HostContext) -> list[tuple[str, Any, mprof.GpuModel | None, str, str]]:
    """One row per gathered GPU name: (variable, name, model or None, error text, where
    the model comes from: ``reported`` or ``builtin``)."""
    out = []
    seen: set[str] = set()
    for gpu in ctx.gpus:
        gpu_name = str(gpu.get("name") or "")
        if not gpu_name or gpu_name in seen:
            continue
        seen.add(gpu_name)
        reported = gpu.get("mig_profiles")
        if reported:
            # What the node reports wins over the built-in tables, and plans a GPU they lack.
            try:
                node_model = mprof.model_from_facts(gpu_name, gpu.get("memory_mib"), reported)
            except mprof.LgipParseError as exc:
                out.append(("gpufleet_gpus", gpu_name, None, str(exc), "reported"))
            else:
                out.append(("gpufleet_gpus", gpu_name, node_model, "", "reported"))
            continue
        try:
            out.append(("gpufleet_gpus", gpu_name, mprof.model(gpu_name), "", "builtin"))
        except mprof.UnknownGpuModel as exc:
            out.append(
                (
                    "gpufleet_gpus",
                    gpu_name,
                    None,
                    f"{exc}; and the node reported no MIG profiles for it (gathered GPU "
                    "facts without mig_profiles: gather them with mig_profiles: true)",
                    "builtin",
                )
            )
    return sorted(out, key=lambda row: row[1])
