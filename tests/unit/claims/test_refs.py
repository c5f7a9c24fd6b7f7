"""A Pod's resource claims against the templates and claims of the same file
(``claims.refs``), and ``gpufleet claims check`` on such a file."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import problems as cprob
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import refs as crefs
from click.testing import CliRunner

from gpufleet.cli import main

pytestmark = pytest.mark.unit

TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "ml"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        }
    },
}
CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "shared", "namespace": "ml"},
    "spec": TEMPLATE["spec"]["spec"],
}


def pod(claims: list, container_claims: list, namespace: str | None = "ml") -> dict:
    meta = {"name": "trainer", **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "resourceClaims": claims,
            "containers": [
                {"name": "main", "image": "x", "resources": {"claims": container_claims}}
            ],
        },
    }


def by_path(problems: list[cprob.Problem]) -> dict[str, cprob.Problem]:
    return {p.path: p for p in problems}


def test_references_the_file_holds_pass() -> None:
    p = pod(
        [
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            {"name": "peer", "resourceClaimName": "shared"},
        ],
        [{"name": "gpu"}, {"name": "peer"}],
    )
    assert crefs.check_pod_claims(p, [TEMPLATE, CLAIM, p]) == []


def test_a_template_the_file_lacks_is_a_warning_naming_pod_template_and_fix() -> None:
    p = pod([{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}], [{"name": "gpu"}])
    (problem,) = crefs.check_pod_claims(p, [TEMPLATE, p])
    assert problem.severity == cprob.WARNING
    assert problem.path == "spec.resourceClaims[0].resourceClaimTemplateName"
    assert "Pod ml/trainer" in problem.message
    assert "ResourceClaimTemplate 'two-gpus'" in problem.message
    assert "gpufleet claims template KIND --name two-gpus --namespace ml" in problem.message
    assert "KIND one of mig-slice, mig-with-memory, gpu-with-memory" in problem.message


def test_a_claim_the_file_lacks_is_a_warning() -> None:
    p = pod([{"name": "peer", "resourceClaimName": "elsewhere"}], [{"name": "peer"}])
    (problem,) = crefs.check_pod_claims(p, [p])
    assert problem.severity == cprob.WARNING
    assert "ResourceClaim 'elsewhere'" in problem.message
    assert "a ResourceClaim named elsewhere" in problem.message


def test_a_container_claim_missing_from_the_pod_is_an_error_listing_the_names() -> None:
    p = pod([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpus"}])
    (problem,) = crefs.check_pod_claims(p, [TEMPLATE, p])
    assert problem.severity == cprob.ERROR
    assert problem.path == "spec.containers[0].resources.claims[0].name"
    assert "container main of Pod ml/trainer uses claim 'gpus'" in problem.message
    assert "pod.spec.resourceClaims (gpu)" in problem.message
    assert "fix: name one of gpu" in problem.message


def test_a_container_claim_with_no_pod_claims_at_all_is_an_error() -> None:
    p = pod([], [{"name": "gpu"}])
    (problem,) = crefs.check_pod_claims(p, [p])
    assert problem.severity == cprob.ERROR
    assert "which is empty" in problem.message
    assert "add {name: gpu, resourceClaimTemplateName: <template>}" in problem.message


def test_entries_the_api_server_refuses() -> None:
    p = pod(
        [
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu", "resourceClaimName": "shared"},
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            {"name": "none"},
            {"resourceClaimName": "shared"},
        ],
        [{"name": "gpu"}, {"name": "gpu"}, {}],
    )
    problems = by_path(crefs.check_pod_claims(p, [TEMPLATE, CLAIM, p]))
    assert set(problems) == {
        "spec.resourceClaims[0]",
        "spec.resourceClaims[1].name",
        "spec.resourceClaims[2]",
        "spec.resourceClaims[3].name",
        "spec.containers[0].resources.claims[1]",
        "spec.containers[0].resources.claims[2].name",
    }
    assert all(p.severity == cprob.ERROR for p in problems.values())
    assert "both" in problems["spec.resourceClaims[0]"].message
    assert "neither" in problems["spec.resourceClaims[2]"].message
    assert "twice" in problems["spec.resourceClaims[1].name"].message


def test_a_template_named_as_a_claim_and_another_namespace_are_warnings() -> None:
    p = pod([{"name": "gpu", "resourceClaimName": "one-gpu"}], [{"name": "gpu"}])
    (kind_mixup,) = crefs.check_pod_claims(p, [TEMPLATE, p])
    assert kind_mixup.severity == cprob.WARNING
    assert "fix: write resourceClaimTemplateName: one-gpu" in kind_mixup.message
    q = pod(
        [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        [{"name": "gpu"}],
        namespace="default",
    )
    (elsewhere,) = crefs.check_pod_claims(q, [TEMPLATE, q])
    assert "only in ml" in elsewhere.message and "namespace default" in elsewhere.message
    # no namespace written: it lands where the file is applied, like the template
    r = pod([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpu"}], None)
    assert crefs.check_pod_claims(r, [TEMPLATE, r]) == []


def test_workload_pod_templates_and_init_containers_are_checked() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "ml"},
        "spec": {
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "resourceClaims": [
                                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}
                            ],
                            "initContainers": [
                                {"name": "warm", "resources": {"claims": [{"name": "gpu0"}]}}
                            ],
                            "containers": [{"name": "main"}],
                        }
                    }
                }
            }
        },
    }
    assert crefs.uses_claims(job)
    (problem,) = crefs.check_pod_claims(job, [TEMPLATE, job])
    assert problem.path == (
        "spec.jobTemplate.spec.template.spec.initContainers[0].resources.claims[0].name"
    )
    assert "container warm of CronJob ml/nightly" in problem.message
    assert not crefs.uses_claims({"kind": "Pod", "spec": {"containers": [{"name": "c"}]}})
    assert not crefs.uses_claims({"kind": "ConfigMap", "data": {}})


def test_cli_checks_pods_against_the_templates_of_the_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    good = pod([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpu"}])
    missing = pod([{"name": "gpu", "resourceClaimTemplateName": "absent"}], [{"name": "gpu"}])
    missing["metadata"]["name"] = "waiter"
    broken = pod([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpu1"}])
    broken["metadata"]["name"] = "broken"
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {}}
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump_all([TEMPLATE, good, missing, broken, plain]))
    result = CliRunner().invoke(main, ["claims", "check", str(path), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    pods = {o["name"]: o["problems"] for o in report["objects"] if o["kind"] == "Pod"}
    assert pods["trainer"] == []
    assert [p["severity"] for p in pods["waiter"]] == ["warning"]
    assert [p["severity"] for p in pods["broken"]] == ["error"]
    assert report["notChecked"] == ["Pod -/web"]
    assert (report["errors"], report["warnings"]) == (1, 1)
    # without the broken pod only the warning is left: a pass, a failure with --strict
    path.write_text(yaml.safe_dump_all([TEMPLATE, good, missing]))
    text = CliRunner().invoke(main, ["claims", "check", str(path)])
    assert text.exit_code == 0, text.output
    assert "warning Pod ml/waiter: spec.resourceClaims[0].resourceClaimTemplateName:" in (
        text.output
    )
    assert CliRunner().invoke(main, ["claims", "check", str(path), "--strict"]).exit_code == 1


def test_cli_a_file_of_pods_using_claims_is_checked(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    lone = pod([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpu"}])
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(lone))
    result = CliRunner().invoke(main, ["claims", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "which this file does not hold" in result.output


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("containers", "main", "spec.containers"),
        ("containers", {"name": "main"}, "spec.containers"),
        ("initContainers", 3, "spec.initContainers"),
        ("containers", [None], "spec.containers[0]"),
        ("containers", ["main"], "spec.containers[0]"),
        ("containers", [{"name": "m", "resources": {"claims": "gpu"}}], None),
    ],
    ids=["a-string", "a-mapping", "init-a-number", "item-null", "item-a-string", "claims-str"],
)
def test_containers_of_another_shape_are_errors_naming_the_field(
    field: str, value: object, path: str | None
) -> None:
    p = pod([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpu"}])
    p["spec"][field] = value
    path = path or "spec.containers[0].resources.claims"
    problems = by_path(crefs.check_pod_claims(p, [TEMPLATE, p]))
    assert path in problems, problems
    assert problems[path].severity == cprob.ERROR
    assert "not a" in problems[path].message and "write" in problems[path].message


def test_claims_check_fails_a_pod_whose_containers_are_not_a_list(tmp_path) -> None:
    p = pod([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpu"}])
    p["spec"]["containers"] = "main"
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump_all([TEMPLATE, p]))
    result = CliRunner().invoke(main, ["claims", "check", str(path)], env={"COLUMNS": "2000"})
    assert result.exit_code == 1, result.output
    assert "spec.containers" in result.output and "Traceback" not in result.output
