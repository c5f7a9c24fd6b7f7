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
from ansible_collections.gpufleet.cluster.plugins.module_utils import kube_config_edit as kce
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from rich.console import Console

from gpufleet import runner
from gpufleet.lab import binaries
from gpufleet.lab.controlplane import ControlPlane

pytestmark = pytest.mark.integration

StartControlPlane = Callable[..., ControlPlane]
DEFAULT_VERSION = binaries.load_releases().default

FIXTURES = Path(__file__).parents[1] / "unit" / "data" / "kubeadm"

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


def fixture_dir() -> Path:
    for version in (DEFAULT_VERSION, "1.37.2"):
        if (FIXTURES / version / "dra" / "configmap-kubeadm-config.yaml").is_file():
            return FIXTURES / version / "dra"
    pytest.fail(f"no kubeadm fixtures under {FIXTURES}; run regenerate.sh there")


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
    source = fixture_dir()
    kubeadm_cm = load_configmap(source / "configmap-kubeadm-config.yaml")
    kubelet_cm = load_configmap(source / "configmap-kubelet-config.yaml")
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
    edits = {
        kce.APISERVER: kce.FlagEdit.from_params(APISERVER, "apiserver"),
        kce.CONTROLLER_MANAGER: kce.FlagEdit.from_params(GATES, "controller_manager"),
        kce.SCHEDULER: kce.FlagEdit.from_params(GATES, "scheduler"),
    }
    expected_cluster = kce.edit_cluster_configuration(cluster_before, edits)
    expected_kubelet = kce.edit_kubelet_configuration(
        kubelet_before, kce.FlagEdit.from_params(GATES, "kubelet")
    )

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
    assert [d["after"] for d in checked["diff"]] == [expected_cluster.text, expected_kubelet.text]

    # converge
    first = play(tmp_path, "converge", args)
    assert not first["_failed"], first.get("msg")
    assert first["changed"] is True
    assert read("kubeadm-config").data == {
        "ClusterConfiguration": expected_cluster.text,
        "unrelated": "kept as is",
    }
    assert read("kubelet-config").data == {"kubelet": expected_kubelet.text}
    assert [c["configmap"] for c in first["changes"]].count("kube-system/kubelet-config") == len(
        expected_kubelet.changes
    )
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
    stored = kce.cluster_configuration_flags(read("kubeadm-config").data["ClusterConfiguration"])
    assert all("DRAControlPlaneController" not in stored[c].feature_gates for c in kce.COMPONENTS)
    assert stored[kce.APISERVER].runtime_config == {
        "api/alpha": "false",
        "resource.k8s.io/v1beta1": "true",
    }

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
    assert read(old_name).data == {"kubelet": expected_kubelet.text}

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
