"""The modules static_pod_flags and kubelet_config_gates, run for real by ansible-playbook
(through ``gpufleet.runner``) against localhost on copies of the kubeadm fixtures.

Each test checks what a run promises: the first run changes the file and reports it, a
second run reports no change, check mode writes nothing, the backup equals the original,
and everything the module does not own is left as it was.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config as kcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce
from ansible_collections.gpufleet.cluster.plugins.modules import kubelet_config_gates
from rich.console import Console

from gpufleet import runner
from gpufleet.build import binaries
from gpufleet.exit import EXIT_CANNOT_RUN

pytestmark = pytest.mark.ansible

DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "kubeadm" / "1.37.2"

DRA_GATES = {"DynamicResourceAllocation": True, "DRAPrioritizedList": True}


def play(
    tmp_path: Path, name: str, tasks: list[dict[str, Any]], *, check: bool = False
) -> list[dict[str, Any]]:
    """Run ``tasks`` on localhost; return each task's result (``res``) in order, with
    ``_failed`` set for failed tasks."""
    book = tmp_path / f"{name}.yml"
    book.write_text(
        yaml.safe_dump(
            [{"name": name, "hosts": "localhost", "gather_facts": False, "tasks": tasks}],
            sort_keys=False,
        )
    )
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    events: list[dict[str, Any]] = []
    out = io.StringIO()
    result = runner.run_playbook(
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
    assert len(results) == len(tasks), out.getvalue()
    assert result.status != EXIT_CANNOT_RUN, out.getvalue()
    return results


def parsed_without_command(path: Path, component: str) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    for c in doc["spec"]["containers"]:
        if c["name"] == component:
            del c["command"]
    return doc


# ------------------------------------------------------------------ static_pod_flags


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    directory = tmp_path / "manifests"
    directory.mkdir()
    for source in (DATA / "dra" / "manifests").glob("*.yaml"):
        shutil.copy(source, directory / source.name)
    return directory


def test_static_pod_flags_converges_once_with_a_backup(tmp_path: Path, manifests: Path) -> None:
    path = manifests / "kube-apiserver.yaml"
    original = path.read_text()
    args = {
        "path": str(path),
        "component": "kube-apiserver",
        "feature_gates": DRA_GATES,
        "absent_feature_gates": ["DRAControlPlaneController"],
        "runtime_config": {"resource.k8s.io/v1beta1": "true"},
        "absent_runtime_config": ["resource.k8s.io/v1alpha3"],
        "backup_dir": str(tmp_path / "backups"),
    }
    first, second = play(
        tmp_path,
        "converge",
        [
            {"name": "Converge", "gpufleet.cluster.static_pod_flags": args},
            {"name": "Again", "gpufleet.cluster.static_pod_flags": args},
        ],
    )
    assert first["changed"] is True and not first["_failed"]
    assert second["changed"] is False and second["changes"] == []
    # What was written, worked out by hand from the fixture: both --feature-gates items are
    # merged into the last one (DRAControlPlaneController dropped, the wanted gates
    # appended), v1alpha3 leaves --runtime-config and v1beta1 is appended there; every
    # other byte of the manifest is kept.
    before_flags = (
        "    - --feature-gates=DRAControlPlaneController=true,DRAAdminAccess=true\n"
        "    - --runtime-config=api/alpha=false,resource.k8s.io/v1alpha3=true\n"
        "    - --audit-log-maxage=30\n"
        "    - --feature-gates=DRADeviceTaints=true\n"
    )
    after_flags = (
        "    - --runtime-config=api/alpha=false,resource.k8s.io/v1beta1=true\n"
        "    - --audit-log-maxage=30\n"
        "    - --feature-gates=DRAAdminAccess=true,DRADeviceTaints=true,"
        "DynamicResourceAllocation=true,DRAPrioritizedList=true\n"
    )
    assert original.count(before_flags) == 1
    expected_text = original.replace(before_flags, after_flags)
    assert path.read_text() == expected_text
    gates = "kube-apiserver command --feature-gates"
    runtime = "kube-apiserver command --runtime-config"
    assert first["changes"] == [
        {
            "where": gates,
            "what": "DRAControlPlaneController",
            "old": "true",
            "new": None,
            "why": "feature gate must be absent",
        },
        {
            "where": gates,
            "what": "DynamicResourceAllocation",
            "old": None,
            "new": "true",
            "why": "feature gate wanted, was missing",
        },
        {
            "where": gates,
            "what": "DRAPrioritizedList",
            "old": None,
            "new": "true",
            "why": "feature gate wanted, was missing",
        },
        {
            "where": gates,
            "what": "--feature-gates",
            "old": "DRAControlPlaneController=true,DRAAdminAccess=true",
            "new": None,
            "why": "duplicate --feature-gates (the component applies each in turn); merged "
            "into the last one",
        },
        {
            "where": runtime,
            "what": "resource.k8s.io/v1alpha3",
            "old": "true",
            "new": None,
            "why": "runtime-config must be absent",
        },
        {
            "where": runtime,
            "what": "resource.k8s.io/v1beta1",
            "old": None,
            "new": "true",
            "why": "runtime-config wanted, was missing",
        },
    ]
    assert first["diff"]["before"] == original
    assert first["diff"]["after"] == expected_text
    # the backup is the original and it is outside the static pod directory
    backup = Path(first["backup_file"])
    assert backup.parent == tmp_path / "backups"
    assert backup.read_text() == original
    assert sorted(p.name for p in manifests.iterdir()) == [
        "kube-apiserver.yaml",
        "kube-controller-manager.yaml",
        "kube-scheduler.yaml",
    ]
    # nothing but the command changed; the other manifests were not touched
    doc_before = yaml.safe_load(original)
    del doc_before["spec"]["containers"][0]["command"]
    assert parsed_without_command(path, "kube-apiserver") == doc_before
    for other in ("kube-controller-manager", "kube-scheduler"):
        assert (manifests / f"{other}.yaml").read_text() == (
            DATA / "dra" / "manifests" / f"{other}.yaml"
        ).read_text()
    flags = kce.static_pod_flags(path.read_text(), "kube-apiserver")
    assert flags.feature_gates == {
        "DRAAdminAccess": True,
        "DRADeviceTaints": True,
        "DynamicResourceAllocation": True,
        "DRAPrioritizedList": True,
    }
    assert flags.runtime_config == {"api/alpha": "false", "resource.k8s.io/v1beta1": "true"}


def test_static_pod_flags_check_mode_writes_nothing(tmp_path: Path, manifests: Path) -> None:
    path = manifests / "kube-scheduler.yaml"
    original = path.read_text()
    (result,) = play(
        tmp_path,
        "check",
        [
            {
                "name": "Check",
                "gpufleet.cluster.static_pod_flags": {
                    "path": str(path),
                    "component": "kube-scheduler",
                    "feature_gates": DRA_GATES,
                    "backup_dir": str(tmp_path / "backups"),
                },
            }
        ],
        check=True,
    )
    assert result["changed"] is True
    # DRAPrioritizedList=true is there already (input/dra.yaml)
    assert [(c["what"], c["old"], c["new"]) for c in result["changes"]] == [
        ("DynamicResourceAllocation", None, "true")
    ]
    assert result["diff"]["before"] == original
    assert "DynamicResourceAllocation=true" in result["diff"]["after"]
    assert path.read_text() == original
    assert "backup_file" not in result
    assert not (tmp_path / "backups").exists()


def test_static_pod_flags_refuses_bad_input_and_backups_in_the_manifest_dir(
    tmp_path: Path, manifests: Path
) -> None:
    path = manifests / "kube-scheduler.yaml"
    original = path.read_text()
    common = {"path": str(path), "component": "kube-scheduler"}
    bad_value, in_manifests, runtime_for_scheduler = play(
        tmp_path,
        "refuse",
        [
            {
                "name": "Bad gate value",
                "gpufleet.cluster.static_pod_flags": common
                | {"feature_gates": {"DRAAdminAccess": "maybe"}},
                "ignore_errors": True,
            },
            {
                "name": "Backup into the static pod directory",
                "gpufleet.cluster.static_pod_flags": common
                | {"feature_gates": DRA_GATES, "backup_dir": str(manifests)},
                "ignore_errors": True,
            },
            {
                "name": "runtime-config for the scheduler",
                "gpufleet.cluster.static_pod_flags": common
                | {"runtime_config": {"resource.k8s.io/v1beta1": "true"}},
                "ignore_errors": True,
            },
        ],
    )
    assert bad_value["_failed"]
    # the message names the parameter, the value and the fix
    assert bad_value["msg"].endswith(
        "feature_gates.DRAAdminAccess='maybe' is not a boolean; fix: use true or false "
        "(Go strconv.ParseBool: true, false, 1, 0, t, f, T, F, TRUE, FALSE, True, False)"
    )
    assert in_manifests["_failed"]
    assert "the kubelet would run the backup as a second static pod" in in_manifests["msg"]
    assert runtime_for_scheduler["_failed"]
    assert "runtime-config is a kube-apiserver flag" in runtime_for_scheduler["msg"]
    assert path.read_text() == original
    assert sorted(p.name for p in manifests.iterdir()) == [
        "kube-apiserver.yaml",
        "kube-controller-manager.yaml",
        "kube-scheduler.yaml",
    ]


# ------------------------------------------------------------------ kubelet_config_gates


def test_kubelet_config_gates_converges_with_a_local_backup(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    shutil.copy(DATA / "dra" / "kubelet-config.yaml", path)
    original = path.read_text()
    args = {
        "path": str(path),
        "feature_gates": DRA_GATES,
        "absent_feature_gates": ["DRAControlPlaneController"],
    }
    checked = play(
        tmp_path,
        "check",
        [{"name": "Check", "gpufleet.cluster.kubelet_config_gates": args}],
        check=True,
    )[0]
    assert checked["changed"] is True and path.read_text() == original
    assert list(tmp_path.glob("config.yaml.*~")) == []

    first, second = play(
        tmp_path,
        "converge",
        [
            {"name": "Converge", "gpufleet.cluster.kubelet_config_gates": args},
            {"name": "Again", "gpufleet.cluster.kubelet_config_gates": args},
        ],
    )
    assert first["changed"] is True and first["config_source"] == "param"
    assert second["changed"] is False
    assert first["changes"] == checked["changes"]
    assert Path(first["backup_file"]).parent == tmp_path
    assert Path(first["backup_file"]).read_text() == original
    new, old = yaml.safe_load(path.read_text()), yaml.safe_load(original)
    assert new.pop("featureGates") == {
        "DRAResourceClaimDeviceStatus": True,
        "DynamicResourceAllocation": True,
        "DRAPrioritizedList": True,
    }
    old.pop("featureGates")
    assert new == old
    assert (path.stat().st_mode & 0o777) == (Path(first["backup_file"]).stat().st_mode & 0o777)


@pytest.fixture
def running_kubelet(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A real kubelet (the default release) reading a config file under tmp_path.

    It is given a bootstrap kubeconfig naming a port nothing listens on and no client
    certificate, so it waits for the apiserver (up to a minute, ``waitForServer`` in
    ``pkg/kubelet/certificate/bootstrap``) with its command line in /proc.
    """
    kubelet = binaries.binary_path("kubelet")
    if not kubelet.is_file():
        pytest.skip(
            f"kubelet is not built ({kubelet}); build it: "
            "python -m gpufleet.build.binaries build --components kubelet"
        )
    work = tmp_path / "kubelet"
    (work / "conf.d").mkdir(parents=True)
    config = yaml.safe_load((DATA / "defaults" / "kubelet-config.yaml").read_text())
    config["rotateCertificates"] = False  # bootstrap in the foreground: wait for the server
    config["authentication"]["x509"]["clientCAFile"] = ""
    config["failCgroupV1"] = False  # hosts of the test run may still be on cgroup v1
    config_path = work / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    (work / "bootstrap.conf").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://127.0.0.1:1",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "none"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    log = open(work / "kubelet.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            str(kubelet),
            f"--config={config_path}",
            f"--bootstrap-kubeconfig={work / 'bootstrap.conf'}",
            f"--kubeconfig={work / 'kubelet.conf'}",
            f"--cert-dir={work / 'pki'}",
            f"--root-dir={work / 'root'}",
            "--feature-gates=DRADeviceTaints=true",
            f"--config-dir={work / 'conf.d'}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while b"Failed to connect to apiserver" not in (work / "kubelet.log").read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (work / "kubelet.log").read_text()[-3000:]
                pytest.fail(f"kubelet did not reach the bootstrap wait:\n{tail}")
            time.sleep(0.2)
        yield proc.pid, config_path
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        log.close()


def test_kubelet_config_gates_finds_the_file_of_the_running_kubelet(
    tmp_path: Path, running_kubelet: tuple[int, Path]
) -> None:
    pid, config_path = running_kubelet
    original = config_path.read_text()
    (result,) = play(
        tmp_path,
        "discover",
        [
            {
                "name": "Gates on the running kubelet's file",
                "gpufleet.cluster.kubelet_config_gates": {
                    "feature_gates": {"DRAPrioritizedList": True}
                },
            }
        ],
    )
    assert result["config_source"] == "process"
    assert result["kubelet_pid"] == pid
    assert result["path"] == str(config_path)
    assert result["command_line_feature_gates"] == ["DRADeviceTaints=true"]
    assert result["config_dir"] == str(config_path.parent / "conf.d")
    warnings = result.get("warnings", [])
    assert any("overrides featureGates" in w for w in warnings), warnings
    assert any("--config-dir" in w for w in warnings), warnings
    assert kcfg.kubelet_feature_gates(config_path.read_text()) == {"DRAPrioritizedList": True}
    assert Path(result["backup_file"]).read_text() == original


def test_kubelet_config_gates_without_a_kubelet_says_it_used_the_default(tmp_path: Path) -> None:
    # as the module judges: a kubelet in another mount namespace (a lab node's container)
    # reads other files and is not this host's
    if kubelet_config_gates.kubelet_processes():
        pytest.skip("a kubelet runs on this host; the fallback cannot be observed here")
    unit = (
        subprocess.run(["systemctl", "cat", "kubelet"], capture_output=True, text=True, check=False)
        if shutil.which("systemctl")
        else None
    )
    if unit is not None and unit.returncode == 0:
        pytest.skip("this host has a kubelet systemd unit; the fallback cannot be observed here")
    (result,) = play(
        tmp_path,
        "fallback",
        [
            {
                "name": "Gates without a path",
                "gpufleet.cluster.kubelet_config_gates": {"feature_gates": DRA_GATES},
                "ignore_errors": True,
            }
        ],
        check=True,  # never touch a real /var/lib/kubelet/config.yaml of the test host
    )
    assert result["config_source"] == "default"
    assert result["path"] == kcfg.DEFAULT_KUBELET_CONFIG
    assert any("using the kubeadm default" in w for w in result.get("warnings", []))
    if not Path(kcfg.DEFAULT_KUBELET_CONFIG).exists():
        assert result["_failed"] and "no such KubeletConfiguration file" in result["msg"]
