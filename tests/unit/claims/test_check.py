"""The shape checker of ResourceClaims and ResourceClaimTemplates: requests, selectors and their
CEL, constraints and config (``plugins/module_utils/claims/check.py``).
"""

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import check as cchk
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import problems as cprob
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct

from tests.unit.claims.claim_objects import MEMORY_CEL, _base, _exact, devices, errors

pytestmark = pytest.mark.unit


def test_attributes_map_is_refused_with_the_cel() -> None:
    obj = _base()
    _exact(obj).pop("selectors")
    _exact(obj)["attributes"] = {"memoryGB": ">=40"}
    (problem,) = errors(obj)
    assert problem.path == "spec.spec.devices.requests[0].exactly.attributes"
    assert f'use selectors: [{{cel: {{expression: "{MEMORY_CEL}"}}}}]' in problem.message


def test_attributes_map_with_product_name_gives_attribute_cel() -> None:
    obj = _base()
    _exact(obj)["attributes"] = {"productName": "NVIDIA H200", "memory": "80Gi"}
    (problem,) = errors(obj)
    assert (
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
    ) in problem.message


@pytest.mark.parametrize("key", ["matchExpression", "matchExpressions"])
def test_match_expression_constraint_is_refused(key: str) -> None:
    obj = ct.gpu_pair_same_product()
    devices(obj)["constraints"] = [
        {"requests": ["gpus"], key: [{"key": "productName", "operator": "In", "values": ["A"]}]}
    ]
    problems = errors(obj)
    messages = " ".join(p.message for p in problems)
    assert any(p.path.endswith(key) for p in problems)
    assert "matchAttribute: gpu.nvidia.com/productName" in messages
    assert "device.attributes['gpu.nvidia.com'].productName == 'A'" in messages


def test_match_attribute_must_be_qualified() -> None:
    obj = ct.gpu_pair_same_product()
    devices(obj)["constraints"][0]["matchAttribute"] = "productName"
    (problem,) = errors(obj)
    assert "write matchAttribute: gpu.nvidia.com/productName" in problem.message


def test_device_class_on_a_v1_request_is_refused() -> None:
    obj = _base()
    req = devices(obj)["requests"][0]
    req.update(req.pop("exactly"))
    problems = errors(obj)
    assert len(problems) == 1
    assert "wrong level for resource.k8s.io/v1" in problems[0].message
    assert "exactly: {deviceClassName: gpu.nvidia.com" in problems[0].message


def test_exactly_on_a_v1beta1_request_is_refused() -> None:
    obj = _base()
    obj["apiVersion"] = "resource.k8s.io/v1beta1"
    problems = errors(obj)
    assert any("v1beta1 has no exactly" in p.message for p in problems)


@pytest.mark.parametrize(
    "selectors",
    [
        [{"matchLabels": {"gpu.nvidia.com/memory": "40Gi"}}],
        [{"expression": MEMORY_CEL}],
        [MEMORY_CEL],
        MEMORY_CEL,
        [{"cel": MEMORY_CEL}],
        {"memory": ">=40"},
    ],
)
def test_selector_that_is_not_cel_is_refused_with_the_cel(selectors: object) -> None:
    obj = _base()
    _exact(obj)["selectors"] = selectors
    problems = errors(obj)
    assert len(problems) == 1, problems
    assert MEMORY_CEL in problems[0].message


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(", "does not parse"),
        ("memoryGB >= 40", "undeclared variable 'memoryGB'"),
        ("device.memory > 3", "`device` has no field 'memory'"),
        (
            "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')",
            "compareTo(quantity('40Gi')) >= 0",
        ),
        (
            "40 < device.capacity['gpu.nvidia.com'].memory",
            "compareTo(quantity('40Gi')) > 0",
        ),
    ],
)
def test_cel_that_kubernetes_refuses_is_an_error(expression: str, expected: str) -> None:
    obj = _base()
    _exact(obj)["selectors"] = [{"cel": {"expression": expression}}]
    problems = errors(obj)
    assert problems, expression
    assert expected in problems[0].message
    assert problems[0].path.endswith("selectors[0].cel.expression")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("device.attributes['gpu.nvidia.com'].index == 0", "no longer published"),
        ("device.attributes['gpu.nvidia.com'].memory == 1", "is a capacity"),
        ("device.attributes['gpu.nvidia.com'].model == 'x'", "publishes no attribute 'model'"),
    ],
)
def test_cel_that_never_matches_is_a_warning(expression: str, expected: str) -> None:
    problems = cchk.check_claim_spec(_with_selector(expression))
    assert [p.severity for p in problems] == [cprob.WARNING]
    assert expected in problems[0].message


def test_a_domain_lookup_without_its_index_is_refused_with_the_fix() -> None:
    # Kubernetes 1.36.3 and 1.37.2: "found no matching overload for '_==_' applied to
    # '(map(string, any), string)'" (tests/data/cel_verdicts.json)
    problems = cchk.check_claim_spec(_with_selector("device.attributes.productName == 'x'"))
    assert [p.severity for p in problems] == [cprob.ERROR, cprob.WARNING]
    assert "Kubernetes refuses" in problems[0].message
    assert "grouped by domain" in problems[1].message


@pytest.mark.parametrize(
    "expression",
    [
        MEMORY_CEL,
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h200.*$')",
        "device.capacity['gpu.nvidia.com'].multiprocessors.isGreaterThan(quantity('10'))",
        "device.attributes['gpu.nvidia.com'].exists(k, k == 'profile')",
        "device.driver == 'gpu.nvidia.com' && has(device.attributes['gpu.nvidia.com'].profile)",
        "device.attributes['resource.kubernetes.io'].pciBusID == '0000:3b:00.0'",
    ],
)
def test_valid_cel_passes(expression: str) -> None:
    assert cchk.check_claim_spec(_with_selector(expression)) == []


def _with_selector(expression: str) -> dict:
    obj = _base()
    _exact(obj)["selectors"] = [{"cel": {"expression": expression}}]
    return obj


def test_device_plugin_resource_name_is_not_a_class() -> None:
    obj = _base()
    _exact(obj)["deviceClassName"] = "nvidia.com/gpu"
    (problem,) = errors(obj)
    assert "extended resource name" in problem.message


def test_config_checks_gpu_config_fields() -> None:
    obj = ct.shared_gpu("TimeSlicing")
    params = devices(obj)["config"][0]["opaque"]["parameters"]
    params["sharing"]["strategy"] = "Exclusive"
    params["replicas"] = 4
    messages = [p.message for p in errors(obj)]
    assert any("'Exclusive' is not one of TimeSlicing, MPS" in m for m in messages)
    assert any("unknown field 'replicas' in GpuConfig" in m for m in messages)


def test_config_request_names_must_exist() -> None:
    obj = ct.shared_gpu("TimeSlicing")
    devices(obj)["config"][0]["requests"] = ["gpu0"]
    (problem,) = errors(obj)
    assert "request 'gpu0' is not a request of this claim" in problem.message


def test_version_not_served_is_an_error() -> None:
    obj = ct.mig_slice("1g.18gb", api_version="resource.k8s.io/v1")
    (problem,) = errors(obj, "1.33.13")
    assert "use resource.k8s.io/v1beta2" in problem.message
    beta = ct.mig_slice("1g.18gb", kubernetes_version="1.33.13")
    (warning,) = cchk.check_claim_spec(beta, "1.33.13")
    assert "--runtime-config=resource.k8s.io/v1beta2=true" in warning.message


def test_template_without_the_inner_spec_is_refused() -> None:
    obj = _base()
    obj["spec"] = obj["spec"]["spec"]
    (problem,) = errors(obj)
    assert "spec: {spec: {devices: ...}}" in problem.message


def test_resource_claim_is_checked_too() -> None:
    obj = _base()
    claim = {
        "apiVersion": obj["apiVersion"],
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": copy.deepcopy(obj["spec"]["spec"]),
    }
    assert cchk.check_claim_spec(claim) == []
    claim["spec"]["devices"]["requests"][0]["exactly"]["attributes"] = {"memoryGB": ">=40"}
    assert errors(claim)
