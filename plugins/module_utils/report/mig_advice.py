# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""MIG re-carving advisor: the MIG layouts per GPU that would serve the most pending MIG
claims with the fewest GPUs re-carved, and the running claims each change would disturb.

Pure functions over the listing ``gpufleet report`` reads (ResourceSlices,
ResourceClaims, Pods, Nodes as the API returns them); no I/O.

Facts and their sources:

- GPUs and their GPU instances come from the devices of driver ``gpu.nvidia.com`` as
  NVIDIA's DRA driver publishes them (and the GPU simulator, shaped after it): a whole
  GPU is ``gpu-<minor>`` (attribute ``type`` ``gpu``, ``uuid``); a MIG device is
  ``gpu-<minor>-mig-<profile without dots>-<GI profile ID>-<placement start>`` with
  attributes ``type`` ``mig``, ``parentUUID``, ``profile`` and one capacity
  ``memorySlice<N>`` per memory slice it occupies (placement start and size; the name's
  start when the capacities are absent). The GPU index is the device name's minor.
  A MIG-enabled GPU without MIG devices publishes nothing and is not seen. A GPU whose
  devices consume shared counters (NVIDIA's dynamic MIG, ``claims.counters``) is skipped:
  there every placement is published and the scheduler carves at allocation, so there is
  no layout to re-carve (``report.fleet``'s ``gpus`` says what is free and stranded).
  Such a GPU gets ``dynamic`` advice instead (``claims.counter_moves``): the largest
  profile that fits now, the claims whose placements block each larger profile, the
  fewest claims to move for the largest profile a pending claim asks for there (else the
  GPU's largest), and per node the GPU cheapest to drain (``drain``).
- Allocated: a claim's ``status.allocation`` names the device (``report.fleet``).
- Pending claims and the shapes of their requests: ``report.fleet.pending_claims`` and
  ``report.fleet.request_shapes`` (DeviceClass ``mig.nvidia.com`` plus CEL equality on
  ``profile`` and ``productName``). A request is served by the first of its alternatives
  that names a MIG profile; a claim none of whose alternatives does is not considered.
- Placements, instance limits and the engine budgets (CE, NVDEC, NVENC, JPEG, OFA): the
  MIG planner (``mig.planner.plan`` on the built-in table of the GPU model,
  ``mig.profiles.model``).

Search (greedy, bounded): claims that idle MIG devices of one node already serve are set
aside. Then, round by round, every GPU (GPUs of the same model and the same instances are
evaluated once) gets its best layout for the claims still waiting: claims are added one
at a time (in name order) while the planner still places the layout; the GPU's allocated
GPU instances stay at their placements (``keep``), or, with ``allow_disturb``, the
layout may drop them (``disturb``); free GPU instances are kept where they still fit. The
change chosen is the one of the lowest tier (``idle``: nothing allocated on the GPU,
then ``keep``, then ``disturb``) that serves the most claims, then disturbs the fewest,
then destroys the fewest GPU instances; until every claim is served, no GPU serves one
more, or ``max_gpus`` GPUs are changed. A claim is served by one GPU that holds all the
MIG devices it asks for.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counter_moves as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as ccounters
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import explain as cexplain
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pending as cpending
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pods as cpods
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    device_fields,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    NVIDIA_DRIVER,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mpl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.placement import (
    GpuInstance,
    LayoutDoesNotFit,
    Plan,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr

__all__ = [
    "DISTURB",
    "IDLE",
    "KEEP",
    "PROPOSAL_KIND",
    "Demand",
    "Gpu",
    "Instance",
    "advise",
    "demands_of",
    "disturbed_by",
    "dynamic_advice",
    "gpus_of",
    "host_vars",
    "stale_reasons",
]

#: ``kind`` of a proposal document (``gpufleet mig advise --json``).
PROPOSAL_KIND = "gpufleet-mig-proposal"
#: Tiers of a change, preferred first.
IDLE, KEEP, DISTURB = "idle", "keep", "disturb"
_TIERS = (IDLE, KEEP, DISTURB)
#: mig-configs entry name of a node whose GPUs get different layouts.
CONFIG_NAME = "gpufleet-proposal"

_WHOLE_NAME = re.compile(r"^gpu-(\d+)$")
_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-[0-9a-z+.-]+?-(\d+)-(\d+)$")
_SLICE_KEY = re.compile(rf"^(?:{re.escape(NVIDIA_DRIVER)}/)?memorySlice(\d+)$")


@dataclass(frozen=True, slots=True)
class Instance:
    """One published GPU instance: MIG ``profile``, GI ``profile_id``, placement
    ``start``/``size`` (memory slices), ``devices`` (``driver/pool/device``) and
    ``claims`` (``namespace/name`` of the claims allocated one of them)."""

    profile: str
    profile_id: int
    start: int
    size: int
    devices: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()
    promised: tuple[str, ...] = ()

    @property
    def held(self) -> bool:
        """Allocated, or promised to a pending claim that it already serves."""
        return bool(self.claims or self.promised)

    @property
    def place(self) -> tuple[str, int, int]:
        return (self.profile, self.start, self.size)

    def gi(self) -> GpuInstance:
        return GpuInstance(self.profile, self.profile_id, self.start, self.size)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "profile_id": self.profile_id,
            "start": self.start,
            "size": self.size,
            "claims": list(self.claims),
        }


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as its node publishes it: ``node``, ``index`` (device name minor),
    ``uuid``, ``model`` (productName), ``mig`` (published as MIG devices), its
    ``instances`` (by start) or, when whole, ``claim`` (the claim allocated it)."""

    node: str
    index: int
    uuid: str
    model: str
    mig: bool
    instances: tuple[Instance, ...] = ()
    claim: str | None = None
    device: str = ""

    @property
    def held(self) -> bool:
        return self.claim is not None or any(i.held for i in self.instances)

    @property
    def claims(self) -> tuple[str, ...]:
        found = [c for i in self.instances for c in i.claims]
        return tuple(dict.fromkeys(found + ([self.claim] if self.claim else [])))

    @property
    def layout(self) -> dict[str, int]:
        return dict(sorted(Counter(i.profile for i in self.instances).items()))

    def signature(self) -> tuple:
        """What the search sees of a GPU: identical GPUs get identical layouts."""
        return (
            self.model,
            self.mig,
            self.claim is not None,
            tuple((i.place, bool(i.claims), bool(i.promised)) for i in self.instances),
        )

    def current(self) -> dict[str, Any]:
        return {
            "mig_enabled": self.mig,
            "layout": self.layout,
            "placements": [i.to_dict() for i in self.instances],
            "claim": self.claim,
        }


@dataclass(frozen=True)
class Demand:
    """A pending claim a MIG layout can serve: ``claim``, ``profiles`` (sorted (MIG
    profile, count) pairs), ``model`` (productName it must have, None: any), ``users``
    (live pods that reference it)."""

    claim: str
    profiles: tuple[tuple[str, int], ...]
    model: str | None = None
    users: tuple[str, ...] = ()


@dataclass
class Advice:
    """The proposal as data (``to_dict`` is the JSON document)."""

    changes: list[dict[str, Any]] = field(default_factory=list)
    servable_now: list[dict[str, Any]] = field(default_factory=list)
    unserved: list[dict[str, Any]] = field(default_factory=list)
    not_considered: list[dict[str, Any]] = field(default_factory=list)
    gpus_skipped: list[dict[str, Any]] = field(default_factory=list)
    dynamic: list[dict[str, Any]] = field(default_factory=list)
    drain: list[dict[str, Any]] = field(default_factory=list)
    gpus_seen: int = 0
    pending_mig: int = 0

    def to_dict(self) -> dict[str, Any]:
        served = sum(len(c["serves"]) for c in self.changes)
        disturbed = {d["claim"] for c in self.changes for d in c["disturbs"]}
        return {
            "kind": PROPOSAL_KIND,
            "version": 1,
            "summary": {
                "gpus_seen": self.gpus_seen,
                "pending_claims": self.pending_mig + len(self.not_considered),
                "pending_mig": self.pending_mig,
                "servable_now": len(self.servable_now),
                "served": served,
                "unserved": len(self.unserved),
                "not_considered": len(self.not_considered),
                "gpus_changed": len(self.changes),
                "claims_disturbed": len(disturbed),
                "gpus_dynamic": len(self.dynamic),
            },
            "changes": self.changes,
            "servable_now": self.servable_now,
            "unserved": self.unserved,
            "not_considered": self.not_considered,
            "gpus_skipped": self.gpus_skipped,
            "dynamic": self.dynamic,
            "drain": self.drain,
        }


# ------------------------------------------------------------------ GPUs from slices


def _attr(device: Mapping[str, Any], name: str) -> Any:
    return fr._value(device, "attributes", name)


def _slices(device: Mapping[str, Any]) -> list[int]:
    body = device_fields(device)
    out = []
    for k in body.get("capacity") or {}:
        m = _SLICE_KEY.match(str(k))
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def _dynamic(
    pub: cslices.Published, seen: set[tuple[str, str]], skipped: list[dict[str, Any]]
) -> bool:
    """Whether ``pub`` consumes shared counters (dynamic MIG); the first device of each
    CounterSet adds its GPU to ``skipped``."""
    used = ccounters.consumption(pub.device)
    for set_name in used:
        if (pub.node, set_name) not in seen:
            seen.add((pub.node, set_name))
            skipped.append(
                {
                    "node": pub.node,
                    "device": set_name.removesuffix(ccounters.COUNTER_SET_SUFFIX),
                    "reason": "dynamic MIG (shared counters): every placement is published and "
                    "carved at allocation; nothing to re-carve (see its dynamic advice)",
                }
            )
    return bool(used)


def gpus_of(
    slices: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    driver: str = NVIDIA_DRIVER,
    owner: Mapping[str, str] | None = None,
) -> tuple[list[Gpu], list[dict[str, Any]]]:
    """The GPUs the devices of ``driver`` describe, sorted by node and index, and the
    GPUs skipped (node, device, why: an unknown GPU model, a MIG profile the model lacks,
    a device name of another form, no placement). ``owner``: who holds each device
    (``claims.explain.allocations`` of ``claims``), read from ``claims`` when not given."""
    if owner is None:
        owner = cexplain.allocations(claims, keep=False)[0]
    whole: dict[tuple[str, str], Gpu] = {}
    parts: dict[tuple[str, str], dict[str, Any]] = {}
    skipped: list[dict[str, Any]] = []
    bad: set[tuple[str, str]] = set()
    dynamic: set[tuple[str, str]] = set()
    # one slice's devices at a time: a GPU keeps strings and counts, not the device
    for pub in cslices.iter_published_devices(slices):
        if pub.driver != driver:
            continue
        if _dynamic(pub, dynamic, skipped):
            continue
        kind = _attr(pub.device, "type")
        product = str(_attr(pub.device, "productName") or fr.UNKNOWN_MODEL)
        if kind == fr.WHOLE_GPU or (kind is None and not _attr(pub.device, "profile")):
            m = _WHOLE_NAME.match(pub.name)
            uuid = str(_attr(pub.device, "uuid") or pub.name)
            if m:
                whole[(pub.node, uuid)] = Gpu(
                    pub.node, int(m.group(1)), uuid, product, False, (), owner.get(pub.id), pub.id
                )
            continue
        if kind != fr.MIG:
            continue
        parent = str(_attr(pub.device, "parentUUID") or "")
        m = _MIG_NAME.match(pub.name)
        key = (pub.node, parent)
        if not m or not parent:
            why = "device name is not gpu-<minor>-mig-<profile>-<GI ID>-<start>, or no parentUUID"
            skipped.append({"node": pub.node, "device": pub.name, "reason": why})
            bad.add(key)
            continue
        entry = parts.setdefault(
            key, {"index": int(m.group(1)), "model": product, "gis": defaultdict(list)}
        )
        used = _slices(pub.device)
        start = used[0] if used else int(m.group(3))
        entry["gis"][(str(_attr(pub.device, "profile")), start)].append(pub.id)
    out = list(whole.values())
    models: dict[str, mpr.GpuModel] = {}
    for (node, parent), entry in parts.items():
        if (node, parent) in bad:
            continue
        try:
            model = models.get(entry["model"]) or models.setdefault(
                entry["model"], mpr.model(entry["model"])
            )
            instances = []
            for (profile, start), devices in sorted(entry["gis"].items(), key=lambda x: x[0][1]):
                prof = model.profile(profile)
                held = tuple(dict.fromkeys(owner[d] for d in devices if d in owner))
                instances.append(
                    Instance(prof.name, prof.profile_id, start, prof.slices, tuple(devices), held)
                )
        except (mpr.UnknownGpuModel, mpr.UnknownProfile) as exc:
            skipped.append({"node": node, "gpu": entry["index"], "reason": str(exc)})
            continue
        out.append(Gpu(node, entry["index"], parent, model.name, True, tuple(instances)))
    out.sort(key=lambda g: (g.node, g.index))
    return out, skipped


# ------------------------------------------------------------------ pending demand


def demands_of(
    pending: Sequence[fr.Pending],
    claims: Sequence[Mapping[str, Any]],
    driver: str = NVIDIA_DRIVER,
) -> tuple[list[Demand], list[dict[str, Any]]]:
    """Pending claims (``report.fleet.pending_claims``) a MIG layout can serve
    (``Demand``, by claim name) and the others (claim, why)."""
    # the pending claims only: the others are walked past, a stored page at a time
    keys = {p.claim for p in pending}
    raw = {}
    if keys:
        for c in claims:
            key = cpods.key(c)
            if key in keys:
                raw[key] = c
    out, others = [], []
    for p in sorted(pending, key=lambda p: p.claim):
        wanted: Counter[str] = Counter()
        models: set[str] = set()
        why = ""
        for request, shapes in zip(
            p.requests, fr.request_shapes(raw[p.claim], driver), strict=True
        ):
            shape = next((s for s in shapes if s.kind == fr.MIG and s.profile), None)
            if shape is None:
                why = f"request {request['request']} asks for {', '.join(request['shapes'])}"
                break
            wanted[shape.profile] += shape.count
            if shape.model:
                models.add(shape.model)
        if not why and len(models) > 1:
            why = f"its requests want several GPU models ({', '.join(sorted(models))})"
        if why or not wanted:
            others.append({"claim": p.claim, "reason": why or "it requests no device"})
            continue
        model = next(iter(models)) if models else None
        out.append(Demand(p.claim, tuple(sorted(wanted.items())), model, tuple(p.users)))
    return out, others


def _fits_model(demand: Demand, gpu_model: mpr.GpuModel, product: str) -> bool:
    if demand.model is not None and demand.model != product:
        return False
    return all(p in gpu_model.profile_names for p, _unused in demand.profiles)


def _serve_idle(
    demands: list[Demand], gpus: Sequence[Gpu]
) -> tuple[list[dict[str, Any]], list[Demand], list[Gpu]]:
    """Claims that free GPU instances of one node already serve (taken in claim order,
    nodes by name), the rest, and ``gpus`` with the instances taken marked ``promised``
    (the search keeps them in place)."""
    free: dict[str, dict[str, list[tuple[Gpu, Instance]]]] = defaultdict(lambda: defaultdict(list))
    for g in gpus:
        for i in g.instances:
            if not i.claims:
                free[i.profile][g.node].append((g, i))
    taken: dict[tuple[str, int, int], str] = {}
    now, rest = [], []
    failed: set[tuple] = set()  # free instances only decrease: a shape that failed fails again
    for d in demands:
        if (d.profiles, d.model) in failed:
            rest.append(d)
            continue
        nodes = set.intersection(*(set(free[p]) for p, _unused in d.profiles))
        for node in sorted(nodes):
            pick: list[tuple[Gpu, Instance]] = []
            for profile, n in d.profiles:
                fit = [
                    (g, i)
                    for g, i in free[profile][node]
                    if d.model in (None, g.model) and (g.node, g.index, i.start) not in taken
                ]
                if len(fit) < n:
                    break
                pick += fit[:n]
            else:
                for g, i in pick:
                    taken[(g.node, g.index, i.start)] = d.claim
                gpu_ids = sorted({g.index for g, _unused in pick})
                now.append({"claim": d.claim, "node": node, "gpus": gpu_ids})
                break
        else:
            failed.add((d.profiles, d.model))
            rest.append(d)
    marked = []
    for g in gpus:
        insts = tuple(
            replace(i, promised=(taken[(g.node, g.index, i.start)],))
            if (g.node, g.index, i.start) in taken
            else i
            for i in g.instances
        )
        marked.append(replace(g, instances=insts))
    return now, rest, marked


# ------------------------------------------------------------------ layouts


#: Placements already asked of the planner: (model, counts, kept placements) -> Plan or
#: None. The search asks the same few questions round after round.
_PLACED: dict[tuple, Plan | None] = {}


def _place(model: mpr.GpuModel, counts: Counter, keep: Sequence[Instance]) -> Plan | None:
    """The planner's placement of ``counts`` on ``model`` with every instance of ``keep``
    at its placement, or None (memoised in ``_PLACED``, bounded)."""
    key = (model.name, tuple(sorted(counts.items())), tuple(i.place for i in keep))
    if key not in _PLACED:
        if len(_PLACED) > 10_000:
            _PLACED.clear()
        _PLACED[key] = _place_now(model, counts, keep)
    return _PLACED[key]


def _place_now(model: mpr.GpuModel, counts: Counter, keep: Sequence[Instance]) -> Plan | None:
    wanted = {p: n for p, n in counts.items() if n}
    if not wanted:
        return None
    total = 0
    for p, n in wanted.items():
        prof = model.profile(p)
        if n > prof.max_instances:
            return None
        total += prof.slices * n
    if total > model.total_slices:
        return None
    try:
        plan = mpl.plan(model, wanted, current=[i.gi() for i in keep])
    except LayoutDoesNotFit:
        return None
    placed = {(p.profile, p.start, p.size) for p in plan.placements}
    return plan if all(i.place in placed for i in keep) else None


@dataclass(frozen=True)
class _Layout:
    plan: Plan
    serves: tuple[Demand, ...]
    kept: frozenset[tuple[str, int, int]]


def _layout_for(
    gpu: Gpu, model: mpr.GpuModel, tier: str, demands: Sequence[Demand]
) -> _Layout | None:
    """The best layout of ``gpu`` in ``tier`` for ``demands`` (None when it serves none)."""
    promised = [i for i in gpu.instances if i.promised and not i.claims]
    held = [i for i in gpu.instances if i.claims]
    free = [i for i in gpu.instances if not i.held]
    must = held + promised if tier == KEEP else promised
    counts: Counter[str] = Counter(i.profile for i in must)
    served: list[Demand] = []
    failed: set[tuple] = set()
    for d in demands:
        if d.profiles in failed or not _fits_model(d, model, gpu.model):
            continue
        trial = counts + Counter(dict(d.profiles))
        if _place(model, trial, must) is None:
            failed.add(d.profiles)
            continue
        counts, served = trial, [*served, d]
    if not served:
        return None
    keep = list(must)
    optional = held + free if tier == DISTURB else free
    for inst in optional:
        trial = counts + Counter({inst.profile: 1})
        if _place(model, trial, [*keep, inst]) is not None:
            counts, keep = trial, [*keep, inst]
    plan = _place(model, counts, keep)
    if plan is None:  # cannot happen: the last accepted trial placed these counts
        return None
    return _Layout(plan, tuple(served), frozenset(i.place for i in keep))


def disturbed_by(gpu: Gpu, placements: Iterable[Mapping[str, Any]]) -> list[str]:
    """Claims allocated on ``gpu`` that a layout of ``placements`` (profile, start, size)
    would take away: the GPU's claim when it is whole, else the claims of its GPU
    instances that the placements do not keep."""
    if not gpu.mig:
        return [gpu.claim] if gpu.claim else []
    kept = {(str(p["profile"]), int(p["start"]), int(p["size"])) for p in placements}
    return list(dict.fromkeys(c for i in gpu.instances if i.place not in kept for c in i.claims))


def _tiers(gpu: Gpu, allow_disturb: bool) -> list[str]:
    if not gpu.held:
        return [IDLE]
    tiers = [KEEP] if gpu.mig else []
    return [*tiers, DISTURB] if allow_disturb else tiers


def advise(
    slices: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    *,
    max_gpus: int | None = None,
    allow_disturb: bool = False,
    driver: str = NVIDIA_DRIVER,
) -> Advice:
    """The proposal for the listed cluster (see the module docstring for the search).

    ``max_gpus``: at most this many GPUs changed (None: no bound). Each change: node,
    GPU index, uuid, model, tier, ``current`` and ``proposed`` layout with placements,
    ``serves`` (claims), ``disturbs`` (claim, pods reserving it, devices)."""
    slices, _unused = fr.readable_objects("resourceslices", slices)
    claims, _unused = fr.readable_objects("resourceclaims", claims)
    pods, _unused = fr.readable_objects("pods", pods)
    nodes, _unused = fr.readable_objects("nodes", nodes)
    # one walk of the claims (the CounterSets' where one is needed): holders, claims waiting
    folds = dict(
        [cexplain.allocations_fold(holders=False), cpending.unallocated_fold(fr.MAX_KEPT_AWAITING)]
    )
    sets = ccounters.counter_sets(slices, claims, folds)
    (owner, _holders), awaiting = vk.folded(claims, folds)
    if isinstance(claims, vk.PagedList):
        claims.forget(*folds)  # held here while the advice needs them, not in the list
    if awaiting is None:  # too many to hold: read from the claims
        awaiting = claims
    devices = fr.devices_of(slices, claims, {}, driver, sets, owner)
    # the pods of the pending claims only: their users are all the advice names
    users = cpods.PodIndex(pods, claims=_unallocated(awaiting))
    pending, shapes = fr.pending_claims(awaiting, users, devices, driver)
    whole_wanted = _whole_gpu_wanted(shapes, devices)
    del devices  # a record per device: let go before a record per GPU is made
    gpus, skipped = gpus_of(slices, claims, driver, owner)
    del owner
    demands, others = demands_of(pending, awaiting, driver)
    advice = Advice(not_considered=others, gpus_skipped=skipped, gpus_seen=len(gpus))
    advice.pending_mig = len(demands)
    advice.dynamic, advice.drain = dynamic_advice(slices, claims, demands, driver, sets)
    advice.servable_now, waiting, gpus = _serve_idle(demands, gpus)
    groups: dict[tuple, list[Gpu]] = defaultdict(list)
    models: dict[str, mpr.GpuModel] = {}
    for g in gpus:
        try:
            models[g.model] = models.get(g.model) or mpr.model(g.model)
        except mpr.UnknownGpuModel as exc:
            advice.gpus_skipped.append({"node": g.node, "gpu": g.index, "reason": str(exc)})
            continue
        if not models[g.model].profiles or (not g.mig and g.model in whole_wanted):
            continue  # no MIG table, or a pending claim waits for this whole GPU
        groups[g.signature()].append(g)
    chosen: list[tuple[Gpu, str, _Layout, list[str]]] = []
    while waiting and (max_gpus is None or len(chosen) < max_gpus):
        best: tuple | None = None
        for sig, members in groups.items():
            if not members:
                continue
            gpu = members[0]
            for tier in _tiers(gpu, allow_disturb):
                layout = _layout_for(gpu, models[gpu.model], tier, waiting)
                if layout is None:
                    continue
                lost = disturbed_by(gpu, [p.to_dict() for p in layout.plan.placements])
                destroyed = sum(1 for i in gpu.instances if i.place not in layout.kept)
                rank = (
                    _TIERS.index(tier),
                    -len(layout.serves),
                    len(lost),
                    destroyed,
                    not gpu.mig,
                    gpu.node,
                    gpu.index,
                )
                if best is None or rank < best[0]:
                    best = (rank, sig, tier, layout, lost)
                break
        if best is None:
            break
        _unused, sig, tier, layout, lost = best
        gpu = groups[sig].pop(0)
        served = {d.claim for d in layout.serves}
        waiting = [d for d in waiting if d.claim not in served]
        chosen.append((gpu, tier, layout, lost))
    # the pods reserving a disturbed claim, read for those claims only
    reservers = _reservers(claims, {c for _gpu, _tier, _layout, lost in chosen for c in lost})
    advice.changes = [_change(*change, reservers) for change in chosen]
    advice.unserved = [
        {
            "claim": d.claim,
            "profiles": dict(d.profiles),
            "reason": "the GPU budget (max GPUs) is spent"
            if max_gpus is not None and len(advice.changes) >= max_gpus
            else "no GPU layout places it"
            + ("" if allow_disturb else " without disturbing running claims"),
        }
        for d in waiting
    ]
    return advice


def dynamic_advice(
    slices: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    demands: Sequence[Demand],
    driver: str = NVIDIA_DRIVER,
    counter_sets: Mapping[str, ccounters.CounterSet] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per GPU of ``driver`` published with shared counters and MIG placements, by node
    and GPU, ``claims.counter_moves.advice`` for the profiles that ``demands`` (pending
    MIG claims) ask of its model; and ``claims.counter_moves.drain_order`` of those GPUs.
    ``counter_sets``: ``claims.counters.counter_sets`` of ``slices`` and ``claims``,
    computed here when not given."""
    if counter_sets is None:
        counter_sets = ccounters.counter_sets(slices, claims)
    sets = [cs for cs in counter_sets.values() if cs.driver == driver and cm.placements(cs)]
    sets.sort(key=lambda cs: (cs.node, cs.gpu, cs.name))
    out = []
    for cs in sets:
        product = cm.model_of(cs)
        wanted: dict[str, list[str]] = defaultdict(list)
        for d in demands:
            if d.model in (None, product):
                for profile, _count in d.profiles:
                    wanted[profile].append(d.claim)
        out.append(cm.advice(cs, wanted))
    return out, cm.drain_order(sets)


def _unallocated(claims: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """``(namespace, name)`` of the claims ``report.fleet.pending_claims`` judges
    (``report.fleet.awaits_allocation``)."""
    out = set()
    for claim in claims:
        if fr.awaits_allocation(claim):
            meta = claim.get("metadata") or {}
            out.add((str(meta.get("namespace", "")), str(meta.get("name", ""))))
    return out


def _whole_gpu_wanted(
    shapes: Sequence[Sequence[fr.Shape]], devices: Sequence[fr.Device]
) -> set[str]:
    """GPU models of which a pending claim asks for a whole GPU (a shape of any model:
    every model published)."""
    out: set[str] = set()
    for group in shapes:
        for s in group:
            if s.kind == fr.WHOLE_GPU:
                out |= {d.model for d in devices} if s.model is None else {s.model}
    return out


def _reservers(claims: Iterable[Mapping[str, Any]], wanted: set[str]) -> dict[str, list[str]]:
    """The pods (``namespace/name``) reserving each claim of ``wanted``."""
    out: dict[str, list[str]] = {}
    if not wanted:
        return out
    for c in claims:
        if cpods.key(c) not in wanted:
            continue
        ns = (c.get("metadata") or {}).get("namespace", "")
        refs = (c.get("status") or {}).get("reservedFor") or []
        out[cpods.key(c)] = [f"{ns}/{r.get('name')}" for r in refs if r.get("resource") == "pods"]
    return out


def _change(
    gpu: Gpu, tier: str, layout: _Layout, lost: list[str], reservers: Mapping[str, list[str]]
) -> dict[str, Any]:
    plan = layout.plan
    devices = {c: [d for i in gpu.instances if c in i.claims for d in i.devices] for c in lost}
    if gpu.claim in lost:
        devices[gpu.claim] = [gpu.device]
    return {
        "node": gpu.node,
        "gpu": gpu.index,
        "uuid": gpu.uuid,
        "model": gpu.model,
        "tier": tier,
        "current": gpu.current(),
        "proposed": {
            "layout": plan.counts,
            "placements": [p.to_dict() for p in plan.placements],
            "free_slices": list(plan.free_slots),
        },
        "serves": [d.claim for d in layout.serves],
        "serves_profiles": {d.claim: dict(d.profiles) for d in layout.serves},
        "disturbs": [
            {"claim": c, "pods": reservers.get(c, []), "devices": devices.get(c, [])} for c in lost
        ],
    }


# ------------------------------------------------------------------ applying a proposal


def _now_key(gpu: Gpu) -> tuple:
    return (gpu.mig, tuple(i.place for i in gpu.instances), gpu.claim is not None)


def stale_reasons(changes: Sequence[Mapping[str, Any]], gpus: Sequence[Gpu]) -> list[str]:
    """Why each change no longer matches the cluster (``gpus``: ``gpus_of`` of a fresh
    listing): the GPU is gone, or its MIG mode or GPU instances (profile, start, size)
    differ from the proposal's ``current``. Empty when the proposal is current."""
    by_key = {(g.node, g.index): g for g in gpus}
    out = []
    for c in changes:
        where = f"node {c['node']} GPU {c['gpu']}"
        gpu = by_key.get((c["node"], c["gpu"]))
        if gpu is None:
            out.append(f"{where}: the cluster publishes no such GPU now")
            continue
        cur = c["current"]
        then = (
            bool(cur["mig_enabled"]),
            tuple((p["profile"], int(p["start"]), int(p["size"])) for p in cur["placements"]),
            cur.get("claim") is not None,
        )
        if gpu.uuid != c.get("uuid", gpu.uuid) or _now_key(gpu) != then:
            now = gpu.layout if gpu.mig else "MIG disabled"
            was = cur["layout"] if cur["mig_enabled"] else "MIG disabled"
            out.append(f"{where}: the proposal was made for {was}, the GPU now has {now}")
    return out


def host_vars(changes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per node the variables of role ``mig`` that carve the proposed layouts on the
    changed GPUs only: ``mig_layout`` with ``mig_devices`` (the GPU indices) when they all
    get one layout, else a mig-parted ``mig_config`` (one entry per GPU, ``devices:
    [index]``) with ``mig_config_name`` ``gpufleet-proposal``."""
    per_node: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for c in changes:
        per_node[c["node"]].append(c)
    out = {}
    for node, items in sorted(per_node.items()):
        items = sorted(items, key=lambda c: c["gpu"])
        layouts = [dict(sorted(c["proposed"]["layout"].items())) for c in items]
        indices = [int(c["gpu"]) for c in items]
        base = {"mig_enabled": True, "mig_devices": indices, "mig_config_file": ""}
        if all(layout == layouts[0] for layout in layouts):
            out[node] = {**base, "mig_layout": layouts[0], "mig_config": {},
                         "mig_config_name": ""}  # fmt: skip
            continue
        entries = [
            {"devices": [i], "mig-enabled": True, "mig-devices": layout}
            for i, layout in zip(indices, layouts, strict=True)
        ]
        out[node] = {
            **base,
            "mig_layout": {},
            "mig_config": {"version": "v1", "mig-configs": {CONFIG_NAME: entries}},
            "mig_config_name": CONFIG_NAME,
        }
    return out
