"""Preflight judges every value the inventory sets by its role's own argument spec
(Ansible's validator), before any play: the roles' real meta/argument_specs.yml."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.filter.preflight import preflight_check
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import specs as ps

pytestmark = pytest.mark.unit

ROLES_DIR = Path(__file__).resolve().parents[3] / "roles"
ROLES = ["nvidia_driver", "kubeadm", "dra_driver", "mig", "validate"]


def problems(variables: dict) -> dict[str, tuple]:
    specs = ps.load_role_specs(ROLES_DIR, ROLES)
    return {
        name: (role, value, msg)
        for role, name, value, msg in ps.argument_spec_problems(variables, specs)
    }


def test_a_role_without_a_spec_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "bare" / "tasks").mkdir(parents=True)
    (tmp_path / "bare" / "tasks" / "main.yml").write_text("---\n[]\n")
    assert ps.load_role_specs(tmp_path, ["bare"]) == {}
    assert set(ps.load_role_specs(ROLES_DIR, ROLES)) == {
        "nvidia_driver",
        "kubeadm",
        "dra_driver",
        "mig",
        "validate",
    }


@pytest.mark.parametrize(
    ("name", "value", "role", "said"),
    [
        ("mig_layout", "7g", "mig", "dict"),
        ("nvidia_driver_for_dra", "perhaps", "nvidia_driver", "bool"),
        ("nvidia_driver_mode", "download", "nvidia_driver", "install, preinstalled"),
        ("dra_driver_sharing", ["time-slicing", "vgpu"], "dra_driver", "time-slicing, mps"),
        (
            "validate_smoke_image_pull_policy",
            "Sometimes",
            "validate",
            "Always, IfNotPresent, Never",
        ),
        ("validate_page_size", "lots", "validate", "int"),
    ],
)
def test_a_value_the_role_would_refuse_is_refused_naming_role_and_variable(
    name: str, value: object, role: str, said: str
) -> None:
    found = problems({name: value})
    assert set(found) == {name}
    assert found[name][0] == role and found[name][1] == value
    assert said in found[name][2]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("kubeadm_disable_swap", "yes"),  # Ansible's booleans, as the role converts them
        ("nvidia_driver_for_dra", "False"),
        ("dra_driver_sharing", "mps"),  # a comma string is a list
        ("mig_layout", {"1g.18gb": 7}),
    ],
)
def test_values_the_role_converts_pass(name: str, value: object) -> None:
    assert problems({name: value}) == {}


def test_required_is_not_judged_where_the_role_may_not_run() -> None:
    # kubeadm_kubernetes_version is required by the kubeadm role; an adopted cluster
    # (site_bootstrap false) never runs it
    assert problems({"kubeadm_dra_gates": {}}) == {}


def test_the_filter_stops_the_run_with_the_variable_and_the_spec_file() -> None:
    hosts = {
        "gpu-1": {"groups": ["gpu_nodes"], "variables": {"mig_layout": "7g"}},
        "gpu-2": {"groups": ["gpu_nodes"], "variables": {"mig_layout": "7g"}},
    }
    out = preflight_check(hosts, {}, None, str(ROLES_DIR), ROLES)
    assert not out["ok"]
    (error,) = [e for e in out["errors"] if e["rule"] == "argument-spec"]
    assert error["variable"] == "mig_layout" and error["hosts"] == ["gpu-1", "gpu-2"]
    assert (
        "roles/mig/meta/argument_specs.yml" in error["fix"]
        and "give mig_layout as dict" in error["fix"]
    )
    assert "mig_layout" in out["report"]


def test_without_roles_dir_the_rule_does_not_run() -> None:
    hosts = {"gpu-1": {"groups": ["gpu_nodes"], "variables": {"mig_layout": "7g"}}}
    assert not any(p.rule == "argument-spec" for p in pf.check_inventory(hosts))


def test_a_spec_file_that_is_not_yaml_is_named(tmp_path: Path) -> None:
    (tmp_path / "r" / "meta").mkdir(parents=True)
    (tmp_path / "r" / "meta" / "argument_specs.yml").write_text("argument_specs: [\n")
    with pytest.raises(ValueError, match=r"argument_specs\.yml cannot be read as YAML"):
        ps.load_role_specs(tmp_path, ["r"])


def test_without_pyyaml_the_specs_are_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ps, "yaml", None)
    monkeypatch.setattr(ps, "YAML_IMPORT_ERROR", "No module named 'yaml'")
    with pytest.raises(ValueError, match=r"PyYAML is required .*No module named 'yaml'.*fix:"):
        ps.load_role_specs(ROLES_DIR, ROLES)
