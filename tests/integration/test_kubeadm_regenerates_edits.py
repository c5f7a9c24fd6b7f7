"""What kubeadm regenerates from an edited ClusterConfiguration equals the edited manifests.

``kubeadm upgrade apply`` and ``kubeadm init phase control-plane`` rewrite the static pod
manifests from the ClusterConfiguration stored in ``kube-system/kubeadm-config``
(kubernetes/kubeadm#2157: flags only in a manifest are lost). Editing the stored
ClusterConfiguration and the manifests with the same wanted state must therefore give
manifests that a real kubeadm would write itself from that configuration.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce

from gpufleet.build import binaries, release_pins

pytestmark = pytest.mark.integration

DATA = Path(__file__).parents[1] / "unit" / "data" / "kubeadm"

EDIT = kfl.FlagEdit(
    feature_gates={"DRAPrioritizedList": True, "DRADeviceTaints": True},
    absent_feature_gates=frozenset({"DRAControlPlaneController"}),
)
EDITS = {
    kce.APISERVER: kfl.FlagEdit(
        feature_gates=EDIT.feature_gates,
        absent_feature_gates=EDIT.absent_feature_gates,
        runtime_config={"resource.k8s.io/v1beta2": "true"},
        absent_runtime_config=frozenset({"resource.k8s.io/v1alpha3"}),
    ),
    kce.CONTROLLER_MANAGER: EDIT,
    kce.SCHEDULER: EDIT,
}

CASES = sorted(
    (d.parent.name, d.name)
    for d in DATA.glob("*/*")
    if (d / "configmap-kubeadm-config.yaml").is_file()
)


def kubeadm_path(version: str) -> Path:
    """The cached kubeadm of ``version``; releases.yaml may not pin it (1.30.14 is built
    for the fixtures only, by regenerate.sh --build), so fall back to the cache layout."""
    try:
        return binaries.binary_path("kubeadm", version)
    except release_pins.UnknownNameError:
        return binaries.cache_root() / "bin" / "kubernetes" / f"v{version}" / "kubeadm"


def container(doc: dict, name: str) -> dict:
    return next(c for c in doc["spec"]["containers"] if c["name"] == name)


@pytest.mark.parametrize(("version", "variant"), CASES)
def test_kubeadm_writes_the_manifests_we_edit(tmp_path: Path, version: str, variant: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("kubeadm --rootfs chroots and needs root")
    kubeadm = kubeadm_path(version)
    if not kubeadm.is_file():
        pytest.skip(
            f"kubeadm {version} is not built ({kubeadm}); build it: "
            f"tests/unit/data/kubeadm/regenerate.sh --build {version}"
        )
    source = DATA / version / variant
    stored = yaml.safe_load((source / "configmap-kubeadm-config.yaml").read_text())
    edited = kce.edit_cluster_configuration(stored["data"]["ClusterConfiguration"], EDITS)
    assert edited.changed
    init = next(
        d
        for d in yaml.safe_load_all((DATA / version / "input" / f"{variant}.yaml").read_text())
        if d and d["kind"] == "InitConfiguration"
    )
    init["apiVersion"] = yaml.safe_load(edited.text)["apiVersion"]
    root = tmp_path / "root"
    root.mkdir()
    (root / "kubeadm.yaml").write_text(
        yaml.safe_dump(init, sort_keys=False) + "---\n" + edited.text
    )
    run = subprocess.run(
        [
            str(kubeadm),
            "init",
            "phase",
            "control-plane",
            "all",
            "--config",
            "/kubeadm.yaml",
            "--rootfs",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for component in kce.COMPONENTS:
        ours = kce.edit_static_pod_manifest(
            (source / "manifests" / f"{component}.yaml").read_text(), component, EDITS[component]
        ).text
        theirs = (root / "etc" / "kubernetes" / "manifests" / f"{component}.yaml").read_text()
        assert kce.static_pod_flags(ours, component) == kce.static_pod_flags(theirs, component)
        ours_doc, theirs_doc = yaml.safe_load(ours), yaml.safe_load(theirs)
        ours_cmd = container(ours_doc, component).pop("command")
        theirs_cmd = container(theirs_doc, component).pop("command")
        assert ours_doc == theirs_doc
        # the same arguments; kubeadm may order the managed flags differently
        managed = ("--feature-gates=", "--runtime-config=")
        assert [a for a in ours_cmd if not a.startswith(managed)] == [
            a for a in theirs_cmd if not a.startswith(managed)
        ]
