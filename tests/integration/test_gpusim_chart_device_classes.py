"""The GPU simulator's chart (``lab/gpu-simulator/chart``) renders the DeviceClasses of the
NVIDIA DRA driver chart release it stands in for, with real ``helm template``.

NVIDIA's chart creates ``vfio.gpu.nvidia.com`` from 25.12.0 on (its
``templates/deviceclass-vfio-gpu.yaml`` exists in nvidia-dra-driver-gpu 25.12.0 and in
dra-driver-nvidia-gpu 0.4.0, not in 25.3.x or 25.8.x). The release comes from the
``dra_driver`` role's own values (``dra_driver.values.plan`` with the stand-in chart).
Needs the helm binary of the lab cache (built from its Go module).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

pytestmark = pytest.mark.integration

CHART = Path(__file__).parents[2] / "lab" / "gpu-simulator" / "chart"
VFIO = "vfio.gpu.nvidia.com"


def role_values(chart_version: str) -> dict[str, Any]:
    """The values the dra_driver role gives the stand-in chart for ``chart_version``."""
    return ddv.plan(
        {
            "chart_version": chart_version,
            "chart_path": str(CHART),
            "local_chart": yaml.safe_load((CHART / "Chart.yaml").read_text()),
            "chart_stand_in": True,
            "kubernetes_version": "1.37.2",
            "namespace": "gpufleet-gpu-simulator",
            "node_selector": {"nvidia.com/gpu.present": "true"},
        }
    ).values


def template(helm: Path, tmp_path: Path, values: dict[str, Any]) -> subprocess.CompletedProcess:
    vfile = tmp_path / "values.yaml"
    vfile.write_text(yaml.safe_dump(values))
    argv = [str(helm), "template", "gpusim", str(CHART), "--namespace", "gpusim", "-f",
            str(vfile), "--api-versions", "resource.k8s.io/v1"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def classes(helm: Path, tmp_path: Path, values: dict[str, Any]) -> dict[str, Any]:
    out = template(helm, tmp_path, values)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "DeviceClass"}


@pytest.mark.parametrize(
    ("chart_version", "has_vfio"),
    [("25.3.2", False), ("25.8.1", False), ("25.12.0", True), ("0.4.0", True), ("0.5.0-dev", True)],
)
def test_vfio_device_class_follows_the_release_stood_in_for(
    helm: Path, tmp_path: Path, chart_version: str, has_vfio: bool
) -> None:
    got = classes(helm, tmp_path, role_values(chart_version))
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= set(got)
    assert (VFIO in got) is has_vfio
    if has_vfio:
        vfio = got[VFIO]
        assert vfio["apiVersion"] == "resource.k8s.io/v1"
        assert vfio["spec"]["selectors"] == [
            {
                "cel": {
                    "expression": "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].type == 'vfio'"
                }
            }
        ]
        assert "extendedResourceName" not in vfio["spec"]


def test_without_a_release_the_newest_line_is_rendered(helm: Path, tmp_path: Path) -> None:
    assert VFIO in classes(helm, tmp_path, {})
    assert VFIO not in classes(helm, tmp_path, {"resources": {"gpus": {"enabled": False}}})


def test_a_release_that_is_no_version_is_refused(helm: Path, tmp_path: Path) -> None:
    out = template(helm, tmp_path, {"simulator": {"nvidiaChartVersion": "latest"}})
    assert out.returncode != 0
    assert 'simulator.nvidiaChartVersion="latest" is not a release' in out.stderr


def test_device_plugin_mode_renders_only_the_device_plugin(helm: Path, tmp_path: Path) -> None:
    """Mode device-plugin: one DaemonSet that runs the simulator as a device plugin on the
    device-plugin pool's nodes, with the kubelet's device plugin directory; no DeviceClass,
    no RBAC (it reads nothing from the API server)."""
    values = {"mode": "device-plugin", "devicePlugin": {"nodeSelector": {"pool": "dp"}}}
    out = template(helm, tmp_path, values)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    kinds = sorted(d["kind"] for d in docs)
    assert "DeviceClass" not in kinds and "ClusterRole" not in kinds, kinds
    daemonsets = [d for d in docs if d["kind"] == "DaemonSet"]
    assert len(daemonsets) == 1, kinds
    pod = daemonsets[0]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "dp"}
    assert any("--mode=device-plugin" in c.get("args", []) for c in pod["containers"])
    host_paths = {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert "/var/lib/kubelet/device-plugins" in host_paths
    dra = [d for d in yaml.safe_load_all(template(helm, tmp_path, {}).stdout) if d]
    assert "DeviceClass" in {d["kind"] for d in dra}


def test_an_unknown_mode_is_refused(helm: Path, tmp_path: Path) -> None:
    out = template(helm, tmp_path, {"mode": "both"})
    assert out.returncode != 0
    assert "mode" in out.stderr


def plugin_args(helm: Path, tmp_path: Path, values: dict[str, Any]) -> list[str]:
    out = template(helm, tmp_path, values)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    (container,) = ds["spec"]["template"]["spec"]["containers"]
    return container["args"]


def test_dynamic_mig_is_off_unless_set(helm: Path, tmp_path: Path) -> None:
    assert "--dynamic-mig" not in plugin_args(helm, tmp_path, {})
    assert "--dynamic-mig" not in plugin_args(helm, tmp_path, {"dynamicMIG": False})
    assert "--dynamic-mig" in plugin_args(helm, tmp_path, {"dynamicMIG": True})


@pytest.mark.parametrize("gate, on", [(True, True), (False, False), ("true", True), (None, False)])
def test_nvidias_dynamic_mig_gate_turns_the_mode_on(
    helm: Path, tmp_path: Path, gate: object, on: bool
) -> None:
    # the dra_driver role writes NVIDIA's featureGates.DynamicMIG for dra_driver_dynamic_mig
    args = plugin_args(helm, tmp_path, {"featureGates": {"DynamicMIG": gate, "MPSSupport": True}})
    assert ("--dynamic-mig" in args) is on


def test_dynamic_mig_needs_resource_v1_and_a_boolean(helm: Path, tmp_path: Path) -> None:
    out = template(
        helm, tmp_path, {"dynamicMIG": True, "resourceApiVersion": "resource.k8s.io/v1beta2"}
    )
    assert out.returncode != 0
    assert "resource.k8s.io/v1 only" in out.stderr
    out = template(helm, tmp_path, {"dynamicMIG": "yes"})
    assert out.returncode != 0
    assert "dynamicMIG=yes is not a boolean" in out.stderr


def plugin_pod(helm: Path, tmp_path: Path, values: dict[str, Any]) -> dict[str, Any]:
    out = template(helm, tmp_path, values)
    assert out.returncode == 0, out.stderr
    (ds,) = [d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "DaemonSet"]
    return ds["spec"]["template"]["spec"]


@pytest.mark.parametrize("root", [None, "/host-root"])
def test_dynamic_mig_mounts_the_driver_root_where_the_simulators_nvidia_smi_runs(
    helm: Path, tmp_path: Path, root: str | None
) -> None:
    # The plugin runs the simulator's nvidia-smi chrooted in NVIDIA's driver root, which
    # writes the state file: the root read-only, the state directory writable inside it.
    values: dict[str, Any] = {"dynamicMIG": True}
    if root:
        values["nvidiaDriverRoot"] = root
    pod = plugin_pod(helm, tmp_path, values)
    (container,) = pod["containers"]
    assert "--driver-root=/driver-root" in container["args"]
    mounts = {
        m["mountPath"]: (m["name"], m.get("readOnly", False)) for m in container["volumeMounts"]
    }
    assert mounts["/driver-root"] == ("driver-root", True)
    assert mounts["/driver-root/var/lib/gpufleet-gpu-simulator"] == ("simulator-state", False)
    assert mounts["/var/lib/gpufleet-gpu-simulator"] == ("simulator-state", True)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["driver-root"]["hostPath"] == {"path": root or "/", "type": "Directory"}
    static = plugin_pod(helm, tmp_path, {})
    assert "driver-root" not in {v["name"] for v in static["volumes"]}
    assert not any(a.startswith("--driver-root") for a in static["containers"][0]["args"])
