"""NVIDIA's device plugin chart: its releases and where it comes from
(``plugins/module_utils/device_plugin/chart.py``). The chart's name, repository and the
release lines come from NVIDIA/k8s-device-plugin (the Go module of v0.17.4 and v0.18.1,
``deployments/helm/nvidia-device-plugin/Chart.yaml``)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import chart as dpc

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "line", "shown"),
    [
        ("0.17.4", (0, 17), "0.17.4"),
        ("v0.17.4", (0, 17), "0.17.4"),
        (" 0.18.1 ", (0, 18), "0.18.1"),
        ("0.18.0-rc.1", (0, 18), "0.18.0-rc.1"),
    ],
)
def test_chart_versions_parse(text: str, line: tuple[int, int], shown: str) -> None:
    version = dpc.parse_chart_version(text)
    assert (version.line, version.text) == (line, shown)


@pytest.mark.parametrize("value", ["latest", "0.17", "17.4", "0.17.4.1", "", None, 0.17])
def test_a_value_that_is_no_chart_version_is_refused(value: Any) -> None:
    with pytest.raises(dpc.DevicePluginError) as info:
        dpc.parse_chart_version(value)
    err = info.value
    assert (err.variable, err.value, err.reason) == (
        "device_plugin_chart_version",
        value,
        "not a chart version",
    )
    assert err.fix == "give a release of NVIDIA's nvidia-device-plugin chart, such as 0.17.4"


def test_a_release_older_than_the_lines_read_is_refused() -> None:
    with pytest.raises(dpc.DevicePluginError) as info:
        dpc.parse_chart_version("0.16.2")
    assert str(info.value) == (
        "device_plugin_chart_version=0.16.2: older than the 0.17 and 0.18 releases whose values "
        "the role writes; fix: give 0.17.4 or later"
    )


def test_a_newer_line_is_warned_about_and_a_read_one_is_not() -> None:
    assert dpc.newer_than_read(dpc.parse_chart_version("0.18.1")) == ""
    assert "0.19.0 is newer than the 0.17 and 0.18 releases" in dpc.newer_than_read(
        dpc.parse_chart_version("0.19.0")
    )


def test_nvidias_repository_or_its_mirror() -> None:
    version = dpc.parse_chart_version("0.17.4")
    src = dpc.chart_source(version)
    assert src.to_dict() == {
        "name": "nvidia-device-plugin",
        "ref": "nvidia-device-plugin",
        "version": "0.17.4",
        "repo_url": "https://nvidia.github.io/k8s-device-plugin",
        "local": False,
        "stand_in": False,
    }
    mirror = dpc.chart_source(version, repo_url="https://charts.example.internal/nvdp")
    assert mirror.repo_url == "https://charts.example.internal/nvdp"


def test_a_local_copy_of_nvidias_chart_must_be_of_the_release() -> None:
    version = dpc.parse_chart_version("0.17.4")
    meta = {"name": "nvidia-device-plugin", "version": "0.17.4"}
    src = dpc.chart_source(version, chart_path="/srv/charts/nvdp", local_chart=meta)
    assert (src.ref, src.version, src.local, src.stand_in) == (
        "/srv/charts/nvdp",
        None,
        True,
        False,
    )
    with pytest.raises(dpc.DevicePluginError) as info:
        dpc.chart_source(
            version, chart_path="/srv/charts/nvdp", local_chart={**meta, "version": "0.18.1"}
        )
    assert str(info.value) == (
        "device_plugin_chart_version=0.17.4: device_plugin_chart_path=/srv/charts/nvdp holds "
        "nvidia-device-plugin 0.18.1; fix: set device_plugin_chart_version: 0.18.1, or point "
        "device_plugin_chart_path at the chart of that release"
    )


def test_another_local_chart_needs_the_stand_in_switch() -> None:
    version = dpc.parse_chart_version("0.17.4")
    sim = {"name": "gpufleet-gpu-simulator", "version": "0.1.0"}
    with pytest.raises(dpc.DevicePluginError) as info:
        dpc.chart_source(version, chart_path="/lab/chart", local_chart=sim)
    assert info.value.variable == "device_plugin_chart_path"
    assert "holds chart 'gpufleet-gpu-simulator', not NVIDIA's nvidia-device-plugin" in str(
        info.value
    )
    src = dpc.chart_source(version, chart_path="/lab/chart", local_chart=sim, stand_in=True)
    assert (src.name, src.local, src.stand_in) == ("gpufleet-gpu-simulator", True, True)


def test_a_stand_in_without_a_local_chart_is_refused() -> None:
    with pytest.raises(dpc.DevicePluginError) as info:
        dpc.chart_source(dpc.parse_chart_version("0.17.4"), stand_in=True)
    assert info.value.variable == "device_plugin_chart_stand_in"
    assert "device_plugin_chart_path is empty" in info.value.reason


def test_a_chart_path_without_chart_yaml_is_refused() -> None:
    with pytest.raises(dpc.DevicePluginError) as info:
        dpc.chart_source(dpc.parse_chart_version("0.17.4"), chart_path="/nowhere", local_chart={})
    assert info.value.variable == "device_plugin_chart_path"
    assert "Chart.yaml" in info.value.reason
