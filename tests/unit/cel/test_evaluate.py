"""Kubernetes' DRA CEL environment on cel-python: quantities, semantic versions, string
extensions, the ``device`` variable, and the reasons given for a selector that fails."""

from __future__ import annotations

import itertools

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import evaluate as vc

from tests.unit.validate_objects import gpu_device, mig_device

pytestmark = pytest.mark.unit

GPU_UUID = "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90"


@pytest.fixture(scope="module")
def gpu() -> dict:
    return vc.device_activation("gpu.nvidia.com", gpu_device(0, GPU_UUID))


@pytest.fixture(scope="module")
def mig() -> dict:
    return vc.device_activation("gpu.nvidia.com", mig_device(0, GPU_UUID, "MIG-aaaa", "1g.18gb"))


def run(expr: str, act: dict) -> vc.SelectorResult:
    return vc.Selector(expr).evaluate(act)


def test_semver_precedence_follows_semver_2() -> None:
    order = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-beta",
        "1.0.0-rc.1",
        "1.0.0",
        "1.2.0",
        "580.159.4",
    ]
    parsed = [vc.Semver(x) for x in order]
    for lower, higher in itertools.pairwise(parsed):
        assert lower.compare(higher) == -1
        assert higher.compare(lower) == 1
    assert vc.Semver("1.0.0+build") == vc.Semver("1.0.0")
    with pytest.raises(vc.CelError):
        vc.Semver("580.159.04")  # leading zero: not a semantic version
    assert str(vc.Semver("v580.159.04", normalize=True)) == "580.159.4"


@pytest.mark.parametrize(
    "expr",
    [
        "device.driver == 'gpu.nvidia.com'",
        "device.attributes['gpu.nvidia.com'].type == 'gpu'",
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('140Gi')) >= 0",
        "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('100Gi'))",
        "device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('141Gi'))",
        "device.capacity['gpu.nvidia.com'].memory == quantity('143771Mi')",
        "device.capacity['gpu.nvidia.com'].memory.add(quantity('1Mi')).isGreaterThan(quantity('143771Mi'))",
        "device.capacity['gpu.nvidia.com'].memory.asInteger() == 150754820096",
        "isQuantity('10Gi') && !isQuantity('10GB')",
        "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('570.0.0'))",
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.159.4')) == 0",
        "device.attributes['gpu.nvidia.com'].driverVersion.major() == 580",
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isLessThan(semver('10.0.0'))",
        "device.attributes['gpu.nvidia.com'].driverVersion == semver('580.159.4')",
        "semver('v9', true) == semver('9.0.0') && isSemver('1.2.3') && !isSemver('1.2')",
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii() == 'nvidia h200'",
        "device.attributes['gpu.nvidia.com'].productName.upperAscii().matches('^NVIDIA H[12]00$')",
        "device.attributes['gpu.nvidia.com'].productName.matches('H200')",
        "'H200' in device.attributes['gpu.nvidia.com'].productName.split(' ')",
        "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-')",
        "device.attributes['gpu.nvidia.com'].productName.indexOf('H') == 7",
        "device.attributes['gpu.nvidia.com'].productName.substring(0, 6) == 'NVIDIA'",
        "device.attributes['resource.kubernetes.io'].pciBusID == '0000:19:00.0'",
        "device.attributes['other.example.com'].size() == 0",
        "!device.allowMultipleAllocations",
        "device.attributes['gpu.nvidia.com'].exists(k, k == 'uuid')",
    ],
)
def test_expressions_kubernetes_accepts_match_an_h200(expr: str, gpu: dict) -> None:
    result = run(expr, gpu)
    assert result.matched, result


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        (
            "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
            "profile is 1g.18gb, wanted 1g.10gb",
        ),
        (
            "device.driver == 'gpu.nvidia.com' && "
            "device.attributes['gpu.nvidia.com'].type == 'gpu'",
            "type is mig, wanted gpu",
        ),
        (
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
            "memory is 16Gi, wanted >= 40Gi",
        ),
        (
            "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('20Gi'))",
            "memory is 16Gi, wanted > 20Gi",
        ),
        (
            "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('590.0.0'))",
            "driverVersion is 580.159.4, wanted > 590.0.0",
        ),
        (
            "'1g.10gb' == device.attributes['gpu.nvidia.com'].profile",
            "profile is 1g.18gb, wanted 1g.10gb",
        ),
        (
            "device.attributes['gpu.nvidia.com'].profile != '1g.18gb'",
            "profile is 1g.18gb, wanted anything but 1g.18gb",
        ),
        (
            "device.attributes['gpu.nvidia.com'].productName.matches('H100')",
            "productName is NVIDIA H200, wanted to match H100",
        ),
        (
            "device.attributes['gpu.nvidia.com'].profile in ['2g.35gb', '3g.71gb']",
            "profile is 1g.18gb, wanted one of [2g.35gb, 3g.71gb]",
        ),
    ],
)
def test_a_failing_selector_names_the_term_and_the_device_value(
    expr: str, reason: str, mig: dict
) -> None:
    result = run(expr, mig)
    assert not result.matched
    assert result.error is None
    assert result.reason == reason


def test_missing_attribute_is_a_runtime_error_not_a_mismatch(gpu: dict) -> None:
    # compile.go: the inner map has no default, "no such key" aborts the allocation
    result = run("device.attributes['gpu.nvidia.com'].profile == '1g.18gb'", gpu)
    assert not result.matched
    assert result.error == "no such key: profile"


def test_unparseable_expression_raises_naming_it() -> None:
    with pytest.raises(vc.CelError, match="does not parse"):
        vc.Selector("device.attributes[ == ")


@pytest.mark.parametrize(
    "expr",
    [
        "device.capacity['gpu.nvidia.com'].memory >= quantity('1Gi')",
        "device.attributes['gpu.nvidia.com'].driverVersion > semver('1.0.0')",
    ],
)
def test_quantity_and_semver_have_no_ordering_operator_like_kubernetes(
    expr: str, gpu: dict
) -> None:
    # quantity.go / semverlib.go offer compareTo, isGreaterThan, isLessThan only
    result = run(expr, gpu)
    assert not result.matched
    assert result.error is not None
