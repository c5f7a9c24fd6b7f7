"""The NVIDIA DRA driver's names have one owner, ``dra_driver.chart``: the driver name
``gpu.nvidia.com`` and the DeviceClasses the chart creates (``gpu.nvidia.com``,
``mig.nvidia.com``, ``vfio.gpu.nvidia.com``, ``compute-domain-*.nvidia.com``).

Sources: kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0 ``deployments/helm/*/templates/
deviceclass-*.yaml`` and ``cmd/gpu-kubelet-plugin`` (``DriverName``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import classes as ddcl

from tests.unit.source_literals import ROOT, written_outside

pytestmark = pytest.mark.unit

OWNER = "plugins/module_utils/dra_driver/chart.py"

#: The driver name or a DeviceClass of the chart, also inside a regular expression
#: (``gpu\.nvidia\.com``); not ``nvidia.com/gpu`` (a label, the device plugin's extended
#: resource), ``resource.nvidia.com`` (the opaque-config API group) or web hosts.
DRIVER_NAMES = r"(?<![\w.\\-])(?:gpu|mig|vfio\\?\.gpu|compute-domain-[a-z-]+)\\?\.nvidia\\?\.com"


def test_the_names_match_the_pattern_the_next_test_greps_for() -> None:
    rx = re.compile(DRIVER_NAMES)
    for name in (ddc.NVIDIA_DRIVER, *ddc.CHART_DEVICE_CLASSES, r"gpu\.nvidia\.com/memorySlice"):
        assert rx.search(name), name
    for other in ("nvidia.com/gpu", "resource.nvidia.com/v1beta1", "https://docs.nvidia.com/x"):
        assert not rx.search(other), other


def test_driver_name_and_device_classes_are_written_only_in_chart() -> None:
    assert written_outside(DRIVER_NAMES, {OWNER}) == []


def test_the_chart_names() -> None:
    assert ddc.NVIDIA_DRIVER == "gpu.nvidia.com"
    assert ddc.GPU_DEVICE_CLASSES == ("gpu.nvidia.com", "mig.nvidia.com")
    assert ddc.CHART_DEVICE_CLASSES == (
        "gpu.nvidia.com",
        "mig.nvidia.com",
        "vfio.gpu.nvidia.com",
        "compute-domain-daemon.nvidia.com",
        "compute-domain-default-channel.nvidia.com",
    )
    assert set(ddcl.CONFIG_CLASS.values()) == set(ddc.GPU_DEVICE_CLASSES)


def role_default(role: str, name: str) -> object:
    doc = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    return doc[name]


def test_role_defaults_agree_with_the_chart() -> None:
    assert role_default("kueue", "kueue_device_classes") == list(ddc.GPU_DEVICE_CLASSES)
    assert role_default("mig", "mig_resourceslice_driver") == ddc.NVIDIA_DRIVER
    assert role_default("monitoring", "monitoring_dra_driver_name") == ddc.NVIDIA_DRIVER


def test_the_gpu_simulator_chart_creates_classes_of_the_chart() -> None:
    templates = Path(ROOT / "lab" / "gpu-simulator" / "chart" / "templates")
    names = set()
    for path in sorted(templates.glob("deviceclass-*.yaml")):
        names |= set(re.findall(r"^\s+name:\s*([\w.-]+)\s*$", path.read_text(), re.MULTILINE))
    assert set(ddc.GPU_DEVICE_CLASSES) <= names <= set(ddc.CHART_DEVICE_CLASSES)


@pytest.mark.parametrize(
    ("release", "below"),
    [
        ((1, 31), ddc.BELOW_CHART_KUBE_VERSION),
        ((1, 31, 14), ddc.BELOW_CHART_KUBE_VERSION),
        ((1, 32), ddc.BELOW_DOCUMENTED_MINIMUM),
        ((1, 34), ddc.BELOW_DOCUMENTED_MINIMUM),
        ((1, 34, 1), ddc.BELOW_DOCUMENTED_MINIMUM),
        ((1, 34, 2), None),
        ((1, 37, 2), None),
    ],
)
def test_chart_kubernetes_minimum(release: tuple[int, ...], below: str | None) -> None:
    """Chart.yaml ``kubeVersion: >=1.32.0-0``; docs/prerequisites.md: Kubernetes v1.34.2."""
    assert ddc.chart_kubernetes_minimum(release) == below


def test_the_chart_minimum_rule_is_compared_only_in_chart() -> None:
    """The dra_driver role and preflight ask ``chart_kubernetes_minimum`` and pick the
    severity themselves; no other module compares a release with the minimums."""
    uses = []
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if rel != OWNER and isinstance(node, ast.Compare):
                names = {
                    n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
                    for n in ast.walk(node)
                }
                if names & {"CHART_KUBE_VERSION_MIN", "DOCUMENTED_KUBERNETES_MIN"}:
                    uses.append(f"{rel}:{node.lineno}")
    assert uses == []


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


def test_the_charts_drivers_run_in_one_kubelet_plugin_pod() -> None:
    assert ddc.chart_drivers(ddc.NVIDIA_DRIVER) == (ddc.NVIDIA_DRIVER, ddc.COMPUTE_DOMAIN_DRIVER)
    assert ddc.chart_drivers("gpu.example.com") == ("gpu.example.com",)
    assert ddc.PLUGIN_CONTAINERS == {
        ddc.NVIDIA_DRIVER: "gpus",
        ddc.COMPUTE_DOMAIN_DRIVER: "compute-domains",
    }
    # the ComputeDomain DeviceClasses select by that driver name
    assert all(c.startswith("compute-domain-") for c in ddc.COMPUTE_DOMAIN_DEVICE_CLASSES)


# ------------------------------------------------------------ driver minimum, upgrade steps


def test_every_chart_release_needs_branch_565_and_compute_domains_570_158_01() -> None:
    # docs/prerequisites.md of kubernetes-sigs/dra-driver-nvidia-gpu
    for text in ("25.8.1", "25.12.0", "0.4.0", "0.5.0"):
        version = ddc.parse_chart_version(text)
        assert ddc.chart_driver_minimum(version) == "565.0"
        assert ddc.chart_driver_minimum(version, compute_domains=True) == "570.158.01"


def test_going_back_from_0_4_to_a_calendar_release_is_the_one_forbidden_downgrade() -> None:
    v0_4, v0_5 = ddc.parse_chart_version("0.4.0"), ddc.parse_chart_version("0.5.0")
    v25_12 = ddc.parse_chart_version("25.12.0")
    reason = ddc.chart_downgrade(v0_4, v25_12)
    assert reason is not None
    assert "dra-driver-nvidia-gpu 0.4.0" in reason and "docs/upgrade.md" in reason
    assert ddc.chart_downgrade(v25_12, v0_4) is None
    assert ddc.chart_downgrade(v0_5, v0_4) is None  # no rule of the chart forbids it


def test_an_upgrade_applies_the_crds_first_and_renames_with_name_override() -> None:
    v0_4, v0_5 = ddc.parse_chart_version("0.4.0"), ddc.parse_chart_version("0.5.0")
    v25_12 = ddc.parse_chart_version("25.12.0")
    assert ddc.chart_upgrade_steps(v0_4, v0_4) == []
    assert ddc.chart_upgrade_steps(None, v0_4) == [
        "helm install dra-driver-nvidia-gpu 0.4.0 (controller, kubelet plugin)"
    ]
    rename = ddc.chart_upgrade_steps(v25_12, v0_4)
    assert rename[0].startswith("apply the CRDs of dra-driver-nvidia-gpu 0.4.0")
    assert "nameOverride=nvidia-dra-driver-gpu" in rename[1]
    assert "nameOverride" not in ddc.chart_upgrade_steps(v0_4, v0_5)[1]
