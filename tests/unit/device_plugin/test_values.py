"""Helm values, refusals and the no-pool decision of NVIDIA's device plugin
(``plugins/module_utils/device_plugin/values.py``).

Value names and choices come from NVIDIA/k8s-device-plugin v0.17.4 (the same in v0.18.1):
``deployments/helm/nvidia-device-plugin/values.yaml``, ``templates/daemonset-device-plugin.yml``,
``templates/_helpers.tpl``, ``templates/validation.yml`` and ``api/config/v1/consts.go``; the
lab's GPU simulator chart for the stand-in (``lab/gpu-simulator/chart/values.yaml``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import chart as dpc
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import values as dpv

from tests.unit.device_plugin.plugin_inputs import GPU_LABEL, STAND_IN_CHART, inputs

pytestmark = pytest.mark.unit

SELECTOR = {"nvidia.com/gpu.present": "true", "gpufleet.io/gpu-path": "device-plugin"}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]},
                        {
                            "key": "gpufleet.io/gpu-path",
                            "operator": "In",
                            "values": ["device-plugin"],
                        },
                    ]
                }
            ]
        }
    }
}
CHART_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]


def refused(**over: Any) -> dpc.DevicePluginError:
    with pytest.raises(dpc.DevicePluginError) as info:
        dpv.plan(inputs(**over))
    return info.value


# ----------------------------------------------------------------------------- the decision


def test_no_device_plugin_pool_is_a_no_op_that_says_why() -> None:
    decision = dpv.pool_decision({"device-plugin": [], "dra": ["h200-01", "h200-02"]}, "gpu_nodes")
    assert decision == {
        "run": False,
        "message": "skipped: no host of device_plugin_group=gpu_nodes is on the device-plugin "
        "path (inventory group gpu_path_device_plugin); its 2 GPU host(s) are on DRA, served by "
        "the dra_driver role; nothing was changed",
    }


def test_a_device_plugin_pool_is_served() -> None:
    decision = dpv.pool_decision({"device-plugin": ["h100-01"], "dra": ["h200-01"]}, "gpu_nodes")
    assert decision["run"] is True
    assert decision["message"].startswith("1 GPU host(s) on the device-plugin path")


def test_the_decision_filter_takes_the_pools_of_the_path_filter() -> None:
    from ansible_collections.gpufleet.cluster.plugins.filter import device_plugin as fdp
    from ansible_collections.gpufleet.cluster.plugins.filter import gpu_paths as fgp

    pools = fgp.gpu_path_pools([["h200-01", ["gpu_nodes", "gpu_h200"]]])
    assert fdp.device_plugin_decision(pools, "gpu_nodes")["run"] is False
    pools = fgp.gpu_path_pools([["h100-01", ["gpu_nodes", "gpu_path_device_plugin"]]])
    assert fdp.device_plugin_decision(pools, "gpu_nodes")["run"] is True


# ----------------------------------------------------------------------------- NVIDIA's chart


def test_nvidia_chart_values_put_the_plugin_on_the_device_plugin_pool_only() -> None:
    plan = dpv.plan(inputs())
    assert plan.values == {
        "nodeSelector": SELECTOR,
        "affinity": AFFINITY,
        "tolerations": CHART_TOLERATIONS,
        "migStrategy": "none",
    }
    assert plan.node_selector == SELECTOR
    assert (plan.chart.name, plan.chart.version) == ("nvidia-device-plugin", "0.17.4")
    assert (plan.action, plan.installed, plan.warnings) == ("install", "", ())


def test_the_selector_is_the_gpu_labels_with_the_path_and_the_taints_are_tolerated() -> None:
    plan = dpv.plan(
        inputs(
            node_selector={"nvidia.com/gpu.present": "true", "pool": "training"},
            node_taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
        )
    )
    assert plan.values["nodeSelector"] == {
        "nvidia.com/gpu.present": "true",
        "pool": "training",
        "gpufleet.io/gpu-path": "device-plugin",
    }
    (term,) = plan.values["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [(e["key"], e["values"]) for e in term["matchExpressions"]] == [
        ("nvidia.com/gpu.present", ["true"]),
        ("pool", ["training"]),
        ("gpufleet.io/gpu-path", ["device-plugin"]),
    ]
    assert plan.values["tolerations"] == [
        *CHART_TOLERATIONS,
        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
    ]


def test_the_plugin_settings_land_in_the_charts_value_names() -> None:
    values = dpv.plan(
        inputs(
            mig_strategy="mixed",
            device_list_strategy=["cdi-cri", "envvar", "cdi-cri"],
            device_id_strategy="index",
            nvidia_driver_root="/run/nvidia/driver",
            cdi_hook_path="/usr/bin/nvidia-cdi-hook",
            runtime_class_name="nvidia",
        )
    ).values
    assert {
        k: v for k, v in values.items() if k not in ("nodeSelector", "affinity", "tolerations")
    } == {
        "migStrategy": "mixed",
        "deviceListStrategy": "cdi-cri,envvar",
        "deviceIDStrategy": "index",
        "nvidiaDriverRoot": "/run/nvidia/driver",
        "cdi": {"nvidiaHookPath": "/usr/bin/nvidia-cdi-hook"},
        "runtimeClassName": "nvidia",
    }


def test_configs_become_config_map_text_the_plugin_reads() -> None:
    sharing = {
        "version": "v1",
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
    }
    values = dpv.plan(
        inputs(
            config={"default": {"version": "v1"}, "a100-shared": sharing, "raw": "version: v1\n"},
            config_default="default",
        )
    ).values
    config = values["config"]
    assert config["default"] == "default"
    assert sorted(config["map"]) == ["a100-shared", "default", "raw"]
    assert json.loads(config["map"]["a100-shared"]) == sharing
    assert config["map"]["raw"] == "version: v1\n"


def test_an_existing_configmap_is_named() -> None:
    values = dpv.plan(inputs(config_name="nvdp-configs", config_default="any")).values
    assert values["config"] == {"name": "nvdp-configs", "default": "any"}


def test_extra_values_merge_last() -> None:
    values = dpv.plan(
        inputs(extra_values={"image": {"repository": "registry.example.internal/nvdp"}})
    ).values
    assert values["image"] == {"repository": "registry.example.internal/nvdp"}
    assert values["nodeSelector"] == SELECTOR


def test_a_read_release_line_warns_nothing_and_a_newer_one_does() -> None:
    assert dpv.plan(inputs(chart_version="0.18.1")).warnings == ()
    (warning,) = dpv.plan(inputs(chart_version="0.19.0")).warnings
    assert "newer than the 0.17 and 0.18 releases" in warning


@pytest.mark.parametrize(
    ("installed", "action", "shown"),
    [
        (None, "install", ""),
        ({"chart": "nvidia-device-plugin-0.17.4"}, "reconcile", "nvidia-device-plugin 0.17.4"),
        ({"chart": "nvidia-device-plugin-0.17.3"}, "upgrade", "nvidia-device-plugin 0.17.3"),
        ({"chart": "gpufleet-gpu-simulator-0.1.0"}, "upgrade", "gpufleet-gpu-simulator 0.1.0"),
    ],
)
def test_the_action_follows_the_installed_release(installed: Any, action: str, shown: str) -> None:
    plan = dpv.plan(inputs(installed=installed))
    assert (plan.action, plan.installed) == (action, shown)


# ----------------------------------------------------------------------------- the stand-in


def test_stand_in_values_use_the_simulators_device_plugin_mode() -> None:
    plan = dpv.plan(
        inputs(chart_path="/lab/chart", local_chart=STAND_IN_CHART, chart_stand_in=True)
    )
    assert plan.values == {
        "mode": "device-plugin",
        "devicePlugin": {"nodeSelector": SELECTOR},
        "kubeletPlugin": {"affinity": AFFINITY, "tolerations": CHART_TOLERATIONS},
    }
    assert plan.chart.stand_in is True
    assert plan.warnings == (
        "chart gpufleet-gpu-simulator at /lab/chart stands in for NVIDIA's device plugin "
        "(device_plugin_chart_stand_in, mode: device-plugin)",
    )


def test_the_stand_in_says_which_plugin_settings_it_ignores() -> None:
    plan = dpv.plan(
        inputs(
            chart_path="/lab/chart",
            local_chart=STAND_IN_CHART,
            chart_stand_in=True,
            mig_strategy="single",
            runtime_class_name="nvidia",
            installed={"chart": "gpufleet-gpu-simulator-0.1.0"},
        )
    )
    assert plan.warnings[0] == (
        "the stand-in chart gpufleet-gpu-simulator takes none of migStrategy, runtimeClassName: "
        "ignored"
    )
    assert "migStrategy" not in plan.values and "runtimeClassName" not in plan.values
    assert plan.action == "reconcile"


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("over", "variable", "reason"),
    [
        (
            {"mig_strategy": "MIXED"},
            "device_plugin_mig_strategy",
            "not one of the device plugin's choices (none, single, mixed)",
        ),
        (
            {"device_id_strategy": "serial"},
            "device_plugin_device_id_strategy",
            "not one of the device plugin's choices (uuid, index)",
        ),
        (
            {"device_list_strategy": ["envvar", "cdi"]},
            "device_plugin_device_list_strategy",
            "cdi is not a device list strategy of the device plugin",
        ),
        (
            {"nvidia_driver_root": "run/nvidia/driver"},
            "device_plugin_nvidia_driver_root",
            "not an absolute path",
        ),
        (
            {"cdi_hook_path": "/usr/bin/nvidia-cdi-hook\nx"},
            "device_plugin_cdi_hook_path",
            "not an absolute path",
        ),
        (
            {"runtime_class_name": "NVIDIA"},
            "device_plugin_runtime_class_name",
            "is not a DNS subdomain",
        ),
        ({"release_name": "nvdp_1"}, "device_plugin_release_name", "is not a DNS subdomain"),
        (
            {"release_name": "n" * 54},
            "device_plugin_release_name",
            "is 54 characters long, more than a Helm release's 53",
        ),
        ({"namespace": "GPU"}, "device_plugin_namespace", "is not a DNS label"),
        (
            {"namespace": "default"},
            "device_plugin_namespace",
            "the chart refuses to install into the default namespace",
        ),
        (
            {"extra_values": {"namespace": "gpu"}},
            "device_plugin_extra_values.namespace",
            "the chart fails when a namespace value is set",
        ),
        (
            {"node_selector": ["nvidia.com/gpu.present"]},
            "device_plugin_node_selector",
            "not a mapping",
        ),
        (
            {"node_taints": [{"effect": "NoSchedule"}]},
            "device_plugin_node_taints",
            "each taint needs a key",
        ),
        ({"extra_values": ["x"]}, "device_plugin_extra_values", "not a mapping"),
    ],
)
def test_bad_input_is_refused_naming_the_variable(
    over: dict[str, Any], variable: str, reason: str
) -> None:
    err = refused(**over)
    assert err.variable == variable
    assert reason in err.reason
    assert err.fix


def test_a_selector_of_the_dra_path_is_refused() -> None:
    err = refused(node_selector=GPU_LABEL | {"gpufleet.io/gpu-path": "dra"})
    assert str(err).startswith(
        "device_plugin_node_selector={'nvidia.com/gpu.present': 'true', "
        "'gpufleet.io/gpu-path': 'dra'}: selects gpufleet.io/gpu-path=dra, the nodes of another "
        "GPU path"
    )
    assert err.fix == (
        "drop gpufleet.io/gpu-path from it (the role adds gpufleet.io/gpu-path: device-plugin)"
    )


@pytest.mark.parametrize("stand_in", [False, True])
def test_extra_values_that_drop_the_path_from_the_selector_are_refused(stand_in: bool) -> None:
    over: dict[str, Any] = {}
    where = {"nodeSelector": {"gpufleet.io/gpu-path": "dra"}}
    if stand_in:
        over = {"chart_path": "/lab/chart", "local_chart": STAND_IN_CHART, "chart_stand_in": True}
        where = {"devicePlugin": where}
    err = refused(extra_values=where, **over)
    assert err.variable == (
        "device_plugin_extra_values.devicePlugin.nodeSelector"
        if stand_in
        else "device_plugin_extra_values.nodeSelector"
    )
    assert "would also run on the DRA pools" in err.reason


def test_config_map_and_configmap_name_together_are_refused() -> None:
    err = refused(config={"default": {"version": "v1"}}, config_name="nvdp-configs")
    assert err.variable == "device_plugin_config_name"
    assert "not both" in err.reason


def test_several_configs_without_a_default_are_refused_as_the_chart_would() -> None:
    err = refused(config={"a": {"version": "v1"}, "b": {"version": "v1"}})
    assert str(err) == (
        'device_plugin_config_default="": device_plugin_config has 2 configs (a, b) and none '
        "is the default, so the chart fails; fix: set device_plugin_config_default to one of "
        "them, or name one of them default"
    )
    # the chart's fallbacks: an entry named default, or a single entry
    assert dpv.plan(inputs(config={"default": {"version": "v1"}, "b": {"version": "v1"}}))
    assert dpv.plan(inputs(config={"only": {"version": "v1"}}))


def test_a_default_that_names_no_config_is_refused() -> None:
    err = refused(config={"a": {"version": "v1"}}, config_default="b")
    assert (err.variable, err.value) == ("device_plugin_config_default", "b")
    assert err.reason == "names no config of device_plugin_config (a)"


@pytest.mark.parametrize("body", [None, "", 3, ["version: v1"]])
def test_a_config_that_is_no_config_is_refused(body: Any) -> None:
    err = refused(config={"a": body})
    assert err.variable == "device_plugin_config.a"


def test_a_config_naming_another_mig_strategy_is_refused() -> None:
    """The chart hands device_plugin_mig_strategy to the plugin as MIG_STRATEGY, which the
    plugin takes over a config file's flags.migStrategy."""
    mixed = {"version": "v1", "flags": {"migStrategy": "mixed"}}
    err = refused(config={"default": {"version": "v1"}, "mig": mixed})
    assert str(err) == (
        "device_plugin_config.mig.flags.migStrategy=mixed: differs from "
        "device_plugin_mig_strategy=none, which the chart passes to the plugin as "
        "MIG_STRATEGY, and the plugin takes that over its config file: the nodes that pick "
        "config mig would not get mixed; fix: set device_plugin_mig_strategy: mixed and give "
        "every config that names a migStrategy that one, or drop migStrategy from config mig"
    )
    text = "version: v1\nflags:\n  migStrategy: single\n"
    err = refused(mig_strategy="mixed", config={"default": text})
    assert (err.variable, err.value) == ("device_plugin_config.default.flags.migStrategy", "single")
    # from the extra values too: the merged map is what the chart gets
    err = refused(extra_values={"config": {"map": {"default": json.dumps(mixed)}}})
    assert err.variable == "device_plugin_config.default.flags.migStrategy"


def test_configs_agreeing_with_the_mig_strategy_or_naming_none_are_kept() -> None:
    configs = {
        "default": {"version": "v1", "flags": {"migStrategy": "mixed"}},
        "raw": "version: v1\nflags:\n  migStrategy: mixed\n",
        "shared": {"version": "v1", "flags": {"failOnInitError": False}},
    }
    plan = dpv.plan(inputs(mig_strategy="mixed", config=configs, config_default="default"))
    assert sorted(plan.values["config"]["map"]) == ["default", "raw", "shared"]
    # without the role's migStrategy (null in the extra values) the configs decide
    plan = dpv.plan(inputs(config=configs, extra_values={"migStrategy": None}))
    assert plan.values["migStrategy"] is None


def test_a_config_text_that_is_no_yaml_is_refused() -> None:
    err = refused(config={"default": "version: v1\nflags: [migStrategy: {"})
    assert err.variable == "device_plugin_config.default"
    assert err.reason.startswith("its text is not valid YAML: ")
    assert err.reason.endswith(", so the plugin could not read it either")


def test_a_config_name_that_is_no_configmap_key_is_refused() -> None:
    err = refused(config={"a/b": {"version": "v1"}})
    assert (err.variable, err.value) == ("device_plugin_config", "a/b")
