# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""NVIDIA's device plugin Helm chart: its name and repository, the releases whose values
this package writes (``parse_chart_version``), where the chart comes from
(``chart_source``: NVIDIA's repository, a local copy, or a stand-in), the values' choices
and defaults, and ``DevicePluginError``, whose text names the variable, the value and the
fix.

Facts and their sources (NVIDIA/k8s-device-plugin, the Go module of each release, whose
``deployments/helm/nvidia-device-plugin/`` is the chart):

- Chart ``nvidia-device-plugin`` (``Chart.yaml``), Helm repository
  ``https://nvidia.github.io/k8s-device-plugin``; ``kubeVersion: >= 1.10.0-0``.
- Values read from the 0.17.4 and 0.18.1 charts (``values.yaml``,
  ``templates/daemonset-device-plugin.yml``, ``templates/_helpers.tpl``,
  ``templates/validation.yml``), the same names in both: ``nodeSelector``, ``affinity``,
  ``tolerations``, ``migStrategy``, ``deviceListStrategy``, ``deviceIDStrategy``,
  ``nvidiaDriverRoot``, ``runtimeClassName``, ``cdi.nvidiaHookPath``, ``config.name``,
  ``config.map``, ``config.default``, ``config.fallbackStrategies``,
  ``allowDefaultNamespace``; a ``namespace`` value fails the chart, and so do the
  ``default`` namespace without ``allowDefaultNamespace`` and ``config.name`` with
  ``config.map``.
- The choices of the plugin's flags (``api/config/v1/consts.go``; the plugin refuses
  anything else at start, ``cmd/nvidia-device-plugin/main.go`` ``validateFlags``):
  MIG strategies ``none``, ``single``, ``mixed``; device list strategies ``envvar``,
  ``volume-mounts``, ``cdi-annotations``, ``cdi-cri`` (several at once, comma-separated in
  ``DEVICE_LIST_STRATEGY``); device ID strategies ``uuid``, ``index``.
- The chart passes ``migStrategy`` and the other set options to the plugin's container as
  variables (``MIG_STRATEGY``...), and the plugin takes its command line, then its
  variables, then its config file (``api/config/v1/config.go`` ``NewConfig``).
- Resources: ``nvidia.com/gpu``; with the ``mixed`` strategy a GPU in MIG mode is
  advertised as ``nvidia.com/mig-<profile>`` instead (``internal/rm/rm.go``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import RefusedValue
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    ChartSource,
)

__all__ = [
    "CHART",
    "CHART_TOLERATIONS",
    "DEFAULT_AFFINITY",
    "DEVICE_ID_STRATEGIES",
    "DEVICE_LIST_STRATEGIES",
    "MIG_STRATEGIES",
    "READ_LINES",
    "REPO_URL",
    "STAND_IN_MODE",
    "ChartVersion",
    "DevicePluginError",
    "chart_source",
    "parse_chart_version",
]

#: The chart's name (``Chart.yaml``).
CHART = "nvidia-device-plugin"
#: NVIDIA's Helm repository of the chart.
REPO_URL = "https://nvidia.github.io/k8s-device-plugin"
#: The release lines whose values and templates this package was written against; an older
#: line is refused, a newer one is deployed with a warning.
READ_LINES = ((0, 17), (0, 18))
#: ``--mig-strategy`` (``MIG_STRATEGY``): how GPUs in MIG mode are advertised.
MIG_STRATEGIES = ("none", "single", "mixed")
#: ``--device-list-strategy`` (``DEVICE_LIST_STRATEGY``): how the devices reach a container.
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
#: ``--device-id-strategy`` (``DEVICE_ID_STRATEGY``): how devices are named to the runtime.
DEVICE_ID_STRATEGIES = ("uuid", "index")
#: values.yaml ``tolerations``: kept when the role sets its own.
CHART_TOLERATIONS = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
#: values.yaml ``affinity``: a node needs one of these labels (set by Node Feature
#: Discovery or by hand). It is ANDed with ``nodeSelector``, so by itself it would decide
#: too; the role replaces it (``values.selector_affinity``).
DEFAULT_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]}
                for k, v in (
                    ("feature.node.kubernetes.io/pci-10de.present", "true"),
                    ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                    ("nvidia.com/gpu.present", "true"),
                )
            ]
        }
    }
}
#: The lab's GPU simulator chart speaks the device plugin API in this mode (chart value
#: ``mode``); its DaemonSet then takes ``devicePlugin.nodeSelector`` and the
#: ``kubeletPlugin.affinity``/``tolerations`` of its pod.
STAND_IN_MODE = "device-plugin"


class DevicePluginError(RefusedValue):
    """A refused input: ``variable``, ``value``, ``reason``, ``fix``; ``str()`` is
    ``"<variable>=<value>: <reason>; fix: <fix>"``."""


#: ASCII digits only, at most 18 to a number (``\d`` would take full-width digits, and a
#: number of thousands of digits is no release).
_VERSION_RE = re.compile(
    r"^v?([0-9]{1,18})\.([0-9]{1,18})\.([0-9]{1,18})(?:-([0-9A-Za-z.\-]+))?(?:\+[0-9A-Za-z.\-]+)?\Z"
)


@dataclass(frozen=True, order=True)
class ChartVersion:
    """A release of the chart: ``line`` (major, minor), ``patch``, ``text`` as the chart
    writes it (``0.17.4``, no leading v)."""

    line: tuple[int, int]
    patch: int
    text: str = field(compare=False)


def parse_chart_version(value: Any, variable: str = "device_plugin_chart_version") -> ChartVersion:
    """Parse ``"0.17.4"``, ``"v0.17.4"`` or ``"0.18.0-rc.1"``. Raises DevicePluginError
    for text that is not a version and for a line older than ``READ_LINES`` (the values
    this package writes were read from those lines only)."""
    match = _VERSION_RE.match(value.strip()) if isinstance(value, str) else None
    if not match:
        raise DevicePluginError(
            variable,
            value,
            "not a chart version",
            "give a release of NVIDIA's nvidia-device-plugin chart, such as 0.17.4",
        )
    major, minor, patch = int(match.group(1)), int(match.group(2)), int(match.group(3))
    text = f"{major}.{minor}.{patch}" + (f"-{match.group(4)}" if match.group(4) else "")
    if (major, minor) < READ_LINES[0]:
        raise DevicePluginError(
            variable,
            value,
            f"older than the {_lines()} releases whose values the role writes",
            "give 0.17.4 or later",
        )
    return ChartVersion((major, minor), patch, text)


def _lines() -> str:
    return " and ".join(f"{a}.{b}" for a, b in READ_LINES)


def newer_than_read(version: ChartVersion) -> str:
    """A warning for a release of a line newer than ``READ_LINES``, or ""."""
    if version.line <= READ_LINES[-1]:
        return ""
    return (
        f"chart {CHART} {version.text} is newer than the {_lines()} releases whose values the "
        "role was written against; check its values.yaml for renamed values"
    )


def chart_source(
    version: ChartVersion,
    *,
    chart_path: str = "",
    local_chart: Mapping[str, Any] | None = None,
    stand_in: bool = False,
    repo_url: str = "",
) -> ChartSource:
    """Choose the chart.

    - ``chart_path`` set (air-gapped sites, the lab): that directory, ``local_chart`` its
      parsed ``Chart.yaml``. NVIDIA's chart there must be of ``version``; another chart is
      refused unless ``stand_in`` (the lab's GPU simulator chart, in its device-plugin mode).
    - else NVIDIA's repository (``repo_url`` replaces it: a mirror).

    Raises DevicePluginError naming ``device_plugin_chart_path``,
    ``device_plugin_chart_version`` or ``device_plugin_chart_stand_in``.
    """
    if not chart_path:
        if stand_in:
            raise DevicePluginError(
                "device_plugin_chart_stand_in",
                True,
                "a stand-in is a local chart, and device_plugin_chart_path is empty",
                "set device_plugin_chart_path to the stand-in chart's directory (the lab's "
                "GPU simulator chart), or set device_plugin_chart_stand_in: false",
            )
        return ChartSource(CHART, CHART, version.text, repo_url or REPO_URL)
    meta = local_chart if isinstance(local_chart, Mapping) else {}
    name = str(meta.get("name") or "")
    if not name:
        raise DevicePluginError(
            "device_plugin_chart_path",
            chart_path,
            "no Chart.yaml with a name was found there",
            "give the directory of an unpacked chart (the one holding Chart.yaml)",
        )
    if name == CHART:
        found = parse_chart_version(meta.get("version"), f"{chart_path}/Chart.yaml version")
        if found.text != version.text:
            raise DevicePluginError(
                "device_plugin_chart_version",
                version.text,
                f"device_plugin_chart_path={chart_path} holds {name} {found.text}",
                f"set device_plugin_chart_version: {found.text}, or point "
                "device_plugin_chart_path at the chart of that release",
            )
        return ChartSource(name, chart_path, None, None, True, False)
    if not stand_in:
        raise DevicePluginError(
            "device_plugin_chart_path",
            chart_path,
            f"holds chart {name!r}, not NVIDIA's {CHART}",
            "point it at NVIDIA's chart (deployments/helm/nvidia-device-plugin of the "
            "release), or set device_plugin_chart_stand_in: true for a chart that stands in "
            f"for it (the lab's GPU simulator chart, with mode: {STAND_IN_MODE})",
        )
    return ChartSource(name, chart_path, None, None, True, True)
