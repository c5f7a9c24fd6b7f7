"""playbooks/upgrade.yml judges every variable of the upgrade role against the role's
argument specification (roles/upgrade/meta/argument_specs.yml) before it reads a host:
the sample inventory passes, a value of the wrong type fails naming the variable, and no
host is contacted (the sample's hosts are addresses nothing answers on)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.unit.ansible_cli import ansible

pytestmark = pytest.mark.ansible

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "inventory" / "sample"

#: The first play of playbooks/upgrade.yml up to its first task that reads a host.
CHECK_ONLY = """
- name: Upgrade variables only
  hosts: kube_control_plane:kube_node
  gather_facts: false
  tasks:
    - name: Check the variables
      ansible.builtin.include_role:
        name: gpufleet.cluster.upgrade
        tasks_from: validate_spec.yml
"""


def _playbook(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return ansible("ansible-playbook", "-i", str(SAMPLE), str(path), *extra)


def test_the_check_is_the_first_task_of_the_upgrade() -> None:
    import yaml

    plays = yaml.safe_load((ROOT / "playbooks" / "upgrade.yml").read_text())
    first = plays[0]["tasks"][0]["ansible.builtin.include_role"]
    assert first["tasks_from"] == "validate_spec.yml"


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
    book.write_text(CHECK_ONLY)
    out = _playbook(book, "-e", extra)
    assert out.returncode != 0, out.stdout[-3000:]
    assert variable in out.stdout, out.stdout[-3000:]
    assert "unreachable=1" not in out.stdout
