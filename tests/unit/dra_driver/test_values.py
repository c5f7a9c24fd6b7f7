"""Helm values and refusals of the NVIDIA DRA driver
(``plugins/module_utils/dra_driver/values.py``).

Expected values come from the NVIDIA DRA driver's docs and chart (docs/install.md,
docs/upgrade.md, docs/prerequisites.md, values.yaml, pkg/featuregates/featuregates.go) and
from the field cases kubernetes-sigs/dra-driver-nvidia-gpu#438/#338 (no GPU DeviceClass when
resources.gpus.enabled is false), #1084 (kubelet plugin scheduled nowhere, 0 == 0 passes).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

from tests.unit.dra_driver.driver_inputs import GPU_LABEL, inputs

pytestmark = pytest.mark.unit


def refused(**over: Any) -> ddc.DraDriverError:
    with pytest.raises(ddc.DraDriverError) as info:
        ddv.plan(inputs(**over))
    return info.value


# ----------------------------------------------------------------------------- chart choice


def test_local_path_without_chart_yaml_is_refused() -> None:
    err = refused(chart_path="/nowhere", local_chart={})
    assert err.variable == "dra_driver_chart_path" and "Chart.yaml" in err.reason


# ----------------------------------------------------------------------------- values


def test_host_driver_values() -> None:
    values = ddv.plan(inputs()).values
    assert values == {
        "nvidiaDriverRoot": "/",
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "kubeletPlugin": {
            "nodeSelector": GPU_LABEL,
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
    }


def test_gpu_operator_driver_root() -> None:
    assert ddv.plan(inputs(gpu_operator=True)).values["nvidiaDriverRoot"] == "/run/nvidia/driver"


def test_gpu_operator_with_host_root_is_refused() -> None:
    err = refused(gpu_operator=True, nvidia_driver_root="/")
    assert err.variable == "dra_driver_nvidia_driver_root"


def test_explicit_driver_root() -> None:
    plan = ddv.plan(inputs(nvidia_driver_root="/home/kubernetes/bin/nvidia"))
    assert plan.values["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"


def test_compute_domains_as_asked_add_their_device_classes() -> None:
    plan = ddv.plan(inputs(compute_domains=True))
    assert plan.values["resources"]["computeDomains"] == {"enabled": True}
    assert "compute-domain-daemon.nvidia.com" in plan.device_classes
    assert ddv.plan(inputs()).device_classes == (
        "gpu.nvidia.com",
        "mig.nvidia.com",
        "vfio.gpu.nvidia.com",
    )


@pytest.mark.parametrize(
    ("chart", "vfio"), [("25.8.1", False), ("25.12.0", False), ("0.4.0", True), ("0.5.0", True)]
)
def test_the_passthrough_device_class_is_required_from_the_release_that_renders_it(
    chart: str, vfio: bool
) -> None:
    classes = ddv.plan(inputs(chart_version=chart)).device_classes
    assert classes[:2] == ("gpu.nvidia.com", "mig.nvidia.com")
    assert ("vfio.gpu.nvidia.com" in classes) is vfio


def test_taints_of_gpu_node_labels_become_tolerations() -> None:
    taints = [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
    ]
    tol = ddv.plan(inputs(node_taints=taints)).values["kubeletPlugin"]["tolerations"]
    assert tol == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
    ]


def test_extra_values_merge_deeply_and_lists_replace() -> None:
    extra = {"image": {"repository": "localhost/x"}, "kubeletPlugin": {"command": ["/bin/p"]}}
    values = ddv.plan(inputs(extra_values=extra)).values
    assert values["image"] == {"repository": "localhost/x"}
    assert values["kubeletPlugin"]["command"] == ["/bin/p"]
    assert values["kubeletPlugin"]["nodeSelector"] == GPU_LABEL


def test_resource_api_version_only_when_asked() -> None:
    assert "resourceApiVersion" not in ddv.plan(inputs()).values
    plan = ddv.plan(inputs(resource_api_version="resource.k8s.io/v1beta2"))
    assert plan.values["resourceApiVersion"] == "resource.k8s.io/v1beta2"
    assert any("runtime-config=resource.k8s.io/v1beta2=true" in w for w in plan.warnings)


def test_resource_api_version_not_served_is_refused() -> None:
    err = refused(kubernetes_version="1.32.4", accept_below_documented_minimum=True,
                  resource_api_version="resource.k8s.io/v1")  # fmt: skip
    assert err.variable == "dra_driver_resource_api_version"
    assert "resource.k8s.io/v1beta1" in err.reason


@pytest.mark.parametrize(
    ("kube", "api"),
    [
        ("1.37.2", "resource.k8s.io/v1"),
        ("1.33.5", "resource.k8s.io/v1beta2"),
        ("1.32.4", "resource.k8s.io/v1beta1"),
    ],
)
def test_read_api_version_follows_the_version_model(kube: str, api: str) -> None:
    plan = ddv.plan(inputs(kubernetes_version=kube, accept_below_documented_minimum=True))
    assert plan.resource_api_version == api


def test_extended_resource_name_warning_where_the_gate_is_off() -> None:
    # DRAExtendedResource: alpha (off) in 1.34/1.35, beta (on) from 1.36 (kube_features.go)
    assert any(
        "extendedResourceName" in w for w in ddv.plan(inputs(kubernetes_version="1.35.4")).warnings
    )
    assert not any(
        "extendedResourceName" in w for w in ddv.plan(inputs(kubernetes_version="1.36.1")).warnings
    )


# ----------------------------------------------------------------------------- feature gates


def test_sharing_turns_on_its_gates() -> None:
    values = ddv.plan(inputs(sharing=["time-slicing", "mps"])).values
    assert values["featureGates"] == {"MPSSupport": True, "TimeSlicingSettings": True}


def test_no_feature_gates_key_when_none_asked() -> None:
    assert "featureGates" not in ddv.plan(inputs()).values


def test_dynamic_mig_gate_and_warnings() -> None:
    plan = ddv.plan(inputs(dynamic_mig=True, kubernetes_version="1.35.4"))
    assert plan.values["featureGates"] == {"DynamicMIG": True}
    assert plan.dynamic_mig
    assert any("DRAPartitionableDevices" in w for w in plan.warnings)


@pytest.mark.parametrize(
    ("over", "pair"),
    [
        ({"dynamic_mig": True, "sharing": ["mps"]}, ("DynamicMIG", "MPSSupport")),
        (
            {"dynamic_mig": True, "feature_gates": {"PassthroughSupport": True}},
            ("DynamicMIG", "PassthroughSupport"),
        ),
        (
            {"dynamic_mig": True, "feature_gates": {"NVMLDeviceHealthCheck": True}},
            ("DynamicMIG", "NVMLDeviceHealthCheck"),
        ),
        (
            {"feature_gates": {"PassthroughSupport": True, "NVMLDeviceHealthCheck": True}},
            ("NVMLDeviceHealthCheck", "PassthroughSupport"),
        ),
    ],
)
def test_mutually_exclusive_gates_are_refused(over: dict[str, Any], pair: tuple[str, str]) -> None:
    err = refused(**over)
    assert f"refuses {pair[0]} together with {pair[1]}" in err.reason or (
        f"refuses {pair[1]} together with {pair[0]}" in err.reason
    )


def test_time_slicing_with_dynamic_mig_is_allowed() -> None:
    gates = ddv.plan(inputs(dynamic_mig=True, sharing=["time-slicing"])).values["featureGates"]
    assert gates == {"DynamicMIG": True, "TimeSlicingSettings": True}


def test_gate_the_chart_release_predates_is_refused() -> None:
    err = refused(chart_version="25.8.1", dynamic_mig=True)
    assert err.variable == "dra_driver_chart_version" and err.value == "25.8.1"
    assert "25.12.0" in err.fix
    err = refused(chart_version="25.3.2", sharing=["time-slicing"])
    assert "TimeSlicingSettings" in err.reason and "25.8.0" in err.fix
    err = refused(
        chart_version="25.12.0", feature_gates={"DeviceMetadata": True, "PassthroughSupport": True}
    )
    assert "DeviceMetadata" in err.reason


def test_unknown_gate_is_refused_with_a_hint() -> None:
    err = refused(feature_gates={"DynamicMig": True})
    assert err.variable == "dra_driver_feature_gates" and "did you mean DynamicMIG" in err.reason


def test_gate_dependency() -> None:
    err = refused(feature_gates={"IMEXDaemonsWithDNSNames": False})
    assert "ComputeDomainCliques requires IMEXDaemonsWithDNSNames" in err.reason
    err = refused(feature_gates={"DeviceMetadata": True})
    assert "DeviceMetadata requires PassthroughSupport" in err.reason


def test_explicit_gate_contradicting_sharing_is_refused() -> None:
    err = refused(sharing=["mps"], feature_gates={"MPSSupport": False})
    assert err.variable == "dra_driver_feature_gates" and "dra_driver_sharing" in err.reason


def test_unknown_sharing_strategy_is_refused() -> None:
    assert refused(sharing=["mig"]).variable == "dra_driver_sharing"


# ----------------------------------------------------------------------------- Kubernetes versions


def test_below_chart_kube_version_is_refused() -> None:
    err = refused(kubernetes_version="1.31.9")
    assert err.variable == "dra_driver_kubernetes_version" and ">=1.32.0-0" in err.reason


@pytest.mark.parametrize("version", ["1.33.5", "1.32.0"])
def test_below_documented_minimum_is_refused_unless_accepted(version: str) -> None:
    err = refused(kubernetes_version=version)
    assert "documented minimum Kubernetes v1.34.2" in err.reason
    assert "dra_driver_accept_below_documented_minimum: true" in err.fix
    plan = ddv.plan(inputs(kubernetes_version=version, accept_below_documented_minimum=True))
    assert any("documented minimum" in w for w in plan.warnings)


@pytest.mark.parametrize("version", ["1.34.0", "1.34.1"])
def test_known_bad_134_is_refused_even_when_below_the_minimum_is_accepted(version: str) -> None:
    err = refused(kubernetes_version=version, accept_below_documented_minimum=True)
    assert "known-bad" in err.reason and "1.34.2" in err.reason


def test_documented_minimum_itself_passes() -> None:
    assert ddv.plan(inputs(kubernetes_version="1.34.2")).warnings == (
        ddv.plan(inputs(kubernetes_version="1.34.3")).warnings
    )


def test_not_supported_for_provision_is_refused() -> None:
    err = refused(kubernetes_version="1.39.1")
    assert err.variable == "dra_driver_kubernetes_version"
    assert dra_skew.supported_for_provision("1.39.1").reason in err.reason


def test_known_bad_release_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = dra_skew.KnownBadRelease(
        "1.36.3", "kube-scheduler", "drops DRA allocations", "1.36.4", "x#1", "use 1.36.4"
    )
    # the list lives in the model's part that owns it (dra/skew.py)
    monkeypatch.setattr(dra_skew, "KNOWN_BAD_RELEASES", (*dra_skew.KNOWN_BAD_RELEASES, bad))
    err = refused(kubernetes_version="1.36.3")
    assert (
        "known-bad" in err.reason
        and "drops DRA allocations" in err.reason
        and err.fix == "use 1.36.4"
    )
    err = refused(kubelet_versions={"gpu-7": "v1.36.3"})
    assert err.variable == "kubelet of node gpu-7"


def test_old_kubelet_on_a_gpu_node_is_refused() -> None:
    err = refused(kubelet_versions={"gpu-1": "v1.37.2", "gpu-2": "v1.31.4"})
    assert err.variable == "kubelet of node gpu-2" and ">=1.32.0-0" in err.reason


# ----------------------------------------------------------------------------- chart refusals


def test_nvidia_ctk_path_is_refused() -> None:
    err = refused(extra_values={"nvidiaCtkPath": "/usr/bin/nvidia-ctk"})
    assert err.variable == "dra_driver_extra_values.nvidiaCtkPath"


def test_default_namespace_needs_allow() -> None:
    err = refused(namespace="default")
    assert err.variable == "dra_driver_namespace" and "allowDefaultNamespace" in err.fix
    plan = ddv.plan(inputs(namespace="default", extra_values={"allowDefaultNamespace": True}))
    assert plan.values["allowDefaultNamespace"] is True


def test_namespace_value_is_refused() -> None:
    assert refused(extra_values={"namespace": "x"}).variable == "dra_driver_extra_values.namespace"


def test_gpus_disabled_is_refused() -> None:
    # kubernetes-sigs/dra-driver-nvidia-gpu#438/#338: no gpu.nvidia.com DeviceClass
    err = refused(extra_values={"resources": {"gpus": {"enabled": False}}})
    assert "device class gpu.nvidia.com does not exist" in err.reason


def test_override_removed_is_refused() -> None:
    err = refused(extra_values={"gpuResourcesEnabledOverride": False})
    assert err.variable == "dra_driver_extra_values.gpuResourcesEnabledOverride"


# ----------------------------------------------------------------------------- upgrades


def test_first_upgrade_from_calendar_release_sets_name_override() -> None:
    plan = ddv.plan(inputs(installed={"chart": "nvidia-dra-driver-gpu-25.12.0", "values": {}}))
    assert plan.values["nameOverride"] == "nvidia-dra-driver-gpu"
    assert (plan.action, plan.installed, plan.name_override) == (
        "upgrade",
        "nvidia-dra-driver-gpu 25.12.0",
        True,
    )


def test_name_override_is_kept_on_later_upgrades() -> None:
    installed = {
        "chart": "dra-driver-nvidia-gpu-0.4.0",
        "values": {"nameOverride": "nvidia-dra-driver-gpu"},
    }
    plan = ddv.plan(inputs(chart_version="0.5.0", installed=installed))
    assert plan.values["nameOverride"] == "nvidia-dra-driver-gpu"


def test_fresh_semver_install_has_no_name_override() -> None:
    plan = ddv.plan(inputs(installed={"chart": "dra-driver-nvidia-gpu-0.4.0", "values": {}}))
    assert "nameOverride" not in plan.values and plan.action == "reconcile"


def test_name_override_conflict_is_refused() -> None:
    err = refused(
        installed={"chart": "nvidia-dra-driver-gpu-25.12.0", "values": {}},
        extra_values={"nameOverride": "other"},
    )
    assert err.variable == "dra_driver_extra_values.nameOverride"


def test_downgrade_to_calendar_release_is_refused() -> None:
    err = refused(chart_version="25.12.0", installed={"chart": "dra-driver-nvidia-gpu-0.4.0"})
    assert err.variable == "dra_driver_chart_version" and "0.4.0" in err.fix


def test_stand_in_release_is_upgraded_by_chart_version() -> None:
    chart = {"name": "gpufleet-gpu-simulator", "version": "0.1.1"}
    common = {"chart_path": "/c", "local_chart": chart, "chart_stand_in": True}
    same = ddv.plan(inputs(**common, installed={"chart": "gpufleet-gpu-simulator-0.1.1"}))
    newer = ddv.plan(inputs(**common, installed={"chart": "gpufleet-gpu-simulator-0.1.0"}))
    assert (same.action, newer.action) == ("reconcile", "upgrade")
    assert any("stands in" in w for w in same.warnings)


def test_stand_in_is_told_the_release_it_stands_in_for() -> None:
    chart = {"name": "gpufleet-gpu-simulator", "version": "0.1.0"}
    common = {"chart_path": "/c", "local_chart": chart, "chart_stand_in": True}
    for version, text in (("v25.8.1", "25.8.1"), ("25.12.0", "25.12.0"), ("0.4.0", "0.4.0")):
        values = ddv.plan(inputs(**common, chart_version=version)).values
        assert values["simulator"] == {"nvidiaChartVersion": text}
    # NVIDIA's own chart gets no key of the simulator
    assert "simulator" not in ddv.plan(inputs()).values


# ----------------------------------------------------------------------------- GPU paths


def test_without_a_device_plugin_pool_the_selector_is_unchanged() -> None:
    for pool in (None, False):
        over = {} if pool is None else {"device_plugin_pool": pool}
        plugin = ddv.plan(inputs(**over)).values["kubeletPlugin"]
        assert plugin["nodeSelector"] == {"nvidia.com/gpu.present": "true"}


def test_a_device_plugin_pool_adds_the_dra_path_to_the_selector() -> None:
    plugin = ddv.plan(inputs(device_plugin_pool=True)).values["kubeletPlugin"]
    assert plugin["nodeSelector"] == {
        "nvidia.com/gpu.present": "true",
        "gpufleet.io/gpu-path": "dra",
    }


def test_a_selector_on_the_device_plugin_path_is_refused() -> None:
    selector = {"nvidia.com/gpu.present": "true", "gpufleet.io/gpu-path": "device-plugin"}
    err = refused(node_selector=selector)
    assert err.variable == "dra_driver_node_selector"
    assert "selects gpufleet.io/gpu-path=device-plugin" in err.reason
    assert err.fix.startswith("drop gpufleet.io/gpu-path from it")
