"""Templates inside values that reach Ansible as variables: from a file (``-e @FILE``, a
``--proposal``, a mig-parted config), from a command line (``-e KEY=VALUE``, option values,
file names) and from the cluster. Each command runs up to ansible-runner, which is replaced
by Ansible's own reading of the extra-vars file the run would pass (``tests/unit/ansible_vars``:
``load_extra_vars`` and ``Templar``, in this process): the value must come back as the
literal text, and the command a template would run (``touch pwned`` in the test's working
directory) must not have run. Values no run can take are refused first (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from tests.unit.ansible_vars import as_ansible_sees_it
from tests.unit.hostile.inputs import assert_refused, invoke

pytestmark = pytest.mark.unit

#: Templates that would run ``touch pwned`` on the control host (or compute), were they code.
TEMPLATES = {
    "pipe-lookup": "{{ lookup('pipe', 'touch pwned') }}",
    "statement": "{% if lookup('pipe', 'touch pwned') is string %}x{% endif %}",
    "query": "{#- c -#}{{ query('pipe', 'touch pwned') | first }}",
    "arithmetic": "{{ 7 * 7 }}",
}


@pytest.fixture
def ansible_reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """Each run's variables as Ansible templates them (in place of ansible-runner); the
    working directory is ``tmp_path`` (where ``touch pwned`` would write)."""
    import ansible_runner

    seen: list[dict[str, Any]] = []

    def run(**kwargs: Any) -> Any:
        assert "extravars" not in kwargs  # nothing on ansible-playbook's command line
        seen.append(as_ansible_sees_it(Path(kwargs["private_data_dir"]) / "env" / "extravars"))
        return SimpleNamespace(rc=0, status="successful", config=SimpleNamespace(ident="t"))

    monkeypatch.setattr(ansible_runner, "run", run)
    monkeypatch.chdir(tmp_path)
    return seen


def _kubeconfig(path: Path) -> str:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://192.0.2.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return str(path)


def _mig_config(path: Path, name: str = "all-1g") -> str:
    doc = {
        "version": "v1",
        "mig-configs": {
            name: [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}]
        },
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _argv(entry: str, template: str, hostile: dict[str, str], tmp: Path) -> tuple[list, str, Any]:
    """(argv, variable, the value it must arrive with) of one entry point. ``-e KEY=VALUE``
    reads VALUE as YAML: a template is given as a quoted YAML string, as a shell user
    writes one that starts with ``{%``."""
    inv = hostile["inventory"]
    quoted = json.dumps(template)
    nested = {"mig_layout": {"1g.18gb": template}, "notes": [template, 3, None]}
    if entry == "up-e":
        return ["up", "-i", inv, "-e", f"site_note={quoted}"], "site_note", template
    if entry == "up-e-file":
        (tmp / "vars.yml").write_text(yaml.safe_dump({"site_note": nested}))
        return ["up", "-i", inv, "-e", f"@{tmp / 'vars.yml'}"], "site_note", nested
    if entry == "validate-kubeconfig":
        path = _kubeconfig(tmp / template)
        return ["validate", "-i", inv, "--kubeconfig", path], "validate_kubeconfig", path
    if entry == "validate-e":
        argv = ["validate", "-i", inv, "-e", f"validate_report_file={quoted}"]
        return argv, "validate_report_file", template
    if entry == "mig-apply-layout-file":
        path = _mig_config(tmp / f"{template}.yaml")
        argv = ["mig", "apply", "-i", inv, "--layout", f"@{path}", "--config-name", "all-1g"]
        return argv, "mig_config_file", path
    if entry == "mig-apply-config-name":
        path = _mig_config(tmp / "config.yaml", template)
        argv = ["mig", "apply", "-i", inv, "--layout", f"@{path}", "--config-name", template]
        return argv, "mig_config_name", template
    if entry == "mig-apply-e":
        argv = ["mig", "apply", "-i", inv, "-e", f"mig_note={quoted}"]
        return argv, "mig_note", template
    if entry == "gates-audit-e":
        return ["gates", "audit", "-i", inv, "-e", f"dra_note={quoted}"], "dra_note", template
    if entry == "gates-apply-e-file":
        (tmp / "vars.yml").write_text(yaml.safe_dump({"dra_note": nested}))
        argv = ["gates", "apply", "-i", inv, "-e", f"@{tmp / 'vars.yml'}"]
        return argv, "dra_note", nested
    assert entry == "upgrade-e"
    argv = ["upgrade", "-i", inv, "--to", "1.37.2", "--plan", "-e", f"upgrade_note={quoted}"]
    return argv, "upgrade_note", template


ENTRIES = (
    "up-e",
    "up-e-file",
    "validate-kubeconfig",
    "validate-e",
    "mig-apply-layout-file",
    "mig-apply-config-name",
    "mig-apply-e",
    "gates-audit-e",
    "gates-apply-e-file",
    "upgrade-e",
)
#: Templates a file name can hold (no ``/``): every template here.
CASES = [(e, t) for e in ENTRIES for t in TEMPLATES]


@pytest.mark.parametrize(("entry", "template"), CASES, ids=[f"{e}-{t}" for e, t in CASES])
def test_a_template_in_a_value_arrives_as_its_text(
    entry: str,
    template: str,
    hostile: dict[str, str],
    tmp_path: Path,
    ansible_reads: list[dict[str, Any]],
) -> None:
    argv, variable, expected = _argv(entry, TEMPLATES[template], hostile, tmp_path)
    result = invoke(hostile, argv)
    assert "Traceback" not in result.output, result.output
    assert ansible_reads, f"no run: {result.output}"
    assert ansible_reads[0][variable] == expected
    assert not (tmp_path / "pwned").exists()


# --------------------------------------------------------------- refused before any run


def _proposal(tmp: Path, **change: Any) -> str:
    base = {
        "node": "gpu-1",
        "gpu": 0,
        "current": {"mig_enabled": False, "layout": {}, "placements": []},
        "proposed": {
            "layout": {"3g.71gb": 2},
            "placements": [
                {"profile": "3g.71gb", "start": 0, "size": 4},
                {"profile": "3g.71gb", "start": 4, "size": 4},
            ],
        },
    }
    for key, value in change.items():
        target = base
        *path, last = key.split("__")
        for part in path:
            target = target[part]
        target[last] = value
    path = tmp / "proposal.json"
    path.write_text(json.dumps({"kind": "gpufleet-mig-proposal", "changes": [base]}))
    return str(path)


T = TEMPLATES["pipe-lookup"]
PROPOSALS = {
    "layout-count": {"proposed__layout": {"3g.71gb": T}},
    "layout-profile": {"proposed__layout": {T: 2}},
    "node-name": {"node": T},
    "gpu-index": {"gpu": T},
    "placement-profile": {"proposed__placements": [{"profile": T, "start": 0, "size": 4}]},
    "current-placement": {"current__placements": [{"profile": "1g.18gb", "start": T, "size": 1}]},
    "current-shape": {"current": T},
}


@pytest.mark.parametrize("case", PROPOSALS)
def test_a_proposal_with_a_template_is_refused_before_the_cluster_is_read(
    case: str, hostile: dict[str, str], tmp_path: Path, ansible_reads: list[dict[str, Any]]
) -> None:
    proposal = _proposal(tmp_path, **PROPOSALS[case])
    argv = ["mig", "apply", "-i", hostile["inventory"], "--proposal", proposal, "--check"]
    result = invoke(hostile, argv)
    assert_refused(result, ("--proposal",))
    assert "changes[0]." in result.output and "fix: write it with gpufleet mig advise" in (
        " ".join(result.output.split())
    )
    assert ansible_reads == [] and not (tmp_path / "pwned").exists()


MARKERS = {
    "vault-key": {"x": {"__ansible_vault": "$ANSIBLE_VAULT;1.1;AES256\n6162"}},
    "unsafe-key": {"x": {"__ansible_unsafe": T}},
    "nested-vault-key": {"x": [{"k": {"__ansible_vault": "v"}}]},
}


@pytest.mark.parametrize("case", MARKERS)
def test_a_value_holding_ansibles_own_markers_is_refused(
    case: str, hostile: dict[str, str], tmp_path: Path, ansible_reads: list[dict[str, Any]]
) -> None:
    (tmp_path / "vars.yml").write_text(yaml.safe_dump({"site_note": MARKERS[case]}))
    result = invoke(hostile, ["up", "-i", hostile["inventory"], "-e", f"@{tmp_path / 'vars.yml'}"])
    assert_refused(result, ("extra variable site_note",))
    assert "is Ansible's own marker" in result.output
    assert ansible_reads == []


def test_undecodable_bytes_of_a_command_line_are_refused(
    hostile: dict[str, str], ansible_reads: list[dict[str, Any]]
) -> None:
    result = invoke(hostile, ["up", "-i", hostile["inventory"], "-e", "site_note=caf\udce9"])
    assert_refused(result, ("extra variable site_note",))
    assert "not UTF-8 text" in result.output and ansible_reads == []


def test_no_role_or_playbook_loads_variables_from_a_file_at_run_time() -> None:
    """``include_vars`` and ``vars_files`` make a file's strings templates (ansible-core 2.17
    and 2.19 alike); the roles read files with ``lookup('file')``, ``slurp`` or a module,
    whose results Ansible keeps as data."""
    root = Path(__file__).resolve().parents[3]
    found = [
        f"{path.relative_to(root)}:{n}"
        for base in ("roles", "playbooks")
        for path in sorted((root / base).rglob("*.yml"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith("#")
        and ("include_vars" in line or line.strip().startswith("vars_files"))
    ]
    assert found == []
