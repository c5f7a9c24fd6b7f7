"""The dra_feature_gates role refuses an impossible request before any file changes."""

from __future__ import annotations

import hashlib
import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from gpufleet import runner
from gpufleet.exit import EXIT_CANNOT_RUN

pytestmark = pytest.mark.ansible

KUBEADM = Path(__file__).resolve().parents[1] / "unit" / "data" / "kubeadm" / "1.37.2" / "defaults"
INVENTORY = """\
[kube_control_plane]
cp1 ansible_connection=local
[kube_node]
cp1
[all:vars]
ansible_python_interpreter="{{ ansible_playbook_python }}"
"""


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(
    ("extravars", "named"),
    [
        (
            {
                "dra_feature_gates_kubernetes_version": "1.36.0",
                "dra_feature_gates_extra": {"DynamicResourceAllocation": False},
            },
            'dra_feature_gates_extra={"DynamicResourceAllocation": false}',
        ),
        (
            {
                "dra_feature_gates_kubernetes_version": "1.37.2",
                "dra_feature_gates_extra": {"DRAControlPlaneController": True},
            },
            "unrecognized feature gate: DRAControlPlaneController",
        ),
        (
            {"dra_feature_gates_kubernetes_version": "banana"},
            'dra_feature_gates_kubernetes_version="banana"',
        ),
        (
            {
                "dra_feature_gates_kubernetes_version": "1.33.13",
                "dra_feature_gates_features": "nope",
            },
            'dra_feature_gates_features="nope"',
        ),
    ],
)
def test_impossible_request_fails_naming_the_variable_and_changes_nothing(
    tmp_path: Path, extravars: dict, named: str
) -> None:
    work = tmp_path / "node"
    shutil.copytree(KUBEADM / "manifests", work / "manifests")
    shutil.copy(KUBEADM / "kubelet-config.yaml", work / "kubelet-config.yaml")
    before = _digests(work)
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(INVENTORY)
    out = io.StringIO()
    result = runner.run_playbook(
        "dra_feature_gates",
        str(inventory),
        extravars={
            **extravars,
            "dra_feature_gates_update_configmaps": False,
            "dra_feature_gates_restart": False,
            "dra_feature_gates_manifest_dir": str(work / "manifests"),
            "dra_feature_gates_kubelet_config": str(work / "kubelet-config.yaml"),
            "dra_feature_gates_backup_dir": str(tmp_path / "backups"),
            "ansible_become": False,
        },
        console=Console(file=out, width=400),
        artifact_root=tmp_path / "artifacts",
    )
    assert result.status == EXIT_CANNOT_RUN  # a refusal of the input: exit 2
    messages = " ".join(msg for _, _, msg in result.progress.failures)
    assert named in " ".join(messages.split())
    assert _digests(work) == before
    assert not (tmp_path / "backups").exists()
