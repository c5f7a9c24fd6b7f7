"""The kubeadm_config_gates module against a real kube-apiserver.

The ConfigMaps ``kube-system/kubeadm-config`` and ``kube-system/kubelet-config`` are
created from what a real kubeadm of the same release would store
(``tests/unit/data/kubeadm/<version>/dra/configmap-*.yaml``, see regenerate.sh there), and
the module is run by ansible-playbook (through ``gpufleet.runner``) on localhost.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from rich.console import Console

from gpufleet import runner
from gpufleet.build import release_pins
from tests.harness.controlplane import ControlPlane

pytestmark = pytest.mark.integration

StartControlPlane = Callable[..., ControlPlane]
DEFAULT_VERSION = release_pins.load_releases().default

# kubeadm 1.37.2's ConfigMaps: the expected documents below are written for them.
FIXTURE = Path(__file__).parents[1] / "unit" / "data" / "kubeadm" / "1.37.2" / "dra"

APISERVER = {
    "feature_gates": {"DRAPrioritizedList": True},
    "absent_feature_gates": ["DRAControlPlaneController"],
    "runtime_config": {"resource.k8s.io/v1beta1": "true"},
    "absent_runtime_config": ["resource.k8s.io/v1alpha3"],
}
GATES = {
    "feature_gates": {"DRAPrioritizedList": True},
    "absent_feature_gates": ["DRAControlPlaneController"],
}


# What the module must make of the fixture's ClusterConfiguration, written by hand: every
# --feature-gates item of a component is merged into its last one (kubeadm passes each
# item as one flag and the component applies them in turn), DRAControlPlaneController is
# dropped and DRAPrioritizedList set; resource.k8s.io/v1alpha3 leaves --runtime-config and
# v1beta1 is appended. Everything else stays as kubeadm wrote it.
CLUSTER_ARGS_BEFORE = {
    "apiServer": """\
  extraArgs:
  - name: feature-gates
    value: DRAControlPlaneController=true,DRAAdminAccess=true
  - name: runtime-config
    value: api/alpha=false,resource.k8s.io/v1alpha3=true
  - name: audit-log-maxage
    value: "30"
  - name: feature-gates
    value: DRADeviceTaints=true
""",
    "controllerManager": """\
  extraArgs:
  - name: bind-address
    value: 0.0.0.0
  - name: feature-gates
    value: DRAControlPlaneController=true
""",
    "scheduler": """\
  extraArgs:
  - name: feature-gates
    value: DRAControlPlaneController=true,DRAPrioritizedList=true
""",
}
CLUSTER_ARGS_AFTER = {
    "apiServer": """\
  extraArgs:
  - name: runtime-config
    value: api/alpha=false,resource.k8s.io/v1beta1=true
  - name: audit-log-maxage
    value: "30"
  - name: feature-gates
    value: DRAAdminAccess=true,DRADeviceTaints=true,DRAPrioritizedList=true
""",
    "controllerManager": """\
  extraArgs:
  - name: bind-address
    value: 0.0.0.0
  - name: feature-gates
    value: DRAPrioritizedList=true
""",
    "scheduler": """\
  extraArgs:
  - name: feature-gates
    value: DRAPrioritizedList=true
""",
}
# The kubelet's featureGates map: the absent gate removed, the wanted one appended.
KUBELET_GATES_BEFORE = """\
featureGates:
  DRAControlPlaneController: true
  DRAResourceClaimDeviceStatus: true
"""
KUBELET_GATES_AFTER = """\
featureGates:
  DRAResourceClaimDeviceStatus: true
  DRAPrioritizedList: true
"""


def replaced(text: str, before: str, after: str) -> str:
    """``text`` with its one occurrence of ``before`` replaced by ``after``."""
    assert text.count(before) == 1, f"the fixture changed: {before!r} is not in it once"
    return text.replace(before, after)


def expected_cluster_configuration(before: str) -> str:
    for section, old in CLUSTER_ARGS_BEFORE.items():
        before = replaced(
            before, f"{section}:\n{old}", f"{section}:\n{CLUSTER_ARGS_AFTER[section]}"
        )
    return before


def play(tmp_path: Path, name: str, args: dict[str, Any], *, check: bool = False) -> dict[str, Any]:
    book = tmp_path / f"{name}.yml"
    book.write_text(
        yaml.safe_dump(
            [
                {
                    "name": name,
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Kubeadm | ConfigMaps",
                            "gpufleet.cluster.kubeadm_config_gates": args,
                            "ignore_errors": True,
                        }
                    ],
                }
            ],
            sort_keys=False,
        )
    )
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    events: list[dict[str, Any]] = []
    out = io.StringIO()
    runner.run_playbook(
        str(book),
        str(inventory),
        check=check,
        diff=True,
        console=Console(file=out, width=200),
        on_event=events.append,
        artifact_root=tmp_path / f"artifacts-{name}",
    )
    results = [
        dict(e["event_data"]["res"], _failed=e["event"] == "runner_on_failed")
        for e in events
        if e.get("event") in ("runner_on_ok", "runner_on_failed")
    ]
    assert len(results) == 1, out.getvalue()
    return results[0]


def load_configmap(path: Path) -> dict[str, Any]:
    cm = yaml.safe_load(path.read_text())
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": cm["metadata"], "data": cm["data"]}


def test_kubeadm_config_gates_on_a_real_apiserver(
    start_control_plane: StartControlPlane, tmp_path: Path
) -> None:
    cp = start_control_plane(DEFAULT_VERSION, with_controllers=False)
    api = k8s_client.CoreV1Api(k8s_config.new_client_from_config(config_file=str(cp.kubeconfig)))
    kubeadm_cm = load_configmap(FIXTURE / "configmap-kubeadm-config.yaml")
    kubelet_cm = load_configmap(FIXTURE / "configmap-kubelet-config.yaml")
    kubeadm_cm["data"]["unrelated"] = "kept as is"
    for body in (kubeadm_cm, kubelet_cm):
        api.create_namespaced_config_map("kube-system", body)
    cluster_before = kubeadm_cm["data"]["ClusterConfiguration"]
    kubelet_before = kubelet_cm["data"]["kubelet"]
    args = {
        "kubeconfig": str(cp.kubeconfig),
        "apiserver": APISERVER,
        "controller_manager": GATES,
        "scheduler": GATES,
        "kubelet": GATES,
        "backup_dir": str(tmp_path / "backups"),
    }
    expected_cluster = expected_cluster_configuration(cluster_before)
    expected_kubelet = replaced(kubelet_before, KUBELET_GATES_BEFORE, KUBELET_GATES_AFTER)

    def read(name: str) -> Any:
        return api.read_namespaced_config_map(name, "kube-system")

    versions = {n: read(n).metadata.resource_version for n in ("kubeadm-config", "kubelet-config")}

    # check mode: reports, writes nothing (neither ConfigMaps nor backups)
    checked = play(tmp_path, "check", args, check=True)
    assert not checked["_failed"], checked.get("msg")
    assert checked["changed"] is True
    assert {n: read(n).metadata.resource_version for n in versions} == versions
    assert checked["backup_files"] == []
    assert not (tmp_path / "backups").exists()
    assert [d["after"] for d in checked["diff"]] == [expected_cluster, expected_kubelet]

    # converge
    first = play(tmp_path, "converge", args)
    assert not first["_failed"], first.get("msg")
    assert first["changed"] is True
    assert read("kubeadm-config").data == {
        "ClusterConfiguration": expected_cluster,
        "unrelated": "kept as is",
    }
    assert read("kubelet-config").data == {"kubelet": expected_kubelet}
    # the kubelet's two changes: DRAControlPlaneController removed, DRAPrioritizedList added
    assert [
        (c["what"], c["old"], c["new"])
        for c in first["changes"]
        if c["configmap"] == "kube-system/kubelet-config"
    ] == [("DRAControlPlaneController", "true", None), ("DRAPrioritizedList", None, "true")]
    backups = sorted(Path(p) for p in first["backup_files"])
    assert len(backups) == 2 and all(p.parent == tmp_path / "backups" for p in backups)
    saved = {
        yaml.safe_load(p.read_text())["metadata"]["name"]: yaml.safe_load(p.read_text())
        for p in backups
    }
    assert saved["kubeadm-config"]["data"]["ClusterConfiguration"] == cluster_before
    assert saved["kubeadm-config"]["data"]["unrelated"] == "kept as is"
    assert saved["kubelet-config"]["data"]["kubelet"] == kubelet_before
    assert all((p.stat().st_mode & 0o777) == 0o600 for p in backups)

    # idempotent: nothing written the second time
    versions = {n: read(n).metadata.resource_version for n in versions}
    second = play(tmp_path, "again", args)
    assert second["changed"] is False and second["changes"] == []
    assert {n: read(n).metadata.resource_version for n in versions} == versions

    # clusters from before 1.24 keep kubelet-config-1.X
    api.delete_namespaced_config_map("kubelet-config", "kube-system")
    minor = DEFAULT_VERSION.split(".")[1]
    old_name = f"kubelet-config-1.{minor}"
    api.create_namespaced_config_map(
        "kube-system",
        {"metadata": {"name": old_name}, "data": {"kubelet": kubelet_before}},
    )
    legacy = play(
        tmp_path,
        "legacy",
        {
            "kubeconfig": str(cp.kubeconfig),
            "kubelet": GATES,
            "backup_dir": str(tmp_path / "backups"),
        },
    )
    assert not legacy["_failed"], legacy.get("msg")
    assert {c["configmap"] for c in legacy["changes"]} == {f"kube-system/{old_name}"}
    assert read(old_name).data == {"kubelet": expected_kubelet}

    # a cluster without kubeadm-config is refused, naming the fix
    api.delete_namespaced_config_map("kubeadm-config", "kube-system")
    missing = play(tmp_path, "missing", args)
    assert missing["_failed"]
    assert (
        "kube-system/kubeadm-config with key ClusterConfiguration does not exist" in missing["msg"]
    )
    with pytest.raises(ApiException) as err:
        read("kubeadm-config")
    assert err.value.status == 404
