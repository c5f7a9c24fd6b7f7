"""The cluster-wide variables (gpufleet_kubernetes_version, gpufleet_kubeconfig,
gpufleet_dra_driver_namespace): preflight refuses a role variable that disagrees with
one, the other rules see a release set only cluster-wide, and every role's own variable
defaults to it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.filter.cluster_facts import (
    cluster_facts_check,
    cluster_facts_effective,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import facts as cf

from tests.unit.ansible_cli import ansible

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "inventory" / "sample"


@pytest.mark.unit
def test_a_role_release_that_disagrees_is_refused_naming_both_variables_and_values() -> None:
    (p,) = cf.disagreements(
        {
            "gpufleet_kubernetes_version": "1.37.2",
            "dra_feature_gates_kubernetes_version": "1.36.4",
        }
    )
    assert p == {
        "rule": "cluster-fact-mismatch",
        "severity": "error",
        "variable": "dra_feature_gates_kubernetes_version",
        "value": "1.36.4",
        "message": 'disagrees with gpufleet_kubernetes_version="1.37.2" (the Kubernetes '
        "release the cluster runs): the role would work on another value than the rest of "
        "the cluster",
        "fix": "remove dra_feature_gates_kubernetes_version from the inventory (it defaults "
        'to gpufleet_kubernetes_version) or set it to "1.37.2"; if "1.36.4" is right, set '
        'gpufleet_kubernetes_version: "1.36.4" instead',
    }


@pytest.mark.unit
def test_kubeconfig_and_namespace_disagreements_are_refused_per_variable() -> None:
    found = cf.disagreements(
        {
            "gpufleet_kubeconfig": "~/.kube/prod.conf",
            "mig_kubeconfig": "/etc/kubernetes/admin.conf",
            "dra_driver_kubeconfig": "~/.kube/prod.conf",
            "gpufleet_dra_driver_namespace": "nvidia-dra-driver-gpu",
            "mig_dra_plugin_namespace": "gpu-operator",
        }
    )
    assert [(p["variable"], p["value"]) for p in found] == [
        ("mig_kubeconfig", "/etc/kubernetes/admin.conf"),
        ("mig_dra_plugin_namespace", "gpu-operator"),
    ]
    assert 'gpufleet_dra_driver_namespace="nvidia-dra-driver-gpu"' in found[1]["message"]


@pytest.mark.unit
@pytest.mark.parametrize(
    "variables",
    [
        {"gpufleet_kubernetes_version": "1.37.2", "kubeadm_kubernetes_version": "v1.37.2"},
        {"gpufleet_kubernetes_version": "1.37.2", "dra_driver_kubernetes_version": ""},
        {"gpufleet_kubeconfig": "/root/.kube/config", "gpu_node_labels_kubeconfig": None},
        {"gpufleet_kubeconfig": "/srv/k/../k/admin.conf", "mig_kubeconfig": "/srv/k/admin.conf"},
        {"kubeadm_kubernetes_version": "1.36.1", "dra_driver_kubernetes_version": "1.36.1"},
        {"upgrade_kubernetes_version": "1.38.0", "gpufleet_kubernetes_version": "1.37.2"},
    ],
)
def test_agreeing_empty_or_unset_values_pass(variables: dict) -> None:
    assert cf.disagreements(variables) == []


@pytest.mark.unit
@pytest.mark.parametrize(
    ("value", "rule", "said"),
    [
        ("banana", "release-format", "is not a Kubernetes release"),
        ("1.30.4", "release-range", "1.32"),
    ],
)
def test_a_cluster_release_the_model_refuses_names_the_cluster_variable(
    value: str, rule: str, said: str
) -> None:
    variables = {"gpufleet_kubernetes_version": value}
    (p,) = cf.disagreements(variables)
    assert (p["rule"], p["variable"], p["value"]) == (rule, "gpufleet_kubernetes_version", value)
    assert said in p["message"]
    # no role is handed the refused release, so no role's rule repeats the error
    assert cf.effective_variables(variables) == variables


@pytest.mark.unit
def test_the_roles_see_the_cluster_values_where_they_set_none() -> None:
    hosts = {
        "cp-1": {
            "groups": ["kube_control_plane"],
            "variables": {"dra_driver_kubernetes_version": "1.37.2", "nvidia_driver_branch": "580"},
            "cluster": {"gpufleet_kubernetes_version": "1.37.2", "gpufleet_gpus": []},
        }
    }
    out = cluster_facts_effective(hosts)
    assert out["cp-1"]["variables"] == {
        "nvidia_driver_branch": "580",
        "kubeadm_kubernetes_version": "1.37.2",
        "dra_feature_gates_kubernetes_version": "1.37.2",
        "dra_driver_kubernetes_version": "1.37.2",
        "claim_templates_kubernetes_version": "1.37.2",
    }
    assert out["cp-1"]["groups"] == ["kube_control_plane"]


@pytest.mark.unit
def test_the_filter_merges_the_hosts_of_one_error() -> None:
    entry = {
        "variables": {"mig_kubeconfig": "/a"},
        "cluster": {"gpufleet_kubeconfig": "/b"},
    }
    out = cluster_facts_check({"gpu-2": entry, "gpu-1": entry, "cp-1": {"variables": {}}})
    assert not out["ok"]
    (error,) = out["errors"]
    assert error["hosts"] == ["gpu-1", "gpu-2"]
    assert out["report"].splitlines() == [
        "preflight: 1 error(s) in the cluster-wide variables",
        'ERROR [cluster-fact-mismatch] mig_kubeconfig="/a" (on gpu-1, gpu-2): disagrees with '
        'gpufleet_kubeconfig="/b" (the cluster\'s kubeconfig on the control host): the role '
        "would work on another value than the rest of the cluster; fix: remove mig_kubeconfig "
        'from the inventory (it defaults to gpufleet_kubeconfig) or set it to "/b"; if "/a" '
        'is right, set gpufleet_kubeconfig: "/a" instead',
    ]


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


@pytest.mark.unit
def test_preflight_collects_every_cluster_variable() -> None:
    tasks = (ROOT / "roles" / "preflight" / "tasks" / "main.yml").read_text()
    names = "|".join(f.name.removeprefix("gpufleet_") for f in cf.CLUSTER_FACTS)
    assert f"'^gpufleet_({names})$'" in tasks
