"""Hostile input for moving a GPU pool between NVIDIA's device plugin and DRA, and for the
device plugin's values: cluster objects of another shape than the API's in the plan
(``migrate.plan``), list answers of another shape in the move (``migrate.move``, through a
stub of the API), the options of the modules ``gpu_path_plan`` and ``gpu_path_move`` (run in
this process), ``gpufleet migrate``'s options and ``-e`` values, and the role variables the
device plugin's values are planned from (``device_plugin.values.plan``).

The rule each case holds to: nothing raises but the module's own error; an object or
field of another type reads as absent and a quantity that is not one fails closed (counts
as advertised); a refusal names the option or variable, the value and a fix, before the
kubeconfig is read or anything is written; the CLI exits 2 for input that cannot run; a
template is data. The move's API choreography is tests/integration/test_gpu_path_move.py."""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import chart as dpc
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import values as dpv
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import quantity as kq
from ansible_collections.gpufleet.cluster.plugins.module_utils.migrate import move as mm
from ansible_collections.gpufleet.cluster.plugins.module_utils.migrate import plan as mp
from ansible_collections.gpufleet.cluster.plugins.modules import gpu_path_move, gpu_path_plan

from tests.harness.ansible_module import run_module
from tests.unit.ansible_vars import as_ansible_sees_it, load_extra_vars, trust_as_template
from tests.unit.device_plugin.plugin_inputs import STAND_IN_CHART, inputs
from tests.unit.hostile.inputs import assert_refused, invoke

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "gpu_path_migrate"
PATH_LABEL = "gpufleet.io/gpu-path"
GPU = "nvidia.com/gpu"
TEMPLATE = "{{ lookup('pipe', 'touch pwned') }}"
#: Seconds a case may take: none reads or waits for long (BOUND), and what is only computed
#: takes far less (QUICK, in CPU seconds of this process, which load does not stretch; an
#: exponent computed exactly, 1e9999999, takes more).
BOUND = 10
QUICK = 2


# ------------------------------------------------------------------- migrate.plan objects


HOSTS = [mp.PoolHost("h200-01", "gpu-1", "device-plugin")]
NODE = {"metadata": {"name": "gpu-1"}, "status": {"allocatable": {GPU: "8"}}}
GPU_CLASS = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"extendedResourceName": GPU}}
BY_PATH = [
    {"spec": {"template": {"spec": {"nodeSelector": {PATH_LABEL: path}}}}}
    for path in ("device-plugin", "dra")
]


def gpu_pod(name: str = "p", gpus: Any = "1", **spec: Any) -> dict[str, Any]:
    containers = [{"resources": {"limits": {GPU: gpus}}}]
    return {
        "metadata": {"namespace": "train", "name": name},
        "spec": {"nodeName": "gpu-1", "containers": containers, **spec},
    }


def build(**kwargs: Any) -> mp.PoolMove:
    args: dict[str, Any] = {
        "pool": "gpu_h200",
        "to_path": "dra",
        "hosts": HOSTS,
        "nodes": [NODE],
        "pods": [],
        "slices": [],
        "device_classes": [GPU_CLASS],
        "daemonsets": BY_PATH,
    }
    args.update(kwargs)
    return mp.build_plan(**args)


#: A quantity in a Node's allocatable -> what the node advertises (no DRA device): 0 in any
#: spelling advertises nothing, anything that is not a quantity counts (fail closed).
ALLOCATABLE = {
    "minus-one": ("-1", "device-plugin"),
    "1e999": ("1e999", "device-plugin"),
    "exponent-beyond-reading": ("1e9999999", "device-plugin"),
    "nan": ("NaN", "device-plugin"),
    "hex": ("0x10", "device-plugin"),
    "kilo": ("1k", "device-plugin"),
    "boolean": (True, "device-plugin"),
    "null": (None, "device-plugin"),
    "list": ([8], "device-plugin"),
    "superscript-two": ("\u00b2", "device-plugin"),
    "arabic-zero": ("\u0660", "device-plugin"),
    "fullwidth-eight": ("\uff18", "device-plugin"),
    "5000-digits": ("9" * 5000, "device-plugin"),
    "zero": ("0", "none"),
    "zero-int": (0, "none"),
    "zero-kilo": ("0k", "none"),
    "minus-zero": ("-0", "none"),
    "zero-exponent": ("0e5", "none"),
}


@pytest.mark.parametrize("case", ALLOCATABLE)
def test_a_node_quantity_of_any_shape_is_read_at_once_and_fails_closed(case: str) -> None:
    quantity, expected = ALLOCATABLE[case]
    start = time.process_time()
    assert mp.advertises({GPU: quantity}, 0) == expected
    assert mm.advertised({"allocatable": {GPU: quantity}, "devices": 0}) == expected
    assert time.process_time() - start < QUICK


@pytest.mark.parametrize(
    "text",
    ["1e1001", "1e-1001", "1e9999999", "9" * 1001, "1e" + "9" * 5000],
    ids=["1e1001", "1e-1001", "1e9999999", "1001-digits", "5000-digit-exponent"],
)
def test_a_quantity_too_large_to_compute_is_refused_not_computed(text: str) -> None:
    start = time.process_time()
    with pytest.raises(kq.QuantityError, match="beyond the quantities read here"):
        kq.parse_quantity(text)
    assert kq.quantity_int64(text) is None
    assert time.process_time() - start < QUICK


#: A pod's GPU limit -> the count the plan evicts it for (0: not a GPU pod).
POD_QUANTITIES = {
    "kilo": ("1k", 1000),
    "1e3": ("1e3", 1000),
    "1e999": ("1e999", 10**999),
    "exponent-beyond-reading": ("1e9999999", 0),
    "minus-one": ("-1", 0),
    "nan": ("NaN", 0),
    "hex": ("0x10", 0),
    "boolean": (True, 0),
    "half": ("500m", 0),
    "superscript-two": ("\u00b2", 0),
    "5000-digits": ("9" * 5000, 0),
}


@pytest.mark.parametrize("case", POD_QUANTITIES)
def test_a_pod_quantity_of_any_shape_counts_only_as_a_whole_number(case: str) -> None:
    quantity, count = POD_QUANTITIES[case]
    start = time.process_time()
    doc = build(pods=[gpu_pod(gpus=quantity)]).to_dict()
    assert time.process_time() - start < QUICK
    pods = doc["nodes"][0]["pods"]
    assert [p["requests"] for p in pods] == ([{GPU: count}] if count else [])
    assert doc["evicted_pods"] == (1 if count else 0)


#: Nodes lists where the pool's Node is not an object (or not there): node-missing.
NODES_WITHOUT_GPU_1 = {
    "int": [1],
    "string": ["gpu-1"],
    "null": [None],
    "metadata-a-list": [{"metadata": ["gpu-1"]}],
    "name-a-list": [{"metadata": {"name": ["gpu-1"]}}],
    "a-string-not-a-list": "gpu-1",
    "name-with-a-comma": [{"metadata": {"name": "gpu-1,gpu-2"}}],
}


@pytest.mark.parametrize("case", NODES_WITHOUT_GPU_1)
def test_a_node_that_is_no_object_is_missing(case: str) -> None:
    p = build(nodes=NODES_WITHOUT_GPU_1[case])
    assert [(b.rule, b.node) for b in p.blockers] == [("node-missing", "gpu-1")]
    assert p.nodes[0].advertises == "none"


@pytest.mark.parametrize("status", [["x"], "8", None, {"allocatable": [GPU]}, {"allocatable": "8"}])
def test_a_node_status_of_another_shape_advertises_nothing(status: Any) -> None:
    p = build(nodes=[{"metadata": {"name": "gpu-1"}, "status": status}], to_path="device-plugin")
    assert p.nodes[0].advertises == "none"
    assert p.blockers == []


@pytest.mark.parametrize("name", ["gpu-1,gpu-2", "gpu-1/x", "spec.nodeName=gpu-1", "../gpu-1"])
def test_a_host_node_name_is_matched_whole_never_read_as_a_selector(name: str) -> None:
    nodes = [NODE, {**NODE, "metadata": {"name": "gpu-2"}}]
    hosts = [mp.PoolHost("h", name, "device-plugin")]
    p = build(hosts=hosts, nodes=nodes, pods=[gpu_pod()])
    assert [(b.rule, b.node) for b in p.blockers] == [("node-missing", name)]
    assert p.to_dict()["evicted_pods"] == 0


#: Pods lists with items or fields of another type: (pods, GPU pods the plan evicts).
PODS = {
    "items-not-objects": ([1, "x", None, ["p"]], []),
    "metadata-a-list": ([{**gpu_pod(), "metadata": ["x"]}], [("", "")]),
    "spec-a-list": ([{**gpu_pod(), "spec": ["x"]}], []),
    "status-a-string": ([{**gpu_pod(), "status": "Succeeded"}], [("train", "p")]),
    "phase-a-list": ([{**gpu_pod(), "status": {"phase": ["Failed"]}}], [("train", "p")]),
    "containers-an-int": ([gpu_pod(containers=5)], []),
    "containers-a-string": ([gpu_pod(containers="abc")], []),
    "init-containers-an-int": ([gpu_pod(initContainers=5)], [("train", "p")]),
    "claims-an-int": ([gpu_pod(gpus="0", resourceClaims=5)], []),
    "claims-not-objects": ([gpu_pod(gpus="0", resourceClaims=["c", 1])], []),
    "owner-references-an-int": (
        [{**gpu_pod(), "metadata": {"namespace": "train", "name": "p", "ownerReferences": 7}}],
        [("train", "p")],
    ),
    "names-not-strings": (
        [{**gpu_pod(), "metadata": {"namespace": {"a": 1}, "name": ["p"]}}],
        [("{'a': 1}", "['p']")],
    ),
    "huge-unicode-name": ([gpu_pod(name="\u00e9" * 100_000)], [("train", "\u00e9" * 100_000)]),
}


@pytest.mark.parametrize("case", PODS)
def test_pods_of_another_shape_are_read_as_the_api_would_have_them(case: str) -> None:
    pods, evicted = PODS[case]
    p = build(pods=pods, to_path="device-plugin")
    assert [(x["namespace"], x["name"]) for x in p.nodes[0].pods] == evicted
    assert p.to_dict()["evicted_pods"] == len(evicted)


def test_a_pod_of_ten_thousand_containers_is_planned_at_once() -> None:
    pod = gpu_pod(containers=[{"resources": {"limits": {GPU: "1"}}}] * 10_000)
    start = time.process_time()
    p = build(pods=[pod])
    assert time.process_time() - start < QUICK
    assert p.nodes[0].pods[0]["requests"] == {GPU: 10_000}
    assert (p.served_by, p.blockers) == ({GPU: "gpu.nvidia.com"}, [])


@pytest.mark.parametrize(
    "slices",
    [
        [1, "x", None],
        [{"spec": ["gpu.nvidia.com"]}],
        [{"spec": {"driver": ["gpu.nvidia.com"], "nodeName": "gpu-1", "devices": [{}]}}],
        [{"spec": {"driver": "gpu.nvidia.com", "nodeName": ["gpu-1"], "devices": [{}]}}],
        [{"spec": {"driver": "gpu.nvidia.com", "nodeName": "gpu-1", "devices": []}}],
    ],
    ids=["not-objects", "spec-a-list", "driver-a-list", "node-a-list", "no-devices"],
)
def test_a_resourceslice_of_another_shape_publishes_nothing(slices: list[Any]) -> None:
    assert build(slices=slices).nodes[0].advertises == "device-plugin"


@pytest.mark.parametrize(
    "classes",
    [
        [1, "gpu.nvidia.com", None],
        [{"metadata": ["gpu.nvidia.com"], "spec": {"extendedResourceName": GPU}}],
        [{"metadata": {"name": ["gpu.nvidia.com"]}, "spec": {"extendedResourceName": GPU}}],
    ],
    ids=["not-objects", "metadata-a-list", "name-a-list"],
)
def test_a_deviceclass_of_another_shape_is_no_gpu_class(classes: list[Any]) -> None:
    p = build(device_classes=classes, pods=[gpu_pod()])
    assert [b.rule for b in p.blockers] == ["no-dra-driver", "extended-resource-unmapped"]


def _ds(pod_spec: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": pod_spec}}}


def _required(required: Any) -> dict[str, Any]:
    """A DaemonSet whose required node affinity is ``required``."""
    rule = "requiredDuringSchedulingIgnoredDuringExecution"
    return _ds({"affinity": {"nodeAffinity": {rule: required}}})


def _expression(expression: Any) -> dict[str, Any]:
    return _required({"nodeSelectorTerms": [{"matchExpressions": [expression]}]})


def _path_in(values: Any) -> dict[str, Any]:
    return _expression({"key": PATH_LABEL, "operator": "In", "values": values})


#: DaemonSets of another shape than the API's: the path label values they select by.
DAEMONSETS: dict[str, tuple[list[Any], set[str]]] = {
    "not-objects": ([1, "dra", None], set()),
    "spec-a-list": ([{"spec": ["dra"]}], set()),
    "template-a-list": ([{"spec": {"template": ["dra"]}}], set()),
    "pod-spec-a-list": ([_ds(["dra"])], set()),
    "affinity-a-list": ([_ds({"affinity": ["dra"]})], set()),
    "required-a-list": ([_required(["dra"])], set()),
    "terms-a-string": ([_required({"nodeSelectorTerms": "dra"})], set()),
    "expression-a-string": ([_expression("dra")], set()),
    "values-a-map": ([_path_in({"dra": 1})], set()),
    "values-an-int": ([_path_in(5)], set()),
    "values-a-string": ([_path_in("d")], set()),
    "value-an-int": ([_path_in([7])], set()),
    "selector-value-a-list": ([_ds({"nodeSelector": {PATH_LABEL: ["dra"]}})], set()),
    "selector-a-list": ([_ds({"nodeSelector": [PATH_LABEL]})], set()),
    "by-selector-and-affinity": (
        [_ds({"nodeSelector": {PATH_LABEL: "dra"}}), _path_in(["device-plugin"])],
        {"dra", "device-plugin"},
    ),
}


@pytest.mark.parametrize("case", DAEMONSETS)
def test_a_daemonset_of_another_shape_selects_no_path(case: str) -> None:
    daemonsets, selected = DAEMONSETS[case]
    assert mp._selected_paths(daemonsets) == selected
    rules = [b.rule for b in build(daemonsets=daemonsets).blockers]
    assert rules == ([] if selected else ["no-new-advertiser", "old-advertiser-not-by-path"])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("batch_size", 0),
        ("batch_size", -1),
        ("batch_size", True),
        ("batch_size", 1.5),
        ("batch_size", float("nan")),
        ("batch_size", "2"),
        ("to_path", "gpu"),
        ("to_path", ["dra"]),
        ("to_path", "both"),
    ],
)
def test_build_plan_is_the_last_guard_of_what_the_module_judged(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        build(**{field: value})


# ------------------------------------------------------------------- migrate.move answers


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """A JSON merge patch (RFC 7386)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping):
            _merge(target.setdefault(key, {}), value)
        else:
            target[key] = value


class StubApi:
    """Node gpu-1 on the device plugin (8 GPUs), ``pods`` and ``slices`` as the answers to
    the pod and ResourceSlice lists; keeps every request and applies the Node's merge
    patches."""

    def __init__(self, pods: Any, slices: Any = None) -> None:
        self.node: dict[str, Any] = {
            "metadata": {"name": "gpu-1", "labels": {PATH_LABEL: "device-plugin"}},
            "spec": {},
            "status": {"allocatable": {GPU: "8"}},
        }
        self.pods = pods
        self.slices = {"items": []} if slices is None else slices
        self.sent: list[tuple[str, str, Any]] = []

    def __call__(self, method: str, path: str, query: Any = (), body: Any = None, **_: Any) -> Any:
        self.sent.append((method, path, copy.deepcopy(body)))
        if path == "/api/v1/nodes/gpu-1":
            if method == "PATCH":
                _merge(self.node, body)
            return copy.deepcopy(self.node)
        if path.endswith("/resourceslices"):
            return self.slices
        if path == "/api/v1/pods":
            return self.pods
        raise AssertionError(f"unexpected request {method} {path}")

    def writes(self) -> list[tuple[str, str, Any]]:
        return [s for s in self.sent if s[0] != "GET"]


def _clock() -> mm.Clock:
    ticks = iter(range(10**6))
    return mm.Clock(sleep=lambda _s: None, now=lambda: float(next(ticks)), interval=1)


ANSWER = "the answer to GET /api/v1/pods is "
#: Pod list answers of another shape than the API's -> what the error says of it.
HOSTILE_POD_LISTS = {
    "items-a-string": ({"items": "x"}, ANSWER + "items of type str"),
    "items-an-int": ({"items": 5}, ANSWER + "items of type int"),
    "items-a-map": ({"items": {"a": 1}}, ANSWER + "items of type dict"),
    "a-list": ([{"metadata": {"name": "p"}}], ANSWER + "a list, not an object"),
    "a-string": ("pods", ANSWER + "a str, not an object"),
    "item-an-int": ({"items": [1]}, ANSWER + "an item that is not an object"),
    "item-a-string": ({"items": ["train/p"]}, ANSWER + "an item that is not an object"),
    "gpu-pod-without-a-name": (
        {"items": [{**gpu_pod(), "metadata": ["train", "p"]}]},
        "a GPU pod on node gpu-1 has no namespace and name to evict it by",
    ),
}


@pytest.mark.parametrize("case", HOSTILE_POD_LISTS)
def test_a_pod_list_of_another_shape_is_a_kube_error_naming_the_request(case: str) -> None:
    answer, said = HOSTILE_POD_LISTS[case]
    with pytest.raises(vk.KubeError) as err:
        mm._gpu_pods_on(StubApi(answer), "gpu-1")
    assert err.value.status is None
    assert err.value.message.startswith(said), err.value.message
    assert err.value.message.endswith(
        "; fix: check that the kubeconfig names the cluster's kube-apiserver"
    )


@pytest.mark.parametrize("answer", [None, {}, {"items": None}, {"items": []}])
def test_an_empty_pod_list_is_no_gpu_pod(answer: Any) -> None:
    assert mm._gpu_pods_on(StubApi(answer), "gpu-1") == []


@pytest.mark.parametrize("case", HOSTILE_POD_LISTS)
def test_a_hostile_pod_list_fails_the_batch_and_undoes_the_cordon(case: str) -> None:
    api = StubApi(HOSTILE_POD_LISTS[case][0])
    with pytest.raises(mm.MoveFailed) as err:
        mm.move_batch(api, ["gpu-1"], "dra", driver="gpu.nvidia.com", clock=_clock())
    assert (err.value.phase, err.value.node, err.value.restored) == ("evict", "gpu-1", True)
    cordon, uncordon = ({"spec": {"unschedulable": True}}, {"spec": {"unschedulable": None}})
    assert api.writes() == [
        ("PATCH", "/api/v1/nodes/gpu-1", cordon),
        ("PATCH", "/api/v1/nodes/gpu-1", uncordon),
    ]  # no label changed, no pod evicted
    assert api.node["metadata"]["labels"] == {PATH_LABEL: "device-plugin"}
    assert "unschedulable" not in api.node["spec"]


@pytest.mark.parametrize(
    "answer", [{"items": "x"}, {"items": [1]}, ["x"]], ids=["items-a-string", "item", "list"]
)
def test_a_hostile_resourceslice_list_fails_the_read_before_any_write(answer: Any) -> None:
    api = StubApi({"items": []}, slices=answer)
    with pytest.raises(mm.MoveFailed) as err:
        mm.move_batch(api, ["gpu-1"], "dra", driver="gpu.nvidia.com", clock=_clock())
    assert (err.value.phase, err.value.restored) == ("read", True)
    assert "resourceslices" in str(err.value) and api.writes() == []


@pytest.mark.parametrize("to_path", ["gpu", "", None, ["dra"], "DRA", "both", "none", "moving"])
def test_move_batch_refuses_a_path_before_any_request(to_path: Any) -> None:
    def request(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a request was sent: {args}")

    with pytest.raises(ValueError, match=r"to_path .* is not one of device-plugin, dra"):
        mm.move_batch(request, ["gpu-1"], to_path, driver="gpu.nvidia.com")


# ----------------------------------------------------------------- the modules' options


CLOSED_PORT = "https://127.0.0.1:9"


@pytest.fixture
def closed_port(tmp_path: Path) -> str:
    """A kubeconfig whose API server is a closed port."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{CLOSED_PORT}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return str(path)


@pytest.fixture
def no_kube(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refusals come before the kubeconfig is read: a Kube made fails the test."""

    def tripped(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the kubeconfig was read: {args}")

    monkeypatch.setattr(vk, "Kube", tripped)


def _host(node: str = "gpu-1", groups: tuple[str, ...] = ("gpu_h200",)) -> dict[str, Any]:
    return {"host": "h200-01", "node": node, "groups": list(groups)}


BAD_NODE_NAMES = {
    "comma": "a,b",
    "dot-dot-slash": "../x",
    "equals": "x=y",
    "slash": "a/b",
    "300-characters": "a" * 300,
    "empty": "",
    "upper-case": "GPU-1",
    "unicode": "gp\u00fc-1",
    "selector": "gpu-1,spec.nodeName!=x",
}

#: gpu_path_plan options -> what the refusal names.
PLAN_REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    **{
        f"node-{case}": ({"hosts": [_host(name)]}, f"its node name {name!r}")
        for case, name in BAD_NODE_NAMES.items()
    },
    "both-paths": (
        {"hosts": [_host(groups=("gpu_path_dra", "gpu_path_device_plugin"))]},
        "is in gpu_path_device_plugin, gpu_path_dra",
    ),
    "unknown-path-group": (
        {"hosts": [_host(groups=("gpu_path_mig",))]},
        "host h200-01 of pool gpu_h200 is in gpu_path_mig",
    ),
    "no-hosts": ({"hosts": []}, "pool gpu_h200 has no hosts"),
    "batch-0": ({"batch_size": 0}, "batch_size 0 is below 1"),
    "batch-minus-1": ({"batch_size": -1}, "batch_size -1 is below 1"),
    "driver-selector": ({"driver": "gpu.nvidia.com,spec.nodeName=x"}, "driver 'gpu.nvidia.com,"),
    "driver-empty": ({"driver": ""}, "driver ''"),
    "driver-64-characters": ({"driver": "d" * 64}, "more than a DRA driver name's 63"),
}


@pytest.mark.parametrize("case", PLAN_REFUSALS)
def test_gpu_path_plan_refuses_before_the_kubeconfig_is_read(
    case: str, closed_port: str, no_kube: None
) -> None:
    over, named = PLAN_REFUSALS[case]
    args = {"pool": "gpu_h200", "to": "dra", "hosts": [_host()], "kubeconfig": closed_port}
    res = run_module(gpu_path_plan, {**args, **over})
    assert res["failed"] is True and "plan" not in res
    assert named in res["msg"] and "; fix: " in res["msg"], res["msg"]


#: gpu_path_move options -> what the refusal names.
MOVE_REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    **{
        f"node-{case}": ({"nodes": ["gpu-1", name]}, f"node name {name!r}")
        for case, name in BAD_NODE_NAMES.items()
    },
    "no-nodes": ({"nodes": []}, "nodes is empty"),
    "evict-timeout-0": ({"evict_timeout": 0}, "evict_timeout 0 is not"),
    "evict-timeout-minus-5": ({"evict_timeout": -5}, "evict_timeout -5 is not"),
    "advertise-timeout-0": ({"advertise_timeout": 0}, "advertise_timeout 0 is not"),
    "advertise-timeout-minus-5": ({"advertise_timeout": -5}, "advertise_timeout -5 is not"),
    "interval-0": ({"interval": 0}, "interval 0.0 is not"),
    "interval-nan": ({"interval": "nan"}, "interval nan is not"),
    "interval-inf": ({"interval": "inf"}, "interval inf is not"),
    "driver-selector": ({"driver": "gpu.nvidia.com,spec.nodeName=x"}, "driver 'gpu.nvidia.com,"),
    "driver-empty": ({"driver": ""}, "driver ''"),
}


@pytest.mark.parametrize("case", MOVE_REFUSALS)
def test_gpu_path_move_refuses_before_the_kubeconfig_is_read(
    case: str, closed_port: str, no_kube: None
) -> None:
    over, named = MOVE_REFUSALS[case]
    args = {"nodes": ["gpu-1"], "to": "dra", "kubeconfig": closed_port}
    res = run_module(gpu_path_move, {**args, **over})
    assert res["failed"] is True and res["nodes"] == []
    assert named in res["msg"] and "; fix: " in res["msg"], res["msg"]


def test_gpu_path_plan_on_a_closed_port_says_where_and_what_to_do(closed_port: str) -> None:
    args = {"pool": "gpu_h200", "to": "dra", "hosts": [_host()], "kubeconfig": closed_port}
    start = time.monotonic()
    res = run_module(gpu_path_plan, args)
    assert time.monotonic() - start < BOUND + vk.CONNECT_TIMEOUT
    assert res["failed"] is True and "exception" not in res
    assert res["msg"].startswith(f"reading the cluster: no answer: the API server {CLOSED_PORT}")
    assert "cannot be reached" in res["msg"] and "fix: check that kube-apiserver" in res["msg"]


def test_gpu_path_move_on_a_closed_port_fails_at_the_read_and_changes_nothing(
    closed_port: str,
) -> None:
    args = {"nodes": ["gpu-1"], "to": "dra", "kubeconfig": closed_port}
    start = time.monotonic()
    res = run_module(gpu_path_move, args)
    assert time.monotonic() - start < BOUND + vk.CONNECT_TIMEOUT
    assert (res["failed"], res["phase"], res["restored"]) == (True, "read", True)
    assert [n["phase"] for n in res["nodes"]] == ["read"]
    assert f"the API server {CLOSED_PORT} cannot be reached" in res["msg"]
    assert "fix: check that kube-apiserver" in res["msg"]


# ----------------------------------------------------------------------- gpufleet migrate


def _migrate(hostile: dict[str, str], *args: str, plan: bool = True) -> list[str]:
    base = ["migrate", "-i", hostile["inventory"], "--pool", "gpu_nodes", "--to", "dra"]
    return base + (["--plan"] if plan else []) + list(args)


OPTION_REFUSALS = {
    "batch-size-0": (["--batch-size", "0"], "--batch-size"),
    "batch-size-minus-1": (["--batch-size", "-1"], "--batch-size"),
    "batch-size-word": (["--batch-size", "two"], "--batch-size"),
    "to-gpu": (["--to", "gpu"], "--to"),
    "extra-var-not-a-name": (["-e", "1x=2"], "is not an Ansible variable name"),
    "extra-var-open-list": (["-e", "gpu_path_migrate_batch_size=[1"], "gpu_path_migrate_batch"),
}


@pytest.mark.parametrize("case", OPTION_REFUSALS)
def test_migrate_refuses_an_option_before_any_run(hostile: dict[str, str], case: str) -> None:
    args, named = OPTION_REFUSALS[case]
    assert_refused(invoke(hostile, _migrate(hostile, *args)), (named,))


def test_json_without_plan_is_refused_with_its_fix(hostile: dict[str, str]) -> None:
    result = invoke(hostile, _migrate(hostile, "--json", plan=False))
    assert_refused(result, ("--json",))
    assert "Fix: add --plan." in result.output


@pytest.mark.parametrize("inventory", ["missing", "empty"])
def test_an_inventory_that_is_not_there_is_refused_at_once(
    hostile: dict[str, str], inventory: str
) -> None:
    path = hostile["missing"] if inventory == "missing" else ""
    said = f"inventory {path!r} does not exist" if path else "-i '': the inventory path is empty"
    argv = ["migrate", "-i", path, "--pool", "gpu_nodes", "--to", "dra", "--plan"]
    start = time.monotonic()
    result = invoke(hostile, argv)
    assert time.monotonic() - start < BOUND
    assert_refused(result, (said,))
    assert "Fix: pass -i with" in result.output


def _role_task() -> dict[str, Any]:
    tasks = _role_yaml("tasks/main.yml")
    assert tasks[0]["name"].startswith("GPU path | Refuse a pool that is no group of hosts")
    return tasks[0]


def _role_yaml(name: str) -> Any:
    return yaml.safe_load((ROLE / name).read_text(encoding="utf-8"))


ROLE_SPEC = _role_yaml("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
#: The role's defaults but the kubeconfig's (a lookup, which the entry check does not read).
ROLE_DEFAULTS = {
    k: v for k, v in _role_yaml("defaults/main.yml").items() if k != "gpu_path_migrate_kubeconfig"
}
#: The groups of the hostile inventory (conftest ``hostile``).
GROUPS = {"all": ["cp-1", "gpu-1"], "gpu_nodes": ["gpu-1"], "kube_node": ["gpu-1"]}


def role_entry_refusal(variables: Mapping[str, Any]) -> str | None:
    """The message of the role's first task (its entry check) for ``variables`` as Ansible
    loaded them, in Ansible's own Templar; None when it passes."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    task = _role_task()["ansible.builtin.assert"]
    templar = Templar(
        loader=DataLoader(), variables={**ROLE_DEFAULTS, **variables, "groups": GROUPS}
    )
    for condition in task["that"]:
        if str(templar.template(trust_as_template("{{ (" + condition + ") }}"))) != "True":
            return " ".join(str(templar.template(trust_as_template(task["fail_msg"]))).split())
    return None


@pytest.fixture
def role_entry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """In place of ansible-runner, the start of playbooks/migrate.yml: its variables as
    Ansible loads them, judged by Ansible's validator against the role's argument spec, then
    by the role's entry check; a refusal is sent as the event ansible-playbook sends. Keeps
    each run's variables as a task sees them; the working directory is ``tmp_path``."""
    import ansible_runner
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    seen: list[dict[str, Any]] = []

    def run(**kwargs: Any) -> Any:
        extravars = Path(kwargs["private_data_dir"]) / "env" / "extravars"
        seen.append(as_ansible_sees_it(extravars))
        loaded = load_extra_vars(extravars)
        given = {k: v for k, v in loaded.items() if k in ROLE_SPEC}
        checked = ArgumentSpecValidator(ROLE_SPEC).validate(given, validate_role_argument_spec=True)
        if checked.error_messages:
            task = "Validating arguments against arg spec 'main'"
            errors = checked.error_messages
            msg = "Validation of arguments failed:\n" + "\n".join(errors)
            res = {"failed": True, "argument_errors": errors, "msg": msg}
        elif (message := role_entry_refusal(loaded)) is not None:
            task, res = _role_task()["name"], {"failed": True, "msg": message}
        else:
            return SimpleNamespace(rc=0, status="successful", config=SimpleNamespace(ident="t"))
        data = {"host": "localhost", "task": task, "res": res}
        kwargs["event_handler"]({"event": "runner_on_failed", "event_data": data})
        return SimpleNamespace(rc=2, status="failed", config=SimpleNamespace(ident="t"))

    monkeypatch.setattr(ansible_runner, "run", run)
    monkeypatch.chdir(tmp_path)
    return seen


#: -e values the run refuses at the role's entry: (-e, the value as a task sees it, what the
#: refusal names).
EXTRA_VAR_REFUSALS = {
    "batch-size-word": (
        "gpu_path_migrate_batch_size=abc",
        "abc",
        "argument 'gpu_path_migrate_batch_size' is of type",  # then str (2.19) or a class (2.17)
    ),
    "evict-timeout-list": (
        "gpu_path_migrate_evict_timeout=[1]",
        [1],
        "argument 'gpu_path_migrate_evict_timeout' is of type",
    ),
    "evict-timeout-0": ("gpu_path_migrate_evict_timeout=0", 0, "gpu_path_migrate_evict_timeout=0"),
    "evict-timeout-minus-5": (
        "gpu_path_migrate_evict_timeout=-5",
        -5,
        "gpu_path_migrate_evict_timeout=-5 is below 1",
    ),
    "advertise-timeout-0": (
        "gpu_path_migrate_advertise_timeout=0",
        0,
        "gpu_path_migrate_advertise_timeout=0 is below",
    ),
    "batch-size-0": ("gpu_path_migrate_batch_size=0", 0, "gpu_path_migrate_batch_size=0 is below"),
}


@pytest.mark.parametrize("case", EXTRA_VAR_REFUSALS)
def test_a_wrong_extra_variable_is_refused_at_the_roles_entry_with_exit_2(
    hostile: dict[str, str], role_entry: list[dict[str, Any]], case: str
) -> None:
    extra, arrived, named = EXTRA_VAR_REFUSALS[case]
    result = invoke(hostile, _migrate(hostile, "-e", extra))
    assert_refused(result, (named,))
    variable = extra.partition("=")[0]
    assert [run[variable] for run in role_entry] == [arrived]  # one run: the plan's


def test_the_roles_entry_passes_the_defaults_and_a_group_with_hosts() -> None:
    pool = {"gpu_path_migrate_pool": "gpu_nodes"}
    assert role_entry_refusal(pool) is None
    assert role_entry_refusal({**pool, "gpu_path_migrate_advertise_timeout": -1}) == (
        "gpu_path_migrate_advertise_timeout=-1 is below 1; fix: give the seconds a node has to "
        "change advertisers (default 300)."
    )


@pytest.mark.parametrize("pool", [TEMPLATE, "{% if true %}gpu_nodes{% endif %}", "gpu_nodes,all"])
def test_a_pool_name_that_is_a_template_reaches_ansible_as_its_text(
    hostile: dict[str, str], role_entry: list[dict[str, Any]], tmp_path: Path, pool: str
) -> None:
    argv = ["migrate", "-i", hostile["inventory"], "--pool", pool, "--to", "dra", "--plan"]
    result = invoke(hostile, argv)
    assert [run["gpu_path_migrate_pool"] for run in role_entry] == [pool]
    assert_refused(result, ("names no inventory group with hosts",))
    assert f"gpu_path_migrate_pool={pool}" in " ".join(result.output.split()).replace('"', "")
    assert not (tmp_path / "pwned").exists()


def test_a_planning_run_that_gives_no_plan_exits_2_naming_it(
    hostile: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ansible_runner

    def ended_before_any_task(**kwargs: Any) -> Any:  # ansible-playbook exits 4, no event
        return SimpleNamespace(rc=4, status="failed", config=SimpleNamespace(ident="t"))

    monkeypatch.setattr(ansible_runner, "run", ended_before_any_task)
    result = invoke(hostile, _migrate(hostile))
    assert_refused(result, ("the planning run of playbooks/migrate.yml gave no plan",))
    assert "Fix: fix what the run reports and plan again." in result.output


# ------------------------------------------------------------------ device plugin values


#: Role variables (without device_plugin_) -> (the variable the refusal names, its reason).
VALUE_REFUSALS: dict[str, tuple[dict[str, Any], str, str]] = {
    "version-5000-digits": (
        {"chart_version": "9" * 5000 + ".0.0"},
        "device_plugin_chart_version",
        "not a chart version",
    ),
    "version-fullwidth-digits": (
        {"chart_version": "\uff10.17.4"},
        "device_plugin_chart_version",
        "not a chart version",
    ),
    "version-template": (
        {"chart_version": TEMPLATE},
        "device_plugin_chart_version",
        "not a chart version",
    ),
    "version-null": ({"chart_version": None}, "device_plugin_chart_version", "not a chart version"),
    "stand-in-maybe": (
        {"chart_stand_in": "maybe"},
        "device_plugin_chart_stand_in",
        "not a boolean",
    ),
    "stand-in-list": ({"chart_stand_in": [True]}, "device_plugin_chart_stand_in", "not a boolean"),
    "stand-in-false-text": (
        {"chart_stand_in": "false", "chart_path": "/lab/chart", "local_chart": STAND_IN_CHART},
        "device_plugin_chart_path",
        "not NVIDIA's nvidia-device-plugin",
    ),
    "selector-list": (
        {"node_selector": ["nvidia.com/gpu.present"]},
        "device_plugin_node_selector",
        "not a mapping",
    ),
    "selector-nested": (
        {"node_selector": {"a": {"b": 1}}},
        "device_plugin_node_selector.a",
        "is a dict",
    ),
    "selector-key-space": (
        {"node_selector": {"a b": "c"}},
        "device_plugin_node_selector",
        "not a qualified name",
    ),
    "selector-key-int": ({"node_selector": {1: "x"}}, "device_plugin_node_selector", "its key 1"),
    "selector-value-space": (
        {"node_selector": {"pool": "a b"}},
        "device_plugin_node_selector.pool",
        "not a label value",
    ),
    "selector-value-long": (
        {"node_selector": {"pool": "v" * 64}},
        "device_plugin_node_selector.pool",
        "64 characters",
    ),
    "selector-value-template": (
        {"node_selector": {"pool": TEMPLATE}},
        "device_plugin_node_selector.pool",
        "not a label",
    ),
    "selector-other-path": (
        {"node_selector": {PATH_LABEL: "dra"}},
        "device_plugin_node_selector",
        "selects",
    ),
    "taints-an-int": ({"node_taints": 5}, "device_plugin_node_taints", "not a list"),
    "taints-a-string": (
        {"node_taints": "nvidia.com/gpu"},
        "device_plugin_node_taints",
        "not a list",
    ),
    "taints-a-map": (
        {"node_taints": {"key": "nvidia.com/gpu"}},
        "device_plugin_node_taints",
        "not a list",
    ),
    "taint-null": ({"node_taints": [None]}, "device_plugin_node_taints", "needs a key"),
    "taint-key-a-map": (
        {"node_taints": [{"key": {"a": 1}, "effect": "NoSchedule"}]},
        "device_plugin_node_taints",
        "its key is a dict",
    ),
    "taint-key-space": (
        {"node_taints": [{"key": "a b"}]},
        "device_plugin_node_taints",
        "not a qualified name",
    ),
    "taint-effect-unknown": (
        {"node_taints": [{"key": "a", "effect": "Sometimes"}]},
        "device_plugin_node_taints",
        "its effect is none of NoSchedule",
    ),
    "extra-config-a-string": (
        {"extra_values": {"config": "x"}},
        "device_plugin_extra_values.config",
        "as a mapping",
    ),
    "extra-config-map-a-list": (
        {"extra_values": {"config": {"map": ["a", "b"]}}},
        "device_plugin_extra_values.config",
        "as a mapping",
    ),
    "extra-a-list": ({"extra_values": ["a"]}, "device_plugin_extra_values", "not a mapping"),
    "extra-namespace": (
        {"extra_values": {"namespace": "x"}},
        "device_plugin_extra_values.namespace",
        "fails",
    ),
    "mig-list": ({"mig_strategy": ["none"]}, "device_plugin_mig_strategy", "not one of"),
    "device-list-int": ({"device_list_strategy": 5}, "device_plugin_device_list_strategy", "list"),
    "driver-root-relative": (
        {"nvidia_driver_root": "run/nvidia"},
        "device_plugin_nvidia_driver_root",
        "not an absolute",
    ),
    "driver-root-newline": (
        {"nvidia_driver_root": "/run\n/x"},
        "device_plugin_nvidia_driver_root",
        "not an absolute",
    ),
    "runtime-class-space": (
        {"runtime_class_name": "A B"},
        "device_plugin_runtime_class_name",
        "not a DNS subdomain",
    ),
    "release-54-characters": (
        {"release_name": "a" * 54},
        "device_plugin_release_name",
        "more than a Helm release's 53",
    ),
    "namespace-default": ({"namespace": "default"}, "device_plugin_namespace", "default namespace"),
    "config-key-space": (
        {"config": {"a b": {"version": "v1"}}},
        "device_plugin_config",
        "not a ConfigMap key",
    ),
}


@pytest.mark.parametrize("case", VALUE_REFUSALS)
def test_a_hostile_device_plugin_variable_is_refused_naming_it(case: str) -> None:
    over, variable, reason = VALUE_REFUSALS[case]
    with pytest.raises(dpc.DevicePluginError) as err:
        dpv.plan(inputs(**over))
    assert err.value.variable == variable
    assert reason in err.value.reason and err.value.fix, str(err.value)
    assert str(err.value).startswith(f"{variable}=")


def test_a_yaml_boolean_label_value_selects_the_nodes_labelled_true() -> None:
    plan = dpv.plan(inputs(node_selector={"nvidia.com/gpu.present": True}))
    assert plan.node_selector == {"nvidia.com/gpu.present": "true", PATH_LABEL: "device-plugin"}
    assert plan.values["nodeSelector"] == plan.node_selector


@pytest.mark.parametrize(("text", "stand_in"), [("no", False), ("False", False), ("yes", True)])
def test_a_stand_in_switch_given_as_text_is_read_as_ansible_reads_it(
    text: str, stand_in: bool
) -> None:
    over = {"chart_stand_in": text, "chart_path": "/lab/chart", "local_chart": STAND_IN_CHART}
    if stand_in:
        assert dpv.plan(inputs(**over)).chart.stand_in is True
    else:
        with pytest.raises(dpc.DevicePluginError, match="device_plugin_chart_path=/lab/chart"):
            dpv.plan(inputs(**over))


def test_a_template_in_extra_values_is_passed_to_helm_as_its_text() -> None:
    plan = dpv.plan(inputs(extra_values={"podAnnotations": {"note": TEMPLATE}}))
    assert plan.values["podAnnotations"] == {"note": TEMPLATE}


def test_taints_are_tolerated_by_key_and_effect() -> None:
    taints = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}, {"key": "dedicated"}]
    tolerations = dpv.plan(inputs(node_taints=taints)).values["tolerations"]
    assert tolerations[-1] == {"key": "dedicated", "operator": "Exists"}
    assert len(tolerations) == 3  # nvidia.com/gpu NoSchedule is the chart's own
