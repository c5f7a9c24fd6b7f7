"""Host checks over what the playbook reads on each node (registered task results)."""

from __future__ import annotations

import base64
import json

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import hosts as vh

from tests.unit import host_records

pytestmark = pytest.mark.unit

#: The CRI part of ``containerd config dump`` of containerd 2.4 (version 4) with the NVIDIA
#: runtime added by the toolkit's drop-in.
DUMP_NVIDIA = """
version = 4
[plugins."io.containerd.cri.v1.runtime"]
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
"""
DUMP_PLAIN = """
version = 4
[plugins."io.containerd.cri.v1.runtime"]
  cdi_spec_dirs = ["/etc/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
"""
UUID = "GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80"


def cmd(name: str, rc: int, stdout: str = "") -> dict:
    return {"item": {"name": name}, "rc": rc, "stdout": stdout, "stderr": ""}


def host(
    name: str,
    driver: str = "580.159.04",
    toolkit: str | None = "NVIDIA Container Toolkit CLI version 1.18.0",
    dump: str = DUMP_NVIDIA,
    cdi_uuids: tuple[str, ...] = (UUID,),
    simulator: bool = False,
    packages: str = "",
    holds: str = "",
) -> dict:
    node = {"path": "/dev/nvidia0", "major": 195, "permissions": "rwm"}
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [{"name": u, "containerEdits": {"deviceNodes": [node]}} for u in cdi_uuids],
        "containerEdits": {
            "deviceNodes": [{"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"}],
        },
    }
    return vh.normalize_host(
        {
            "host": name,
            "node": name,
            "gpu_node": True,
            "simulator": simulator,
            "gpu": {
                "ansible_facts": {
                    "gpufleet_gpu_driver_version": driver,
                    "gpufleet_gpus": [
                        {"index": 0, "uuid": UUID, "name": "NVIDIA H200", "driver_version": driver}
                    ],
                }
            },
            "commands": [
                cmd("toolkit", 0 if toolkit else 2, toolkit or ""),
                cmd(
                    "containerd_version",
                    0,
                    "containerd github.com/containerd/containerd/v2 v2.4.2 abc",
                ),
                cmd("containerd", 0, dump),
                cmd("packages", 0 if packages else 1, packages),
                cmd("holds", 0, holds),
                cmd("kubeadm_version", 0, "v1.37.2"),
            ],
            "driver_root": host_records.driver_root(),
            "cdi_hook": host_records.cdi_hook(),
            "plugin_sockets": host_records.plugin_sockets(),
            "cdi": [
                {
                    "source": "/var/run/cdi/nvidia.yaml",
                    "encoding": "base64",
                    "content": base64.b64encode(json.dumps(spec).encode()).decode(),
                }
            ],
        }
    )


def by_id(checks: list) -> dict:
    return {c.id: c for c in checks}


def test_healthy_hosts_pass() -> None:
    c = by_id(vh.hosts_checks([host("gpu-1"), host("gpu-2")]))
    assert {i: x.status for i, x in c.items()} == {
        "hosts.driver-version": "pass",
        "hosts.toolkit": "pass",
        "hosts.containerd-cdi": "pass",
        "hosts.cdi-gpus": "pass",
        "hosts.driver-root": "pass",
        "hosts.cdi-hook": "pass",
        "hosts.plugin-sockets": "pass",
        "versions.packages-held": "skip",
    }


def test_one_node_with_another_driver_fails_naming_it() -> None:
    c = by_id(vh.hosts_checks([host("gpu-1"), host("gpu-2"), host("gpu-3", driver="570.0.0")]))
    (p,) = c["hosts.driver-version"].problems
    assert p.subject == "gpu-3"
    assert "driver 570.0.0, while 2 of 3 GPU nodes run 580.159.04" in p.message


def test_on_a_tie_the_node_behind_the_newest_driver_is_named_in_any_order() -> None:
    # two GPU nodes, one each: the facts come back in whatever order the hosts answered
    old, new = host("gpu-2", driver="570.0.0"), host("gpu-1")
    for hosts in ([old, new], [new, old]):
        c = by_id(vh.hosts_checks(hosts))
        (p,) = c["hosts.driver-version"].problems
        assert p.subject == "gpu-2"
        assert "driver 570.0.0, while 1 of 2 GPU nodes run 580.159.04" in p.message
        assert "--tags" not in (c["hosts.driver-version"].fix or "")


def test_driver_below_the_minimum_fails() -> None:
    c = by_id(vh.hosts_checks([host("gpu-1", driver="550.54.15")]))
    assert "older than 565.0.0" in c["hosts.driver-version"].problems[0].message


def test_containerd_without_nvidia_runtime_and_cdi_dir() -> None:
    c = by_id(vh.hosts_checks([host("gpu-1", dump=DUMP_PLAIN)]))
    msgs = [p.message for p in c["hosts.containerd-cdi"].problems]
    assert any("no runtime 'nvidia'" in m for m in msgs)
    assert any("lacks ['/var/run/cdi']" in m for m in msgs)


def test_simulated_gpu_skips_runtime_and_toolkit_but_not_cdi_dirs() -> None:
    c = by_id(vh.hosts_checks([host("gpu-1", dump=DUMP_PLAIN, toolkit=None, simulator=True)]))
    assert c["hosts.toolkit"].status == "skip"
    assert c["hosts.cdi-gpus"].status == "skip"
    assert [p.message for p in c["hosts.containerd-cdi"].problems] == [
        "plugins.'io.containerd.cri.v1.runtime'.cdi_spec_dirs=['/etc/cdi'] lacks ['/var/run/cdi']"
    ]


def test_cdi_spec_without_the_gpu_uuid_fails() -> None:
    c = by_id(vh.hosts_checks([host("gpu-1", cdi_uuids=("all",))]))
    assert c["hosts.cdi-gpus"].status == "fail"
    assert UUID in c["hosts.cdi-gpus"].problems[0].message


def test_missing_toolkit_is_a_warning() -> None:
    c = by_id(vh.hosts_checks([host("gpu-1", toolkit=None)]))
    assert c["hosts.toolkit"].status == "warn"


def test_unheld_kubelet_package_fails() -> None:
    pk = "kubeadm 1.37.2-1.1 install ok installed\nkubelet 1.37.2-1.1 install ok installed\n"
    c = by_id(vh.hosts_checks([host("gpu-1", packages=pk, holds="kubeadm\n")]))
    held = c["versions.packages-held"]
    assert held.status == "fail"
    assert [p.message.split(" ")[1] for p in held.problems] == ["kubelet"]


def test_kubeadm_versions() -> None:
    assert vh.kubeadm_versions([host("gpu-1")]) == {"gpu-1": "1.37.2"}
