"""The kubelet's configuration: where systemd points it, and its feature gates
(``plugins/module_utils/kube/kubelet_config.py``).
"""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    ConfigEditError,
    FlagEdit,
)

from tests.unit.kube.kubeadm_files import DRA, GENERATED, changed_lines, configmap_data, text

pytestmark = pytest.mark.unit


def test_kubelet_config_path_from_cmdline_last_wins_and_both_forms() -> None:
    argv = [
        "/usr/bin/kubelet",
        "--config=/var/lib/kubelet/config.yaml",
        "--v=2",
        "--config",
        "/etc/k/c.yaml",
    ]
    assert kcfg.kubelet_config_path_from_cmdline(argv) == "/etc/k/c.yaml"
    assert kcfg.kubelet_config_path_from_cmdline(["/usr/bin/kubelet", "--v=2"]) is None
    # "--config-dir" is another flag
    assert (
        kcfg.kubelet_config_path_from_cmdline(["kubelet", "--config-dir=/etc/kubelet.conf.d"])
        is None
    )


# The kubeadm systemd drop-in as packaged by kubernetes/release
# (cmd/krel/templates/latest/kubeadm/10-kubeadm.conf), comments left out.
KUBEADM_DROPIN = (
    "# /usr/lib/systemd/system/kubelet.service\n"
    "[Unit]\n"
    "Description=kubelet: The Kubernetes Node Agent\n"
    "\n"
    "[Service]\n"
    "ExecStart=/usr/bin/kubelet\n"
    "Restart=always\n"
    "\n"
    "# /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf\n"
    "[Service]\n"
    'Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/'
    'bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"\n'
    'Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"\n'
    "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\n"
    "EnvironmentFile=-/etc/default/kubelet\n"
    "ExecStart=\n"
    "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS "
    "$KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n"
)


def test_kubelet_config_from_systemd_default_and_overrides() -> None:
    files = {"/var/lib/kubelet/kubeadm-flags.env": None, "/etc/default/kubelet": None}
    assert (
        kcfg.kubelet_config_path_from_systemd(KUBEADM_DROPIN, files)
        == "/var/lib/kubelet/config.yaml"
    )
    files["/etc/default/kubelet"] = (
        'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.5 --config=/etc/kubelet/custom.yaml"\n'
    )
    assert (
        kcfg.kubelet_config_path_from_systemd(KUBEADM_DROPIN, files) == "/etc/kubelet/custom.yaml"
    )
    argv = kcfg.kubelet_argv_from_systemd(KUBEADM_DROPIN, files)
    assert argv[0] == "/usr/bin/kubelet"
    assert "--node-ip=10.0.0.5" in argv


def test_environment_file_beats_environment_setting() -> None:
    unit = KUBEADM_DROPIN.replace(
        "EnvironmentFile=-/etc/default/kubelet",
        'EnvironmentFile=-/etc/default/kubelet\nEnvironment="KUBELET_CONFIG_ARGS=--config=/from/environment.yaml"',
    )
    files = {"/etc/default/kubelet": "KUBELET_CONFIG_ARGS=--config=/from/file.yaml\n"}
    assert kcfg.kubelet_config_path_from_systemd(unit, files) == "/from/file.yaml"


def test_missing_required_environment_file_is_an_error() -> None:
    unit = KUBEADM_DROPIN.replace(
        "EnvironmentFile=-/etc/default/kubelet", "EnvironmentFile=/etc/default/kubelet"
    )
    with pytest.raises(ConfigEditError, match="EnvironmentFile=/etc/default/kubelet is missing"):
        kcfg.kubelet_argv_from_systemd(unit, {})


def test_expand_exec_start_splits_dollar_words_and_not_braced_ones() -> None:
    env = {"A": "--x=1 --y='two words'", "B": "b c"}
    assert kcfg.expand_exec_start("-/usr/bin/kubelet $A --z=${B} $UNSET", env) == [
        "/usr/bin/kubelet",
        "--x=1",
        "--y=two words",
        "--z=b c",
    ]


@pytest.mark.parametrize(("version", "variant"), GENERATED)
def test_kubelet_configuration_file_and_configmap(version: str, variant: str) -> None:
    for source in (
        text(version, variant, "kubelet-config.yaml"),
        configmap_data(version, variant, "kubelet-config", "kubelet"),
    ):
        result = kcfg.edit_kubelet_configuration(source, DRA)
        old, new = yaml.safe_load(source), yaml.safe_load(result.text)
        gates = new.pop("featureGates")
        old.pop("featureGates", None)
        assert new == old
        assert gates["DynamicResourceAllocation"] is True and gates["DRAPrioritizedList"] is True
        assert "DRAControlPlaneController" not in gates
        assert not kcfg.edit_kubelet_configuration(result.text, DRA).changed


def test_kubelet_gates_keep_order_and_unrelated_values() -> None:
    source = text("1.37.2", "dra", "kubelet-config.yaml")
    assert kcfg.kubelet_feature_gates(source) == {
        "DRAControlPlaneController": True,
        "DRAResourceClaimDeviceStatus": True,
    }
    result = kcfg.edit_kubelet_configuration(source, DRA)
    assert list(kcfg.kubelet_feature_gates(result.text).items()) == [
        ("DRAResourceClaimDeviceStatus", True),
        ("DynamicResourceAllocation", True),
        ("DRAPrioritizedList", True),
    ]
    assert changed_lines(source, result.text) == [
        "-  DRAControlPlaneController: true",
        "+  DynamicResourceAllocation: true",
        "+  DRAPrioritizedList: true",
    ]


def test_kubelet_feature_gates_emptied_are_removed() -> None:
    source = text("1.37.2", "dra", "kubelet-config.yaml")
    edit = FlagEdit(
        absent_feature_gates=frozenset(
            {"DRAControlPlaneController", "DRAResourceClaimDeviceStatus"}
        )
    )
    result = kcfg.edit_kubelet_configuration(source, edit)
    assert "featureGates" not in yaml.safe_load(result.text)


def test_kubelet_configuration_errors() -> None:
    source = text("1.37.2", "dra", "kubelet-config.yaml")
    with pytest.raises(ConfigEditError, match="runtime-config is a kube-apiserver flag"):
        kcfg.edit_kubelet_configuration(source, FlagEdit(runtime_config={"g.io/v1": "true"}))
    bad = source.replace("DRAControlPlaneController: true", 'DRAControlPlaneController: "yes"')
    with pytest.raises(ConfigEditError, match=r"featureGates\.DRAControlPlaneController = 'yes'"):
        kcfg.edit_kubelet_configuration(bad, DRA)
    with pytest.raises(ConfigEditError, match=r"is not kubelet\.config\.k8s\.io/v1beta1"):
        kcfg.edit_kubelet_configuration(source.replace("v1beta1", "v1"), DRA)


def test_kubeadm_flags_env_has_no_config_flag_so_the_drop_in_one_counts() -> None:
    env = kcfg.parse_environment_file(text("1.37.2", "dra", "kubeadm-flags.env"))
    assert set(env) == {"KUBELET_KUBEADM_ARGS"}
    argv = [
        "/usr/bin/kubelet",
        "--config=/var/lib/kubelet/config.yaml",
        *env["KUBELET_KUBEADM_ARGS"].split(),
    ]
    assert kcfg.kubelet_config_path_from_cmdline(argv) == "/var/lib/kubelet/config.yaml"


def test_field_case_kubelet_config_rewritten_without_gates_gets_them_back() -> None:
    """kubernetes/kubeadm#3049: an upgrade wrote a defaulted /var/lib/kubelet/config.yaml
    without featureGates; re-asserting the gates restores them and keeps the rest."""
    defaulted = text("1.37.2", "defaults", "kubelet-config.yaml")
    assert kcfg.kubelet_feature_gates(defaulted) == {}
    result = kcfg.edit_kubelet_configuration(defaulted, FlagEdit({"DRADeviceTaints": True}))
    assert kcfg.kubelet_feature_gates(result.text) == {"DRADeviceTaints": True}
    assert changed_lines(defaulted, result.text) == [
        "+featureGates:",
        "+  DRADeviceTaints: true",
    ]
