# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Shared counters of partitionable devices: what each CounterSet holds, what the devices
allocated to claims consume from it, what is left, and which claims hold it.

Pure functions over listed objects (JSON dicts as the API returns them: ResourceSlices,
ResourceClaims); no I/O.

Facts and their sources (resource.k8s.io/v1, ``k8s.io/api/resource/v1/types.go``, KEP 4815
"DRA: partitionable devices"; the scheduler's allocator in
``k8s.io/dynamic-resource-allocation/structured``):

- A ResourceSlice publishes CounterSets in ``spec.sharedCounters``: ``[{name, counters:
  {counter: {value: quantity}}}]``. CounterSet names are unique in a pool; from Kubernetes
  1.35 (v1) a slice holds either devices or sharedCounters, so the CounterSets of a pool
  sit in a slice of their own and devices of other slices of the same pool consume them.
- A device consumes with ``consumesCounters``: ``[{counterSet, counters: {counter: {value:
  quantity}}}]`` (v1, v1beta2; under ``basic`` in v1beta1), one entry per CounterSet.
- The scheduler allocates a device only if, for every counter it consumes, what the
  devices already allocated (``status.allocation.devices.results`` of every ResourceClaim:
  ``driver/pool/device``) consume plus what this device consumes stays at or below the
  counter's value. Only the newest generation of a pool counts (``claims.slices``).
  Results with ``adminAccess`` do not count: the allocator ignores them.
- NVIDIA's DRA driver with ``DynamicMIG`` (``cmd/gpu-kubelet-plugin/partitions.go``; the
  lab's simulator: ``lab/gpu-simulator/kubelet-plugin/internal/devices/dynamic.go``)
  publishes one CounterSet ``gpu-<minor>-counter-set`` per GPU with one counter per
  capacity dimension (``multiprocessors``, ``copy-engines``, ``decoders``, ``encoders``,
  ``jpeg-engines``, ``ofa-engines``, ``memory`` in bytes) and one counter of value 1 per
  memory slice (``memory-slice-<i>``, zero-based); the full GPU ``gpu-<minor>`` consumes
  all of them, a MIG device ``gpu-<minor>-mig-<profile>-<GI profile ID>-<start>`` its
  profile's capacities and the memory slices of its placement.

Counter values are exact (``fractions.Fraction`` from ``kube.quantity.parse_quantity``);
a value that is not a quantity, or is negative, counts as 0 and is listed in
``CounterSet.unreadable``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.pods import key
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_list, as_map
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    device_fields,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.quantity import (
    QuantityError,
    parse_quantity,
)

#: Counter of NVIDIA's driver that counts streaming multiprocessors.
MULTIPROCESSORS = "multiprocessors"
#: Counter of NVIDIA's driver that counts GPU memory, in bytes.
MEMORY = "memory"
#: Counter of NVIDIA's driver for one memory slice: ``memory-slice-<i>``.
MEMORY_SLICE = re.compile(r"^memory-slice-(0|[1-9][0-9]{0,3})$")
#: Suffix of the CounterSet names of NVIDIA's driver (``gpu-0-counter-set``).
COUNTER_SET_SUFFIX = "-counter-set"


def memory_slice(counter: str) -> int | None:
    """The index of a ``memory-slice-<i>`` counter, None for any other counter."""
    m = MEMORY_SLICE.match(counter)
    return int(m.group(1)) if m else None


def format_amount(counter: str, value: Fraction) -> str:
    """A counter value as a person reads it: ``memory`` in GiB (``69.75Gi``), any other
    counter as a number (``16``, ``0.5``)."""
    if counter == MEMORY:
        gib = value / 2**30
        text = str(int(gib)) if gib.denominator == 1 else f"{float(gib):.2f}".rstrip("0")
        return text + "Gi"
    return str(int(value)) if value.denominator == 1 else f"{float(value):g}"


@dataclass
class CounterSet:
    """One CounterSet of a pool: ``driver``, ``pool``, ``node`` (``spec.nodeName`` of the
    slice that publishes it, or ``(all nodes)``/``(node selector)``), ``name``;
    ``capacity`` (counter -> value), ``consumed`` (counter -> what allocated devices
    consume), ``holders`` (counter -> ``namespace/name`` of the claims whose devices
    consume it, in listing order), ``devices`` (device name -> the counters it consumes
    from this set), ``objects`` (device name -> the device object), ``allocated``
    (device name -> the claims holding it), ``unreadable`` (counters whose value is not
    a quantity)."""

    driver: str
    pool: str
    node: str
    name: str
    capacity: dict[str, Fraction] = field(default_factory=dict)
    consumed: dict[str, Fraction] = field(default_factory=dict)
    holders: dict[str, list[str]] = field(default_factory=dict)
    devices: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    objects: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    allocated: dict[str, list[str]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        """``driver/pool/name``: a CounterSet name is unique in its pool only."""
        return f"{self.driver}/{self.pool}/{self.name}"

    @property
    def gpu(self) -> str:
        """The GPU device the set belongs to, by NVIDIA's naming (``gpu-0`` of
        ``gpu-0-counter-set``); the set's name for any other driver's naming."""
        return self.name.removesuffix(COUNTER_SET_SUFFIX) or self.name

    def free(self, counter: str) -> Fraction:
        """What is left of ``counter``: its value less what allocated devices consume
        (negative when the allocations exceed it; 0 for a counter the set lacks)."""
        return self.capacity.get(counter, Fraction(0)) - self.consumed.get(counter, Fraction(0))

    def memory_slices(self) -> list[int]:
        """Indexes of the set's ``memory-slice-<i>`` counters, ascending."""
        return sorted(i for i in map(memory_slice, self.capacity) if i is not None)

    def free_memory_slices(self) -> list[int]:
        """Indexes of the memory slices with at least 1 left."""
        return [i for i in self.memory_slices() if self.free(f"memory-slice-{i}") >= 1]


@dataclass(frozen=True)
class Shortfall:
    """A counter a device consumes that the allocations leave too little of: on
    ``node``, CounterSet ``counter_set`` (its ``id``), ``counter`` has ``capacity``,
    allocated devices consume ``consumed``, the device needs ``needed``; ``holders`` are
    the claims consuming it. ``counter`` is ``""`` when the CounterSet is not published
    in the device's pool at all (the scheduler cannot allocate the device)."""

    node: str
    counter_set: str
    counter: str
    capacity: Fraction
    consumed: Fraction
    needed: Fraction
    holders: tuple[str, ...] = ()

    def text(self) -> str:
        """``memory-slice-1 of gpu-0-counter-set on node-a: 1 of 1 consumed, needs 1 (held
        by ns/a)``."""
        set_name = self.counter_set.rsplit("/", 1)[-1]
        if not self.counter:
            return f"counter set {set_name} is not published in the device's pool"
        amounts = (
            f"{format_amount(self.counter, self.consumed)} of "
            f"{format_amount(self.counter, self.capacity)} consumed, needs "
            f"{format_amount(self.counter, self.needed)}"
        )
        held = f" (held by {', '.join(self.holders)})" if self.holders else ""
        return f"{self.counter} of {set_name} on {self.node}: {amounts}{held}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "counter_set": self.counter_set,
            "counter": self.counter,
            "capacity": amount_json(self.capacity),
            "consumed": amount_json(self.consumed),
            "needed": amount_json(self.needed),
            "holders": list(self.holders),
        }


def amount_json(value: Fraction) -> int | float:
    """A counter value for JSON: an int when whole, else a float."""
    return int(value) if value.denominator == 1 else float(value)


@functools.lru_cache(maxsize=4096)
def _quantity(text: str) -> Fraction:
    """``parse_quantity`` of a text, remembered: a fleet repeats a few counter values
    (``1``, ``16Gi``) on every device."""
    return parse_quantity(text)


def _amounts(counters: Any, unreadable: list[str] | None = None) -> dict[str, Fraction]:
    """``{counter: {value: quantity}}`` -> ``{counter: Fraction}``; a value that is not a
    quantity, or is negative (no amount of a device's capacity is), counts as 0 (its name
    goes to ``unreadable``)."""
    out: dict[str, Fraction] = {}
    if not isinstance(counters, Mapping):
        return out
    for name, entry in counters.items():
        value = entry.get("value") if isinstance(entry, Mapping) else None
        try:
            amount = _quantity(value) if isinstance(value, str) else parse_quantity(value)
            if amount < 0:
                raise QuantityError(f"{value!r} is negative")
            out[str(name)] = amount
        except (QuantityError, TypeError, ValueError):
            out[str(name)] = Fraction(0)
            if unreadable is not None:
                unreadable.append(str(name))
    return out


def consumption(device: Mapping[str, Any]) -> dict[str, dict[str, Fraction]]:
    """CounterSet name -> counter -> value of what ``device`` (an entry of
    ``spec.devices``) consumes; empty for a device that consumes no counters."""
    out: dict[str, dict[str, Fraction]] = {}
    for entry in as_list(device_fields(device).get("consumesCounters")):
        if isinstance(entry, Mapping) and isinstance(entry.get("counterSet"), str):
            out[entry["counterSet"]] = _amounts(entry.get("counters"))
    return out


def _add_published_sets(s: Mapping[str, Any], sets: dict[str, CounterSet]) -> None:
    """Every CounterSet of the slice ``s`` added to ``sets`` by ``CounterSet.id`` (the
    first of an id kept)."""
    spec = as_map(s.get("spec"))
    driver, pool = spec.get("driver", ""), as_map(spec.get("pool")).get("name", "")
    for entry in as_list(spec.get("sharedCounters")):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        cs = CounterSet(driver, pool, cslices.node_of(spec), entry["name"])
        cs.capacity = _amounts(entry.get("counters"), cs.unreadable)
        sets.setdefault(cs.id, cs)


class _Consumed:
    """The fold (``kube.client.PagedList.derive``) of what the devices allocated to the
    claims consume, added to ``sets``: ``consumers`` is ``driver/pool/device`` -> CounterSet
    name -> counter -> value of every device that consumes counters."""

    def __init__(
        self,
        sets: dict[str, CounterSet],
        consumers: Mapping[str, Mapping[str, Mapping[str, Fraction]]],
    ) -> None:
        self.sets = sets
        self.consumers = consumers
        self.seen: set[tuple[str, str, str]] = set()  # (set id, counter, holder): each holder once

    def add(self, claim: Mapping[str, Any]) -> None:
        sets, seen = self.sets, self.seen
        for device_id in _counted_results(claim):
            driver, pool, name = device_id.split("/", 2)
            for set_name, counters in self.consumers.get(device_id, {}).items():
                cs = sets.get(f"{driver}/{pool}/{set_name}")
                if cs is None:
                    continue
                holder = key(claim)
                cs.allocated.setdefault(name, []).append(holder)
                for counter, value in counters.items():
                    cs.consumed[counter] = cs.consumed.get(counter, Fraction(0)) + value
                    if (cs.id, counter, holder) not in seen:
                        seen.add((cs.id, counter, holder))
                        cs.holders.setdefault(counter, []).append(holder)

    def result(self) -> dict[str, CounterSet]:
        return self.sets


def counter_sets(
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    claims_folds: Mapping[str, Callable[[], Any]] | None = None,
) -> dict[str, CounterSet]:
    """Every CounterSet that the newest generation of each pool publishes, by
    ``CounterSet.id`` (``driver/pool/name``), with the devices that consume it and what
    the devices allocated to ``claims`` consume. A device consuming a CounterSet that its
    pool does not publish is left out (:func:`shortfalls` reports it). The slices are read
    in one pass of :func:`claims.slices.iter_latest_slices` (a ``PagedList`` page by page),
    keeping only the CounterSets and the devices that consume counters.

    ``claims_folds``: other folds of the claims (``kube.client.folded``) computed in the
    same walk of them, when a device consumes counters (without one the claims are not
    walked here), and kept in a ``PagedList`` of claims for the readers that ask for them
    (the allocations that explaining the unallocated claims reads)."""
    sets: dict[str, CounterSet] = {}
    consumers: dict[str, dict[str, dict[str, Fraction]]] = {}
    consuming: list[tuple[cslices.Published, dict[str, dict[str, Fraction]]]] = []
    for s in cslices.iter_latest_slices(slices):
        _add_published_sets(s, sets)
        for pub in cslices.slice_devices(s):
            used = consumption(pub.device)
            if used:
                consumers[pub.id] = used
                consuming.append((pub, used))
    # a pool may publish its CounterSets in another slice than the devices that consume them
    for pub, used in consuming:
        for set_name, counters in used.items():
            cs = sets.get(f"{pub.driver}/{pub.pool}/{set_name}")
            if cs is not None:
                cs.devices[pub.name] = counters
                cs.objects[pub.name] = pub.device
    # without a device that consumes counters no allocation takes any: the claims are not
    # walked, and ``claims_folds`` are left to their readers
    if consumers:
        vk.folded(claims, claims_folds or {}, [_Consumed(sets, consumers)])
    return sets


def _counted_results(claim: Mapping[str, Any]) -> list[str]:
    """``driver/pool/device`` of the results of a claim that consume counters: each
    device once, results with ``adminAccess`` left out."""
    alloc = as_map(as_map(claim.get("status")).get("allocation"))
    out: dict[str, None] = {}
    for r in as_list(as_map(alloc.get("devices")).get("results")):
        if not isinstance(r, Mapping) or r.get("adminAccess") is True:
            continue
        out[f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"] = None
    return list(out)


def shortfalls(
    sets: Mapping[str, CounterSet], driver: str, pool: str, device: Mapping[str, Any]
) -> list[Shortfall]:
    """The counters that keep the scheduler from allocating ``device`` (of ``driver`` and
    ``pool``) now: each counter it consumes whose value less what allocated devices
    consume is below what it needs; empty when it fits (or consumes no counters)."""
    out = []
    for set_name, counters in consumption(device).items():
        cs = sets.get(f"{driver}/{pool}/{set_name}")
        if cs is None:
            out.append(
                Shortfall(
                    "", f"{driver}/{pool}/{set_name}", "", Fraction(0), Fraction(0), Fraction(0)
                )
            )
            continue
        for counter, needed in sorted(counters.items(), key=lambda kv: counter_order(kv[0])):
            if needed > 0 and needed > cs.free(counter):
                out.append(
                    Shortfall(
                        cs.node,
                        cs.id,
                        counter,
                        cs.capacity.get(counter, Fraction(0)),
                        cs.consumed.get(counter, Fraction(0)),
                        needed,
                        tuple(cs.holders.get(counter, ())),
                    )
                )
    return out


def counter_order(counter: str) -> tuple[int, int, str]:
    """Memory slices first, by index, then the other counters by name."""
    index = memory_slice(counter)
    return (0, index, "") if index is not None else (1, 0, counter)


def fits(
    cs: CounterSet,
    device: str,
    sets: Mapping[str, CounterSet],
    known: dict[str, bool] | None = None,
) -> bool:
    """Whether device ``device`` of ``cs`` could be allocated now: not allocated, and
    every counter it consumes (from ``cs`` and any other set of its pool) fits. ``known``
    (``driver/pool/device`` -> the verdict) keeps the verdicts of the devices already
    judged: a device consuming many sets is judged once, not once per set."""
    if device in cs.allocated:
        return False
    device_id = f"{cs.driver}/{cs.pool}/{device}"
    if known is not None and device_id in known:
        return known[device_id]
    verdict = not shortfalls(sets, cs.driver, cs.pool, cs.objects[device])
    if known is not None:
        known[device_id] = verdict
    return verdict


def unused_memory_slices(cs: CounterSet, devices: Iterable[str]) -> list[int]:
    """Indexes of the free memory slices of ``cs`` (:meth:`CounterSet.free_memory_slices`)
    that none of ``devices`` (names of devices consuming ``cs``) consumes, ascending."""
    used = {
        i
        for d in devices
        for counter, value in cs.devices.get(d, {}).items()
        if (i := memory_slice(counter)) is not None and value > 0
    }
    return [i for i in cs.free_memory_slices() if i not in used]


def slice_memory(cs: CounterSet) -> Fraction:
    """The share of the ``memory`` counter (bytes) of one memory slice of ``cs``: its value
    / the number of ``memory-slice-<i>`` counters; 0 for a set without memory slices."""
    slices = cs.memory_slices()
    return cs.capacity.get(MEMORY, Fraction(0)) / len(slices) if slices else Fraction(0)


def _profile(device: Mapping[str, Any]) -> str:
    """The ``profile`` attribute of a device (NVIDIA's MIG profile), ``gpu`` without one."""
    value = as_map(device_fields(device).get("attributes")).get("profile")
    if isinstance(value, Mapping):
        value = value.get("string")
    return str(value) if value else "gpu"


def gpu_figures(
    cs: CounterSet, sets: Mapping[str, CounterSet], known: dict[str, bool] | None = None
) -> dict[str, Any]:
    """What is free and stranded on the GPU of ``cs`` (a set of NVIDIA's shape): memory
    slices (total, free and stranded indexes), memory and multiprocessors (bytes and
    counts: total, free, stranded), the devices published, allocated and fitting now,
    the MIG profiles that still fit and the claims holding counters.

    A device fits when it is not allocated and every counter it consumes fits
    (:func:`shortfalls`). A free memory slice is stranded when no fitting device
    consumes it: it lies in a hole that no published placement can use with what the
    other counters leave. Stranded memory is the stranded slices' share of the
    ``memory`` counter (value / memory slices each), at most the free memory. Free
    multiprocessors are stranded when no device fits at all (e.g. a B200 whose two
    3g.90gb hold all 8 memory slices leaves 18 of 126 multiprocessors that nothing can
    use). ``known``: as :func:`fits`
    takes it, shared by the calls for the sets of one listing."""
    fitting = [d for d in sorted(cs.devices) if fits(cs, d, sets, known)]
    slices = cs.memory_slices()
    free_slices = cs.free_memory_slices()
    stranded = unused_memory_slices(cs, fitting)
    memory = cs.capacity.get(MEMORY, Fraction(0))
    memory_free = int(max(cs.free(MEMORY), Fraction(0)))
    sm_free = max(cs.free(MULTIPROCESSORS), Fraction(0))
    return {
        "node": cs.node,
        "driver": cs.driver,
        "pool": cs.pool,
        "counter_set": cs.name,
        "gpu": cs.gpu,
        "memory_slices": len(slices),
        "memory_slices_free": free_slices,
        "memory_slices_stranded": stranded,
        "memory": int(memory),
        "memory_free": memory_free,
        "memory_stranded": min(int(slice_memory(cs) * len(stranded)), memory_free),
        "multiprocessors": amount_json(cs.capacity.get(MULTIPROCESSORS, Fraction(0))),
        "multiprocessors_free": amount_json(sm_free),
        "multiprocessors_stranded": amount_json(sm_free if not fitting else Fraction(0)),
        "devices": len(cs.devices),
        "devices_allocated": len(cs.allocated),
        "devices_fitting": len(fitting),
        "profiles_fitting": sorted({_profile(cs.objects[d]) for d in fitting}),
        "claims": sorted({h for held in cs.allocated.values() for h in held}),
        "unreadable": list(cs.unreadable),
    }


def _first_slice(consumed: Mapping[str, Fraction]) -> int:
    """The lowest memory slice a device consumes (a device with none sorts last)."""
    slices = [i for c, v in consumed.items() if (i := memory_slice(c)) is not None and v > 0]
    return min(slices, default=2**31)


def most_at_once(cs: CounterSet, device_names: Iterable[str]) -> int:
    """The most of ``device_names`` (devices consuming ``cs``; names it does not hold
    count as none) that the scheduler can allocate together on the GPU of ``cs`` while
    nothing else is allocated: the devices in memory-slice order (lowest slice consumed,
    then name), each kept when what it consumes, added to what the kept ones consume,
    stays at or below ``cs.capacity`` for every counter (a counter the set lacks has 0).

    Exact for the placements of one MIG profile, which consume the same amounts of the
    other counters and equal, aligned runs of memory slices (taking the run that ends
    first is the best choice for runs of one length): on NVIDIA's H200 it gives each
    profile's ``max_instances`` (``-lgip`` Total; 7 x ``1g.18gb``, 4 x ``1g.35gb``,
    1 x ``1g.18gb+me``, which holds the one ``ofa-engines``). For a mix of profiles it is
    a lower bound, not the optimum. The counters' amounts, not ``cs.consumed``: the
    allocations of now do not count."""
    used: dict[str, Fraction] = {}
    kept = 0
    wanted = [n for n in dict.fromkeys(device_names) if n in cs.devices]
    for name in sorted(wanted, key=lambda n: (_first_slice(cs.devices[n]), n)):
        needs = cs.devices[name]
        after = {c: used.get(c, Fraction(0)) + v for c, v in needs.items() if v > 0}
        if all(v <= cs.capacity.get(c, Fraction(0)) for c, v in after.items()):
            used.update(after)
            kept += 1
    return kept


def profiles_at_once(cs: CounterSet) -> dict[str, int]:
    """Per profile of the devices of ``cs`` (the ``profile`` attribute, ``gpu`` for a
    device without one: the whole GPU), the most of its devices allocatable together on
    the empty GPU (:func:`most_at_once`): ``{"gpu": 1, "1g.18gb": 7, ...}`` on an H200.
    The profiles are alternatives on one GPU, not added capacity."""
    by_profile: dict[str, list[str]] = {}
    for name in sorted(cs.devices):
        by_profile.setdefault(_profile(cs.objects[name]), []).append(name)
    return {p: most_at_once(cs, names) for p, names in sorted(by_profile.items())}
