# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Why a ResourceClaim matches no device.

``explain_claim`` evaluates the DeviceClass and request selectors of a claim (with the
Kubernetes CEL environment of ``cel.evaluate``) against every published device and says,
per request and node, how many devices match and why the others do not, e.g. ``0 of 14
devices match: profile is 1g.18gb, wanted 1g.10gb (14)``. A device that consumes shared
counters (partitionable devices, NVIDIA's dynamic MIG) is free only when every counter it
consumes has enough left after the other claims' allocations (``claims.counters``); the
explanation then names the counters exhausted, per GPU, and the claims that hold them.

Pure functions over listed objects (JSON dicts as the API returns them: ResourceClaims,
Pods, ResourceSlices, DeviceClasses, Nodes); no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import evaluate as vcel
from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import verdicts as dra_cel
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as ccounters
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.pods import (
    PodIndex,
    key,
    metadata,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.slices import (
    Published,
    PublishedDevices,
    allocated_devices,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import (
    as_list,
    is_map,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    device_fields,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk


def request_alternatives(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The device requests a claim request may be satisfied by: ``exactly`` (v1,
    v1beta2), the fields on the request itself (v1beta1) or each ``firstAvailable``
    subrequest. Each: name, deviceClassName, selectors, allocationMode, count."""
    name = request.get("name", "")
    if isinstance(request.get("firstAvailable"), list):
        return [
            {**sub, "name": f"{name}/{sub.get('name', '')}"}
            for sub in request["firstAvailable"]
            if is_map(sub)
        ]
    body = request.get("exactly") if isinstance(request.get("exactly"), Mapping) else request
    return [{**body, "name": name}]


def cel_selectors(obj: Mapping[str, Any]) -> list[str]:
    """The CEL expressions of ``obj``'s ``selectors`` (a DeviceClass spec or a device
    request), in order; selectors without ``cel`` are left out."""
    return [
        str(s["cel"].get("expression", ""))
        for s in as_list(obj.get("selectors"))
        if is_map(s) and is_map(s.get("cel")) and s["cel"]
    ]


def _node_ready(node: Mapping[str, Any]) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def _attr(device: Mapping[str, Any], driver: str, qualified: str) -> Any:
    body = device_fields(device)
    domain, _sep, ident = qualified.partition("/")
    for name, value in (body.get("attributes") or {}).items():
        d, sep, i = str(name).partition("/")
        d, i = (d, i) if sep else (driver, name)
        if d == domain and i == ident:
            return next(iter(value.values()), None) if isinstance(value, Mapping) else value
    return None


def _top(counter: Counter, n: int = 3) -> str:
    items = counter.most_common()
    text = "; ".join(f"{r} ({c})" for r, c in items[:n])
    if len(items) > n:
        text += f"; {len(items) - n} more reasons"
    return text


class Unjudged(str):
    """Why a selector cannot be judged offline (``cel.verdicts.CANNOT_JUDGE``)."""


class _Compiled:
    """Selectors compiled once per explanation: a Selector, the reason Kubernetes refuses
    the expression (str), or why it cannot be judged offline (Unjudged), by ``judge``
    (expression -> ``cel.verdicts.Verdict``; default: ``cel.verdicts.judge``, the newest
    environment)."""

    def __init__(self, judge: Callable[[str], Any] | None = None) -> None:
        self.cache: dict[str, vcel.Selector | str] = {}
        self.judge = judge or dra_cel.judge

    def get(self, expression: str) -> vcel.Selector | str:
        if expression not in self.cache:
            verdict = self.judge(expression)
            if verdict.verdict == dra_cel.CANNOT_JUDGE:
                self.cache[expression] = Unjudged(verdict.message)
            elif verdict.verdict != dra_cel.OK:
                self.cache[expression] = verdict.message
            else:
                try:
                    self.cache[expression] = vcel.Selector(expression)
                except vcel.CelError as err:
                    # the judge accepts it (Kubernetes' own environment may): not a
                    # compile error, but nothing cel-python can evaluate offline
                    self.cache[expression] = Unjudged(f"cannot be evaluated offline: {err}")
        return self.cache[expression]


#: Verdicts of a request, most telling first: the claim's verdict is the first of them
#: that any request has, unless one request would fit (``firstAvailable``).
_VERDICT_ORDER = [
    "class-missing",
    "cel-error",
    "cannot-judge",
    "no-device",
    "in-use",
    "counters",
    "constraint",
    "would-fit",
]


def explain_claim(
    claim: Mapping[str, Any],
    device_classes: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    claims: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]] | PodIndex = (),
    judge: Callable[[str], Any] | None = None,
    counter_sets: Mapping[str, ccounters.CounterSet] | None = None,
    shared: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Why ``claim`` is (or would be) not allocated.

    ``counter_sets``: the CounterSets with what the other claims' devices consume
    (``claims.counters.counter_sets``), computed once by a caller that explains many
    unallocated claims; None: computed here from ``slices`` and ``claims`` but ``claim``.

    ``shared``: a dict a caller keeps while it explains many claims of one listing with
    the same other arguments (``claims.pending.find_pending``): the DeviceClasses and the
    nodes' readiness are read once (the published devices are read from ``slices`` again
    for each request evaluated, one page at a time: none is held), and an unallocated claim
    whose device requests equal an earlier one's takes that claim's evaluation of them
    (the request entries are then the same objects: read them, do not change them).

    ``judge`` gives the compile verdict (``cel.verdicts.Verdict``) on each selector: the one of
    the cluster's release (``gpufleet.build.celcheck.judge_for``); default ``cel.verdicts.judge``,
    the newest environment. Devices are evaluated by ``cel.evaluate`` either way.

    For each request (and each ``firstAvailable`` alternative) every published device is
    checked in the scheduler's order: its DeviceClass's selectors, then the request's
    selectors, then whether another claim already has it allocated, then whether the
    shared counters it consumes have enough left. Returns::

        {"claim": "ns/name", "summary": "...", "verdict": one of no-device, in-use,
         counters (matching devices not allocated but short of shared counters),
         class-missing, cel-error, cannot-judge (a selector the Python CEL
         environment cannot judge offline), constraint, would-fit,
         "requests": [{"request", "device_class", "count", "mode", "total", "matching",
                       "free", "reasons": [[reason, devices]], "errors": [...],
                       "counter_sets": [{"node", "counter_set", "gpu", "memory_slices_free",
                                         "exhausted": [{"counter", "capacity", "consumed",
                                                        "needed", "holders", "devices"}]}],
                       "selectors": [{"selector", "expression", "rejects"}],
                       "nodes": [{"node", "ready", "total", "matching", "free", "fits",
                                  "reasons": [[reason, devices]]}], "summary"}],
         "constraints": [...], "pods": [{"pod", "scheduler"}]}

    ``reasons`` name the first failing ``&&`` term and the device's value, e.g.
    ``profile is 1g.18gb, wanted 1g.10gb``; ``selectors`` name each selector that rejects a
    device (``request selector #0``, ``class mig.nvidia.com selector #0``), its expression
    and how many devices it is the first to reject. A CEL runtime error (an attribute a device
    lacks) is listed in ``errors``: kube-scheduler then fails the whole claim.
    """
    m = metadata(claim)
    if isinstance(slices, Iterator):  # read more than once: for the devices, the counters
        slices = list(slices)
    if shared is None:
        shared = {}
    if "devices" not in shared:
        shared["classes"] = {metadata(c).get("name"): c for c in device_classes}
        shared["devices"] = PublishedDevices(slices)
        shared["node_ready"] = {metadata(n).get("name"): _node_ready(n) for n in nodes}
        shared["compiled"] = _Compiled(judge)
        shared["requests"] = {}
    spec_devices = (claim.get("spec") or {}).get("devices") or {}
    # an unallocated claim's own devices are in no one's way: with the CounterSets given,
    # its evaluation is that of every other unallocated claim with the same requests
    same = repr(spec_devices) if counter_sets is not None and not allocated_devices(claim) else None
    evaluated = shared["requests"].get(same) if same is not None else None
    if evaluated is None:
        in_use = _shared_in_use(claim, claims, shared) if same is not None else None
        evaluated = _explain_requests(
            claim, spec_devices, claims, slices, counter_sets, shared, in_use
        )
        if same is not None:
            shared["requests"][same] = evaluated
    requests_out, constraints_out, verdicts = evaluated
    pods_out = _waiting_pods(claim, pods)
    verdict, summary = _claim_verdict(requests_out, verdicts, constraints_out)
    for p in pods_out:
        if p["scheduler"] and verdict == "would-fit":
            summary += f"; scheduler says for {p['pod']}: {p['scheduler']}"
    return {
        "claim": f"{m.get('namespace', '')}/{m.get('name', '')}",
        "summary": summary,
        "verdict": verdict,
        "requests": requests_out,
        "constraints": constraints_out,
        "pods": pods_out,
    }


def _explain_requests(
    claim: Mapping[str, Any],
    spec_devices: Mapping[str, Any],
    claims: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    counter_sets: Mapping[str, ccounters.CounterSet] | None,
    shared: Mapping[str, Any],
    in_use: Mapping[str, str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """``(request entries, constraint entries, verdicts)`` of ``claim``'s device requests
    (``spec_devices``) against the devices and allocations of ``shared``
    (``explain_claim``); ``in_use``: the other claims' allocations (``_in_use``) when the
    caller has them."""
    if in_use is None:
        in_use = _in_use(claim, claims)
    sets = counter_sets
    if sets is None:
        uid = metadata(claim).get("uid")
        sets = ccounters.counter_sets(slices, (c for c in claims if metadata(c).get("uid") != uid))
    requests_out: list[dict[str, Any]] = []
    verdicts: list[str] = []
    # a hand-made claim may hold anything where the API has lists of objects: the entries
    # that are no objects are left out, as of no meaning
    constraints = _objects(spec_devices.get("constraints"))
    matched = _constraint_attributes(constraints)
    candidates: dict[str, dict[str, list[tuple[str, ...]]]] = {}
    for request in _objects(spec_devices.get("requests")):
        for alt in request_alternatives(request):
            out, free_by_node, verdict = _explain_alternative(
                alt,
                shared["classes"],
                shared["devices"],
                (in_use, sets),
                (shared["node_ready"], matched),
                shared["compiled"],
            )
            candidates[alt["name"]] = free_by_node
            requests_out.append(out)
            verdicts.append(verdict)
    constraints_out = _explain_constraints(constraints, requests_out, candidates, matched)
    return requests_out, constraints_out, verdicts


def _objects(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a list (or tuple) of a claim's spec; anything else is none."""
    return [v for v in value if is_map(v)] if isinstance(value, (list, tuple)) else []


def _constraint_attributes(constraints: Any) -> dict[str, int]:
    """The attributes ``matchAttribute`` constraints compare, each once, with its place in
    the values kept of each free matching device (``_Tally.free_by_node``)."""
    out: dict[str, int] = {}
    for c in constraints if isinstance(constraints, (list, tuple)) else []:
        attr = c.get("matchAttribute") if isinstance(c, Mapping) else None
        if attr and isinstance(attr, str) and attr not in out:
            out[attr] = len(out)
    return out


def _shared_in_use(
    claim: Mapping[str, Any], claims: Sequence[Mapping[str, Any]], shared: dict[str, Any]
) -> Mapping[str, str] | None:
    """``_in_use`` of ``claim``, an unallocated claim, from one reading of the claims'
    allocations kept in ``shared`` for all the claims explained with it. It is every
    allocation when ``claim``'s uid is the uid of no claim that holds a device (an API
    server gives each claim its own); otherwise (a uid shared or missing, as in a
    hand-made listing) None, and ``_in_use`` reads the claims for ``claim`` alone."""
    if "in_use" not in shared:
        shared["in_use"] = allocations(claims)
    in_use, holders = shared["in_use"]
    try:
        return in_use if holders is not None and metadata(claim).get("uid") not in holders else None
    except TypeError:  # the claim's own uid cannot be looked up
        return None


def _in_use(claim: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``driver/pool/device`` -> ``namespace/name`` of the other claim (not ``claim``)
    that has it allocated."""
    uid = metadata(claim).get("uid")
    return allocations(c for c in claims if metadata(c).get("uid") != uid)[0]


class _Allocations:
    """The fold (``kube.client.PagedList.derive``) of :func:`allocations`; without
    ``holders`` the claims' uids are not collected (None)."""

    def __init__(self, holders: bool = True) -> None:
        self.in_use: dict[str, str] = {}
        self.holders: set[Any] | None = set() if holders else None

    def add(self, claim: Mapping[str, Any]) -> None:
        devices = allocated_devices(claim)
        if not devices:
            return
        holder = key(claim)
        for d in devices:
            self.in_use[d] = holder
        if self.holders is not None:
            try:
                self.holders.add(metadata(claim).get("uid"))
            except TypeError:
                self.holders = None

    def result(self) -> tuple[dict[str, str], set[Any] | None]:
        return self.in_use, self.holders


def allocations_fold(holders: bool = True) -> tuple[str, Callable[[], _Allocations]]:
    """The key and the fold of the claims' allocations that explaining unallocated claims
    reads, for a caller that walks the claims for more (``validate.cluster.all_checks``
    with the CounterSets' walk): a child process that explains them then finds them
    kept in the listing it was forked with. Without ``holders``, who holds each device
    only (the uids of :func:`allocations` None), under a key of its own: what the report
    reads (about 17 MiB less at 100,000 claims)."""
    if holders:
        return "claim-allocations", _Allocations
    return "claim-allocations-without-holders", lambda: _Allocations(holders=False)


def allocations(
    claims: Iterable[Mapping[str, Any]], keep: bool = True
) -> tuple[dict[str, str], set[Any] | None]:
    """``driver/pool/device`` -> ``namespace/name`` of the claim of ``claims`` that has it
    allocated, and the uids of the claims that hold a device (None when one is no key of
    a set: a list, which no API server gives). Of a ``PagedList``, the value kept there
    (shared: read it, do not change it); with ``keep`` False, computed for this caller
    and kept nowhere, without the uids (None)."""
    if keep:
        found: tuple[dict[str, str], set[Any] | None] = vk.folded(
            claims, dict([allocations_fold()])
        )[0]
        return found
    return vk.folded(claims, {}, [_Allocations(holders=False)])[0]


def _waiting_pods(
    claim: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] | PodIndex
) -> list[dict[str, str]]:
    """The live pods that use ``claim``: ``{"pod": "ns/name", "scheduler": message}``,
    the message of a PodScheduled condition that is not True (``""`` when none)."""
    m = metadata(claim)
    out = []
    index = pods if isinstance(pods, PodIndex) else PodIndex(pods)
    for pod in index.users.get((m.get("namespace", ""), m.get("name", "")), []):
        msg = ""
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") != "True":
                msg = cond.get("message") or cond.get("reason") or ""
        out.append({"pod": key(pod), "scheduler": msg})
    return out


def _claim_verdict(
    requests_out: Sequence[Mapping[str, Any]],
    verdicts: list[str],
    constraints_out: Sequence[Mapping[str, Any]],
) -> tuple[str, str]:
    """``(verdict, summary)`` of the claim from those of its requests and constraints."""
    if not requests_out:
        return "no-request", "the claim has no device requests"
    if any(c["fits"] is False for c in constraints_out) and all(v == "would-fit" for v in verdicts):
        verdicts = ["constraint"]
    # firstAvailable: one satisfiable alternative is enough per request
    if "would-fit" not in verdicts:
        verdict = min(verdicts, key=_VERDICT_ORDER.index)
    else:
        verdict = "would-fit"
    if any(c["fits"] is False for c in constraints_out):
        verdict = "constraint" if verdict == "would-fit" else verdict
    parts = [r["summary"] for r in requests_out]
    parts += [c["summary"] for c in constraints_out if c["fits"] is False]
    return verdict, "; ".join(parts)


class _Tally:
    """How the devices of one request alternative fare: reasons a device is not free,
    CEL errors, selectors that cannot be judged, rejections per selector, per node
    counts and, per node, the values of the constrained attributes of each free matching
    device (``_constraint_attributes``)."""

    def __init__(self) -> None:
        self.total = 0
        self.reasons: Counter = Counter()
        self.errors: Counter = Counter()
        self.unjudged: Counter = Counter()
        self.rejected: Counter = Counter()
        self.per_node: dict[str, dict[str, Any]] = {}
        self.free_by_node: dict[str, list[tuple[str, ...]]] = {}
        self.matching = 0
        self.free = 0
        #: devices free of claims but short of shared counters, and per (CounterSet id,
        #: counter) the shortfall with the most needed and how many devices it stops
        self.blocked = 0
        self.exhausted: dict[tuple[str, str], tuple[ccounters.Shortfall, int]] = {}

    def short(self, shortfalls: Sequence[ccounters.Shortfall]) -> str:
        """Count a device stopped by ``shortfalls``; its reason (the first shortfall)."""
        self.blocked += 1
        for sf in shortfalls:
            k = (sf.counter_set, sf.counter)
            prev, n = self.exhausted.get(k, (sf, 0))
            self.exhausted[k] = (sf if sf.needed > prev.needed else prev, n + 1)
        more = f" and {len(shortfalls) - 1} more counters" if len(shortfalls) > 1 else ""
        return f"shared counter exhausted: {shortfalls[0].text()}{more}"


def _selector_stages(
    class_name: str, cls: Mapping[str, Any], alt: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """``(stage, expression)`` of each selector in the scheduler's order: the
    DeviceClass's, then the request's."""
    stages = [
        (f"class {class_name} selector #{i}", e)
        for i, e in enumerate(cel_selectors(cls.get("spec") or {}))
    ]
    stages += [(f"request selector #{i}", e) for i, e in enumerate(cel_selectors(alt))]
    return stages


#: What the selectors made of one device: why they reject it (None: all match) and the
#: tally it counts in (``unjudged``, ``errors`` or ``rejected``) under which key.
#: (pylint of ansible-test sanity cannot type "X | None" outside an annotation)
_Judged = tuple[Optional[str], Optional[str], Optional[str]]  # noqa: UP045


def _judge(
    act: Mapping[str, Any],
    stages: Sequence[tuple[str, str]],
    compiled: _Compiled,
    class_name: str,
) -> _Judged:
    """The selectors of ``stages`` on the CEL activation of one device, in order: the
    first failing stage's reason, or None when all match."""
    for stage, expr in stages:
        sel = compiled.get(expr)
        if isinstance(sel, Unjudged):
            why = f"{stage}: {sel}"
            return why, "unjudged", why
        if isinstance(sel, str):
            why = f"{stage} does not compile: {sel}"
            return why, "errors", why
        res = sel.evaluate(act)
        if res.error:
            why = f"{stage}: CEL runtime error: {res.error}"
            return why, "errors", why
        if not res.matched:
            prefix = f"class {class_name}: " if stage.startswith("class") else ""
            return prefix + (res.reason or f"{stage} is false"), "rejected", stage
    return None, None, None


#: ``_rejection``'s ``shared``: the sharing function (``_sharing``), the verdicts by what
#: it gives, and ``cel.evaluate.device_values_convert``'s verdicts by value.
_Shared = tuple[
    Optional[Callable[[Published], Any]],  # noqa: UP045 - as _Judged
    dict[Any, _Judged],
    dict[Any, bool],
]

#: A word of a selector after which its verdict may read every entry of a map of the
#: device (a macro, or ``size``): devices then share no verdict (``_sharing``).
_WHOLE_MAP_RE = re.compile(r"\b(?:all|exists|exists_one|map|filter|size)\b")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The reads of a device whose entry a selector names in its text: an attribute or a
#: capacity by a literal domain and name, the driver, ``allowMultipleAllocations``. A
#: selector that reads ``device`` any other way (a map whole, a computed key) shares no
#: verdict.
_NAMED_READ_RE = re.compile(
    r"""\bdevice\s*\.\s*(?:(?:attributes|capacity)\s*\[\s*(['"])[^'"\\]*\1\s*\]\s*"""
    r"""(?:\.\s*[A-Za-z_]\w*|\[\s*(['"])[^'"\\]*\2\s*\])|driver\b|allowMultipleAllocations\b)"""
)


def _sharing(stages: Sequence[tuple[str, str]]) -> Callable[[Published], Any] | None:
    """A function of a device that gives all the selectors of ``stages`` can read of it:
    its driver, ``allowMultipleAllocations`` and each attribute and capacity whose name
    is a word of a selector. Devices it gives the same value get the same verdict, so
    the selectors run once for them: a fleet publishes a few kinds of device many times,
    each with its own ``uuid`` and ``index`` that no selector names. None when a selector
    may read more of the device than the entries it names (``_WHOLE_MAP_RE``,
    ``_NAMED_READ_RE``)."""
    text = " ".join(expr for _stage, expr in stages)
    if _WHOLE_MAP_RE.search(text) or re.search(r"\bdevice\b", _NAMED_READ_RE.sub(" ", text)):
        return None
    words = frozenset(_WORD_RE.findall(text))
    named: dict[Any, bool] = {}  # name of an attribute or capacity -> a selector names it

    def read(member: str, values: Any) -> Any:
        if not isinstance(values, Mapping):
            return repr(values)
        out = []
        for name, value in values.items():
            wanted = named.get(name)
            if wanted is None:
                wanted = named[name] = str(name).rpartition("/")[2] in words
            if wanted:
                out.append((str(name), vcel.value_key(member, value)))
        # in the device's own order: of two entries that name one attribute (``productName``
        # and ``gpu.nvidia.com/productName``, which no API server takes) CEL reads the last
        return tuple(out)

    def sharing(dev: Published) -> Any:
        device = dev.device
        body = device_fields(device)
        return (
            dev.driver,
            repr(body.get("allowMultipleAllocations")),
            read("attributes", body.get("attributes")),
            read("capacity", body.get("capacity")),
        )

    return sharing


def _rejection(
    dev: Published,
    stages: Sequence[tuple[str, str]],
    compiled: _Compiled,
    class_name: str,
    tally: _Tally,
    shared: _Shared | None = None,
) -> str | None:
    """Why the selectors reject ``dev`` (the first failing stage), or None when all
    match; counts CEL errors, unjudged selectors and rejections in ``tally``. ``shared``:
    ``_sharing``'s function for ``stages``, the verdicts it has given so far, and the
    verdicts of ``cel.evaluate.device_values_convert`` on the values seen: a device whose
    verdict is known is still judged usable value by value, so that a value CEL cannot
    hold is found on every device, as kube-scheduler finds it."""
    sharing, verdicts, converted = shared or (None, {}, {})
    seen = sharing(dev) if sharing is not None else None
    judged = verdicts.get(seen) if seen is not None else None
    if judged is None or not vcel.device_values_convert(dev.device, converted):
        try:
            act = vcel.device_activation(dev.driver, dev.device)
        except vcel.CelError as err:
            return f"device not usable by CEL: {err}"
        judged = _judge(act, stages, compiled, class_name)
        if seen is not None:
            verdicts[seen] = judged
    why, counted, under = judged
    if counted is not None:
        getattr(tally, counted)[under] += 1
    return why


def _tally_devices(
    devices: Iterable[Published],
    stages: Sequence[tuple[str, str]],
    compiled: _Compiled,
    class_name: str,
    taken: tuple[Mapping[str, str], Mapping[str, ccounters.CounterSet]],
    matched: Iterable[str] = (),
) -> _Tally:
    """Every published device judged against the selectors, then against the other
    claims' allocations: ``taken`` is (``driver/pool/device`` -> the claim holding it,
    the CounterSets by id with what those claims consume). Of a free matching device the
    values of the attributes ``matched`` are kept, for the constraints."""
    in_use, sets = taken
    tally = _Tally()
    shared: _Shared = (_sharing(stages), {}, {})
    per_node = tally.per_node
    for dev in devices:
        tally.total += 1
        n = per_node.get(dev.node)
        if n is None:
            n = per_node[dev.node] = {"total": 0, "matching": 0, "free": 0, "reasons": Counter()}
        n["total"] += 1
        why = _rejection(dev, stages, compiled, class_name, tally, shared)
        if why is None:
            n["matching"] += 1
            tally.matching += 1
            holder = in_use.get(dev.id)
            if holder is not None:
                why = f"allocated to claim {holder}"
            elif short := ccounters.shortfalls(sets, dev.driver, dev.pool, dev.device):
                why = tally.short(short)
            else:
                n["free"] += 1
                tally.free += 1
                tally.free_by_node.setdefault(dev.node, []).append(
                    tuple(str(_attr(dev.device, dev.driver, a)) for a in matched)
                )
                continue
        tally.reasons[why] += 1
        n["reasons"][why] += 1
    return tally


def _nodes_out(
    tally: _Tally, mode: str, need: int, node_ready: Mapping[str, bool]
) -> list[dict[str, Any]]:
    """Per node: devices, matching and free ones, whether the request fits there."""
    nodes_out = []
    for node, n in sorted(tally.per_node.items()):
        fits = (
            n["free"] >= need
            if mode == "ExactCount"
            else n["matching"] > 0 and n["free"] == n["matching"]
        )
        nodes_out.append(
            {
                "node": node,
                "ready": node_ready.get(node, node.startswith("(")),
                "total": n["total"],
                "matching": n["matching"],
                "free": n["free"],
                "fits": fits,
                "reasons": [[r, c] for r, c in n["reasons"].most_common()],
            }
        )
    return nodes_out


def _count(value: Any) -> int:
    """A request's ``count``: the number given (an int, or its text), else 1, the API's
    default (an API server refuses any other count)."""
    if isinstance(value, bool):
        return 1
    try:
        return int(value) if value else 1
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite count
        return 1


def _explain_alternative(
    alt: Mapping[str, Any],
    classes: Mapping[str, Mapping[str, Any]],
    devices: Iterable[Published],
    taken: tuple[Mapping[str, str], Mapping[str, ccounters.CounterSet]],
    nodes: tuple[Mapping[str, bool], Mapping[str, int]],
    compiled: _Compiled,
) -> tuple[dict[str, Any], dict[str, list[tuple[str, ...]]], str]:
    """One request alternative explained: ``(request entry of explain_claim, per node the
    constrained attributes' values of each free matching device, verdict)``. ``nodes``:
    the nodes' readiness and the attributes the claim's constraints compare."""
    node_ready, matched = nodes
    class_name = alt.get("deviceClassName", "")
    mode = alt.get("allocationMode") or "ExactCount"
    count = _count(alt.get("count")) if mode == "ExactCount" else 0
    base = {
        "request": alt.get("name", ""),
        "device_class": class_name,
        "count": count,
        "mode": mode,
        "total": 0,
        "matching": 0,
        "free": 0,
        "reasons": [],
        "errors": [],
        "selectors": [],
        "counter_sets": [],
        "nodes": [],
    }
    cls = classes.get(class_name)
    if cls is None:
        base["total"] = sum(1 for _device in devices)
        base["summary"] = (
            f"request {alt.get('name')}: DeviceClass {class_name!r} does not exist "
            f"(classes: {', '.join(sorted(classes)) or 'none'})"
        )
        return base, {}, "class-missing"
    stages = _selector_stages(class_name, cls, alt)
    tally = _tally_devices(devices, stages, compiled, class_name, taken, matched)
    need = max(count, 1)
    base["total"] = tally.total
    base["matching"] = tally.matching
    base["free"] = tally.free
    base["reasons"] = [[r, c] for r, c in tally.reasons.most_common()]
    base["errors"] = [[r, c] for r, c in tally.errors.most_common()]
    base["selectors"] = [
        {"selector": stage, "expression": expr, "rejects": tally.rejected[stage]}
        for stage, expr in stages
        if tally.rejected[stage]
    ]
    base["nodes"] = _nodes_out(tally, mode, need, node_ready)
    base["counter_sets"] = _counter_sets_out(tally, taken[1])
    label = (
        f"request {alt.get('name')} ({class_name}, "
        f"{mode}{'' if mode != 'ExactCount' else f' {count}'})"
    )
    verdict, base["summary"] = _alternative_verdict(label, base, tally.total, tally, need, taken[1])
    return base, tally.free_by_node, verdict


def _alternative_verdict(
    label: str,
    base: Mapping[str, Any],
    total: int,
    tally: _Tally,
    need: int,
    sets: Mapping[str, ccounters.CounterSet],
) -> tuple[str, str]:
    """``(verdict, summary)`` of one request alternative over ``total`` published
    devices, ``need`` of them wanted on one node."""
    nodes_out = base["nodes"]
    fitting = [x["node"] for x in nodes_out if x["fits"] and x["ready"]]
    if tally.errors:
        return "cel-error", (
            f"{label}: CEL runtime error, kube-scheduler fails the whole claim: "
            f"{_top(tally.errors)}"
        )
    if tally.unjudged:
        return "cannot-judge", (
            f"{label}: a selector cannot be judged offline: {_top(tally.unjudged)}"
        )
    if base["matching"] == 0:
        summary = (
            f"{label}: 0 of {total} devices match: "
            f"{_top(tally.reasons) or 'no device is published'}"
        )
        if base["selectors"]:
            summary += "; rejected by " + ", ".join(
                f"{s['selector']} {s['expression']!r} ({s['rejects']})" for s in base["selectors"]
            )
        return "no-device", summary
    if not fitting and tally.blocked and base["free"] < need:
        allocated = base["matching"] - tally.blocked - base["free"]
        return "counters", (
            f"{label}: {base['matching']} of {total} devices match: {allocated} allocated to "
            f"other claims, {tally.blocked} not allocated but short of shared counters, "
            f"{base['free']} free (need {need} on one node): " + _exhausted_text(tally, sets)
        )
    if not fitting and base["free"] < base["matching"] and base["free"] < need:
        taken = Counter({r: c for r, c in tally.reasons.items() if r.startswith("allocated to")})
        return "in-use", (
            f"{label}: {base['matching']} of {total} devices match but only "
            f"{base['free']} free (need {need} on one node): " + _top(taken)
        )
    if not fitting:
        best = max(nodes_out, key=lambda x: x["free"])
        return "no-device", (
            f"{label}: {base['matching']} of {total} devices match, but no Ready node "
            f"has {need} free (most: {best['free']} on {best['node']})"
        )
    return "would-fit", (
        f"{label}: {base['free']} of {total} devices match and are free; fits on "
        f"{', '.join(fitting[:5])}{' ...' if len(fitting) > 5 else ''}"
    )


def _counter_sets_out(
    tally: _Tally, sets: Mapping[str, ccounters.CounterSet]
) -> list[dict[str, Any]]:
    """Per CounterSet that stops a matching device: its node, name, GPU, free memory
    slices, and each exhausted counter with capacity, consumption, the most a stopped
    device needs, the claims holding it and how many matching devices it stops."""
    by_set: dict[str, list[dict[str, Any]]] = {}
    for (set_id, _counter), (sf, n) in sorted(
        tally.exhausted.items(), key=lambda kv: (kv[0][0], ccounters.counter_order(kv[0][1]))
    ):
        by_set.setdefault(set_id, []).append({**sf.to_dict(), "devices": n})
    out = []
    for set_id, exhausted in by_set.items():
        cs = sets.get(set_id)
        out.append(
            {
                "node": exhausted[0]["node"],
                "counter_set": set_id.rsplit("/", 1)[-1],
                "gpu": cs.gpu if cs else "",
                "memory_slices_free": cs.free_memory_slices() if cs else [],
                "exhausted": [
                    {k: v for k, v in e.items() if k not in ("node", "counter_set")}
                    for e in exhausted
                ],
            }
        )
    return out


def _exhausted_text(tally: _Tally, sets: Mapping[str, ccounters.CounterSet], shown: int = 8) -> str:
    """The exhausted counters in the scheduler's terms, per GPU: ``gpu-0-counter-set on
    node-a: memory-slice-1 1 of 1 consumed, needs 1 (held by ns/a); ...; memory slices
    free: 0, 2``."""
    by_set: dict[str, list[ccounters.Shortfall]] = {}
    for (set_id, _counter), (sf, _n) in tally.exhausted.items():
        by_set.setdefault(set_id, []).append(sf)
    parts = []
    for set_id, shortfalls in sorted(by_set.items()):
        shortfalls.sort(key=lambda sf: ccounters.counter_order(sf.counter))
        items = [f"{sf.counter} {_amounts_held(sf)}" for sf in shortfalls[:shown]]
        if len(shortfalls) > shown:
            items.append(f"{len(shortfalls) - shown} more counters")
        cs = sets.get(set_id)
        free = ", ".join(map(str, cs.free_memory_slices())) if cs else ""
        parts.append(
            f"{set_id.rsplit('/', 1)[-1]} on {shortfalls[0].node or '?'}: {'; '.join(items)}; "
            f"memory slices free: {free or 'none'}"
        )
    return " | ".join(parts)


def _amounts_held(sf: ccounters.Shortfall, shown: int = 3) -> str:
    """``1 of 1 consumed, needs 1 (held by ns/a, ns/b and 5 more)``."""
    if not sf.counter:
        return "(counter set not published in the device's pool)"
    fa = ccounters.format_amount
    text = (
        f"{fa(sf.counter, sf.consumed)} of {fa(sf.counter, sf.capacity)} consumed, "
        f"needs {fa(sf.counter, sf.needed)}"
    )
    if sf.holders:
        more = len(sf.holders) - shown
        text += (
            f" (held by {', '.join(sf.holders[:shown])}{f' and {more} more' if more > 0 else ''})"
        )
    return text


def _explain_constraints(
    constraints: Sequence[Mapping[str, Any]],
    requests_out: Sequence[Mapping[str, Any]],
    candidates: Mapping[str, Mapping[str, list[tuple[str, ...]]]],
    matched: Mapping[str, int],
) -> list[dict[str, Any]]:
    """``matchAttribute`` constraints: is there a node where each constrained request has
    its count of free matching devices that all share one value of the attribute?
    ``candidates``: per request and node, the values of the attributes ``matched``
    (``_constraint_attributes``) of each free matching device."""
    out = []
    counts = {r["request"]: max(int(r["count"]), 1) for r in requests_out}
    for c in constraints:
        attr = c.get("matchAttribute")
        if not isinstance(attr, str) or attr not in matched:  # none, or no name (a hand-made
            # object's list or number: no API server serves one)
            out.append({"constraint": dict(c), "fits": None, "summary": "not evaluated"})
            continue
        at = matched[attr]
        named = c.get("requests")
        names = [
            n
            for n in (as_list(named) if named else list(counts))
            if isinstance(n, str) and n in candidates
        ]
        nodes = set.intersection(*(set(candidates[n]) for n in names)) if names else set()
        ok_nodes = []
        seen_values: Counter = Counter()
        for node in sorted(nodes):
            values_ok = None
            per_req = []
            for n in names:
                vals = Counter(values[at] for values in candidates[n][node])
                seen_values.update(vals)
                per_req.append({v for v, k in vals.items() if k >= counts[n] and v != "None"})
            values_ok = set.intersection(*per_req) if per_req else set()
            if values_ok:
                ok_nodes.append(node)
        fits = bool(ok_nodes)
        summary = (
            f"constraint matchAttribute {attr}: satisfied on {', '.join(ok_nodes[:5])}"
            if fits
            else f"constraint matchAttribute {attr} over {', '.join(names)}: no node has enough "
            f"free matching devices that share one value (values seen: "
            f"{', '.join(f'{v} ({k})' for v, k in seen_values.most_common(4)) or 'none'})"
        )
        out.append({"constraint": dict(c), "fits": fits, "summary": summary})
    return out
