# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Preflight rule on Kueue quotas (``site_kueue: true``): the teams' quotas against the
devices the inventory's MIG layouts publish (``kueue.checks.check_quotas``).

Inventory-wide: the ``kueue_*`` variables are read from the first host (sorted) that turns
Kueue on; the fleet is every host of the GPU group (``gpu_node_labels_group``), each with
its GPUs (gathered GPU facts when preflight gathers them, else ``kueue_node_gpu_count``)
and its layout (``mig_layout`` on the GPUs of ``mig_devices``, or ``mig_config_name`` of
its mig-parted config; a layout that does not read is left to the MIG rule and its host
counted as whole GPUs).

A host with ``dra_driver_dynamic_mig: true`` has no layout: its driver publishes each GPU
whole and every MIG profile at every placement, alternatives on one GPU. Each GPU counts
as 1 whole GPU plus, per MIG profile of its ``gpu_model``, ``GIProfile.max_instances``
devices (the most at once), and ``mig.nvidia.com`` as the largest of those. Without a
profile table for its ``gpu_model`` (unset or unknown) its MIG devices are unknown: quotas
on MIG classes are not judged, and one warning per ``gpu_model`` value says so when a team
or ``kueue_profile_classes`` asks for MIG devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import checks as kc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mp
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import (
    ERROR,
    WARNING,
    Problem,
    as_bool,
    text_of,
)

_SEVERITY = {kc.ERROR: ERROR, kc.WARNING: WARNING}
#: GPUs one node may have by ``kueue_node_gpu_count``: the largest GPU servers of 2026
#: hold 16 (NVIDIA HGX-2 / DGX-2 class; HGX B200/B300 and GB200 trays hold 8 or 4), PCIe
#: chassis up to 20; 32 leaves room. A larger count is a typo (``1e9`` would make preflight
#: count a billion GPUs per node).
MAX_NODE_GPUS = 32
DEFAULT_NODE_GPUS = 8


def node_gpu_count(settings: Mapping[str, Any]) -> tuple[int, Problem | None]:
    """``kueue_node_gpu_count`` (default 8) and None, or the default and the problem that
    refuses it: not a whole number (a bool, a float such as ``1e9``, text), below 1 or
    above ``MAX_NODE_GPUS``."""
    value = settings.get("kueue_node_gpu_count", DEFAULT_NODE_GPUS)
    number = value
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) < 10:
        number = int(value.strip())
    if isinstance(number, bool) or not isinstance(number, int):
        why = f"is a {type(value).__name__}, not a whole number of GPUs"
    elif not 1 <= number <= MAX_NODE_GPUS:
        why = f"is outside 1 to {MAX_NODE_GPUS} (no GPU server holds more than {MAX_NODE_GPUS})"
    else:
        return number, None
    return DEFAULT_NODE_GPUS, pp.problem(
        "kueue-input",
        ERROR,
        "kueue_node_gpu_count",
        value if not isinstance(value, str) else value[:40],
        why,
        f"write the GPUs of one node, 1 to {MAX_NODE_GPUS}, e.g. kueue_node_gpu_count: 8",
    )


def _bool(settings: Mapping[str, Any], name: str) -> bool:
    """The boolean ``name``; a value that is not one counts as false (the rule that reads
    that variable reports it)."""
    try:
        return as_bool(settings, name)
    except pp.BadValue:
        return False


def _device_ids(settings: Mapping[str, Any]) -> tuple[str | None, ...]:
    """The PCI device IDs a mig-parted ``device-filter`` may name for the host's
    ``gpu_model`` (``mig.profiles``); (None,) when the model is not set or not known."""
    try:
        return mprof.model(text_of(settings, "gpu_model")).pci_device_ids or (None,)
    except (mprof.UnknownGpuModel, ValueError):
        return (None,)


def _dynamic(settings: Mapping[str, Any]) -> dict[str, int] | None:
    """For a host whose DRA driver runs ``DynamicMIG`` (``dra_driver_dynamic_mig``), the
    most instances at once of each MIG profile of its ``gpu_model`` (``mig.profiles``),
    empty when the model is unset, unknown or has no profile table; None for any other
    host. Raises pp.BadValue when ``dra_driver_dynamic_mig`` is not a boolean: which
    devices the host publishes is then unknown."""
    if not as_bool(settings, "dra_driver_dynamic_mig"):
        return None
    try:
        gpu = mprof.model(text_of(settings, "gpu_model"))
    except (mprof.UnknownGpuModel, ValueError):
        return {}
    return {p.name: p.max_instances for p in gpu.profiles}


def _asks_mig(teams: list[kq.Team], profiles: list[Any]) -> bool:
    """Whether ``kueue_profile_classes`` names a profile or a team quotas
    ``mig.nvidia.com``."""
    return bool(profiles) or any(q.resource == ddc.MIG_CLASS for t in teams for q in t.quotas)


def _unknown_model_problems(unknown: Mapping[str, list[str]]) -> list[Problem]:
    """One warning per ``gpu_model`` value (``unknown``: value -> hosts) of dynamic-MIG
    hosts whose MIG devices preflight cannot count."""
    out = []
    for value, names in sorted(unknown.items()):
        out.append(
            pp.problem(
                "kueue-quota",
                WARNING,
                "gpu_model",
                value or None,
                f"dynamic-MIG host(s) {', '.join(names)} (dra_driver_dynamic_mig: true) have "
                + (
                    f"gpu_model {value[:60]!r}{'...' if len(value) > 60 else ''}, which has no "
                    "MIG profile table"
                    if value
                    else "no gpu_model"
                )
                + ": the MIG devices they publish at once are unknown, so quotas on "
                f"{ddc.MIG_CLASS} and per-profile classes are not checked",
                "set gpu_model to a model with a built-in MIG table, e.g. gpu_model: "
                '"NVIDIA H200" (gpufleet mig models lists them)',
            )
        )
    return out


def _layouts(settings: Mapping[str, Any], gpu_count: int, text: str) -> dict[int, dict]:
    if "mig_enabled" in settings and not _bool(settings, "mig_enabled"):
        return {}
    layout = settings.get("mig_layout") or {}
    indices = list(range(gpu_count))
    try:
        if layout:
            wanted = mp.parse_layout(layout, name="mig_layout")
            devices = settings.get("mig_devices", "all")
            chosen = indices if devices in ("all", None, "") else [int(d) for d in devices]
            return {i: dict(wanted) for i in chosen if i in indices}
        name = text_of(settings, "mig_config_name")
        config = settings.get("mig_config") or text
        if name and config:
            parsed = mcfg.load_mig_config(config)
    except (ValueError, TypeError):
        return {}
    if not (name and config):
        return {}
    for device_id in _device_ids(settings):  # the entries whose device-filter the GPU matches
        try:
            return mcfg.select_layout(parsed, name, indices, device_id)
        except (ValueError, TypeError):
            continue
    return {}


def kueue_problems(hosts: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """Findings of the Kueue quota rule over the inventory (``hosts`` as
    ``preflight.check_inventory`` takes them); [] when no host sets ``site_kueue``."""
    settings_of = {h: pp.settings_for(dict((hosts[h] or {}).get("variables") or {})) for h in hosts}
    on = [h for h in sorted(hosts) if _bool(settings_of[h], "site_kueue")]
    if not on:
        return []
    cluster = settings_of[on[0]]
    try:
        teams = kq.parse_teams(cluster.get("kueue_teams") or [])
        profiles = list(cluster.get("kueue_profile_classes") or [])
        for p in profiles:
            kq.profile_device_class(p)
    except kq.KueueInputError as exc:
        return [pp.problem("kueue-input", ERROR, exc.variable, exc.value, exc.problem, exc.fix)]
    per_host = []
    unknown: dict[str, list[str]] = {}
    refused: list[Problem] = []
    for host in sorted(hosts):
        data = hosts[host] or {}
        s = settings_of[host]
        group = text_of(s, "gpu_node_labels_group") or "gpu_nodes"
        if group not in (data.get("groups") or []):
            continue
        gathered = data.get("gpus") or []
        count, problem = node_gpu_count(s)
        if problem and problem not in refused:
            refused.append(problem)
        count = len(gathered) if isinstance(gathered, list) and gathered else count
        try:
            dynamic = _dynamic(s)
        except pp.BadValue as exc:  # neither mode can be assumed: no quota is judged
            if exc.problem not in refused:
                refused.append(exc.problem)
            continue
        if dynamic is None:
            layouts = _layouts(s, count, str(data.get("mig_config_file_text") or ""))
            per_host.append(kc.host_devices(count, layouts))
            continue
        if not dynamic:
            unknown.setdefault(text_of(s, "gpu_model"), []).append(host)
        per_host.append(kc.host_devices(count, {}, dynamic))
    if refused:
        return refused
    fleet = kc.fleet_devices(per_host)
    classes = list(cluster.get("kueue_device_classes") or [*ddc.GPU_DEVICE_CLASSES])
    out = _unknown_model_problems(unknown) if _asks_mig(teams, profiles) else []
    for severity, variable, value, message, fix in kc.check_quotas(teams, fleet, classes, profiles):
        out.append(pp.problem("kueue-quota", _SEVERITY[severity], variable, value, message, fix))
    return out
