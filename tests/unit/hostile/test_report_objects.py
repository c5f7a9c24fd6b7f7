"""``report.fleet.build_report`` on objects of another shape than the API's: each such
object is skipped and counted in ``cluster.objects_skipped``, the well-formed ones are
still counted, and nothing raises."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr

from gpufleet.render import fleet_report as rp
from tests.unit.report.test_fleet import CLAIMS, NODES, PODS, SLICES, claim, device, rslice

pytestmark = pytest.mark.unit


def _slice(**spec: Any) -> dict[str, Any]:
    s = rslice("z", [device("gpu-0", "NVIDIA B300", "268Gi")])
    s["spec"].update(spec)
    return s


def _dev(**fields: Any) -> dict[str, Any]:
    s = rslice("z", [device("gpu-0", "NVIDIA B300", "268Gi")])
    s["spec"]["devices"][0].update(fields)
    return s


def _claim(path: str, value: Any) -> dict[str, Any]:
    c = claim("odd", allocated=[("a", "gpu-9")], reserved=["p"])
    *parents, last = path.split(".")
    node: Any = c
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    node[last] = value
    return c


NOT_A_MAPPING = [None, "text", 7, ["a"]]
SLICES_ODD = {
    "devices-not-a-list": _slice(devices="gpu-0"),
    "devices-a-mapping": _slice(devices={"name": "gpu-0"}),
    "device-null": _slice(devices=[None]),
    "device-a-number": _slice(devices=[3]),
    "pool-a-string": _slice(pool="z"),
    "generation-a-string": _slice(pool={"name": "z", "generation": "x"}),
    "node-name-a-number": _slice(nodeName=5),
    "driver-a-list": _slice(driver=["gpu.nvidia.com"]),
    "capacity-a-string": _dev(capacity="268Gi"),
    "attributes-a-list": _dev(attributes=[1]),
    "device-name-a-number": _dev(name=0),
    "spec-a-string": {"spec": "x"},
    "metadata-a-string": {"metadata": "x", "spec": {}},
}
CLAIMS_ODD = {
    "spec-a-string": _claim("spec", "x"),
    "requests-a-string": _claim("spec.devices.requests", "gpu"),
    "request-null": _claim("spec.devices.requests", [None]),
    "request-a-number": _claim("spec.devices.requests", [1]),
    "count-a-word": _claim("spec.devices.requests.0.exactly.count", "abc"),
    "count-a-list": _claim("spec.devices.requests.0.exactly.count", [1]),
    "count-infinite": _claim("spec.devices.requests.0.exactly.count", float("inf")),
    "first-available-null": _claim("spec.devices.requests.0.firstAvailable", [None]),
    "status-a-string": _claim("status", "x"),
    "allocation-a-string": _claim("status.allocation", "x"),
    "results-a-string": _claim("status.allocation.devices.results", "x"),
    "result-null": _claim("status.allocation.devices.results", [None]),
    "reserved-for-a-string": _claim("status.reservedFor", "x"),
    "reserved-for-entry-null": _claim("status.reservedFor", [None]),
    "owner-references-a-string": _claim("metadata.ownerReferences", "x"),
    "name-a-number": _claim("metadata.name", 5),
}
PODS_ODD = {
    "metadata-a-string": {"metadata": "x"},
    "spec-a-string": {"metadata": {"name": "p", "namespace": "ml"}, "spec": "x"},
    "resource-claims-a-string": {"spec": {"resourceClaims": "x"}},
    "resource-claim-null": {"spec": {"resourceClaims": [None, 1]}},
    "status-a-string": {"metadata": {"name": "p", "namespace": "ml", "uid": "u"}, "status": "x"},
    "claim-statuses-null": {"status": {"resourceClaimStatuses": [None]}},
}
NODES_ODD = {
    "metadata-a-string": {"metadata": "x"},
    "labels-a-string": {"metadata": {"name": "z", "labels": "x"}},
}


def _kinds(odd: dict[str, Any]) -> list[Any]:
    return [*NOT_A_MAPPING, *odd.values()]


def _ids(odd: dict[str, Any]) -> list[str]:
    return [f"not-a-mapping-{i}" for i in range(len(NOT_A_MAPPING))] + list(odd)


def _check(doc: dict[str, Any], kind: str) -> None:
    json.dumps(doc)  # JSON-ready
    assert doc["cluster"]["objects_skipped"] == {kind: 1}
    good = fr.build_report(SLICES, CLAIMS, PODS, NODES)
    assert doc["cluster"]["devices_published"] == good["cluster"]["devices_published"]
    assert any(kind in line for line in rp.headline(doc))


@pytest.mark.parametrize("obj", _kinds(SLICES_ODD), ids=_ids(SLICES_ODD))
def test_a_resource_slice_of_another_shape_is_skipped(obj: Any) -> None:
    _check(fr.build_report([*SLICES, copy.deepcopy(obj)], CLAIMS, PODS, NODES), "resourceslices")


@pytest.mark.parametrize("obj", _kinds(CLAIMS_ODD), ids=_ids(CLAIMS_ODD))
def test_a_resource_claim_of_another_shape_is_skipped(obj: Any) -> None:
    doc = fr.build_report(SLICES, [*CLAIMS, copy.deepcopy(obj)], PODS, NODES)
    _check(doc, "resourceclaims")
    good = fr.build_report(SLICES, CLAIMS, PODS, NODES)
    assert doc["pending"] == good["pending"] and doc["leaked"] == good["leaked"]


@pytest.mark.parametrize("obj", _kinds(PODS_ODD), ids=_ids(PODS_ODD))
def test_a_pod_of_another_shape_is_skipped(obj: Any) -> None:
    _check(fr.build_report(SLICES, CLAIMS, [*PODS, copy.deepcopy(obj)], NODES), "pods")


@pytest.mark.parametrize("obj", _kinds(NODES_ODD), ids=_ids(NODES_ODD))
def test_a_node_of_another_shape_is_skipped(obj: Any) -> None:
    doc = fr.build_report(SLICES, CLAIMS, PODS, [*NODES, copy.deepcopy(obj)])
    _check(doc, "nodes")


def test_well_formed_objects_skip_nothing() -> None:
    doc = fr.build_report(SLICES, CLAIMS, PODS, NODES)
    assert doc["cluster"]["objects_skipped"] == {}
    assert not any("not read" in line for line in rp.headline(doc))


@pytest.mark.parametrize(
    "memory",
    ["lots", "9" * 5000, "1Zi", None, [1], {"a": 1}, True],
    ids=["word", "5000-digits", "unknown-suffix", "null", "list", "mapping", "bool"],
)
def test_a_capacity_that_is_not_a_quantity_counts_as_zero_bytes(memory: Any) -> None:
    s = rslice("z", [device("gpu-0", "NVIDIA B300", "268Gi")])
    s["spec"]["devices"][0]["capacity"]["memory"] = {"value": memory}
    doc = fr.build_report([s], [], [], [])
    assert doc["cluster"]["devices_published"] == 1
    assert doc["cluster"]["memory_published"] == 0


def test_a_huge_count_is_read_as_wanting_more_than_is_published() -> None:
    c = _claim("spec.devices.requests.0.exactly.count", 10**400)
    c["status"] = {}
    doc = fr.build_report(SLICES, [c], [], NODES)
    assert doc["pending"][0]["reason"] == fr.NO_DEVICE


def test_a_huge_capacity_renders_on_every_page() -> None:
    s = rslice("z", [device("gpu-0", "NVIDIA B300", "1e400")])
    doc = fr.build_report([s], [], [], [])
    doc["meta"] = {"server": "https://x", "generated_at": "now", "api_requests": 1}
    assert doc["cluster"]["memory_published"] == 10**400
    json.dumps(doc)
    assert rp.render_markdown(doc) and rp.render_html(doc)


@pytest.mark.parametrize(
    ("kind", "good", "odd"),
    [
        ("resourceslices", SLICES, SLICES_ODD),
        ("resourceclaims", CLAIMS, CLAIMS_ODD),
        ("pods", PODS, PODS_ODD),
        ("nodes", NODES, NODES_ODD),
    ],
)
def test_one_walk_per_object_judges_as_one_walk_per_field(
    kind: str, good: list, odd: dict[str, Any]
) -> None:
    """``readable_objects`` walks each object once (``_Field``); its verdict is the one of
    checking every field path of ``OBJECT_SHAPES`` on its own (``_shape_error``)."""
    tree = fr._Field.tree(kind)
    paths = [(p.split("."), t) for p, t in fr.OBJECT_SHAPES[kind]]
    for obj in [*good, *(o for o in odd.values() if isinstance(o, dict))]:
        assert tree.error(obj) == any(fr._shape_error(obj, p, t) for p, t in paths), obj
    assert not any(tree.error(o) for o in good)
    assert all(tree.error(o) for o in odd.values() if isinstance(o, dict))
