"""Input that used to be accepted without a word: names with a trailing newline, label
values longer than Kubernetes allows, options ``--kueue-queue`` would drop, a feature
gate value of ``maybe``, ``-`` taken as a file name, and manifests held to the wrong cap.
The limits are Kubernetes' own (``k8s.io/apimachinery/pkg/util/validation``,
``k8s.io/apiserver``'s ``MaxRequestBodyBytes``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.filter.dra import dra_component_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names as kn
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import bootstrap as kb
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq
from click.testing import CliRunner, Result

from gpufleet.cli import main
from gpufleet.commands import claims as claims_command
from tests.integration.test_hostile_input_servers import write_kubeconfig
from tests.unit.hostile import api_server
from tests.unit.hostile.inputs import assert_refused

pytestmark = pytest.mark.unit


def _template(*args: str) -> Result:
    return CliRunner().invoke(main, ["claims", "template", *args])


QUEUE = ("mig-slice", "--kueue-queue", "team-a")

# ------------------------------------------------------------------ names and label values

#: name -> (arguments of ``claims template``, the option the refusal names).
NAME_CASES = {
    "queue-trailing-newline": (["mig-slice", "--kueue-queue", "team-a\n"], "--kueue-queue"),
    "queue-trailing-space": (["mig-slice", "--kueue-queue", "team-a "], "--kueue-queue"),
    "queue-64-characters": (["mig-slice", "--kueue-queue", "q" * 64], "--kueue-queue"),
    "job-name-trailing-newline": ([*QUEUE, "--job-name", "train\n"], "--job-name"),
    "namespace-trailing-newline": ([*QUEUE, "--namespace", "team-a\n"], "--namespace"),
    "name-trailing-newline": ([*QUEUE, "--name", "slice\n"], "--name"),
    "name-254-characters": ([*QUEUE, "--name", "a" * 254], "--name"),
    "priority-trailing-newline": ([*QUEUE, "--kueue-priority-class", "high\n"], "priority"),
    "priority-100-characters": ([*QUEUE, "--kueue-priority-class", "p" * 100], "priority"),
    "priority-64-characters": ([*QUEUE, "--kueue-priority-class", "p" * 64], "priority"),
    "priority-dot-dot": ([*QUEUE, "--kueue-priority-class", "a..b"], "priority"),
    "template-name-newline": (["mig-slice", "--profile", "1g.18gb", "--name", "gpu\n"], "--name"),
    "template-namespace-newline": (["mig-slice", "--namespace", "default\n"], "--namespace"),
    "label-value-newline": (["mig-slice", "--label", "team=a\n"], "--label"),
    "profile-trailing-newline": (["mig-slice", "--profile", "1g.18gb\n"], "--profile"),
    "kueue-profile-trailing-newline": ([*QUEUE, "--profile", "1g.18gb\n"], "--profile"),
}


@pytest.mark.parametrize("name", list(NAME_CASES))
def test_a_name_kubernetes_refuses_is_refused(name: str) -> None:
    args, option = NAME_CASES[name]
    assert_refused(_template(*args), (option,))


def test_a_63_character_priority_class_is_the_longest_label_value_accepted() -> None:
    result = _template(*QUEUE, "--kueue-priority-class", "p" * 63)
    assert result.exit_code == 0, result.output
    assert f"kueue.x-k8s.io/priority-class: {'p' * 63}" in result.stdout


@pytest.mark.parametrize(
    ("check", "value", "ok"),
    [
        (kn.dns1123_label, "a" * 63, True),
        (kn.dns1123_label, "a" * 64, False),
        (kn.dns1123_label, "team-a\n", False),
        (kn.dns1123_subdomain, "a." * 126 + "a", True),
        (kn.dns1123_subdomain, "a" * 254, False),
        (kn.label_value, "", True),
        (kn.label_value, "A_b.c-1", True),
        (kn.label_value, "v\n", False),
        (kn.qualified_name, "nvidia.com/gpu.present", True),
        (kn.qualified_name, "nvidia.com/gpu\n", False),
        (kn.qualified_name, "/gpu", False),
        (kn.dns1123_label, ["a"], False),
    ],
    ids=lambda v: str(v)[:16] if not callable(v) else v.__name__,
)
def test_kubernetes_name_rules(check: Any, value: Any, ok: bool) -> None:
    assert (check(value) is None) is ok


@pytest.mark.parametrize("field", ["name", "namespace", "cohort"])
def test_a_kueue_team_name_with_a_trailing_newline_is_refused(field: str) -> None:
    team = {"name": "team-a", "quotas": {"gpu.nvidia.com": 1}, field: "team-a\n"}
    with pytest.raises(kq.KueueInputError) as info:
        kq.parse_teams([team])
    assert info.value.variable == f"kueue_teams[0].{field}"


# ------------------------------------------------------------------ --kueue-queue combinations

DROPPED = {
    "label": ["--label", "team=a"],
    "min-memory": ["--min-memory-gib", "40"],
    "strategy": ["--strategy", "TimeSlicing"],
    "interval": ["--interval", "Short"],
    "mps-threads": ["--mps-active-thread-percentage", "50"],
    "mps-memory": ["--mps-pinned-memory-limit", "10Gi"],
}


@pytest.mark.parametrize("name", list(DROPPED))
def test_an_option_kueue_queue_would_drop_is_refused(name: str) -> None:
    result = _template(*QUEUE, *DROPPED[name])
    assert_refused(result, ("cannot be used with --kueue-queue",))
    assert DROPPED[name][0] in result.output


JOB_ONLY = {
    "priority-class": ["--kueue-priority-class", "high"],
    "job-name": ["--job-name", "train"],
    "image": ["--image", "registry.local/train:1"],
}


@pytest.mark.parametrize("name", list(JOB_ONLY))
def test_a_job_option_without_kueue_queue_is_refused(name: str) -> None:
    result = _template("mig-slice", *JOB_ONLY[name])
    assert_refused(result, ("applies to the Job of --kueue-queue only",))


# ------------------------------------------------------------------ feature gate values


def _kubelet_gates(gates: dict[str, Any]) -> dict[str, Any]:
    version = "1.34.2"
    spec = kb.BootstrapSpec(
        version=version,
        control_plane_endpoint="10.0.0.10:6443",
        advertise_address="10.0.0.10",
        dra=dra_component_settings(version),
        kubelet_extra={"featureGates": gates},
    )
    return kb.kubelet_configuration(spec, dra_core.parse_version(version))["featureGates"]


@pytest.mark.parametrize("value", ["maybe", "yes", "on", "", [True], {"a": 1}, None, "2"])
def test_a_kubelet_gate_value_strconv_parsebool_refuses_is_refused(value: Any) -> None:
    with pytest.raises(kb.BootstrapConfigError, match=r"featureGates\.DRAPrioritizedList"):
        _kubelet_gates({"DRAPrioritizedList": value})


@pytest.mark.parametrize(
    ("value", "expected"), [("t", True), ("FALSE", False), ("0", False), (True, True)]
)
def test_a_kubelet_gate_value_strconv_parsebool_reads_is_kept(value: Any, expected: bool) -> None:
    assert _kubelet_gates({"DRAPrioritizedList": value})["DRAPrioritizedList"] is expected


# ------------------------------------------------------------------ '-' means standard output


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    with api_server.serve(api_server.answers()) as (url, _):
        yield write_kubeconfig(tmp_path / "kubeconfig", url)


@pytest.mark.parametrize(
    ("option", "starts"),
    [("--markdown", "#"), ("--html", "<!"), ("--metrics", "#"), ("--json", "{")],
)
def test_dash_is_standard_output_for_every_report_output(
    cluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, starts: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["report", "--kubeconfig", str(cluster), option, "-"], env={"KUBECONFIG": ""}
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.lstrip().lower().startswith(starts.lower()), result.stdout[:200]
    assert "devices per pool" not in result.stdout  # the table went to stderr
    assert not (tmp_path / "-").exists()


def test_dev_null_is_an_output(cluster: Path) -> None:
    result = CliRunner().invoke(
        main, ["report", "--kubeconfig", str(cluster), "--json", os.devnull], env={"KUBECONFIG": ""}
    )
    assert result.exit_code == 0, result.output


# ------------------------------------------------------------------ manifest sizes


def _claims_check(path: Path) -> Result:
    return CliRunner().invoke(main, ["claims", "check", str(path)])


def test_an_object_larger_than_the_api_server_accepts_is_refused(tmp_path: Path) -> None:
    big = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu", "annotations": {"a": "x" * (ig.MAX_OBJECT_BYTES + 10)}},
    }
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    result = _claims_check(path)
    assert_refused(result, ("MaxRequestBodyBytes",))
    assert "document 1" in result.output and "3 MiB" in result.output


def test_a_manifest_larger_than_4_mib_of_small_objects_is_read(tmp_path: Path) -> None:
    doc = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
        "metadata: {{name: gpu-{i}, namespace: default}}\n"
        "spec: {{spec: {{devices: {{requests: [{{name: gpu, exactly: "
        "{{deviceClassName: gpu.nvidia.com}}}}]}}}}}}\n---\n"
    )
    text = "".join(doc.format(i=i) for i in range(24_000))
    assert len(text) > 4 * 1024 * 1024
    path = tmp_path / "many.yaml"
    path.write_text(text)
    docs = claims_command.load_documents(str(path))
    assert len(docs) == 24_000 and docs[-1]["metadata"]["name"] == "gpu-23999"
