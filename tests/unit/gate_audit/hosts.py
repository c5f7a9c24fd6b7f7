"""Host and ConfigMap facts built from the kubeadm fixtures (``tests/unit/data/kubeadm``), shared
by the gate audit tests.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import audit as ga
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import metrics as gm
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import report as gr
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import processes as hp
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce

KUBEADM = Path(__file__).resolve().parents[1] / "data" / "kubeadm"

METRICS = Path(__file__).resolve().parents[1] / "data" / "metrics" / "1.37.2"

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


def fixture(variant: str) -> Path:
    """``"dra"`` -> the 1.37.2 variant; ``"1.33.13/v1beta3"`` -> that release's."""
    return KUBEADM / (variant if "/" in variant else f"{VERSION}/{variant}")


def manifest_text(variant: str, component: str) -> str:
    return (fixture(variant) / "manifests" / f"{component}.yaml").read_text()


def command_of(text: str) -> list[str]:
    return list(yaml.safe_load(text)["spec"]["containers"][0]["command"])


def as_proc(argv: list[str]) -> list[str]:
    """``argv`` through ``/proc/<pid>/cmdline``'s encoding and back."""
    return hp.split_cmdline(b"\0".join(a.encode() for a in argv) + b"\0")


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
