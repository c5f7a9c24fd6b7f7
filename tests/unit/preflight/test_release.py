"""Preflight rules of the Kubernetes release: its range and form, feature gates, cgroup v1,
removed and misspelt variables (``plugins/module_utils/preflight/release.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

from tests.unit.preflight.hosts import CP, _host, _rules

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("release", "word"), [("1.31.4", "older"), ("1.39.0", "newer")])
def test_release_outside_the_provision_range_names_the_variable(release: str, word: str) -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": release}))["release-range"]
    assert p.severity == pp.ERROR
    assert p.variable == "kubeadm_kubernetes_version" and p.value == release
    assert word in p.message and "1.32 to 1.38" in p.message
    assert "1.32" in p.fix and "1.38" in p.fix


def test_malformed_release_is_refused() -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": "v1.thirty"}))["release-format"]
    assert (p.variable, p.value) == ("kubeadm_kubernetes_version", "v1.thirty")


def test_release_variables_of_two_roles_must_agree() -> None:
    p = _rules(_host({"dra_feature_gates_kubernetes_version": "1.36.1"}))["release-mismatch"]
    assert p.variable == "dra_feature_gates_kubernetes_version" and p.value == "1.36.1"
    assert "kubeadm_kubernetes_version=1.37.2" in p.message


def test_bootstrap_without_a_release_is_refused() -> None:
    problems = pf.check_host("cp-1", CP, {"site_bootstrap": True})
    p = _rules(problems)["release-missing"]
    assert p.variable == "kubeadm_kubernetes_version"
    assert p.fix.startswith(
        'set the cluster\'s release once, gpufleet_kubernetes_version: "1.37.2"'
    )
    # the cluster-wide release reaches the kubeadm role through its default
    assert "release-missing" not in _rules(
        pf.check_host("cp-1", CP, {"site_bootstrap": True, "gpufleet_kubernetes_version": "1.37.2"})
    )


def test_a_gate_the_release_removed_is_refused_with_the_model_reason() -> None:
    p = _rules(_host({"dra_feature_gates_extra": {"DRAControlPlaneController": True}}))[
        "gates-release"
    ]
    assert p.variable == "dra_feature_gates_extra"
    assert "DRAControlPlaneController" in p.message


def test_kubeadm_and_dra_feature_gates_asking_for_different_gates_is_a_warning() -> None:
    p = _rules(_host({"site_bootstrap": True, "dra_feature_gates_features": ["prioritized-list"]}))[
        "gates-differ"
    ]
    assert p.severity == pp.WARNING and p.variable == "kubeadm_dra_features"
    assert "dra_feature_gates_features" in p.message


def test_cgroup_v1_before_1_31_is_a_noop_warning() -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": "1.30.4", "kubeadm_allow_cgroup_v1": True}))[
        "cgroup-v1-noop"
    ]
    assert p.severity == pp.WARNING and p.variable == "kubeadm_allow_cgroup_v1"
    assert "1.31" in p.message
    assert "cgroup-v1-noop" not in _rules(_host({"kubeadm_allow_cgroup_v1": True}))


def test_removed_variable_names_its_replacement() -> None:
    removed = {"dra_feature_gates_extra_gates": {"new": "dra_feature_gates_extra", "fix": "same"}}
    p = _rules(_host({"dra_feature_gates_extra_gates": {"X": True}}, removed=removed))[
        "removed-variable"
    ]
    assert p.variable == "dra_feature_gates_extra_gates" and p.value == {"X": True}
    assert p.fix == "rename it to dra_feature_gates_extra (same)"


def test_misspelt_role_variable_is_a_warning_with_a_suggestion() -> None:
    problems = _host({"nvidia_driver_brnach": "580"}, known_variables=["nvidia_driver_branch"])
    p = _rules(problems)["unknown-variable"]
    assert p.severity == pp.WARNING and p.fix == "did you mean nvidia_driver_branch?"


def test_a_typo_inside_the_role_prefix_itself_gets_the_suggestion_too() -> None:
    known = ["nvidia_driver_branch"]
    problems = _host({"nvidia_drvier_branch": "580"}, known_variables=known)
    assert _rules(problems)["unknown-variable"].fix == "did you mean nvidia_driver_branch?"
    # a site variable with a family prefix and nothing close to it is the site's own
    assert "unknown-variable" not in _rules(_host({"nvidia_site_note": "x"}, known_variables=known))


def test_a_removed_non_dra_gate_in_the_gate_variable_is_refused_naming_it() -> None:
    p = _rules(_host({"dra_feature_gates_extra": {"CSIMigrationPortworx": True}}))
    problem = p["gates-release"]
    assert problem.severity == pp.ERROR and problem.variable == "dra_feature_gates_extra"
    assert "CSIMigrationPortworx" in problem.message and "removed in 1.36" in problem.message
    assert "gpufleet gates plan --to" in problem.fix


def test_a_gate_no_release_registers_is_refused_with_the_close_name() -> None:
    p = _rules(_host({"dra_feature_gates_extra": {"CSIMigration": True}}))["gates-release"]
    assert "CSIMigration" in p.message and "did you mean CSIMigrationPortworx" in p.message


def test_a_non_dra_gate_the_release_registers_is_accepted() -> None:
    assert "gates-release" not in _rules(
        _host({"dra_feature_gates_extra": {"PodLevelResources": True}})
    )


def test_kubelet_extra_feature_gates_are_judged_for_the_kubelet() -> None:
    bad = {
        "site_bootstrap": True,
        "kubeadm_kubelet_extra": {
            "featureGates": {
                "CSIMigration": True,
                "ControllerManagerReleaseLeaderElectionLockOnExit": True,
                "ContextualLogging": True,
            }
        },
    }
    found = [p for p in _host(bad) if p.rule == "gates-release"]
    assert sorted(p.value for p in found) == [
        "CSIMigration=true",
        "ControllerManagerReleaseLeaderElectionLockOnExit=true",
    ]
    assert all(p.variable == "kubeadm_kubelet_extra" for p in found)
    cm_only = next(p for p in found if p.value.startswith("Controller"))
    assert "only kube-controller-manager registers" in cm_only.message
    shape = _rules(_host({**bad, "kubeadm_kubelet_extra": {"featureGates": ["x"]}}))
    assert shape["gates-shape"].variable == "kubeadm_kubelet_extra"
