"""Hostile input for the input parsing the modules share (module_utils and the modules'
own readers): every case must raise the module's own error (never RecursionError,
UnicodeDecodeError, MemoryError, TypeError ...) naming its input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import check as cchk
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    metadata as claims_metadata,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import problems as cprob
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_labels as nl
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import scheduler_config as schc
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import apply as mig_apply
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mpl
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import hosts as vh
from ansible_collections.gpufleet.cluster.plugins.modules import (
    containerd_runtime_config,
    kubelet_config_gates,
    nvidia_cdi_spec_check,
)

from gpufleet import runner
from tests.unit.hostile.inputs import (
    CHECK_CASES,
    CONTENTS,
    DEEP,
    FILE_KINDS,
    _claim,
    assert_refused,
    invoke,
)

pytestmark = pytest.mark.unit


# ------------------------------------------------- module_utils: the modules' input parsing


#: Files that are readable text: the parser refuses them.
PARSER_KINDS = set(CONTENTS) - {"binary", "latin1", "oversized", "empty"}


@pytest.mark.parametrize("kind", [k for k in FILE_KINDS if k != "empty"])
def test_read_text_refuses_every_hostile_file_naming_it(hostile, kind: str) -> None:
    if kind in PARSER_KINDS:
        text = ig.read_text(hostile[kind], "config=x")  # readable text: the parser judges it
        with pytest.raises(ig.InputError, match="config=x"):
            ig.load_json(text or "", "config=x") if kind == "deep-json" else ig.load_yaml(
                text or "", "config=x"
            )
        return
    with pytest.raises(ig.InputError, match=re.escape("config=x")):
        ig.read_text(hostile[kind], "config=x")


@pytest.mark.parametrize(
    "kind", ["binary", "latin1", "oversized", "directory", "dev-zero", "deep-yaml", "empty"]
)
def test_check_kubeconfig_refuses_naming_the_file(hostile, kind: str) -> None:
    with pytest.raises(vk.KubeError) as err:
        vk.check_kubeconfig(hostile[kind])
    assert hostile[kind] in err.value.message


EDITORS: dict[str, Callable[[str], Any]] = {
    "kubelet": lambda t: kcfg.edit_kubelet_configuration(t, kfl.FlagEdit.from_params(_GATES)),
    "static-pod": lambda t: kce.edit_static_pod_manifest(
        t, "kube-apiserver", kfl.FlagEdit.from_params(_GATES)
    ),
    "cluster-configuration": lambda t: kce.edit_cluster_configuration(
        t, {"kube-apiserver": kfl.FlagEdit.from_params(_GATES)}
    ),
    "scheduler": schc.enable_dynamic_resources,
}


_GATES = {"feature_gates": {"DRAAdminAccess": True}}


EDITOR_WHAT = {
    "kubelet": "KubeletConfiguration",
    "static-pod": "static pod manifest",
    "cluster-configuration": "ClusterConfiguration",
    "scheduler": "KubeSchedulerConfiguration",
}


@pytest.mark.parametrize("kind", ["deep-json", "deep-yaml", "bad-scalar", "huge-int", "unclosed"])
@pytest.mark.parametrize("editor", EDITORS)
def test_the_config_editors_refuse_hostile_yaml_with_their_error(editor: str, kind: str) -> None:
    with pytest.raises(kfl.ConfigEditError, match=EDITOR_WHAT[editor]):
        EDITORS[editor](CONTENTS[kind].decode())


@pytest.mark.parametrize(
    "text",
    ["a = " + "[" * DEEP, "[a\n", "a = 1\na = 2\n", "\x00"],
    ids=["deep", "table", "dup", "nul"],
)
def test_containerd_toml_is_refused_naming_the_file(text: str) -> None:
    with pytest.raises(
        cc.ConfigError, match=re.escape("config=/etc/containerd/config.toml")
    ) as err:
        cc.loads(text, "config=/etc/containerd/config.toml")
    assert "recursion" not in str(err.value)


@pytest.mark.parametrize("kind", ["binary", "latin1", "oversized", "directory"])
def test_containerd_module_read_names_the_option_and_file(hostile, kind: str) -> None:
    with pytest.raises(ig.InputError, match=re.escape(f"config={hostile[kind]}")):
        containerd_runtime_config.read(hostile[kind])


def test_kubelet_environment_files_that_are_binary_read_as_absent(hostile) -> None:
    assert kubelet_config_gates.read_optional(hostile["binary"]) is None
    assert kubelet_config_gates.read_optional(hostile["missing"]) is None


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("nvidia.yaml", "deep-yaml"),
        ("nvidia.json", "deep-json"),
        ("nvidia.yaml", "alias-bomb"),
        ("nvidia.yaml", "bad-scalar"),
    ],
)
def test_cdi_specs_that_nest_too_deep_are_refused(name: str, kind: str) -> None:
    with pytest.raises(ValueError, match=re.escape(name)):
        nvidia_cdi_spec_check.parse_spec(name, CONTENTS[kind].decode())


@pytest.mark.parametrize("kind", ["binary", "deep-json", "latin1", "directory", "missing"])
def test_the_boot_time_mig_apply_refuses_a_bad_layout_file(hostile, kind: str, capsys) -> None:
    assert mig_apply.main(["--layout-file", hostile[kind]]) == 2
    assert hostile[kind] in capsys.readouterr().err


def test_the_boot_time_mig_apply_refuses_a_layout_file_that_is_not_an_object(tmp_path, capsys):
    path = tmp_path / "layout.json"
    path.write_text("[1]")
    assert mig_apply.main(["--layout-file", str(path)]) == 2
    assert "not a JSON object" in capsys.readouterr().err


@pytest.mark.parametrize(
    "layout",
    [
        {"1g.18gb": 10**9},
        {"1g.18gb": 10**30},
        {"1g.18gb": 65},
        {"1g.18gb": -1},
        {"1g.18gb": True},
        {"1g.18gb": 1.5},
        {"1g.18gb": "7"},
        {1: 1},
        [1],
        '{"a": ' + "[" * DEEP,
        "not json",
    ],
    ids=[
        "billion",
        "thirty-digits",
        "sixty-five",
        "negative",
        "bool",
        "float",
        "string",
        "int-key",
        "list",
        "deep-text",
        "not-json",
    ],
)
def test_parse_layout_bounds_counts_and_names_the_option(layout: Any) -> None:
    with pytest.raises(ValueError, match="mig_layout"):
        mpl.parse_layout(layout, name="mig_layout")


def test_planning_a_huge_count_is_refused_at_once() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr

    with pytest.raises(ValueError, match=r"1g\.18gb allows at most 7 instances per GPU"):
        mpl.plan(mpr.model("h200"), {"1g.18gb": 10**9})


@pytest.mark.parametrize(
    "text",
    [
        CONTENTS["deep-yaml"],
        CONTENTS["alias-bomb"],
        CONTENTS["binary"],
        CONTENTS["latin1"],
        b"version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, "
        b"mig-devices: {1g.18gb: 1000000000}}]}\n",
    ],
    ids=["deep", "alias-bomb", "binary", "latin1", "huge-count"],
)
def test_load_mig_config_refuses_hostile_text(text: bytes) -> None:
    with pytest.raises(mcfg.MigConfigError):
        mcfg.load_mig_config(text)


BUILD_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "count-33": ({"kind": "mig-slice", "profile": "1g.18gb", "count": 33}, "count"),
    "count-huge": ({"kind": "gpu-pair-same-product", "count": 10**30}, "count"),
    "count-bool": ({"kind": "mig-slice", "profile": "1g.18gb", "count": True}, "count"),
    "memory-absurd": ({"kind": "gpu-with-memory", "min_memory_gib": 1e30}, "min_gib"),
    "memory-nan": ({"kind": "gpu-with-memory", "min_memory_gib": float("nan")}, "min_gib"),
    "profile-9g": ({"kind": "mig-slice", "profile": "9g.1gb"}, "profile"),
    "profile-int": ({"kind": "mig-slice", "profile": 7}, "profile"),
    "labels-nested": (
        {"kind": "mig-slice", "profile": "1g.18gb", "labels": {"a": {"b": "c"}}},
        "labels",
    ),
    "labels-bad-key": (
        {"kind": "mig-slice", "profile": "1g.18gb", "labels": {"a b": "c"}},
        "labels",
    ),
    "labels-list": ({"kind": "mig-slice", "profile": "1g.18gb", "labels": ["a"]}, "labels"),
    "name-bad": ({"kind": "mig-slice", "profile": "1g.18gb", "name": "A_B"}, "name"),
    "mps-limit": (
        {"kind": "shared-gpu", "strategy": "MPS", "mps_pinned_memory_limit": "10Pi"},
        "mps_pinned_memory_limit",
    ),
}


@pytest.mark.parametrize("case", BUILD_CASES)
def test_claim_template_builders_refuse_naming_the_parameter(case: str) -> None:
    params, name = BUILD_CASES[case]
    with pytest.raises(claims_metadata.ClaimTemplateError, match=re.escape(name)):
        ct.build(params["kind"], {k: v for k, v in params.items() if k != "kind"})


@pytest.mark.parametrize("case", CHECK_CASES)
def test_check_claim_spec_reports_metadata_errors_without_raising(case: str) -> None:
    text, where = CHECK_CASES[case]
    problems = cchk.check_claim_spec(json.loads(text))
    assert any(
        p.severity == cprob.ERROR
        and p.path
        and (p.path.startswith(where) or where.startswith(p.path))
        for p in problems
    ), problems


def test_check_claim_spec_caps_a_request_count_at_one_allocation() -> None:
    obj = json.loads(_claim())
    obj["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 33
    problems = cchk.check_claim_spec(obj)
    assert any(p.path.endswith(".count") and "1 to 32" in p.message for p in problems)


@pytest.mark.parametrize(
    "labels",
    [{"a b": "c"}, {"a": {"b": 1}}, {"k" * 64: "v"}, {"a": "v" * 64}, ["a"]],
    ids=["space-key", "nested", "long-key", "long-value", "list"],
)
def test_node_labels_refuse_naming_the_variable(labels: Any) -> None:
    with pytest.raises(nl.NodeLabelError, match="gpu_node_labels_labels"):
        nl.normalize_labels(labels, "gpu_node_labels_labels")


@pytest.mark.parametrize("kind", ["deep-json", "deep-yaml", "alias-bomb"])
def test_host_command_output_that_nests_too_deep_is_a_value_error(kind: str) -> None:
    with pytest.raises(ValueError, match="the output"):
        vh._load(CONTENTS[kind].decode())


def test_check_shape_never_recurses() -> None:
    data: Any = []
    for _ in range(DEEP):
        data = [data]
    with pytest.raises(ig.ShapeError, match="deeper than 100"):
        ig.check_shape(data, "x")
    assert ig.check_shape({"a": [1, {"b": 2}]}, "x") == {"a": [1, {"b": 2}]}


def test_the_unreachable_message_names_the_server_and_a_fix() -> None:
    class ReadTimeoutError(Exception):
        pass

    text = vk.unreachable("https://10.0.0.1:6443", ReadTimeoutError("Read timed out."), (5, 15))
    assert "https://10.0.0.1:6443" in text and "within 15 s" in text and "fix:" in text


@pytest.mark.parametrize(
    "report",
    [
        {"checks": [], "meta": "x"},
        {"checks": ["x"]},
        {"checks": [{"id": 1}]},
        [1],
        {"a": 1},
        {
            "checks": [
                {"id": "a", "area": "nodes", "summary": "s", "status": "fail", "problems": "p"}
            ]
        },
    ],
    ids=[
        "meta-a-string",
        "check-a-string",
        "check-without-fields",
        "a-list",
        "no-checks",
        "problems-a-string",
    ],
)
def test_validate_refuses_a_report_file_of_another_shape(
    hostile: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: Any
) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))

    def stopped_early(*args: Any, **kwargs: Any) -> runner.RunResult:  # no playbook runs
        return runner.RunResult(1, runner.RunProgress(), tmp_path, 2)

    monkeypatch.setattr(runner, "run_playbook", stopped_early)
    argv = ["validate", "-i", hostile["inventory"], "-e", f"validate_report_file={path}"]
    result = invoke(hostile, argv)
    assert_refused(result, ("validate_report_file",))
    assert "item assignment" not in result.output


def test_a_report_whose_problems_are_not_mappings_is_not_read_as_a_report(tmp_path) -> None:
    from gpufleet.render import validation

    path = tmp_path / "report.json"
    check = {"id": "a", "area": "x", "summary": "s", "status": "fail", "problems": ["x", 1]}
    doc = {"checks": [check]}
    path.write_text(json.dumps(doc))
    assert validation.read_report(path) is None
    doc["checks"][0]["problems"] = [{"subject": "n", "message": "m"}]
    path.write_text(json.dumps(doc))
    assert validation.read_report(path)["checks"][0]["problems"][0]["subject"] == "n"


@pytest.mark.parametrize("kind", ["binary", "latin1", "oversized", "directory"])
def test_gate_audit_facts_read_a_hostile_file_as_an_error_naming_it(hostile, kind: str) -> None:
    from ansible_collections.gpufleet.cluster.plugins.modules import dra_gate_audit_facts

    text, mtime, error = dra_gate_audit_facts.read_text(hostile[kind])
    assert text is None and mtime is None
    assert error and hostile[kind] in error


@pytest.mark.parametrize(
    "text",
    ["apiVersion: v1\nkind: Pod\nspec: abc\n", "apiVersion: v1\nkind: Pod\nspec: [1]\n"],
    ids=["spec-a-string", "spec-a-list"],
)
def test_a_static_pod_manifest_of_another_shape_is_refused(text: str) -> None:
    with pytest.raises(kfl.ConfigEditError, match="kube-apiserver static pod manifest"):
        kce.edit_static_pod_manifest(text, "kube-apiserver", kfl.FlagEdit.from_params(_GATES))


@pytest.mark.parametrize("strategy", [[], {}, ["MPS"]], ids=["list", "map", "list-of-name"])
def test_check_claim_spec_reports_a_sharing_strategy_that_is_not_a_name(strategy: Any) -> None:
    obj = json.loads(_claim())
    obj["spec"]["spec"]["devices"]["config"] = [
        {
            "requests": ["gpu"],
            "opaque": {
                "driver": "gpu.nvidia.com",
                "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {"strategy": strategy},
                },
            },
        }
    ]
    problems = cchk.check_claim_spec(obj)
    assert any("strategy" in p.path and p.severity == cprob.ERROR for p in problems), problems


@pytest.mark.parametrize(
    "params", [None, 1, [], "profile=1g.18gb"], ids=["none", "int", "list", "str"]
)
def test_build_refuses_parameters_that_are_not_a_mapping(params: Any) -> None:
    with pytest.raises(claims_metadata.ClaimTemplateError, match="mig-slice parameters"):
        ct.build("mig-slice", params)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("yes", True), (" On ", True), ("t", True), (1, True), ("n", False), ("OFF", False),
     (0, False), ("maybe", None), ([1], None), ({"a": 1}, None), (None, None)],
)  # fmt: skip
def test_one_boolean_rule_for_variables_is_ansibles(value: object, expected: object) -> None:
    """preflight and the DRA driver values read a variable's boolean as Ansible does
    (convert_bool: BOOLEANS_TRUE / BOOLEANS_FALSE)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig

    assert ig.variable_bool(value) is expected
