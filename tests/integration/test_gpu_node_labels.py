"""The gpu_node_labels role and module against a real kube-apiserver with 500 nodes.

The control plane here is etcd and kube-apiserver only (``with_controllers=False``):
kube-controller-manager patches Node objects by itself (the TTL controller annotates every
new node, the node lifecycle controller taints nodes that never report Ready), which would
make the apiserver's request counters say more than this module did. Nodes are plain Node
objects made as KWOK would get them (``kwok_node_manifest``), created through the API.

Requests are counted twice: by the module (``api_requests``) and by kube-apiserver's own
``apiserver_request_total`` counter (``/metrics``), read before and after each run.
"""

from __future__ import annotations

import io
import math
import re
import ssl
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp
from rich.console import Console

from gpufleet import runner
from gpufleet.exit import EXIT_FAILED, EXIT_OK
from tests.harness.component_flags import kwok_node_manifest
from tests.harness.controlplane import ControlPlane
from tests.integration.conftest import DEFAULT_VERSION

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LABEL = "nvidia.com/gpu.present"
#: The GPU path label every GPU node gets too; the inventory here declares no path (dra).
PATH_LABELS = {gp.PATH_LABEL: gp.DRA}
TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
NODES = 500
GPU_NODES = 400
PRELABELLED = 50
PAGE_SIZE = 100
MODULE_TASK = "GPU labels | Label and taint every GPU node"

_METRIC_RE = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")


def gpu_name(i: int) -> str:
    return f"gpu-node-{i:03d}"


def _context(cp: ControlPlane) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cp.layout.pki / "ca.crt"))
    ctx.load_cert_chain(str(cp.layout.root / "admin.crt"), str(cp.layout.root / "admin.key"))
    return ctx


def node_requests(cp: ControlPlane) -> dict[str, float]:
    """``apiserver_request_total`` for the nodes resource (no subresource), by verb."""
    with urllib.request.urlopen(f"{cp.server}/metrics", context=_context(cp), timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _METRIC_RE.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if labels.get("resource") == "nodes" and not labels.get("subresource"):
            verb = labels["verb"]
            out[verb] = out.get(verb, 0.0) + float(match.group(2))
    return out


def delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, int]:
    return {v: int(after.get(v, 0) - before.get(v, 0)) for v in ("LIST", "GET", "PATCH")}


def write_inventory(path: Path, gpu: range, kubeconfig: Path) -> Path:
    """GPU hosts: the first half of ``gpu`` by an inventory name with
    ``kubernetes_node_name``, the rest named after their node."""
    half = gpu.start + len(gpu) // 2
    lines = ["[gpu_nodes]"]
    for i in gpu:
        if i < half:
            lines.append(f"gpu-host-{i:03d} kubernetes_node_name={gpu_name(i)}")
        else:
            lines.append(gpu_name(i))
    lines += [
        "[all:vars]",
        "ansible_connection=local",
        'ansible_python_interpreter="{{ ansible_playbook_python }}"',
        f"gpu_node_labels_kubeconfig={kubeconfig}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_role(
    tmp_path: Path, inventory: Path, check: bool = False, **extravars: Any
) -> tuple[int, dict[str, Any]]:
    """Run playbooks/gpu_node_labels.yml; returns (status, the module's result)."""
    results: list[dict[str, Any]] = []

    def on_event(event: Mapping[str, Any]) -> None:
        data = event.get("event_data") or {}
        if data.get("task") == MODULE_TASK and event.get("event") in (
            "runner_on_ok",
            "runner_on_failed",
        ):
            results.append(dict(data.get("res") or {}))

    out = io.StringIO()
    result = runner.run_playbook(
        "gpu_node_labels",
        str(inventory),
        extravars={"gpu_node_labels_taints": [TAINT], "gpu_node_labels_page_size": PAGE_SIZE}
        | extravars,
        check=check,
        console=Console(file=out, width=300),
        on_event=on_event,
        artifact_root=tmp_path / "artifacts",
    )
    assert len(results) == 1, out.getvalue()[-3000:]
    assert "api_requests" in results[0], results[0]
    return result.status, results[0]


def node_state(cp: ControlPlane) -> dict[str, tuple[str | None, bool, str | None]]:
    """node name -> (value of LABEL, has TAINT, value of the GPU path label)."""
    from kubernetes import client

    core = client.CoreV1Api(cp.api_client())
    out = {}
    for n in core.list_node().items:
        taints = n.spec.taints or []
        has = any(t.key == TAINT["key"] and t.effect == TAINT["effect"] for t in taints)
        labels = n.metadata.labels or {}
        out[n.metadata.name] = (labels.get(LABEL), has, labels.get(gp.PATH_LABEL))
    return out


def _create(api: Any, manifest: Mapping[str, Any]) -> None:
    from kubernetes import client

    client.CoreV1Api(api).create_node(dict(manifest))


def test_labels_500_nodes_with_one_list_and_only_needed_patches(
    apiserver: ControlPlane, tmp_path: Path
) -> None:
    cp = apiserver
    manifests = []
    for i in range(GPU_NODES):
        pre = i < PRELABELLED
        manifests.append(
            kwok_node_manifest(
                gpu_name(i),
                kubelet_version=DEFAULT_VERSION,
                labels={LABEL: "true"} | PATH_LABELS if pre else None,
                taints=[TAINT] if pre else (),
            )
        )
    for i in range(NODES - GPU_NODES):
        manifests.append(kwok_node_manifest(f"cpu-node-{i:03d}", kubelet_version=DEFAULT_VERSION))
    cp.create_objects_concurrently(manifests, _create)
    assert len(node_state(cp)) == NODES

    inventory = write_inventory(tmp_path / "all.ini", range(GPU_NODES), cp.kubeconfig)
    max_lists = math.ceil(NODES / PAGE_SIZE) + 1

    # 1. first run: every GPU node that lacks the label or the taint gets one patch
    before = node_requests(cp)
    status, res = run_role(tmp_path, inventory)
    seen = delta(before, node_requests(cp))
    print(f"\nfirst run: module {res['api_requests']}, apiserver {seen}")
    assert status == EXIT_OK
    assert res["changed"] is True
    assert len(res["changed_nodes"]) == GPU_NODES - PRELABELLED
    assert res["unchanged_nodes"] == PRELABELLED
    assert res["nodes_listed"] == NODES
    assert res["api_requests"]["patch"] == GPU_NODES - PRELABELLED == seen["PATCH"]
    assert res["api_requests"]["list"] == seen["LIST"] <= max_lists
    assert seen["GET"] == res["api_requests"]["get"] == 0
    state = node_state(cp)
    assert all(state[gpu_name(i)] == ("true", True, gp.DRA) for i in range(GPU_NODES))
    assert all(state[f"cpu-node-{i:03d}"] == (None, False, None) for i in range(NODES - GPU_NODES))

    # 2. second run: nothing differs, so only the list requests are made
    before = node_requests(cp)
    status, res = run_role(tmp_path, inventory)
    seen = delta(before, node_requests(cp))
    print(f"second run: module {res['api_requests']}, apiserver {seen}")
    assert status == EXIT_OK
    assert res["changed"] is False
    assert res["changed_nodes"] == []
    assert seen["PATCH"] == res["api_requests"]["patch"] == 0
    assert res["api_requests"]["list"] == seen["LIST"] <= max_lists

    # 3. shrink the group to 300 nodes and remove from the others, first in check mode
    fewer = write_inventory(tmp_path / "fewer.ini", range(300), cp.kubeconfig)
    before = node_requests(cp)
    status, res = run_role(tmp_path, fewer, check=True, gpu_node_labels_remove_from_others=True)
    seen = delta(before, node_requests(cp))
    assert status == EXIT_OK
    assert sorted(res["changed_nodes"]) == [gpu_name(i) for i in range(300, GPU_NODES)]
    assert seen["PATCH"] == 0
    assert node_state(cp)[gpu_name(350)] == ("true", True, gp.DRA)

    before = node_requests(cp)
    status, res = run_role(tmp_path, fewer, gpu_node_labels_remove_from_others=True)
    seen = delta(before, node_requests(cp))
    print(f"removal run: module {res['api_requests']}, apiserver {seen}")
    assert status == EXIT_OK
    assert sorted(res["changed_nodes"]) == [gpu_name(i) for i in range(300, GPU_NODES)]
    assert res["api_requests"]["patch"] == seen["PATCH"] == GPU_NODES - 300
    assert res["api_requests"]["list"] == seen["LIST"] <= max_lists
    state = node_state(cp)
    assert all(state[gpu_name(i)] == ("true", True, gp.DRA) for i in range(300))
    assert all(state[gpu_name(i)] == (None, False, None) for i in range(300, GPU_NODES))


def test_missing_node_fails_naming_it_and_patches_nothing(
    apiserver: ControlPlane, tmp_path: Path
) -> None:
    cp = apiserver
    inventory = tmp_path / "ghost.ini"
    inventory.write_text(
        "[gpu_nodes]\n"
        "ghost-host kubernetes_node_name=ghost-node-1\n"
        "brand-new-gpu-node\n"
        "[all:vars]\nansible_connection=local\n"
        'ansible_python_interpreter="{{ ansible_playbook_python }}"\n'
        f"gpu_node_labels_kubeconfig={cp.kubeconfig}\n"
    )
    before = node_requests(cp)
    status, res = run_role(tmp_path, inventory)
    seen = delta(before, node_requests(cp))
    assert status == EXIT_FAILED
    assert res["missing_nodes"] == ["ghost-node-1", "brand-new-gpu-node"]
    assert "ghost-node-1, brand-new-gpu-node" in res["msg"]
    assert seen["PATCH"] == 0
