"""``gpufleet upgrade``: every feature gate the cluster carries - in the kubeadm ConfigMaps
and in each host's files and processes (module dra_gate_audit_facts) - is judged at the
target before any host is touched. What the target refuses and the upgrade does not
change itself blocks: a table names host, file or ConfigMap, component, gate, reason and
fix; ``--plan`` exits 1, and the run refuses (exit 1) before anything runs.

Expected values from the Kubernetes sources: CSIMigration is a feature gate of no release
from 1.31 on (removed in 1.27), so every 1.38 component refuses it ('unrecognized feature
gate'); PodLevelResources is still a gate of 1.38 (beta); DynamicResourceAllocation is
removed in 1.38, and the upgrade removes it itself (a DRA gate). The target 1.38.0 is one
the CLI takes: an exact release of a minor from 1.32 to the newest the model provisions
(1.38)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpufleet.cli import main
from gpufleet.commands import upgrade as cmd

pytestmark = pytest.mark.ansible

SOURCE, TARGET = "1.37.2", "1.38.0"
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"
INVENTORY = """
all:
  children:
    kube_control_plane:
      hosts:
        cp-1:
    kube_node:
      hosts:
        gpu-1:
"""


def _node(name):
    return {
        "metadata": {"name": name},
        "spec": {},
        "status": {
            "nodeInfo": {"kubeletVersion": f"v{SOURCE}"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _kubelet_facts(host, gates):
    """What dra_gate_audit_facts returns for a host whose kubelet runs with
    ``--config=/var/lib/kubelet/config.yaml`` holding ``featureGates: gates``."""
    return {
        "host": host,
        "components": {
            "kubelet": {
                "component": "kubelet",
                "running": True,
                "pid": 812,
                "argv": ["/usr/bin/kubelet", f"--config={KUBELET_CONFIG}"],
                "started_at": 1767261000.5,
                "process": {"feature_gates": dict(gates), "runtime_config": {}},
                "config_files": [KUBELET_CONFIG],
                "file": {
                    "path": KUBELET_CONFIG,
                    "exists": True,
                    "flags": {"feature_gates": dict(gates), "runtime_config": {}},
                    "mtime": 1767260990.1,
                    "error": None,
                },
                "metrics": None,
                "errors": [],
            }
        },
    }


def snapshot(file_gates=None, configmap_gates=None, gate_facts=True):
    snap = {
        "schema": 1,
        "nodes": [_node("cp-1"), _node("gpu-1")],
        "pods": [
            {
                "metadata": {"labels": {"component": "kube-apiserver"}},
                "spec": {
                    "nodeName": "cp-1",
                    "containers": [
                        {
                            "name": "kube-apiserver",
                            "image": f"registry.k8s.io/kube-apiserver:v{SOURCE}",
                        }
                    ],
                },
            }
        ],
        "resourceslices": [
            {"spec": {"driver": "gpu.nvidia.com", "nodeName": "gpu-1", "devices": [{}] * 8}}
        ],
        "kubeadm_versions": {"cp-1": f"v{SOURCE}", "gpu-1": f"v{SOURCE}"},
        "cluster_configuration": {},
        "kubelet_configuration": {"featureGates": dict(configmap_gates or {})},
    }
    if gate_facts:
        snap["gate_facts"] = {
            "cp-1": _kubelet_facts("cp-1", {}),
            "gpu-1": _kubelet_facts("gpu-1", file_gates or {}),
        }
    return snap


@pytest.fixture
def site(tmp_path, monkeypatch):
    """``write(snapshot)`` -> its path; the inventory; nothing may run a playbook."""
    inv = tmp_path / "hosts.yml"
    inv.write_text(INVENTORY)
    ran: list[str] = []

    def no_run(*args, **kwargs):
        ran.append("run")
        raise AssertionError("a playbook ran")

    monkeypatch.setattr(cmd, "run_steps", no_run)
    monkeypatch.setenv("HOME", str(tmp_path))

    def write(snap):
        path = tmp_path / "snapshot.json"
        path.write_text(json.dumps(snap))
        return str(path)

    class Site:
        pass

    s = Site()
    s.inv, s.write, s.ran, s.tmp = str(inv), write, ran, tmp_path
    return s


def plan(site, snap, *args):
    return CliRunner().invoke(
        main,
        ["upgrade", "-i", site.inv, "--to", TARGET, "--snapshot", site.write(snap), *args],
        env={"COLUMNS": "200"},
    )


def blocking_rows(output):
    """The rows of the blocking table (after its title), each as its cells joined by
    " | ": a row whose text wraps spans several lines, the first with the host cell."""
    start = output.index(f"blocking the upgrade to {TARGET}")
    rows: list[list[list[str]]] = []
    for line in output[start:].splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        if cells[0]:
            rows.append([[c] for c in cells])
        else:
            for parts, c in zip(rows[-1], cells, strict=True):
                parts.append(c)
    return [" | ".join(" ".join(p for p in parts if p) for parts in row) for row in rows]


def test_a_removed_gate_in_a_hosts_kubelet_file_blocks_the_plan(site):
    result = plan(site, snapshot(file_gates={"CSIMigration": True}), "--plan")
    assert result.exit_code == 1, result.output
    rows = blocking_rows(result.stdout)
    first = rows[0]
    for part in ("gpu-1", KUBELET_CONFIG, "kubelet", "CSIMigration"):
        assert part in first, first
    table = "\n".join(rows)
    assert TARGET in table and "unrecognized feature gate" in table
    assert "remove CSIMigration from featureGates" in table
    assert "blocked: 1 feature gate or runtime-config entry" in result.output
    assert site.ran == []


def test_the_json_plan_carries_the_blocking_items_and_exits_1(site):
    result = plan(site, snapshot(file_gates={"CSIMigration": True}), "--plan", "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    [item] = doc["blocking"]
    assert (item["host"], item["file"], item["gate"], item["version"]) == (
        "gpu-1",
        KUBELET_CONFIG,
        "CSIMigration",
        TARGET,
    )
    assert f"before upgrading to {TARGET}" in item["fix"]
    assert "blocked: 1 entry" in result.stderr


def test_a_removed_gate_only_in_the_kubelet_configmap_names_the_configmap(site):
    result = plan(site, snapshot(configmap_gates={"CSIMigration": True}), "--plan")
    assert result.exit_code == 1, result.output
    [row] = blocking_rows(result.stdout)
    assert "kube-system/kubelet-config" in row and "CSIMigration" in row
    assert row.split(" | ")[0] == "-"  # a ConfigMap has no host
    assert TARGET in "\n".join(blocking_rows(result.stdout))


def test_a_gate_the_target_still_registers_does_not_block(site):
    gates = {"PodLevelResources": True}
    result = plan(site, snapshot(file_gates=gates, configmap_gates=gates), "--plan")
    assert result.exit_code == 0, result.output
    assert "blocking the upgrade" not in result.output


def test_a_dra_gate_the_upgrade_removes_itself_does_not_block(site):
    gates = {"DynamicResourceAllocation": True}
    result = plan(site, snapshot(file_gates=gates, configmap_gates=gates), "--plan")
    assert result.exit_code == 0, result.output
    assert "blocking the upgrade" not in result.output
    removal = [ln for ln in result.output.splitlines() if "DynamicResourceAllocation=true" in ln]
    assert removal and "remove (found now)" in removal[0]


def test_the_run_refuses_before_any_host_is_changed(site):
    result = plan(site, snapshot(file_gates={"CSIMigration": True}), "--no-validate")
    assert result.exit_code == 1, result.output
    assert KUBELET_CONFIG in "\n".join(blocking_rows(result.stdout))
    assert "nothing was changed" in result.output
    assert site.ran == []


def test_a_snapshot_without_gate_facts_still_loads(site):
    result = plan(site, snapshot(gate_facts=False), "--plan", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["blocking"] == []


def test_gate_facts_that_are_not_an_object_are_refused(site):
    snap = snapshot()
    snap["gate_facts"] = {"gpu-1": ["not", "facts"]}
    result = plan(site, snap, "--plan")
    assert result.exit_code == 2, result.output
    assert "gate_facts['gpu-1'] is not an object" in result.stderr
    assert "Fix:" in result.stderr


def test_the_live_plan_reads_the_hosts_gate_facts_and_saves_them(site, monkeypatch):
    """The planner module given the hosts' gate facts (what the read play registered)
    saves them in the snapshot; the saved snapshot plans the same, away from the cluster."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import cluster as uc
    from ansible_collections.gpufleet.cluster.plugins.modules import upgrade_plan as module

    from tests.integration.test_hostile_input_servers import run_module

    snap = snapshot(file_gates={"CSIMigration": True})
    read: list[str] = []

    def cluster(kubeconfig, context=None):
        read.append(kubeconfig)
        return {k: snap[k] for k in ("schema", "nodes", "pods", "resourceslices",
                                     "cluster_configuration", "kubelet_configuration")}  # fmt: skip

    monkeypatch.setattr(uc, "read_cluster", cluster)
    kubeconfig = site.tmp / "admin.conf"
    kubeconfig.write_text("{}")
    saved = site.tmp / "saved.json"
    res = run_module(
        module,
        {
            "kubeconfig": str(kubeconfig),
            "target": TARGET,
            "hosts": [
                {"host": "cp-1", "name": "cp-1", "control_plane": True},
                {"host": "gpu-1", "name": "gpu-1", "control_plane": False},
            ],
            "kubeadm_versions": snap["kubeadm_versions"],
            "host_facts": list(snap["gate_facts"].values()),
            "save_snapshot": str(saved),
        },
    )
    assert read == [str(kubeconfig)]
    assert [(b["host"], b["entry"]) for b in res["blocking"]] == [("gpu-1", "CSIMigration=true")]
    assert json.loads(saved.read_text())["gate_facts"] == snap["gate_facts"]
    again = plan(site, json.loads(saved.read_text()), "--plan", "--json")
    assert again.exit_code == 1
    assert json.loads(again.stdout)["blocking"] == res["blocking"]
