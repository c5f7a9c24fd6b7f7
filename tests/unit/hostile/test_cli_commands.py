"""Hostile values for the options of ``gpufleet claims``, ``mig plan``, ``gates plan``,
``lab``, ``validate``, ``up`` and ``doctor``: counts and sizes out of range, names and
labels Kubernetes refuses, a bad lab environment.

Every case must be refused before anything runs (the tripwires of ``conftest``), as
``inputs.assert_refused`` checks it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.hostile.inputs import (
    CHECK_CASES,
    CONTENTS,
    DEEP,
    assert_refused,
    fill,
    invoke,
)

pytestmark = pytest.mark.unit


# ----------------------------------------------------------------------- claims template

TEMPLATE_CASES: dict[str, tuple[list[str], str]] = {
    "label-key-space": (["mig-slice", "--profile", "1g.18gb", "--label", "Bad Key=x"], "Bad Key"),
    "label-key-slash": (["mig-slice", "--profile", "1g.18gb", "--label", "a/b/c=x"], "a/b/c"),
    "label-key-prefix": (["mig-slice", "--profile", "1g.18gb", "--label", "A_B/c=x"], "A_B/c"),
    "label-key-long": (
        ["mig-slice", "--profile", "1g.18gb", "--label", "k" * 64 + "=x"],
        "--label",
    ),
    "label-key-dash-end": (["mig-slice", "--profile", "1g.18gb", "--label", "team-=x"], "team-"),
    "label-value-space": (["mig-slice", "--profile", "1g.18gb", "--label", "a=b c"], "--label"),
    "label-value-long": (
        ["mig-slice", "--profile", "1g.18gb", "--label", "a=" + "v" * 64],
        "--label",
    ),
    "label-value-dash": (["mig-slice", "--profile", "1g.18gb", "--label", "a=-x"], "--label"),
    "label-value-unicode": (["mig-slice", "--profile", "1g.18gb", "--label", "a=é"], "--label"),
    "label-repeated": (
        ["mig-slice", "--profile", "1g.18gb", "--label", "a=b", "--label", "a=c"],
        "given twice",
    ),
    "label-no-equals": (["mig-slice", "--profile", "1g.18gb", "--label", "team"], "--label"),
    "count-zero": (["gpu-with-memory", "--min-memory-gib", "40", "--count", "0"], "--count"),
    "count-33": (["gpu-with-memory", "--min-memory-gib", "40", "--count", "33"], "--count"),
    "count-huge": (["gpu-pair-same-product", "--count", "1" + "0" * 30], "--count"),
    "count-pair-one": (["gpu-pair-same-product", "--count", "1"], "--count"),
    "count-negative": (["mig-slice", "--profile", "1g.18gb", "--count", "-1"], "--count"),
    "memory-absurd": (["gpu-with-memory", "--min-memory-gib", "1e30"], "--min-memory-gib"),
    "memory-above-any-gpu": (["gpu-with-memory", "--min-memory-gib", "4096"], "--min-memory-gib"),
    "memory-zero": (["gpu-with-memory", "--min-memory-gib", "0"], "--min-memory-gib"),
    "memory-negative": (["gpu-with-memory", "--min-memory-gib", "-5"], "--min-memory-gib"),
    "memory-nan": (["gpu-with-memory", "--min-memory-gib", "nan"], "--min-memory-gib"),
    "memory-inf": (["gpu-with-memory", "--min-memory-gib", "inf"], "--min-memory-gib"),
    "memory-tiny": (["gpu-with-memory", "--min-memory-gib", "1e-9"], "--min-memory-gib"),
    "profile-9g": (["mig-slice", "--profile", "9g.1gb"], "--profile"),
    "profile-5g": (["mig-slice", "--profile", "5g.40gb"], "--profile"),
    "profile-too-much-memory": (["mig-slice", "--profile", "1g.999gb"], "--profile"),
    "profile-ci-bigger": (["mig-slice", "--profile", "4c.3g.40gb"], "--profile"),
    "profile-garbage": (["mig-slice", "--profile", "../../etc"], "--profile"),
    "profile-empty": (["mig-slice", "--profile", ""], "--profile"),
    "name-empty": (["mig-slice", "--profile", "1g.18gb", "--name", ""], "--name"),
    "name-upper": (["mig-slice", "--profile", "1g.18gb", "--name", "Mig"], "--name"),
    "namespace-dot": (["mig-slice", "--profile", "1g.18gb", "--namespace", "a.b"], "--namespace"),
    "mps-limit-absurd": (
        ["shared-gpu", "--strategy", "MPS", "--mps-pinned-memory-limit", "9999Ei"],
        "--mps-pinned-memory-limit",
    ),
    "mps-limit-zero": (
        ["shared-gpu", "--strategy", "MPS", "--mps-pinned-memory-limit", "0"],
        "--mps-pinned-memory-limit",
    ),
    "version-outside": (
        ["mig-slice", "--profile", "1g.18gb", "--kubernetes-version", "1.99.0"],
        "--kubernetes-version",
    ),
    "version-huge": (
        ["mig-slice", "--profile", "1g.18gb", "--kubernetes-version", "9" * 30 + ".0.0"],
        "--kubernetes-version",
    ),
}


@pytest.mark.parametrize("case", TEMPLATE_CASES)
def test_claims_template_refuses_values_kubernetes_or_a_gpu_would_not_take(
    hostile: dict[str, str], case: str
) -> None:
    args, name = TEMPLATE_CASES[case]
    result = invoke(hostile, ["claims", "template", *args])
    assert_refused(result, (name,))
    assert "apiVersion" not in result.stdout


def test_a_profile_no_known_gpu_has_but_one_could_gets_a_note(hostile: dict[str, str]) -> None:
    result = invoke(hostile, ["claims", "template", "mig-slice", "--profile", "1g.50gb"])
    assert result.exit_code == 0, result.output
    assert "note: MIG profile 1g.50gb" in result.stderr


@pytest.mark.parametrize("case", CHECK_CASES)
def test_claims_check_strict_fails_metadata_and_fields_the_api_server_refuses(
    hostile: dict[str, str], tmp_path: Path, case: str
) -> None:
    text, where = CHECK_CASES[case]
    path = tmp_path / "claim.json"
    path.write_text(text)
    result = invoke(hostile, ["claims", "check", "--strict", str(path)])
    assert_refused(result, (where,), code=1)  # a check that fails: exit 1
    assert "FAIL" in result.output


def test_a_list_whose_items_is_not_a_list_is_refused(hostile: dict[str, str], tmp_path: Path):
    path = tmp_path / "list.yaml"
    path.write_text("kind: List\nitems: 5\n")
    assert_refused(invoke(hostile, ["claims", "check", str(path)]), (str(path),))


# ------------------------------------------------------------------------------ mig plan

MIG_LAYOUTS: dict[str, tuple[str, str]] = {
    "billion": ('{"1g.18gb": 1000000000}', "--layout"),
    "thirty-digits": ('{"1g.18gb": ' + "1" * 30 + "}", "--layout"),
    "sixty-five": ('{"1g.18gb": 65}', "--layout"),
    "negative": ('{"1g.18gb": -1}', "--layout"),
    "float": ('{"1g.18gb": 1.5}', "--layout"),
    "bool": ('{"1g.18gb": true}', "--layout"),
    "string": ('{"1g.18gb": "7"}', "--layout"),
    "null": ('{"1g.18gb": null}', "--layout"),
    "empty-key": ('{"": 1}', "--layout"),
    "unknown-profile": ('{"9g.1gb": 1}', "--layout"),
    "deep": ('{"a": ' + "[" * DEEP + "]" * DEEP + "}", "--layout"),
    "not-json": ("{1g.18gb: 7}", "--layout"),
    "unterminated": ('{"1g.18gb": 7', "--layout"),
    "big-int-digits": ('{"1g.18gb": ' + "9" * 5000 + "}", "--layout"),
}


@pytest.mark.parametrize("case", MIG_LAYOUTS)
def test_mig_plan_bounds_counts_before_planning(hostile: dict[str, str], case: str) -> None:
    layout, name = MIG_LAYOUTS[case]
    result = invoke(hostile, ["mig", "plan", "--gpu-model", "h200", "--layout", layout])
    assert_refused(result, (name,))


@pytest.mark.parametrize(
    "args",
    [
        ["--gpu-model", "x" * 10_000, "--layout", '{"1g.18gb": 1}'],
        ["--gpu-model", "h200", "--layout", '{"1g.18gb": 1}', "--gpus", "0"],
        ["--gpu-model", "h200", "--layout", '{"1g.18gb": 1}', "--gpus", "65"],
        ["--gpu-model", "h200", "--layout", '{"1g.18gb": 1}', "--config-name", "x"],
    ],
    ids=["unknown-model", "zero-gpus", "too-many-gpus", "config-name-without-file"],
)
def test_mig_plan_refuses_bad_options(hostile: dict[str, str], args: list[str]) -> None:
    result = invoke(hostile, ["mig", "plan", *args])
    assert_refused(result, ("--gpu-model", "--gpus", "--config-name"))


def test_a_mig_parted_config_with_a_huge_count_is_refused(hostile, tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "version: v1\nmig-configs:\n  big:\n    - devices: all\n      mig-enabled: true\n"
        "      mig-devices: {1g.18gb: 1000000000}\n"
    )
    for argv in (
        ["mig", "plan", "--gpu-model", "h200", "--layout", f"@{path}"],
        ["mig", "apply", "-i", hostile["inventory"], "--layout", f"@{path}"],
    ):
        assert_refused(invoke(hostile, argv), ("1g.18gb",))


# ----------------------------------------------------------------------------- gates plan

GATES_CASES = {
    "outside-model": ["--to", "1.20.0"],
    "two-minors": ["--to", "1.35.0", "--from", "1.33.0"],
    "locked-gate": ["--to", "1.35.0", "--gate", "DynamicResourceAllocation=false"],
    "removed-gate": ["--to", "1.38.0", "--gate", "DynamicResourceAllocation=true"],
    "unknown-gate": ["--to", "1.35.0", "--gate", "NoSuchGate=true"],
    "unicode-gate": ["--to", "1.35.0", "--gate", "ÄÖ=true"],
    "huge-major": ["--to", "9" * 30 + ".1.0"],
    "huge-minor": ["--to", "1." + "9" * 30 + ".0"],
    "gate-not-bool": ["--to", "1.35.0", "--gate", "DRAAdminAccess=yes"],
    "gate-twice": [
        "--to",
        "1.35.0",
        "--gate",
        "DRAAdminAccess=true",
        "--gate",
        "DRAAdminAccess=false",
    ],
}


#: Well-formed requests the version model refuses: the plan's checks fail (exit 1).
GATES_IMPOSSIBLE = ("outside-model", "huge-minor", "two-minors", "locked-gate", "removed-gate")


@pytest.mark.parametrize("case", GATES_CASES)
def test_gates_plan_refusals(hostile: dict[str, str], case: str) -> None:
    """Malformed input exits 2; a well-formed request the model refuses exits 1."""
    result = invoke(hostile, ["gates", "plan", *GATES_CASES[case]])
    assert_refused(result, ("--to", "--from", "--gate"), 1 if case in GATES_IMPOSSIBLE else 2)


# ------------------------------------------------------------------------------------ lab

LAB_COMMANDS = {
    "up": ["lab", "up"],
    "down": ["lab", "down"],
    "status": ["lab", "status"],
    "status-json": ["lab", "status", "--json"],
}


LAB_ENVS = {
    "name-space": {"GPUFLEET_LAB_NAME": "Bad Name"},
    "name-long": {"GPUFLEET_LAB_NAME": "a" * 40},
    "name-slash": {"GPUFLEET_LAB_NAME": "../etc"},
    "subnet-garbage": {"GPUFLEET_LAB_SUBNET": "not-a-net"},
    "subnet-small": {"GPUFLEET_LAB_SUBNET": "10.0.0.0/30"},
}


@pytest.mark.parametrize("env", LAB_ENVS)
@pytest.mark.parametrize("command", LAB_COMMANDS)
def test_a_bad_lab_environment_is_refused_before_podman(
    hostile: dict[str, str], command: str, env: str
) -> None:
    variables = LAB_ENVS[env]
    result = invoke(hostile, LAB_COMMANDS[command], env=variables)
    assert_refused(result, tuple(variables))


@pytest.mark.parametrize("kind", ["binary", "deep-json", "unclosed", "empty", "huge-int"])
def test_a_corrupt_lab_state_file_is_refused_naming_it(hostile: dict[str, str], kind: str):
    env = {"GPUFLEET_LAB_NAME": f"state-{kind}"}
    state = Path(hostile["cache"]) / "labs" / f"state-{kind}" / "state.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_bytes(CONTENTS[kind])
    result = invoke(hostile, ["lab", "status"], env=env)
    assert_refused(result, (str(state), "state.json"))


def test_a_state_file_that_is_not_an_object_is_refused(hostile: dict[str, str]) -> None:
    state = Path(hostile["cache"]) / "labs" / "state-list" / "state.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("[1, 2]")
    result = invoke(hostile, ["lab", "status"], env={"GPUFLEET_LAB_NAME": "state-list"})
    assert_refused(result, ("state.json",))
    assert "gpufleet lab down" in result.output


LAB_UP_OPTIONS = {
    "zero-workers": ["--workers", "0"],
    "huge-workers": ["--workers", "1" + "0" * 25],
    "negative-gpus": ["--gpus-per-node", "-1"],
    "unknown-model": ["--gpu-model", "NVIDIA Z9000"],
    "path-version": ["--kubernetes-version", "../../etc"],
    "not-a-number": ["--workers", "two"],
}


@pytest.mark.parametrize("case", LAB_UP_OPTIONS)
def test_lab_up_refuses_bad_options(hostile: dict[str, str], case: str) -> None:
    args = LAB_UP_OPTIONS[case]
    assert_refused(invoke(hostile, ["lab", "up", *args]), (args[0],))


# ------------------------------------------------------------------ claims gc and explain

CLAIMS_API_CASES = {
    "gc-namespace-slash": ["claims", "gc", "--namespace", "a/b", "--kubeconfig", "{KC}"],
    "gc-namespace-upper": ["claims", "gc", "-n", "Team", "--kubeconfig", "{KC}"],
    "explain-no-slash": ["claims", "explain", "claim-1", "--kubeconfig", "{KC}"],
    "explain-dotdot": ["claims", "explain", "../claim", "--kubeconfig", "{KC}"],
    "explain-three-parts": ["claims", "explain", "a/b/c", "--kubeconfig", "{KC}"],
    "explain-bad-name": ["claims", "explain", "ns/Bad_Name", "--kubeconfig", "{KC}"],
    "gc-missing-context": ["claims", "gc", "--kubeconfig", "{KC}", "--context", "nope"],
}


@pytest.mark.parametrize("case", CLAIMS_API_CASES)
def test_claims_api_commands_refuse_bad_references(hostile: dict[str, str], case: str) -> None:
    result = invoke(hostile, fill(CLAIMS_API_CASES[case], hostile))
    assert_refused(result, ("--namespace", "NAMESPACE/CLAIM", "nope", hostile["kubeconfig"]))


def test_a_kubeconfig_from_the_environment_is_judged_too(hostile: dict[str, str]) -> None:
    result = invoke(hostile, ["claims", "gc"], env={"KUBECONFIG": hostile["binary"]})
    assert_refused(result, (hostile["binary"],))


# ------------------------------------------------------------------- validate, up, doctor


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--json", "{D}"),
        ("--junit", "{D}"),
        ("--markdown", "{D}"),
        ("--json", "/no/such/dir/r.json"),
        ("--junit", "/no/such/dir/r.xml"),
    ],
)
def test_validate_refuses_an_output_it_cannot_write_before_running(
    hostile: dict[str, str], option: str, value: str
) -> None:
    value = value.replace("{D}", hostile["directory"])
    result = invoke(hostile, ["validate", "-i", hostile["inventory"], option, value])
    assert_refused(result, (option,))


BAD_OPTIONS = {
    "doctor-bogus": ["doctor", "--bogus"],
    "doctor-extra": ["doctor", "extra"],
    "up-no-inventory": ["up"],
    "mig-apply-no-inventory": ["mig", "apply"],
    "gates-audit-no-inventory": ["gates", "audit"],
    "up-limit-without-value": ["up", "-i", "{INV}", "--limit"],
    "validate-i-without-value": ["validate", "-v", "-i"],
}


@pytest.mark.parametrize("case", BAD_OPTIONS)
def test_missing_or_unknown_options_exit_2(hostile: dict[str, str], case: str) -> None:
    result = invoke(hostile, fill(BAD_OPTIONS[case], hostile))
    assert_refused(result, ("--bogus", "extra", "--inventory", "--limit", "-i", "Missing"))
