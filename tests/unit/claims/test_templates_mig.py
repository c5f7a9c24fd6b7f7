"""MIG templates against the devices the lab's GPU simulator publishes: ``mig_slice`` (one
selector for static MIG and DynamicMIG devices alike) and ``mig_with_memory`` (smallest
fitting MIG size first), each selector run by the CEL evaluator (``cel.evaluate``) on the
plugin's own ResourceSlices (``tests/unit/dynamic_mig_slices.py``)."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import evaluate as ev
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import metadata as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct
from click.testing import CliRunner

from gpufleet.cli import main
from tests.unit import dynamic_mig_slices as dms
from tests.unit.claims.claim_objects import devices, errors

pytestmark = pytest.mark.unit

#: The selector of DeviceClass mig.nvidia.com (the driver's templates/deviceclass-mig.yaml,
#: as lab/gpu-simulator/chart/templates/deviceclass-mig.yaml renders it).
MIG_CLASS_CEL = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
)


def _dynamic(node: str) -> list[dict]:
    return [d for s in dms.slices(node) for d in s["spec"].get("devices") or []]


def _static(node: str) -> list[dict]:
    """The static-MIG shape of ``node``: the full GPU and the MIG devices of GPU instances
    made beforehand (one per profile here), no counters: what the plugin publishes without
    ``--dynamic-mig`` (``internal/devices/devices.go``: same ``profile``, same ``memory``)."""
    out, seen = [], set()
    for dev in _dynamic(node):
        profile = dev["attributes"].get("profile", {}).get("string")
        if profile in seen:
            continue
        seen.add(profile)
        static = copy.deepcopy(dev)
        static.pop("consumesCounters", None)
        out.append(static)
    return out


def _matches(subrequest: dict, devs: list[dict]) -> list[str]:
    """Names of ``devs`` that the MIG class and every selector of ``subrequest`` match."""
    body = subrequest.get("exactly", subrequest)
    assert body["deviceClassName"] == "mig.nvidia.com"
    exprs = [MIG_CLASS_CEL, *(s["cel"]["expression"] for s in body.get("selectors") or [])]
    selectors = [ev.Selector(e) for e in exprs]
    out = []
    for dev in devs:
        act = ev.device_activation("gpu.nvidia.com", dev)
        for selector in selectors:  # the class's first, each only while the others matched
            result = selector.evaluate(act)  # (kube-scheduler's allocator, isSelectable)
            assert result.error is None, (dev["name"], result.error)
            if not result.matched:
                break
        else:
            out.append(dev["name"])
    return out


def _profiles(names: list[str], devs: list[dict]) -> set[str]:
    by_name = {d["name"]: d for d in devs}
    return {by_name[n]["attributes"]["profile"]["string"] for n in names}


@pytest.mark.parametrize("shape", [_dynamic, _static], ids=["dynamic-mig", "static-mig"])
@pytest.mark.parametrize(
    ("node", "profile"),
    [(dms.H200_NODE, "1g.18gb"), (dms.H200_NODE, "3g.71gb"), (dms.B200_NODE, "1g.23gb+me")],
)
def test_mig_slice_selects_the_profile_on_both_shapes(shape, node: str, profile: str) -> None:
    devs = shape(node)
    request = devices(ct.mig_slice(profile))["requests"][0]
    matched = _matches(request, devs)
    assert matched
    assert _profiles(matched, devs) == {profile}
    assert matched == [
        d["name"] for d in devs if d["attributes"].get("profile", {}).get("string") == profile
    ]


def test_dynamic_mig_slice_takes_every_placement_of_the_profile() -> None:
    request = devices(ct.mig_slice("1g.35gb"))["requests"][0]
    assert _matches(request, _dynamic(dms.H200_NODE)) == [
        "gpu-0-mig-1g35gb-15-0",
        "gpu-0-mig-1g35gb-15-2",
        "gpu-0-mig-1g35gb-15-4",
        "gpu-0-mig-1g35gb-15-6",
    ]


H200_20GI = {"1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}
B200_20GI = {"1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"}


@pytest.mark.parametrize("shape", [_dynamic, _static], ids=["dynamic-mig", "static-mig"])
@pytest.mark.parametrize(
    ("node", "fitting", "smallest"),
    [
        (dms.H200_NODE, H200_20GI, {"1g.35gb", "2g.35gb"}),
        (dms.B200_NODE, B200_20GI, {"1g.23gb", "1g.23gb+me"}),
    ],
)
def test_min_memory_takes_every_fitting_device_smallest_first(
    shape, node: str, fitting: set[str], smallest: set[str]
) -> None:
    devs = shape(node)
    fleet = ["NVIDIA H200", "NVIDIA B200"]
    subs = devices(ct.mig_with_memory("20Gi", gpu_model=fleet))["requests"][0]["firstAvailable"]
    assert [s["name"] for s in subs] == [
        "up-to-22gi",
        "up-to-33280mi",
        "up-to-45312mi",
        "up-to-71424mi",
        "up-to-85824mi",
        "up-to-140gi",
        "up-to-171648mi",
        "any-size",
    ]
    matched = [_matches(sub, devs) for sub in subs]
    union = {n for m in matched for n in m}
    assert _profiles(sorted(union), devs) == fitting
    assert set(matched[-1]) == union  # any-size: the whole answer
    first = next(m for m in matched if m)
    assert _profiles(first, devs) == smallest


def test_min_memory_boundaries_are_inclusive() -> None:
    devs = _dynamic(dms.H200_NODE)
    subs = devices(ct.mig_with_memory("33280Mi", gpu_model="NVIDIA H200"))["requests"][0]
    names = [s["name"] for s in subs["firstAvailable"]]
    assert names == ["up-to-33280mi", "up-to-71424mi", "up-to-140gi", "any-size"]
    assert _profiles(_matches(subs["firstAvailable"][0], devs), devs) == {"1g.35gb", "2g.35gb"}
    small = devices(ct.mig_with_memory("16Gi", gpu_model="NVIDIA H200"))["requests"][0]
    assert _profiles(_matches(small["firstAvailable"][0], devs), devs) == {
        "1g.18gb",
        "1g.18gb+me",
    }


def test_min_memory_above_every_mig_device_matches_none() -> None:
    devs = _dynamic(dms.H200_NODE)
    subs = devices(ct.mig_with_memory("141Gi"))["requests"][0]["firstAvailable"]
    assert all(_matches(s, devs) == [] for s in subs)


def test_min_memory_subrequests_stay_within_the_api_limit() -> None:
    subs = devices(ct.mig_with_memory("1Mi"))["requests"][0]["firstAvailable"]
    assert len(subs) == ct.FIRST_AVAILABLE_MAX
    assert subs[-1]["name"] == "any-size"
    assert [s["count"] for s in subs] == [1] * ct.FIRST_AVAILABLE_MAX


def test_bands_keep_each_models_smallest_fitting_size_first() -> None:
    # H200 alone: all its sizes from 20 GiB up; with B200 its smallest fitting size (22 GiB)
    # comes in; with every model, each model's smallest fitting size before any second one.
    assert ct.mig_memory_bands(20 * 1024, "NVIDIA H200") == [33280, 71424, 143360]
    assert ct.mig_memory_bands(20 * 1024, ["NVIDIA H200", "NVIDIA B200"])[:2] == [22528, 33280]
    every = ct.mig_memory_bands(20 * 1024)
    assert len(every) == ct.FIRST_AVAILABLE_MAX - 1
    assert every == [22016, 22528, 22912, 23680, 24064, 30528, 32448]


def test_without_preference_one_request_takes_any_fitting_device() -> None:
    obj = ct.mig_with_memory("20Gi", prefer_smallest=False, kubernetes_version="1.33")
    assert obj["apiVersion"] == "resource.k8s.io/v1beta2"
    request = devices(obj)["requests"][0]
    assert "firstAvailable" not in request
    devs = _dynamic(dms.H200_NODE)
    assert _profiles(_matches(request, devs), devs) == H200_20GI


@pytest.mark.parametrize("release", ["1.34", "1.35", "1.36", "1.37", "1.38"])
def test_min_memory_template_passes_the_checker(release: str) -> None:
    obj = ct.mig_with_memory("20Gi", count=2, kubernetes_version=release)
    assert devices(obj)["requests"][0]["firstAvailable"][0]["count"] == 2
    assert errors(obj, release) == []


@pytest.mark.parametrize(
    ("release", "state"),
    [("1.33", "alpha, off by default"), ("1.32", "not known to 1.32")],
)
def test_min_memory_refused_where_prioritized_list_is_off(release: str, state: str) -> None:
    with pytest.raises(cm.ClaimTemplateError) as err:
        ct.mig_with_memory("20Gi", kubernetes_version=release)
    assert "DRAPrioritizedList" in err.value.reason
    assert state in err.value.reason
    assert "on by default from 1.34" in err.value.reason


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--min-memory", "0"], "--min-memory='0' is not more than 0"),
        (["--min-memory", "-5Gi"], "--min-memory='-5Gi' is not more than 0"),
        (["--min-memory", "lots"], "--min-memory='lots' is not a Kubernetes quantity"),
        (["--min-memory", "300Gi"], "--min-memory='300Gi' is more than any GPU has"),
        (
            ["--min-memory", "20Gi", "--gpu-model", "NVIDIA Z9"],
            "--gpu-model='NVIDIA Z9' is not a GPU model with a MIG table here",
        ),
        (
            ["--min-memory", "20Gi", "--kubernetes-version", "1.33"],
            "feature gate DRAPrioritizedList (firstAvailable subrequests) is alpha",
        ),
    ],
)
def test_cli_min_memory_bad_input_exits_2(args: list[str], words: str) -> None:
    result = CliRunner().invoke(main, ["claims", "template", "mig-with-memory", *args])
    assert result.exit_code == 2, result.output
    assert words in result.output
    assert "Fix:" in result.output


def test_cli_profile_unknown_for_the_model_exits_2() -> None:
    args = ["claims", "template", "mig-slice", "--profile", "1g.23gb", "--gpu-model", "H200"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "--profile='1g.23gb' is not a MIG profile of --gpu-model='NVIDIA H200'" in (
        result.output
    )
    assert "give one of 1g.18gb, 1g.18gb+me, 1g.35gb" in result.output


def test_cli_min_memory_writes_the_subrequests() -> None:
    args = ["claims", "template", "mig-with-memory", "--min-memory", "20Gi"]
    args += ["--gpu-model", "NVIDIA B200", "--count", "2", "-o", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert '"name": "mig-20gi"' in result.output
    assert '"name": "up-to-22gi"' in result.output
    assert '"count": 2' in result.output


def test_build_takes_the_role_item_form() -> None:
    item = {"min_memory": "20Gi", "gpu_model": ["NVIDIA H200"], "count": 1}
    obj = ct.build("mig-with-memory", item, kubernetes_version="1.37")
    subs = devices(obj)["requests"][0]["firstAvailable"]
    assert [s["name"] for s in subs] == [
        "up-to-33280mi",
        "up-to-71424mi",
        "up-to-140gi",
        "any-size",
    ]
    with pytest.raises(cm.ClaimTemplateError, match="prefer_smallest='no' is not a boolean"):
        ct.build("mig-with-memory", {"min_memory": "20Gi", "prefer_smallest": "no"})
    with pytest.raises(cm.ClaimTemplateError, match="needs min_memory=<quantity>"):
        ct.build("mig-with-memory", {})
