"""playbooks/preflight.yml on the sample inventory: it passes as shipped, it fails once
naming every broken variable of a broken copy, and it reaches no host (the sample's hosts
are addresses nothing answers on). Also the play order of playbooks/site.yml."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.unit.ansible_cli import ansible

pytestmark = pytest.mark.ansible

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "inventory" / "sample"


_ansible = ansible


def test_sample_inventory_has_the_production_shape() -> None:
    out = _ansible("ansible-inventory", "-i", str(SAMPLE), "--graph")
    assert out.returncode == 0, out.stderr
    graph = out.stdout
    for group in (
        "kube_control_plane",
        "kube_node",
        "gpu_nodes",
        "gpu_a100",
        "gpu_h100",
        "gpu_h200",
    ):
        assert f"@{group}:" in graph
    listed = _ansible("ansible-inventory", "-i", str(SAMPLE), "--list")
    doc = yaml.safe_load(listed.stdout)
    assert len(doc["kube_control_plane"]["hosts"]) == 3
    layouts = {doc["_meta"]["hostvars"][h]["mig_config_name"] for h in doc["gpu_a100"]["hosts"]}
    layouts |= {doc["_meta"]["hostvars"][h]["mig_config_name"] for h in doc["gpu_h200"]["hosts"]}
    assert len(layouts) == 2


def test_sample_documents_every_variable_of_every_role() -> None:
    text = (SAMPLE / "group_vars" / "all.yml").read_text()
    missing = []
    for spec in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        role = spec.parent.parent.name
        if role == "lab_node":
            continue  # lab only: documented as never set on real hosts
        doc = yaml.safe_load(spec.read_text())
        for entry in doc["argument_specs"].values():
            for name in entry.get("options") or {}:
                if not re.search(rf"^#? ?{re.escape(name)}:", text, re.M):
                    missing.append(name)
    assert missing == []


def test_preflight_passes_on_the_sample_without_reaching_a_host() -> None:
    out = _ansible("ansible-playbook", "-i", str(SAMPLE), "playbooks/preflight.yml")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    recap = out.stdout[out.stdout.index("PLAY RECAP") :]
    assert "unreachable=0" in recap and "unreachable=1" not in recap
    assert re.search(r"h200-03\s+: ok=2 ", recap)


def test_every_play_runs_in_lockstep_whatever_the_default_strategy() -> None:
    """Plays read what a run_once task set for every host, run in serial batches and stop
    on any error; under strategy free (an ansible.cfg or AWX default) hosts would run
    ahead of those results. Every play says strategy linear, and preflight passes on the
    sample with ANSIBLE_STRATEGY=free."""
    loose = []
    for book in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(book.read_text()):
            if "hosts" in play and play.get("strategy") != "linear":
                loose.append(f"{book.name}: {play.get('name')}")
    assert loose == []
    out = _ansible(
        "ansible-playbook", "-i", str(SAMPLE), "playbooks/preflight.yml",
        env_extra={"ANSIBLE_STRATEGY": "free"},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "with the free strategy" not in out.stdout + out.stderr


def test_preflight_fails_once_naming_each_broken_variable(tmp_path: Path) -> None:
    broken = tmp_path / "sample"
    shutil.copytree(SAMPLE, broken)
    all_yml = broken / "group_vars" / "all.yml"
    text = all_yml.read_text()
    text = text.replace('nvidia_driver_branch: "580"', 'nvidia_driver_branch: "550"')
    text = text.replace(
        'nvidia_driver_version: "580.159.04"', 'nvidia_driver_version: "550.144.03"'
    )
    text = text.replace('{"1g.10gb": 7}', '{"1g.10gb": 8}')
    text += "dra_feature_gates_extra_gates: {DRAPrioritizedList: true}\n"
    # a value the kubeadm role's argument spec refuses (its play comes after the driver and
    # the toolkit, and no preflight rule of its own reads it): refused here, before any host
    text = text.replace("kubeadm_disable_swap: true", "kubeadm_disable_swap: maybe")
    all_yml.write_text(text)
    out = _ansible("ansible-playbook", "-i", str(broken), "playbooks/preflight.yml")
    assert out.returncode == 2, out.stdout[-3000:]
    assert out.stdout.count("FAILED!") == 1  # one failure listing everything
    assert "preflight: 4 error(s)" in out.stdout
    assert 'ERROR [argument-spec] kubeadm_disable_swap=\\"maybe\\"' in out.stdout
    assert "roles/kubeadm/meta/argument_specs.yml" in out.stdout
    assert 'ERROR [driver-pin] nvidia_driver_branch=\\"550\\"' in out.stdout
    assert "ERROR [removed-variable] dra_feature_gates_extra_gates=" in out.stdout
    assert "mig_config.mig-configs.h100-80gb-all-1g[0].mig-devices" in out.stdout
    assert "on h100-01, h100-02" in out.stdout


def test_preflight_refuses_a_pool_on_both_gpu_paths(tmp_path: Path) -> None:
    moved = tmp_path / "sample"
    shutil.copytree(SAMPLE, moved)
    hosts = moved / "hosts.yml"
    text = hosts.read_text()
    example = "    # gpu_path_device_plugin:\n    #   children:\n    #     gpu_h100:\n"
    assert example in text
    hosts.write_text(text.replace(example, example.replace("# ", "")))
    out = _ansible("ansible-playbook", "-i", str(moved), "playbooks/preflight.yml")
    assert out.returncode == 2, out.stdout[-3000:]
    assert "preflight: 1 error(s)" in out.stdout
    assert "ERROR [gpu-path-both] group_names=" in out.stdout
    assert "(on h100-01, h100-02): on both GPU paths" in out.stdout


def test_site_runs_preflight_first_and_the_roles_in_order() -> None:
    out = _ansible("ansible-playbook", "-i", str(SAMPLE), "playbooks/site.yml", "--list-tasks")
    assert out.returncode == 0, out.stderr
    plays = re.findall(r"^\s+play #\d+ \(([^)]*)\): ([^|]+?) \|", out.stdout, re.M)
    areas = [area for _, area in plays]
    assert areas[0] == "Preflight"
    order = [
        "Preflight",
        "Driver",
        "Toolkit",
        "Kubeadm",
        "DRA gates",
        "GPU labels",
        "Device plugin",
        "DRA driver",
        "MIG",
        "Monitoring",
        "Kueue",
        "Validate",
    ]
    present = [a for a in order if a in areas]
    assert present == sorted(present, key=areas.index)
    assert {
        "Driver",
        "Toolkit",
        "Kubeadm",
        "DRA gates",
        "GPU labels",
        "Device plugin",
        "DRA driver",
    } <= set(areas)
    assert "Monitoring" in areas  # the sample sets site_monitoring: true
    assert "Kueue" in areas  # the sample sets site_kueue: true
