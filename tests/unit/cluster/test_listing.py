"""Decoding and trimming of listed objects (module_utils validate_kube)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.hostile import test_report_objects as ODD
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

PLUGIN = {"app.kubernetes.io/component": "kubelet-plugin"}


# ------------------------------------------------------------------ decode_list


def decoded(text: str, trim: Any = None) -> tuple[dict, list]:
    items: list = []
    rest = vk.decode_list(text.encode(), items.append, trim)
    return rest, items


@pytest.mark.parametrize("indent", [None, 2])
def test_a_list_decodes_as_json_loads_does(indent: int | None) -> None:
    doc = {
        "kind": "PodList",
        "apiVersion": "v1",
        "items": [
            {"metadata": {"name": "a],[b", "labels": {"x": "}{"}}, "spec": {"l": [[1, 2], []]}},
            {"metadata": {"name": "c\u00e9"}, "status": {"phase": "Running"}},
        ],
        "metadata": {"resourceVersion": "7", "continue": "tok"},
    }
    rest, items = decoded(json.dumps(doc, indent=indent))
    assert items == doc["items"]
    assert rest == {k: v for k, v in doc.items() if k != "items"}


def test_each_item_goes_through_the_trim() -> None:
    text = json.dumps({"items": [{"n": 1}, {"n": 2}], "metadata": {}})
    _, items = decoded(text, trim=lambda i: {"m": i["n"] * 10})
    assert items == [{"m": 10}, {"m": 20}]


@pytest.mark.parametrize("text", ['{"items": [], "metadata": {}}', '{"metadata": {}}', "{}"])
def test_empty_lists(text: str) -> None:
    _, items = decoded(text)
    assert items == []


@pytest.mark.parametrize("text", ["[]", '{"items": [{"a": 1} {"b": 2}]}', '{"items": [1'])
def test_a_body_that_is_not_a_list_object_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        decoded(text)


# ------------------------------------------------------------------ trims


def as_listed(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with what the API adds and no check reads: managedFields, a service
    account volume, default tolerations, container details."""
    out = copy.deepcopy(obj)
    out["metadata"]["managedFields"] = [
        {"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}
    ]
    out["metadata"].setdefault("annotations", {})["kubectl.kubernetes.io/last-applied"] = "{}"
    if "containers" in out.get("spec", {}):
        out["spec"]["volumes"] = [{"name": "kube-api-access", "projected": {"sources": []}}]
        out["spec"]["tolerations"] = [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
        ]
        for c in out["spec"]["containers"]:
            c.update(resources={}, volumeMounts=[{"name": "kube-api-access"}], env=[])
        for cs in out["status"].get("containerStatuses") or []:
            cs.update(name="c", restartCount=0, state={"running": {}}, image="x")
        out["status"].update(podIP="10.0.0.9", qosClass="BestEffort")
    if out.get("status", {}).get("nodeInfo"):
        out["status"]["images"] = [{"names": ["registry.example/cuda:12"], "sizeBytes": 1}]
    return out


def fleet() -> tuple[vli.Listing, vli.Settings]:
    """Two GPU nodes: gpu-1 healthy, gpu-2 with a plugin pod not ready; a leaked claim, a
    generated claim of a gone pod, a claim in use and a pending claim a pod waits for."""
    nodes = [node("gpu-1", {"nvidia.com/gpu.present": "true"}), node("gpu-2")]
    pods = [
        pod("plugin-a", "driver", node_name="gpu-1", labels=PLUGIN),
        pod("plugin-b", "driver", node_name="gpu-2", labels=PLUGIN, ready=False),
        pod("api", "kube-system", node_name="cp", labels={"component": "kube-apiserver"}),
        pod("train", uid="u-train", node_name="gpu-1", claims=["in-use"]),
        pod("waits", claims=["pending"], scheduled_message="0/2 nodes: cannot allocate"),
    ]
    pods[2]["spec"]["containers"] = [
        {"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.37.2"}
    ]
    slices = [
        resource_slice("gpu-1", [gpu_device(0, "GPU-0"), mig_device(1, "GPU-1", "MIG-1")]),
        resource_slice("gpu-2", [gpu_device(0, "GPU-2")]),
    ]
    claims = [
        claim("in-use", allocated=[("gpu-1", "gpu-0")], reserved_for=[("train", "u-train")]),
        claim("leaked", allocated=[("gpu-2", "gpu-0")], reserved_for=[("gone", "u-gone")]),
        claim("gen-x1", allocated=[("gpu-1", "gpu-1-mig-1g18gb-19-0")], owner_pod=("job", "u-j")),
        claim("pending", requests=[mig_request("1g.10gb")]),
    ]
    listing = vli.Listing(
        version={"gitVersion": "v1.37.2"},
        resource_group={"versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]},
        resource_version="v1",
        nodes=nodes,
        pods=pods,
        slices=slices,
        claims=claims,
        classes=[GPU_CLASS, MIG_CLASS],
    )
    settings = vli.Settings(
        driver=ddc.NVIDIA_DRIVER,
        device_classes=[*ddc.GPU_DEVICE_CLASSES],
        gpu_nodes=["gpu-1", "gpu-2"],
        now=1.9e9,
        pending_threshold_s=60,
    )
    return listing, settings


def trimmed(listing: vli.Listing) -> vli.Listing:
    out = copy.copy(listing)
    for attr, kind in (
        ("nodes", "nodes"),
        ("pods", "pods"),
        ("slices", "resourceslices"),
        ("claims", "resourceclaims"),
        ("classes", "deviceclasses"),
    ):
        trim = vli.TRIMS[kind]()
        setattr(out, attr, [trim(as_listed(o)) for o in getattr(listing, attr)])
    return out


def test_the_checks_judge_trimmed_objects_as_whole_ones() -> None:
    listing, settings = fleet()
    whole = [c.to_dict() for c in vc.all_checks(listing, settings)]
    slim = [c.to_dict() for c in vc.all_checks(trimmed(listing), settings)]
    assert slim == whole
    by_id = {c["id"]: c for c in whole}
    # the fleet exercises what the trimmed fields feed
    assert by_id["nodes.plugin-running"]["status"] == "fail"
    assert {p["subject"] for p in by_id["claims.leaked"]["problems"]} == {
        "default/leaked",
        "default/gen-x1",
    }
    assert by_id["claims.pending"]["status"] == "fail"
    assert [p["subject"] for p in by_id["claims.pending"]["problems"]] == ["default/pending"]
    assert by_id["versions.apiserver-skew"]["status"] == "pass"


def test_trims_drop_what_no_check_reads() -> None:
    listing, _ = fleet()
    slim = trimmed(listing)
    assert all("managedFields" not in o["metadata"] for o in slim.pods + slim.claims)
    assert "volumes" not in slim.pods[0]["spec"] and "tolerations" not in slim.pods[0]["spec"]
    assert slim.pods[0]["spec"]["containers"] == [{"name": "plugin", "image": "x"}]
    assert "images" not in slim.nodes[0]["status"]
    # claims keep everything else: claims gc writes them back
    assert slim.claims[2]["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"]


def test_a_trimmed_pod_keeps_the_extended_resources_the_report_counts() -> None:
    p = pod("train", node_name="gpu-1")
    p["spec"]["containers"] = [
        {
            "name": "train",
            "image": "cuda",
            "resources": {
                "requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"},
                "limits": {"memory": "8Gi", "nvidia.com/gpu": "2", "hugepages-2Mi": "1Gi"},
            },
            "env": [{"name": "X", "value": "1"}],
        },
        {"name": "log", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}},
    ]
    p["spec"]["initContainers"] = [
        {
            "name": "warm",
            "image": "cuda",
            "restartPolicy": "Always",
            "resources": {"limits": {"nvidia.com/mig-1g.18gb": "1"}},
            "command": ["sleep"],
        }
    ]
    spec = vli.trim_pod(p)["spec"]
    assert spec["containers"] == [
        {
            "name": "train",
            "image": "cuda",
            "resources": {
                "requests": {"nvidia.com/gpu": "2"},
                "limits": {"nvidia.com/gpu": "2"},
            },
        },
        {"name": "log", "image": "busybox"},
    ]
    assert spec["initContainers"] == [
        {
            "name": "warm",
            "restartPolicy": "Always",
            "resources": {"limits": {"nvidia.com/mig-1g.18gb": "1"}},
        }
    ]
    assert "initContainers" not in vli.trim_pod(pod("plain"))["spec"]


def test_equal_device_values_are_shared_between_devices() -> None:
    trim = vli.TRIMS["resourceslices"]()
    a = trim(as_listed(resource_slice("gpu-1", [gpu_device(0, "GPU-0")])))
    b = trim(as_listed(resource_slice("gpu-2", [gpu_device(0, "GPU-2")])))
    da, db = a["spec"]["devices"][0], b["spec"]["devices"][0]
    assert da["attributes"]["productName"] is db["attributes"]["productName"]
    assert da["capacity"]["memory"] is db["capacity"]["memory"]
    assert da["attributes"]["uuid"] == {"string": "GPU-0"}
    assert db["attributes"]["uuid"] == {"string": "GPU-2"}


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a in (x, y),c", {"a": "y", "c": ""}, True),
        ("a notin (x)", {"a": "x"}, False),
        ("!a", {"a": "1"}, False),
    ],
)
def test_label_selector(selector: str, labels: dict, matches: bool) -> None:
    assert vli.label_selector_matches(vli.parse_label_selector(selector), labels) is matches


def test_bad_label_selector_names_the_term() -> None:
    with pytest.raises(ValueError, match="'a in x'"):
        vli.parse_label_selector("a in x")


def test_a_namespace_keeps_its_name_and_labels_only() -> None:
    ns = {
        "metadata": {
            "name": "ml",
            "labels": {"gpufleet.io/team": "vision"},
            "annotations": {"a": "b" * 1000},
            "managedFields": [{}],
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    assert vli.TRIMS["namespaces"]()(ns) == {
        "metadata": {"name": "ml", "labels": {"gpufleet.io/team": "vision"}}
    }


def test_the_slice_trim_shares_counter_values_and_keeps_them() -> None:
    """Dynamic MIG slices (the simulator's, ``tests/unit/dynamic_mig_slices.py``): each
    distinct counter value is one object after the trim, and the counter accounting reads
    the trimmed slices as the listed ones."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as cc

    from tests.unit.dynamic_mig_slices import H200_NODE, slices

    listed = [as_listed(s) for s in slices(H200_NODE)]
    trim = vli.TRIMS["resourceslices"]()
    kept = [trim(copy.deepcopy(s)) for s in listed]
    ones = {
        id(c)
        for s in kept
        for d in s["spec"].get("devices") or []
        for entry in d["consumesCounters"]
        for name, c in entry["counters"].items()
        if name.startswith("memory-slice-")
    }
    assert len(ones) == 1  # every memory-slice counter of every device: one {"value": "1"}
    counter_set = kept[0]["spec"]["sharedCounters"][0]["counters"]
    assert counter_set["memory-slice-0"] is counter_set["memory-slice-7"]
    assert "managedFields" not in kept[0]["metadata"]
    before, after = cc.counter_sets(listed, []), cc.counter_sets(kept, [])
    assert before.keys() == after.keys()
    for k in before:
        assert (before[k].capacity, before[k].devices) == (after[k].capacity, after[k].devices)


def test_values_equal_in_python_but_of_other_types_are_not_shared() -> None:
    trim = vli.TRIMS["resourceslices"]()
    devices = [
        {"name": "a", "attributes": {"x": {"int": 1}}},
        {"name": "b", "attributes": {"x": {"int": True}}},
        {"name": "c", "attributes": {"x": {"int": 1.0}}},
    ]
    kept = trim({"spec": {"devices": devices}})["spec"]["devices"]
    values = [d["attributes"]["x"]["int"] for d in kept]
    assert [type(v) for v in values] == [int, bool, float]


# ------------------------------------------------------------------ the fast decoder


def list_page(items: list[Any]) -> bytes:
    """A list response as kube-apiserver writes it (compact JSON)."""
    doc = {"kind": "List", "apiVersion": "v1", "metadata": {"continue": "t"}, "items": items}
    return json.dumps(doc, separators=(",", ":")).encode()


def decoded_both_ways(kind: str, data: bytes) -> tuple[Any, Any]:
    """(``decode_list`` as it runs, with msgspec; ``decode_list`` by ``json`` alone)."""
    out = []
    for module in (vk.msgspec, None):
        items: list[Any] = []
        saved, vk.msgspec = vk.msgspec, module
        try:
            rest = vk.decode_list(data, items.append, vli.TRIMS[kind](), vli.SCHEMAS.get(kind))
        finally:
            vk.msgspec = saved
        out.append((rest, items))
    return out[0], out[1]


def listed_objects() -> dict[str, list[Any]]:
    """Per kind, objects as listed: the fleet's, and ones with fields missing, null, of
    other types and added."""
    listing, _ = fleet()
    extra = {"x-added": {"deep": [1, {"k": None}]}}
    out: dict[str, list[Any]] = {
        "pods": [as_listed(p) for p in listing.pods],
        "nodes": [as_listed(n) for n in listing.nodes],
        "resourceslices": [as_listed(s) for s in listing.slices],
        "resourceclaims": [as_listed(c) for c in listing.claims],
        "deviceclasses": [GPU_CLASS, MIG_CLASS],
        "daemonsets": [{"metadata": {"name": "d", "managedFields": []}, "spec": {}}],
        "events": [
            {
                "metadata": {"name": "e", "namespace": "ml", "uid": "u", "managedFields": []},
                "reason": vli.PREPARE_FAILED_REASON,
                "message": "prepare failed",
                "involvedObject": {"kind": "Pod", "name": "p"},
                "count": 3,
                **extra,
            }
        ],
        "namespaces": [{"metadata": {"name": "ml", "labels": {"a": "b"}, **extra}, **extra}],
    }
    full = as_listed(pod("full", node_name="gpu-1", claims=["c"], scheduled_message="wait"))
    full["spec"]["initContainers"] = [{"name": "i", "restartPolicy": "Always", **extra}]
    full["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    full["status"]["conditions"].append({"type": "Ready", "status": "True", **extra})
    full["metadata"].update(extra)
    full["spec"].update(extra)
    out["pods"] += [
        full,
        {},
        {"metadata": {}},
        {"metadata": None, "spec": None, "status": None},
        {"spec": {"containers": None, "initContainers": None, "nodeName": None}},
        {"spec": {"containers": [], "initContainers": []}},
        {"spec": {"containers": [{"resources": None}, {"resources": {"requests": None}}]}},
        {"spec": {"containers": [{"resources": {"limits": {"a/b": None, "cpu": 1}}}]}},
        {"status": {"conditions": None, "containerStatuses": None, "phase": None}},
        {"status": {"conditions": [None, 3, {"type": None}, {"type": "PodScheduled"}]}},
        {"status": {"conditions": {"type": "PodScheduled"}, "containerStatuses": "x"}},
        {"spec": {"containers": "ab", "initContainers": {"name": "i"}}},
        {"spec": {"containers": [None, 1, "x", []]}},
        {"metadata": ["name"], "spec": 1, "status": "Running"},
        {"spec": {"containers": [{"resources": "x"}, {"resources": {"requests": ["x"]}}]}},
        {"status": {"containerStatuses": [None, {"name": 1, "ready": "yes", **extra}]}},
    ]
    out["resourceslices"] += [
        {"spec": {"devices": [{"name": "g", "basic": {"attributes": {"a": {"string": "x"}}}}]}},
        {"spec": {"devices": [{"attributes": {"a": {"string": "x", "int": 1}, "b": 3}}]}},
        {"spec": {"devices": [{"attributes": {"a": {"list": [1]}, "b": {"obj": {}}}}]}},
        {"spec": {"sharedCounters": [{"counters": {"m": {"value": "1"}}}, None, 2]}},
        {"spec": {"devices": [{"consumesCounters": [{"counters": None}, "x"]}]}},
    ]
    for kind, odd in (
        ("pods", ODD.PODS_ODD),
        ("resourceclaims", ODD.CLAIMS_ODD),
        ("resourceslices", ODD.SLICES_ODD),
        ("nodes", ODD.NODES_ODD),
    ):
        out[kind] += [*ODD.NOT_A_MAPPING, *copy.deepcopy(list(odd.values()))]
    return out


@pytest.mark.parametrize("kind", sorted(vli.TRIMS))
def test_the_fast_decoder_gives_the_items_of_the_json_path(kind: str) -> None:
    objects = listed_objects()[kind]
    for obj in objects:  # each alone: a page the fast decoder refuses is read by json
        fast, slow = decoded_both_ways(kind, list_page([obj]))
        assert fast == slow, obj
    fast, slow = decoded_both_ways(kind, list_page(objects))
    assert fast == slow


@pytest.mark.parametrize("kind", sorted(vli.TRIMS))
def test_the_fast_decoder_takes_well_formed_pages(kind: str) -> None:
    objects = [o for o in listed_objects()[kind] if o not in ODD.NOT_A_MAPPING][:3]
    data = list_page(objects)
    trim = vli.TRIMS[kind]()
    assert vk.fast_page(data, trim, vli.SCHEMAS.get(kind)) is not None


def test_the_pod_schema_skips_what_trim_pod_does_not_read() -> None:
    listing, _ = fleet()
    page = list_page([as_listed(p) for p in listing.pods])
    _, untrimmed = vk.fast_page(page, None, vli.SCHEMAS["pods"])
    assert all("managedFields" not in p["metadata"] for p in untrimmed)
    assert all("volumes" not in p["spec"] and "podIP" not in p["status"] for p in untrimmed)


def test_trim_whole_keeps_all_but_the_bookkeeping() -> None:
    claim_listed = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            **dict.fromkeys(vli.OBJECT_METADATA, "v"),
            "managedFields": [{"manager": "kube-scheduler"}],
        },
        "spec": {"devices": {"requests": [{"name": "gpu"}]}},
        "status": {"reservedFor": [{"name": "p"}]},
    }
    kept = vli.trim_whole(copy.deepcopy(claim_listed))
    del claim_listed["metadata"]["managedFields"]
    assert kept == claim_listed
    node = vli.trim_node({"metadata": None, "status": {"images": [{}], "phase": "Running"}})
    assert node == {"metadata": None, "status": {"phase": "Running"}}


@pytest.mark.parametrize("kind", ["nodes", "resourceslices", "resourceclaims", "daemonsets"])
def test_the_whole_kinds_skip_their_managed_fields_as_they_decode(kind: str) -> None:
    objects = [o for o in listed_objects()[kind] if o not in ODD.NOT_A_MAPPING][:3]
    assert any("managedFields" in (o.get("metadata") or {}) for o in objects)
    _, untrimmed = vk.fast_page(list_page(objects), None, vli.SCHEMAS[kind])
    assert all("managedFields" not in (o.get("metadata") or {}) for o in untrimmed)
    assert [o.get("spec") for o in untrimmed] == [o.get("spec") for o in objects]


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _object(**fields: Any) -> Any:
    """An object with any of ``fields`` and an added one, or any JSON value instead."""
    return st.fixed_dictionaries({}, optional={**fields, "x-added": ANY_JSON}) | ANY_JSON


def _objects(**fields: Any) -> Any:
    return st.lists(_object(**fields), max_size=3) | ANY_JSON


_RESOURCES = _object(
    requests=st.dictionaries(st.sampled_from(["cpu", "nvidia.com/gpu", "a/b"]), ANY_JSON)
    | ANY_JSON,
    limits=ANY_JSON,
)
_CONTAINERS = _objects(name=ANY_JSON, image=ANY_JSON, restartPolicy=ANY_JSON, resources=_RESOURCES)
PODS = _object(
    metadata=_object(
        **dict.fromkeys(("name", "namespace", "uid", "labels", "managedFields"), ANY_JSON)
    ),
    spec=_object(
        nodeName=ANY_JSON,
        resourceClaims=ANY_JSON,
        containers=_CONTAINERS,
        initContainers=_CONTAINERS,
    ),
    status=_object(
        phase=ANY_JSON,
        resourceClaimStatuses=ANY_JSON,
        conditions=_objects(
            type=st.sampled_from(["PodScheduled", "Ready"]) | ANY_JSON,
            status=ANY_JSON,
            message=ANY_JSON,
            lastTransitionTime=ANY_JSON,
        ),
        containerStatuses=_objects(name=ANY_JSON, ready=ANY_JSON, state=ANY_JSON),
    ),
)
_VALUES = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.dictionaries(st.sampled_from(["int", "bool", "string"]), SCALARS, max_size=2) | ANY_JSON,
    max_size=3,
)
SLICES = _object(
    metadata=_object(managedFields=ANY_JSON, name=ANY_JSON),
    spec=_object(
        devices=_objects(attributes=_VALUES, capacity=_VALUES, consumesCounters=ANY_JSON),
        sharedCounters=_objects(counters=_VALUES),
    ),
)


@settings(max_examples=150, deadline=None)
@given(pods=st.lists(PODS, max_size=3), slices=st.lists(SLICES, max_size=3))
def test_any_listed_objects_decode_the_same_either_way(pods: list[Any], slices: list[Any]) -> None:
    for kind, objects in (("pods", pods), ("resourceslices", slices), ("resourceclaims", pods)):
        fast, slow = decoded_both_ways(kind, list_page(objects))
        assert fast == slow
