"""Explaining many devices and many claims: devices the selectors cannot tell apart share
one evaluation (``claims.explain._sharing``), and unallocated claims with the same requests
share one explanation of them (``explain_claim``'s ``shared``, ``find_pending``). Every
figure must be the one each device and each claim gets alone."""

from __future__ import annotations

import copy
import gc
import types
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import evaluate as vcel
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import explain as cexplain
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pending as cpending
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

from tests.unit.validate_objects import (
    GPU_CLASS,
    MIG_CLASS,
    claim,
    gpu_device,
    mig_device,
    mig_request,
    node,
    pod,
    resource_slice,
)

pytestmark = pytest.mark.unit

NOW = 1767225600.0 + 3600  # 2026-01-01T01:00:00Z


def fleet() -> list[dict[str, Any]]:
    """Two nodes of whole GPUs (two driver versions, two memory sizes) and two of MIG
    devices (two profiles), each device with its own uuid."""
    slices = [
        resource_slice("gpu-1", [gpu_device(i, f"GPU-1-{i}") for i in range(4)]),
        resource_slice(
            "gpu-2",
            [gpu_device(i, f"GPU-2-{i}", "570.1.0", memory_mib=81559) for i in range(4)],
        ),
    ]
    for n, profile in (("gpu-3", "1g.18gb"), ("gpu-4", "3g.71gb")):
        devices = [
            mig_device(g, f"GPU-{n}-{g}", f"MIG-{n}-{g}-{s}", profile, s)
            for g in range(2)
            for s in range(3)
        ]
        slices.append(resource_slice(n, devices))
    return slices


def request(expression: str, device_class: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {
        "name": "r",
        "exactly": {
            "deviceClassName": device_class,
            "selectors": [{"cel": {"expression": expression}}],
        },
    }


SELECTORS = [
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'",
    "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('575.0.0'))",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].uuid == 'GPU-1-2'",
    "device.attributes['gpu.nvidia.com']['uuid'].startsWith('GPU-2')",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].profile == 'x'",
    "device.attributes['gpu.nvidia.com'].exists(k, k == 'profile')",
    "size(device.attributes['gpu.nvidia.com']) > 6",
    "device.attributes['gpu.nvidia.com'].?profile.orValue('') == '3g.71gb'",
    "'profile' in device.attributes['gpu.nvidia.com']",
]


@pytest.mark.parametrize("expression", SELECTORS)
@pytest.mark.parametrize("device_class", ["gpu.nvidia.com", "mig.nvidia.com"])
def test_shared_verdicts_are_each_devices_own(
    expression: str, device_class: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    slices = fleet()
    c = claim("c", requests=[request(expression, device_class)])
    nodes = [node(f"gpu-{i}") for i in range(1, 5)]
    shared = cexplain.explain_claim(c, [GPU_CLASS, MIG_CLASS], slices, [c], nodes)
    monkeypatch.setattr(cexplain, "_sharing", lambda stages: None)
    alone = cexplain.explain_claim(c, [GPU_CLASS, MIG_CLASS], slices, [c], nodes)
    assert shared == alone


def test_devices_told_apart_by_no_selector_are_evaluated_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    evaluate = vcel.Selector.evaluate

    def counted(self: vcel.Selector, activation: Any) -> Any:
        calls.append(self.expression)
        return evaluate(self, activation)

    monkeypatch.setattr(vcel.Selector, "evaluate", counted)
    slices = fleet()
    c = claim("c", requests=[mig_request("1g.10gb")])
    ex = cexplain.explain_claim(
        c, [GPU_CLASS, MIG_CLASS], slices, [c], [node(f"gpu-{i}") for i in range(1, 5)]
    )
    (req,) = ex["requests"]
    assert (req["total"], req["matching"]) == (20, 0)
    assert req["reasons"] == [
        ["class mig.nvidia.com: type is gpu, wanted mig", 8],
        ["profile is 1g.18gb, wanted 1g.10gb", 6],
        ["profile is 3g.71gb, wanted 1g.10gb", 6],
    ]
    # whole GPUs: two kinds for the class selector (driver versions and memory are
    # named by no selector, so one); MIG devices: two profiles, each through both stages
    assert len(calls) == 1 + 2 * 2, calls


class _Walked(list):  # type: ignore[type-arg]
    """A list that counts the walks over it."""

    walks = 0

    def __iter__(self) -> Any:
        self.walks += 1
        return super().__iter__()


def test_pending_claims_with_the_same_requests_are_explained_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slices = fleet()
    claims = [
        claim(f"c{i}", requests=[mig_request("1g.10gb")], created="2026-01-01T00:00:00Z")
        for i in range(3)
    ]
    other = claim("d", requests=[mig_request("3g.71gb")], created="2026-01-01T00:00:00Z")
    claims.append(other)
    pods = [pod(f"p{i}", phase="Pending", claims=[c["metadata"]["name"]]) for i, c in
            enumerate(claims)]  # fmt: skip
    nodes = [node(f"gpu-{i}") for i in range(1, 5)]
    args = ([MIG_CLASS], nodes, NOW, 300)
    calls: list[str] = []
    explain = cexplain._explain_requests

    def counted(claim: Any, *rest: Any) -> Any:
        calls.append(claim["metadata"]["name"])
        return explain(claim, *rest)

    monkeypatch.setattr(cexplain, "_explain_requests", counted)
    found = cpending.find_pending(claims, pods, slices, args[0], args[1], args[2], args[3])
    assert calls == ["c0", "d"]
    # the other claims' allocations are read once for both evaluations: the claims are
    # walked as often as for one evaluation
    walks = [_Walked(claims), _Walked(claims[:3])]
    for walked in walks:
        cpending.find_pending(walked, pods, slices, *args)
    assert walks[0].walks == walks[1].walks
    monkeypatch.setattr(cexplain, "_explain_requests", explain)
    for p, c in zip(found, claims, strict=True):
        (alone,) = cpending.find_pending([c], pods, slices, *args)
        assert p.to_dict() == alone.to_dict()
    assert [p.claim for p in found] == [f"default/{c['metadata']['name']}" for c in claims]
    assert found[0].explain["pods"] == [{"pod": "default/p0", "scheduler": ""}]
    assert found[2].explain["pods"] == [{"pod": "default/p2", "scheduler": ""}]
    # the same requests: one evaluation, shared; other requests: their own
    assert found[1].explain["requests"] is found[0].explain["requests"]
    assert found[3].explain["requests"] is not found[0].explain["requests"]


def test_an_allocated_claim_is_not_taken_for_another_with_the_same_requests() -> None:
    slices = fleet()
    held = claim("held", requests=[mig_request("1g.18gb")])
    held["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "r", "driver": "gpu.nvidia.com", "pool": "gpu-3",
                     "device": "gpu-0-mig-1g18gb-19-0"}
                ]
            }
        }
    }  # fmt: skip
    twin = copy.deepcopy(held)
    twin["metadata"].update(name="twin", uid="uid-twin")
    twin["status"] = {}
    shared: dict[str, Any] = {}
    nodes = [node(f"gpu-{i}") for i in range(1, 5)]
    everyone = [held, twin]
    a = cexplain.explain_claim(held, [MIG_CLASS], slices, everyone, nodes, shared=shared)
    b = cexplain.explain_claim(twin, [MIG_CLASS], slices, everyone, nodes, shared=shared)
    assert a == cexplain.explain_claim(held, [MIG_CLASS], slices, everyone, nodes)
    assert b == cexplain.explain_claim(twin, [MIG_CLASS], slices, everyone, nodes)
    assert a["requests"][0]["free"] == b["requests"][0]["free"] + 1


def test_a_device_with_a_value_cel_cannot_hold_is_found_after_its_twins() -> None:
    """Three devices the selectors cannot tell apart; the last has a version no selector
    names that CEL cannot hold: it is still not usable, as kube-scheduler finds it."""
    devices = [gpu_device(i, f"GPU-1-{i}") for i in range(3)]
    devices[2]["attributes"]["cudaComputeCapability"] = {"version": "nine"}
    slices = [resource_slice("gpu-1", devices)]
    c = claim("c", requests=[request("device.attributes['gpu.nvidia.com'].type == 'gpu'")])
    ex = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])
    (req,) = ex["requests"]
    assert (req["total"], req["matching"], req["free"]) == (3, 2, 2)
    ((reason, count),) = req["reasons"]
    assert count == 1 and reason.startswith("device not usable by CEL: device gpu-2")


def test_values_are_judged_convertible_one_by_one() -> None:
    seen: dict[Any, bool] = {}
    good = gpu_device(0, "GPU-a")
    assert vcel.device_values_convert(good, seen)
    vcel.device_activation("gpu.nvidia.com", good)  # and so it does
    # the strings always convert and are not kept: the versions and the capacities are
    kept = {k[1] for k in seen}
    assert all(seen.values()) and kept == {"version", "value"} and len(seen) == 3, seen
    for bad in (
        {"attributes": {"x": {"version": "nine"}}},
        {"attributes": {"x": {"float": 1.5}}},
        {"attributes": {"x": "text"}},
        {"attributes": ["x"]},
        {"capacity": {"memory": {"value": "lots"}}},
    ):
        assert not vcel.device_values_convert(bad, seen), bad
        with pytest.raises((vcel.CelError, TypeError, AttributeError, ValueError)):
            vcel.device_activation("gpu.nvidia.com", bad)


def test_validate_keeps_a_bounded_explanation_of_each_pending_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as cl
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc

    monkeypatch.setattr(vc, "MAX_CLAIM_FINDINGS", 2)
    monkeypatch.setattr(vc, "MAX_EXPLAINED_NODES", 3)
    claims = [
        claim(f"c{i}", requests=[mig_request("1g.18gb")], created="2026-01-01T00:00:00Z")
        for i in range(3)
    ]
    pods = [pod(f"p{i}", phase="Pending", claims=[f"c{i}"]) for i in range(3)]
    listing = cl.Listing(
        pods=pods,
        claims=claims,
        slices=fleet(),
        classes=[GPU_CLASS, MIG_CLASS],
        nodes=[node(f"gpu-{i}") for i in range(1, 5)],
    )
    settings = cl.Settings(driver="gpu.nvidia.com", device_classes=[], now=NOW)
    check = next(c for c in vc.claims_checks(listing, settings) if c.id == "claims.pending")
    assert check.status == "fail"
    assert [p.subject for p in check.problems] == ["default/c0", "default/c1", None]
    assert "1 more pending claim(s)" in check.problems[-1].message
    assert check.data["pending_total"] == 3 and len(check.data["pending"]) == 2
    (req,) = check.data["pending"][0]["explain"]["requests"]
    assert req["nodes_total"] == 4
    # the nodes it fits on first: gpu-3 publishes six free 1g.18gb devices
    assert [n["node"] for n in req["nodes"]][:1] == ["gpu-3"] and len(req["nodes"]) == 3
    whole = cexplain.explain_claim(
        claims[0], listing.classes, listing.slices, claims, listing.nodes, pods
    )["requests"][0]["reasons"]
    assert req["reasons"] == whole[:3] and req["reasons_total"] == len(whole) > 0


def test_an_attribute_not_of_its_type_makes_its_device_unusable_not_the_explanation_fail() -> None:
    devices = [gpu_device(0, "GPU-a"), gpu_device(1, "GPU-b")]
    devices[1]["attributes"]["index"] = {"int": "many"}
    slices = [resource_slice("gpu-1", devices)]
    c = claim("c", requests=[request("device.attributes['gpu.nvidia.com'].type == 'gpu'")])
    ex = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])
    (req,) = ex["requests"]
    assert (req["total"], req["matching"]) == (2, 1)
    ((reason, count),) = req["reasons"]
    assert count == 1 and "attribute index" in reason and "is not of its type" in reason
    with pytest.raises(vcel.CelError):
        vcel.device_activation("gpu.nvidia.com", devices[1])


_CODE = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def _reaches_a_device(root: Any) -> bool:
    """Whether a published device (``claims.slices.Published``) or a device object of a
    slice can be reached from ``root``."""
    seen, todo = set(), [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, type, *_CODE)):
            continue  # a function's or a module's globals are not what ``root`` holds
        seen.add(id(obj))
        if isinstance(obj, cslices.Published):
            return True
        if (
            isinstance(obj, dict)
            and isinstance(obj.get("attributes"), dict)
            and "uuid" in obj["attributes"]
        ):
            return True
        if isinstance(obj, vk.PagedList):
            continue  # the stored listing itself, not a copy of its devices
        todo.extend(gc.get_referents(obj))
    return False


def test_explaining_many_claims_holds_no_device_between_them() -> None:
    """The published devices are read from the stored slices again for each request
    evaluated: what ``shared`` keeps between claims holds none of them (at 10,000 nodes a
    list of the 160,000 devices held about 230 MiB), and the explanations are the same
    as over a list of the slices, a ``matchAttribute`` constraint among them."""
    slices = fleet()
    paged = vk.PagedList(copy.deepcopy(slices), page_size=1)
    pair = claim(
        "pair",
        requests=[{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}],
        constraints=[{"requests": ["gpus"], "matchAttribute": "gpu.nvidia.com/driverVersion"}],
    )
    mig = claim("mig", requests=[mig_request("1g.18gb")])
    nodes = [node(f"gpu-{i}") for i in range(1, 5)]
    shared: dict[str, Any] = {}
    for c in (pair, mig):
        ex = cexplain.explain_claim(c, [GPU_CLASS, MIG_CLASS], paged, [c], nodes, shared=shared)
        assert ex == cexplain.explain_claim(c, [GPU_CLASS, MIG_CLASS], slices, [c], nodes)
        assert not _reaches_a_device(shared)
    ex = cexplain.explain_claim(pair, [GPU_CLASS], slices, [pair], nodes)
    (constraint,) = ex["constraints"]
    assert constraint["fits"] is True, constraint
    assert constraint["summary"].startswith(
        "constraint matchAttribute gpu.nvidia.com/driverVersion: satisfied on gpu-1"
    )


@pytest.mark.parametrize("uids", ["missing", "shared"])
def test_claims_whose_uids_an_api_server_would_not_give_are_explained_as_alone(
    uids: str,
) -> None:
    """The allocations read once for all the pending claims leave out no claim's devices:
    where a pending claim's uid is missing or also a holder's (a hand-made listing), that
    claim's allocations are read for it alone, as ``explain_claim`` reads them."""
    slices = [resource_slice("n1", [gpu_device(i, f"GPU-{i}") for i in range(2)])]
    first = claim("a", created="2026-01-01T00:00:00Z")
    holder = claim("h", allocated=[("n1", "gpu-0")])
    pair = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}
    second = claim("c", requests=[pair], created="2026-01-01T00:00:00Z")
    for c in (first, holder):
        if uids == "missing":
            del c["metadata"]["uid"]
        else:
            c["metadata"]["uid"] = "same"
    claims = [first, holder, second]
    pods = [pod("pa", claims=["a"], phase="Pending"), pod("pc", claims=["c"], phase="Pending")]
    found = cpending.find_pending(claims, pods, slices, [GPU_CLASS], [node("n1")], NOW, 300)
    assert [p.claim for p in found] == ["default/a", "default/c"]
    for p, c in zip(found, (first, second), strict=True):
        (alone,) = cpending.find_pending([c, holder], pods, slices, [GPU_CLASS], [node("n1")],
                                         NOW, 300)  # fmt: skip
        assert p.explain["verdict"] == alone.explain["verdict"], p.explain["summary"]
    assert found[1].explain["verdict"] == "in-use", found[1].explain["summary"]


def test_constraints_given_as_a_tuple_and_slices_as_an_iterator_are_read_as_lists() -> None:
    slices = fleet()
    pair = claim(
        "pair",
        requests=[{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}],
        constraints=[{"requests": ["gpus"], "matchAttribute": "gpu.nvidia.com/driverVersion"}],
        created="2026-01-01T00:00:00Z",
    )
    as_tuple = copy.deepcopy(pair)
    as_tuple["spec"]["devices"]["constraints"] = tuple(as_tuple["spec"]["devices"]["constraints"])
    nodes = [node(f"gpu-{i}") for i in range(1, 5)]
    listed = cexplain.explain_claim(pair, [GPU_CLASS], slices, [pair], nodes)
    assert listed["constraints"][0]["fits"] is True
    assert cexplain.explain_claim(as_tuple, [GPU_CLASS], slices, [as_tuple], nodes) == listed
    assert cexplain.explain_claim(pair, [GPU_CLASS], iter(slices), [pair], nodes) == listed
    waiting = [pod("p", claims=["pair"], phase="Pending")]
    (once,) = cpending.find_pending([pair], waiting, slices, [GPU_CLASS], nodes, NOW, 300)
    (again,) = cpending.find_pending([pair], waiting, iter(slices), [GPU_CLASS], nodes, NOW, 300)
    assert once.to_dict() == again.to_dict()
    assert once.explain["constraints"][0]["fits"] is True
    for odd in (["gpu.nvidia.com/driverVersion"], {"a": 1}, 5, "", None):
        unnamed = copy.deepcopy(pair)
        unnamed["spec"]["devices"]["constraints"][0]["matchAttribute"] = odd
        (c,) = cexplain.explain_claim(unnamed, [GPU_CLASS], slices, [unnamed], nodes)["constraints"]
        assert (c["fits"], c["summary"]) == (None, "not evaluated"), odd


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("attributes", {"string": "x"}),
        ("attributes", {"string": 5}),
        ("attributes", {"string": None}),
        ("attributes", {"string": ["a"]}),
        ("attributes", {"bool": True}),
        ("attributes", {"bool": 1}),
        ("attributes", {"bool": "yes"}),
        ("attributes", {"int": 3}),
        ("attributes", {"int": True}),
        ("attributes", {"int": 2**70}),
        ("attributes", {"int": "7"}),
        ("attributes", {"int": "many"}),
        ("attributes", {"int": 1.5}),
        ("attributes", {"version": "1.2.3"}),
        ("attributes", {"version": "nine"}),
        ("attributes", {"version": 1}),
        ("attributes", {"strings": ["a"]}),
        ("attributes", {"ints": [1, "x"]}),
        ("attributes", {"string": "a", "int": "b"}),
        ("attributes", {}),
        ("attributes", {"float": 1.5}),
        ("attributes", "text"),
        ("attributes", None),
        ("attributes", [1]),
        ("capacity", {"value": "80Gi"}),
        ("capacity", {"value": "lots"}),
        ("capacity", {"value": 5}),
        ("capacity", {"value": None}),
        ("capacity", "80Gi"),
        ("capacity", {"other": "1"}),
    ],
)
def test_a_value_is_judged_convertible_exactly_when_cel_takes_it(member: str, value: Any) -> None:
    """``device_values_convert`` (with the values seen, and with none) against what
    ``device_activation`` does with the same device: a shortcut for a kind of value may
    not judge it otherwise."""
    device = {member: {"x": value}}
    try:
        vcel.device_activation("gpu.nvidia.com", device)
        converts = True
    except Exception:  # whatever it raises, the device is not usable
        converts = False
    seen: dict[Any, bool] = {}
    assert vcel.device_values_convert(device, seen) is converts
    assert vcel.device_values_convert(device, seen) is converts  # from what it kept


def test_a_value_key_tells_apart_values_equal_in_python() -> None:
    keys = {
        vcel.value_key("attributes", v)
        for v in ({"int": 1}, {"int": True}, {"int": 1.0}, {"int": "1"}, {"bool": 1})
    }
    assert len(keys) == 5
    assert vcel.value_key("attributes", {"int": 1}) == vcel.value_key("attributes", {"int": 1})
    one = {"value": "1"}
    assert vcel.value_key("capacity", one) != vcel.value_key("attributes", one)
    # not a map of one scalar: by its text
    assert vcel.value_key("attributes", {"strings": ["a"]})[1] == "{'strings': ['a']}"


def test_a_number_cel_cannot_hold_makes_its_device_unusable_not_the_explanation_fail() -> None:
    devices = [gpu_device(0, "GPU-a"), gpu_device(1, "GPU-b")]
    devices[1]["attributes"]["index"] = {"int": float("inf")}  # a decoder that takes Infinity
    slices = [resource_slice("gpu-1", devices)]
    c = claim("c", requests=[request("device.attributes['gpu.nvidia.com'].type == 'gpu'")])
    (req,) = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])["requests"]
    assert (req["total"], req["matching"]) == (2, 1)
    ((reason, count),) = req["reasons"]
    assert count == 1 and reason.startswith("device not usable by CEL"), reason


def test_devices_that_name_one_attribute_twice_share_no_verdict_across_orders() -> None:
    """``productName`` and ``gpu.nvidia.com/productName`` are one attribute to CEL, which
    reads the last; two devices with both in other orders are judged each as CEL does."""
    a, b = gpu_device(0, "GPU-a"), gpu_device(1, "GPU-b")
    short = {"productName": {"string": "NVIDIA A100"}}
    qualified = {"gpu.nvidia.com/productName": {"string": "NVIDIA H200"}}
    for device, entries in ((a, {**short, **qualified}), (b, {**qualified, **short})):
        attrs = {k: v for k, v in device["attributes"].items() if k != "productName"}
        device["attributes"] = {**entries, **attrs}
    slices = [resource_slice("gpu-1", [a, b])]
    wanted = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
    c = claim("c", requests=[request(wanted)])
    (req,) = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])["requests"]
    alone = [
        cexplain.explain_claim(
            c, [GPU_CLASS], [resource_slice("gpu-1", [d])], [c], [node("gpu-1")]
        )["requests"][0]["matching"]
        for d in (a, b)
    ]
    assert req["matching"] == sum(alone) == 1, (req["matching"], alone)


@pytest.mark.parametrize("count", ["many", float("inf"), float("nan"), [2], True])
def test_a_count_that_is_no_number_is_read_as_the_default(count: Any) -> None:
    slices = [resource_slice("gpu-1", [gpu_device(0, "GPU-a")])]
    req = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
    c = claim("c", requests=[req])
    (out,) = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")])["requests"]
    assert out["count"] == 1


def test_the_allocations_without_holders_name_the_same_holder_of_each_device() -> None:
    claims = [
        claim("a", allocated=[("gpu-1", "gpu-0"), ("gpu-1", "gpu-1")]),
        claim("b", namespace="ml", allocated=[("gpu-2", "gpu-0")]),
        claim("waits"),
    ]
    in_use, holders = cexplain.allocations(claims)
    assert in_use == {
        "gpu.nvidia.com/gpu-1/gpu-0": "default/a",
        "gpu.nvidia.com/gpu-1/gpu-1": "default/a",
        "gpu.nvidia.com/gpu-2/gpu-0": "ml/b",
    }
    assert holders == {claims[0]["metadata"]["uid"], claims[1]["metadata"]["uid"]}
    assert cexplain.allocations(claims, keep=False) == (in_use, None)
    pages = vk.PagedList(claims, page_size=1)
    key, make = cexplain.allocations_fold(holders=False)
    assert key != cexplain.allocations_fold()[0]  # not read as the value with the uids
    assert vk.folded(pages, {key: make}) == [(in_use, None)]
    assert cexplain.allocations(pages, keep=False) == (in_use, None)
