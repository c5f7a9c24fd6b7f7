"""The monitoring role's ConfigMap for Grafana's dashboard sidecar
(roles/monitoring/templates/gpufleet-grafana-dashboard-configmap.yaml.j2), rendered with
Ansible's Templar from variables given as ``-e`` gives them (data), and the hostile values
of its variables: the namespace must be a DNS label, the label and annotation keys
Kubernetes qualified names, the label value a quoted Kubernetes label value (apimachinery
``pkg/util/validation/validation.go``), and with the ConfigMap on and a folder annotation,
``monitoring_grafana_folder`` one directory name (the sidecar takes the annotation as a
path). Preflight and the role's entry check refuse anything else (``config_values``),
naming the variable, the value and the fix. The dashboard is the data key
``gpufleet-dra-dashboard.json``, byte for byte, and fits a ConfigMap (1 MiB)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    config_values as cv,
)

from gpufleet import runner
from tests.unit.ansible_vars import load_extra_vars, pipe_template, trust_as_template

pytestmark = pytest.mark.unit

ROLE = Path(__file__).resolve().parents[3] / "roles" / "monitoring"
TEMPLATE = (ROLE / "templates" / "gpufleet-grafana-dashboard-configmap.yaml.j2").read_text()
DASHBOARD = ROLE / "files" / "gpufleet-dra-dashboard.json"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
#: kube-apiserver's limit on a ConfigMap's data (k8s.io/kubernetes pkg/apis/core
#: validation ValidateConfigMap: the values' total size against MaxSecretSize, 1 MiB).
CONFIGMAP_MAX_BYTES = 1024 * 1024

NAMESPACE = "monitoring_grafana_sidecar_namespace"
LABEL = "monitoring_grafana_sidecar_label"
LABEL_VALUE = "monitoring_grafana_sidecar_label_value"
ANNOTATION = "monitoring_grafana_sidecar_folder_annotation"
FOLDER = "monitoring_grafana_folder"
SWITCH = "monitoring_grafana_sidecar_configmap"

REFUSED_NAMESPACES: dict[str, Any] = {
    "empty": "",
    "null": None,
    "uppercase": "Monitoring",
    "dot": "grafana.monitoring",
    "leading-dash": "-monitoring",
    "trailing-dash": "monitoring-",
    "underscore": "grafana_ns",
    "64-chars": "a" * 64,
    "newline-yaml": "monitoring\n  labels: {x: y}",
    "slash": "kube-system/x",
    "number": 5,
    "list": ["monitoring"],
    "template": "{{ lookup('pipe','id') }}",
}
ACCEPTED_NAMESPACES = {"default": "monitoring", "digits": "0", "63-chars": "a" * 63}
REFUSED_KEYS: dict[str, Any] = {
    "empty-prefix": "/grafana_dashboard",
    "two-slashes": "a.io/b/c",
    "uppercase-prefix": "Example.com/dashboard",
    "prefix-underscore": "my_org/dashboard",
    "leading-dash": "-grafana",
    "trailing-dot": "grafana.",
    "space": "grafana dashboard",
    "colon": "grafana:dashboard",
    "64-char-name": "g" * 64,
    "254-char-prefix": ("a" * 63 + ".") * 4 + "ab/x",
    "newline-yaml": "grafana_dashboard\n    evil: x",
    "number": 1,
    "template": "{{ lookup('pipe','id') }}",
}
ACCEPTED_KEYS = {
    "default": "grafana_dashboard",
    "prefixed": "grafana.example.com/dashboard",
    "mixed": "A.b-C_9",
    "63-char-name": "g" * 63,
}
REFUSED_LABEL_VALUES: dict[str, Any] = {
    "unquoted-one": 1,
    "boolean": True,
    "null": None,
    "leading-dash": "-1",
    "slash": "a/b",
    "space": "a b",
    "64-chars": "v" * 64,
    "newline": "1\n",
    "template": "{{ x }}",
}
ACCEPTED_LABEL_VALUES = {"default": "1", "any": "", "word": "yes", "63-chars": "v" * 63}
#: Folders written as the annotation's value: text, whatever YAML or Jinja they hold.
ACCEPTED_FOLDERS = {
    "default": "GPU fleet",
    "mapping-colon": "a: b",
    "flow-mapping": "{x: 1}",
    "yaml-bool": "yes",
    "yaml-null": "null",
    "quotes": 'it\'s "x"',
    "unicode": "GPU ⚡ 日本",
    "template": "{{ lookup('pipe','id') }}",
}
REFUSED_FOLDERS = {"slash": "GPU/fleet", "absolute": "/etc", "dot-dot": "..", "dot": "."}


def _configmap(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """The ConfigMap the role applies, from the role's defaults with ``overrides``, every
    variable given as ``-e`` (data) gives it, the dashboard as the task reads it."""
    variables = {
        name: DEFAULTS[name] for name in (NAMESPACE, LABEL, LABEL_VALUE, ANNOTATION, FOLDER)
    }
    variables["monitoring__dashboard_json"] = DASHBOARD.read_text(encoding="utf-8")
    variables.update(overrides)
    loaded = load_extra_vars(runner.write_extravars(tmp_path, variables))
    text = Templar(loader=DataLoader(), variables=loaded).template(trust_as_template(TEMPLATE))
    return yaml.safe_load(text)


def test_the_configmap_carries_the_dashboard_label_and_folder(tmp_path: Path) -> None:
    cm = _configmap(tmp_path)
    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap"
    assert cm["metadata"] == {
        "name": "gpufleet-dra-dashboard",
        "namespace": "monitoring",
        "labels": {"grafana_dashboard": "1"},
        "annotations": {"grafana_folder": "GPU fleet"},
    }
    # byte for byte the file the role copies for a file provider, {{...}} legends included
    assert cm["data"] == {"gpufleet-dra-dashboard.json": DASHBOARD.read_text(encoding="utf-8")}
    assert "{{" in cm["data"]["gpufleet-dra-dashboard.json"]
    assert json.loads(cm["data"]["gpufleet-dra-dashboard.json"])["uid"] == "gpufleet-dra"


def test_the_dashboard_fits_a_configmap() -> None:
    size = len(DASHBOARD.read_bytes())
    assert size < CONFIGMAP_MAX_BYTES, f"{size} bytes: split the dashboard or use a file provider"


@pytest.mark.parametrize("value", REFUSED_NAMESPACES.values(), ids=REFUSED_NAMESPACES.keys())
def test_a_namespace_that_is_not_a_dns_label_is_refused(value: Any) -> None:
    (problem,) = cv.check_values({NAMESPACE: value})
    assert problem.startswith(f"{NAMESPACE}=") and "the Grafana dashboard ConfigMap" in problem
    assert f"fix: write {NAMESPACE} as a namespace name (DNS label)" in problem, problem


@pytest.mark.parametrize("value", ACCEPTED_NAMESPACES.values(), ids=ACCEPTED_NAMESPACES.keys())
def test_a_dns_label_namespace_is_accepted_and_written(tmp_path: Path, value: str) -> None:
    assert cv.check_values({NAMESPACE: value}) == []
    assert _configmap(tmp_path, **{NAMESPACE: value})["metadata"]["namespace"] == value


@pytest.mark.parametrize("name", [LABEL, ANNOTATION])
@pytest.mark.parametrize("value", REFUSED_KEYS.values(), ids=REFUSED_KEYS.keys())
def test_a_key_that_is_not_a_qualified_name_is_refused(name: str, value: Any) -> None:
    (problem,) = cv.check_values({name: value})
    assert problem.startswith(f"{name}=") and f"fix: write {name} as a" in problem, problem
    assert "the Grafana dashboard ConfigMap" in problem and len(problem) < 600


@pytest.mark.parametrize("value", ["", None], ids=["empty", "null"])
def test_an_empty_label_key_is_refused_but_an_empty_annotation_key_writes_none(
    tmp_path: Path, value: str | None
) -> None:
    (problem,) = cv.check_values({LABEL: value})
    assert problem.startswith(f"{LABEL}={json.dumps(value)}: is not a")
    assert cv.check_values({ANNOTATION: value}) == []
    assert "annotations" not in _configmap(tmp_path, **{ANNOTATION: value})["metadata"]


@pytest.mark.parametrize("key", ACCEPTED_KEYS.values(), ids=ACCEPTED_KEYS.keys())
@pytest.mark.parametrize("value", ACCEPTED_LABEL_VALUES.values(), ids=ACCEPTED_LABEL_VALUES.keys())
def test_a_valid_label_is_written_as_given(tmp_path: Path, key: str, value: str) -> None:
    assert cv.check_values({LABEL: key, LABEL_VALUE: value, ANNOTATION: key}) == []
    meta = _configmap(tmp_path, **{LABEL: key, LABEL_VALUE: value, ANNOTATION: key})["metadata"]
    assert meta["labels"] == {key: value}
    assert meta["annotations"] == {key: "GPU fleet"}


@pytest.mark.parametrize("value", REFUSED_LABEL_VALUES.values(), ids=REFUSED_LABEL_VALUES.keys())
def test_a_label_value_kubernetes_refuses_is_refused(value: Any) -> None:
    (problem,) = cv.check_values({LABEL_VALUE: value})
    assert problem.startswith(f"{LABEL_VALUE}="), problem
    assert f'fix: write {LABEL_VALUE} as a quoted label value, e.g. "1"' in problem


def test_an_unquoted_number_label_value_says_to_quote_it() -> None:
    (problem,) = cv.check_values({LABEL_VALUE: 1})
    assert problem.startswith(f"{LABEL_VALUE}=1: is not a string (YAML reads an unquoted 1")


@pytest.mark.parametrize("value", ACCEPTED_FOLDERS.values(), ids=ACCEPTED_FOLDERS.keys())
def test_a_folder_is_written_into_the_annotation_as_its_text(tmp_path: Path, value: str) -> None:
    assert cv.check_values({SWITCH: True, FOLDER: value, ANNOTATION: "grafana_folder"}) == []
    annotations = _configmap(tmp_path, **{FOLDER: value})["metadata"]["annotations"]
    assert annotations == {"grafana_folder": value}


def test_a_template_in_the_folder_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    meta = _configmap(tmp_path, **{FOLDER: pipe_template(marker)})["metadata"]
    assert meta["annotations"] == {"grafana_folder": pipe_template(marker)}
    assert not marker.exists()


@pytest.mark.parametrize("value", ["", None], ids=["empty", "null"])
def test_the_general_folder_writes_no_annotation(tmp_path: Path, value: str | None) -> None:
    assert "annotations" not in _configmap(tmp_path, **{FOLDER: value})["metadata"]


@pytest.mark.parametrize("value", REFUSED_FOLDERS.values(), ids=REFUSED_FOLDERS.keys())
def test_a_folder_that_is_a_path_is_refused_only_for_the_sidecar_annotation(value: str) -> None:
    on = {SWITCH: True, FOLDER: value, ANNOTATION: "grafana_folder"}
    (problem,) = cv.check_values(on)
    assert problem.startswith(f"{FOLDER}={json.dumps(value)}: is not one directory name")
    assert "fix: write monitoring_grafana_folder as one folder name without '/'" in problem
    assert cv.check_values({**on, SWITCH: False}) == []  # the file provider takes any text
    assert cv.check_values({**on, ANNOTATION: ""}) == []


def test_the_role_defaults_pass_the_checks() -> None:
    assert cv.check_values({**DEFAULTS, SWITCH: True}) == [], "defaults must pass"


def _sidecar_task() -> dict[str, Any]:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text(encoding="utf-8"))
    return next(t for t in tasks if "kubernetes.core.k8s" in t)


def test_the_configmap_is_applied_from_the_control_host_only_when_asked() -> None:
    task = _sidecar_task()
    assert task["when"] == "monitoring_grafana_sidecar_configmap | bool"
    assert task["delegate_to"] == "localhost" and task["run_once"] is True
    assert task["become"] is False
    k8s = task["kubernetes.core.k8s"]
    assert k8s["kubeconfig"] == "{{ monitoring_kubeconfig }}" and k8s["state"] == "present"
    # client-side apply would copy the dashboard into an annotation (256 KiB at most)
    assert "apply" not in k8s
    assert "gpufleet-grafana-dashboard-configmap.yaml.j2" in k8s["definition"]
    read = task["vars"]["monitoring__dashboard_json"]
    assert "'gpufleet-dra-dashboard.json', rstrip=false" in read  # the file's last newline too
    assert DEFAULTS[SWITCH] is False


def test_the_role_checks_its_values_before_the_configmap_task() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text(encoding="utf-8"))
    assert "config_value_problems" in str(tasks[0])
    assert tasks.index(_sidecar_task()) > 0
    for name in (NAMESPACE, LABEL, LABEL_VALUE, ANNOTATION):
        assert name in cv.CONFIG_VARIABLES
