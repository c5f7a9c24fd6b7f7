# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Validation checks of the dynamic-MIG nodes: ``nodes.dynamic-mig-counters`` (each GPU
publishes its CounterSet, whose counters and whose devices' consumption agree with the
GPU model's MIG table) and ``nodes.dynamic-mig-leftover-gi`` (no GPU instance that no
allocated ResourceClaim owns).

A dynamic-MIG node is a node whose pool of the configured driver publishes a CounterSet:
NVIDIA's DRA driver with its ``DynamicMIG`` feature gate (role variable
``dra_driver_dynamic_mig``) and the lab's simulator with ``--dynamic-mig`` publish one
CounterSet ``gpu-<minor>-counter-set`` per MIG-capable GPU, the full GPU ``gpu-<minor>``
and every GI profile at every placement ``gpu-<minor>-mig-<profile>-<GI profile ID>-<start>``
(``claims.counters`` has the shape and the accounting; ``lab/gpu-simulator/kubelet-plugin/
internal/devices/dynamic.go`` derives it from the same tables).

What the table says (``mig.profiles.model`` of the device's ``productName``), as NVIDIA's
driver derives it (``cmd/gpu-kubelet-plugin/nvlib.go`` and ``partitions.go``): the
CounterSet holds, per capacity dimension, the largest value of all profiles that have a
placement (``multiprocessors``, ``copy-engines``, ``decoders``, ``encoders``,
``jpeg-engines``, ``ofa-engines``, ``memory`` in bytes: the profile's MiB * 2**20) and one
counter of value 1 per memory slice, as many as the largest placement size; the full GPU
consumes all of it; a MIG device consumes its profile's capacities and the memory slices
``[start, start + placement size)`` of its placement. A difference that rests on a table
value no cited source states (``GIProfile.derived``: ``sm``, ``gib``, ``engines``,
``placements``, ``id``) warns instead of failing: the table may be the one that is wrong.

GPU instances on the host come from the node's GPU facts (``gpu_facts``:
``gpufleet_gpus[].mig_devices[]`` with ``gi_id``, ``gi_profile``, ``gi_profile_id``,
``placement_start``/``placement_size``, read by ``host.gpu_facts`` from ``nvidia-smi -q
-x`` and ``nvidia-smi mig -lgi``); a GPU instance is owned when a ResourceClaim's
``status.allocation`` holds the MIG device of the same GPU (``parentUUID``), GI profile ID
and placement start. The facts list a GPU instance through its compute instances (the MIG
devices of ``nvidia-smi -q -x`` and ``mig -lci``): a GPU instance without any compute
instance (a create that stopped between ``-cgi`` and ``-cci``) is not seen. Facts and claims
are read a few seconds apart: a claim deleted in between, whose kubelet plugin has not yet
unprepared it, shows its GPU instance as a leftover until the plugin does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as ccounters
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pods as cpods
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import (
    MIB,
    Listing,
    Settings,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    device_fields,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    WARN,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = [
    "DynamicGpu",
    "compare_published_gpus",
    "counters_check",
    "dynamic_gpus",
    "dynamic_mig_checks",
    "expected_consumption",
    "expected_counters",
    "is_dynamic",
    "leftover_check",
]

COUNTERS_ID = "nodes.dynamic-mig-counters"
COUNTERS_TITLE = "counters published and consistent"
LEFTOVER_ID = "nodes.dynamic-mig-leftover-gi"
LEFTOVER_TITLE = "no leftover GPU instance"

#: Architectures that cannot toggle MIG mode without a GPU reset: NVIDIA's driver does not
#: publish their full GPU while MIG mode is on (``nvlib.go`` ``supportsMIGModeToggle``).
_NO_MIG_TOGGLE = ("ampere", "turing", "volta", "pascal", "maxwell", "kepler")
#: The field of a MIG table row (``GIProfile.derived``) each counter's expected value comes
#: from; a mismatch on a value no cited source states (derived) warns instead of failing.
_TAGS = {
    ccounters.MEMORY: "gib",
    ccounters.MULTIPROCESSORS: "sm",
    "copy-engines": "engines",
    "decoders": "engines",
    "encoders": "engines",
    "jpeg-engines": "engines",
    "ofa-engines": "engines",
}
#: What a warning of a derived value adds.
DERIVED = "the MIG table's value is derived, not sourced: compare nvidia-smi mig -lgip on the node"
_GPU_NAME = re.compile(r"^gpu-(\d+)$")
_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-[0-9a-z+.-]+?-(\d+)-(\d+)$")


@dataclass
class DynamicGpu:
    """One GPU of a dynamic-MIG pool: ``node``, ``pool``, ``minor`` (``gpu-<minor>``),
    ``product`` (``productName``), ``uuid`` (the full GPU's ``uuid`` or a MIG device's
    ``parentUUID``), ``counter_set`` (its ``gpu-<minor>-counter-set``, None when not
    published) and ``devices`` (its published devices)."""

    node: str
    pool: str
    minor: int
    product: str = ""
    uuid: str = ""
    counter_set: ccounters.CounterSet | None = None
    devices: list[cslices.Published] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"gpu-{self.minor}"

    @property
    def set_name(self) -> str:
        return f"{self.name}{ccounters.COUNTER_SET_SUFFIX}"


def _attr(device: Mapping[str, Any], name: str) -> str:
    """A device attribute's value as text (``""`` when absent, or when ``attributes`` is
    no object)."""
    body = device_fields(device)
    attributes = body.get("attributes")
    value = attributes.get(name) if isinstance(attributes, Mapping) else None
    if isinstance(value, Mapping) and value:
        value = next(iter(value.values()))
    return str(value) if value is not None else ""


def _minor(name: str) -> int | None:
    """The GPU minor of a device name of NVIDIA's shape, None for another name."""
    m = _GPU_NAME.match(name) or _MIG_NAME.match(name)
    return int(m.group(1)) if m else None


class _ConsumingPools:
    """The fold (``kube.client.PagedList.derive``) of the pools of ``driver`` that publish a
    device that consumes counters (read on the newest generation)."""

    def __init__(self, driver: str) -> None:
        self.driver = driver
        self.pools: set[str] = set()

    def add(self, s: Mapping[str, Any]) -> None:
        for pub in cslices.slice_devices(s):
            if pub.driver != self.driver or pub.pool in self.pools:
                return  # the devices of a slice are of one driver and pool
            if ccounters.consumption(pub.device):
                self.pools.add(pub.pool)
                return

    def result(self) -> set[str]:
        return self.pools


def _consuming_fold(driver: str) -> tuple[str, Callable[[], _ConsumingPools]]:
    return f"pools of {driver!r} consuming counters", lambda: _ConsumingPools(driver)


def slice_folds(listing: Listing, settings: Settings) -> dict[str, Callable[[], Any]]:
    """The folds of the slices ``dynamic_mig_checks`` reads, for a caller that walks the
    slices once for several checks (``validate.cluster.all_checks``)."""
    return cslices.latest_folds(listing.slices, dict([_consuming_fold(settings.driver)]))


def dynamic_gpus(
    listing: Listing, driver: str, sets: Mapping[str, ccounters.CounterSet]
) -> dict[str, list[DynamicGpu]]:
    """Node -> the GPUs of its dynamic-MIG pools of ``driver`` (pools that publish a
    CounterSet or a device that consumes counters; ``sets``:
    ``claims.counters.counter_sets``), by minor."""
    mine = [cs for cs in sets.values() if cs.driver == driver]
    # two walks of the slices, keeping only the devices of dynamic-MIG pools: a list of
    # every published device would hold all of a fleet's devices (160,000 at 10,000 nodes)
    pools = {cs.pool for cs in mine}
    folds = cslices.latest_folds(listing.slices, dict([_consuming_fold(driver)]))
    pools |= vk.folded(listing.slices, folds)[0]
    gpus: dict[tuple[str, str, int], DynamicGpu] = {}
    for pub in cslices.iter_published_devices(listing.slices) if pools else ():
        minor = _minor(pub.name)
        if pub.driver != driver or pub.pool not in pools or minor is None:
            continue
        gpu = gpus.setdefault((pub.node, pub.pool, minor), DynamicGpu(pub.node, pub.pool, minor))
        gpu.devices.append(pub)
        gpu.product = gpu.product or _attr(pub.device, "productName")
        gpu.uuid = gpu.uuid or _attr(pub.device, "uuid") or _attr(pub.device, "parentUUID")
    for cs in mine:
        minor = _minor(cs.gpu)
        if minor is not None:
            gpus.setdefault((cs.node, cs.pool, minor), DynamicGpu(cs.node, cs.pool, minor))
    out: dict[str, list[DynamicGpu]] = {}
    for _key, gpu in sorted(gpus.items()):
        gpu.counter_set = sets.get(f"{driver}/{gpu.pool}/{gpu.set_name}")
        out.setdefault(gpu.node, []).append(gpu)
    return out


def _capacities(p: mprof.GIProfile) -> dict[str, Fraction]:
    """The counters of a profile's capacity (memory in bytes), named as NVIDIA's driver
    names them (capacity name as a DNS label)."""
    return {
        ccounters.MULTIPROCESSORS: Fraction(p.multiprocessors),
        "copy-engines": Fraction(p.copy_engines),
        "decoders": Fraction(p.decoders),
        "encoders": Fraction(p.encoders),
        "jpeg-engines": Fraction(p.jpeg_engines),
        "ofa-engines": Fraction(p.ofa_engines),
        ccounters.MEMORY: Fraction(p.memory_mib) * MIB,
    }


def _with_slices(counters: dict[str, Fraction], start: int, size: int) -> dict[str, Fraction]:
    return {**counters, **{f"memory-slice-{i}": Fraction(1) for i in range(start, start + size)}}


def expected_counters(model: mprof.GpuModel) -> dict[str, Fraction]:
    """The counters of a GPU's CounterSet as NVIDIA's driver derives them from the MIG
    table of ``model`` (``nvlib.go``: per dimension the largest of every profile with a
    placement; memory slices as many as the largest placement size); empty for a model
    without profiles."""
    top: dict[str, Fraction] = {}
    size = 0
    for p in model.profiles:
        if not p.placements:
            continue
        size = max(size, p.placement_size)
        for counter, value in _capacities(p).items():
            top[counter] = max(top.get(counter, value), value)
    return _with_slices(top, 0, size) if top else {}


def expected_consumption(p: mprof.GIProfile, start: int) -> dict[str, Fraction]:
    """What the MIG device of profile ``p`` at placement ``start`` consumes from its GPU's
    CounterSet (``partitions.go`` ``MigSpec.PartConsumesCounters``)."""
    return _with_slices(_capacities(p), start, p.placement_size)


def _amount(counter: str, value: Fraction | None) -> str:
    return "not published" if value is None else ccounters.format_amount(counter, value)


def _tag(counter: str) -> str:
    """The table field a counter's expected value comes from."""
    return "placements" if ccounters.memory_slice(counter) is not None else _TAGS.get(counter, "")


def _differences(
    have: Mapping[str, Fraction], want: Mapping[str, Fraction], derived: Sequence[str] = ()
) -> list[tuple[str, bool]]:
    """``(counter is X, expected Y, derived)`` for each counter where ``have`` differs from
    ``want``; ``derived``: the table fields (``GIProfile.derived``) no source states."""
    out = []
    for counter in sorted({*have, *want}, key=ccounters.counter_order):
        h, w = have.get(counter), want.get(counter)
        if h != w:
            text = f"{counter} is {_amount(counter, h)}, expected " + (
                "none" if w is None else ccounters.format_amount(counter, w)
            )
            out.append((text, _tag(counter) in derived))
    return out


def _status(diffs: Sequence[tuple[str, bool]]) -> tuple[str, str]:
    """FAIL unless every difference rests on a derived table value (then WARN and why)."""
    if all(d for _text, d in diffs):
        return WARN, f"; {DERIVED}"
    return FAIL, ""


def _model(gpu: DynamicGpu) -> tuple[mprof.GpuModel | None, str]:
    """The MIG table of the GPU's product, or None and why not."""
    try:
        model = mprof.model(gpu.product)
    except mprof.UnknownGpuModel:
        return None, f"product {gpu.product or '(no productName)'!r} has no MIG table"
    if not model.profiles:
        return None, f"{model.name} has no sourced MIG profile table"
    return model, ""


def _derived(model: mprof.GpuModel) -> tuple[str, ...]:
    """The table fields that some profile with a placement has derived."""
    return tuple(sorted({t for p in model.profiles if p.placements for t in p.derived}))


def _device_want(
    model: mprof.GpuModel, pub: cslices.Published, full: Mapping[str, Fraction]
) -> tuple[dict[str, Fraction] | None, str, tuple[str, ...]]:
    """What device ``pub`` should consume by the table (None and why when the table has
    no such profile or placement), a label of its profile and placement, and the table
    fields behind it that no source states (``GIProfile.derived``)."""
    if _GPU_NAME.match(pub.name):
        return dict(full), "the full GPU", _derived(model)
    m = _MIG_NAME.match(pub.name)
    if m is None:
        return None, "the name is not gpu-<minor>-mig-<profile>-<GI profile ID>-<start>", ()
    pid, start = int(m.group(2)), int(m.group(3))
    derived_ids = _derived(model) if "id" in _derived(model) else ()
    try:
        p = model.profile(pid)
    except mprof.UnknownProfile:
        return None, f"GI profile ID {pid} is not in the MIG table of {model.name}", derived_ids
    if start not in p.placements:
        why = (
            f"placement {start} is not one of {p.name}'s in the MIG table of {model.name} "
            f"({', '.join(map(str, p.placements))})"
        )
        return None, why, ("placements",) if "placements" in p.derived else ()
    if _attr(pub.device, "profile") != p.name:
        why = (
            f"attribute profile is {_attr(pub.device, 'profile')!r}, GI profile ID {pid} is "
            f"{p.name} in the MIG table of {model.name}"
        )
        return None, why, ("id",) if "id" in p.derived else ()
    label = f"{p.name} at placement {start}:{p.placement_size}"
    return expected_consumption(p, start), label, p.derived


def _judge_gpu(c: Check, gpu: DynamicGpu) -> None:
    """Problems on ``c`` for one GPU: its CounterSet and every device's consumption."""
    model, why = _model(gpu)
    label = f"GPU {gpu.name} ({gpu.product or 'unknown product'})"
    if model is None:
        c.problem(gpu.node, WARN, f"{label}: {why}; its counters were not compared")
        return
    cs = gpu.counter_set
    if cs is None:
        c.problem(
            gpu.node, FAIL, f"{label}: CounterSet {gpu.set_name} is not published in pool "
            f"{gpu.pool}, though its devices are"
        )  # fmt: skip
        return
    full = expected_counters(model)
    for counter in cs.unreadable:
        c.problem(gpu.node, FAIL, f"{label}: counter {counter} of {cs.name} is no quantity")
    # the memory slice count is the largest placement size, which the tables state
    sourced_slices = tuple(t for t in _derived(model) if t != "placements")
    for text, derived in _differences(cs.capacity, full, sourced_slices):
        counter, rest = text.split(" is ", 1)
        c.problem(
            gpu.node,
            WARN if derived else FAIL,
            f"{label}: counter {counter} of {cs.name} is {rest} (MIG table of {model.name})"
            + (f"; {DERIVED}" if derived else ""),
        )
    for pub in gpu.devices:
        _judge_device(c, gpu, cs, pub, model, full)


def _judge_device(
    c: Check,
    gpu: DynamicGpu,
    cs: ccounters.CounterSet,
    pub: cslices.Published,
    model: mprof.GpuModel,
    full: Mapping[str, Fraction],
) -> None:
    """A problem on ``c`` when device ``pub`` consumes other counters than the table says."""
    label = f"GPU {gpu.name} ({gpu.product})"
    want, what, derived = _device_want(model, pub, full)
    if want is None:
        status, why = _status([("", bool(derived))])
        c.problem(gpu.node, status, f"{label}: device {pub.name}: {what}{why}")
        return
    used = ccounters.consumption(pub.device)
    diffs = _differences(used.get(cs.name, {}), want, derived)
    diffs += [(f"consumes from CounterSet {o}, not its GPU's", False) for o in sorted(used)
              if o != cs.name]  # fmt: skip
    if diffs:
        status, why = _status(diffs)
        c.problem(
            gpu.node,
            status,
            f"{label}: device {pub.name} ({what}) consumes from {cs.name}: "
            + "; ".join(text for text, _d in diffs)
            + why,
        )


def counters_check(
    listing: Listing, settings: Settings, gpus: Mapping[str, Sequence[DynamicGpu]]
) -> Check:
    """``nodes.dynamic-mig-counters`` over ``gpus`` (``dynamic_gpus``)."""
    n_gpus = sum(len(g) for g in gpus.values())
    c = Check(
        COUNTERS_ID,
        COUNTERS_TITLE,
        evidence=[
            Evidence(
                listing.src("resourceslices"),
                f"{n_gpus} GPU(s) of driver {settings.driver} with dynamic MIG (CounterSets "
                f"published) on {len(gpus)} node(s)",
            ),
            Evidence("mig.profiles (the collection's MIG tables)", "expected counters"),
        ],
    )
    if "resourceslices" in listing.errors:
        return skipped(
            c.id, c.title, f"ResourceSlices could not be listed: {listing.errors['resourceslices']}"
        )
    if not gpus:
        return skipped(c.id, c.title, "no node publishes dynamic MIG devices (no CounterSet)")
    for node in sorted(gpus):
        for gpu in gpus[node]:
            _judge_gpu(c, gpu)
    c.fix = (
        "restart the kubelet plugin on the node so it republishes (kubectl delete pod of the "
        "plugin there); if it publishes the same, its driver's MIG table differs from the "
        "collection's: compare nvidia-smi mig -lgip and -lgipp on the node with "
        "gpufleet mig models"
    )
    return finish(c, f"{n_gpus} GPU(s) on {len(gpus)} node(s) publish counters as their MIG table")


def _owned(
    listing: Listing, gpus: Mapping[str, Sequence[DynamicGpu]]
) -> dict[tuple[str, int, int], list[str]]:
    """(GPU UUID, GI profile ID, placement start) -> the claims whose allocation holds the
    MIG device there, for the MIG devices of ``gpus``."""
    where: dict[str, tuple[str, int, int]] = {}
    for node_gpus in gpus.values():
        for gpu in node_gpus:
            for pub in gpu.devices:
                m = _MIG_NAME.match(pub.name)
                if m and gpu.uuid:
                    where[pub.id] = (gpu.uuid, int(m.group(2)), int(m.group(3)))
    owned: dict[tuple[str, int, int], list[str]] = {}
    for claim in listing.claims:
        for device_id in cslices.allocated_devices(claim):
            if device_id in where:
                owned.setdefault(where[device_id], []).append(cpods.key(claim))
    return owned


def _instances(g: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The GPU instances of one GPU of the facts: its MIG devices, one per GI ID."""
    seen: dict[Any, Mapping[str, Any]] = {}
    for md in g.get("mig_devices") or []:
        if isinstance(md, Mapping):
            seen.setdefault(md.get("gi_id"), md)
    return list(seen.values())


def _profile_id(g: Mapping[str, Any], md: Mapping[str, Any]) -> int | None:
    """The GI profile ID of a GPU instance: the facts' ``gi_profile_id``, else the one
    the MIG table gives its ``gi_profile``."""
    if isinstance(md.get("gi_profile_id"), int):
        return md["gi_profile_id"]
    try:
        return mprof.model(str(g.get("name"))).profile(str(md.get("gi_profile"))).profile_id
    except (mprof.UnknownGpuModel, mprof.UnknownProfile):
        return None


def _judge_host(
    c: Check, node: str, facts: Mapping[str, Any], uuids: set[str], owned: Mapping
) -> int:
    """Problems on ``c`` for the GPU instances of ``node``'s dynamic-MIG GPUs (``uuids``)
    that no claim owns; returns the GPU instances read."""
    read = 0
    for g in facts.get("gpufleet_gpus") or []:
        if not isinstance(g, Mapping) or g.get("uuid") not in uuids:
            continue
        label = f"GPU {g.get('index')} ({g.get('uuid')}, {g.get('name')})"
        for md in _instances(g):
            read += 1
            gi, pid, start = md.get("gi_id"), _profile_id(g, md), md.get("placement_start")
            what = f"GPU instance {gi} ({md.get('gi_profile') or 'profile unknown'}"
            if pid is None or not isinstance(start, int):
                c.problem(
                    node, WARN, f"{label}: {what}): its GI profile ID or placement is unknown "
                    "(nvidia-smi mig -lgi gave none), so its owner cannot be told"
                )  # fmt: skip
                continue
            if (g["uuid"], pid, start) in owned:
                continue
            c.problem(
                node,
                FAIL,
                f"{label}: {what}, GI profile ID {pid}, placement {start}:"
                f"{md.get('placement_size')}) is owned by no allocated ResourceClaim; after "
                f"checking that no pod uses it: nvidia-smi mig -i {g.get('index')} -gi {gi} "
                f"-dci && nvidia-smi mig -i {g.get('index')} -gi {gi} -dgi",
            )
    return read


def leftover_check(
    listing: Listing, settings: Settings, gpus: Mapping[str, Sequence[DynamicGpu]]
) -> Check:
    """``nodes.dynamic-mig-leftover-gi`` over ``gpus`` (``dynamic_gpus``) and the nodes'
    GPU facts."""
    c = Check(LEFTOVER_ID, LEFTOVER_TITLE, evidence=[])
    for kind in ("resourceslices", "resourceclaims"):
        if kind in listing.errors:
            return skipped(c.id, c.title, f"{kind} could not be listed: {listing.errors[kind]}")
    if not gpus:
        return skipped(c.id, c.title, "no node publishes dynamic MIG devices (no CounterSet)")
    owned = _owned(listing, gpus)
    compared, read = [], 0
    for node in sorted(gpus):
        facts = settings.gpu_facts.get(node) or {}
        if not facts.get("gpufleet_gpus"):
            continue
        compared.append(node)
        uuids = {g.uuid for g in gpus[node] if g.uuid}
        read += _judge_host(c, node, facts, uuids, owned)
    c.evidence = [
        Evidence(
            listing.src("resourceclaims"),
            f"{sum(map(len, owned.values()))} allocation(s) of a dynamic MIG device",
        ),
        Evidence(
            "gpu_facts (gpufleet_gpus[].mig_devices: nvidia-smi -q -x, mig -lgi) per node",
            f"{read} GPU instance(s) on {len(compared)} of {len(gpus)} dynamic-MIG node(s)",
        ),
    ]
    if not compared:
        return skipped(c.id, c.title, "no dynamic-MIG node gave GPU facts (gpu_facts)", c.evidence)
    c.fix = (
        "on the node, check that no process runs on the GPU instance (nvidia-smi; the MIG "
        "device's UUID in the pods' CDI devices), then destroy its compute instances and it: "
        "nvidia-smi mig -i GPU -gi GI -dci, then nvidia-smi mig -i GPU -gi GI -dgi"
    )
    return finish(
        c, f"every GPU instance on {len(compared)} dynamic-MIG node(s) is owned by a claim"
    )


def is_dynamic(devices: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a node's devices are of the dynamic-MIG shape (one consumes counters)."""
    return any(ccounters.consumption(d) for d in devices)


def compare_published_gpus(
    c: Check, node: str, devices: Sequence[Mapping[str, Any]], facts: Mapping[str, Any]
) -> None:
    """``nodes.resourceslices`` on a dynamic-MIG node: every GPU of the host's facts is
    published as a full GPU (``uuid``, ``productName``), except a GPU that cannot toggle MIG
    mode without a reset (before Hopper) whose MIG mode is on; no full GPU or MIG device
    (``parentUUID``) names a GPU the host lacks. MIG devices are placements the scheduler
    may pick, not the host's MIG devices: they are not compared with ``mig_devices``."""
    gpus = {
        str(g.get("uuid")): g for g in facts.get("gpufleet_gpus") or [] if isinstance(g, Mapping)
    }
    whole = {_attr(d, "uuid"): d for d in devices if _attr(d, "type") == "gpu"}
    for uuid, g in gpus.items():
        label = f"GPU {g.get('index')} {uuid}"
        d = whole.pop(uuid, None)
        if d is None:
            toggles = str(g.get("architecture") or "").lower() not in _NO_MIG_TOGGLE
            if g.get("mig_mode_current") != "Enabled" or toggles:
                c.problem(node, FAIL, f"{label} is not published (nvidia-smi shows it)")
            continue
        if _attr(d, "productName") != str(g.get("name")):
            c.problem(
                node,
                FAIL,
                f"{label} ({d.get('name')}): productName is {_attr(d, 'productName')}, the "
                f"host says {g.get('name')}",
            )
    for uuid, d in whole.items():
        c.problem(
            node, FAIL, f"device {d.get('name')} ({uuid}) is published but the host has no "
            "such GPU"
        )  # fmt: skip
    parents = {_attr(d, "parentUUID") for d in devices if _attr(d, "type") == "mig"}
    for parent in sorted(parents - set(gpus)):
        c.problem(
            node, FAIL, f"MIG devices of GPU {parent} are published but the host has no such GPU"
        )


def dynamic_mig_checks(
    listing: Listing,
    settings: Settings,
    sets: Mapping[str, ccounters.CounterSet] | None = None,
) -> list[Check]:
    """Both checks, from one accounting of the CounterSets (``claims.counters``):
    ``sets`` when the caller has it."""
    if sets is None:
        sets = ccounters.counter_sets(listing.slices, listing.claims)
    gpus = dynamic_gpus(listing, settings.driver, sets)
    return [counters_check(listing, settings, gpus), leftover_check(listing, settings, gpus)]
