"""ResourceClaimTemplate builders (``plugins/module_utils/claims/templates.py``), the filter
and ``gpufleet claims``; the shape checker's own tests are in ``test_check.py``."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.claims import (
    claim_api_version,
    claim_templates,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import api as capi
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import cel as ccel
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import check as cchk
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    metadata as claims_metadata,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import problems as cprob
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct
from click.testing import CliRunner

from gpufleet.cli import main
from tests.unit.claims.claim_objects import MEMORY_CEL, _base, _exact, devices, errors

pytestmark = pytest.mark.unit

# ---------------------------------------------------------------- builders


def test_mig_slice_v1() -> None:
    obj = ct.mig_slice("1g.18gb", namespace="ml", labels={"team": "a"})
    assert obj["apiVersion"] == capi.api_version_for(capi.default_kubernetes_version())
    assert obj["kind"] == "ResourceClaimTemplate"
    assert obj["metadata"] == {"name": "mig-1g-18gb", "namespace": "ml", "labels": {"team": "a"}}
    (req,) = devices(obj)["requests"]
    assert req["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert req["exactly"]["selectors"] == [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"}}
    ]
    assert cchk.check_claim_spec(obj) == []


def test_mig_slice_v1beta1_puts_the_class_on_the_request() -> None:
    obj = ct.mig_slice("1g.18gb", kubernetes_version="1.32.5")
    (req,) = devices(obj)["requests"]
    assert obj["apiVersion"] == "resource.k8s.io/v1beta1"
    assert "exactly" not in req
    assert req["deviceClassName"] == "mig.nvidia.com"
    assert cchk.check_claim_spec(obj) == []


def test_gpu_with_memory_cel() -> None:
    obj = ct.gpu_with_memory(40)
    assert devices(obj)["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"] == (
        MEMORY_CEL
    )
    assert obj["metadata"]["name"] == "gpu-40gi"
    assert ccel.cel_memory_at_least(40.5).endswith("quantity('41472Mi')) >= 0")


@pytest.mark.parametrize("bad", [0, -1, "forty", True, float("nan")])
def test_gpu_with_memory_refuses_bad_sizes(bad: object) -> None:
    with pytest.raises(claims_metadata.ClaimTemplateError, match="min_gib="):
        ct.gpu_with_memory(bad)  # type: ignore[arg-type]


def test_shared_gpu_time_slicing_config() -> None:
    obj = ct.shared_gpu("TimeSlicing", interval="Long")
    (config,) = devices(obj)["config"]
    assert config == {
        "requests": ["gpu"],
        "opaque": {
            "driver": "gpu.nvidia.com",
            "parameters": {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "GpuConfig",
                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
            },
        },
    }
    assert errors(obj) == []


def test_shared_gpu_mps_config() -> None:
    obj = ct.shared_gpu("MPS", mps_active_thread_percentage=50, mps_pinned_memory_limit="10Gi")
    sharing = devices(obj)["config"][0]["opaque"]["parameters"]["sharing"]
    assert sharing == {
        "strategy": "MPS",
        "mpsConfig": {
            "defaultActiveThreadPercentage": 50,
            "defaultPinnedDeviceMemoryLimit": "10Gi",
        },
    }
    warnings = [p for p in cchk.check_claim_spec(obj) if p.severity == cprob.WARNING]
    assert any("MPSSupport" in p.message for p in warnings)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"strategy": "Exclusive"}, "strategy='Exclusive'"),
        ({"strategy": "MPS", "interval": "Long"}, "interval='Long'"),
        ({"strategy": "TimeSlicing", "interval": "Fast"}, "interval='Fast'"),
        ({"strategy": "MPS", "mps_active_thread_percentage": 150}, "150"),
        ({"strategy": "TimeSlicing", "mps_active_thread_percentage": 50}, "MPS settings"),
    ],
)
def test_shared_gpu_refuses_bad_settings(kwargs: dict, named: str) -> None:
    with pytest.raises(claims_metadata.ClaimTemplateError, match=named.replace("(", r"\(")):
        ct.shared_gpu(**kwargs)


def test_gpu_pair_same_product() -> None:
    obj = ct.gpu_pair_same_product(count=4)
    (req,) = devices(obj)["requests"]
    assert req["exactly"]["count"] == 4
    assert devices(obj)["constraints"] == [
        {"requests": ["gpus"], "matchAttribute": "gpu.nvidia.com/productName"}
    ]
    with pytest.raises(claims_metadata.ClaimTemplateError, match="count=1"):
        ct.gpu_pair_same_product(count=1)


def test_builders_refuse_bad_names() -> None:
    with pytest.raises(claims_metadata.ClaimTemplateError, match="name='GPU_one'"):
        ct.mig_slice("1g.18gb", name="GPU_one")
    with pytest.raises(claims_metadata.ClaimTemplateError, match="profile='18gb'"):
        ct.mig_slice("18gb")


def test_build_refuses_unknown_keys_and_kinds() -> None:
    with pytest.raises(claims_metadata.ClaimTemplateError, match="profile is not"):
        ct.build("gpu-with-memory", {"min_memory_gib": 40, "profile": "1g.18gb"})
    with pytest.raises(claims_metadata.ClaimTemplateError, match="kind='gpu'"):
        ct.build("gpu", {})
    with pytest.raises(claims_metadata.ClaimTemplateError, match="needs profile"):
        ct.build("mig-slice", {})


@pytest.mark.parametrize("release", ["1.32.5", "1.33.13", "1.37.2"])
def test_every_builder_passes_the_checker(release: str) -> None:
    for obj in (
        ct.mig_slice("1g.18gb", kubernetes_version=release),
        ct.gpu_with_memory(80, kubernetes_version=release),
        ct.shared_gpu("TimeSlicing", kubernetes_version=release),
        ct.shared_gpu("MPS", kubernetes_version=release),
        ct.gpu_pair_same_product(kubernetes_version=release),
    ):
        assert errors(obj, release) == [], obj


# ---------------------------------------------------------------- filter


def test_filter_builds_items() -> None:
    objs = claim_templates(
        [
            {"kind": "mig-slice", "profile": "1g.18gb", "namespace": "ml"},
            {"kind": "gpu-pair-same-product", "count": 2, "name": "pair"},
        ],
        "1.33.13",
    )
    assert [o["apiVersion"] for o in objs] == ["resource.k8s.io/v1beta2"] * 2
    assert objs[1]["metadata"]["name"] == "pair"
    assert claim_api_version("1.33.13") == {
        "api_version": "resource.k8s.io/v1beta2",
        "runtime_config": "resource.k8s.io/v1beta2=true",
    }


def test_filter_names_the_bad_item() -> None:
    with pytest.raises(AnsibleFilterError, match=r"claim_templates_items\[1\].*profile='big'"):
        claim_templates(
            [
                {"kind": "gpu-with-memory", "min_memory_gib": 40},
                {"kind": "mig-slice", "profile": "big"},
            ],
            "1.37.2",
        )


# ---------------------------------------------------------------- CLI


def cli(*args: str, input: str | None = None):
    return CliRunner().invoke(main, ["claims", *args], input=input)


def test_cli_template_yaml_for_beta_release() -> None:
    result = cli("template", "mig-slice", "--profile", "1g.18gb", "--kubernetes-version", "1.33.13")
    assert result.exit_code == 0, result.output
    obj = yaml.safe_load(result.stdout)
    assert obj["apiVersion"] == "resource.k8s.io/v1beta2"
    assert "--runtime-config=resource.k8s.io/v1beta2=true" in result.stderr


def test_cli_template_json() -> None:
    result = cli("template", "gpu-with-memory", "--min-memory-gib", "40", "-o", "json")
    assert result.exit_code == 0, result.output
    obj = json.loads(result.stdout)
    assert _exact(obj)["selectors"][0]["cel"]["expression"] == MEMORY_CEL


def test_cli_template_refuses_options_of_another_kind() -> None:
    result = cli("template", "gpu-with-memory", "--profile", "1g.18gb")
    assert result.exit_code == 2
    assert "--profile does not apply to gpu-with-memory" in result.output


def test_cli_check_pass_fail_and_bad_input(tmp_path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump_all([ct.mig_slice("1g.18gb"), ct.gpu_with_memory(40)]))
    result = cli("check", str(good))
    assert result.exit_code == 0, result.output
    assert "2 object(s), 0 error(s)" in result.stdout

    obj = _base()
    _exact(obj).pop("selectors")
    _exact(obj)["attributes"] = {"memoryGB": ">=40"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(obj))
    result = cli("check", str(bad), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["errors"] == 1
    assert MEMORY_CEL in report["objects"][0]["problems"][0]["message"]

    result = cli("check", "-", input=yaml.safe_dump(obj))
    assert result.exit_code == 1

    assert cli("check", str(tmp_path / "absent.yaml")).exit_code == 2
    notyaml = tmp_path / "x.yaml"
    notyaml.write_text("a: [1,\n")
    assert cli("check", str(notyaml)).exit_code == 2
    other = tmp_path / "pod.yaml"
    other.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    assert cli("check", str(other)).exit_code == 2


def test_cli_check_strict_fails_on_warnings(tmp_path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(ct.shared_gpu("MPS")))
    assert cli("check", str(path)).exit_code == 0
    assert cli("check", str(path), "--strict").exit_code == 1
