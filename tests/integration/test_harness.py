"""The control-plane harness against the real components of each pinned release.

Shares one control plane per release (``control_plane``) where tests only read; tests that
need their own flags start their own (``start_control_plane``), API server only where the
controllers play no part.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
from collections.abc import Callable

import pytest
from kubernetes import client

from gpufleet.build import binaries, release_pins
from tests.harness.component_flags import KubeadmCertsConfig, render_kubeadm_config
from tests.harness.controlplane import ControlPlane, ControlPlaneError, build_command

StartControlPlane = Callable[..., ControlPlane]

pytestmark = pytest.mark.integration

RELEASES = release_pins.load_releases()
PINNED = [r.version for r in RELEASES.releases if not r.optional]
DEFAULT = RELEASES.default


def _minor(version: str) -> int:
    return int(version.split(".")[1])


#: resource.k8s.io/v1 is GA from 1.34 (staging/src/k8s.io/api/resource/v1); betas stay off
#: by default (pkg/controlplane/instance.go betaAPIGroupVersionsDisabledByDefault).
GA_DRA = [v for v in PINNED if _minor(v) >= 34]
#: DRA beta releases: gate DynamicResourceAllocation off by default (1.32, 1.33).
BETA_DRA = [v for v in PINNED if _minor(v) in (32, 33)]
#: DynamicResourceAllocation is GA and locked to true from 1.35 (kube_features.go) until
#: 1.38 removes it.
LOCKED_DRA = [v for v in PINNED if 35 <= _minor(v) < 38]
#: DynamicResourceAllocation is no longer registered (removed in 1.38, kube_features.go).
REMOVED_DRA = [v for v in PINNED if _minor(v) >= 38]


def served_versions(cp: ControlPlane, group: str = "resource.k8s.io") -> set[str]:
    """The versions of ``group`` in the API server's discovery (empty when not served)."""
    try:
        doc = cp.get_json(f"/apis/{group}")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return set()
        raise
    return {v["version"] for v in doc["versions"]}


# ------------------------------------------------------------------- (a) versions


def test_kubectl_reports_the_pinned_server_version(control_plane: ControlPlane) -> None:
    """The real kubectl sees the pinned server version. The release's own kubectl when it is
    cached, else the default release's (``kubectl version`` reads any server version)."""
    cp = control_plane
    kubectl = cp.binaries.kubectl if cp.binaries is not None else None
    if kubectl is None:
        kubectl = binaries.binary_path("kubectl")
    if not kubectl.is_file():
        pytest.skip(f"no kubectl is cached; build it with: {build_command(None, ['kubectl'])}")
    out = subprocess.run(
        [str(kubectl), f"--kubeconfig={cp.kubeconfig}", "version", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    ).stdout
    versions = json.loads(out)
    assert versions["serverVersion"]["gitVersion"] == cp.version
    if cp.binaries is not None and kubectl == cp.binaries.kubectl:
        assert versions["clientVersion"]["gitVersion"] == cp.version


@pytest.mark.parametrize("api", ["kubeadm.k8s.io/v1beta4", "kubeadm.k8s.io/v1beta3"])
def test_kubeadm_validates_the_rendered_config(api: str, tmp_path) -> None:
    # kubeadm reads v1beta4 from 1.31 and v1beta3 from 1.22 until 1.35 (removed in 1.36)
    first, last = (31, 99) if api.endswith("v1beta4") else (22, 35)
    readers = [
        v
        for v in PINNED
        if first <= _minor(v) <= last and binaries.binary_path("kubeadm", v).is_file()
    ]
    if not readers:
        oldest = min(PINNED, key=_minor)
        pytest.skip(
            f"no cached kubeadm reads {api}; build one with: {build_command(oldest, ['kubeadm'])}"
        )
    version = max(readers, key=_minor)
    cfg = KubeadmCertsConfig(
        kubernetes_version=version,
        cert_dir=tmp_path / "pki",
        etcd_data_dir=tmp_path / "etcd",
        bind_port=26443,
    )
    config = tmp_path / "kubeadm.yaml"
    config.write_text(render_kubeadm_config(cfg, api))
    result = subprocess.run(
        [str(binaries.binary_path("kubeadm", version)), "config", "validate", f"--config={config}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"kubeadm v{version}: {result.stdout}{result.stderr}"
    assert result.stdout.strip() == "ok"


# ------------------------------------------------------------------- (b) KWOK scale


@pytest.mark.parametrize("control_plane", [DEFAULT], indirect=True, ids=[f"v{DEFAULT}"])
def test_fifty_kwok_nodes_take_a_deployment_of_a_hundred_pods(
    control_plane: ControlPlane,
) -> None:
    cp = control_plane
    if cp.binaries is None or cp.binaries.kwok is None:
        pytest.skip(f"kwok is not cached; build it with: {build_command(tools=['kwok'])}")
    api = cp.api_client()
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)
    pool = {"gpufleet.io/pool": "kwok-scale"}

    t0 = time.monotonic()
    names = cp.start_kwok(50, kubelet_version=str(cp.version), labels=pool)
    created_s = time.monotonic() - t0
    ready_s = cp.wait_nodes_ready(names, timeout_s=120)

    nodes = core.list_node(label_selector="gpufleet.io/pool=kwok-scale").items
    assert len(nodes) == 50
    assert {n.status.node_info.kubelet_version for n in nodes} == {cp.version}

    namespace = "kwok-scale"
    core.create_namespace({"metadata": {"name": namespace}})
    labels = {"app": "kwok-scale"}
    t1 = time.monotonic()
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "kwok-scale", "labels": labels},
            "spec": {
                "replicas": 100,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": pool,
                        "containers": [
                            {
                                "name": "app",
                                # never pulled: KWOK plays the kubelet
                                "image": "registry.invalid/pause:3.10",
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ],
                    },
                },
            },
        },
    )
    deadline = t1 + 180
    while True:
        pods = core.list_namespaced_pod(namespace, label_selector="app=kwok-scale").items
        scheduled = [p for p in pods if p.spec.node_name]
        running = [p for p in scheduled if p.status.phase == "Running"]
        if len(pods) == 100 and len(running) == 100:
            break
        if time.monotonic() > deadline:
            pytest.fail(
                f"after 180s: {len(pods)} pods, {len(scheduled)} scheduled, "
                f"{len(running)} Running (want 100 Running)"
            )
        time.sleep(1)
    scheduled_s = time.monotonic() - t1

    placed_on = {p.spec.node_name for p in running}
    assert placed_on <= set(names)
    # the default scheduler spreads the replicas (PodTopologySpread system defaults)
    assert len(placed_on) >= 10, f"100 pods on only {len(placed_on)} of 50 nodes"
    assert all(p.status.pod_ip for p in running)
    print(
        f"\n{cp.version}: 50 KWOK nodes created in {created_s:.1f}s, Ready after "
        f"{ready_s:.1f}s more; 100 pods scheduled and Running in {scheduled_s:.1f}s "
        f"on {len(placed_on)} nodes"
    )


# ------------------------------------------------------------------- (c) flags pass through


@pytest.mark.parametrize("control_plane", GA_DRA, indirect=True, ids=[f"v{v}" for v in GA_DRA])
def test_runtime_config_serves_resource_v1beta2(
    control_plane: ControlPlane, start_control_plane: StartControlPlane
) -> None:
    default = served_versions(control_plane)
    assert "v1" in default
    assert "v1beta2" not in default

    flagged = start_control_plane(
        str(control_plane.version),
        extra_args={"kube-apiserver": {"runtime-config": "resource.k8s.io/v1beta2=true"}},
        with_controllers=False,
    )
    served = served_versions(flagged)
    assert {"v1", "v1beta2"} <= served
    assert "v1beta1" not in served


@pytest.mark.parametrize("control_plane", BETA_DRA, indirect=True, ids=[f"v{v}" for v in BETA_DRA])
def test_dra_gate_and_runtime_config_serve_resource_v1beta1(
    control_plane: ControlPlane, start_control_plane: StartControlPlane
) -> None:
    default = served_versions(control_plane)
    assert "v1beta1" not in default
    assert "v1beta2" not in default

    flagged = start_control_plane(
        str(control_plane.version),
        extra_args={
            "kube-apiserver": {
                "feature-gates": "DynamicResourceAllocation=true",
                "runtime-config": "resource.k8s.io/v1beta1=true",
            }
        },
        with_controllers=False,
    )
    served = served_versions(flagged)
    assert "v1beta1" in served
    assert "v1" not in served


@pytest.mark.parametrize("control_plane", [DEFAULT], indirect=True, ids=[f"v{DEFAULT}"])
def test_two_control_planes_run_side_by_side(
    control_plane: ControlPlane, start_control_plane: StartControlPlane
) -> None:
    other = start_control_plane(str(control_plane.version), with_controllers=False)
    assert other.ports.apiserver != control_plane.ports.apiserver
    assert other.ports.etcd_client != control_plane.ports.etcd_client
    name = "side-by-side"
    client.CoreV1Api(other.api_client()).create_namespace({"metadata": {"name": name}})
    names = {
        ns.metadata.name
        for ns in client.CoreV1Api(control_plane.api_client()).list_namespace().items
    }
    assert "kube-system" in names
    assert name not in names  # each has its own etcd
    other.stop()
    assert not other.layout.root.exists()
    assert all(p.exit_code() is not None for p in other.processes.values())
    assert served_versions(control_plane)  # the shared one is untouched


@pytest.mark.parametrize("version", PINNED, ids=[f"v{v}" for v in PINNED])
def test_apiserver_refuses_a_resource_version_no_longer_served(
    version: str, start_control_plane: StartControlPlane
) -> None:
    # resource.k8s.io/v1alpha2 was dropped in 1.31; MergeAPIResourceConfigs refuses it
    # (staging/src/k8s.io/apiserver/pkg/server/resourceconfig/helpers.go).
    with pytest.raises(ControlPlaneError) as err:
        start_control_plane(
            version,
            extra_args={"kube-apiserver": {"runtime-config": "resource.k8s.io/v1alpha2=true"}},
            with_controllers=False,
        )
    assert err.value.component == "kube-apiserver"
    assert "exited with code" in str(err.value)
    assert "resource.k8s.io/v1alpha2 that has not been registered" in err.value.log_tail


@pytest.mark.parametrize("version", LOCKED_DRA, ids=[f"v{v}" for v in LOCKED_DRA])
def test_apiserver_refuses_to_turn_off_the_locked_dra_gate(
    version: str, start_control_plane: StartControlPlane
) -> None:
    with pytest.raises(ControlPlaneError) as err:
        start_control_plane(
            version,
            extra_args={"kube-apiserver": {"feature-gates": "DynamicResourceAllocation=false"}},
            with_controllers=False,
        )
    assert err.value.component == "kube-apiserver"
    assert (
        "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"
        in err.value.log_tail
    )


@pytest.mark.parametrize("version", REMOVED_DRA, ids=[f"v{v}" for v in REMOVED_DRA])
def test_apiserver_refuses_the_removed_dra_gate(
    version: str, start_control_plane: StartControlPlane
) -> None:
    with pytest.raises(ControlPlaneError) as err:
        start_control_plane(
            version,
            extra_args={"kube-apiserver": {"feature-gates": "DynamicResourceAllocation=true"}},
            with_controllers=False,
        )
    assert err.value.component == "kube-apiserver"
    assert "unrecognized feature gate: DynamicResourceAllocation" in err.value.log_tail
