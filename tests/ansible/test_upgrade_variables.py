"""playbooks/upgrade.yml judges every variable of the upgrade role against the role's
argument specification (roles/upgrade/meta/argument_specs.yml) before it reads a host:
every ``tasks_from`` it enters has an entry point there (Ansible validates the entry point
on entry), the sample inventory passes, a value of the wrong type fails naming the
variable, and no host is contacted (the sample's hosts are addresses nothing answers on)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.unit.ansible_cli import ansible

pytestmark = pytest.mark.ansible

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "inventory" / "sample"

#: Every host's variables against the role's specification (what each entry point checks
#: on entry), without running the entry point's tasks.
CHECK_ONLY = """
- name: Upgrade variables only
  hosts: kube_control_plane:kube_node
  gather_facts: false
  tasks:
    - name: Check the variables
      ansible.builtin.validate_argument_spec:
        argument_spec: "{{ (lookup('ansible.builtin.file', 'ROLE/meta/argument_specs.yml')
          | from_yaml).argument_specs.kubeadm_version.options }}"
""".replace("ROLE", str(ROOT / "roles" / "upgrade"))

#: The read play's entry point on the hosts: a bad value fails on entry, before the command.
ENTRY = """
- name: Upgrade read play
  hosts: kube_control_plane:kube_node
  gather_facts: false
  any_errors_fatal: true
  tasks:
    - name: kubeadm version
      ansible.builtin.include_role:
        name: gpufleet.cluster.upgrade
        tasks_from: kubeadm_version
"""


def _playbook(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return ansible("ansible-playbook", "-i", str(SAMPLE), str(path), *extra)


def test_every_entry_of_the_upgrade_has_an_argument_spec_and_input_comes_first() -> None:
    import yaml

    plays = yaml.safe_load((ROOT / "playbooks" / "upgrade.yml").read_text())
    specs = yaml.safe_load((ROOT / "roles" / "upgrade" / "meta" / "argument_specs.yml").read_text())
    entered = [
        t["ansible.builtin.include_role"]["tasks_from"]
        for p in plays
        for t in p["tasks"]
        if "ansible.builtin.include_role" in t
    ]
    assert entered[0] == "validate_input"
    assert plays[0]["hosts"] == "localhost"
    assert sorted(set(entered) - set(specs["argument_specs"])) == []
    main = specs["argument_specs"]["main"]["options"]
    assert all(specs["argument_specs"][e]["options"] == main for e in entered)


def test_the_sample_inventory_passes(tmp_path: Path) -> None:
    book = tmp_path / "check.yml"
    book.write_text(CHECK_ONLY)
    out = _playbook(book)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "unreachable=1" not in out.stdout


@pytest.mark.parametrize(
    ("extra", "variable"),
    [
        ("upgrade_drain_timeout=abc", "upgrade_drain_timeout"),
        ('{"upgrade_node_ready_timeout": [1]}', "upgrade_node_ready_timeout"),
        ('{"upgrade_dra_gates": ["DRAFoo"]}', "upgrade_dra_gates"),
        ("upgrade_accept_warnings=maybe", "upgrade_accept_warnings"),
    ],
)
def test_a_wrong_type_fails_naming_the_variable(tmp_path: Path, extra: str, variable: str) -> None:
    book = tmp_path / "check.yml"
    book.write_text(ENTRY)
    out = _playbook(book, "-e", extra)
    assert out.returncode != 0, out.stdout[-3000:]
    assert variable in out.stdout, out.stdout[-3000:]
    assert "unreachable=1" not in out.stdout
