"""Hostile input given to ``gpufleet`` commands (upgrade aside) as files, inventories,
``-e`` values, named pipes, ``--limit``, empty values and kubeconfig entries: binary,
non-UTF-8, oversized and 20,000-deep files, YAML alias bombs, malformed ``-e``, broken,
empty and group-less inventories.

Every case must be refused before anything runs (the tripwires of ``conftest``), as
``inputs.assert_refused`` checks it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

from tests.unit.hostile.inputs import (
    CONTENTS,
    DEEP,
    FILE_KINDS,
    assert_refused,
    fill,
    invoke,
)

pytestmark = pytest.mark.unit


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
    assert f"larger than {ig.MAX_MANIFEST_BYTES // (1024 * 1024)} MiB" in result.output


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
