"""``gpufleet gates plan``: exit codes, human tables and the JSON document."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpufleet.cli import main

pytestmark = pytest.mark.unit

COMPONENTS = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"]


def run(*args: str):
    return CliRunner().invoke(main, ["gates", "plan", *args])


def plan_json(*args: str) -> dict:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_gates_is_registered() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "gates" in result.stdout


def test_plan_help_lists_features() -> None:
    result = CliRunner().invoke(main, ["gates", "plan", "--help"])
    assert result.exit_code == 0
    for name in ("prioritized-list", "extended-resource", "binding-conditions", "device-status"):
        assert name in result.stdout


def test_table_for_133_sets_the_gate_on_every_component() -> None:
    result = run("--to", "1.33.0")
    assert result.exit_code == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "DynamicResourceAllocation=true" in line]
    assert [c for c in COMPONENTS if any(c in row for row in rows)] == COMPONENTS
    assert "resource.k8s.io/v1beta1=true" in result.stdout
    assert "resource.k8s.io/v1beta2=true" in result.stdout
    assert "kubeadm.k8s.io/v1beta4" in result.stdout


def test_table_for_transition_133_to_134() -> None:
    result = run("--from", "1.33.0", "--to", "1.34.0")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "Changes from 1.33.0 to 1.34.0" in out
    assert out.count("remove feature gate") == 4
    assert "drop runtime-config" in out
    assert "resource.k8s.io/v1beta1=true" in out
    assert "GA, on by default" in out


def test_table_for_transition_134_to_135_warns_about_dependency_checks() -> None:
    result = run("--from", "1.34.0", "--to", "1.35.0")
    assert result.exit_code == 0, result.stderr
    assert "warning: from 1.35 every component checks the declared" in result.stdout
    assert "now locked to true" in result.stdout


def test_table_for_transition_136_to_137_mentions_kubeadm_v1beta3() -> None:
    result = run("--from", "1.36.0", "--to", "1.37.0")
    assert result.exit_code == 0, result.stderr
    assert "no longer reads kubeadm.k8s.io/v1beta3" in result.stdout


def test_json_document_is_stable_and_complete() -> None:
    first = run("--from", "1.33.0", "--to", "1.34.0", "--json")
    second = run("--from", "1.33.0", "--to", "1.34.0", "--json")
    assert first.exit_code == 0
    assert first.stdout == second.stdout
    doc = json.loads(first.stdout)
    assert sorted(doc) == ["from", "release", "to", "transition"]
    assert doc["release"]["source"] == "1.34.4"
    assert doc["to"]["version"] == "1.34.0"
    assert all(doc["to"]["components"][c]["feature_gates"] == {} for c in COMPONENTS)
    assert doc["from"]["components"]["kubelet"]["feature_gates"] == {
        "DynamicResourceAllocation": True
    }
    removed = {
        (c["component"], c["gate"])
        for c in doc["transition"]["gate_changes"]
        if c["action"] == "remove"
    }
    assert removed == {(c, "DynamicResourceAllocation") for c in COMPONENTS}
    drops = {c["entry"] for c in doc["transition"]["runtime_config_changes"]}
    assert drops == {"resource.k8s.io/v1beta1=true", "resource.k8s.io/v1beta2=true"}


def test_json_without_from_has_null_transition() -> None:
    doc = plan_json("--to", "1.35.0", "--feature", "extended-resource")
    assert doc["from"] is None and doc["transition"] is None
    for c in COMPONENTS:
        assert doc["to"]["components"][c]["feature_gates"] == {"DRAExtendedResource": True}


def test_explicit_gate_is_planned() -> None:
    doc = plan_json("--to", "v1.34.2", "--gate", "DynamicResourceAllocation=false")
    assert doc["to"]["components"]["kube-scheduler"]["feature_gates_flag"] == (
        "DynamicResourceAllocation=false"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--to", "1.35.0", "--gate", "DynamicResourceAllocation=false"), "locked to true"),
        (
            ("--to", "1.32.0", "--gate", "DRAControlPlaneController=true"),
            "unrecognized feature gate: DRAControlPlaneController",
        ),
        (("--from", "1.33.0", "--to", "1.35.0"), "1.33 -> 1.34 -> 1.35"),
        (("--to", "1.33.0", "--feature", "extended-resource"), "introduced in 1.34"),
        (
            (
                "--to",
                "1.25.0",
            ),
            "outside the DRA version model",
        ),
        (("--to", "1.38.0", "--gate", "DynamicResourceAllocation=true"), "removed in 1.38"),
    ],
)
def test_impossible_requests_exit_1_with_reason_on_stderr(args: tuple, message: str) -> None:
    result = run(*args)
    assert result.exit_code == 1, result.output
    assert message in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(("text", "value"), [("1", "true"), ("T", "true"), ("FALSE", "false")])
def test_a_gate_value_is_read_as_kube_apiserver_reads_it(text: str, value: str) -> None:
    # Go's strconv.ParseBool (component-base featuregate.Set): 1, t, T, TRUE, ... are booleans
    result = run("--to", "1.35.0", "--gate", f"DRAAdminAccess={text}", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    gates = doc["to"]["components"]["kube-apiserver"]["feature_gates"]
    assert gates["DRAAdminAccess"] is (value == "true"), gates


def test_unknown_gate_is_malformed_input_with_a_did_you_mean() -> None:
    result = run("--to", "1.35.0", "--gate", "DRAPrioritisedList=true")
    assert result.exit_code == 2, result.output
    assert "registered by no Kubernetes release" in result.stderr
    assert "did you mean DRAPrioritizedList?" in result.stderr


def test_impossible_request_prints_the_fix() -> None:
    result = run("--to", "1.35.0", "--gate", "DynamicResourceAllocation=false")
    assert "Fix: remove DynamicResourceAllocation=false" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--to", "banana"), "'banana'"),
        (("--to", "1.35.x"), "'1.35.x'"),
        (("--to", "1.35.0", "--from", "v2.0.0"), "major version 2"),
        (("--to", "1.35.0", "--gate", "DRAAdminAccess"), "NAME=true|false"),
        (("--to", "1.35.0", "--gate", "DRAAdminAccess=yes"), "must be a boolean"),
        (("--to", "1.35.0", "--gate", "DRAAdminAccess=tRuE"), "strconv.ParseBool"),
        (("--to", "1.35.0", "--feature", "gpu-sharing"), "gpu-sharing"),
        ((), "--to"),
    ],
)
def test_malformed_input_exits_2(args: tuple, message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_a_gate_given_twice_with_different_values_is_malformed_input() -> None:
    result = run(
        "--to", "1.35.0", "--gate", "DRAAdminAccess=true", "--gate", "DRAAdminAccess=false"
    )
    assert result.exit_code == 2
    assert "DRAAdminAccess is given twice with different values" in result.output


def test_a_comma_list_in_one_gate_says_to_repeat_the_option() -> None:
    result = run("--to", "1.35.0", "--gate", "DRAAdminAccess=true,DRAPrioritizedList=true")
    assert result.exit_code == 2
    assert "repeat --gate for each gate" in result.output
