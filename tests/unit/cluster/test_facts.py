"""The cluster-wide variables (gpufleet_kubernetes_version, gpufleet_kubeconfig,
gpufleet_dra_driver_namespace): preflight refuses a role variable that disagrees with
one, the other rules see a release set only cluster-wide, and every role's own variable
defaults to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.filter.cluster_facts import (
    cluster_facts_check,
    cluster_facts_effective,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import facts as cf

ROOT = Path(__file__).resolve().parents[3]
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


@pytest.mark.unit
def test_preflight_collects_every_cluster_variable() -> None:
    tasks = (ROOT / "roles" / "preflight" / "tasks" / "main.yml").read_text()
    names = "|".join(f.name.removeprefix("gpufleet_") for f in cf.CLUSTER_FACTS)
    assert f"'^gpufleet_({names})$'" in tasks


@pytest.mark.unit
def test_the_device_plugin_kubeconfig_is_judged_against_the_clusters() -> None:
    (p,) = cf.disagreements(
        {"gpufleet_kubeconfig": "~/.kube/prod.conf", "device_plugin_kubeconfig": "/tmp/other.conf"}
    )
    assert (p["rule"], p["variable"], p["value"]) == (
        "cluster-fact-mismatch",
        "device_plugin_kubeconfig",
        "/tmp/other.conf",
    )
