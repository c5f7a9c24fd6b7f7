"""The DRA gate audit against real control planes (``tests.harness.controlplane``).

A control plane is started with the flags the DRA version model plans for its release; the
module ``dra_gate_audit_facts`` is run on this machine by ansible-playbook (through
``gpufleet.runner``) and must read the running kube-apiserver's gates and runtime-config from
its own ``/proc/<pid>/cmdline`` and ``kubernetes_feature_enabled`` from its ``/metrics`` with
the harness's admin client certificate. Several harnesses may run on this machine at once,
so every component is selected by the harness's own pid or secure port.

Then a second control plane started with another value of one gate must be reported by the
real audit playbook (``playbooks/dra_gate_audit.yml``) and by ``gpufleet gates audit`` as drift
from the model and from the first control plane.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import audit as ga
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import report as gr
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import processes as hp
from kubernetes import client as k8s_client
from rich.console import Console

from gpufleet import runner
from gpufleet.build import release_pins
from tests.harness.controlplane import ControlPlane

pytestmark = pytest.mark.integration

StartControlPlane = Callable[..., ControlPlane]

DATA = Path(__file__).parent / "data" / "gate_audit"
KUBEADM_FIXTURES = Path(__file__).parents[1] / "unit" / "data" / "kubeadm"
VERSION = release_pins.load_releases().default
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
#: Features asked of the model; the ones a release cannot have are left out.
CANDIDATE_FEATURES = ("partitionable-devices", "consumable-capacity", "resource-pool-status")
#: The gate the second control plane turns off.
DRIFT_GATE = "DRAPartitionableDevices"


def model_plan(version: str) -> dra_settings.ComponentPlan:
    features = []
    for name in CANDIDATE_FEATURES:
        try:
            dra_plan.plan_components(version, [*features, name])
        except dra_core.VersionModelError:
            continue
        features.append(name)
    plan = dra_plan.plan_components(version, features)
    if not plan.components["kube-apiserver"].feature_gates:
        pytest.fail(f"the version model plans no kube-apiserver gate at {version}: nothing to read")
    return plan


def harness_flags(
    plan: dra_settings.ComponentPlan, override: dict[str, bool] | None = None
) -> dict[str, dict[str, str]]:
    """extra_args for ControlPlane: the plan's gates and runtime-config (plus ``override``
    on kube-apiserver)."""
    extra: dict[str, dict[str, str]] = {}
    for c in CONTROL_PLANE:
        gates = dict(plan.components[c].feature_gates)
        if c == "kube-apiserver":
            gates.update(override or {})
        if gates:
            extra.setdefault(c, {})["feature-gates"] = dra_settings.feature_gates_string(gates)
    if plan.runtime_config:
        extra.setdefault("kube-apiserver", {})["runtime-config"] = plan.runtime_config_flag
    return extra


def selectors(cp: ControlPlane) -> dict[str, str]:
    return {
        "kube-apiserver": f"--secure-port={cp.ports.apiserver}( |$)",
        "kube-controller-manager": f"--secure-port={cp.ports.controller_manager}( |$)",
        "kube-scheduler": f"--secure-port={cp.ports.scheduler}( |$)",
    }


def play(book: Path | str, inventory: Path, extravars: dict[str, Any]) -> list[dict[str, Any]]:
    """Run a playbook on ``inventory``; return every ansible-runner event."""
    events: list[dict[str, Any]] = []
    out = io.StringIO()
    result = runner.run_playbook(
        str(book),
        str(inventory),
        extravars={"ansible_python_interpreter": sys.executable, **extravars},
        console=Console(file=out, width=200),
        on_event=events.append,
    )
    assert result.status in (0, 1), out.getvalue()
    return events


def results_of(events: list[dict[str, Any]], action: str) -> dict[str, dict[str, Any]]:
    """host -> ``res`` of the task running ``action``, with ``_event`` set to the event's
    kind (``runner_on_ok`` or ``runner_on_failed``)."""
    out = {}
    for e in events:
        data = e.get("event_data") or {}
        if e.get("event") in ("runner_on_ok", "runner_on_failed") and (
            data.get("resolved_action") or data.get("task_action")
        ) in (f"gpufleet.cluster.{action}", action):
            out[data["host"]] = {**data["res"], "_event": e["event"]}
    return out


def proc_cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return hp.split_cmdline(fh.read())


def test_facts_read_the_running_control_plane(
    start_control_plane: StartControlPlane, tmp_path: Path
) -> None:
    plan = model_plan(VERSION)
    cp = start_control_plane(VERSION, extra_args=harness_flags(plan))
    apiserver_pid = cp.processes["kube-apiserver"].popen.pid  # type: ignore[union-attr]
    base = {
        "gate_audit_components": list(CONTROL_PLANE),
        "gate_audit_pids": {"kube-apiserver": apiserver_pid},
        "gate_audit_match": {k: v for k, v in selectors(cp).items() if k != "kube-apiserver"},
        "gate_audit_manifest_dir": str(tmp_path / "manifests"),
        "gate_audit_metrics": True,
        "gate_audit_metrics_text": True,
        "gate_audit_client_cert": str(cp.layout.root / "admin.crt"),
        "gate_audit_client_key": str(cp.layout.root / "admin.key"),
    }
    res = results_of(play(DATA / "facts.yml", DATA / "inventory.yml", base), "dra_gate_audit_facts")
    assert res["localhost"]["_event"] == "runner_on_ok", res["localhost"]
    facts = gf.HostFacts.from_dict(res["localhost"]["facts"], "localhost")

    api = facts.components["kube-apiserver"]
    assert api.running and api.pid == apiserver_pid
    assert api.argv == proc_cmdline(apiserver_pid)
    assert api.process is not None
    assert api.process.feature_gates == plan.components["kube-apiserver"].feature_gates
    assert api.process.runtime_config == {
        k: v for k, _, v in (e.partition("=") for e in plan.runtime_config)
    }
    assert api.file is not None and not api.file.exists
    assert api.metrics is not None and api.metrics.read, api.metrics
    assert api.metrics.url == f"https://127.0.0.1:{cp.ports.apiserver}/metrics"
    for gate, value in plan.components["kube-apiserver"].feature_gates.items():
        assert api.metrics.features[gate].enabled is value, gate
        assert api.metrics.features[gate].model_stage == dra_gates.gate_state(gate, VERSION).stage
    assert api.metrics.features["DynamicResourceAllocation"].enabled
    assert api.metrics.lines[0].startswith("# HELP kubernetes_feature_enabled")
    for c in ("kube-controller-manager", "kube-scheduler"):
        facts_c = facts.components[c]
        assert facts_c.pid == cp.processes[c].popen.pid  # type: ignore[union-attr]
        assert facts_c.process is not None
        assert facts_c.process.feature_gates == plan.components[c].feature_gates
        assert facts_c.metrics is not None and facts_c.metrics.read, facts_c.metrics

    # Everything read agrees with the model: no finding at all (the gate stages and defaults
    # the binaries report agree with the model's too).
    result = ga.audit(
        {"localhost": facts}, VERSION, features=plan.features, components=CONTROL_PLANE
    )
    assert result.findings == [], gr.format_table(result.to_dict())

    # Without credentials the metrics are skipped with the reason, the rest is still read.
    bare = {k: v for k, v in base.items() if not k.startswith("gate_audit_client")}
    bare["gate_audit_components"] = ["kube-apiserver"]
    res = results_of(play(DATA / "facts.yml", DATA / "inventory.yml", bare), "dra_gate_audit_facts")
    metrics = res["localhost"]["facts"]["components"]["kube-apiserver"]["metrics"]
    assert metrics["features"] == {} and "no credentials" in metrics["skipped"]


def test_drift_between_two_control_planes(
    start_control_plane: StartControlPlane, tmp_path: Path
) -> None:
    plan = model_plan(VERSION)
    if DRIFT_GATE not in plan.components["kube-apiserver"].feature_gates:
        pytest.fail(f"the model does not plan {DRIFT_GATE} at {VERSION}; pick another gate")
    cp_a = start_control_plane(VERSION, extra_args=harness_flags(plan))
    cp_b = start_control_plane(VERSION, extra_args=harness_flags(plan, {DRIFT_GATE: False}))
    # The kubeadm-config ConfigMap of a cluster kubeadm set up with its defaults (no gates).
    cm = yaml.safe_load(
        (KUBEADM_FIXTURES / "1.37.2" / "defaults" / "configmap-kubeadm-config.yaml").read_text()
    )
    k8s_client.CoreV1Api(cp_a.api_client()).create_namespaced_config_map("kube-system", cm)

    def host_vars(cp: ControlPlane) -> dict[str, Any]:
        return {
            "ansible_connection": "local",
            "dra_gate_audit_match": selectors(cp),
            "dra_gate_audit_client_cert": str(cp.layout.root / "admin.crt"),
            "dra_gate_audit_client_key": str(cp.layout.root / "admin.key"),
        }

    def inventory(name: str, hosts: dict[str, ControlPlane]) -> Path:
        path = tmp_path / f"{name}.yml"
        path.write_text(
            yaml.safe_dump(
                {
                    "all": {
                        "vars": {"ansible_python_interpreter": sys.executable},
                        "children": {
                            "kube_control_plane": {
                                "hosts": {h: host_vars(cp) for h, cp in hosts.items()}
                            }
                        },
                    }
                }
            )
        )
        return path

    common = {
        "dra_gate_audit_become": False,
        "dra_gate_audit_components": list(CONTROL_PLANE),
        "dra_gate_audit_manifest_dir": str(tmp_path / "manifests"),
        "dra_gate_audit_metrics": True,
        "dra_gate_audit_kubeconfig": str(cp_a.kubeconfig),
        "dra_gate_audit_features": list(plan.features),
    }
    both = inventory("both", {"cp-a": cp_a, "cp-b": cp_b})
    events = play("dra_gate_audit", both, common)

    facts = results_of(events, "dra_gate_audit_facts")
    for host, cp, value in (("cp-a", cp_a, True), ("cp-b", cp_b, False)):
        api = facts[host]["facts"]["components"]["kube-apiserver"]
        assert api["pid"] == cp.processes["kube-apiserver"].popen.pid  # type: ignore[union-attr]
        assert api["process"]["feature_gates"][DRIFT_GATE] is value
        # the real kube-apiserver honours the flag
        assert api["metrics"]["features"][DRIFT_GATE]["enabled"] is value
        assert api["metrics"]["lines"] == []  # the text itself only with metrics_text

    # Without a selector two kube-apiservers run here: an error naming both, none read;
    # a pid of another component is refused.
    api_a = cp_a.processes["kube-apiserver"].popen.pid  # type: ignore[union-attr]
    api_b = cp_b.processes["kube-apiserver"].popen.pid  # type: ignore[union-attr]
    res = results_of(
        play(
            DATA / "facts.yml",
            DATA / "inventory.yml",
            {
                "gate_audit_components": ["kube-apiserver", "kube-scheduler"],
                "gate_audit_pids": {"kube-scheduler": api_a},
            },
        ),
        "dra_gate_audit_facts",
    )["localhost"]["facts"]["components"]
    assert not res["kube-apiserver"]["running"]
    assert "kube-apiserver processes run" in res["kube-apiserver"]["errors"][0]
    assert f"{api_a}" in res["kube-apiserver"]["errors"][0]
    assert f"{api_b}" in res["kube-apiserver"]["errors"][0]
    assert "not kube-scheduler" in res["kube-scheduler"]["errors"][0]

    res = results_of(events, "dra_gate_audit")["localhost"]
    # fail_on_drift defaults to true in the playbook: the task fails and still reports
    assert res["_event"] == "runner_on_failed", "\n".join(res.get("table") or [str(res)])
    audit = res["audit"]
    assert audit["version"] == VERSION  # read from the kube-apiserver's /version
    findings = {(f["id"], f["host"], f["component"], f["name"]): f for f in audit["findings"]}
    node = findings[("gates.node-drift", "cp-b", "kube-apiserver", DRIFT_GATE)]
    assert (node["severity"], node["values"]) == (
        "fail",
        {"this host": "false", "reference": "true"},
    )
    mismatch = findings[("gates.model-mismatch", "cp-b", "kube-apiserver", DRIFT_GATE)]
    assert mismatch["values"] == {"process": "false", "model": "true"}
    assert ("gates.model-mismatch", "cp-a", "kube-apiserver", DRIFT_GATE) not in findings
    assert not [f for f in audit["findings"] if f["id"] == "gates.metric-drift"]
    # The ConfigMap read from the real API server has none of the gates the processes run.
    cm_drift = findings[("gates.configmap-drift", "cp-a", "kube-apiserver", DRIFT_GATE)]
    assert cm_drift["values"] == {"process": "true", "configmap": None}
    assert audit["summary"]["cells"]["kube-apiserver"]["cp-b"]["flagged"][DRIFT_GATE] == "fail"
    assert any(DRIFT_GATE in line and "!" in line for line in res["table"])

    # The CLI: exit 1 with the same findings as JSON ...
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cli = [str(Path(sys.executable).parent / "gpufleet"), "gates", "audit"]
    extra = [f"-e{k}={json.dumps(v)}" for k, v in common.items()]
    out = subprocess.run(
        [*cli, "-i", str(both), "--json", *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 1, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert ("gates.node-drift", "cp-b", DRIFT_GATE) in {
        (f["id"], f["host"], f["name"]) for f in doc["findings"]
    }
    # ... exit 0 on the control plane that matches the model (ConfigMaps not compared) ...
    clean = inventory("clean", {"cp-a": cp_a})
    out = subprocess.run(
        [*cli, "-i", str(clean), *extra, "-e", "dra_gate_audit_configmaps=false"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "no findings" in out.stdout
    # ... and exit 2 when the model refuses the request (the audit cannot run).
    out = subprocess.run(
        [*cli, "-i", str(clean), *extra, "-e", "dra_gate_audit_kubernetes_version=1.20.0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-3000:]
    assert "outside the DRA version model" in out.stdout + out.stderr
