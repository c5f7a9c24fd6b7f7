"""The cluster-wide variables (gpufleet_kubernetes_version, gpufleet_kubeconfig,
gpufleet_dra_driver_namespace): preflight refuses a role variable that disagrees with
one, the other rules see a release set only cluster-wide, and every role's own variable
defaults to it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import facts as cf

from tests.unit.ansible_cli import ansible

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "inventory" / "sample"


@pytest.mark.ansible
def test_preflight_refuses_a_role_variable_that_disagrees_on_the_sample(tmp_path: Path) -> None:
    broken = tmp_path / "sample"
    shutil.copytree(SAMPLE, broken)
    (broken / "group_vars" / "kube_control_plane.yml").write_text(
        '---\nkubeadm_kubernetes_version: "1.36.4"\n'
    )
    out = ansible("ansible-playbook", "-i", str(broken), "playbooks/preflight.yml")
    assert out.returncode == 2, out.stdout[-3000:]
    assert out.stdout.count("FAILED!") == 1
    flat = " ".join(out.stdout.split())
    assert (
        'ERROR [cluster-fact-mismatch] kubeadm_kubernetes_version=\\"1.36.4\\" '
        "(on cp-1, cp-2, cp-3): disagrees with "
        'gpufleet_kubernetes_version=\\"1.37.2\\"' in flat
    )


@pytest.mark.ansible
def test_preflight_judges_a_release_set_only_cluster_wide(tmp_path: Path) -> None:
    broken = tmp_path / "sample"
    shutil.copytree(SAMPLE, broken)
    all_yml = broken / "group_vars" / "all.yml"
    text = all_yml.read_text()
    assert 'gpufleet_kubernetes_version: "1.37.2"' in text
    # a gate 1.37 removed (the release rule reads the release the roles get from it)
    text = text.replace(
        "dra_feature_gates_extra: {}", "dra_feature_gates_extra: {DRAControlPlaneController: true}"
    )
    all_yml.write_text(text)
    out = ansible("ansible-playbook", "-i", str(broken), "playbooks/preflight.yml")
    assert out.returncode == 2, out.stdout[-3000:]
    flat = " ".join(out.stdout.split())
    assert "dra_feature_gates_extra=" in flat and "DRAControlPlaneController" in flat
    assert "release-missing" not in flat


@pytest.mark.ansible
def test_every_role_variable_defaults_to_its_cluster_variable(tmp_path: Path) -> None:
    """Each role's defaults/main.yml, as Ansible templates it, with the cluster-wide
    variables set and the role's own unset (the upgrade role is not listed: its defaults
    read lab_kubeconfig and dra_driver_namespace)."""
    expected = {
        "kubeadm": {
            "kubeadm_kubernetes_version": "1.36.4",
            "kubeadm_kubeconfig_dest": "/srv/k/admin.conf",
        },
        "dra_feature_gates": {
            "dra_feature_gates_kubernetes_version": "1.36.4",
            "dra_feature_gates_kubeconfig": "/srv/k/admin.conf",
        },
        "dra_driver": {
            "dra_driver_kubernetes_version": "1.36.4",
            "dra_driver_kubeconfig": "/srv/k/admin.conf",
            "dra_driver_namespace": "gpu-dra",
        },
        "claim_templates": {
            "claim_templates_kubernetes_version": "1.36.4",
            "claim_templates_kubeconfig": "/srv/k/admin.conf",
        },
        "gpu_node_labels": {"gpu_node_labels_kubeconfig": "/srv/k/admin.conf"},
        "device_plugin": {"device_plugin_kubeconfig": "/srv/k/admin.conf"},
        "mig": {"mig_kubeconfig": "/srv/k/admin.conf", "mig_dra_plugin_namespace": "gpu-dra"},
        "nvidia_container_toolkit": {"nvidia_container_toolkit_kubeconfig": "/srv/k/admin.conf"},
        "validate": {
            "validate_kubeconfig": "/srv/k/admin.conf",
            "validate_plugin_namespace": "gpu-dra",
        },
    }
    tasks = []
    for role, names in expected.items():
        tasks.append(
            f"    - ansible.builtin.include_vars:\n"
            f"        file: {ROOT}/roles/{role}/defaults/main.yml\n"
            f"        name: d_{role}\n"
        )
        for name in names:
            pick = f"{{'{name}': d_{role}.{name}}}"
            tasks.append(
                "    - ansible.builtin.set_fact:\n"
                f'        seen: "{{{{ seen | default({{}}) | combine({pick}) }}}}"\n'
            )
    tasks.append(
        "    - ansible.builtin.copy:\n"
        '        content: "{{ seen | to_json }}"\n'
        f"        dest: {tmp_path}/seen.json\n"
        "        mode: '0600'\n"
    )
    playbook = tmp_path / "defaults.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n" + "".join(tasks))
    out = ansible(
        "ansible-playbook",
        "-i",
        "localhost,",
        "-c",
        "local",
        str(playbook),
        "-e",
        '{"gpufleet_kubernetes_version": "1.36.4", "gpufleet_kubeconfig": "/srv/k/admin.conf", '
        '"gpufleet_dra_driver_namespace": "gpu-dra"}',
    )
    assert out.returncode == 0, out.stdout[-3000:]
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {k: v for names in expected.values() for k, v in names.items()}
    listed = {name for fact in cf.CLUSTER_FACTS for name in fact.role_variables}
    assert listed - set(seen) == {"upgrade_kubeconfig", "upgrade_dra_plugin_namespace"}
