"""The DRA gate audit (``plugins/module_utils/gate_audit/audit.py`` and its ``gate_*`` parts) on
inputs built from what the real kubeadm 1.37.2 writes (``tests/unit/data/kubeadm/1.37.2``,
see regenerate.sh there) and from ``kubernetes_feature_enabled`` captured from real 1.37.2
components (``tests/unit/data/metrics/1.37.2``).

Process command lines are the manifests' ``command`` lists as ``/proc/<pid>/cmdline`` holds
them (NUL-separated); the kubelet's is what systemd runs from kubeadm's drop-in and the
``kubeadm-flags.env`` kubeadm wrote. Variants: ``defaults`` (kubeadm's own defaults) and
``dra`` (a cluster carried over from older releases: DRAControlPlaneController everywhere,
``resource.k8s.io/v1alpha3`` in runtime-config, repeated feature-gates).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import audit as ga
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import checks as gc
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import metrics as gm
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import report as gr
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import terms as gt
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce

pytestmark = pytest.mark.unit

KUBEADM = Path(__file__).resolve().parents[1] / "data" / "kubeadm"
METRICS = Path(__file__).resolve().parents[1] / "data" / "metrics" / "1.37.2"
V1BETA3_INPUT = (
    Path(__file__).resolve().parents[1] / "data" / "kubeadm" / "1.33.13" / "input" / "v1beta3.yaml"
)
VERSION = "1.37.2"
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")

#: The kubelet unit as the Kubernetes packages install it: kubelet.service plus kubeadm's
#: drop-in 10-kubeadm.conf (``systemctl cat kubelet``); two long lines are continued with a
#: backslash here, which systemd reads as one line.
KUBELET_UNIT = """\
[Unit]
Description=kubelet: The Kubernetes Node Agent
[Service]
ExecStart=/usr/bin/kubelet
Restart=always
# /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=\\
--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \\
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS \\
$KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""


# ------------------------------------------------------------------ inputs


def fixture(variant: str) -> Path:
    """``"dra"`` -> the 1.37.2 variant; ``"1.33.13/v1beta3"`` -> that release's."""
    return KUBEADM / (variant if "/" in variant else f"{VERSION}/{variant}")


def manifest_text(variant: str, component: str) -> str:
    return (fixture(variant) / "manifests" / f"{component}.yaml").read_text()


def command_of(text: str) -> list[str]:
    return list(yaml.safe_load(text)["spec"]["containers"][0]["command"])


def as_proc(argv: list[str]) -> list[str]:
    """``argv`` through ``/proc/<pid>/cmdline``'s encoding and back."""
    return gf.split_cmdline(b"\0".join(a.encode() for a in argv) + b"\0")


def edited_manifest(variant: str, component: str, **edit: object) -> str:
    """A manifest changed with the collection's own editor (``FlagEdit`` keywords)."""
    return kce.edit_static_pod_manifest(
        manifest_text(variant, component), component, kfl.FlagEdit(**edit)
    ).text


def control_plane(
    component: str,
    *,
    running: str | None = None,
    file: str | None = None,
    variant: str = "defaults",
    extra: tuple[str, ...] = (),
    metrics: str | None = None,
) -> gf.ComponentFacts:
    """A control-plane component: its process runs the command of ``running`` (manifest
    text; default the ``variant`` manifest) plus ``extra`` arguments; its file is ``file``
    (default the ``variant`` manifest); ``running=""`` means no process."""
    file_text = file if file is not None else manifest_text(variant, component)
    path = f"/etc/kubernetes/manifests/{component}.yaml"
    facts = gf.ComponentFacts(
        component,
        file=gf.FileSource(
            path,
            True,
            gf.FlagSet.from_component_flags(kce.static_pod_flags(file_text, component)),
            1000.0,
        ),
    )
    if running == "":
        return facts
    argv = as_proc(command_of(running or manifest_text(variant, component)) + list(extra))
    facts.running, facts.pid, facts.argv, facts.started_at = True, 4242, argv, 2000.0
    facts.process = gf.argv_flags(argv, f"{component} command line")
    if metrics is not None:
        facts.metrics = gf.MetricSource(
            gf.metrics_url(component, argv), gm.feature_readings(metrics)
        )
    return facts


def absent(component: str) -> gf.ComponentFacts:
    return gf.ComponentFacts(
        component, file=gf.FileSource(f"/etc/kubernetes/manifests/{component}.yaml", False)
    )


def kubelet(
    *,
    variant: str = "defaults",
    config: str | None = None,
    extra_args: str = "",
    started_at: float = 2000.0,
    mtime: float = 1000.0,
) -> gf.ComponentFacts:
    env = {
        "/var/lib/kubelet/kubeadm-flags.env": (fixture(variant) / "kubeadm-flags.env").read_text(),
        "/etc/default/kubelet": f'KUBELET_EXTRA_ARGS="{extra_args}"\n' if extra_args else None,
    }
    argv = as_proc(kcfg.kubelet_argv_from_systemd(KUBELET_UNIT, env))
    text = config if config is not None else (fixture(variant) / "kubelet-config.yaml").read_text()
    gates = kcfg.kubelet_feature_gates(text)
    path = kcfg.kubelet_config_path_from_cmdline(argv)
    assert path == "/var/lib/kubelet/config.yaml"
    return gf.ComponentFacts(
        "kubelet",
        True,
        777,
        argv,
        started_at,
        gf.kubelet_process_flags(argv, gates),
        [path],
        gf.FileSource(path, True, gf.FlagSet(gates, {}), mtime),
    )


def host(name: str, *components: gf.ComponentFacts) -> gf.HostFacts:
    return gf.HostFacts(name, {c.component: c for c in components})


def control_plane_host(name: str = "cp-1", variant: str = "defaults") -> gf.HostFacts:
    return host(
        name,
        *(control_plane(c, variant=variant) for c in CONTROL_PLANE),
        kubelet(variant=variant),
    )


def worker(name: str = "worker-1", **kubelet_args: object) -> gf.HostFacts:
    return host(name, *(absent(c) for c in CONTROL_PLANE), kubelet(**kubelet_args))


def configmaps(variant: str) -> gf.ConfigMapFacts:
    kubeadm = yaml.safe_load((fixture(variant) / "configmap-kubeadm-config.yaml").read_text())
    kubelet_cm = yaml.safe_load((fixture(variant) / "configmap-kubelet-config.yaml").read_text())
    return gf.ConfigMapFacts(kubeadm["data"]["ClusterConfiguration"], kubelet_cm["data"]["kubelet"])


def metric(component: str) -> str:
    return (METRICS / f"{component}.feature-enabled.txt").read_text()


def run(
    *hosts: gf.HostFacts, cms: gf.ConfigMapFacts | None = None, **kwargs: object
) -> gr.AuditResult:
    kwargs.setdefault("version", VERSION)
    return ga.audit({h.host: h for h in hosts}, configmaps=cms, **kwargs)


def found(result: gr.AuditResult, fid: str) -> list[gr.Finding]:
    return [f for f in result.findings if f.id == fid]


def keyed(result: gr.AuditResult, fid: str) -> dict[tuple, str]:
    """(host, component, name) -> severity of every finding ``fid``."""
    return {(f.host, f.component, f.name): f.severity for f in found(result, fid)}


# ------------------------------------------------------------------ node-side parsing


def test_configmap_facts_are_read_through_the_api_and_fall_back_to_the_old_kubelet_name() -> None:
    kubeadm = yaml.safe_load((fixture("dra") / "configmap-kubeadm-config.yaml").read_text())
    kubelet_cm = yaml.safe_load((fixture("dra") / "configmap-kubelet-config.yaml").read_text())
    base = "/api/v1/namespaces/kube-system/configmaps/"

    class Kube:
        def __init__(self, objects: dict[str, object]) -> None:
            self.objects = objects

        def get(self, path: str) -> object:
            if path not in self.objects:
                raise vk.KubeError(404, f"{path} not found")
            return self.objects[path]

    want = configmaps("dra")
    got = ga.read_configmap_facts(
        Kube({base + "kubeadm-config": kubeadm, base + "kubelet-config": kubelet_cm}), VERSION
    )
    assert got == gf.ConfigMapFacts(
        want.cluster_configuration, want.kubelet, "kube-system/kubelet-config"
    )
    old = {**kubelet_cm, "metadata": {**kubelet_cm["metadata"], "name": "kubelet-config-1.37"}}
    got = ga.read_configmap_facts(
        Kube({base + "kubeadm-config": kubeadm, base + "kubelet-config-1.37": old}), VERSION
    )
    assert (got.kubelet, got.kubelet_name) == (want.kubelet, "kube-system/kubelet-config-1.37")
    assert ga.read_configmap_facts(Kube({}), VERSION) == gf.ConfigMapFacts(
        None, None, "kube-system/kubelet-config"
    )


def test_cmdline_round_trip_keeps_every_argument() -> None:
    argv = command_of(manifest_text("dra", "kube-apiserver"))
    assert as_proc(argv) == argv
    assert gf.split_cmdline(b"") == []


def test_argv_flags_merge_repeated_feature_gates_like_the_component() -> None:
    # The dra manifest gives --feature-gates twice (v1beta4 allows repeated extraArgs).
    flags = gf.argv_flags(as_proc(command_of(manifest_text("dra", "kube-apiserver"))))
    assert flags.feature_gates == {
        "DRAControlPlaneController": True,
        "DRAAdminAccess": True,
        "DRADeviceTaints": True,
    }
    assert flags.runtime_config == {"api/alpha": "false", "resource.k8s.io/v1alpha3": "true"}
    # a later entry wins, a bare runtime-config key is true, "--flag value" is read
    later = gf.argv_flags(
        [
            "kube-apiserver",
            "--feature-gates=A=true",
            "--feature-gates",
            "A=false,B=1",
            "--runtime-config=resource.k8s.io/v1beta1",
        ]
    )
    assert later.feature_gates == {"A": False, "B": True}
    assert later.runtime_config == {"resource.k8s.io/v1beta1": "true"}


def test_argv_flags_reject_a_malformed_value_naming_it() -> None:
    with pytest.raises(kfl.FlagValueError, match="DRAAdminAccess=yes"):
        gf.argv_flags(["kube-apiserver", "--feature-gates=DRAAdminAccess=yes"])


def test_component_of_matches_the_executable_basename() -> None:
    assert gf.component_of(["/usr/bin/kubelet", "--config=x"]) == "kubelet"
    assert gf.component_of(command_of(manifest_text("defaults", "kube-scheduler"))) == (
        "kube-scheduler"
    )
    assert gf.component_of(["/usr/bin/kubeletctl"]) is None
    assert gf.component_of(["kubelet"], ["kube-apiserver"]) is None


def test_kubelet_flags_override_the_configuration_file() -> None:
    facts = kubelet(variant="dra", extra_args="--feature-gates=DRAResourceClaimDeviceStatus=false")
    assert facts.process is not None
    assert facts.process.feature_gates == {
        "DRAControlPlaneController": True,  # only in the file: kept
        "DRAResourceClaimDeviceStatus": False,  # in both: the flag wins
    }


def test_metrics_url_from_the_real_manifests() -> None:
    api = command_of(manifest_text("defaults", "kube-apiserver"))
    assert gf.metrics_url("kube-apiserver", api) == "https://127.0.0.1:6443/metrics"
    kcm = command_of(manifest_text("defaults", "kube-controller-manager"))
    assert gf.metrics_url("kube-controller-manager", kcm) == "https://127.0.0.1:10257/metrics"
    # the dra variant adds --bind-address=0.0.0.0: a wildcard is reached on loopback
    kcm_dra = command_of(manifest_text("dra", "kube-controller-manager"))
    assert gf.metrics_url("kube-controller-manager", kcm_dra) == "https://127.0.0.1:10257/metrics"
    sched = command_of(manifest_text("defaults", "kube-scheduler"))
    assert gf.metrics_url("kube-scheduler", sched) == "https://127.0.0.1:10259/metrics"
    config = yaml.safe_load((fixture("defaults") / "kubelet-config.yaml").read_text())
    assert gf.metrics_url("kubelet", ["kubelet"], config) == "https://127.0.0.1:10250/metrics"
    assert gf.metrics_url("kubelet", ["kubelet", "--address=fd00::1"], {"port": 10555}) == (
        "https://[fd00::1]:10555/metrics"
    )
    with pytest.raises(gt.GateAuditError, match="not a number"):
        gf.metrics_url("kube-apiserver", ["kube-apiserver", "--secure-port=https"])


def test_process_start_time_of_this_process() -> None:
    with open("/proc/self/stat") as fh:
        stat = fh.read()
    with open("/proc/stat") as fh:
        btime = next(float(line.split()[1]) for line in fh if line.startswith("btime "))
    started = gf.process_start_time(stat, btime, os.sysconf("SC_CLK_TCK"))
    assert btime <= started <= time.time() + 1
    with pytest.raises(gt.GateAuditError, match="malformed"):
        gf.process_start_time("12 (x) S 1", btime, 100)


# ------------------------------------------------------------------ Prometheus text


def test_feature_readings_from_a_real_kube_apiserver() -> None:
    text = metric("kube-apiserver")
    readings = gm.feature_readings(text)
    samples = [ln for ln in text.splitlines() if ln.startswith("kubernetes_feature_enabled{")]
    assert len(readings) == len(samples) > 200
    assert readings["DynamicResourceAllocation"] == gm.FeatureReading(True, "")
    assert readings["DRAPartitionableDevices"] == gm.FeatureReading(True, "BETA")
    assert readings["DRAListTypeAttributes"] == gm.FeatureReading(False, "ALPHA")
    assert readings["DRAPartitionableDevices"].model_stage == dra_core.BETA
    assert gm.feature_metric_lines(text)[:2] == [
        ln for ln in text.splitlines() if ln.startswith("# ")
    ]


def test_prometheus_parser_escapes_timestamps_and_errors() -> None:
    text = (
        "# HELP x a metric\n"
        "# TYPE x gauge\n"
        'x{a="q\\"uote",b="back\\\\slash",c="new\\nline"} 1 1700000000000\n'
        "y 2.5\n"
        'z{a="1",} NaN\n'
    )
    samples = gm.parse_prometheus_text(text)
    assert samples[0].labels == {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}
    assert samples[0].value == 1.0
    assert (samples[1].name, samples[1].value) == ("y", 2.5)
    assert samples[2].labels == {"a": "1"} and samples[2].value != samples[2].value
    with pytest.raises(gt.GateAuditError, match="line 2"):
        gm.parse_prometheus_text('ok 1\nbad{a="1"} one\n')
    with pytest.raises(gt.GateAuditError, match="unterminated"):
        gm.parse_prometheus_text('bad{a="1} 1\n')


# ------------------------------------------------------------------ the audit


def test_clean_kubeadm_cluster_has_no_findings() -> None:
    cp = control_plane_host()
    for c in CONTROL_PLANE:
        cp.components[c].metrics = control_plane(c, metrics=metric(c)).metrics
    result = run(cp, worker(), cms=configmaps("defaults"), expected_hosts=["cp-1", "worker-1"])
    assert result.findings == []
    assert result.ok
    cells = result.summary["cells"]
    assert cells["kube-apiserver"]["cp-1"]["state"] == "running"
    assert cells["kube-apiserver"]["cp-1"]["metrics"] == "read"
    assert "worker-1" not in cells["kube-apiserver"]
    assert cells["kubelet"]["worker-1"]["feature_gates"] == {}


def test_gate_added_to_the_manifest_only_is_configmap_drift() -> None:
    # Field case: --feature-gates added by hand to the static pod manifest, not to
    # kube-system/kubeadm-config; kubeadm upgrade regenerates the manifest and drops it.
    cp = host("cp-1", control_plane("kube-apiserver", variant="dra"), kubelet())
    result = run(cp, cms=configmaps("defaults"), components=["kube-apiserver", "kubelet"])
    drift = keyed(result, "gates.configmap-drift")
    assert drift == {
        ("cp-1", "kube-apiserver", "DRAAdminAccess"): "warn",  # GA, locked on: same in force
        ("cp-1", "kube-apiserver", "DRAControlPlaneController"): "fail",
        ("cp-1", "kube-apiserver", "DRADeviceTaints"): "warn",  # GA, on by default
        ("cp-1", "kube-apiserver", "api/alpha"): "fail",
        ("cp-1", "kube-apiserver", "resource.k8s.io/v1alpha3"): "fail",  # off by default
    }
    drift = {f.name: f for f in found(result, "gates.configmap-drift")}
    assert drift["DRADeviceTaints"].values == {"file": "true", "configmap": None}
    assert "drops it" in drift["DRADeviceTaints"].message
    # an entry the model has no objection to belongs in the ConfigMap ...
    assert "put api/alpha=false into ClusterConfiguration.apiServer.extraArgs" in (
        drift["api/alpha"].fix
    )
    # ... one it forbids or advises against must not be copied there
    assert "do not copy it into the ConfigMap" in drift["DRAControlPlaneController"].fix
    assert "no use at 1.37.2" in drift["DRADeviceTaints"].fix
    assert not result.ok


def test_configmap_ahead_of_the_files_says_the_file_is_behind() -> None:
    cp = control_plane_host("cp-1", "defaults")
    result = run(cp, cms=configmaps("dra"))
    drift = found(result, "gates.configmap-drift")
    by_key = {(f.component, f.name): f for f in drift}
    api = by_key[("kube-apiserver", "api/alpha")]
    assert api.values == {"file": None, "configmap": "false"}
    assert "behind" in api.message
    assert "kubeadm init phase control-plane apiserver" in api.fix
    # a ConfigMap entry the model advises against is to be removed, not regenerated
    sched = by_key[("kube-scheduler", "DRAPrioritizedList")]
    assert sched.values == {"file": None, "configmap": "true"}
    assert sched.fix.startswith("remove DRAPrioritizedList from ClusterConfiguration.scheduler")
    kubelet_drift = {f.name for f in drift if f.component == "kubelet"}
    assert kubelet_drift == {"DRAControlPlaneController", "DRAResourceClaimDeviceStatus"}


def test_kubelet_gates_only_in_the_node_file_are_configmap_drift() -> None:
    # Field case: kubeadm upgrade rewrote /var/lib/kubelet/config.yaml from the ConfigMap and
    # dropped featureGates; here the node file has gates the ConfigMap lacks.
    result = run(worker(variant="dra"), cms=configmaps("defaults"), components=["kubelet"])
    assert keyed(result, "gates.configmap-drift") == {
        ("worker-1", "kubelet", "DRAControlPlaneController"): "fail",
        ("worker-1", "kubelet", "DRAResourceClaimDeviceStatus"): "warn",  # GA, locked on
    }
    assert "kube-system/kubelet-config" in found(result, "gates.configmap-drift")[0].message


def test_removed_gate_is_forbidden_on_every_source_and_in_the_configmaps() -> None:
    # Field case: a gate the target release removed stops every component at start-up.
    result = run(control_plane_host("cp-1", "dra"), cms=configmaps("dra"))
    forbidden = keyed(result, "gates.model-forbidden")
    for component in (*CONTROL_PLANE, "kubelet"):
        assert forbidden[("cp-1", component, "DRAControlPlaneController")] == "fail"
        assert forbidden[(None, component, "DRAControlPlaneController")] == "fail"
    api = next(
        f
        for f in found(result, "gates.model-forbidden")
        if f.host == "cp-1" and f.component == "kube-apiserver"
    )
    assert api.values == {"process": "true", "file": "true", "model": None}
    assert "unrecognized feature gate: DRAControlPlaneController" in api.message
    advice = keyed(result, "gates.model-advice")
    assert advice[("cp-1", "kube-apiserver", "DRAAdminAccess")] == "warn"
    assert advice[("cp-1", "kube-apiserver", "resource.k8s.io/v1alpha3")] == "warn"
    assert not found(result, "gates.configmap-drift")
    assert not found(result, "gates.process-file-drift")


def test_locked_gate_at_the_other_value_is_forbidden_once() -> None:
    api = control_plane(
        "kube-apiserver", extra=("--feature-gates=DynamicResourceAllocation=false",)
    )
    result = run(host("cp-1", api), components=["kube-apiserver"])
    forbidden = found(result, "gates.model-forbidden")
    assert [(f.name, f.values) for f in forbidden] == [
        ("DynamicResourceAllocation", {"process": "false", "model": None})
    ]
    assert "locked" in forbidden[0].message
    assert not found(result, "gates.model-mismatch")


def test_unserved_runtime_config_is_reported() -> None:
    # Field case: runtime-config naming a group/version the release does not serve stops
    # kube-apiserver ("group version ... that has not been registered").
    stale = edited_manifest(
        "defaults", "kube-apiserver", runtime_config={"resource.k8s.io/v1alpha2": "true"}
    )
    api = control_plane("kube-apiserver", running=stale, file=stale)
    result = run(host("cp-1", api), components=["kube-apiserver"])
    unserved = found(result, "gates.runtime-config-unserved")
    assert [(f.severity, f.name, f.values) for f in unserved] == [
        ("fail", "resource.k8s.io/v1alpha2", {"process": "true", "file": "true", "model": None})
    ]


def test_runtime_config_the_plan_needs() -> None:
    features = ["resource-pool-status"]  # ResourcePoolStatusRequest: resource.k8s.io/v1alpha3
    cp = host("cp-1", control_plane("kube-apiserver"))
    missing = run(cp, components=["kube-apiserver"], features=features)
    assert keyed(missing, "gates.runtime-config-missing") == {
        ("cp-1", "kube-apiserver", "resource.k8s.io/v1alpha3"): "fail"
    }
    assert keyed(missing, "gates.model-missing") == {
        ("cp-1", "kube-apiserver", "DRAResourcePoolStatus"): "fail"  # alpha, off by default
    }
    # the dra variant enables v1alpha3: no runtime-config finding, and no advice to drop it
    ok = run(
        host("cp-1", control_plane("kube-apiserver", variant="dra")),
        components=["kube-apiserver"],
        features=features,
    )
    assert not found(ok, "gates.runtime-config-missing")
    assert ("cp-1", "kube-apiserver", "resource.k8s.io/v1alpha3") not in keyed(
        ok, "gates.model-advice"
    )


def test_process_and_manifest_differ() -> None:
    off = control_plane("kube-apiserver", extra=("--feature-gates=DRAPartitionableDevices=false",))
    result = run(host("cp-1", off), components=["kube-apiserver"])
    drift = found(result, "gates.process-file-drift")
    assert [(f.severity, f.name, f.values) for f in drift] == [
        ("fail", "DRAPartitionableDevices", {"process": "false", "file": None})
    ]
    assert "/etc/kubernetes/manifests" in drift[0].fix
    # the same entry at the default value: only the spelling differs
    on = control_plane("kube-apiserver", extra=("--feature-gates=DRAPartitionableDevices=true",))
    result = run(host("cp-1", on), components=["kube-apiserver"])
    assert keyed(result, "gates.process-file-drift") == {
        ("cp-1", "kube-apiserver", "DRAPartitionableDevices"): "warn"
    }


def test_manifest_without_a_process() -> None:
    api = control_plane("kube-apiserver", variant="dra", running="")
    result = run(host("cp-1", api), components=["kube-apiserver"])
    absent_ = found(result, "gates.process-absent")
    assert [(f.severity, f.host, f.component) for f in absent_] == [
        ("fail", "cp-1", "kube-apiserver")
    ]
    # the model findings then come from the file alone
    forbidden = next(f for f in found(result, "gates.model-forbidden"))
    assert forbidden.values == {"file": "true", "model": None}
    assert result.summary["cells"]["kube-apiserver"]["cp-1"]["state"] == "not running"


def test_node_drift_names_the_host_that_differs_from_the_model() -> None:
    features = ["partitionable-devices"]
    hosts = []
    for name, value in (("cp-1", True), ("cp-2", False), ("cp-3", True)):
        text = edited_manifest(
            "defaults", "kube-apiserver", feature_gates={"DRAPartitionableDevices": value}
        )
        hosts.append(host(name, control_plane("kube-apiserver", running=text, file=text)))
    result = run(*hosts, components=["kube-apiserver"], features=features)
    drift = found(result, "gates.node-drift")
    assert [(f.severity, f.host, f.name, f.values) for f in drift] == [
        ("fail", "cp-2", "DRAPartitionableDevices", {"this host": "false", "reference": "true"})
    ]
    assert "2 of 3 hosts" in drift[0].message
    assert keyed(result, "gates.model-mismatch") == {
        ("cp-2", "kube-apiserver", "DRAPartitionableDevices"): "fail"
    }
    assert not found(result, "gates.process-file-drift")


def test_gates_on_the_control_plane_but_not_on_the_kubelet() -> None:
    # Field case: gates in all three control-plane manifests, missing from the kubelet
    # configuration, so DRA plugins on the node fail.
    features = ["node-allocatable-resources"]
    plan = dra_plan.plan_components(VERSION, features)
    components = []
    for c in CONTROL_PLANE:
        gates = plan.components[c].feature_gates
        text = edited_manifest("defaults", c, feature_gates=gates) if gates else None
        components.append(control_plane(c, running=text, file=text))
    result = run(host("cp-1", *components, kubelet()), worker(), features=features)
    assert keyed(result, "gates.model-missing") == {
        ("cp-1", "kubelet", "DRANodeAllocatableResources"): "fail",
        ("worker-1", "kubelet", "DRANodeAllocatableResources"): "fail",
    }
    one = found(result, "gates.model-missing")[0]
    assert one.values == {"process": None, "file": None, "configmap": None, "model": "true"}


def test_metric_disagrees_with_the_command_line() -> None:
    api = control_plane(
        "kube-apiserver",
        extra=("--feature-gates=DRAPartitionableDevices=false",),
        metrics=metric("kube-apiserver"),  # captured with the gate at its default (on)
    )
    result = run(host("cp-1", api), components=["kube-apiserver"])
    drift = found(result, "gates.metric-drift")
    assert [(f.severity, f.name, f.values) for f in drift] == [
        ("fail", "DRAPartitionableDevices", {"process": "false", "metric": "true"})
    ]
    assert not found(result, "gates.metric-stage")


def test_metric_of_another_release_is_a_stage_warning() -> None:
    api = control_plane("kube-apiserver", metrics=metric("kube-apiserver"))
    result = run(host("cp-1", api), components=["kube-apiserver"], version="1.36.3")
    stage = found(result, "gates.metric-stage")
    assert [(f.severity, f.host) for f in stage] == [("warn", "cp-1")]
    # DRAExtendedResource is beta in 1.36 and GA in the 1.37.2 binary that was read
    assert stage[0].values["DRAExtendedResource"] == "ga (model: beta)"


def test_kubelet_flag_overriding_its_configuration() -> None:
    facts = kubelet(extra_args="--feature-gates=DRANodeAllocatableResources=true")
    result = run(worker(), host("worker-2", facts), components=["kubelet"])
    assert keyed(result, "gates.kubelet-flag-override") == {
        ("worker-2", "kubelet", "DRANodeAllocatableResources"): "warn"
    }
    assert "KUBELET_EXTRA_ARGS" in found(result, "gates.kubelet-flag-override")[0].fix
    assert keyed(result, "gates.node-drift") == {
        ("worker-2", "kubelet", "DRANodeAllocatableResources"): "fail"
    }


def test_kubelet_configuration_newer_than_the_kubelet() -> None:
    result = run(worker(started_at=1000.0, mtime=2000.0), components=["kubelet"])
    pending = found(result, "gates.restart-pending")
    assert [(f.severity, f.host) for f in pending] == [("warn", "worker-1")]
    assert "systemctl restart kubelet" in pending[0].fix


def test_unreachable_host_and_missing_component() -> None:
    result = run(worker(), expected_hosts=["worker-1", "worker-2"])
    assert keyed(result, "gates.facts-missing") == {("worker-2", None, None): "fail"}
    assert {f.component for f in found(result, "gates.component-not-found")} == set(CONTROL_PLANE)


def test_unreadable_sources_are_warnings() -> None:
    api = control_plane("kube-apiserver")
    api.errors.append("2 kube-apiserver processes run (pids 10, 20)")
    api.metrics = gf.MetricSource("https://127.0.0.1:6443/metrics", error="HTTP 403 Forbidden")
    sched = absent("kube-scheduler")
    assert sched.file is not None
    sched.file.exists, sched.file.error = True, "cannot read: Permission denied"
    result = run(host("cp-1", api, sched), components=["kube-apiserver", "kube-scheduler"])
    unreadable = found(result, "gates.source-unreadable")
    assert sorted((f.component, next(iter(f.values))) for f in unreadable) == [
        ("kube-apiserver", "metric"),
        ("kube-apiserver", "process"),
        ("kube-scheduler", "file"),
    ]
    assert all(f.severity == "warn" for f in unreadable)
    assert result.summary["cells"]["kube-apiserver"]["cp-1"]["metrics"] == (
        "error: HTTP 403 Forbidden"
    )


def test_no_host_at_all_is_a_failure_not_a_pass() -> None:
    result = ga.audit({}, VERSION)
    assert [(f.id, f.severity, f.host) for f in result.findings] == [
        ("gates.facts-missing", "fail", None)
    ]


def test_absent_configmaps_are_warnings_for_the_components_audited() -> None:
    result = run(worker(), cms=gf.ConfigMapFacts(None, None), components=["kubelet"])
    absent_cms = found(result, "gates.configmap-absent")
    assert [f.component for f in absent_cms] == ["kubelet"]
    assert result.ok


def test_v1beta3_extra_args_map_is_read() -> None:
    text = V1BETA3_INPUT.read_text()
    flags, problems = gc.configmap_flags(gf.ConfigMapFacts(text, text))
    assert problems == []
    assert flags["kube-apiserver"].feature_gates == {"DynamicResourceAllocation": True}
    assert flags["kube-apiserver"].runtime_config == {"resource.k8s.io/v1beta1": "true"}
    assert flags["kube-scheduler"].feature_gates == {"DynamicResourceAllocation": True}
    assert flags["kubelet"].feature_gates == {"DynamicResourceAllocation": True}


def test_unparseable_configmap_is_reported_not_raised() -> None:
    flags, problems = gc.configmap_flags(gf.ConfigMapFacts("kind: [", "apiVersion: v1\n"))
    assert flags == {}
    assert [p.id for p in problems] == ["gates.source-unreadable"] * 2


def test_result_is_json_failures_first_and_facts_round_trip() -> None:
    cp = control_plane_host("cp-1", "dra")
    cp.components["kube-apiserver"].metrics = control_plane(
        "kube-apiserver", metrics=metric("kube-apiserver")
    ).metrics
    data = json.loads(json.dumps(cp.to_dict()))
    assert gf.HostFacts.from_dict(data, "cp-1") == cp
    result = run(cp, cms=configmaps("defaults"))
    doc = json.loads(json.dumps(result.to_dict()))
    severities = [f["severity"] for f in doc["findings"]]
    assert severities == sorted(severities, key=["fail", "warn"].index)
    assert doc["counts"] == {"fail": severities.count("fail"), "warn": severities.count("warn")}
    assert doc["ok"] is False


def test_bad_facts_name_the_field() -> None:
    good = control_plane_host().to_dict()
    good["components"]["kubelet"]["process"]["feature_gates"] = {"X": "yes"}
    with pytest.raises(gt.GateAuditError, match=r"facts\['cp-1'\].components.kubelet.process"):
        gf.HostFacts.from_dict(good, "cp-1")
    with pytest.raises(gt.GateAuditError, match="components"):
        gf.HostFacts.from_dict({"host": "x"})


def test_impossible_request_is_refused_by_the_model() -> None:
    with pytest.raises(dra_core.VersionModelError, match="DRAControlPlaneController"):
        run(worker(), gates={"DRAControlPlaneController": True})
    with pytest.raises(gt.GateAuditError, match="kube-proxy"):
        run(worker(), components=["kube-proxy"])


def test_table_marks_failed_and_warned_entries() -> None:
    result = run(control_plane_host("cp-1", "dra"), cms=configmaps("dra"))
    lines = gr.format_table(result.to_dict())
    assert lines[0].startswith("DRA gate audit against Kubernetes 1.37.2: ")
    row = next(ln for ln in lines if ln.startswith("cp-1") and "kube-apiserver" in ln)
    assert "DRAControlPlaneController=true!" in row
    assert "DRAAdminAccess=true~" in row
    assert any(ln.startswith("(configmap)") and "kubelet" in ln for ln in lines)
    assert any(ln.startswith("FAIL gates.model-forbidden cp-1 kube-apiserver") for ln in lines)


# ------------------------------------------------------------------ DRA beta (1.33)

BETA = "1.33.13"


def beta_host(
    name: str, control_plane_variant: str, kubelet_variant: str | None = None
) -> gf.HostFacts:
    """A 1.33.13 control-plane node whose processes run what its files say."""
    return host(
        name,
        *(control_plane(c, variant=f"{BETA}/{control_plane_variant}") for c in CONTROL_PLANE),
        kubelet(variant=f"{BETA}/{kubelet_variant or control_plane_variant}"),
    )


def test_beta_gate_on_the_control_plane_but_not_on_the_kubelet() -> None:
    # Field case: gates in the three control-plane manifests, none in the kubelet
    # configuration; on 1.33 DynamicResourceAllocation is beta and off by default.
    result = run(
        beta_host("cp-1", "v1beta3", kubelet_variant="defaults"),
        cms=configmaps(f"{BETA}/v1beta3"),
        version=BETA,
    )
    missing = found(result, "gates.model-missing")
    assert [(f.severity, f.host, f.component, f.name) for f in missing] == [
        ("fail", "cp-1", "kubelet", "DynamicResourceAllocation")
    ]
    assert missing[0].values == {
        "process": None,
        "file": None,
        "configmap": "true",
        "model": "true",
    }
    # the kubelet-config ConfigMap has the gate: the node file is behind it
    drift = found(result, "gates.configmap-drift")
    assert [(f.severity, f.component, f.name, f.values) for f in drift] == [
        ("fail", "kubelet", "DynamicResourceAllocation", {"file": None, "configmap": "true"})
    ]
    assert "kubeadm upgrade node phase kubelet-config" in drift[0].fix


def test_beta_gate_added_to_the_manifests_only() -> None:
    # Field case: DynamicResourceAllocation=true added by hand to the manifests of a 1.33
    # cluster whose kubeadm-config has no gate: the upgrade turns DRA off again.
    result = run(
        beta_host("cp-1", "v1beta3", kubelet_variant="v1beta3"),
        cms=configmaps(f"{BETA}/defaults"),
        version=BETA,
        components=list(CONTROL_PLANE),
    )
    drift = keyed(result, "gates.configmap-drift")
    for c in CONTROL_PLANE:
        assert drift[("cp-1", c, "DynamicResourceAllocation")] == "fail"
    assert drift[("cp-1", "kube-apiserver", "resource.k8s.io/v1beta1")] == "fail"


def test_a_132_style_configuration_on_133_lacks_v1beta2() -> None:
    # v1beta3 input written for 1.32 (v1beta1 only); the model enables v1beta2 on 1.33 too.
    result = run(beta_host("cp-1", "v1beta3"), cms=configmaps(f"{BETA}/v1beta3"), version=BETA)
    assert keyed(result, "gates.runtime-config-missing") == {
        ("cp-1", "kube-apiserver", "resource.k8s.io/v1beta2"): "fail",
        (None, "kube-apiserver", "resource.k8s.io/v1beta2"): "fail",
    }
    assert [f.id for f in result.failed] == ["gates.runtime-config-missing"] * 2
    assert not found(result, "gates.model-missing")


def test_carried_over_cluster_checked_before_upgrading_to_134() -> None:
    # The dra variant of 1.33.13 still names DRAControlPlaneController (removed in 1.32)
    # and resource.k8s.io/v1alpha3; judged against the 1.34 target before the upgrade.
    result = run(beta_host("cp-1", "dra"), cms=configmaps(f"{BETA}/dra"), version="1.34.4")
    forbidden = keyed(result, "gates.model-forbidden")
    assert {k for k in forbidden if k[0] == "cp-1"} == {
        ("cp-1", c, "DRAControlPlaneController") for c in (*CONTROL_PLANE, "kubelet")
    }
    advice = keyed(result, "gates.model-advice")
    # DRA is GA and on by default in 1.34: setting it only risks the removal in 1.38
    assert advice[("cp-1", "kubelet", "DynamicResourceAllocation")] == "warn"
    assert advice[(None, "kube-apiserver", "resource.k8s.io/v1beta1")] == "warn"


def test_any_gate_the_release_does_not_register_is_forbidden_naming_host_and_file() -> None:
    # Field case: a long-removed non-DRA gate in the kubelet's configuration file stops the
    # kubelet at its next start; the audit names the host, the file and the gate.
    text = (fixture("defaults") / "kubelet-config.yaml").read_text()
    config = yaml.safe_load(text)
    config["featureGates"] = {"CSIMigration": True, "ContextualLogging": True}
    result = run(worker(config=yaml.safe_dump(config)), components=["kubelet"])
    forbidden = found(result, "gates.model-forbidden")
    assert [(f.host, f.component, f.name) for f in forbidden] == [
        ("worker-1", "kubelet", "CSIMigration")
    ]
    assert "registers no feature gate CSIMigration" in forbidden[0].message
    assert "/var/lib/kubelet/config.yaml" in forbidden[0].fix
    # ContextualLogging is registered by every component (component-base logs): no finding.
    assert not [
        f for f in result.findings if f.name == "ContextualLogging" and f.severity == "fail"
    ]


def test_a_controller_manager_only_gate_on_the_kubelet_is_forbidden() -> None:
    result = run(
        worker(extra_args="--feature-gates=ControllerManagerReleaseLeaderElectionLockOnExit=true"),
        components=["kubelet"],
    )
    forbidden = found(result, "gates.model-forbidden")
    assert [(f.component, f.name) for f in forbidden] == [
        ("kubelet", "ControllerManagerReleaseLeaderElectionLockOnExit")
    ]
    assert "only kube-controller-manager registers" in forbidden[0].message
