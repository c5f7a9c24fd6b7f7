"""kubeadm init and join configuration with DRA enabled from day 0.

Renders the documents ``kubeadm init --config`` and ``kubeadm join --config`` read
(InitConfiguration, ClusterConfiguration, KubeletConfiguration; JoinConfiguration) for a
Kubernetes release, with the DRA feature gates and runtime-config that the version model
(``dra``) gives for that release already in place, in the kubeadm config API that
release takes (v1beta3 with ``extraArgs`` as a map, v1beta4 with ``extraArgs`` as a list
of ``{name, value}``; ``dra.kubeadm_config_api``).

Sources: kubeadm's types in ``cmd/kubeadm/app/apis/kubeadm/v1beta3/types.go`` and
``v1beta4/types.go`` (InitConfiguration.localAPIEndpoint, nodeRegistration.criSocket,
imagePullPolicy, ignorePreflightErrors; ClusterConfiguration.etcd.local.imageTag,
imageRepository, networking.podSubnet; JoinConfiguration.discovery.bootstrapToken);
KubeletConfiguration.failCgroupV1 in ``staging/src/k8s.io/kubelet/config/v1beta1/types.go``
(added in 1.31; kubelets from 1.35 refuse cgroup v1 unless it is false).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.kubernetes_facts import (
    FAIL_CGROUP_V1_SINCE,
)

KUBELET_CONFIG_API = "kubelet.config.k8s.io/v1beta1"
_TOKEN_RE = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}\Z")
_HASH_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")
_ENDPOINT_RE = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}\Z")
# kubeadm v1beta4 Timeouts fields (cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go).
TIMEOUT_KEYS = frozenset(
    {
        "controlPlaneComponentHealthCheck",
        "kubeletHealthCheck",
        "kubernetesAPICall",
        "etcdAPICall",
        "tlsBootstrap",
        "discovery",
        "upgradeManifests",
    }
)


class BootstrapConfigError(ValueError):
    """Bad input for a kubeadm configuration; the message names the variable, the value
    and the fix."""


@dataclass(frozen=True)
class BootstrapSpec:
    """What a cluster bootstrap needs; role variables map 1:1 onto these fields.

    ``pod_subnet``/``service_subnet``: CIDRs; ``etcd_image_tag``: the tag of the etcd
    image when it is not kubeadm's default (air-gapped images built locally);
    ``allow_cgroup_v1``: set ``failCgroupV1: false`` and ignore kubeadm's
    SystemVerification error on hosts still on cgroup v1 (RHEL 8, some sandboxes).
    ``dra``: the output of the ``dra_component_settings`` filter for ``version``.
    ``timeouts``: kubeadm's ``timeouts`` (v1beta4: controlPlaneComponentHealthCheck,
    kubeletHealthCheck, kubernetesAPICall, discovery, tlsBootstrap, ...; durations such as
    ``10m0s``), for slow or heavily loaded hosts; ignored by v1beta3 releases.
    ``apiserver_extra_args``: further kube-apiserver flags (without ``--``), such as
    ``enable-aggregator-routing: "true"`` where the API server cannot reach Service
    ClusterIPs (no kube-proxy) yet must call webhooks; the DRA flags (``feature-gates``,
    ``runtime-config``) are the version model's and are refused here.
    """

    version: str
    control_plane_endpoint: str
    advertise_address: str
    pod_subnet: str = "10.244.0.0/16"
    service_subnet: str = "10.96.0.0/12"
    cluster_name: str = "kubernetes"
    image_repository: str = ""
    etcd_image_tag: str = ""
    cri_socket: str = "unix:///run/containerd/containerd.sock"
    image_pull_policy: str = "IfNotPresent"
    ignore_preflight_errors: tuple[str, ...] = ()
    allow_cgroup_v1: bool = False
    cgroup_driver: str = "systemd"
    dra: Mapping[str, Any] = field(default_factory=dict)
    kubelet_extra: Mapping[str, Any] = field(default_factory=dict)
    timeouts: Mapping[str, str] = field(default_factory=dict)
    apiserver_extra_args: Mapping[str, str] = field(default_factory=dict)


def _check_cidr(name: str, value: str) -> None:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as e:
        raise BootstrapConfigError(
            f"{name}={value!r} is not a network in CIDR form ({e}); write it like 10.244.0.0/16"
        ) from None


def validate(spec: BootstrapSpec) -> dra_core.KubeVersion:
    """Check ``spec`` before anything is rendered; returns the parsed version.

    Raises :class:`BootstrapConfigError` naming the ``kubeadm_*`` variable, its value and
    the fix, and ``dra.VersionError`` for a version outside the model.
    """
    kv = dra_core.parse_version(spec.version, "kubeadm_kubernetes_version")
    if not _ENDPOINT_RE.match(spec.control_plane_endpoint):
        raise BootstrapConfigError(
            f"kubeadm_control_plane_endpoint={spec.control_plane_endpoint!r} is not HOST:PORT; "
            "write it like 10.0.0.10:6443 or k8s-api.example.com:6443"
        )
    try:
        ipaddress.ip_address(spec.advertise_address)
    except ValueError:
        raise BootstrapConfigError(
            f"kubeadm_advertise_address={spec.advertise_address!r} is not an IP address; set "
            "it to the address the kube-apiserver listens on (the node's own IP)"
        ) from None
    _check_cidr("kubeadm_pod_subnet", spec.pod_subnet)
    _check_cidr("kubeadm_service_subnet", spec.service_subnet)
    if ipaddress.ip_network(spec.pod_subnet).overlaps(ipaddress.ip_network(spec.service_subnet)):
        raise BootstrapConfigError(
            f"kubeadm_pod_subnet={spec.pod_subnet} overlaps kubeadm_service_subnet="
            f"{spec.service_subnet}; choose disjoint ranges (e.g. 10.244.0.0/16 and 10.96.0.0/12)"
        )
    if spec.image_pull_policy not in ("Always", "IfNotPresent", "Never"):
        raise BootstrapConfigError(
            f"kubeadm_image_pull_policy={spec.image_pull_policy!r}: use Always, IfNotPresent "
            "or Never (Never for images pre-loaded on air-gapped nodes)"
        )
    unknown = sorted(set(spec.timeouts) - TIMEOUT_KEYS)
    if unknown:
        raise BootstrapConfigError(
            f"kubeadm_timeouts has unknown keys {unknown}; use {sorted(TIMEOUT_KEYS)} "
            "(kubeadm v1beta4 Timeouts)"
        )
    owned = sorted(set(spec.apiserver_extra_args) & {"feature-gates", "runtime-config"})
    if owned:
        raise BootstrapConfigError(
            f"kubeadm_apiserver_extra_args sets {owned[0]}, which the DRA version model "
            "writes; set DRA gates with kubeadm_dra_features / kubeadm_dra_gates instead"
        )
    if spec.cgroup_driver not in ("systemd", "cgroupfs"):
        raise BootstrapConfigError(
            f"kubeadm_cgroup_driver={spec.cgroup_driver!r}: use systemd (the default since "
            "Kubernetes 1.22) or cgroupfs, the same as the container runtime's"
        )
    return kv


def _extra_args(shape: str, args: Mapping[str, str]) -> Any:
    if shape == "map":
        return {k: args[k] for k in sorted(args)}
    return [{"name": k, "value": args[k]} for k in sorted(args)]


def component_args(dra: Mapping[str, Any], component: str) -> dict[str, str]:
    """Command-line flags (without ``--``) for ``component`` (``apiserver``,
    ``controller_manager``, ``scheduler``) from the ``dra_component_settings`` output."""
    settings = dra.get(component) or {}
    args: dict[str, str] = {}
    gates = settings.get("feature_gates") or {}
    if gates:
        args["feature-gates"] = dra_settings.feature_gates_string(gates)
    rc = settings.get("runtime_config") or {}
    if rc:
        args["runtime-config"] = ",".join(f"{k}={rc[k]}" for k in sorted(rc))
    return args


def _preflight(spec: BootstrapSpec) -> list[str]:
    errors = list(dict.fromkeys(spec.ignore_preflight_errors))
    if spec.allow_cgroup_v1 and "SystemVerification" not in errors:
        errors.append("SystemVerification")
    return errors


def _node_registration(spec: BootstrapSpec, node_name: str, taints: Sequence[Mapping] | None):
    reg: dict[str, Any] = {
        "name": node_name,
        "criSocket": spec.cri_socket,
        "imagePullPolicy": spec.image_pull_policy,
    }
    errors = _preflight(spec)
    if errors:
        reg["ignorePreflightErrors"] = errors
    if taints is not None:
        reg["taints"] = list(taints)
    return reg


def kubelet_configuration(spec: BootstrapSpec, kv: dra_core.KubeVersion) -> dict[str, Any]:
    """The KubeletConfiguration document: cgroup driver, the DRA feature gates, and
    ``failCgroupV1: false`` when ``allow_cgroup_v1`` (1.31 and newer have the field)."""
    doc: dict[str, Any] = {
        "apiVersion": KUBELET_CONFIG_API,
        "kind": "KubeletConfiguration",
        "cgroupDriver": spec.cgroup_driver,
    }
    gates = (spec.dra.get("kubelet") or {}).get("feature_gates") or {}
    if gates:
        doc["featureGates"] = {k: bool(gates[k]) for k in sorted(gates)}
    if spec.allow_cgroup_v1 and kv.minor >= FAIL_CGROUP_V1_SINCE:
        doc["failCgroupV1"] = False
    for k, v in spec.kubelet_extra.items():
        if k in ("apiVersion", "kind"):
            continue
        if k == "featureGates" and isinstance(v, Mapping):
            doc.setdefault("featureGates", {}).update({g: _gate(g, b) for g, b in v.items()})
        else:
            doc[k] = v
    return doc


def _gate(name: Any, value: Any) -> bool:
    """A ``featureGates`` entry of the kubelet's extra configuration as a boolean: a
    boolean, or text Go's ``strconv.ParseBool`` reads (``dra.settings.parse_gate_bool``);
    anything else (``maybe``, a list) raises BootstrapConfigError naming the gate."""
    try:
        return dra_settings.parse_gate_bool(value, f"kubeadm_kubelet_extra.featureGates.{name}")
    except dra_core.VersionParseError as exc:
        raise BootstrapConfigError(str(exc)) from None


def init_documents(spec: BootstrapSpec, node_name: str) -> list[dict[str, Any]]:
    """InitConfiguration, ClusterConfiguration and KubeletConfiguration for the first
    control-plane node ``node_name``.

    Raises :class:`BootstrapConfigError` / ``dra.VersionError`` (see
    :func:`validate`).
    """
    kv = validate(spec)
    api = dra_api.kubeadm_config_api(kv)
    shape = api.extra_args_shape
    init = {
        "apiVersion": api.preferred,
        "kind": "InitConfiguration",
        "localAPIEndpoint": {
            "advertiseAddress": spec.advertise_address,
            "bindPort": int(spec.control_plane_endpoint.rsplit(":", 1)[1]),
        },
        "nodeRegistration": _node_registration(spec, node_name, None),
    }
    if spec.timeouts and dra_api.extra_args_shape(api.preferred) == "list":
        init["timeouts"] = dict(spec.timeouts)
    cluster: dict[str, Any] = {
        "apiVersion": api.preferred,
        "kind": "ClusterConfiguration",
        "clusterName": spec.cluster_name,
        # a pre-release keeps its suffix: kubeadm names the images by it (v1.38.0-beta.0)
        "kubernetesVersion": f"v{kv}",
        "controlPlaneEndpoint": spec.control_plane_endpoint,
        "networking": {"podSubnet": spec.pod_subnet, "serviceSubnet": spec.service_subnet},
    }
    if spec.image_repository:
        cluster["imageRepository"] = spec.image_repository
    if spec.etcd_image_tag:
        cluster["etcd"] = {"local": {"imageTag": spec.etcd_image_tag}}
    for key, component in (
        ("apiServer", "apiserver"),
        ("controllerManager", "controller_manager"),
        ("scheduler", "scheduler"),
    ):
        args = component_args(spec.dra, component)
        if component == "apiserver":
            args.update({str(k): str(v) for k, v in spec.apiserver_extra_args.items()})
        if args:
            cluster[key] = {"extraArgs": _extra_args(shape, args)}
    return [init, cluster, kubelet_configuration(spec, kv)]


def join_documents(
    spec: BootstrapSpec,
    node_name: str,
    *,
    token: str,
    ca_cert_hash: str,
    control_plane: bool = False,
    certificate_key: str = "",
) -> list[dict[str, Any]]:
    """The JoinConfiguration for ``node_name``. Kubelet settings come from the cluster's
    kubelet-config ConfigMap, which ``kubeadm init`` wrote from the KubeletConfiguration
    above, so a joining node gets the same DRA gates.

    Raises :class:`BootstrapConfigError` for a malformed token or CA hash.
    """
    kv = validate(spec)
    if not _TOKEN_RE.match(token):
        raise BootstrapConfigError(
            "kubeadm join token is not of the form [a-z0-9]{6}.[a-z0-9]{16}; create one with "
            "`kubeadm token create` on a control-plane node"
        )
    if not _HASH_RE.match(ca_cert_hash):
        raise BootstrapConfigError(
            f"kubeadm CA certificate hash {ca_cert_hash!r} is not sha256:<64 hex>; print it "
            "with `kubeadm token create --print-join-command`"
        )
    api = dra_api.kubeadm_config_api(kv)
    join: dict[str, Any] = {
        "apiVersion": api.preferred,
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": spec.control_plane_endpoint,
                "token": token,
                "caCertHashes": [ca_cert_hash],
            }
        },
        "nodeRegistration": _node_registration(spec, node_name, None),
    }
    if spec.timeouts and dra_api.extra_args_shape(api.preferred) == "list":
        join["timeouts"] = dict(spec.timeouts)
    if control_plane:
        join["controlPlane"] = {
            "localAPIEndpoint": {
                "advertiseAddress": spec.advertise_address,
                "bindPort": int(spec.control_plane_endpoint.rsplit(":", 1)[1]),
            }
        }
        if certificate_key:
            join["controlPlane"]["certificateKey"] = certificate_key
    return [join]


def parse_join_command(text: str) -> dict[str, str]:
    """``kubeadm token create --print-join-command`` output -> ``{endpoint, token,
    ca_cert_hash}``. Raises :class:`BootstrapConfigError` when a part is missing."""
    words = text.split()
    out: dict[str, str] = {}
    for i, w in enumerate(words):
        if w == "join" and i + 1 < len(words):
            out["endpoint"] = words[i + 1]
        elif w == "--token" and i + 1 < len(words):
            out["token"] = words[i + 1]
        elif w == "--discovery-token-ca-cert-hash" and i + 1 < len(words):
            out["ca_cert_hash"] = words[i + 1]
    missing = {"endpoint", "token", "ca_cert_hash"} - set(out)
    if missing:
        raise BootstrapConfigError(
            f"could not read {', '.join(sorted(missing))} from the join command {text.strip()!r}"
        )
    return out
