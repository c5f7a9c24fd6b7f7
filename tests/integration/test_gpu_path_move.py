"""Moving a batch of GPU nodes between the device plugin and DRA
(``plugins/module_utils/migrate/move.py``) against a real kube-apiserver: cordon, the
Eviction API with a real PodDisruptionBudget, the path label, the wait for each
advertiser, the uncordon, and the batch put back when a phase fails.

There is no kubelet here: the advertisers are played by this test (``Advertisers``, a
thread that follows each node's path label as the two DaemonSets and the kubelet would: the
device plugin's ``nvidia.com/gpu`` in the Node's allocatable, the DRA driver's devices in a
ResourceSlice). Each advertiser stops later than it starts, as a kubelet reports a stopped
device plugin only at its next status update, so a move that switched the label straight
from one path to the other would be seen advertising both. The lab runs the real ones."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.migrate import move as mm

from tests.harness.component_flags import kwok_node_manifest
from tests.harness.controlplane import ControlPlane
from tests.integration.conftest import DEFAULT_VERSION

pytestmark = [pytest.mark.integration]

NAMESPACE = "gpu-move"
DRIVER = "gpu.nvidia.com"
FAST = mm.Clock(interval=0.2)


class Advertisers(threading.Thread):
    """Follows the path label of ``nodes``: ``device-plugin`` advertises ``nvidia.com/gpu:
    8`` in allocatable, ``dra`` a ResourceSlice with 8 devices; each starts ``on`` seconds
    after the label asks for it and stops ``off`` seconds after the label stops asking.
    ``broken``: paths that never start. ``both_seen``: nodes seen advertising both."""

    def __init__(self, api: Any, nodes: list[str], on: float = 0.3, off: float = 1.0) -> None:
        super().__init__(daemon=True)
        from kubernetes import client

        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.nodes = nodes
        self.on, self.off = on, off
        self.broken: set[str] = set()
        self.both_seen: set[str] = set()
        self.state = {n: {"device-plugin": False, "dra": False} for n in nodes}
        self.since: dict[tuple[str, str], float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for node in self.nodes:
                self.tick(node)
            time.sleep(0.05)

    def tick(self, node: str) -> None:
        label = (self.core.read_node(node).metadata.labels or {}).get(gp.PATH_LABEL)
        for path in ("device-plugin", "dra"):
            want = label == path and path not in self.broken
            if want == self.state[node][path]:
                self.since.pop((node, path), None)
                continue
            started = self.since.setdefault((node, path), time.monotonic())
            if time.monotonic() - started >= (self.on if want else self.off):
                self.set(node, path, want)
                self.since.pop((node, path), None)
        if all(self.state[node].values()):
            self.both_seen.add(node)

    def set(self, node: str, path: str, on: bool) -> None:
        self.state[node][path] = on
        if path == "device-plugin":
            count = "8" if on else "0"  # a stopped plugin's resource stays listed, at 0
            body = {"status": {"capacity": {"nvidia.com/gpu": count},
                               "allocatable": {"nvidia.com/gpu": count}}}  # fmt: skip
            self.core.patch_node_status(node, body)
        elif on:
            self.custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-gpus"},
                "spec": {"driver": DRIVER, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"gpu-{i}"} for i in range(8)]},
            })  # fmt: skip
        else:
            self.custom.delete_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices", f"{node}-gpus"
            )

    def settle(self, timeout: float = 10) -> None:
        end = time.monotonic() + timeout
        while self.since and time.monotonic() < end:
            time.sleep(0.1)


@pytest.fixture
def cluster(apiserver: ControlPlane) -> Iterator[tuple[Any, vk.Kube]]:
    from kubernetes import client

    api = apiserver.api_client()
    core = client.CoreV1Api(api)
    if NAMESPACE not in {n.metadata.name for n in core.list_namespace().items}:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "default"}})
    apps = client.AppsV1Api(api)
    if not apps.list_namespaced_daemon_set(NAMESPACE).items:
        # the two advertisers as the roles deploy them, each selecting its path (no
        # controller runs them here: the Advertisers thread plays what they would do)
        for name, path in (("device-plugin", "device-plugin"), ("kubelet-plugin", "dra")):
            labels = {"app": name}
            apps.create_namespaced_daemon_set(NAMESPACE, {
                "metadata": {"name": name},
                "spec": {"selector": {"matchLabels": labels}, "template": {
                    "metadata": {"labels": labels},
                    "spec": {"nodeSelector": {gp.PATH_LABEL: path},
                             "containers": [{"name": "c", "image": "registry.example/c:1"}]}}},
            })  # fmt: skip
    yield api, vk.Kube(str(apiserver.kubeconfig))
    for node in core.list_node(label_selector=gp.PATH_LABEL).items:
        core.delete_node(node.metadata.name)
    for pod in core.list_namespaced_pod(NAMESPACE).items:
        core.delete_namespaced_pod(pod.metadata.name, NAMESPACE, grace_period_seconds=0)
    client.PolicyV1Api(api).delete_collection_namespaced_pod_disruption_budget(NAMESPACE)
    client.CustomObjectsApi(api).delete_collection_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices"
    )


def make_nodes(api: Any, names: list[str], path: str, cordoned: tuple[str, ...] = ()) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)
    for name in names:
        manifest = kwok_node_manifest(
            name, kubelet_version=DEFAULT_VERSION, labels={gp.PATH_LABEL: path}
        )
        manifest["spec"] = {"unschedulable": True} if name in cordoned else {}
        core.create_node(manifest)


def gpu_pod(api: Any, name: str, node: str, labels: dict[str, str] | None = None) -> None:
    from kubernetes import client

    client.CoreV1Api(api).create_namespaced_pod(NAMESPACE, {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [{
            "name": "train", "image": "registry.example/train:1",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    })  # fmt: skip


def node_view(api: Any, name: str) -> tuple[str | None, bool]:
    from kubernetes import client

    node = client.CoreV1Api(api).read_node(name)
    return (node.metadata.labels or {}).get(gp.PATH_LABEL), bool(node.spec.unschedulable)


def started(api: Any, nodes: list[str], path: str) -> Advertisers:
    ads = Advertisers(api, nodes)
    ads.start()
    ads.settle()
    deadline = time.monotonic() + 10
    while not all(ads.state[n][path] for n in nodes) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(ads.state[n][path] for n in nodes)
    return ads


def test_a_batch_moves_to_dra_evicting_its_gpu_pods_and_never_advertises_twice(
    cluster: tuple[Any, vk.Kube],
) -> None:
    api, kube = cluster
    nodes = ["move-a", "move-b"]
    make_nodes(api, nodes, "device-plugin", cordoned=("move-b",))
    gpu_pod(api, "trainer-0", "move-a")
    ads = started(api, nodes, "device-plugin")
    try:
        records = mm.move_batch(kube.request, nodes, "dra", driver=DRIVER, clock=FAST)
    finally:
        ads.done.set()
    assert ads.both_seen == set()
    assert [(r.node, r.phase, r.evicted) for r in records] == [
        ("move-a", "done", [f"{NAMESPACE}/trainer-0"]),
        ("move-b", "done", []),
    ]
    assert node_view(api, "move-a") == ("dra", False)
    assert node_view(api, "move-b") == ("dra", True)  # cordoned before: left cordoned
    assert ads.state["move-a"] == {"device-plugin": False, "dra": True}
    assert set(records[0].seconds) == {"cordon", "evict", "stop", "start", "uncordon"}


def test_a_pod_its_budget_keeps_fails_the_batch_and_nothing_moves(
    cluster: tuple[Any, vk.Kube],
) -> None:
    from kubernetes import client

    api, kube = cluster
    make_nodes(api, ["keep-a"], "device-plugin")
    gpu_pod(api, "keep-0", "keep-a", labels={"app": "keep"})
    # a pending pod is evicted whatever its budget says (pkg/registry/core/pod/storage/
    # eviction.go canIgnorePDB): it runs, as a kubelet would have reported; the budget's
    # status is what the disruption controller would write (there is none here)
    client.CoreV1Api(api).patch_namespaced_pod_status("keep-0", NAMESPACE, {
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    })  # fmt: skip
    policy = client.PolicyV1Api(api)
    policy.create_namespaced_pod_disruption_budget(NAMESPACE, {
        "metadata": {"name": "keep"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "keep"}}},
    })  # fmt: skip
    policy.patch_namespaced_pod_disruption_budget_status("keep", NAMESPACE, {"status": {
        "observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1,
        "desiredHealthy": 1, "expectedPods": 1}})  # fmt: skip
    ads = started(api, ["keep-a"], "device-plugin")
    try:
        with pytest.raises(mm.MoveFailed) as err:
            mm.move_batch(kube.request, ["keep-a"], "dra", driver=DRIVER, evict_timeout=3,
                          clock=FAST)  # fmt: skip
    finally:
        ads.done.set()
    assert (err.value.node, err.value.phase, err.value.restored) == ("keep-a", "evict", True)
    assert f"evicting pod {NAMESPACE}/keep-0 from node keep-a" in str(err.value)
    assert node_view(api, "keep-a") == ("device-plugin", False)
    assert ads.state["keep-a"]["device-plugin"]


def test_a_node_whose_new_advertiser_never_starts_is_put_back(
    cluster: tuple[Any, vk.Kube],
) -> None:
    api, kube = cluster
    make_nodes(api, ["back-a"], "device-plugin")
    ads = started(api, ["back-a"], "device-plugin")
    ads.broken.add("dra")
    try:
        with pytest.raises(mm.MoveFailed) as err:
            mm.move_batch(kube.request, ["back-a"], "dra", driver=DRIVER, advertise_timeout=4,
                          clock=FAST)  # fmt: skip
        ads.settle()
    finally:
        ads.done.set()
    assert (err.value.phase, err.value.restored) == ("start", True)
    assert "node back-a still advertises none, not dra, after 4 s" in str(err.value)
    assert node_view(api, "back-a") == ("device-plugin", False)
    assert ads.state["back-a"] == {"device-plugin": True, "dra": False}
    assert ads.both_seen == set()


# ------------------------------------------------------------ gpufleet migrate, end to end


def inventory(tmp_path: Any, nodes: list[str]) -> str:
    import yaml

    doc = {"all": {
        "hosts": {"localhost": {"ansible_connection": "local",
                                "ansible_python_interpreter": "{{ ansible_playbook_python }}"}},
        "children": {
            "gpu_pool_a": {"hosts": {f"host-{n}": {"kubernetes_node_name": n} for n in nodes}},
            "gpu_path_device_plugin": {"children": {"gpu_pool_a": {}}},
        },
    }}  # fmt: skip
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def gpu_device_class(api: Any) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    try:
        client.CustomObjectsApi(api).create_cluster_custom_object(
            "resource.k8s.io", "v1", "deviceclasses", {
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": "gpu.nvidia.com"},
                "spec": {"extendedResourceName": "nvidia.com/gpu", "selectors": [
                    {"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
            })  # fmt: skip
    except ApiException as err:
        if err.status != 409:
            raise


def cli(*args: str) -> Any:
    from click.testing import CliRunner

    from gpufleet.cli import main

    return CliRunner().invoke(main, ["migrate", *args], catch_exceptions=False)


def test_migrate_plans_then_moves_the_pool_and_says_what_the_inventory_needs(
    cluster: tuple[Any, vk.Kube], apiserver: ControlPlane, tmp_path: Any, monkeypatch: Any
) -> None:
    import json

    api, _kube = cluster
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path / "cache"))
    nodes = ["cli-a", "cli-b"]
    make_nodes(api, nodes, "device-plugin")
    gpu_device_class(api)
    gpu_pod(api, "serve-0", "cli-b")
    inv = inventory(tmp_path, nodes)
    common = ["-i", inv, "--pool", "gpu_pool_a", "--to", "dra", "--kubeconfig",
              str(apiserver.kubeconfig), "--batch-size", "1"]  # fmt: skip
    planned = cli(*common, "--plan", "--json")
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert (plan["from"], plan["to"], plan["blocked"], plan["batches"]) == (
        "device-plugin", "dra", False, [["cli-a"], ["cli-b"]],
    )  # fmt: skip
    assert plan["served_by"] == {"nvidia.com/gpu": "gpu.nvidia.com"}
    ads = started(api, nodes, "device-plugin")
    try:
        moved = cli(*common, "-e", "gpu_path_migrate_advertise_timeout=30",
                    "--no-validate")  # fmt: skip
    finally:
        ads.done.set()
    assert moved.exit_code == 0, moved.output
    assert ads.both_seen == set()
    assert [node_view(api, n) for n in nodes] == [("dra", False), ("dra", False)]
    said = " ".join(moved.output.split())  # the console wraps at 80 columns
    assert "make group gpu_pool_a a child of gpu_path_dra in the inventory" in said


def test_migrate_refuses_a_pool_whose_pods_nothing_would_serve(
    cluster: tuple[Any, vk.Kube], apiserver: ControlPlane, tmp_path: Any, monkeypatch: Any
) -> None:
    from kubernetes import client

    api, _kube = cluster
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path / "cache"))
    make_nodes(api, ["mig-a"], "device-plugin")
    gpu_device_class(api)
    client.CoreV1Api(api).create_namespaced_pod(NAMESPACE, {
        "metadata": {"name": "mig-user"},
        "spec": {"nodeName": "mig-a", "containers": [{
            "name": "c", "image": "registry.example/c:1",
            "resources": {"limits": {"nvidia.com/mig-1g.18gb": "1"}}}]},
    })  # fmt: skip
    result = cli("-i", inventory(tmp_path, ["mig-a"]), "--pool", "gpu_pool_a", "--to", "dra",
                 "--kubeconfig", str(apiserver.kubeconfig))  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "extended-resource-unmapped" in " ".join(result.output.split())
    assert node_view(api, "mig-a") == ("device-plugin", False)  # nothing moved


def test_migrate_names_a_pool_that_is_no_group(tmp_path: Any, apiserver: ControlPlane) -> None:
    result = cli("-i", inventory(tmp_path, ["x"]), "--pool", "gpu_pool_b", "--to", "dra",
                 "--kubeconfig", str(apiserver.kubeconfig), "--plan")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert 'gpu_path_migrate_pool="gpu_pool_b" names no inventory group' in result.output
