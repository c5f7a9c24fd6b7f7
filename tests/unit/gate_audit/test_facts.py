"""Gate facts read from a host: command lines, kubelet flags, metrics URLs and their JSON
form (``plugins/module_utils/gate_audit/facts.py``), on the kubeadm fixtures of
``tests/unit/data/kubeadm``.
"""

from __future__ import annotations

import os
import time

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import terms as gt
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl

from tests.unit.gate_audit.hosts import (
    as_proc,
    command_of,
    control_plane_host,
    fixture,
    kubelet,
    manifest_text,
)

pytestmark = pytest.mark.unit


def test_argv_flags_merge_repeated_feature_gates_like_the_component() -> None:
    # The dra manifest gives --feature-gates twice (v1beta4 allows repeated extraArgs).
    flags = gf.argv_flags(as_proc(command_of(manifest_text("dra", "kube-apiserver"))))
    assert flags.feature_gates == {
        "DRAControlPlaneController": True,
        "DRAAdminAccess": True,
        "DRADeviceTaints": True,
    }
    assert flags.runtime_config == {"api/alpha": "false", "resource.k8s.io/v1alpha3": "true"}
    # a later entry wins, a bare runtime-config key is true, "--flag value" is read
    later = gf.argv_flags(
        [
            "kube-apiserver",
            "--feature-gates=A=true",
            "--feature-gates",
            "A=false,B=1",
            "--runtime-config=resource.k8s.io/v1beta1",
        ]
    )
    assert later.feature_gates == {"A": False, "B": True}
    assert later.runtime_config == {"resource.k8s.io/v1beta1": "true"}


def test_argv_flags_reject_a_malformed_value_naming_it() -> None:
    with pytest.raises(kfl.FlagValueError, match="DRAAdminAccess=yes"):
        gf.argv_flags(["kube-apiserver", "--feature-gates=DRAAdminAccess=yes"])


def test_component_of_matches_the_executable_basename() -> None:
    assert gf.component_of(["/usr/bin/kubelet", "--config=x"]) == "kubelet"
    assert gf.component_of(command_of(manifest_text("defaults", "kube-scheduler"))) == (
        "kube-scheduler"
    )
    assert gf.component_of(["/usr/bin/kubeletctl"]) is None
    assert gf.component_of(["kubelet"], ["kube-apiserver"]) is None


def test_kubelet_flags_override_the_configuration_file() -> None:
    facts = kubelet(variant="dra", extra_args="--feature-gates=DRAResourceClaimDeviceStatus=false")
    assert facts.process is not None
    assert facts.process.feature_gates == {
        "DRAControlPlaneController": True,  # only in the file: kept
        "DRAResourceClaimDeviceStatus": False,  # in both: the flag wins
    }


def test_metrics_url_from_the_real_manifests() -> None:
    api = command_of(manifest_text("defaults", "kube-apiserver"))
    assert gf.metrics_url("kube-apiserver", api) == "https://127.0.0.1:6443/metrics"
    kcm = command_of(manifest_text("defaults", "kube-controller-manager"))
    assert gf.metrics_url("kube-controller-manager", kcm) == "https://127.0.0.1:10257/metrics"
    # the dra variant adds --bind-address=0.0.0.0: a wildcard is reached on loopback
    kcm_dra = command_of(manifest_text("dra", "kube-controller-manager"))
    assert gf.metrics_url("kube-controller-manager", kcm_dra) == "https://127.0.0.1:10257/metrics"
    sched = command_of(manifest_text("defaults", "kube-scheduler"))
    assert gf.metrics_url("kube-scheduler", sched) == "https://127.0.0.1:10259/metrics"
    config = yaml.safe_load((fixture("defaults") / "kubelet-config.yaml").read_text())
    assert gf.metrics_url("kubelet", ["kubelet"], config) == "https://127.0.0.1:10250/metrics"
    assert gf.metrics_url("kubelet", ["kubelet", "--address=fd00::1"], {"port": 10555}) == (
        "https://[fd00::1]:10555/metrics"
    )
    with pytest.raises(gt.GateAuditError, match="not a number"):
        gf.metrics_url("kube-apiserver", ["kube-apiserver", "--secure-port=https"])


def test_process_start_time_of_this_process() -> None:
    with open("/proc/self/stat") as fh:
        stat = fh.read()
    with open("/proc/stat") as fh:
        btime = next(float(line.split()[1]) for line in fh if line.startswith("btime "))
    started = gf.process_start_time(stat, btime, os.sysconf("SC_CLK_TCK"))
    assert btime <= started <= time.time() + 1
    with pytest.raises(gt.GateAuditError, match="malformed"):
        gf.process_start_time("12 (x) S 1", btime, 100)


def test_bad_facts_name_the_field() -> None:
    good = control_plane_host().to_dict()
    good["components"]["kubelet"]["process"]["feature_gates"] = {"X": "yes"}
    with pytest.raises(gt.GateAuditError, match=r"facts\['cp-1'\].components.kubelet.process"):
        gf.HostFacts.from_dict(good, "cp-1")
    with pytest.raises(gt.GateAuditError, match="components"):
        gf.HostFacts.from_dict({"host": "x"})
