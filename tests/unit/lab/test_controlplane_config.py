"""The pure parts of the control-plane harness: kubeadm config, flags, ports, KWOK nodes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from tests.harness import component_flags as cf
from tests.harness import controlplane as cp

pytestmark = pytest.mark.unit


PORTS = cf.Ports(
    etcd_client=23790,
    etcd_peer=23800,
    etcd_metrics=23810,
    apiserver=26443,
    controller_manager=20257,
    scheduler=20259,
)


@pytest.fixture
def layout(tmp_path: Path) -> cf.Layout:
    return cf.Layout(tmp_path / "cp")


# ----------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("1.37.2", "v1.37.2"),
        ("v1.33.13", "v1.33.13"),
        (" v1.36.3 ", "v1.36.3"),
        ("1.38.0-beta.0", "v1.38.0-beta.0"),
        ("v1.38.0-rc.1+abc", "v1.38.0-rc.1"),
    ],
)
def test_normalize_version_adds_the_v(given: str, expected: str) -> None:
    assert cf.normalize_version(given) == expected


@pytest.mark.parametrize("bad", ["1.37", "latest", "v1.x.2", ""])
def test_parse_version_names_the_bad_value(bad: str) -> None:
    with pytest.raises(ValueError, match=r"version=.*MAJOR\.MINOR\.PATCH"):
        cf.parse_version(bad)


@pytest.mark.parametrize(
    ("kubeadm_version", "api"),
    [
        ("v1.30.14", "kubeadm.k8s.io/v1beta3"),
        ("v1.31.0", "kubeadm.k8s.io/v1beta4"),
        ("v1.33.13", "kubeadm.k8s.io/v1beta4"),
        ("v1.37.2", "kubeadm.k8s.io/v1beta4"),
    ],
)
def test_kubeadm_config_api_switches_to_v1beta4_at_1_31(kubeadm_version: str, api: str) -> None:
    assert cf.kubeadm_config_api(kubeadm_version) == api


# ----------------------------------------------------------------- kubeadm config


def _certs_config(tmp_path: Path, version: str = "1.37.2") -> cf.KubeadmCertsConfig:
    return cf.KubeadmCertsConfig(
        kubernetes_version=version,
        cert_dir=tmp_path / "pki",
        etcd_data_dir=tmp_path / "etcd",
        bind_port=26443,
    )


def test_kubeadm_config_v1beta4_has_both_documents(tmp_path: Path) -> None:
    text = cf.render_kubeadm_config(_certs_config(tmp_path), "kubeadm.k8s.io/v1beta4")
    init, cluster = list(yaml.safe_load_all(text))

    assert init["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert init["kind"] == "InitConfiguration"
    # kubeadm refuses a loopback advertise address; loopback goes in controlPlaneEndpoint
    assert init["localAPIEndpoint"] == {"bindPort": 26443}
    assert init["nodeRegistration"]["criSocket"].startswith("unix://")
    assert init["nodeRegistration"]["taints"] == []

    assert cluster["kind"] == "ClusterConfiguration"
    assert cluster["kubernetesVersion"] == "v1.37.2"
    assert cluster["controlPlaneEndpoint"] == "127.0.0.1:26443"
    assert cluster["certificatesDir"] == str(tmp_path / "pki")
    assert cluster["etcd"]["local"]["dataDir"] == str(tmp_path / "etcd")
    assert "127.0.0.1" in cluster["apiServer"]["certSANs"]
    assert "127.0.0.1" in cluster["etcd"]["local"]["serverCertSANs"]
    assert cluster["networking"]["serviceSubnet"] == "10.96.0.0/12"
    assert cluster["encryptionAlgorithm"] == "ECDSA-P256"


def test_kubeadm_config_v1beta3_has_no_encryption_algorithm(tmp_path: Path) -> None:
    # encryptionAlgorithm is a v1beta4 field (cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go)
    text = cf.render_kubeadm_config(_certs_config(tmp_path, "1.30.14"), "kubeadm.k8s.io/v1beta3")
    init, cluster = list(yaml.safe_load_all(text))
    assert init["apiVersion"] == cluster["apiVersion"] == "kubeadm.k8s.io/v1beta3"
    assert "encryptionAlgorithm" not in cluster
    assert cluster["kubernetesVersion"] == "v1.30.14"


def test_kubeadm_config_takes_an_advertise_address(tmp_path: Path) -> None:
    cfg = cf.KubeadmCertsConfig(
        kubernetes_version="1.37.2",
        cert_dir=tmp_path / "pki",
        etcd_data_dir=tmp_path / "etcd",
        bind_port=26443,
        advertise_address="192.0.2.10",
    )
    init, _ = list(yaml.safe_load_all(cf.render_kubeadm_config(cfg, "kubeadm.k8s.io/v1beta4")))
    assert init["localAPIEndpoint"] == {"advertiseAddress": "192.0.2.10", "bindPort": 26443}


def test_kubeadm_config_refuses_an_unknown_api(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"api_version='kubeadm.k8s.io/v1beta2'"):
        cf.render_kubeadm_config(_certs_config(tmp_path), "kubeadm.k8s.io/v1beta2")


# ----------------------------------------------------------------- flags


def test_merge_flags_overrides_adds_and_removes() -> None:
    merged = cf.merge_flags(
        {"secure-port": "6443", "authorization-mode": "Node,RBAC", "v": "0"},
        {"--v": "4", "runtime-config": "resource.k8s.io/v1beta2=true", "authorization-mode": None},
    )
    assert merged == {
        "secure-port": "6443",
        "v": "4",
        "runtime-config": "resource.k8s.io/v1beta2=true",
    }


def test_merge_flags_rejects_an_empty_name() -> None:
    with pytest.raises(ValueError, match="empty flag name '--'"):
        cf.merge_flags({}, {"--": "x"})


def test_render_flags_is_sorted_and_dashed() -> None:
    assert cf.render_flags({"v": "2", "feature-gates": "A=true,B=false"}) == [
        "--feature-gates=A=true,B=false",
        "--v=2",
    ]


def test_validate_extra_args_names_an_unknown_component() -> None:
    with pytest.raises(ValueError, match=r"component 'kube-apiservr'.*kube-apiserver"):
        cf.validate_extra_args({"kube-apiservr": {"v": "2"}})


def test_validate_extra_args_refuses_a_non_mapping() -> None:
    with pytest.raises(ValueError, match=r"extra_args\['etcd'\]='--v=2' must be a mapping"):
        cf.validate_extra_args({"etcd": "--v=2"})  # type: ignore[dict-item]


def test_apiserver_flags_wire_etcd_and_ports(layout: cf.Layout) -> None:
    flags = cf.apiserver_flags(layout, PORTS)
    assert flags["secure-port"] == "26443"
    assert flags["etcd-servers"] == "https://127.0.0.1:23790"
    assert flags["bind-address"] == flags["advertise-address"] == "127.0.0.1"
    assert flags["authorization-mode"] == "Node,RBAC"
    assert flags["service-account-issuer"] == "https://kubernetes.default.svc.cluster.local"
    # every file the apiserver reads lies inside this control plane's directory
    files = [v for k, v in flags.items() if k.endswith(("-file", "cafile", "certfile", "keyfile"))]
    files += [flags["kubelet-client-certificate"], flags["kubelet-client-key"]]
    assert len(files) >= 12
    assert all(Path(f).is_relative_to(layout.root) for f in files)


def test_etcd_flags_use_this_control_planes_ports(layout: cf.Layout) -> None:
    flags = cf.etcd_flags(layout, PORTS)
    assert flags["listen-client-urls"] == "https://127.0.0.1:23790"
    assert flags["initial-cluster"] == "gpufleet-harness=https://127.0.0.1:23800"
    assert flags["listen-metrics-urls"] == "http://127.0.0.1:23810"
    assert flags["data-dir"] == str(layout.etcd_data)
    assert flags["client-cert-auth"] == flags["peer-client-cert-auth"] == "true"


def test_controller_manager_and_scheduler_flags_use_their_kubeconfigs(layout: cf.Layout) -> None:
    kcm = cf.controller_manager_flags(layout, PORTS)
    sched = cf.scheduler_flags(layout, PORTS)
    assert kcm["secure-port"] == "20257"
    assert sched["secure-port"] == "20259"
    assert kcm["kubeconfig"] == str(layout.kubeconfigs / "controller-manager.conf")
    assert sched["kubeconfig"] == str(layout.kubeconfigs / "scheduler.conf")
    assert kcm["controllers"] == "*,bootstrapsigner,tokencleaner"
    assert kcm["service-account-private-key-file"] == str(layout.pki / "sa.key")


def test_extra_args_reach_the_rendered_apiserver_command(layout: cf.Layout) -> None:
    extra = cf.validate_extra_args(
        {"kube-apiserver": {"runtime-config": "resource.k8s.io/v1beta2=true", "secure-port": 1}}
    )
    argv = cf.render_flags(
        cf.merge_flags(cf.apiserver_flags(layout, PORTS), extra["kube-apiserver"])
    )
    assert "--runtime-config=resource.k8s.io/v1beta2=true" in argv
    assert "--secure-port=1" in argv
    assert "--secure-port=26443" not in argv


def test_kwok_flags_select_annotated_nodes(layout: cf.Layout) -> None:
    flags = cf.kwok_flags(layout, 31000)
    assert flags["manage-all-nodes"] == "false"
    assert flags["manage-nodes-with-annotation-selector"] == "kwok.x-k8s.io/node=fake"
    assert flags["server-address"] == "127.0.0.1:31000"
    assert flags["config"] == str(layout.kwok_config)
    assert flags["kubeconfig"] == str(layout.kubeconfigs / "admin.conf")


def stage_files_beside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> Path:
    """A kwok binary's path with every stage file beside it (and an empty module cache)."""
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "modcache"))
    binary = tmp_path / "bin" / "kwok" / version / "kwok"
    (binary.parent / "stages").mkdir(parents=True)
    for rel in cf.KWOK_STAGE_FILES:
        (binary.parent / "stages" / Path(rel).name).write_text("kind: Stage\n")
    return binary


def test_kwok_without_heartbeats_keeps_no_lease(layout: cf.Layout) -> None:
    assert "node-lease-duration-seconds" not in cf.kwok_flags(layout, 31000)
    quiet = cf.kwok_flags(layout, 31000, heartbeats=False)
    assert quiet["node-lease-duration-seconds"] == "0"
    assert quiet["manage-nodes-with-annotation-selector"] == "kwok.x-k8s.io/node=fake"


def test_kwok_stage_files_without_heartbeats_leave_out_only_the_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = stage_files_beside(tmp_path, monkeypatch, "v0.7.0")
    found = [f.name for f in cf.find_kwok_stage_files(binary, "v0.7.0", heartbeats=False)]
    assert found == [
        Path(rel).name for rel in cf.KWOK_STAGE_FILES if rel != cf.KWOK_HEARTBEAT_STAGE
    ]
    assert "node-initialize.yaml" in found and "pod-ready.yaml" in found
    assert Path(cf.KWOK_HEARTBEAT_STAGE).name not in found


@pytest.mark.parametrize(
    ("version", "needs"), [("v0.6.1", False), ("v0.7.0", False), ("v0.8.0", True), ("1.0.0", True)]
)
def test_kwok_stage_files_needed_from_0_8(version: str, needs: bool) -> None:
    assert cf.kwok_needs_stage_files(version) is needs


def test_find_kwok_stage_files_beside_the_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = stage_files_beside(tmp_path, monkeypatch, "v0.8.0")
    found = cf.find_kwok_stage_files(binary, "v0.8.0")
    assert [f.name for f in found] == [Path(rel).name for rel in cf.KWOK_STAGE_FILES]


def test_find_kwok_stage_files_in_the_go_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modcache = tmp_path / "modcache"
    monkeypatch.setenv("GOMODCACHE", str(modcache))
    for rel in cf.KWOK_STAGE_FILES:
        path = modcache / "sigs.k8s.io" / "kwok@v0.8.0" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("kind: Stage\n")
    found = cf.find_kwok_stage_files(tmp_path / "bin" / "kwok", "v0.8.0")
    assert all(f.is_relative_to(modcache) for f in found)


def test_find_kwok_stage_files_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "modcache"))
    with pytest.raises(FileNotFoundError, match=r"go mod download sigs.k8s.io/kwok@v0.8.0"):
        cf.find_kwok_stage_files(tmp_path / "kwok", "v0.8.0")


# ----------------------------------------------------------------- ports


def test_pick_free_ports_are_distinct_and_bindable() -> None:
    ports = cf.pick_free_ports(8)
    assert len(set(ports)) == 8
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_pick_free_ports_never_hands_out_a_port_twice() -> None:
    first = set(cf.pick_free_ports(20))
    second = set(cf.pick_free_ports(20))
    assert not first & second


def test_pick_free_ports_needs_a_positive_count() -> None:
    with pytest.raises(ValueError, match="count=0"):
        cf.pick_free_ports(0)


# ----------------------------------------------------------------- kwok nodes


def test_kwok_node_manifest_carries_what_kwok_and_the_scheduler_read() -> None:
    node = cf.kwok_node_manifest(
        "kwok-node-3",
        kubelet_version="1.36.3",
        labels={"nvidia.com/gpu.present": "true", "type": "gpu"},
        allocatable={"cpu": "64"},
    )
    meta = node["metadata"]
    assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert meta["labels"]["kubernetes.io/hostname"] == "kwok-node-3"
    assert meta["labels"]["nvidia.com/gpu.present"] == "true"
    assert meta["labels"]["type"] == "gpu"  # a given label wins over the default
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.3"
    assert node["status"]["allocatable"] == {"cpu": "64", "memory": "256Gi", "pods": "110"}
    assert node["status"]["capacity"] == node["status"]["allocatable"]
    assert node["spec"] == {}


def test_kwok_node_manifest_taints() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    node = cf.kwok_node_manifest("n", kubelet_version="v1.37.2", taints=[taint])
    assert node["spec"]["taints"] == [taint]


# ----------------------------------------------------------------- errors


def test_control_plane_error_quotes_the_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "kube-apiserver.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    proc = cp.Process("kube-apiserver", ["kube-apiserver"], log)
    err = proc.error("exited with code 1")
    text = str(err)
    assert text.startswith("kube-apiserver: exited with code 1")
    assert "line 99" in text
    assert "line 60" in text
    assert "line 59" not in text  # exactly the last 40 lines
    assert err.component == "kube-apiserver"


def test_extra_args_for_an_unknown_component_fail_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="component 'kubelet'"):
        cp.ControlPlane("v1.37.2", extra_args={"kubelet": {"v": "2"}})


# ----------------------------------------------------------------- kubeconfigs


def test_point_kubeconfig_at_rewrites_every_cluster_server(tmp_path: Path) -> None:
    conf = tmp_path / "scheduler.conf"
    conf.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "gpufleet-harness",
                        "cluster": {
                            "server": "https://192.0.2.2:6443",
                            "certificate-authority-data": "Y2E=",
                        },
                    }
                ],
                "users": [{"name": "system:kube-scheduler", "user": {}}],
            }
        )
    )
    cp.point_kubeconfig_at(conf, "https://127.0.0.1:26443")
    data = yaml.safe_load(conf.read_text())
    assert data["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:26443",
        "certificate-authority-data": "Y2E=",
    }
    assert data["users"] == [{"name": "system:kube-scheduler", "user": {}}]


# ----------------------------------------------------------------- binaries cache


def test_build_command_names_release_components_and_tools() -> None:
    assert cp.build_command("v1.33.13", ["kube-apiserver", "kubeadm"]) == (
        "python -m gpufleet.build.binaries build --kubernetes 1.33.13 "
        "--components kube-apiserver,kubeadm"
    )
    assert cp.build_command(tools=["etcd", "kwok"]) == (
        "python -m gpufleet.build.binaries build --tools etcd,kwok"
    )


def _touch_binary(root: Path, group: str, version: str, name: str) -> Path:
    path = root / "bin" / group / version / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


def test_missing_binaries_lists_what_the_cache_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    _touch_binary(tmp_path, "kubernetes", "v1.37.2", "kube-apiserver")
    assert cp.missing_binaries("1.37.2") == [
        "kube-controller-manager v1.37.2",
        "kube-scheduler v1.37.2",
        "kubeadm v1.37.2",
        "etcd",
    ]
    with pytest.raises(FileNotFoundError, match=r"build them with: python -m gpufleet\.build\."):
        cp.find_binaries("1.37.2")


def test_find_binaries_falls_back_to_the_default_etcd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpufleet.build import release_pins

    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    releases = release_pins.load_releases()
    old = next(r for r in releases.releases if r.etcd != releases.tool("etcd").version)
    for name in cp.REQUIRED_KUBERNETES_BINARIES:
        _touch_binary(tmp_path, "kubernetes", old.tag, name)
    default_etcd = _touch_binary(tmp_path, "etcd", releases.tool("etcd").tag, "etcd")

    found = cp.find_binaries(old.version)
    assert found.etcd == default_etcd
    assert found.etcd_note == (
        f"etcd v{old.etcd} (pinned for {old.tag}) not cached; using {default_etcd}"
    )
    assert found.kubectl is None
    assert found.kwok is None
    assert found.kubeadm == tmp_path / "bin" / "kubernetes" / old.tag / "kubeadm"
    with pytest.raises(cp.ControlPlaneError, match=r"kwok: not in the binaries cache"):
        found.for_component("kwok")
