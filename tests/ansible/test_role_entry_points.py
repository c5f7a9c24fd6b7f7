"""Every role refuses a bad variable on entry, at the entry point of the task file a play
enters (``tasks_from: X`` is judged by entry point ``X`` of the role's
``meta/argument_specs.yml``), before any of its tasks runs: the validate role's entry
points (playbooks/validate.yml: smoke, list, read_node) and a ``tasks_from`` entry of
another role."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.unit.ansible_cli import ansible

pytestmark = pytest.mark.ansible

ROOT = Path(__file__).resolve().parents[2]

# one node, reached without SSH; localhost is the control host of the judging play
INVENTORY = """\
[kube_control_plane]
[kube_node]
node-1 ansible_connection=local
[all:vars]
ansible_python_interpreter="{{ ansible_playbook_python }}"
"""


def _inventory(tmp_path: Path, text: str = INVENTORY) -> str:
    path = tmp_path / "inventory.ini"
    path.write_text(text)
    return str(path)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_validate_refuses_a_bad_variable_before_it_reads_the_cluster(tmp_path: Path) -> None:
    out = ansible(
        "ansible-playbook",
        "-i",
        _inventory(tmp_path, "[kube_control_plane]\n[kube_node]\n"),
        "playbooks/validate.yml",
        "-e",
        "validate_smoke_image_pull_policy=Sometimes",
        "-e",
        f"validate_report_file={tmp_path / 'report.json'}",
    )
    assert out.returncode == 2, out.stdout[-3000:]
    text = _flat(out.stdout)
    # the smoke play comes first (the nodes are read after it): its entry point refuses
    assert "Validating arguments against arg spec 'smoke'" in text
    assert (
        "value of validate_smoke_image_pull_policy must be one of: Always, IfNotPresent, Never, "
        "got: Sometimes" in text
    )
    assert "Validate | Smoke test (a claim" not in text
    assert "Validate | Run the checks" not in text
    assert not (tmp_path / "report.json").exists()


def test_validate_node_read_refuses_a_bad_variable_before_it_reads_the_node(
    tmp_path: Path,
) -> None:
    # a host variable of the node: the control host's plays (whose list entry point judges
    # every option of the checks, the extra variables among them) have none to refuse
    inventory = INVENTORY.replace("node-1 ansible_connection=local", "node-1 "
                                  "ansible_connection=local validate_become=perhaps")  # fmt: skip
    out = ansible(
        "ansible-playbook",
        "-i",
        _inventory(tmp_path, inventory),
        "playbooks/validate.yml",
        env_extra={"TMPDIR": str(tmp_path)},  # the background listing's directory
    )
    assert out.returncode == 2, out.stdout[-3000:]
    text = _flat(out.stdout)
    assert "Validating arguments against arg spec 'read_node'" in text
    assert "argument 'validate_become' is of type str and we were unable to convert to bool" in text
    assert "Validate | Feature gates of the running components" not in text
    assert re.search(r"node-1\s+: ok=0 .* failed=1", out.stdout)


def test_a_tasks_from_file_refuses_a_bad_variable_at_its_entry_point(tmp_path: Path) -> None:
    playbook = tmp_path / "cdi.yml"
    playbook.write_text(
        "- name: Toolkit | CDI only\n"
        "  hosts: node-1\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Toolkit | The role's CDI tasks\n"
        "      ansible.builtin.include_role:\n"
        "        name: gpufleet.cluster.nvidia_container_toolkit\n"
        "        tasks_from: cdi\n"
    )
    out = ansible(
        "ansible-playbook",
        "-i",
        _inventory(tmp_path),
        str(playbook),
        "-e",
        "nvidia_container_toolkit_cdi_generate=sometimes",
    )
    assert out.returncode == 2, out.stdout[-3000:]
    text = _flat(out.stdout)
    assert "Validating arguments against arg spec 'cdi'" in text
    assert (
        "argument 'nvidia_container_toolkit_cdi_generate' is of type str and we were unable "
        "to convert to bool" in text
    )
    assert "Toolkit | Check that the driver sees GPUs" not in text


def _tasks_from(doc: object) -> list[tuple[str, str]]:
    """``(role, tasks_from)`` of every include_role/import_role in a parsed playbook."""
    found: list[tuple[str, str]] = []
    if isinstance(doc, dict):
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            args = doc.get(key)
            if isinstance(args, dict) and "tasks_from" in args:
                found.append((str(args["name"]).split(".")[-1], str(args["tasks_from"])))
        for value in doc.values():
            found += _tasks_from(value)
    elif isinstance(doc, list):
        for value in doc:
            found += _tasks_from(value)
    return found


def test_every_tasks_from_names_an_entry_point_of_its_role() -> None:
    files = sorted((ROOT / "playbooks").glob("*.yml")) + sorted((ROOT / "molecule").rglob("*.yml"))
    entered = {
        (role, name)
        for path in files
        if path.name != "upgrade.yml"  # roles/upgrade keeps its own entry points
        for role, name in _tasks_from(yaml.safe_load(path.read_text()))
    }
    assert ("validate", "read_node") in entered
    missing = []
    for role, name in sorted(entered):
        spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
        if name not in spec["argument_specs"]:
            missing.append(f"{role}: tasks_from {name}")
    assert missing == []
