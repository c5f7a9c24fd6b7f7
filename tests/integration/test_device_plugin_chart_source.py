"""NVIDIA's own device plugin chart rendered by real ``helm template`` with the values the
``device_plugin`` role builds.

The chart is ``deployments/helm/nvidia-device-plugin`` of the Go module
github.com/NVIDIA/k8s-device-plugin at the role's default ``device_plugin_chart_version``
(``roles/device_plugin/defaults/main.yml``), downloaded once into the Go module cache and
copied to a temporary directory, which the plan gets as an air-gapped site's
``device_plugin_chart_path``. The values come from ``device_plugin.values.plan`` (the
function behind the role's ``gpufleet.cluster.device_plugin_plan`` filter) with the inputs
``tasks/preflight.yml`` wires to it, each taken from the role's defaults where that is a
plain value, and the GPU labels of the ``gpu_node_labels`` role's defaults.

On what helm renders:

* the chart's defaults: the required node affinity that ``chart.DEFAULT_AFFINITY`` and
  docs/gpu-paths.md describe (a Node Feature Discovery label or ``nvidia.com/gpu.present``),
  and the tolerations ``chart.CHART_TOLERATIONS`` keeps;
* the role's values: the plugin's DaemonSet selects the GPU labels plus
  ``gpufleet.io/gpu-path=device-plugin`` and requires exactly one affinity term of those
  labels; its tolerations, priority class, RuntimeClass and image; the MIG strategy as the
  plugin gets it; the chart's MPS control daemon held to the same nodes; no GPU feature
  discovery and no Node Feature Discovery;
* the pod placement the role's node check predicts (``nodes.placement``) is the rendered
  one, and the verify step's ``health.find_daemonset`` picks the plugin's DaemonSet;
* ``device_plugin_config`` becomes the chart's ConfigMap while the plugin's container still
  gets ``MIG_STRATEGY`` (so the plan refuses a config naming another strategy), and the
  chart and the plan refuse the same values.

Needs the helm binary of the lab cache (built from its Go module) and the Go module proxy.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import merge as common_merge
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import chart as dpc
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import health, nodes
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin import values as dpv
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.daemonsets import (
    HELM_RELEASE_ANNOTATION,
)

from gpufleet.build import binaries

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "device_plugin"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
LABEL_DEFAULTS = yaml.safe_load(
    (ROOT / "roles" / "gpu_node_labels" / "defaults" / "main.yml").read_text(encoding="utf-8")
)
#: The chart release the role installs unless told otherwise.
VERSION = DEFAULTS["device_plugin_chart_version"]
RELEASE = DEFAULTS["device_plugin_release_name"]
NAMESPACE = DEFAULTS["device_plugin_namespace"]
MODULE = "github.com/NVIDIA/k8s-device-plugin"
CHART_IN_MODULE = Path("deployments/helm/nvidia-device-plugin")
#: What device_plugin_node_selector evaluates to with the gpu_node_labels defaults (its
#: device_plugin_node_taints: their gpu_node_labels_taints).
GPU_LABELS = {**LABEL_DEFAULTS["gpu_node_labels_labels"], **LABEL_DEFAULTS["gpu_node_labels_extra"]}
PATH_LABEL = {"gpufleet.io/gpu-path": "device-plugin"}
SELECTOR = {**GPU_LABELS, **PATH_LABEL}
IMAGE = f"nvcr.io/nvidia/k8s-device-plugin:v{VERSION}"
MPS_DAEMONSET = f"{RELEASE}-mps-control-daemon"
#: Label keys of the chart's default affinity that gpufleet's nodes need not carry.
NFD_KEYS = {
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/cpu-model.vendor_id",
}


@pytest.fixture(scope="module")
def chart(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart of NVIDIA's release, copied out of the (read-only) Go module cache; asked
    for after helm, so that a machine without helm downloads nothing."""
    source = binaries.module_source(MODULE, f"v{VERSION}") / CHART_IN_MODULE
    assert (source / "Chart.yaml").is_file(), f"{MODULE}@v{VERSION} has no {CHART_IN_MODULE}"
    out = tmp_path_factory.mktemp("chart") / "nvidia-device-plugin"
    for path in sorted(source.rglob("*")):
        if path.is_file():
            target = out / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return out


def wired_inputs() -> dict[str, str]:
    """``device_plugin_plan_inputs`` of tasks/preflight.yml: input key -> its template."""
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text(encoding="utf-8"))
    task = next(
        t for t in tasks if "device_plugin_plan" in (t.get("ansible.builtin.set_fact") or {})
    )
    return task["vars"]["device_plugin_plan_inputs"]


def role_plan(chart: Path, **over: Any) -> dpv.DevicePluginPlan:
    """The plan the role makes for ``chart`` with its defaults, ``over`` replacing inputs
    (``mig_strategy="mixed"`` for ``device_plugin_mig_strategy: mixed``)."""
    inputs: dict[str, Any] = {}
    for key, template in wired_inputs().items():
        variable = re.fullmatch(r"\{\{ (device_plugin_\w+) \}\}", str(template).strip())
        default = DEFAULTS.get(variable.group(1)) if variable else None
        if variable and "{{" not in str(default):
            inputs[key] = default
    inputs.update(
        local_chart=yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8")),
        chart_path=str(chart),
        node_selector=dict(GPU_LABELS),
        node_taints=list(LABEL_DEFAULTS["gpu_node_labels_taints"]),
        installed=None,
    )
    unknown = set(over) - set(wired_inputs())
    assert not unknown, f"not inputs the role gives the plan: {unknown}"
    inputs.update(over)
    missing = set(wired_inputs()) - set(inputs)
    assert not missing, f"inputs of tasks/preflight.yml the test does not give: {missing}"
    return dpv.plan(inputs)


def template(
    helm: Path, chart: Path, tmp_path: Path, values: dict[str, Any], namespace: str = NAMESPACE
) -> subprocess.CompletedProcess[str]:
    vfile = tmp_path / "values.yaml"
    vfile.write_text(yaml.safe_dump(values), encoding="utf-8")
    argv = [str(helm), "template", RELEASE, str(chart), "--namespace", namespace,
            "-f", str(vfile)]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def rendered(helm: Path, chart: Path, tmp_path: Path, values: dict[str, Any]) -> list[dict]:
    out = template(helm, chart, tmp_path, values)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def daemonsets(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "DaemonSet"}


def pod(ds: dict) -> dict[str, Any]:
    return ds["spec"]["template"]["spec"]


def container(ds: dict, name: str) -> dict[str, Any]:
    return next(c for c in pod(ds)["containers"] if c["name"] == name)


def env(ds: dict, name: str) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container(ds, name).get("env", [])}


def placed(ds: dict) -> dict[str, Any]:
    """The pod's placement in the shape of ``nodes.placement`` (a missing selector empty)."""
    spec = pod(ds)
    return {
        "nodeSelector": spec.get("nodeSelector") or {},
        "affinity": spec.get("affinity"),
        "tolerations": spec.get("tolerations"),
    }


def predicted(values: dict[str, Any]) -> dict[str, Any]:
    """Where the role's node check (``nodes.placement``) expects the pod of ``values``."""
    where = nodes.placement(values)
    return {**where, "tolerations": list(where["tolerations"])}


def required_terms(ds: dict) -> list[dict[str, Any]]:
    node_affinity = pod(ds)["affinity"]["nodeAffinity"]
    return node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def node(name: str, labels: dict[str, str], taints: list | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints or []}}


def test_the_chart_is_the_release_the_role_pins(chart: Path) -> None:
    meta = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8"))
    assert (meta["name"], meta["version"], meta["appVersion"]) == (dpc.CHART, VERSION, VERSION)
    plan = role_plan(chart)
    assert plan.version.text == VERSION
    assert (plan.chart.ref, plan.chart.local, plan.chart.stand_in) == (str(chart), True, False)
    # the repository install (no chart path) gets the very same values
    assert role_plan(chart, chart_path="", local_chart={}).values == plan.values


def test_the_charts_own_affinity_is_what_the_role_replaces(
    helm: Path, chart: Path, tmp_path: Path
) -> None:
    """Without values, the plugin's pod requires a Node Feature Discovery label or
    nvidia.com/gpu.present=true (docs/gpu-paths.md), as ``chart.DEFAULT_AFFINITY`` says."""
    found = daemonsets(rendered(helm, chart, tmp_path, {}))
    assert sorted(found) == sorted([RELEASE, MPS_DAEMONSET])
    plugin = found[RELEASE]
    assert pod(plugin)["affinity"] == dpc.DEFAULT_AFFINITY
    keys = [e["key"] for t in required_terms(plugin) for e in t["matchExpressions"]]
    assert set(keys) == NFD_KEYS | {"nvidia.com/gpu.present"} and len(keys) == 3
    assert pod(plugin)["tolerations"] == list(dpc.CHART_TOLERATIONS)
    assert "nodeSelector" not in pod(plugin)
    assert placed(plugin) == predicted({})
    # alone, that affinity keeps the plugin off a labelled device-plugin node without NFD's
    # labels and gpu.present: the reason the role replaces it
    bare = node("gpu-1", dict(PATH_LABEL))
    assert nodes.why_not_here(bare, pod(plugin))


def test_role_values_put_the_plugin_on_the_device_plugin_pool_only(
    helm: Path, chart: Path, tmp_path: Path
) -> None:
    taints = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    plan = role_plan(chart, node_taints=taints, runtime_class_name="nvidia")
    assert plan.node_selector == SELECTOR
    docs = rendered(helm, chart, tmp_path, plan.values)
    found = daemonsets(docs)
    assert sorted(found) == sorted([RELEASE, MPS_DAEMONSET])
    plugin = found[RELEASE]
    spec = pod(plugin)
    assert spec["nodeSelector"] == SELECTOR
    terms = required_terms(plugin)
    assert len(terms) == 1, terms
    assert terms[0] == {
        "matchExpressions": [
            {"key": k, "operator": "In", "values": [v]} for k, v in SELECTOR.items()
        ]
    }
    assert set(spec["affinity"]) == {"nodeAffinity"}
    assert set(spec["affinity"]["nodeAffinity"]) == {
        "requiredDuringSchedulingIgnoredDuringExecution"
    }
    expected_tolerations = [
        *dpc.CHART_TOLERATIONS,
        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert spec["tolerations"] == expected_tolerations
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["runtimeClassName"] == "nvidia"
    assert [c["image"] for c in spec["containers"]] == [IMAGE]
    assert container(plugin, "nvidia-device-plugin-ctr")["command"] == ["nvidia-device-plugin"]
    # the role's node check predicts exactly this placement
    assert placed(plugin) == predicted(plan.values)
    pool = node("gpu-1", dict(SELECTOR), taints)
    dra = node("gpu-2", {**GPU_LABELS, "gpufleet.io/gpu-path": "dra"}, taints)
    unlabelled = node("gpu-3", {**GPU_LABELS, **dict.fromkeys(NFD_KEYS, "true")})
    assert nodes.why_not_here(pool, spec) == ""
    assert "gpufleet.io/gpu-path=device-plugin" in nodes.why_not_here(dra, spec)
    assert nodes.why_not_here(unlabelled, spec)
    names = [f"{d['kind']}/{d['metadata']['name']}" for d in docs]
    assert not [n for n in names if "feature-discovery" in n], names


def test_the_mps_control_daemon_is_held_to_the_same_nodes(
    helm: Path, chart: Path, tmp_path: Path
) -> None:
    """The chart renders its MPS control daemon whenever the plugin is enabled; it takes the
    same selector (plus the plugin's nvidia.com/mps.capable label), affinity and
    tolerations, and the verify step tells it from the plugin."""
    plan = role_plan(chart)
    found = daemonsets(rendered(helm, chart, tmp_path, plan.values))
    plugin, mps = found[RELEASE], found[MPS_DAEMONSET]
    assert pod(mps)["nodeSelector"] == {"nvidia.com/mps.capable": "true", **SELECTOR}
    assert pod(mps)["affinity"] == pod(plugin)["affinity"]
    assert pod(mps)["tolerations"] == pod(plugin)["tolerations"]
    assert {c["image"] for c in pod(mps)["containers"] + pod(mps)["initContainers"]} == {IMAGE}
    # helm install annotates every object with its release; MPS listed first on purpose
    for ds in (plugin, mps):
        ds["metadata"].setdefault("annotations", {})[HELM_RELEASE_ANNOTATION] = RELEASE
    assert health.find_daemonset([mps, plugin], RELEASE) is plugin


@pytest.mark.parametrize("strategy", dpc.MIG_STRATEGIES)
def test_the_mig_strategy_reaches_the_plugin(
    helm: Path, chart: Path, tmp_path: Path, strategy: str
) -> None:
    plan = role_plan(chart, mig_strategy=strategy)
    assert plan.mig_strategy == strategy
    found = daemonsets(rendered(helm, chart, tmp_path, plan.values))
    mig = strategy != "none"
    for ds, name in ((found[RELEASE], "nvidia-device-plugin-ctr"),
                     (found[MPS_DAEMONSET], "mps-control-daemon-ctr")):  # fmt: skip
        got = env(ds, name)
        assert got["MIG_STRATEGY"] == strategy
        assert ("NVIDIA_MIG_MONITOR_DEVICES" in got) is mig, got
    security = container(found[RELEASE], "nvidia-device-plugin-ctr")["securityContext"]
    if mig:
        assert security == {"capabilities": {"add": ["SYS_ADMIN"]}}
    else:
        assert security == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_role_configs_reach_the_plugin_beside_its_mig_strategy(
    helm: Path, chart: Path, tmp_path: Path
) -> None:
    """``device_plugin_config`` becomes the chart's ConfigMap, read by its config manager;
    the plugin still gets ``MIG_STRATEGY`` from ``device_plugin_mig_strategy``, which it
    takes over the config file's ``flags.migStrategy``, so the plan refuses a config that
    names another strategy."""
    configs = {
        "default": {"version": "v1", "flags": {"migStrategy": "mixed"}},
        "shared": {
            "version": "v1",
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
        },
    }
    plan = role_plan(chart, mig_strategy="mixed", config=configs, config_default="default")
    docs = rendered(helm, chart, tmp_path, plan.values)
    maps = [d for d in docs if d["kind"] == "ConfigMap"]
    assert len(maps) == 1, [d["metadata"]["name"] for d in maps]
    assert maps[0]["data"] == plan.values["config"]["map"]
    assert yaml.safe_load(maps[0]["data"]["default"]) == configs["default"]
    plugin = daemonsets(docs)[RELEASE]
    assert [c["name"] for c in pod(plugin)["initContainers"]] == ["nvidia-device-plugin-init"]
    assert env(plugin, "nvidia-device-plugin-sidecar")["DEFAULT_CONFIG"] == "default"
    got = env(plugin, "nvidia-device-plugin-ctr")
    assert (got["CONFIG_FILE"], got["MIG_STRATEGY"]) == ("/config/config.yaml", "mixed")
    with pytest.raises(dpc.DevicePluginError, match="device_plugin_mig_strategy=none"):
        role_plan(chart, config=configs, config_default="default")


def test_chart_and_plan_refuse_the_default_namespace(
    helm: Path, chart: Path, tmp_path: Path
) -> None:
    values = role_plan(chart).values
    out = template(helm, chart, tmp_path, values, namespace="default")
    assert out.returncode != 0, out.stdout
    assert "Running in the 'default' namespace is not recommended" in out.stderr, out.stderr
    with pytest.raises(dpc.DevicePluginError, match="device_plugin_namespace=default"):
        role_plan(chart, namespace="default")
    allowed = role_plan(
        chart, namespace="default", extra_values={"allowDefaultNamespace": True}
    ).values
    assert template(helm, chart, tmp_path, allowed, namespace="default").returncode == 0


@pytest.mark.parametrize(
    ("bad", "chart_error", "variable"),
    [
        (
            {"namespace": "gpu"},
            "Value 'namespace' set to gpu",
            "device_plugin_extra_values.namespace",
        ),
        (
            {"config": {"name": "nvdp-configs", "map": {"a": "version: v1"}}},
            "Only one of 'config.name' or 'config.map'",
            "device_plugin_extra_values.config",
        ),
        (
            {"config": {"map": {"a": "version: v1", "b": "version: v1"}}},
            "A default config must be provided",
            "device_plugin_config_default",
        ),
    ],
    ids=["namespace-value", "name-and-map", "no-default-config"],
)
def test_chart_and_plan_refuse_the_same_values(
    helm: Path, chart: Path, tmp_path: Path, bad: dict[str, Any], chart_error: str, variable: str
) -> None:
    out = template(helm, chart, tmp_path, common_merge.deep_merge(role_plan(chart).values, bad))
    assert out.returncode != 0 and chart_error in out.stderr, out.stderr
    with pytest.raises(dpc.DevicePluginError) as info:
        role_plan(chart, extra_values=bad)
    assert info.value.variable == variable
