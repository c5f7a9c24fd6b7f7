"""What the test harness's control plane is made of, as data: releases, free loopback
ports, the directory layout, the kubeadm configuration it renders (its config API from
the version model, ``dra.api.kubeadm_config_api``), every component's flags as kubeadm's
static pod manifests set them, and KWOK's node manifests and stage files.

Pure functions but for ``pick_free_ports`` (binds loopback sockets) and
``find_kwok_stage_files`` (reads the Go module cache). ``tests.harness.controlplane``
starts the processes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api

#: Names of the components this module starts, in start order.
ETCD = "etcd"
KUBE_APISERVER = "kube-apiserver"
KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
KUBE_SCHEDULER = "kube-scheduler"
KWOK = "kwok"
COMPONENTS = (ETCD, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER, KWOK)

#: Annotation KWOK selects its nodes by (``--manage-nodes-with-annotation-selector``).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"

#: Lines of a component's log quoted in a ``ControlPlaneError``.
LOG_TAIL_LINES = 40

#: kubeadm's group for ``admin.conf`` since 1.29; bound to ``cluster-admin`` by
#: ``kubeadm init`` (cmd/kubeadm/app/constants/constants.go,
#: ClusterAdminsGroupAndClusterRoleBinding).
KUBEADM_CLUSTER_ADMINS = "kubeadm:cluster-admins"

#: Stage files KWOK needs so that nodes turn Ready and pods Running, as kwokctl composes
#: them (``kustomize/stage/fast/kustomization.yaml`` in ``sigs.k8s.io/kwok``): paths
#: relative to the root of the kwok Go module.
#: The Stage that refreshes every node's conditions beside its Lease (every 600 to 610 s
#: a node). With no stage configured kwok 0.7 runs its embedded ``node-heartbeat``
#: instead, every 20 to 25 s a node, and renews each node's Lease every 10 s: about 1,400
#: writes a second asked of the API server at 10,000 nodes.
KWOK_HEARTBEAT_STAGE = "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"
KWOK_STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    KWOK_HEARTBEAT_STAGE,
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)

ExtraArgs = Mapping[str, Mapping[str, "str | None"]]


# --------------------------------------------------------------------------- versions


_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(?:\+.*)?$")


def parse_version(version: str) -> tuple[int, int, int]:
    """``"v1.37.2"`` or ``"1.37.2"`` -> ``(1, 37, 2)``.

    Raises ``ValueError`` naming the value when it is not ``[v]MAJOR.MINOR.PATCH``.
    """
    match = _VERSION_RE.match(version.strip())
    if not match:
        raise ValueError(
            f"version={version!r} is not a Kubernetes release; "
            "use MAJOR.MINOR.PATCH, e.g. 'v1.37.2'"
        )
    major, minor, patch = (int(g) for g in match.groups()[:3])
    return major, minor, patch


def normalize_version(version: str) -> str:
    """``"1.37.2"`` -> ``"v1.37.2"``, ``"1.38.0-beta.0"`` -> ``"v1.38.0-beta.0"`` (a
    pre-release keeps its suffix); the form the binaries cache and kubeadm use."""
    major, minor, patch = parse_version(version)
    pre = _VERSION_RE.match(version.strip()).group(4) or ""  # type: ignore[union-attr]
    return f"v{major}.{minor}.{patch}{pre}"


def kubeadm_config_api(kubeadm_version: str) -> str:
    """The kubeadm config API group-version a kubeadm release writes: the version model's
    preferred one (``dra.api.kubeadm_config_api``; v1beta4 from 1.31, v1beta3 before)."""

    return dra_api.kubeadm_config_api(normalize_version(kubeadm_version).lstrip("v")).preferred


# --------------------------------------------------------------------------- ports

_PORTS_HANDED_OUT: set[int] = set()
_PORTS_LOCK = threading.Lock()


def pick_free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that are free on ``host`` right now.

    Each port is found by binding to port 0; all sockets stay open until every port is
    picked, so the list has no duplicates, and ports handed out earlier in this process
    are never handed out again, so two control planes in one process never collide.
    Raises ``ValueError`` when ``count`` < 1.
    """
    if count < 1:
        raise ValueError(f"count={count} must be at least 1")
    sockets: list[socket.socket] = []
    ports: list[int] = []
    try:
        with _PORTS_LOCK:
            while len(ports) < count:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind((host, 0))
                port = sock.getsockname()[1]
                if port in _PORTS_HANDED_OUT:
                    continue
                ports.append(port)
            _PORTS_HANDED_OUT.update(ports)
    finally:
        for sock in sockets:
            sock.close()
    return ports


@dataclass(frozen=True)
class Ports:
    """Loopback TCP ports of one control plane."""

    etcd_client: int
    etcd_peer: int
    etcd_metrics: int
    apiserver: int
    controller_manager: int
    scheduler: int

    @classmethod
    def pick(cls, host: str = "127.0.0.1") -> Ports:
        return cls(*pick_free_ports(6, host))


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Layout:
    """Where one control plane keeps its files, all under ``root``."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def kubeconfigs(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd-data"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def kubeadm_config(self) -> Path:
        return self.root / "kubeadm.yaml"

    @property
    def kwok_config(self) -> Path:
        return self.root / "kwok.yaml"

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"

    def kubeconfig(self, name: str) -> Path:
        """``name``: admin, super-admin, controller-manager or scheduler."""
        return self.kubeconfigs / f"{name}.conf"


# --------------------------------------------------------------------------- kubeadm config


@dataclass(frozen=True)
class KubeadmCertsConfig:
    """What ``kubeadm init phase certs|kubeconfig`` needs to know about this control plane.

    ``kubernetes_version`` is the version written into the ClusterConfiguration; it
    must lie in the window the kubeadm binary accepts, so pass the kubeadm's own version.
    ``control_plane_host``:``bind_port`` becomes ``controlPlaneEndpoint``, the server of
    every kubeconfig. ``advertise_address`` (the InitConfiguration's, a SAN of the API
    server certificate) is left out by default: kubeadm then takes the host's default
    route address. kubeadm refuses a loopback advertise address unless the loopback
    interface carries a global unicast address ("unable to select an IP from lo network
    interface", cmd/kubeadm/app/util/config/initconfiguration.go
    SetAPIEndpointDynamicDefaults), so loopback is reached through controlPlaneEndpoint.
    ``encryption_algorithm`` (v1beta4 only): RSA-2048, RSA-3072, RSA-4096, ECDSA-P256 or
    ECDSA-P384 (cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go); ECDSA keys are
    generated in milliseconds, which matters on small CI machines.
    """

    kubernetes_version: str
    cert_dir: Path
    etcd_data_dir: Path
    bind_port: int
    control_plane_host: str = "127.0.0.1"
    advertise_address: str | None = None
    cluster_name: str = "gpufleet-harness"
    node_name: str = "gpufleet-harness"
    service_subnet: str = "10.96.0.0/12"
    dns_domain: str = "cluster.local"
    cri_socket: str = "unix:///run/containerd/containerd.sock"
    encryption_algorithm: str = "ECDSA-P256"
    extra_sans: tuple[str, ...] = ("127.0.0.1", "localhost")


def render_kubeadm_config(cfg: KubeadmCertsConfig, api_version: str) -> str:
    """An InitConfiguration + ClusterConfiguration (two YAML documents) for ``cfg``.

    ``api_version``: ``kubeadm.k8s.io/v1beta4`` or ``kubeadm.k8s.io/v1beta3`` (see
    ``kubeadm_config_api``). The CRI socket is set explicitly so that kubeadm does not
    probe for a runtime, and ``kubernetesVersion`` so that it does not ask dl.k8s.io.
    Raises ``ValueError`` for any other API version.
    """
    if api_version not in ("kubeadm.k8s.io/v1beta4", "kubeadm.k8s.io/v1beta3"):
        raise ValueError(
            f"api_version={api_version!r} is not a kubeadm config API this harness renders; "
            "use kubeadm.k8s.io/v1beta4 (kubeadm >= 1.31) or kubeadm.k8s.io/v1beta3"
        )
    endpoint: dict[str, Any] = {"bindPort": cfg.bind_port}
    if cfg.advertise_address:
        endpoint = {"advertiseAddress": cfg.advertise_address, **endpoint}
    init = {
        "apiVersion": api_version,
        "kind": "InitConfiguration",
        "localAPIEndpoint": endpoint,
        "nodeRegistration": {
            "name": cfg.node_name,
            "criSocket": cfg.cri_socket,
            "taints": [],
        },
    }
    cluster: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "ClusterConfiguration",
        "clusterName": cfg.cluster_name,
        "kubernetesVersion": normalize_version(cfg.kubernetes_version),
        "controlPlaneEndpoint": f"{cfg.control_plane_host}:{cfg.bind_port}",
        "certificatesDir": str(cfg.cert_dir),
        "networking": {"serviceSubnet": cfg.service_subnet, "dnsDomain": cfg.dns_domain},
        "apiServer": {"certSANs": list(cfg.extra_sans)},
        "etcd": {
            "local": {
                "dataDir": str(cfg.etcd_data_dir),
                "serverCertSANs": list(cfg.extra_sans),
                "peerCertSANs": list(cfg.extra_sans),
            }
        },
    }
    if api_version.endswith("v1beta4"):
        cluster["encryptionAlgorithm"] = cfg.encryption_algorithm
    return yaml.safe_dump_all([init, cluster], sort_keys=False)


# --------------------------------------------------------------------------- flags


def merge_flags(
    defaults: Mapping[str, str], extra: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    """``defaults`` overridden by ``extra``; an ``extra`` value of ``None`` drops the flag.

    Flag names are given without leading dashes; a name written with them (``"--v"``)
    is accepted and stripped. Raises ``ValueError`` for an empty name.
    """
    merged = dict(defaults)
    for raw_name, value in (extra or {}).items():
        name = raw_name.lstrip("-")
        if not name:
            raise ValueError(f"extra_args has an empty flag name {raw_name!r}")
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = str(value)
    return merged


def render_flags(flags: Mapping[str, str]) -> list[str]:
    """``{"secure-port": "6443"}`` -> ``["--secure-port=6443"]``, sorted by name.

    Sorted like kubeadm's ``ArgumentsToCommand`` so that a command line reads the same
    each run.
    """
    return [f"--{name}={flags[name]}" for name in sorted(flags)]


def etcd_flags(layout: Layout, ports: Ports, name: str = "gpufleet-harness") -> dict[str, str]:
    """Flags of kubeadm's local etcd (cmd/kubeadm/app/phases/etcd/local.go getEtcdCommand),
    on this control plane's ports, plus ``--unsafe-no-fsync`` (a throwaway data dir)."""
    pki = layout.pki / "etcd"
    client = f"https://127.0.0.1:{ports.etcd_client}"
    peer = f"https://127.0.0.1:{ports.etcd_peer}"
    return {
        "name": name,
        "data-dir": str(layout.etcd_data),
        "listen-client-urls": client,
        "advertise-client-urls": client,
        "listen-peer-urls": peer,
        "initial-advertise-peer-urls": peer,
        "initial-cluster": f"{name}={peer}",
        "listen-metrics-urls": f"http://127.0.0.1:{ports.etcd_metrics}",
        "cert-file": str(pki / "server.crt"),
        "key-file": str(pki / "server.key"),
        "trusted-ca-file": str(pki / "ca.crt"),
        "client-cert-auth": "true",
        "peer-cert-file": str(pki / "peer.crt"),
        "peer-key-file": str(pki / "peer.key"),
        "peer-trusted-ca-file": str(pki / "ca.crt"),
        "peer-client-cert-auth": "true",
        "snapshot-count": "10000",
        "unsafe-no-fsync": "true",
    }


def apiserver_flags(
    layout: Layout,
    ports: Ports,
    *,
    service_subnet: str = "10.96.0.0/12",
    dns_domain: str = "cluster.local",
) -> dict[str, str]:
    """Flags of kubeadm's kube-apiserver static pod (cmd/kubeadm/app/phases/controlplane/
    manifests.go getAPIServerCommand), bound to 127.0.0.1 on this control plane's port.

    One addition: ``--endpoint-reconciler-type=none``. The API server refuses to write a
    loopback advertise address into the ``kubernetes`` Service's endpoints and exits
    ("cannot use public IP 127.0.0.1 with endpoint reconciler: ... may not be in the
    loopback range"); nothing in this harness reaches the API server through that Service.
    """
    pki = layout.pki
    return {
        "advertise-address": "127.0.0.1",
        "bind-address": "127.0.0.1",
        "endpoint-reconciler-type": "none",
        "secure-port": str(ports.apiserver),
        "allow-privileged": "true",
        "authorization-mode": "Node,RBAC",
        "enable-admission-plugins": "NodeRestriction",
        "enable-bootstrap-token-auth": "true",
        "client-ca-file": str(pki / "ca.crt"),
        "tls-cert-file": str(pki / "apiserver.crt"),
        "tls-private-key-file": str(pki / "apiserver.key"),
        "etcd-servers": f"https://127.0.0.1:{ports.etcd_client}",
        "etcd-cafile": str(pki / "etcd" / "ca.crt"),
        "etcd-certfile": str(pki / "apiserver-etcd-client.crt"),
        "etcd-keyfile": str(pki / "apiserver-etcd-client.key"),
        "kubelet-client-certificate": str(pki / "apiserver-kubelet-client.crt"),
        "kubelet-client-key": str(pki / "apiserver-kubelet-client.key"),
        "kubelet-preferred-address-types": "InternalIP,ExternalIP,Hostname",
        "proxy-client-cert-file": str(pki / "front-proxy-client.crt"),
        "proxy-client-key-file": str(pki / "front-proxy-client.key"),
        "requestheader-allowed-names": "front-proxy-client",
        "requestheader-client-ca-file": str(pki / "front-proxy-ca.crt"),
        "requestheader-extra-headers-prefix": "X-Remote-Extra-",
        "requestheader-group-headers": "X-Remote-Group",
        "requestheader-username-headers": "X-Remote-User",
        "service-account-issuer": f"https://kubernetes.default.svc.{dns_domain}",
        "service-account-key-file": str(pki / "sa.pub"),
        "service-account-signing-key-file": str(pki / "sa.key"),
        "service-cluster-ip-range": service_subnet,
    }


def controller_manager_flags(
    layout: Layout, ports: Ports, *, cluster_name: str = "gpufleet-harness"
) -> dict[str, str]:
    """Flags of kubeadm's kube-controller-manager static pod (manifests.go
    getControllerManagerCommand), serving /healthz on this control plane's port."""
    pki = layout.pki
    kubeconfig = str(layout.kubeconfig("controller-manager"))
    return {
        "bind-address": "127.0.0.1",
        "secure-port": str(ports.controller_manager),
        "leader-elect": "true",
        "kubeconfig": kubeconfig,
        "authentication-kubeconfig": kubeconfig,
        "authorization-kubeconfig": kubeconfig,
        "client-ca-file": str(pki / "ca.crt"),
        "requestheader-client-ca-file": str(pki / "front-proxy-ca.crt"),
        "root-ca-file": str(pki / "ca.crt"),
        "service-account-private-key-file": str(pki / "sa.key"),
        "cluster-signing-cert-file": str(pki / "ca.crt"),
        "cluster-signing-key-file": str(pki / "ca.key"),
        "use-service-account-credentials": "true",
        "controllers": "*,bootstrapsigner,tokencleaner",
        "cluster-name": cluster_name,
    }


def scheduler_flags(layout: Layout, ports: Ports) -> dict[str, str]:
    """Flags of kubeadm's kube-scheduler static pod (manifests.go getSchedulerCommand),
    serving /healthz on this control plane's port."""
    kubeconfig = str(layout.kubeconfig("scheduler"))
    return {
        "bind-address": "127.0.0.1",
        "secure-port": str(ports.scheduler),
        "leader-elect": "true",
        "kubeconfig": kubeconfig,
        "authentication-kubeconfig": kubeconfig,
        "authorization-kubeconfig": kubeconfig,
    }


def kwok_flags(
    layout: Layout, server_port: int, cidr: str = "10.0.0.1/16", *, heartbeats: bool = True
) -> dict[str, str]:
    """Flags of the KWOK controller (sigs.k8s.io/kwok pkg/kwok/cmd/root.go): manage only
    nodes annotated ``kwok.x-k8s.io/node=fake``, health on ``server_port``, pod IPs from
    ``cidr`` (a /16 fits 65k pods), configuration from ``layout.kwok_config`` only (never
    the user's ``~/.kwok/kwok.yaml``, kwok's default). Without ``heartbeats`` no node
    Lease is kept (``--node-lease-duration-seconds=0``: kwok's node lease controller
    starts only for a duration above 0, pkg/kwok/controllers/controller.go); the node
    heartbeat Stage is left out of the stage files for the same run
    (``find_kwok_stage_files``)."""
    lease = {} if heartbeats else {"node-lease-duration-seconds": "0"}
    return {
        **lease,
        "kubeconfig": str(layout.kubeconfig("admin")),
        "config": str(layout.kwok_config),
        "manage-all-nodes": "false",
        "manage-nodes-with-annotation-selector": (
            f"{KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}"
        ),
        "server-address": f"127.0.0.1:{server_port}",
        "cidr": cidr,
        "node-ip": "10.255.0.1",
    }


def kwok_needs_stage_files(kwok_version: str) -> bool:
    """Whether this kwok release must be given Stage files.

    Up to 0.7 kwok falls back to its embedded default stages when none are configured
    (``getDefaultNodeStages`` in pkg/kwok/cmd/root.go at v0.7.0); from 0.8 it exits with
    "no stages found" instead.
    """
    major, minor, _ = parse_version(kwok_version)
    return (major, minor) >= (0, 8)


def validate_extra_args(extra_args: ExtraArgs | None) -> dict[str, dict[str, str | None]]:
    """Check ``extra_args`` names known components and map to strings or ``None``.

    Shape: ``{"kube-apiserver": {"runtime-config": "resource.k8s.io/v1beta2=true"}}``.
    Raises ``ValueError`` naming the unknown component and listing the known ones.
    """
    result: dict[str, dict[str, str | None]] = {}
    for component, flags in (extra_args or {}).items():
        if component not in COMPONENTS:
            raise ValueError(
                f"extra_args has component {component!r}; use one of {', '.join(COMPONENTS)}"
            )
        if not isinstance(flags, Mapping):
            raise ValueError(
                f"extra_args[{component!r}]={flags!r} must be a mapping of flag name to value"
            )
        result[component] = {k: (None if v is None else str(v)) for k, v in flags.items()}
    return result


# --------------------------------------------------------------------------- kwok nodes


def kwok_node_manifest(
    name: str,
    *,
    kubelet_version: str,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A Node object for KWOK to manage: the selector annotation, labels (with
    ``kubernetes.io/hostname``, ``kubernetes.io/os`` and ``type: kwok``), capacity and
    allocatable (defaults: 32 cpu, 256Gi memory, 110 pods), ``status.nodeInfo``.

    The API server keeps ``status`` on create for Nodes (pkg/registry/core/node/
    strategy.go PrepareForCreate), and KWOK's node-initialize stage keeps the given
    allocatable and nodeInfo fields.
    """
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    resources.update(allocatable or {})
    node_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
    }
    node_labels.update(labels or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": node_labels,
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE},
        },
        "spec": {"taints": [dict(t) for t in taints]} if taints else {},
        "status": {
            "allocatable": dict(resources),
            "capacity": dict(resources),
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": normalize_version(kubelet_version),
                "kubeProxyVersion": normalize_version(kubelet_version),
                "containerRuntimeVersion": "containerd://2.1.0",
                "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        },
    }


def find_kwok_stage_files(
    kwok_binary: Path, kwok_version: str, *, heartbeats: bool = True
) -> list[Path]:
    """The KWOK Stage files (``KWOK_STAGE_FILES``) for the kwok at ``kwok_binary``;
    without ``heartbeats``, all but the node heartbeat (``KWOK_HEARTBEAT_STAGE``): the
    nodes are made Ready once and never updated again.

    Looked up, in order: beside the binary (``<dir>/stages/<file name>``, where the
    binaries cache puts them), then in the ``sigs.k8s.io/kwok@<kwok_version>`` Go module
    (``$GOMODCACHE``, or ``go env GOMODCACHE``). KWOK >= 0.5 refuses to start without
    stages ("no stages found", pkg/kwok/cmd/root.go). Raises ``FileNotFoundError`` naming
    both places and the fix.
    """
    wanted = [rel for rel in KWOK_STAGE_FILES if heartbeats or rel != KWOK_HEARTBEAT_STAGE]
    beside = kwok_binary.parent / "stages"
    files = [beside / Path(rel).name for rel in wanted]
    if all(f.is_file() for f in files):
        return files
    modcache = os.environ.get("GOMODCACHE", "")
    if not modcache and shutil.which("go"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            modcache = subprocess.run(
                ["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30
            ).stdout.strip()
    module = Path(modcache or Path.home() / "go/pkg/mod") / f"sigs.k8s.io/kwok@{kwok_version}"
    files = [module / rel for rel in wanted]
    if all(f.is_file() for f in files):
        return files
    raise FileNotFoundError(
        f"KWOK stage files for kwok {kwok_version} are neither in {beside} nor in {module}; "
        f"fetch the module with `go mod download sigs.k8s.io/kwok@{kwok_version}` or copy "
        f"{', '.join(KWOK_STAGE_FILES)} from it into {beside}"
    )
