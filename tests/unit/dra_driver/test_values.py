"""Chart choice, Helm values and refusals of the NVIDIA DRA driver (module_utils dra_driver_values).

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
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import health as ddh
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import nodes as ddn
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

pytestmark = pytest.mark.unit

GPU_LABEL = {"nvidia.com/gpu.present": "true"}


def inputs(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "chart_version": "0.4.0",
        "kubernetes_version": "v1.37.2",
        "namespace": "nvidia-dra-driver-gpu",
        "node_selector": dict(GPU_LABEL),
    }
    base.update(over)
    return base


def refused(**over: Any) -> ddc.DraDriverError:
    with pytest.raises(ddc.DraDriverError) as info:
        ddv.plan(inputs(**over))
    return info.value


def node(name: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": name, "labels": labels or {}}, "spec": {}}
    if "taints" in extra:
        out["spec"]["taints"] = extra["taints"]
    if "allocatable" in extra:
        out["status"] = {"allocatable": extra["allocatable"]}
    return out


# ----------------------------------------------------------------------------- chart choice


@pytest.mark.parametrize(
    ("version", "name", "ref", "repo"),
    [
        (
            "25.12.0",
            "nvidia-dra-driver-gpu",
            "nvidia-dra-driver-gpu",
            "https://helm.ngc.nvidia.com/nvidia",
        ),
        (
            "v25.8.1",
            "nvidia-dra-driver-gpu",
            "nvidia-dra-driver-gpu",
            "https://helm.ngc.nvidia.com/nvidia",
        ),
        (
            "0.4.0",
            "dra-driver-nvidia-gpu",
            "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
            None,
        ),
        (
            "0.5.0-dev",
            "dra-driver-nvidia-gpu",
            "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
            None,
        ),
    ],
)
def test_chart_by_release(version: str, name: str, ref: str, repo: str | None) -> None:
    source = ddc.chart_source(ddc.parse_chart_version(version))
    assert (source.name, source.ref, source.repo_url, source.local) == (name, ref, repo, False)
    assert source.version == version.lstrip("v")


@pytest.mark.parametrize("version", ["25.4.0", "0.3.0", "26.1.0", "latest", ""])
def test_chart_version_that_is_no_release_is_refused(version: str) -> None:
    with pytest.raises(ddc.DraDriverError, match="dra_driver_chart_version=") as info:
        ddc.parse_chart_version(version)
    assert "fix:" in str(info.value)


def test_calendar_releases_order_before_semver() -> None:
    order = ["25.3.2", "25.8.1", "25.12.0", "0.4.0", "0.5.0"]
    parsed = [ddc.parse_chart_version(v) for v in order]
    assert parsed == sorted(parsed)


def test_local_nvidia_chart_must_be_the_asked_release() -> None:
    chart = {"name": "dra-driver-nvidia-gpu", "version": "0.4.0"}
    source = ddc.chart_source(
        ddc.parse_chart_version("0.4.0"), chart_path="/srv/charts/dra", local_chart=chart
    )
    assert (source.ref, source.version, source.local, source.stand_in) == (
        "/srv/charts/dra",
        None,
        True,
        False,
    )
    with pytest.raises(ddc.DraDriverError, match=r"holds dra-driver-nvidia-gpu 0\.4\.0"):
        ddc.chart_source(ddc.parse_chart_version("0.5.0"), chart_path="/srv/c", local_chart=chart)


def test_foreign_local_chart_needs_stand_in() -> None:
    chart = {"name": "gpufleet-gpu-simulator", "version": "0.1.0"}
    with pytest.raises(ddc.DraDriverError, match="dra_driver_chart_stand_in: true"):
        ddc.chart_source(ddc.parse_chart_version("0.4.0"), chart_path="/c", local_chart=chart)
    source = ddc.chart_source(
        ddc.parse_chart_version("0.4.0"), chart_path="/c", local_chart=chart, stand_in=True
    )
    assert source.stand_in and source.name == "gpufleet-gpu-simulator"


def test_local_path_without_chart_yaml_is_refused() -> None:
    err = refused(chart_path="/nowhere", local_chart={})
    assert err.variable == "dra_driver_chart_path" and "Chart.yaml" in err.reason


@pytest.mark.parametrize(
    ("chart", "expected"),
    [
        ("nvidia-dra-driver-gpu-25.12.0", ("nvidia-dra-driver-gpu", "25.12.0")),
        ("dra-driver-nvidia-gpu-0.5.0-dev", ("dra-driver-nvidia-gpu", "0.5.0-dev")),
        ("gpufleet-gpu-simulator-0.1.0", ("gpufleet-gpu-simulator", "0.1.0")),
        ("noversion", ("noversion", "")),
    ],
)
def test_release_chart_field(chart: str, expected: tuple[str, str]) -> None:
    assert ddc.parse_release_chart(chart) == expected


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
    # the list lives in the model's part that owns it (dra_skew; dra_versions re-exports it)
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


# ----------------------------------------------------------------------------- nodes


def test_unlabelled_gpu_node_is_named() -> None:
    nodes = [node("gpu-1", GPU_LABEL), node("gpu-2", {}), node("cpu-1", {})]
    values = ddv.plan(inputs()).values
    problems = ddn.node_problems(nodes, ["gpu-1", "gpu-2"], values)
    assert len(problems) == 1
    assert problems[0].startswith("GPU node gpu-2 lacks the label(s) nvidia.com/gpu.present=true")
    assert "gpu_node_labels" in problems[0]


def test_chart_default_affinity_applies_without_node_selector() -> None:
    values = ddv.plan(inputs(node_selector={})).values
    nfd = node("gpu-1", {"feature.node.kubernetes.io/pci-10de.present": "true"})
    bare = node("gpu-2", {"kubernetes.io/os": "linux"})
    problems = ddn.node_problems([nfd, bare], ["gpu-1", "gpu-2"], values)
    assert len(problems) == 1 and "gpu-2" in problems[0]
    assert "nvidia.com/gpu.present=true" in problems[0] and "required node affinity" in problems[0]


def test_pci_0302_label_counts_only_for_semver_chart() -> None:
    values = ddv.plan(inputs(node_selector={})).values
    n = node("gpu-1", {"feature.node.kubernetes.io/pci-0302_10de.present": "true"})
    assert ddn.node_problems([n], ["gpu-1"], values) == []
    assert ddn.node_problems([n], ["gpu-1"], values, legacy_chart=True) != []


def test_untolerated_taint_is_named() -> None:
    values = ddv.plan(inputs()).values
    n = node(
        "gpu-1", GPU_LABEL, taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    )
    problems = ddn.node_problems([n], ["gpu-1"], values)
    assert "taint dedicated=ml:NoSchedule" in problems[0]
    tolerant = ddv.plan(inputs(node_taints=[{"key": "dedicated", "effect": "NoSchedule"}])).values
    assert ddn.node_problems([n], ["gpu-1"], tolerant) == []


def test_node_condition_taints_do_not_stop_a_daemonset() -> None:
    values = ddv.plan(inputs()).values
    pressure = [{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}]
    assert ddn.node_problems([node("gpu-1", GPU_LABEL, taints=pressure)], ["gpu-1"], values) == []


def test_device_plugin_on_gpu_node_is_refused_unless_coexisting() -> None:
    values = ddv.plan(inputs()).values
    n = node("gpu-1", GPU_LABEL, allocatable={"cpu": "8", "nvidia.com/gpu": "8"})
    problems = ddn.node_problems([n], ["gpu-1"], values)
    assert len(problems) == 1 and "nvidia.com/gpu=8" in problems[0]
    assert "dra_driver_coexist_with_device_plugin" in problems[0]
    assert ddn.node_problems([n], ["gpu-1"], values, coexist_with_device_plugin=True) == []


def test_gpu_host_without_node_is_named() -> None:
    problems = ddn.node_problems([], ["gpu-9"], ddv.plan(inputs()).values)
    assert problems and problems[0].startswith("GPU node gpu-9: no Node object")


# ----------------------------------------------------------------------------- DaemonSet


def daemonset(
    desired: int, ready: int, *, gen: int = 2, seen: int = 2, selector: dict | None = None
) -> dict:
    return {
        "metadata": {
            "name": "nvidia-dra-driver-gpu-kubelet-plugin",
            "generation": gen,
            "annotations": {"meta.helm.sh/release-name": "nvidia-dra-driver-gpu"},
        },
        "spec": {
            "template": {"spec": {"nodeSelector": selector if selector is not None else GPU_LABEL}}
        },
        "status": {
            "desiredNumberScheduled": desired,
            "numberReady": ready,
            "updatedNumberScheduled": ready,
            "observedGeneration": seen,
        },
    }


def test_zero_of_zero_daemonset_fails_naming_node_and_label() -> None:
    # kubernetes-sigs/dra-driver-nvidia-gpu#1084: 0 == 0 must not pass
    nodes = [node("gpu-1", {})]
    verdict = ddh.daemonset_verdict(daemonset(0, 0), ["gpu-1"], nodes, namespace="ns")
    assert verdict["ok"] is False and verdict["final"] is True
    assert "0 of 0" in verdict["message"]
    assert "gpu-1 lacks the label(s) nvidia.com/gpu.present=true" in verdict["message"]


def test_daemonset_ready_on_every_gpu_node() -> None:
    nodes = [node("gpu-1", GPU_LABEL), node("gpu-2", GPU_LABEL)]
    verdict = ddh.daemonset_verdict(daemonset(2, 2), ["gpu-1", "gpu-2"], nodes)
    assert verdict == {"ok": True, "final": True, "message": verdict["message"]}
    assert "2 of 2" in verdict["message"]


def test_daemonset_not_ready_yet_keeps_waiting() -> None:
    nodes = [node("gpu-1", GPU_LABEL)]
    assert ddh.daemonset_verdict(daemonset(1, 0), ["gpu-1"], nodes) == {
        "ok": False,
        "final": False,
        "message": "DaemonSet nvidia-dra-driver-gpu-kubelet-plugin: 0 of 1 pods ready, 0 updated",
    }
    unseen = ddh.daemonset_verdict(daemonset(0, 0, gen=3, seen=2), ["gpu-1"], nodes)
    assert unseen["final"] is False


def test_daemonset_on_fewer_nodes_than_gpu_nodes() -> None:
    nodes = [node("gpu-1", GPU_LABEL), node("gpu-2", {})]
    verdict = ddh.daemonset_verdict(daemonset(1, 1), ["gpu-1", "gpu-2"], nodes)
    assert verdict["final"] and not verdict["ok"]
    assert "gpu-2 lacks" in verdict["message"] and "gpu-1 lacks" not in verdict["message"]


def test_daemonset_on_a_non_gpu_node_is_named() -> None:
    nodes = [node("gpu-1", GPU_LABEL), node("cpu-1", GPU_LABEL)]
    verdict = ddh.daemonset_verdict(daemonset(2, 2), ["gpu-1"], nodes)
    assert not verdict["ok"] and "non-GPU node(s) cpu-1" in verdict["message"]


def test_find_daemonset_by_release_annotation() -> None:
    other = daemonset(1, 1)
    other["metadata"]["annotations"] = {"meta.helm.sh/release-name": "other"}
    mine = daemonset(1, 1)
    assert ddh.find_kubelet_plugin_daemonset([other, mine], "nvidia-dra-driver-gpu") is mine
    assert ddh.find_kubelet_plugin_daemonset([other], "nvidia-dra-driver-gpu") is None
    assert ddh.daemonset_verdict(None, ["gpu-1"], [], release="r", namespace="n")["final"] is False


# ----------------------------------------------------------------------------- ResourceSlices


def gpu(mig: str = "Disabled", devices: int = 0) -> dict[str, Any]:
    return {"mig_mode_current": mig, "mig_devices": [{"profile": "1g.18gb"}] * devices}


def rslice(
    node_name: str, devices: int, *, gen: int = 1, count: int = 1, driver: str = "gpu.nvidia.com"
) -> dict:
    return {
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": gen, "resourceSliceCount": count},
            "devices": [{"name": f"gpu-{i}"} for i in range(devices)],
        }
    }


def test_expected_devices_from_gpu_facts() -> None:
    assert ddh.expected_devices([gpu(), gpu()]) == 2
    assert ddh.expected_devices([gpu("Enabled", 3), gpu()]) == 4
    assert ddh.expected_devices([gpu("Enabled", 0)]) == 0
    assert ddh.expected_devices([{"mig_mode_current": None}]) == 1
    assert ddh.expected_devices(None) is None


def test_slices_match_gpu_facts() -> None:
    slices = [
        rslice("gpu-1", 2),
        rslice("gpu-2", 4),
        rslice("cpu-1", 1, driver="other.example.com"),
    ]
    verdict = ddh.slice_verdict(slices, {"gpu-1": 2, "gpu-2": 4})
    assert verdict == {"ok": True, "devices": {"gpu-1": 2, "gpu-2": 4}, "problems": []}


def test_slice_count_mismatch_and_missing_node() -> None:
    verdict = ddh.slice_verdict([rslice("gpu-1", 1)], {"gpu-1": 3, "gpu-2": None})
    assert verdict["problems"] == [
        "GPU node gpu-1 publishes 1 device(s) of driver gpu.nvidia.com, its GPU facts say 3 "
        "(one per GPU, one per MIG device of a MIG-enabled GPU)",
        "GPU node gpu-2 has no ResourceSlice of driver gpu.nvidia.com",
    ]


def test_only_newest_pool_generation_counts() -> None:
    slices = [rslice("gpu-1", 1, gen=1), rslice("gpu-1", 3, gen=2)]
    assert ddh.slice_verdict(slices, {"gpu-1": 3})["ok"]


def test_incomplete_pool_is_not_ok() -> None:
    verdict = ddh.slice_verdict([rslice("gpu-1", 2, count=2)], {"gpu-1": 2})
    assert verdict["problems"] == ["GPU node gpu-1: its ResourceSlice pool is incomplete"]


def test_dynamic_mig_needs_only_some_devices() -> None:
    assert ddh.slice_verdict([rslice("gpu-1", 12)], {"gpu-1": 1}, dynamic_mig=True)["ok"]
    assert not ddh.slice_verdict([rslice("gpu-1", 12)], {"gpu-1": 1})["ok"]
