"""The dra_driver role's Helm values rendered by real `helm template` against a chart of the
NVIDIA DRA driver's values shape (``tests/unit/data/charts/nvidia-dra-driver-gpu-shape``, a
fixture of this project that consumes the same keys and refuses the same inputs).

Each case builds values with ``dra_driver.values.plan`` (the role's own code path) and checks
what the chart renders from them; the refusal cases check that the plan refuses exactly the
values the chart fails on. Needs the helm binary of the lab cache (built from its Go module).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import merge as common_merge
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import nodes as ddn
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import values as ddv

pytestmark = pytest.mark.integration

CHART = Path(__file__).parents[1] / "unit" / "data" / "charts" / "nvidia-dra-driver-gpu-shape"
NAMESPACE = "nvidia-dra-driver-gpu"
RELEASE = "nvidia-dra-driver-gpu"


def plan(**over: Any) -> ddv.DraDriverPlan:
    inputs: dict[str, Any] = {
        "chart_version": "0.4.0",
        "chart_path": str(CHART),
        "local_chart": yaml.safe_load((CHART / "Chart.yaml").read_text()),
        "kubernetes_version": "1.37.2",
        "namespace": NAMESPACE,
        "node_selector": {"nvidia.com/gpu.present": "true"},
    }
    inputs.update(over)
    return ddv.plan(inputs)


def template(
    helm: Path,
    tmp_path: Path,
    values: dict[str, Any],
    *,
    namespace: str = NAMESPACE,
    api: str = "resource.k8s.io/v1",
    kube: str = "1.37.2",
) -> subprocess.CompletedProcess[str]:
    vfile = tmp_path / "values.yaml"
    vfile.write_text(yaml.safe_dump(values))
    argv = [str(helm), "template", RELEASE, str(CHART), "--namespace", namespace, "-f", str(vfile),
            "--kube-version", kube, "--api-versions", api]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def rendered(helm: Path, tmp_path: Path, values: dict[str, Any], **kw: Any) -> dict[str, Any]:
    out = template(helm, tmp_path, values, **kw)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    return {
        "daemonset": next(d for d in docs if d["kind"] == "DaemonSet"),
        "classes": {d["metadata"]["name"]: d for d in docs if d["kind"] == "DeviceClass"},
    }


def env_of(ds: dict[str, Any], container: str) -> dict[str, str]:
    c = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == container)
    return {e["name"]: e["value"] for e in c["env"]}


def test_role_values_render_the_gpu_plugin(helm: Path, tmp_path: Path) -> None:
    out = rendered(helm, tmp_path, plan(sharing=["time-slicing", "mps"]).values)
    ds = out["daemonset"]
    pod = ds["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["gpus"]
    assert env_of(ds, "gpus")["NVIDIA_DRIVER_ROOT"] == "/"
    assert env_of(ds, "gpus")["FEATURE_GATES"] == "MPSSupport=true,TimeSlicingSettings=true"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= set(out["classes"])
    assert out["classes"]["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"


def test_gpu_operator_root_and_compute_domains(helm: Path, tmp_path: Path) -> None:
    out = rendered(helm, tmp_path, plan(gpu_operator=True, compute_domains=True).values)
    names = [c["name"] for c in out["daemonset"]["spec"]["template"]["spec"]["containers"]]
    assert names == ["gpus", "compute-domains"]
    assert env_of(out["daemonset"], "gpus")["NVIDIA_DRIVER_ROOT"] == "/run/nvidia/driver"
    assert "compute-domain-daemon.nvidia.com" in out["classes"]


def test_scheduling_matches_what_the_node_check_assumes(helm: Path, tmp_path: Path) -> None:
    """The pod template the chart renders is the one node_problems/daemonset_verdict judge."""
    p = plan(node_selector={}, node_taints=[{"key": "dedicated", "effect": "NoSchedule"}])
    ds = rendered(helm, tmp_path, p.values)["daemonset"]
    spec = ds["spec"]["template"]["spec"]
    labelled = {"metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"}},
                "spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}}  # fmt: skip
    bare = {"metadata": {"name": "gpu-2", "labels": {}}, "spec": {}}
    assert spec["affinity"] == ddn.default_affinity(legacy=False)
    for n in (labelled, bare):
        live = ddn.kubelet_plugin_problem(n, spec)
        assert bool(live) == bool(ddn.node_problems([n], [n["metadata"]["name"]], p.values))
    assert ddn.node_problems([labelled], ["gpu-1"], p.values) == []


def test_name_override_keeps_the_legacy_object_names(helm: Path, tmp_path: Path) -> None:
    upgraded = plan(installed={"chart": "nvidia-dra-driver-gpu-25.12.0", "values": {}})
    fresh = plan()
    ds_up = rendered(helm, tmp_path, upgraded.values)["daemonset"]
    ds_fresh = rendered(helm, tmp_path, fresh.values)["daemonset"]
    # the 25.12 chart named its objects <release> when the release held the chart name
    assert ds_up["metadata"]["name"] == "nvidia-dra-driver-gpu-kubelet-plugin"
    assert (
        ds_up["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]
        == "nvidia-dra-driver-gpu"
    )
    assert (
        ds_fresh["metadata"]["name"] == "nvidia-dra-driver-gpu-dra-driver-nvidia-gpu-kubelet-plugin"
    )


def test_beta_api_cluster_gets_no_extended_resource_name(helm: Path, tmp_path: Path) -> None:
    p = plan(kubernetes_version="1.32.4", accept_below_documented_minimum=True)
    # helm template's built-in capabilities include resource.k8s.io/v1; a 1.32 API server's
    # discovery does not, so the chart's detection is given the version that server serves
    values = {**p.values, "resourceApiVersion": p.resource_api_version}
    out = rendered(helm, tmp_path, values, api="resource.k8s.io/v1beta1", kube="1.32.4")
    gpu_class = out["classes"]["gpu.nvidia.com"]
    assert gpu_class["apiVersion"] == p.resource_api_version == "resource.k8s.io/v1beta1"
    assert "extendedResourceName" not in gpu_class["spec"]


@pytest.mark.parametrize(
    ("bad", "chart_error", "variable"),
    [
        (
            {"gpuResourcesEnabledOverride": False},
            "gpuResourcesEnabledOverride=true",
            "gpuResourcesEnabledOverride",
        ),
        ({"nvidiaCtkPath": "/usr/bin/nvidia-ctk"}, "nvidiaCtkPath", "nvidiaCtkPath"),
        ({"namespace": "gpu"}, "'namespace' value", "namespace"),
    ],
)
def test_chart_and_plan_refuse_the_same_values(
    helm: Path, tmp_path: Path, bad: dict[str, Any], chart_error: str, variable: str
) -> None:
    values = common_merge.deep_merge(plan().values, bad)
    out = template(helm, tmp_path, values)
    assert out.returncode != 0 and chart_error in out.stderr
    with pytest.raises(ddc.DraDriverError) as info:
        plan(extra_values=bad)
    assert info.value.variable == f"dra_driver_extra_values.{variable}"


def test_missing_override_fails_the_chart(helm: Path, tmp_path: Path) -> None:
    values = plan().values
    del values["gpuResourcesEnabledOverride"]
    out = template(helm, tmp_path, values)
    assert out.returncode != 0 and "gpuResourcesEnabledOverride=true" in out.stderr


def test_default_namespace_refused_by_both(helm: Path, tmp_path: Path) -> None:
    values = plan().values
    assert "'default' namespace" in template(helm, tmp_path, values, namespace="default").stderr
    with pytest.raises(ddc.DraDriverError, match="dra_driver_namespace=default"):
        plan(namespace="default")
    allowed = plan(namespace="default", extra_values={"allowDefaultNamespace": True}).values
    assert template(helm, tmp_path, allowed, namespace="default").returncode == 0


def test_kube_version_below_chart_minimum(helm: Path, tmp_path: Path) -> None:
    out = template(helm, tmp_path, plan().values, kube="1.31.5")
    assert out.returncode != 0 and "kubeVersion" in out.stderr
    with pytest.raises(ddc.DraDriverError, match=r">=1\.32\.0-0"):
        plan(kubernetes_version="1.31.5")
