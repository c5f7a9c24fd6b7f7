"""kubeadm init/join configuration rendered with the DRA settings of each release."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.filter.dra import dra_component_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import bootstrap as kb

pytestmark = pytest.mark.unit

TOKEN = "abcdef.0123456789abcdef"
HASH = "sha256:" + "0" * 64


def spec(version: str, **kw) -> kb.BootstrapSpec:
    base = dict(
        version=version,
        control_plane_endpoint="10.0.0.10:6443",
        advertise_address="10.0.0.10",
        dra=dra_component_settings(version),
    )
    base.update(kw)
    return kb.BootstrapSpec(**base)


def by_kind(docs):
    return {d["kind"]: d for d in docs}


def test_1_33_gets_beta_gates_runtime_config_and_list_extra_args() -> None:
    docs = by_kind(kb.init_documents(spec("1.33.13"), "cp-1"))
    cluster = docs["ClusterConfiguration"]
    assert cluster["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    api_args = {a["name"]: a["value"] for a in cluster["apiServer"]["extraArgs"]}
    assert api_args["feature-gates"] == "DynamicResourceAllocation=true"
    assert api_args["runtime-config"] == "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"
    for key in ("controllerManager", "scheduler"):
        assert cluster[key]["extraArgs"] == [
            {"name": "feature-gates", "value": "DynamicResourceAllocation=true"}
        ]
    assert docs["KubeletConfiguration"]["featureGates"] == {"DynamicResourceAllocation": True}
    assert docs["InitConfiguration"]["nodeRegistration"]["name"] == "cp-1"


def test_1_37_ga_needs_no_flags_at_all() -> None:
    docs = by_kind(kb.init_documents(spec("1.37.2"), "cp-1"))
    cluster = docs["ClusterConfiguration"]
    assert "apiServer" not in cluster and "scheduler" not in cluster
    assert "featureGates" not in docs["KubeletConfiguration"]
    assert cluster["kubernetesVersion"] == "v1.37.2"


def test_1_38_pre_release_keeps_its_version_and_sets_no_dra_gate() -> None:
    docs = by_kind(kb.init_documents(spec("1.38.0-beta.0"), "cp-1"))
    cluster = docs["ClusterConfiguration"]
    # kubeadm names the control-plane images by this version (v1.38.0-beta.0)
    assert cluster["kubernetesVersion"] == "v1.38.0-beta.0"
    assert "apiServer" not in cluster and "scheduler" not in cluster
    assert "DynamicResourceAllocation" not in (
        docs["KubeletConfiguration"].get("featureGates") or {}
    )


def test_v1beta3_release_uses_map_extra_args() -> None:
    docs = by_kind(
        kb.init_documents(
            spec(
                "1.30.14", dra={"apiserver": {"feature_gates": {"DynamicResourceAllocation": True}}}
            ),
            "cp",
        )
    )
    cluster = docs["ClusterConfiguration"]
    assert cluster["apiVersion"] == "kubeadm.k8s.io/v1beta3"
    assert cluster["apiServer"]["extraArgs"] == {"feature-gates": "DynamicResourceAllocation=true"}


def test_cgroup_v1_sets_fail_cgroup_v1_false_and_ignores_system_verification() -> None:
    docs = by_kind(kb.init_documents(spec("1.37.2", allow_cgroup_v1=True), "cp"))
    assert docs["KubeletConfiguration"]["failCgroupV1"] is False
    errors = docs["InitConfiguration"]["nodeRegistration"]["ignorePreflightErrors"]
    assert errors == ["SystemVerification"]


def test_air_gapped_settings_reach_the_documents() -> None:
    docs = by_kind(
        kb.init_documents(
            spec("1.37.2", image_repository="registry.local/k8s", etcd_image_tag="3.7.3",
                 image_pull_policy="Never"),
            "cp",
        )
    )  # fmt: skip
    cluster = docs["ClusterConfiguration"]
    assert cluster["imageRepository"] == "registry.local/k8s"
    assert cluster["etcd"] == {"local": {"imageTag": "3.7.3"}}
    assert docs["InitConfiguration"]["nodeRegistration"]["imagePullPolicy"] == "Never"


def test_kubelet_extra_merges_gates() -> None:
    docs = by_kind(
        kb.init_documents(
            spec(
                "1.33.13",
                kubelet_extra={"featureGates": {"DRAPrioritizedList": True}, "maxPods": 50},
            ),
            "cp",
        )
    )
    kubelet = docs["KubeletConfiguration"]
    assert kubelet["featureGates"] == {
        "DRAPrioritizedList": True,
        "DynamicResourceAllocation": True,
    }
    assert kubelet["maxPods"] == 50


@pytest.mark.parametrize(
    "field, value, words",
    [
        (
            "control_plane_endpoint",
            "10.0.0.10",
            "kubeadm_control_plane_endpoint='10.0.0.10' is not HOST:PORT",
        ),
        ("advertise_address", "cp-1", "kubeadm_advertise_address='cp-1' is not an IP address"),
        ("pod_subnet", "10.244.0.0/33", "kubeadm_pod_subnet='10.244.0.0/33'"),
        ("service_subnet", "10.244.0.0/20", "overlaps kubeadm_service_subnet=10.244.0.0/20"),
        ("image_pull_policy", "Sometimes", "kubeadm_image_pull_policy='Sometimes'"),
        ("cgroup_driver", "docker", "kubeadm_cgroup_driver='docker'"),
    ],
)
def test_bad_input_names_the_variable(field: str, value: str, words: str) -> None:
    with pytest.raises(
        kb.BootstrapConfigError, match=words.replace("(", r"\(").replace(".", r"\.")
    ):
        kb.init_documents(spec("1.37.2", **{field: value}), "cp")


def test_join_configuration_and_join_command_parsing() -> None:
    text = f"kubeadm join 10.0.0.10:6443 --token {TOKEN} --discovery-token-ca-cert-hash {HASH} \n"
    parsed = kb.parse_join_command(text)
    assert parsed == {"endpoint": "10.0.0.10:6443", "token": TOKEN, "ca_cert_hash": HASH}
    (join,) = kb.join_documents(spec("1.37.2"), "gpu-1", token=TOKEN, ca_cert_hash=HASH)
    assert join["kind"] == "JoinConfiguration"
    assert join["discovery"]["bootstrapToken"] == {
        "apiServerEndpoint": "10.0.0.10:6443",
        "token": TOKEN,
        "caCertHashes": [HASH],
    }
    assert "controlPlane" not in join
    (cp_join,) = kb.join_documents(
        spec("1.37.2"), "cp-2", token=TOKEN, ca_cert_hash=HASH, control_plane=True,
        certificate_key="k" * 64,
    )  # fmt: skip
    assert cp_join["controlPlane"]["certificateKey"] == "k" * 64


def test_join_refuses_malformed_token_and_hash() -> None:
    with pytest.raises(kb.BootstrapConfigError, match="token"):
        kb.join_documents(spec("1.37.2"), "w", token="nope", ca_cert_hash=HASH)
    with pytest.raises(kb.BootstrapConfigError, match="sha256"):
        kb.join_documents(spec("1.37.2"), "w", token=TOKEN, ca_cert_hash="md5:1")
    with pytest.raises(kb.BootstrapConfigError, match="token"):
        kb.parse_join_command("kubeadm join 10.0.0.1:6443")


def test_timeouts_reach_v1beta4_documents_and_unknown_keys_are_refused() -> None:
    docs = by_kind(kb.init_documents(spec("1.37.2", timeouts={"kubernetesAPICall": "5m0s"}), "cp"))
    assert docs["InitConfiguration"]["timeouts"] == {"kubernetesAPICall": "5m0s"}
    (join,) = kb.join_documents(
        spec("1.37.2", timeouts={"discovery": "9m0s"}), "w", token=TOKEN, ca_cert_hash=HASH
    )
    assert join["timeouts"] == {"discovery": "9m0s"}
    with pytest.raises(kb.BootstrapConfigError, match="kubeadm_timeouts has unknown keys"):
        kb.init_documents(spec("1.37.2", timeouts={"apiCall": "1m"}), "cp")


def test_apiserver_extra_args_join_the_dra_flags_and_may_not_replace_them() -> None:
    extra = {"enable-aggregator-routing": "true"}
    cluster = by_kind(kb.init_documents(spec("1.33.13", apiserver_extra_args=extra), "cp"))[
        "ClusterConfiguration"
    ]
    api_args = {a["name"]: a["value"] for a in cluster["apiServer"]["extraArgs"]}
    assert api_args["enable-aggregator-routing"] == "true"
    assert api_args["feature-gates"] == "DynamicResourceAllocation=true"
    assert "enable-aggregator-routing" not in str(cluster["scheduler"])
    cluster = by_kind(kb.init_documents(spec("1.37.2", apiserver_extra_args=extra), "cp"))[
        "ClusterConfiguration"
    ]
    assert cluster["apiServer"]["extraArgs"] == [
        {"name": "enable-aggregator-routing", "value": "true"}
    ]
    with pytest.raises(kb.BootstrapConfigError, match="kubeadm_apiserver_extra_args sets"):
        kb.init_documents(spec("1.37.2", apiserver_extra_args={"feature-gates": "X=true"}), "cp")
