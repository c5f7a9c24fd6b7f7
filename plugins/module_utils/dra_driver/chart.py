# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The NVIDIA DRA driver Helm chart: its names, where it comes from and its versions
(``parse_chart_version``, ``chart_source``, ``parse_release_chart``), the driver's names
(``NVIDIA_DRIVER``, the DeviceClasses the chart creates: ``GPU_CLASS``, ``MIG_CLASS``,
``VFIO_DEVICE_CLASS``, ``COMPUTE_DOMAIN_DEVICE_CLASSES``; the one place they are written),
the values' facts (driver roots, the chart's toleration), the Kubernetes minimums
(``CHART_KUBE_VERSION_MIN``, ``DOCUMENTED_KUBERNETES_MIN``, ``DYNAMIC_MIG_KUBERNETES_MIN``)
and ``DraDriverError``, whose text names the variable, the value and the fix.

Sources: kubernetes-sigs/dra-driver-nvidia-gpu (formerly NVIDIA/k8s-dra-driver-gpu)
docs/install.md, docs/upgrade.md, docs/prerequisites.md, deployments/helm/*/Chart.yaml and
values.yaml (see ``dra_driver.values``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import RefusedValue
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import driver as nvd

__all__ = [
    "CHART_DEVICE_CLASSES",
    "CHART_KUBE_VERSION_MIN",
    "COMPUTE_DOMAIN_DEVICE_CLASSES",
    "COMPUTE_DOMAIN_DRIVER",
    "DOCUMENTED_KUBERNETES_MIN",
    "GPU_CLASS",
    "GPU_DEVICE_CLASSES",
    "MIG_CLASS",
    "NVIDIA_DRIVER",
    "PLUGIN_CONTAINERS",
    "VFIO_DEVICE_CLASS",
    "ChartSource",
    "ChartVersion",
    "DraDriverError",
    "chart_downgrade",
    "chart_driver_minimum",
    "chart_drivers",
    "chart_source",
    "chart_upgrade_steps",
    "parse_chart_version",
    "parse_release_chart",
]


LEGACY_CHART = "nvidia-dra-driver-gpu"


SEMVER_CHART = "dra-driver-nvidia-gpu"


NVIDIA_CHARTS = (LEGACY_CHART, SEMVER_CHART)


NGC_REPO_URL = "https://helm.ngc.nvidia.com/nvidia"


OCI_CHART_REF = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"


#: Chart.yaml ``kubeVersion`` of every release from 25.3.2 on: ``>=1.32.0-0``.
CHART_KUBE_VERSION_MIN = (1, 32)


#: docs/prerequisites.md: "Kubernetes v1.34.2 or newer".
DOCUMENTED_KUBERNETES_MIN = (1, 34, 2)


DOCUMENTED_MIN = ".".join(map(str, DOCUMENTED_KUBERNETES_MIN))


#: DynamicMIG publishes partitionable devices (KEP-4815), which the driver supports from
#: Kubernetes 1.34 (the driver's partitions code: combined slices on 1.34, split from 1.35).
DYNAMIC_MIG_KUBERNETES_MIN = (1, 34)


CHART_MIN = ".".join(map(str, CHART_KUBE_VERSION_MIN))


#: ``chart_kubernetes_minimum``: below the chart's ``kubeVersion`` (helm refuses the install).
BELOW_CHART_KUBE_VERSION = "chart-kube-version"
#: ``chart_kubernetes_minimum``: installable, but below the documented minimum.
BELOW_DOCUMENTED_MINIMUM = "documented-minimum"


def chart_kubernetes_minimum(release: tuple[int, ...]) -> str | None:
    """Which of the chart's Kubernetes minimums ``release`` (``(1, 33)`` or ``(1, 34, 1)``;
    a missing patch counts as 0) is below: ``BELOW_CHART_KUBE_VERSION`` (under Chart.yaml
    ``kubeVersion``, ``CHART_KUBE_VERSION_MIN``), ``BELOW_DOCUMENTED_MINIMUM`` (under
    docs/prerequisites.md, ``DOCUMENTED_KUBERNETES_MIN``), or None. The same for every
    chart release from 25.3.2 on. The rule only: the caller decides what each means (the
    dra_driver role refuses both unless told to accept the second; preflight reports an
    error or a warning)."""
    full = (*release, 0, 0, 0)[:3]
    if full[:2] < CHART_KUBE_VERSION_MIN:
        return BELOW_CHART_KUBE_VERSION
    if full < DOCUMENTED_KUBERNETES_MIN:
        return BELOW_DOCUMENTED_MINIMUM
    return None


#: The DRA driver name: ``spec.driver`` of the ResourceSlices the GPU kubelet plugin
#: publishes, ``device.driver`` in CEL, the attribute and capacity domain of its devices
#: (cmd/gpu-kubelet-plugin ``DriverName``).
NVIDIA_DRIVER = "gpu.nvidia.com"


HOST_DRIVER_ROOT = "/"


OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"


NAME_OVERRIDE_FROM_LEGACY = LEGACY_CHART


#: The DeviceClass of whole GPUs (``type == 'gpu'`` devices; templates/deviceclass-gpu.yaml).
GPU_CLASS = "gpu.nvidia.com"


#: The DeviceClass of MIG devices (``type == 'mig'`` devices; templates/deviceclass-mig.yaml).
MIG_CLASS = "mig.nvidia.com"


#: The DeviceClasses the chart creates whenever GPUs are enabled, in every release.
GPU_DEVICE_CLASSES = (GPU_CLASS, MIG_CLASS)


#: The passthrough DeviceClass (``type == 'vfio'`` devices, usable with the
#: PassthroughSupport gate) that the chart renders whenever GPUs are enabled, from 0.4 on
#: (the chart's deviceclass templates; NVIDIA's 25.12.0 documentation lists no such class).
VFIO_DEVICE_CLASS = "vfio.gpu.nvidia.com"
VFIO_DEVICE_CLASS_LEVEL = (0, 4)


COMPUTE_DOMAIN_DEVICE_CLASSES = (
    "compute-domain-daemon.nvidia.com",
    "compute-domain-default-channel.nvidia.com",
)


#: The chart's second DRA driver: ComputeDomain daemons and IMEX channels, published by the
#: container ``compute-domains`` of the same kubelet-plugin pods (cmd/compute-domain-kubelet-
#: plugin ``DriverName``; the DeviceClasses above select ``device.driver`` by it).
COMPUTE_DOMAIN_DRIVER = "compute-domain.nvidia.com"
#: The kubelet-plugin pod's container that serves each of the chart's drivers.
PLUGIN_CONTAINERS = {NVIDIA_DRIVER: "gpus", COMPUTE_DOMAIN_DRIVER: "compute-domains"}


def chart_drivers(driver: str) -> tuple[str, ...]:
    """The DRA drivers whose kubelet plugins run with ``driver``'s: both of NVIDIA's chart
    (``gpu.nvidia.com``, ``compute-domain.nvidia.com``) for the chart's GPU driver, else
    ``driver`` alone (another driver, such as the GPU simulator's under another name)."""
    return tuple(PLUGIN_CONTAINERS) if driver == NVIDIA_DRIVER else (driver,)


#: Every DeviceClass the newest chart can create (templates/deviceclass-*.yaml).
CHART_DEVICE_CLASSES = (*GPU_DEVICE_CLASSES, VFIO_DEVICE_CLASS, *COMPUTE_DOMAIN_DEVICE_CLASSES)


#: The chart's own toleration (0.4 values.yaml); kept when tolerations are set.
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


SHARING_CHOICES = ("time-slicing", "mps")


#: The extended resource the classic NVIDIA device plugin advertises.
DEVICE_PLUGIN_RESOURCE = "nvidia.com/gpu"


class DraDriverError(RefusedValue):
    """A refused input. ``variable``, ``value``, ``reason``, ``fix``;
    ``str()`` is ``"<variable>=<value>: <reason>; fix: <fix>"`` (``messages.refusal``)."""


# --------------------------------------------------------------------------------------
# Chart versions and where the chart comes from
# --------------------------------------------------------------------------------------

_CHART_VERSION_RE = re.compile(
    r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.\-]+))?(?:\+[0-9A-Za-z.\-]+)?\Z", re.ASCII
)


#: Calendar releases of the chart (year 25, month) and their driver-gate level.
CALENDAR_LEVEL = {(25, 3): (0, 1), (25, 8): (0, 2), (25, 12): (0, 3)}


@dataclass(frozen=True, order=True)
class ChartVersion:
    """A release of NVIDIA's DRA driver chart.

    ``level`` is the SemVer line its driver corresponds to ((0, 3) for 25.12.x, (0, 4) for
    0.4.x), used to order releases across the rename; ``legacy`` is True for the calendar
    releases (chart ``nvidia-dra-driver-gpu``).
    """

    level: tuple[int, int]
    patch: int
    text: str = field(compare=False)
    legacy: bool = field(compare=False)

    @property
    def chart_name(self) -> str:
        return LEGACY_CHART if self.legacy else SEMVER_CHART


def parse_chart_version(value: Any, variable: str = "dra_driver_chart_version") -> ChartVersion:
    """Parse ``"25.12.0"``, ``"v25.8.1"``, ``"0.4.0"`` or ``"0.5.0-dev"`` into a ChartVersion.

    Raises DraDriverError for text that is not a version, a calendar release that does not
    exist (25.3, 25.8 and 25.12 do), or a SemVer release before 0.4.0 (0.1-0.3 were never
    chart releases: those lines shipped as 25.3-25.12).
    """
    match = _CHART_VERSION_RE.match(str(value).strip()) if value is not None else None
    if not match:
        raise DraDriverError(
            variable,
            value,
            "not a chart version",
            "give a release of the NVIDIA DRA driver chart such as 0.4.0 (dra-driver-nvidia-gpu) "
            "or 25.12.0 (nvidia-dra-driver-gpu)",
        )
    major, minor, patch = int(match.group(1)), int(match.group(2)), int(match.group(3))
    text = f"{major}.{minor}.{patch}" + (f"-{match.group(4)}" if match.group(4) else "")
    if major >= 25:
        level = CALENDAR_LEVEL.get((major, minor))
        if level is None:
            raise DraDriverError(
                variable,
                value,
                "no such calendar release of the chart (there are 25.3.x, 25.8.x and 25.12.x; "
                "after 25.12.0 the chart is dra-driver-nvidia-gpu 0.4.0 and later)",
                "give 25.12.0 or 0.4.0",
            )
        return ChartVersion(level, patch, text, True)
    if (major, minor) < (0, 4):
        raise DraDriverError(
            variable,
            value,
            "SemVer releases of the chart start at 0.4.0 (0.1-0.3 shipped as 25.3, 25.8, 25.12)",
            "give 0.4.0 or later, or the calendar release 25.12.0",
        )
    return ChartVersion((major, minor), patch, text, False)


@dataclass(frozen=True)
class ChartSource:
    """Where Helm gets the chart: ``ref`` (chart reference or path), ``version`` (None for a
    local chart), ``repo_url`` (None unless a classic repository), ``name`` (the chart's
    name), ``local``, ``stand_in`` (a local chart that is not NVIDIA's but takes its values)."""

    name: str
    ref: str
    version: Optional[str]  # noqa: UP045 (evaluated at run time on old Pythons)
    repo_url: Optional[str]  # noqa: UP045
    local: bool = False
    stand_in: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ref": self.ref,
            "version": self.version,
            "repo_url": self.repo_url,
            "local": self.local,
            "stand_in": self.stand_in,
        }


def chart_source(
    version: ChartVersion,
    *,
    chart_path: str = "",
    local_chart: Mapping[str, Any] | None = None,
    stand_in: bool = False,
    chart_ref: str = "",
    repo_url: str = "",
) -> ChartSource:
    """Choose the chart for ``version``.

    - ``chart_path`` set (air-gapped sites, the lab): that directory; ``local_chart`` is its
      parsed ``Chart.yaml``. An NVIDIA chart there must be of ``version``; any other chart is
      refused unless ``stand_in`` (a chart with the same values shape, such as the lab's GPU
      simulator chart).
    - else 25.x: ``nvidia-dra-driver-gpu`` from NGC (``repo_url`` overrides the repository);
      0.4+: the OCI chart at registry.k8s.io (``chart_ref`` overrides it, e.g. a mirror).

    Raises DraDriverError naming ``dra_driver_chart_path``/``dra_driver_chart_version``.
    """
    if chart_path:
        meta = dict(local_chart or {})
        name = str(meta.get("name") or "")
        if not name:
            raise DraDriverError(
                "dra_driver_chart_path",
                chart_path,
                "no Chart.yaml with a name was found there",
                "give the directory of an unpacked chart (the one holding Chart.yaml)",
            )
        if name in NVIDIA_CHARTS:
            found = parse_chart_version(meta.get("version"), f"{chart_path}/Chart.yaml version")
            if found.text != version.text or name != version.chart_name:
                raise DraDriverError(
                    "dra_driver_chart_version",
                    version.text,
                    f"dra_driver_chart_path={chart_path} holds {name} {found.text}",
                    f"set dra_driver_chart_version: {found.text}, or point "
                    "dra_driver_chart_path at the chart of that release",
                )
        elif not stand_in:
            raise DraDriverError(
                "dra_driver_chart_path",
                chart_path,
                f"holds chart {name!r}, not NVIDIA's DRA driver chart "
                f"({' or '.join(NVIDIA_CHARTS)})",
                "point it at NVIDIA's chart, or set dra_driver_chart_stand_in: true for a chart "
                "that takes the same values (the lab's GPU simulator chart)",
            )
        return ChartSource(name, chart_path, None, None, True, name not in NVIDIA_CHARTS)
    if version.legacy:
        return ChartSource(LEGACY_CHART, LEGACY_CHART, version.text, repo_url or NGC_REPO_URL)
    return ChartSource(SEMVER_CHART, chart_ref or OCI_CHART_REF, version.text, repo_url or None)


_RELEASE_CHART_RE = re.compile(r"^(?P<name>.+?)-(?P<version>v?\d+\.\d+\.\d+(?:[-+].*)?)$")


def parse_release_chart(chart: str) -> tuple[str, str]:
    """Split Helm's ``<name>-<version>`` chart field (``helm list``/``helm status``), e.g.
    ``"dra-driver-nvidia-gpu-0.5.0-dev"`` -> ``("dra-driver-nvidia-gpu", "0.5.0-dev")``.
    Returns ``(chart, "")`` when no version can be split off."""
    match = _RELEASE_CHART_RE.match(chart or "")
    if not match:
        return chart or "", ""
    return match.group("name"), match.group("version")


# --------------------------------------------------------------------------------------
# What a chart release asks of the host driver, and how releases follow each other
# --------------------------------------------------------------------------------------

#: Where the chart's rules below come from.
PREREQUISITES_DOC = "kubernetes-sigs/dra-driver-nvidia-gpu docs/prerequisites.md"
UPGRADE_DOC = "kubernetes-sigs/dra-driver-nvidia-gpu docs/upgrade.md"
#: docs/prerequisites.md: ComputeDomains (IMEXDaemonsWithDNSNames) need this driver or later.
COMPUTE_DOMAIN_DRIVER_MIN = "570.158.01"


def chart_driver_minimum(version: ChartVersion, compute_domains: bool = False) -> str:
    """The oldest host driver release (``"565.0"``, ``"570.158.01"``) that chart ``version``
    works with: branch ``nvidia.driver.DRA_MIN_BRANCH`` (565) for GPU allocation,
    ``COMPUTE_DOMAIN_DRIVER_MIN`` with ``compute_domains``. The same for every release from
    25.3 to 0.5 (``PREREQUISITES_DOC``)."""
    del version  # one minimum for every release so far; the argument keeps callers exact
    return COMPUTE_DOMAIN_DRIVER_MIN if compute_domains else f"{nvd.DRA_MIN_BRANCH}.0"


def chart_downgrade(installed: ChartVersion, target: ChartVersion) -> str | None:
    """Why going from the ``installed`` release to ``target`` is not supported, or None:
    back from 0.4 or later to a calendar release (the kubelet plugin's checkpoint format
    changed in 0.4, ``UPGRADE_DOC``)."""
    if not installed.legacy and target.legacy:
        return (
            f"the release has {installed.chart_name} {installed.text}; going back to the "
            "calendar releases is not supported (the kubelet plugin's checkpoint format "
            "changed in 0.4, docs/upgrade.md)"
        )
    return None


def chart_upgrade_steps(installed: ChartVersion | None, target: ChartVersion) -> list[str]:
    """What an upgrade from ``installed`` (None: no release) to ``target`` does before and
    with ``helm upgrade``, in order (``UPGRADE_DOC``): Helm does not upgrade CRDs, so the
    target's CRDs are applied first; the first upgrade from a calendar release to 0.4 or
    later keeps the old object names with ``nameOverride``. Empty when nothing changes."""
    if installed is not None and installed == target and installed.legacy == target.legacy:
        return []
    if installed is None:
        return [f"helm install {target.chart_name} {target.text} (controller, kubelet plugin)"]
    steps = [f"apply the CRDs of {target.chart_name} {target.text} (Helm does not upgrade CRDs)"]
    rename = installed.legacy and not target.legacy
    override = f" with nameOverride={NAME_OVERRIDE_FROM_LEGACY}" if rename else ""
    steps.append(
        f"helm upgrade to {target.chart_name} {target.text}{override}: the controller, then "
        "the kubelet plugin DaemonSet"
    )
    return steps


def bool_variable(value: Any, variable: str, shown: Any) -> bool:
    parsed = ig.variable_bool(value)  # Ansible's own booleans, as the role reads them
    if parsed is None:
        raise DraDriverError(variable, shown, "not a boolean", "give true or false")
    return parsed
