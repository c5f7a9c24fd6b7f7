"""Listing page by page (module_utils validate_kube ``Kube.pages``, ``PagedList``) and the
judges that walk the pages: validate's checks, ``claims gc``'s plan, the report, the
node labels' trim. Each judge must reach the same verdict on a ``PagedList`` as on a
plain list, without keeping the whole list."""

from __future__ import annotations

import collections
import copy
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import gc as cgc
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pods as cpods
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import (
    listing as cluster_listing,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import mig_advice
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import run as vrun
from ansible_collections.gpufleet.cluster.plugins.modules import gpu_node_labels

from tests.integration.test_hostile_input_servers import write_kubeconfig
from tests.unit.cluster.test_listing import as_listed, fleet
from tests.unit.hostile.api_server import serve
from tests.unit.validate_objects import claim, gpu_device, pod, resource_slice

pytestmark = pytest.mark.unit


def paged(items: list[Any], size: int = 1) -> vk.PagedList:
    return vk.PagedList(items, page_size=size)


# ------------------------------------------------------------------ Kube.pages


def three_pages(query: str) -> tuple[int, bytes]:
    """Pods in pages of two: no token, then ``t1``, then ``t2`` (the last page)."""
    q = parse_qs(query)
    assert q["limit"] == ["2"], q
    token = (q.get("continue") or [""])[0]
    start = {"": 0, "t1": 2, "t2": 4}[token]
    items = [as_listed(pod(f"p{i}", uid=f"u{i}")) for i in range(start, min(start + 2, 5))]
    nxt = {"": "t1", "t1": "t2", "t2": ""}[token]
    body = {"kind": "PodList", "metadata": {"continue": nxt} if nxt else {}, "items": items}
    return 200, json.dumps(body).encode()


def test_pages_follow_continue_one_request_a_page(tmp_path: Path) -> None:
    with serve({"/api/v1/pods": three_pages}) as (url, seen):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        pages = list(kube.pages("/api/v1/pods", 2, trim=cluster_listing.trim_pod))
        assert [len(p) for p in pages] == [2, 2, 1]
        assert kube.requests == 3 and len(seen) == 3
        assert all("managedFields" not in p["metadata"] for page in pages for p in page)
        stored = kube.paged("/api/v1/pods", 2, trim=cluster_listing.trim_pod)
    assert isinstance(stored, vk.PagedList)
    assert [p["metadata"]["name"] for p in stored] == [f"p{i}" for i in range(5)]
    assert stored == [p for page in pages for p in page]
    assert kube.requests == 6


def test_a_continue_token_that_repeats_ends_the_listing(tmp_path: Path) -> None:
    def forever(query: str) -> tuple[int, bytes]:
        body = {"kind": "PodList", "metadata": {"continue": "same"}, "items": []}
        return 200, json.dumps(body).encode()

    with serve({"/api/v1/pods": forever}) as (url, _):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        with pytest.raises(vk.KubeError, match="repeats"):
            list(kube.pages("/api/v1/pods", 10))
        assert kube.requests == 2


def pods_page(names: range, members: str) -> bytes:
    """A PodList answer whose members are ``members`` (JSON text with ``{items}`` where
    the items go), in that order."""
    items = json.dumps([as_listed(pod(f"p{i}", uid=f"u{i}")) for i in names])
    return ("{" + members.replace("{items}", items) + "}").encode()


def test_the_next_page_is_asked_for_while_this_one_is_handed_over(tmp_path: Path) -> None:
    asked = threading.Event()

    def answer(query: str) -> tuple[int, bytes]:
        if parse_qs(query).get("continue") == ["t1"]:
            asked.set()
        return three_pages(query)

    with serve({"/api/v1/pods": answer}) as (url, seen):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        pages = kube.pages("/api/v1/pods", 2, trim=cluster_listing.trim_pod)
        first = next(pages)
        # page 2 is asked for while page 1 is held, before the listing is read on
        assert asked.wait(10), seen
        rest = list(pages)
    assert [p["metadata"]["name"] for p in first] == ["p0", "p1"]
    assert [len(p) for p in rest] == [2, 1]
    assert kube.requests == 3 and len(seen) == 3


def test_a_token_read_ahead_that_is_not_the_pages_is_not_used(tmp_path: Path) -> None:
    # a member named twice: the page's metadata is the last one (json's reading), the
    # first bytes carry another token
    def answer(query: str) -> tuple[int, bytes]:
        token = (parse_qs(query).get("continue") or [""])[0]
        if token == "":
            head = '"kind":"PodList","metadata":{"continue":"wrong"},"items":{items},'
            return 200, pods_page(range(2), head + '"metadata":{"continue":"t1"}')
        if token == "wrong":
            return 200, pods_page(range(90, 92), '"kind":"PodList","metadata":{},"items":{items}')
        return three_pages(query)

    with serve({"/api/v1/pods": answer}) as (url, seen):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        pages = list(kube.pages("/api/v1/pods", 2))
    names = [p["metadata"]["name"] for page in pages for p in page]
    assert names == [f"p{i}" for i in range(5)]
    asked = [parse_qs(urlsplit(s).query).get("continue", [""])[0] for s in seen]
    # the read ahead of "wrong" runs on a thread of its own: whether its request reached the
    # server before the listing ended is a race; the pages' own tokens are each asked once
    assert sorted(t for t in asked if t != "wrong") == ["", "t1", "t2"]
    assert asked.count("wrong") <= 1


def test_metadata_after_the_items_is_not_read_ahead(tmp_path: Path) -> None:
    def answer(query: str) -> tuple[int, bytes]:
        token = (parse_qs(query).get("continue") or [""])[0]
        if token == "":
            return 200, pods_page(
                range(2), '"kind":"PodList","items":{items},"metadata":{"continue":"t1"}'
            )
        return three_pages(query)

    with serve({"/api/v1/pods": answer}) as (url, seen):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        pages = kube.pages("/api/v1/pods", 2)
        next(pages)
        time.sleep(0.5)
        assert len(seen) == 1  # nothing asked for ahead
        rest = list(pages)
    assert [len(p) for p in rest] == [2, 1]
    assert kube.requests == 3


def test_a_page_not_read_ahead_does_not_stop_the_next_from_being(tmp_path: Path) -> None:
    asked = threading.Event()

    def answer(query: str) -> tuple[int, bytes]:
        token = (parse_qs(query).get("continue") or [""])[0]
        after, nxt = {"": (False, "t1"), "t1": (True, "t2"), "t2": (False, "t3")}.get(
            token, (False, "")
        )
        if token == "t3":
            asked.set()
        meta = json.dumps({"continue": nxt} if nxt else {})
        members = (
            f'"kind":"PodList","items":{{items}},"metadata":{meta}'
            if after
            else f'"kind":"PodList","metadata":{meta},"items":{{items}}'
        )
        start = {"": 0, "t1": 2, "t2": 4, "t3": 6}[token]
        return 200, pods_page(range(start, min(start + 2, 7)), members)

    with serve({"/api/v1/pods": answer}) as (url, _):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        pages = kube.pages("/api/v1/pods", 2)
        first, second = next(pages), next(pages)  # the second's metadata follows its items
        third = next(pages)
        assert asked.wait(10)  # the third answer's head is read ahead again
        rest = list(pages)
    names = [p["metadata"]["name"] for page in (first, second, third, *rest) for p in page]
    assert names == [f"p{i}" for i in range(7)]
    assert kube.requests == 4


def test_lists_read_side_by_side_ask_for_one_page_at_a_time(tmp_path: Path) -> None:
    with serve({"/api/v1/pods": three_pages}) as (url, seen):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        pages = kube.pages("/api/v1/pods", 2, ahead=False)
        next(pages)
        time.sleep(0.5)
        assert len(seen) == 1  # the next page waits for the listing to be read on
        assert [len(p) for p in pages] == [2, 1]
        assert len(kube.paged("/api/v1/pods", 2, ahead=False)) == 5
    assert kube.requests == 6


def test_a_page_read_ahead_that_fails_fails_the_listing_when_it_is_reached(
    tmp_path: Path,
) -> None:
    def answer(query: str) -> tuple[int, bytes]:
        if parse_qs(query).get("continue") == ["t1"]:
            return 500, b'{"kind":"Status","code":500,"message":"etcdserver: overloaded"}'
        return three_pages(query)

    with serve({"/api/v1/pods": answer}) as (url, _):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        pages = kube.pages("/api/v1/pods", 2)
        assert len(next(pages)) == 2  # the first page is handed over whole
        with pytest.raises(vk.KubeError, match="etcdserver: overloaded"):
            next(pages)


@pytest.mark.parametrize(
    ("body", "token"),
    [
        (
            b'{"kind":"PodList","metadata":{"continue":"abc","remainingItemCount":3},"items":[]}',
            "abc",
        ),
        (b'{"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[]}', None),
        (b'{"kind":"PodList","items":[],"metadata":{"continue":"abc"}}', None),
        (b'{"kind":"PodList","metadata" : {"continue":"a\\u00e9"},"items":[]}', "a\u00e9"),
        (b'{"kind":"PodList","metadata":{"continue":7},"items":[]}', None),
        (b'{"kind":"PodList","metadata":"x","items":[]}', None),
        (b'{"kind":"PodList","metadata":{"continue":"abc"', None),  # cut before its end
        (b"", None),
    ],
)
def test_the_continue_token_read_from_the_first_bytes(body: bytes, token: str | None) -> None:
    assert vk._continue_ahead(body) == token


# ------------------------------------------------------------------ PagedList


def test_a_paged_list_gives_back_what_was_stored() -> None:
    items = [{"metadata": {"name": f"n{i}", "labels": {"a": "b"}}} for i in range(7)]
    p = paged(items, 3)
    assert len(p) == 7 and bool(p) and not vk.PagedList()
    assert list(p) == items and list(p) == items  # walked twice
    assert p[0] == items[0] and p[4] == items[4] and p[-1] == items[6]
    with pytest.raises(IndexError):
        p[7]
    assert p == items and p != items[:6]
    assert [len(page) for page in p.iter_pages()] == [3, 3, 1]


def test_a_walk_holds_one_decoded_page_at_a_time() -> None:
    """The page walked is let go before the next is decoded (a page of 500 slices is
    about 10 MiB decoded)."""
    import tracemalloc

    page = [
        {"name": f"n{i}", "labels": {f"k{j}": f"v{i}-{j}" for j in range(5)}} for i in range(2000)
    ]
    stored = vk.PagedList([dict(p) for _ in range(4) for p in page], page_size=len(page))
    tracemalloc.start()
    try:
        first = next(iter(stored.iter_pages()))
        one_page = tracemalloc.get_traced_memory()[1]
        del first
        tracemalloc.reset_peak()
        assert sum(1 for _ in stored) == 8000
        walk = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert walk < 1.5 * one_page, (walk, one_page)


def test_a_filtered_paged_list_shares_the_pages_it_keeps_whole() -> None:
    p = paged([{"n": i} for i in range(6)], 3)
    odd = p.filtered(lambda item: item["n"] != 4)
    assert list(odd) == [{"n": i} for i in (0, 1, 2, 3, 5)] and len(odd) == 5
    assert [len(page) for page in odd.iter_pages()] == [3, 2]
    assert odd._pages[0] is p._pages[0] and odd._pages[1] is not p._pages[1]


def odd_pods(query: str) -> tuple[int, bytes]:
    """One page of pods: two with the API's types, and between them a pod whose name is a
    number and an item that is not an object."""
    items = [as_listed(pod("p0")), {"metadata": {"name": 7}}, "text", as_listed(pod("p1"))]
    return 200, json.dumps({"kind": "PodList", "metadata": {}, "items": items}).encode()


def test_a_list_judged_as_it_is_listed_keeps_what_its_judge_accepts(tmp_path: Path) -> None:
    def named(item: Any) -> bool:
        return isinstance(item, dict) and isinstance(item["metadata"].get("name"), str)

    with serve({"/api/v1/pods": odd_pods}) as (url, _seen):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        judged = kube.paged("/api/v1/pods", trim=cluster_listing.trim_pod, keep=named)
        plain = kube.paged("/api/v1/pods", trim=cluster_listing.trim_pod)
    assert [p["metadata"]["name"] for p in judged] == ["p0", "p1"]
    assert judged.vetted(named) == 2
    # another judge, even one that does the same, is not taken for this one
    assert judged.vetted(lambda item: named(item)) is None
    assert len(plain) == 4 and plain.vetted(named) is None
    judged.add_page([{"metadata": {"name": 8}}])  # a page added since was not judged
    assert judged.vetted(named) is None


def test_the_report_takes_a_list_listed_with_its_judge_as_it_is(tmp_path: Path) -> None:
    with serve({"/api/v1/pods": odd_pods}) as (url, _seen):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        judged = kube.paged("/api/v1/pods", trim=cluster_listing.trim_pod, keep=fr.readable("pods"))
        plain = kube.paged("/api/v1/pods", trim=cluster_listing.trim_pod)
        other = kube.paged("/api/v1/pods", trim=cluster_listing.trim_pod, keep=bool)
    assert fr.readable("pods") is fr.readable("pods")
    kept, skipped = fr.readable_objects("pods", judged)
    assert kept is judged and skipped == 2
    # listed without the report's judge (or with another): judged here, page by page
    for listed, before in ((plain, 4), (other, 4)):
        kept, skipped = fr.readable_objects("pods", listed)
        assert kept is not listed and skipped == before - 2
        assert list(kept) == list(judged)
    assert (
        fr.build_report([], [], judged, [])["cluster"]
        == (fr.build_report([], [], plain, [])["cluster"])
    )


def test_validate_takes_the_counts_of_a_listing_judged_as_it_was_listed(
    tmp_path: Path,
) -> None:
    with serve({"/api/v1/pods": odd_pods}) as (url, _seen):
        kube = vk.Kube(str(write_kubeconfig(tmp_path / "kc", url)))
        judged = kube.paged(
            "/api/v1/pods", trim=cluster_listing.trim_pod, keep=cluster_listing.readable
        )
        plain = kube.paged("/api/v1/pods", trim=cluster_listing.trim_pod)
    listing, unjudged = cluster_listing.Listing(pods=judged), cluster_listing.Listing(pods=plain)
    assert cluster_listing.READABLE["pods"] is cluster_listing.readable
    assert vrun._drop_unreadable(listing) == {"pods": 2} == vrun._drop_unreadable(unjudged)
    assert listing.pods is judged
    assert list(unjudged.pods) == list(judged)


class _Labels(dict):
    """A mapping that is not a dict: judged by the abstract check."""


@pytest.mark.parametrize(
    ("item", "kept"),
    [
        ({"metadata": {"name": "a", "namespace": "n", "labels": {"k": "v"}}}, True),
        ({"metadata": {"name": "a", "labels": _Labels(k="v")}, "spec": {}}, True),
        # empty values count as absent
        ({}, True),
        ({"metadata": None, "spec": [], "status": ""}, True),
        ({"metadata": {"name": "", "namespace": None, "labels": [], "annotations": 0}}, True),
        # a present value of another type refuses the object
        ("a string", False),
        ([{"metadata": {}}], False),
        ({"metadata": ["a"]}, False),
        ({"metadata": {}, "spec": "x"}, False),
        ({"metadata": {}, "status": [1]}, False),
        ({"metadata": {"name": 7}}, False),
        ({"metadata": {"namespace": ["n"]}}, False),
        ({"metadata": {"labels": "k=v"}}, False),
        ({"metadata": {"annotations": ["a"]}}, False),
    ],
)
def test_readable_judges_the_envelope_types(item: Any, kept: bool) -> None:
    assert cluster_listing.readable(item) is kept


def test_a_paged_list_stores_repeated_objects_compressed() -> None:
    listing, _ = fleet()
    slices = [copy.deepcopy(listing.slices[0]) for _ in range(500)]
    stored = paged(slices, 500)
    assert stored.stored_bytes * 20 < len(json.dumps(slices))


# ------------------------------------------------------------------ the judges


def paged_listing(listing: Any) -> Any:
    out = copy.copy(listing)
    for attr in ("nodes", "pods", "slices", "claims", "classes", "daemonsets", "events"):
        setattr(out, attr, paged(getattr(listing, attr)))
    return out


def test_the_checks_judge_a_paged_listing_as_a_listed_one() -> None:
    listing, settings = fleet()
    whole = [c.to_dict() for c in vc.all_checks(listing, settings)]
    pages = [c.to_dict() for c in vc.all_checks(paged_listing(listing), settings)]
    assert pages == whole
    by_id = {c["id"]: c for c in pages}
    assert {p["subject"] for p in by_id["claims.leaked"]["problems"]} == {
        "default/leaked",
        "default/gen-x1",
    }
    assert [p["subject"] for p in by_id["claims.pending"]["problems"]] == ["default/pending"]


def test_claims_gc_plans_the_same_on_pages() -> None:
    listing, _ = fleet()
    want = [a.to_dict() for a in cgc.plan_gc(listing.claims, listing.pods)]
    got = [a.to_dict() for a in cgc.plan_gc(paged(listing.claims), paged(listing.pods))]
    assert got == want
    assert {a["claim"] for a in got if a["action"] != "skip"} == {
        "default/leaked",
        "default/gen-x1",
    }


def test_the_report_is_the_same_on_pages() -> None:
    listing, _ = fleet()
    kinds = (listing.slices, listing.claims, listing.pods, listing.nodes)
    want = fr.build_report(*kinds)
    got = fr.build_report(*(paged(k) for k in kinds))
    assert got == want
    assert got["cluster"]["devices_published"] == 3
    assert got["cluster"]["claims_leaked"] == 2


def test_unreadable_objects_are_skipped_page_by_page() -> None:
    listing, _ = fleet()
    pods = paged([*listing.pods, "not an object", {"metadata": {"name": 7}}], 2)
    kept, skipped = fr.readable_objects("pods", pods)
    assert isinstance(kept, vk.PagedList)
    assert skipped == 2 and list(kept) == listing.pods


def test_the_pod_index_keeps_the_fields_the_judges_read() -> None:
    waits = pod("waits", claims=["pending"], scheduled_message="0/2 nodes: cannot allocate")
    train = pod("train", uid="u-train", node_name="gpu-1", claims=["in-use"])
    index = cpods.PodIndex(paged([as_listed(waits), as_listed(train)]))
    got = index.get("default", "train")
    assert got is not None
    assert got["metadata"] == {"name": "train", "namespace": "default", "uid": "u-train"}
    assert got["spec"] == {"nodeName": "gpu-1"} and got["status"]["phase"] == "Running"
    (user,) = index.users[("default", "pending")]
    assert cpods.key(user) == "default/waits"
    (cond,) = user["status"]["conditions"]
    assert cond["message"] == "0/2 nodes: cannot allocate"
    assert index.get("default", "gone") is None and len(index) == 2


def test_latest_slices_walk_pages_twice_and_keep_the_newest_generation() -> None:
    old = resource_slice("gpu-1", [gpu_device(0, "GPU-old")])
    new = copy.deepcopy(resource_slice("gpu-1", [gpu_device(0, "GPU-new")]))
    new["spec"]["pool"]["generation"] = int(old["spec"]["pool"].get("generation") or 0) + 1
    other = resource_slice("gpu-2", [gpu_device(0, "GPU-2")])
    got = list(cslices.iter_latest_slices(paged([old, new, other])))
    assert got == [new, other]
    assert list(cslices.iter_latest_slices(iter([old, new, other]))) == [new, other]


def counted(items: list[Any], page_size: int, on_walk: Callable[[], Any]) -> vk.PagedList:
    """A PagedList of ``items`` that calls ``on_walk`` each time it is walked."""

    class Counted(vk.PagedList):
        __slots__ = ()

        def __iter__(self) -> Any:
            on_walk()
            return super().__iter__()

    return Counted(items, page_size=page_size)


def test_readers_of_the_newest_slices_walk_the_pages_for_the_generations_once() -> None:
    old = resource_slice("gpu-1", [gpu_device(0, "GPU-old")])
    new = copy.deepcopy(resource_slice("gpu-1", [gpu_device(0, "GPU-new")]))
    new["spec"]["pool"]["generation"] = int(old["spec"]["pool"].get("generation") or 0) + 1
    walks: list[int] = []
    pages = counted([old, new], 1, lambda: walks.append(1))
    assert [list(cslices.iter_latest_slices(pages)) for _ in range(3)] == [[new]] * 3
    assert len(walks) == 4  # the generations once, then one walk per reader
    newer = copy.deepcopy(new)
    newer["spec"]["pool"]["generation"] += 1
    pages.add_page([newer])  # a page added: the generations are read again
    assert list(cslices.iter_latest_slices(pages)) == [newer]


def test_folds_of_the_newest_slices_read_what_iter_latest_slices_reads() -> None:
    old = resource_slice("gpu-1", [gpu_device(0, "GPU-old")])
    new = copy.deepcopy(resource_slice("gpu-1", [gpu_device(0, "GPU-new")]))
    new["spec"]["pool"]["generation"] = int(old["spec"]["pool"].get("generation") or 0) + 1
    other = resource_slice("gpu-2", [gpu_device(0, "GPU-2")])
    items = [old, new, other, "not an object"]
    for slices in (items, paged(items, 2)):
        newest, every = vk.folded(
            slices, {**cslices.latest_folds(slices, {"seen": _Seen}), "every": _Seen}
        )
        assert newest == list(cslices.iter_latest_slices(slices)) == [new, other]
        assert every == items
    # kept under a key of its own: not the value of a fold of every slice of that name
    pages = paged(items, 2)
    assert vk.folded(pages, {"seen": _Seen})[0] == items
    assert vk.folded(pages, cslices.latest_folds(pages, {"seen": _Seen}))[0] == [new, other]


def test_validate_walks_the_stored_nodes_and_pods_once_per_fact() -> None:
    """The node names (four readers), the kubelet and runtime versions (two) are each read
    in one walk of the stored nodes; the pods once for all their readers, and not for a
    prepare failure when no Event reports one; the claims' allocations in the walk of the
    CounterSets."""
    listing, settings = fleet()
    walks: collections.Counter[str] = collections.Counter()

    def walked(kind: str, items: list[Any]) -> vk.PagedList:
        return counted(items, 1, lambda: walks.update([kind]))

    assert not listing.events
    whole = [c.to_dict() for c in vc.all_checks(listing, settings)]
    stored = copy.copy(listing)
    stored.nodes, stored.pods = walked("nodes", listing.nodes), walked("pods", listing.pods)
    stored.claims = walked("claims", listing.claims)
    stored.slices = walked("slices", listing.slices)
    assert [c.to_dict() for c in vc.all_checks(stored, settings)] == whole
    # names, the GPU nodes' labels, the GPU paths' advertisers, the versions, and the
    # nodes' readiness for the explanation of the pending claims (once for all of them)
    assert walks["nodes"] == 5
    # the plugin pods, the kube-apiserver pods and the pod index in one walk
    assert walks["pods"] == 1
    # the leaked claims; the pending claims with the allocations their explanations read
    # (and the CounterSets' walk, here none: no device consumes counters)
    assert walks["claims"] == 2
    # the newest generations; the CounterSets; the nodes', the GPU paths' and the
    # dynamic-MIG checks in one walk (four before); the devices of the pending claims'
    # explanation
    assert walks["slices"] == 4


def _report_walks(
    kinds: dict[str, list[Any]], run: Callable[..., Any] = fr.build_report
) -> collections.Counter[str]:
    """The walks of each kind's stored pages by ``run`` (the report, the MIG advice),
    which gives the same result as on the plain lists; each listed with the report's
    judge, as ``gpufleet report`` lists them (``readable_objects`` takes them as they
    are)."""
    walks: collections.Counter[str] = collections.Counter()
    order = {
        "slices": "resourceslices",
        "claims": "resourceclaims",
        "pods": "pods",
        "nodes": "nodes",
    }
    want = run(*(kinds[k] for k in order))
    stored = {k: counted(kinds[k], 1, lambda k=k: walks.update([k])) for k in order}
    for k, kind in order.items():
        stored[k]._vetted = (fr.readable(kind), 0)  # as ``of_pages`` with ``keep`` leaves it
    assert run(*(stored[k] for k in order)) == want
    assert not stored["claims"]._derived and not stored["pods"]._derived  # nothing kept
    return walks


def _fleet_kinds() -> dict[str, list[Any]]:
    listing, _ = fleet()
    return {
        "slices": listing.slices,
        "claims": listing.claims,
        "pods": listing.pods,
        "nodes": listing.nodes,
    }


def test_the_report_walks_the_stored_pods_and_claims_once() -> None:
    """The pods once for the claims' users and the device plugin's allocations; the claims
    once for who holds each device, the claims not allocated and the leaks."""
    walks = _report_walks(_fleet_kinds())
    assert walks["pods"] == 1 and walks["claims"] == 1


def test_the_mig_advice_walks_the_stored_claims_once() -> None:
    """Who holds each device (the devices' and the GPUs' readers) and the claims not
    allocated (the pods' index, the pending claims and their demands) in one walk."""
    walks = _report_walks(_fleet_kinds(), mig_advice.advise)
    assert walks["pods"] == 1 and walks["claims"] == 1


def test_past_the_bound_the_claims_not_allocated_are_read_again_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kinds = _fleet_kinds()
    assert sum(map(fr.awaits_allocation, kinds["claims"])) == 1
    monkeypatch.setattr(fr, "MAX_KEPT_AWAITING", 0)
    assert _report_walks(kinds)["claims"] == 2
    # the pods' index, the pending claims and their demands each read them again
    assert _report_walks(kinds, mig_advice.advise)["claims"] == 4


def test_the_report_reads_the_claims_in_the_walk_of_the_counter_sets() -> None:
    """Where devices consume shared counters, the claims' one walk is the CounterSets'."""
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, slices

    claims = [allocated_claim(f"c{i}", H200_NODE, f"gpu-0-mig-1g18gb-19-{i}") for i in range(3)]
    node = {"metadata": {"name": H200_NODE, "labels": {}}, "status": {}}
    kinds = {"slices": slices(H200_NODE), "claims": claims, "pods": [], "nodes": [node]}
    assert _report_walks(kinds)["claims"] == 1
    assert _report_walks(kinds, mig_advice.advise)["claims"] == 1


def test_a_derived_value_is_computed_once_until_a_page_is_added() -> None:
    pages = paged([1, 2, 3], 2)
    calls = []

    def total(p: vk.PagedList) -> int:
        calls.append(1)
        return sum(p)

    assert [pages.derived("sum", total) for _ in range(2)] == [6, 6] and len(calls) == 1
    pages.add_page([4])
    assert pages.derived("sum", total) == 10 and len(calls) == 2


class _Sum:
    def __init__(self) -> None:
        self.total = 0

    def add(self, item: int) -> None:
        self.total += item

    def result(self) -> int:
        return self.total


class _Seen:
    def __init__(self) -> None:
        self.items: list[int] = []

    def add(self, item: int) -> None:
        self.items.append(item)

    def result(self) -> list[int]:
        return self.items


def test_folds_of_a_paged_list_share_one_walk_and_keep_their_results() -> None:
    walks: list[int] = []
    pages = counted([1, 2, 3, 4, 5], 2, lambda: walks.append(1))
    once = _Seen()
    assert vk.folded(pages, {"sum": _Sum, "seen": _Seen}, [once]) == [
        15,
        [1, 2, 3, 4, 5],
        [1, 2, 3, 4, 5],
    ]
    assert len(walks) == 1
    # kept: no walk for the keys already derived, the same objects given back
    kept = vk.folded(pages, {"seen": _Seen, "sum": _Sum})
    assert kept == [[1, 2, 3, 4, 5], 15] and len(walks) == 1
    assert kept[0] is vk.folded(pages, {"seen": _Seen})[0]
    # a fold not kept walks again, alone; a key derived the other way is the same value
    again = _Sum()
    assert vk.folded(pages, {"sum": _Sum}, [again]) == [15, 15] and len(walks) == 2
    assert pages.derived("sum", lambda p: -1) == 15
    # a page added: every kept value is computed anew
    pages.add_page([10])
    assert vk.folded(pages, {"sum": _Sum}) == [25] and len(walks) == 3
    # forgotten: computed anew by the next reader; the others stay kept
    vk.folded(pages, {"seen": _Seen})
    pages.forget("sum")
    assert vk.folded(pages, {"seen": _Seen})[0] == [1, 2, 3, 4, 5, 10] and len(walks) == 4
    assert vk.folded(pages, {"sum": _Sum}) == [25] and len(walks) == 5
    pages.forget()
    assert vk.folded(pages, {"sum": _Sum, "seen": _Seen})[0] == 25 and len(walks) == 6


def test_folds_of_a_plain_iterable_walk_it_once_and_keep_nothing() -> None:
    items = iter([3, 4])  # an iterator: one walk is all it has
    assert vk.folded(items, {"sum": _Sum, "seen": _Seen}, [_Sum()]) == [7, [3, 4], 7]
    assert vk.folded([], {"sum": _Sum}) == [0]
    assert vk.folded([1], {}) == []


def test_node_labels_keep_only_what_the_plan_reads() -> None:
    listing, _ = fleet()
    node = as_listed(listing.nodes[0])
    node["metadata"]["resourceVersion"] = "42"
    node["spec"] = {"taints": [{"key": "gpu", "effect": "NoSchedule"}], "podCIDR": "10.0.0.0/24"}
    got = gpu_node_labels.trim_node_labels(node)
    assert got == {
        "metadata": {
            "name": "gpu-1",
            "labels": {"nvidia.com/gpu.present": "true"},
            "resourceVersion": "42",
        },
        "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
    }


@pytest.mark.parametrize(
    "node",
    [
        {"metadata": {"name": "n", "resourceVersion": "1", "x": 1}, "spec": {"taints": None}},
        {"metadata": None, "spec": None, "status": {"images": [{"names": ["a"]}]}},
        {"metadata": ["name"], "spec": {"taints": [1]}},
        {"metadata": {"name": 1, "labels": "x"}, "spec": "x"},
        {},
        None,
    ],
)
def test_node_labels_decode_the_same_with_their_schema(node: Any) -> None:
    listing, _ = fleet()
    nodes = [as_listed(n) for n in listing.nodes] + [node]
    data = json.dumps({"kind": "NodeList", "items": nodes}).encode()
    fast = vk.fast_page(data, gpu_node_labels.trim_node_labels, gpu_node_labels.NODE_SCHEMA)
    assert fast is not None
    slow: list[Any] = []
    for item in nodes:
        slow.append(vk._trimmed(copy.deepcopy(item), gpu_node_labels.trim_node_labels))
    assert fast[1] == slow


def test_a_trimmed_pod_keeps_only_the_scheduler_condition() -> None:
    waits = as_listed(pod("waits", claims=["pending"], scheduled_message="0/2 nodes: no GPU"))
    waits["status"]["conditions"][0]["lastTransitionTime"] = "2026-12-01T00:00:00Z"
    waits["status"]["conditions"].append({"type": "Ready", "status": "False"})
    assert cluster_listing.trim_pod(waits)["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "False", "message": "0/2 nodes: no GPU"}
    ]


def test_leaked_claims_past_the_bound_are_counted_not_listed() -> None:
    listing, settings = fleet()
    extra = vc.MAX_CLAIM_FINDINGS + 5
    leaked = [
        claim(f"gone-{i}", allocated=[("gpu-2", "gpu-0")], reserved_for=[("gone", f"u{i}")])
        for i in range(extra)
    ]
    listing.claims = paged([*listing.claims, *leaked], 50)
    (check,) = [c for c in vc.all_checks(listing, settings) if c.id == "claims.leaked"]
    # the fixture's two leaks and the extra ones
    assert check.data["leaks_total"] == extra + 2
    assert len(check.data["leaks"]) == vc.MAX_CLAIM_FINDINGS
    assert len(check.problems) == vc.MAX_CLAIM_FINDINGS + 1
    last = check.problems[-1].to_dict()
    assert last["subject"] is None and last["message"].startswith("7 more leaked claim(s)")
    assert check.status == "fail"
