"""``gpufleet gates audit`` and ``gpufleet gates apply``: argument handling, the audit result
taken from the event stream, the exit status contract and the rendering. Runs against real
playbooks are in tests/integration/test_gate_audit.py."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import audit as ga
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from click.testing import CliRunner
from rich.console import Console

from gpufleet.cli import main
from gpufleet.commands import gates
from gpufleet.commands._options import extra_vars_option

pytestmark = pytest.mark.unit


def audit_doc(second_value: bool) -> dict:
    """The audit of two control-plane hosts whose kube-apiserver runs
    DRAPartitionableDevices=true and =``second_value`` (1.37.2, feature
    partitionable-devices), processes only."""

    def host(name: str, value: bool) -> gf.HostFacts:
        flags = gf.FlagSet({"DRAPartitionableDevices": value}, {})
        facts = gf.ComponentFacts("kube-apiserver", running=True, pid=1, process=flags)
        return gf.HostFacts(name, {"kube-apiserver": facts})

    result = ga.audit(
        {"cp-1": host("cp-1", True), "cp-2": host("cp-2", second_value)},
        "1.37.2",
        features=["partitionable-devices"],
        components=["kube-apiserver"],
    )
    return result.to_dict()


def event(kind: str, action: str, res: dict) -> dict:
    return {
        "event": kind,
        "event_data": {"host": "localhost", "resolved_action": action, "res": res},
    }


def test_audit_and_apply_are_in_the_gates_group() -> None:
    out = CliRunner().invoke(main, ["gates", "--help"])
    assert out.exit_code == 0
    for name in ("plan", "audit", "apply"):
        assert name in out.stdout
    apply_help = CliRunner().invoke(main, ["gates", "apply", "--help"]).stdout
    assert "--check" in apply_help and "--diff" in apply_help


def test_audit_result_is_taken_from_the_audit_task_only() -> None:
    doc = audit_doc(False)
    assert (
        gates.audit_result_from_event(
            event("runner_on_failed", "gpufleet.cluster.dra_gate_audit", {"audit": doc})
        )
        == doc
    )
    assert (
        gates.audit_result_from_event(
            event("runner_on_ok", "gpufleet.cluster.dra_gate_audit_facts", {"audit": doc})
        )
        is None
    )
    assert (
        gates.audit_result_from_event(
            event("runner_on_ok", "gpufleet.cluster.dra_gate_audit", {"msg": "no audit"})
        )
        is None
    )
    assert (
        gates.audit_result_from_event(
            event("runner_on_start", "gpufleet.cluster.dra_gate_audit", {"audit": doc})
        )
        is None
    )


def test_exit_status_contract() -> None:
    assert gates.audit_exit_status(audit_doc(True)) == 0
    assert gates.audit_exit_status(audit_doc(False)) == 1
    assert gates.audit_exit_status(None) == 2


def test_render_lists_hosts_components_and_failures_first() -> None:
    buf = io.StringIO()
    gates.render_audit(audit_doc(False), Console(file=buf, width=200, color_system=None))
    text = buf.getvalue()
    assert "DRA gate audit against Kubernetes 1.37.2: 2 failed" in text
    assert "DRAPartitionableDevices=false" in text and "cp-2" in text
    lines = [ln for ln in text.splitlines() if ln.startswith(("FAIL", "WARN"))]
    assert lines[0].startswith("FAIL gates.model-mismatch cp-2 kube-apiserver")
    assert lines[1].startswith("FAIL gates.node-drift cp-2 kube-apiserver")
    buf = io.StringIO()
    gates.render_audit(audit_doc(True), Console(file=buf, width=200, color_system=None))
    assert "no findings" in buf.getvalue()


def test_extra_vars_are_yaml_values_and_files(tmp_path: Path) -> None:
    varfile = tmp_path / "vars.yml"
    varfile.write_text("dra_gate_audit_features: [admin-access]\nother: 1\n")
    parsed = extra_vars_option(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        (
            "dra_gate_audit_metrics=true",
            "dra_gate_audit_components=[kube-apiserver, kubelet]",
            f"@{varfile}",
            "other=2",
            "empty=",
        ),
    )
    assert parsed == {
        "dra_gate_audit_metrics": True,
        "dra_gate_audit_components": ["kube-apiserver", "kubelet"],
        "dra_gate_audit_features": ["admin-access"],
        "other": 2,
        "empty": "",
    }


@pytest.mark.parametrize("command", ["audit", "apply"])
def test_bad_input_exits_2(command: str, tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["gates", command, "-i", str(tmp_path), "-e", "novalue"])
    assert out.exit_code == 2
    assert "KEY=VALUE" in out.stderr
    out = CliRunner().invoke(main, ["gates", command, "-i", str(tmp_path / "missing")])
    assert out.exit_code == 2
    assert "does not exist" in out.stderr
    out = CliRunner().invoke(main, ["gates", command])
    assert out.exit_code == 2
    assert "--inventory" in out.stderr
