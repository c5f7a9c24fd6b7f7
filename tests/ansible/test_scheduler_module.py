"""The module scheduler_dynamic_resources, run for real by ansible-playbook (through
``gpufleet.runner``) against localhost on a copy of kubeadm's kube-scheduler manifest with a
custom KubeSchedulerConfiguration mounted from the host, as kubeadm's
``scheduler.extraVolumes`` writes it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from tests.ansible.test_config_gate_modules import DATA, play

pytestmark = pytest.mark.ansible

MODULE = "gpufleet.cluster.scheduler_dynamic_resources"
ANNOTATION = "gpufleet.io/config-hash"
CONTAINER_PATH = "/etc/kubernetes/scheduler-config.yaml"

# multiPoint disables DynamicResources by name in the default profile; a second profile
# disables every multiPoint plugin and lists its own, without DynamicResources.
SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: DynamicResources
- schedulerName: gpu-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourcesFit
      - name: DefaultPreemption
      - name: DefaultBinder
      disabled:
      - name: '*'
"""


# SCHEDULER_CONFIG with DynamicResources on in both profiles, written by hand: dropped
# from the default profile's disabled list (which leaves multiPoint empty), and enabled in
# the second profile where '*' is disabled, before DefaultPreemption (where the default
# plugin set has it). The document is dumped again the way Kubernetes' YAML encoder writes
# it: keys in their order, a string that cannot be plain double-quoted.
ENABLED_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint: {}
- schedulerName: gpu-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourcesFit
      - name: DynamicResources
      - name: DefaultPreemption
      - name: DefaultBinder
      disabled:
      - name: "*"
"""

ENABLED_CHANGES = [
    {
        "where": "KubeSchedulerConfiguration profile default-scheduler plugins.multiPoint.disabled",
        "what": "DynamicResources",
        "old": "disabled",
        "new": None,
        "why": "DRA needs the DynamicResources plugin",
    },
    {
        "where": "KubeSchedulerConfiguration profile gpu-scheduler plugins.multiPoint.enabled",
        "what": "DynamicResources",
        "old": None,
        "new": "enabled",
        "why": "'*' is disabled there; DRA needs the DynamicResources plugin",
    },
]


def scheduler_manifest(host_config: Path, *, with_config: bool = True) -> str:
    """kubeadm's 1.37.2 kube-scheduler manifest, with ``--config`` and the hostPath volume
    that kubeadm adds for ``scheduler.extraArgs``/``extraVolumes`` (same layout)."""
    text = (DATA / "dra" / "manifests" / "kube-scheduler.yaml").read_text()
    if not with_config:
        return text
    text = text.replace(
        "    - --bind-address=127.0.0.1\n",
        f"    - --bind-address=127.0.0.1\n    - --config={CONTAINER_PATH}\n",
    )
    text = text.replace(
        "      name: kubeconfig\n      readOnly: true\n",
        "      name: kubeconfig\n      readOnly: true\n"
        f"    - mountPath: {CONTAINER_PATH}\n      name: scheduler-config\n      readOnly: true\n",
    )
    text = text.replace(
        "    name: kubeconfig\nstatus: {}\n",
        f"    name: kubeconfig\n  - hostPath:\n      path: {host_config}\n      type: File\n"
        "    name: scheduler-config\nstatus: {}\n",
    )
    assert text.count(CONTAINER_PATH) == 2 and str(host_config) in text
    return text


def setup(tmp_path: Path, config: str = SCHEDULER_CONFIG, **kw: bool) -> tuple[Path, Path]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    host_config = tmp_path / "etc" / "scheduler-config.yaml"
    host_config.parent.mkdir()
    host_config.write_text(config)
    manifest = manifests / "kube-scheduler.yaml"
    manifest.write_text(scheduler_manifest(host_config, **kw))
    return manifest, host_config


def args(tmp_path: Path, manifest: Path, **extra: object) -> dict[str, object]:
    return {"manifest": str(manifest), "backup_dir": str(tmp_path / "backups")} | extra


def without_annotations(text: str) -> dict:
    doc = yaml.safe_load(text)
    doc["metadata"].pop("annotations", None)
    return doc


def test_converges_once_and_annotates_the_manifest(tmp_path: Path) -> None:
    manifest, config = setup(tmp_path)
    original_manifest = manifest.read_text()
    task = {MODULE: args(tmp_path, manifest)}
    first, second = play(
        tmp_path, "converge", [{"name": "Converge"} | task, {"name": "Again"} | task]
    )
    assert not first["_failed"], first.get("msg")
    assert first["changed"] is True and first["custom_config"] is True
    assert first["container_path"] == CONTAINER_PATH
    assert first["path"] == str(config)  # resolved through volumeMounts and hostPath
    # the file written turns the plugin on in both profiles, and says where
    assert config.read_text() == ENABLED_CONFIG
    assert first["changes"] == ENABLED_CHANGES
    profiles = yaml.safe_load(config.read_text())["profiles"]
    assert "disabled" not in profiles[0]["plugins"]["multiPoint"]
    assert [p["name"] for p in profiles[1]["plugins"]["multiPoint"]["enabled"]] == [
        "NodeResourcesFit",
        "DynamicResources",
        "DefaultPreemption",
        "DefaultBinder",
    ]
    # the manifest carries the hash of the new file; nothing else in it changed
    digest = hashlib.sha256(config.read_bytes()).hexdigest()
    assert first["config_hash"] == digest and first["annotation_changed"] is True
    assert first["restart_needed"] is False
    new_manifest = manifest.read_text()
    assert yaml.safe_load(new_manifest)["metadata"]["annotations"] == {ANNOTATION: digest}
    assert without_annotations(new_manifest) == yaml.safe_load(original_manifest)
    assert new_manifest == original_manifest.replace(
        "metadata:\n", f"metadata:\n  annotations:\n    {ANNOTATION}: {digest}\n", 1
    )
    # both diffs, both backups (outside the static pod directory)
    assert [d["before_header"] for d in first["diff"]] == [str(config), str(manifest)]
    assert Path(first["backup_file"]).read_text() == SCHEDULER_CONFIG
    assert Path(first["manifest_backup_file"]).read_text() == original_manifest
    assert Path(first["backup_file"]).parent == tmp_path / "backups"
    assert [p.name for p in manifest.parent.iterdir()] == ["kube-scheduler.yaml"]

    assert second["changed"] is False and second["changes"] == []
    assert second["annotation_changed"] is False
    assert manifest.read_text() == new_manifest

    # a hand edit of the file after the restart makes the annotation stale: it is bumped
    config.write_text(config.read_text() + "percentageOfNodesToScore: 50\n")
    (third,) = play(tmp_path, "stale", [{"name": "Stale"} | task])
    assert third["changed"] is True and third["changes"] == []
    new_digest = hashlib.sha256(config.read_bytes()).hexdigest()
    assert new_digest != digest
    assert yaml.safe_load(manifest.read_text())["metadata"]["annotations"] == {
        ANNOTATION: new_digest
    }


def test_check_mode_writes_nothing(tmp_path: Path) -> None:
    manifest, config = setup(tmp_path)
    original_manifest = manifest.read_text()
    (result,) = play(
        tmp_path, "check", [{"name": "Check", MODULE: args(tmp_path, manifest)}], check=True
    )
    assert result["changed"] is True and result["annotation_changed"] is True
    assert [c["what"] for c in result["changes"]] == ["DynamicResources", "DynamicResources"]
    assert result["diff"][0]["after"] == ENABLED_CONFIG
    assert ANNOTATION in result["diff"][1]["after"]
    assert config.read_text() == SCHEDULER_CONFIG
    assert manifest.read_text() == original_manifest
    assert "backup_file" not in result and not (tmp_path / "backups").exists()


def test_without_restart_the_manifest_is_left_alone(tmp_path: Path) -> None:
    manifest, config = setup(tmp_path)
    original_manifest = manifest.read_text()
    (result,) = play(
        tmp_path,
        "norestart",
        [{"name": "No restart", MODULE: args(tmp_path, manifest, restart=False)}],
    )
    assert result["changed"] is True and result["restart_needed"] is True
    assert result["annotation_changed"] is False and "manifest_backup_file" not in result
    assert "restart the kube-scheduler pod" in result["message"]
    assert config.read_text() == ENABLED_CONFIG
    assert manifest.read_text() == original_manifest


def test_without_config_flag_nothing_changes(tmp_path: Path) -> None:
    manifest, config = setup(tmp_path, with_config=False)
    original_manifest = manifest.read_text()
    (result,) = play(tmp_path, "default", [{"name": "Default", MODULE: args(tmp_path, manifest)}])
    assert not result["_failed"]
    assert result["changed"] is False and result["custom_config"] is False
    assert "has no --config flag" in result["message"]
    assert "default profile runs DynamicResources" in result["message"]
    assert manifest.read_text() == original_manifest
    assert config.read_text() == SCHEDULER_CONFIG


def test_refuses_an_old_scheduler_config_api(tmp_path: Path) -> None:
    old = SCHEDULER_CONFIG.replace(
        "kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3"
    )
    manifest, config = setup(tmp_path, old)
    original_manifest = manifest.read_text()
    (result,) = play(
        tmp_path,
        "refuse",
        [{"name": "Old API", MODULE: args(tmp_path, manifest), "ignore_errors": True}],
    )
    assert result["_failed"]
    assert result["msg"].startswith(f"config={config}: ")
    assert "apiVersion 'kubescheduler.config.k8s.io/v1beta3'" in result["msg"]
    assert (
        "fix: migrate the scheduler configuration to kubescheduler.config.k8s.io/v1"
        in (result["msg"])
    )
    assert config.read_text() == old and manifest.read_text() == original_manifest


def test_refuses_a_config_outside_any_host_volume(tmp_path: Path) -> None:
    manifest, _ = setup(tmp_path)
    text = manifest.read_text().replace(
        "      name: scheduler-config\n      readOnly", "      name: other\n      readOnly"
    )
    text = text.replace(f"    - mountPath: {CONTAINER_PATH}\n", "    - mountPath: /srv/other\n")
    manifest.write_text(text)
    (result,) = play(
        tmp_path,
        "unmounted",
        [{"name": "Unmounted", MODULE: args(tmp_path, manifest), "ignore_errors": True}],
    )
    assert result["_failed"]
    assert f"--config={CONTAINER_PATH} is under no volumeMount of kube-scheduler" in result["msg"]
    assert "or pass config" in result["msg"]
    assert manifest.read_text() == text
