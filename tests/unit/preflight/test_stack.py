"""Preflight rules of the GPU stack: driver branch, toolkit and containerd, the DRA driver's
chart and gates (``plugins/module_utils/preflight/stack.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    chart as dra_driver_chart,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

from tests.unit.preflight.hosts import CP, GOOD, _host, _rules

pytestmark = pytest.mark.unit


def test_driver_branch_below_565_is_refused_on_gpu_nodes_only() -> None:
    bad = {"nvidia_driver_branch": "550", "nvidia_driver_version": "550.144.03"}
    p = _rules(_host(bad))["driver-pin"]
    assert p.severity == pp.ERROR and p.variable == "nvidia_driver_branch" and p.value == "550"
    assert "565" in p.message and "580" in p.fix
    assert pf.check_host("cp-1", CP, {**GOOD, **bad}) == []
    assert "driver-pin" not in _rules(_host({**bad, "site_install_gpu_stack": False}))


def test_driver_release_outside_its_branch_is_refused() -> None:
    p = _rules(_host({"nvidia_driver_branch": "570"}))["driver-pin"]
    assert p.variable == "nvidia_driver_version" and p.value == "580.159.04"


def test_installed_driver_below_565_is_refused_when_the_stack_is_not_installed() -> None:
    problems = _host({"site_install_gpu_stack": False}, driver_version="550.144.03")
    p = _rules(problems)["driver-installed-branch"]
    assert p.value == "550.144.03" and "565" in p.message


def test_toolkit_older_than_1_17_4_on_containerd_2_is_refused() -> None:
    p = _rules(
        _host(
            {
                "nvidia_container_toolkit_version": "1.17.3",
                "nvidia_container_toolkit_containerd_version": "2.1.4",
            }
        )
    )["toolkit-containerd"]
    assert (p.variable, p.value) == ("nvidia_container_toolkit_version", "1.17.3")
    assert "1.17.4" in p.fix and "2.1.4" in p.message
    ok = _host(
        {
            "nvidia_container_toolkit_version": "1.17.3",
            "nvidia_container_toolkit_containerd_version": "1.7.27",
        }
    )
    assert "toolkit-containerd" not in _rules(ok)


def test_cdi_on_containerd_1_6_is_refused() -> None:
    p = _rules(_host({"nvidia_container_toolkit_containerd_version": "1.6.20"}))[
        "toolkit-containerd"
    ]
    assert p.variable == "nvidia_container_toolkit_enable_cdi"


def test_gpu_operator_and_host_stack_together_are_refused() -> None:
    p = _rules(_host({"dra_driver_gpu_operator": True}))["gpu-operator-and-host-stack"]
    assert p.variable == "site_install_gpu_stack"
    assert "gpu-operator-and-host-stack" not in _rules(
        _host({"dra_driver_gpu_operator": True, "site_install_gpu_stack": False})
    )


def test_chart_below_its_kubeversion_is_an_error() -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": "1.31.4"}))["chart-kubernetes"]
    assert ">=1.32.0" in p.message and p.variable == "kubeadm_kubernetes_version"


def test_release_below_the_documented_minimum_is_an_error_unless_accepted() -> None:
    p = _rules(_host({"kubeadm_kubernetes_version": "1.34.1"}))["chart-kubernetes-docs"]
    assert p.severity == pp.ERROR and "1.34.2" in p.message
    assert "dra_driver_accept_below_documented_minimum" in p.fix
    accepted = _host(
        {"kubeadm_kubernetes_version": "1.33.5", "dra_driver_accept_below_documented_minimum": True}
    )
    assert _rules(accepted)["chart-kubernetes-docs"].severity == pp.WARNING


def test_unreadable_chart_version_is_refused() -> None:
    p = _rules(_host({"dra_driver_chart_version": "latest"}))["chart-version-format"]
    assert p.value == "latest"


def test_mps_sharing_with_dynamic_mig_is_refused_as_the_driver_role_refuses_it() -> None:
    p = _rules(_host({"dra_driver_sharing": ["mps"], "dra_driver_dynamic_mig": True}))[
        "driver-gates"
    ]
    assert p.severity == pp.ERROR and p.variable == "dra_driver_dynamic_mig" and p.value is True
    assert "refuses DynamicMIG together with MPSSupport" in p.message
    assert (
        p.fix == "turn one of them off (dra_driver_dynamic_mig=true or dra_driver_sharing item mps)"
    )


def test_passthrough_with_health_checks_is_refused() -> None:
    gates = {"PassthroughSupport": True, "NVMLDeviceHealthCheck": True}
    p = _rules(_host({"dra_driver_feature_gates": gates}))["driver-gates"]
    assert p.variable == "dra_driver_feature_gates" and p.value == gates
    assert "PassthroughSupport together with NVMLDeviceHealthCheck" in p.message


def test_unknown_sharing_strategy_is_refused_naming_the_choices() -> None:
    p = _rules(_host({"dra_driver_sharing": ["vgpu"]}))["driver-gates"]
    assert p.variable == "dra_driver_sharing" and p.value == ["vgpu"]
    assert "'vgpu' is not a sharing strategy" in p.message
    assert p.fix == "use items from ['time-slicing', 'mps']"


def test_a_sharing_strategy_the_role_refuses_is_refused_by_preflight_too() -> None:
    # the role's spelling is time-slicing; another spelling would pass preflight and then
    # stop the dra_driver role
    p = _rules(_host({"dra_driver_sharing": ["timeslicing"]}))["driver-gates"]
    assert "'timeslicing' is not a sharing strategy" in p.message
    assert "driver-gates" not in _rules(_host({"dra_driver_sharing": ["time-slicing"]}))


def test_dynamic_mig_needs_a_chart_that_has_it() -> None:
    p = _rules(_host({"dra_driver_dynamic_mig": True, "dra_driver_chart_version": "25.8.1"}))[
        "driver-gates"
    ]
    assert p.variable == "dra_driver_chart_version" and p.value == "25.8.1"
    assert "does not know the feature gate DynamicMIG" in p.message
    assert p.fix.startswith("use chart 25.12.0 or later")
    ok = _host({"dra_driver_dynamic_mig": True, "dra_driver_chart_version": "25.12.0"})
    assert "driver-gates" not in _rules(ok)


def test_dynamic_mig_needs_partitionable_devices_before_1_36() -> None:
    base = {"kubeadm_kubernetes_version": "1.35.4", "dra_driver_dynamic_mig": True}
    p = _rules(_host(base))["dynamic-mig-gate"]
    assert "DRAPartitionableDevices" in p.message and "partitionable-devices" in p.fix
    fixed = _host({**base, "dra_feature_gates_features": ["partitionable-devices"]})
    assert "dynamic-mig-gate" not in _rules(fixed)
    assert "dynamic-mig-gate" not in _rules(_host({"dra_driver_dynamic_mig": True}))


def test_containerd_17_is_refused_for_a_138_kubelet() -> None:
    p = _rules(
        _host(
            {
                "kubeadm_kubernetes_version": "1.38.0",
                "nvidia_container_toolkit_containerd_version": "1.7.28",
            }
        )
    )["containerd-release"]
    assert p.variable == "nvidia_container_toolkit_containerd_version" and p.value == "1.7.28"
    assert "containerd 2.0 or later" in p.message
    assert "containerd-release" not in _rules(
        _host({"nvidia_container_toolkit_containerd_version": "1.7.28"})
    )


def test_dynamic_mig_below_1_34_is_refused_by_preflight_as_the_driver_role_refuses_it() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

    v = {
        "kubeadm_kubernetes_version": "1.33.5",
        "dra_driver_dynamic_mig": True,
        "dra_driver_chart_version": "25.12.0",
        "dra_driver_accept_below_documented_minimum": True,
    }
    p = _rules(_host(v))["dynamic-mig-kubernetes"]
    assert p.variable == "dra_driver_dynamic_mig" and p.value is True
    assert p.message == (
        "DynamicMIG publishes partitionable devices, which the driver supports from "
        "Kubernetes 1.34 (the cluster is 1.33)"
    )
    with pytest.raises(dra_driver_chart.DraDriverError) as err:
        ddv.plan(
            {
                "chart_version": "25.12.0",
                "kubernetes_version": "1.33.5",
                "accept_below_documented_minimum": True,
                "dynamic_mig": True,
                "namespace": "nvidia-dra-driver-gpu",
            }
        )
    assert (err.value.variable, err.value.reason, err.value.fix) == (p.variable, p.message, p.fix)
