"""Hostile input for every ``gpufleet`` command (upgrade aside) and for the input parsing
the modules share: binary, non-UTF-8, oversized and 20,000-deep files, YAML alias bombs,
malformed ``-e``, broken, empty and group-less inventories, counts and sizes out of
range, names and labels Kubernetes refuses, a bad lab environment.

Every CLI case must be refused before anything runs (ansible-runner, podman and the API
server are replaced by tripwires): exit 2, no traceback, and the message names the
option, the variable or the file. Every module_utils case must raise the module's own
error (never RecursionError, UnicodeDecodeError, MemoryError, TypeError ...) naming its
input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils import claim_check as cchk
from ansible_collections.gpufleet.cluster.plugins.module_utils import claim_problems as cprob
from ansible_collections.gpufleet.cluster.plugins.module_utils import claim_templates as ct
from ansible_collections.gpufleet.cluster.plugins.module_utils import containerd_config as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils import input_guard as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils import kube_config_edit as kce
from ansible_collections.gpufleet.cluster.plugins.module_utils import kube_flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils import mig_apply
from ansible_collections.gpufleet.cluster.plugins.module_utils import mig_config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils import mig_planner as mpl
from ansible_collections.gpufleet.cluster.plugins.module_utils import node_labels as nl
from ansible_collections.gpufleet.cluster.plugins.module_utils import scheduler_config as schc
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_hosts as vh
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_kube as vk
from ansible_collections.gpufleet.cluster.plugins.modules import (
    containerd_runtime_config,
    kubelet_config_gates,
    nvidia_cdi_spec_check,
)
from click.testing import CliRunner, Result

from gpufleet import runner
from gpufleet.cli import main
from gpufleet.lab import cluster

pytestmark = pytest.mark.unit

DEEP = 20_000

#: name -> the bytes of a hostile file (None: the kind is not a plain file).
CONTENTS: dict[str, bytes] = {
    "binary": b"\xff\xfe\x00\x01\x02binary",
    "latin1": "name: caf\xe9\n".encode("latin-1"),
    "deep-json": b"[" * DEEP + b"]" * DEEP,
    "deep-yaml": b"a: " + b"{b: " * DEEP + b"1" + b"}" * DEEP,
    "alias-bomb": (
        b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + b"".join(
            f"b{i}: &b{i} [{', '.join(['*' + ('a' if i == 1 else f'b{i - 1}')] * 10)}]\n".encode()
            for i in range(1, 9)
        )
    ),
    "self-alias": b"a: &a [*a]\n",
    "oversized": b"a: b\n" * (ig.MAX_TEXT_BYTES // 5 + 10),
    "unclosed": b"a: [1, 2\nb: {c: \n",
    "bad-scalar": b"a: 2001-13-45\n",
    "huge-int": b"a: " + b"9" * 5000 + b"\n",
    "empty": b"",
}
FILE_KINDS = (*CONTENTS, "directory", "missing", "dev-zero")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Kind -> path of a hostile input file, plus ``inventory`` and ``kubeconfig`` (valid
    ones, to reach the option under test)."""
    root = tmp_path_factory.mktemp("hostile")
    paths = {}
    for name, data in CONTENTS.items():
        path = root / f"{name}.yaml"
        path.write_bytes(data)
        paths[name] = str(path)
    (root / "a-directory").mkdir()
    paths["directory"] = str(root / "a-directory")
    paths["missing"] = str(root / "no-such-file.yaml")
    paths["dev-zero"] = "/dev/zero"
    inv = root / "inventory.ini"
    inv.write_text(
        "[kube_control_plane]\ncp-1 ansible_host=192.0.2.1\n"
        "[kube_node]\ngpu-1 ansible_host=192.0.2.2\n"
        "[gpu_nodes]\ngpu-1\n"
        "[k8s_cluster:children]\nkube_control_plane\nkube_node\n"
    )
    paths["inventory"] = str(inv)
    kc = root / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://192.0.2.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    paths["kubeconfig"] = str(kc)
    # inventories
    inv_dir = root / "inventories"
    inv_dir.mkdir()
    for name, text in {
        "broken.yml": "all:\n  hosts: [\n",
        "empty.ini": "",
        "groupless.ini": "node-1\nnode-2\n",
        "deep.yml": "all: " + "[" * DEEP + "]" * DEEP + "\n",
        "toml.toml": "[all\n",
    }.items():
        (inv_dir / name).write_text(text)
    (inv_dir / "binary.ini").write_bytes(CONTENTS["binary"])
    (inv_dir / "latin1.ini").write_bytes(b"[gpu_nodes]\nn\xe9ud-1\n")
    (inv_dir / "empty-dir").mkdir()
    (inv_dir / "dir-with-broken").mkdir()
    (inv_dir / "dir-with-broken" / "hosts.yml").write_text("all:\n  children: {a: [\n")
    paths["inventories"] = str(inv_dir)
    (root / "cache").mkdir()
    paths["cache"] = str(root / "cache")
    return paths


@pytest.fixture(autouse=True)
def tripwires(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever reaches ansible-runner, podman or the lab's build has slipped through."""
    import ansible_runner

    def tripped(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"hostile input reached a run: {args} {kwargs}")

    monkeypatch.setattr(ansible_runner, "run", tripped)
    monkeypatch.setattr(runner.subprocess, "run", tripped)
    monkeypatch.setattr(cluster, "up", tripped)
    monkeypatch.setattr(cluster, "down", tripped)
    monkeypatch.setattr(cluster, "_container_state", tripped)
    monkeypatch.setattr(cluster, "_kubernetes_nodes", tripped)


def invoke(
    hostile: dict[str, str], argv: list[str], env: dict[str, str] | None = None, **kw: Any
) -> Result:
    base = {"GPUFLEET_CACHE": hostile["cache"], "COLUMNS": "2000", "KUBECONFIG": ""}
    return CliRunner().invoke(main, argv, env={**base, **(env or {})}, **kw)


def assert_refused(result: Result, names: tuple[str, ...], code: int = 2) -> None:
    """Exit ``code``, no traceback, and one of ``names`` (option, variable, file) in the
    message."""
    out = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}\n{out}"
    )
    assert "Traceback" not in out, out
    assert result.exit_code == code, out
    flat = " ".join(out.split())
    assert any(n in flat for n in names), (names, out)


def fill(argv: list[str], hostile: dict[str, str], path: str = "") -> list[str]:
    return [
        a.replace("{F}", path)
        .replace("{INV}", hostile["inventory"])
        .replace("{KC}", hostile["kubeconfig"])
        for a in argv
    ]


# ------------------------------------------------------------------ files given to the CLI

#: Entry points that read a file: id -> (argv with {F} for the file, the option's name).
FILE_ENTRIES: dict[str, tuple[list[str], str]] = {
    "mig-plan-layout": (["mig", "plan", "--gpu-model", "h200", "--layout", "@{F}"], "--layout"),
    "mig-apply-layout": (["mig", "apply", "-i", "{INV}", "--layout", "@{F}"], "--layout"),
    "claims-check": (["claims", "check", "{F}"], "FILE"),
    "claims-check-strict-json": (["claims", "check", "--strict", "--json", "{F}"], "FILE"),
    "up-extra-vars": (["up", "-i", "{INV}", "-e", "@{F}"], "-e"),
    "gates-apply-extra-vars": (["gates", "apply", "-i", "{INV}", "-e", "@{F}"], "-e"),
    "gates-audit-extra-vars": (["gates", "audit", "-i", "{INV}", "-e", "@{F}"], "-e"),
    "mig-apply-extra-vars": (["mig", "apply", "-i", "{INV}", "-e", "@{F}"], "-e"),
    "validate-extra-vars": (["validate", "-i", "{INV}", "-e", "@{F}"], "-e"),
    "validate-kubeconfig": (["validate", "-i", "{INV}", "--kubeconfig", "{F}"], "--kubeconfig"),
    "claims-gc-kubeconfig": (["claims", "gc", "--kubeconfig", "{F}"], "--kubeconfig"),
    "claims-explain-kubeconfig": (
        ["claims", "explain", "team-a/claim-1", "--kubeconfig", "{F}"],
        "--kubeconfig",
    ),
}


@pytest.mark.parametrize("kind", FILE_KINDS)
@pytest.mark.parametrize("entry", FILE_ENTRIES)
def test_a_hostile_file_is_refused_naming_it(
    hostile: dict[str, str], entry: str, kind: str
) -> None:
    argv, option = FILE_ENTRIES[entry]
    path = hostile[kind]
    result = invoke(hostile, fill(argv, hostile, path))
    assert_refused(result, (path, option))


@pytest.mark.parametrize(
    "kind",
    ["binary", "latin1", "deep-json", "deep-yaml", "alias-bomb", "oversized", "unclosed", "empty"],
)
def test_hostile_standard_input_to_claims_check_is_refused(
    hostile: dict[str, str], kind: str
) -> None:
    result = invoke(hostile, ["claims", "check", "-"], input=CONTENTS[kind])
    assert_refused(result, ("standard input", "-"))


def test_claims_check_reads_at_most_the_cap_of_dev_zero(hostile: dict[str, str]) -> None:
    result = invoke(hostile, ["claims", "check", "/dev/zero"])
    assert_refused(result, ("/dev/zero",))
    assert "larger than 4 MiB" in result.output


# --------------------------------------------------------------------------- inventories

INVENTORY_COMMANDS: dict[str, list[str]] = {
    "up": ["up"],
    "gates-apply": ["gates", "apply"],
    "gates-audit": ["gates", "audit"],
    "mig-apply": ["mig", "apply"],
    "validate": ["validate"],
}
INVENTORIES = (
    "broken.yml",
    "empty.ini",
    "groupless.ini",
    "deep.yml",
    "toml.toml",
    "binary.ini",
    "latin1.ini",
    "empty-dir",
    "dir-with-broken",
    "missing.ini",
)


@pytest.mark.parametrize("inventory", INVENTORIES)
@pytest.mark.parametrize("command", INVENTORY_COMMANDS)
def test_an_unusable_inventory_is_refused_before_anything_runs(
    hostile: dict[str, str], command: str, inventory: str
) -> None:
    path = str(Path(hostile["inventories"]) / inventory)
    result = invoke(hostile, [*INVENTORY_COMMANDS[command], "-i", path])
    assert_refused(result, (path, "'-i'"))
    assert "kubeconfig" not in result.output.lower() or command == "validate"


def test_a_broken_inventory_shows_ansibles_own_parse_error(hostile: dict[str, str]) -> None:
    path = str(Path(hostile["inventories"]) / "broken.yml")
    result = invoke(hostile, ["gates", "apply", "-i", path])
    assert_refused(result, (path,))
    assert "Ansible cannot parse" in result.output and "YAML" in result.output


def test_a_groupless_inventory_names_the_groups_the_playbook_needs(
    hostile: dict[str, str],
) -> None:
    path = str(Path(hostile["inventories"]) / "groupless.ini")
    result = invoke(hostile, ["mig", "apply", "-i", path])
    assert_refused(result, (path,))
    assert "gpu_nodes" in result.output and "ungrouped" in result.output


# ------------------------------------------------------------------------------ -e values

EXTRA_VARS: dict[str, tuple[str, str]] = {
    "unclosed-list": ("mig_layout=[1, 2", "mig_layout"),
    "unclosed-map": ("mig_layout={1g.18gb: 7", "mig_layout"),
    "no-equals": ("novalue", "novalue"),
    "no-key": ("=1", "=1"),
    "digit-key": ("1x=1", "1x"),
    "space-key": ("a b=1", "a b"),
    "dash-key": ("a-b=1", "a-b"),
    "deep": ("x=" + "[" * DEEP, "-e x"),
    "self-alias": ("x=&a [*a]", "-e x"),
}


@pytest.mark.parametrize("value", EXTRA_VARS)
@pytest.mark.parametrize("command", INVENTORY_COMMANDS)
def test_a_malformed_extra_var_is_refused(
    hostile: dict[str, str], command: str, value: str
) -> None:
    raw, name = EXTRA_VARS[value]
    result = invoke(hostile, [*INVENTORY_COMMANDS[command], "-i", hostile["inventory"], "-e", raw])
    assert_refused(result, (name,))
    assert "-e" in result.output


def test_a_template_or_glob_value_stays_a_string() -> None:
    from gpufleet.commands._options import extra_vars_option

    parsed = extra_vars_option(None, None, ("a={{ b }}", "c=*.local", "d=x: y"))  # type: ignore[arg-type]
    assert parsed == {"a": "{{ b }}", "c": "*.local", "d": {"x": "y"}}


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
    result = invoke(hostile, ["claims", "template", "mig-slice", "--profile", "1g.23gb"])
    assert result.exit_code == 0, result.output
    assert "note: MIG profile 1g.23gb" in result.stderr


# -------------------------------------------------------------- claims check: the content


def _claim(**top: Any) -> str:
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            }
        },
    }
    for key, value in top.items():
        if value is None:
            obj.pop(key, None)
        else:
            obj[key] = value
    return json.dumps(obj)


CHECK_CASES: dict[str, tuple[str, str]] = {
    "nested-map-label": (
        _claim(metadata={"name": "gpu", "labels": {"team": {"a": "b"}}}),
        "metadata.labels.team",
    ),
    "list-label": (_claim(metadata={"name": "gpu", "labels": {"team": [1]}}), "metadata.labels"),
    "labels-not-a-map": (_claim(metadata={"name": "gpu", "labels": ["a"]}), "metadata.labels"),
    "bad-label-key": (_claim(metadata={"name": "gpu", "labels": {"a b": "c"}}), "metadata.labels"),
    "unknown-top-level": (_claim(bogus=1), "bogus"),
    "status-on-template": (_claim(status={}), "status"),
    "metadata-a-list": (_claim(metadata=["gpu"]), "metadata"),
    "bad-name": (_claim(metadata={"name": "GPU_1"}), "metadata.name"),
    "bad-namespace": (_claim(metadata={"name": "gpu", "namespace": "a.b"}), "metadata.namespace"),
    "annotation-int": (
        _claim(metadata={"name": "gpu", "annotations": {"a": 1}}),
        "metadata.annotations.a",
    ),
}


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
    from ansible_collections.gpufleet.cluster.plugins.module_utils import mig_profiles as mpr

    with pytest.raises(ValueError, match="at most 64"):
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
    with pytest.raises(ct.ClaimTemplateError, match=re.escape(name)):
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


def test_up_renders_a_report_whose_problems_are_not_mappings() -> None:
    import io

    from rich.console import Console

    from gpufleet.commands import up

    buf = io.StringIO()
    doc = {"checks": [{"id": "a", "status": "fail", "problems": ["x", 1], "fix": "f"}]}
    up.render_report(doc, Console(file=buf, width=200))
    assert "a:" in buf.getvalue() and "fix: f" in buf.getvalue()


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
    with pytest.raises(ct.ClaimTemplateError, match="mig-slice parameters"):
        ct.build("mig-slice", params)


# ------------------------------------------------- named pipes, limits, empty values

_FIFO_ENTRIES = {
    k: FILE_ENTRIES[k]
    for k in ("mig-plan-layout", "claims-check", "up-extra-vars", "claims-gc-kubeconfig")
}


@pytest.fixture
def fifo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A named pipe nobody writes to (an open() of it never returned)."""
    import os

    monkeypatch.setattr(ig, "PIPE_TIMEOUT", 0.5)
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize("entry", _FIFO_ENTRIES)
def test_a_named_pipe_nobody_writes_is_refused_instead_of_hanging(
    hostile: dict[str, str], fifo: str, entry: str
) -> None:
    argv, _option = _FIFO_ENTRIES[entry]
    result = invoke(hostile, fill(argv, hostile, fifo))
    assert_refused(result, (fifo,))
    assert "named pipe" in result.output


def test_a_named_pipe_with_a_writer_is_read_like_process_substitution(fifo: str) -> None:
    import threading

    def write() -> None:
        with open(fifo, "w") as fh:
            fh.write("a: 1\n")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert ig.read_text(fifo) == "a: 1\n"
    finally:
        writer.join(timeout=5)


@pytest.mark.parametrize("case", ["fifo", "binary-in-subdirectory", "empty-path"])
@pytest.mark.parametrize("command", ["up", "mig-apply", "validate"])
def test_an_inventory_ansible_would_hang_on_or_misread_is_refused(
    hostile: dict[str, str], tmp_path: Path, fifo: str, command: str, case: str
) -> None:
    """A FIFO in an inventory directory hung Ansible's parse; a binary file one level down
    and ``-i ''`` (the working directory, all of it) reached the playbook."""
    # names without an extension: ansible-core 2.17 skips *.ini in a directory, 2.19 reads it
    inv = tmp_path / "inv"
    (inv / "sub").mkdir(parents=True)
    (inv / "hosts").write_text(Path(hostile["inventory"]).read_text())
    if case == "fifo":
        Path(fifo).rename(inv / "more")
        path, named = str(inv), str(inv / "more")
    elif case == "binary-in-subdirectory":
        (inv / "sub" / "hosts").write_bytes(CONTENTS["binary"])
        path, named = str(inv), str(inv / "sub" / "hosts")
    else:
        path, named = "", "-i ''"
    result = invoke(hostile, [*INVENTORY_COMMANDS[command], "-i", path])
    assert_refused(result, (named, "'-i'") if case == "empty-path" else (named,))


@pytest.mark.parametrize("limit", ["", " ", "no-such-host"], ids=["empty", "blank", "no-match"])
@pytest.mark.parametrize("command", ["up", "mig-apply", "validate"])
def test_a_limit_that_selects_nothing_is_refused_before_the_run(
    hostile: dict[str, str], command: str, limit: str
) -> None:
    """An empty --limit was dropped by ansible-runner: the playbook ran on every host."""
    argv = [*INVENTORY_COMMANDS[command], "-i", hostile["inventory"], "--limit", limit]
    result = invoke(hostile, argv)
    assert_refused(result, ("--limit",))
    assert "fix:" in result.output


@pytest.mark.parametrize(
    "argv",
    [
        ["claims", "gc", "-n", "", "--kubeconfig", "{KC}"],
        ["claims", "gc", "--apply", "--namespace", "", "--kubeconfig", "{KC}"],
        ["claims", "template", "mig-slice", "--profile", "1g.18gb", "--namespace", ""],
        ["mig", "apply", "-i", "{INV}", "--layout", ""],
        ["mig", "apply", "-i", "{INV}", "--layout", " "],
    ],
    ids=["gc-n", "gc-apply-namespace", "template-namespace", "mig-layout", "mig-layout-blank"],
)
def test_an_empty_value_is_not_read_as_all_or_the_default(
    hostile: dict[str, str], argv: list[str]
) -> None:
    """``-n ''`` read every namespace (``--apply``: released claims in all of them);
    ``--namespace ''`` became default; ``--layout ''`` reached the playbook."""
    result = invoke(hostile, fill(argv, hostile))
    assert_refused(result, ("--namespace", "--layout"))
    assert "apiVersion" not in result.output


KUBECONFIG_FIELDS = {
    "server-int": (
        "clusters: [{name: c, cluster: {server: 6443}}]\n",
        "clusters[0].cluster.server",
    ),
    "clusters-str": ("clusters: x\n", "clusters"),
    "context-str": ("contexts: [{name: c, context: x}]\n", "contexts[0]"),
    "user-list": ("users: [{name: u, user: [1]}]\n", "users[0]"),
    "token-file-fifo": ("users: [{name: u, user: {tokenFile: {FIFO}}}]\n", "tokenFile"),
    "ca-directory": (
        "clusters: [{name: c, cluster: {server: 'https://x', certificate-authority: {DIR}}}]\n",
        "certificate-authority",
    ),
}


@pytest.mark.parametrize("case", KUBECONFIG_FIELDS)
def test_a_kubeconfig_entry_the_client_trips_over_is_named(
    hostile: dict[str, str], tmp_path: Path, fifo: str, case: str
) -> None:
    """The client answered 'int' object has no attribute 'rstrip', or hung on the pipe."""
    text, field = KUBECONFIG_FIELDS[case]
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        + text.replace("{FIFO}", fifo).replace("{DIR}", hostile["directory"])
    )
    with pytest.raises(vk.KubeError) as err:
        vk.check_kubeconfig(str(path))
    assert str(path) in err.value.message and field in err.value.message
    assert "fix:" in err.value.message
    assert_refused(invoke(hostile, ["claims", "gc", "--kubeconfig", str(path)]), (field,))


@pytest.mark.parametrize(
    ("value", "expected"),
    [("yes", True), (" On ", True), ("t", True), (1, True), ("n", False), ("OFF", False),
     (0, False), ("maybe", None), ([1], None), ({"a": 1}, None), (None, None)],
)  # fmt: skip
def test_one_boolean_rule_for_variables_is_ansibles(value: object, expected: object) -> None:
    """preflight and the DRA driver values read a variable's boolean as Ansible does
    (convert_bool: BOOLEANS_TRUE / BOOLEANS_FALSE)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils import input_guard as ig

    assert ig.variable_bool(value) is expected
