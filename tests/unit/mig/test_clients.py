"""What holds a GPU open during a MIG change, and stopping and restarting it
(``plugins/module_utils/mig/clients.py``); commands go to a recording stand-in. The real
programs are run by ``tests/ansible/test_mig_apply.py``."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import clients as mcl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import gpu_state as mgs

pytestmark = pytest.mark.unit

CRICTL_PS = json.dumps(
    {
        "containers": [
            {
                "id": "0123456789abcdef",
                "metadata": {"name": "gpus"},
                "labels": {"io.kubernetes.pod.name": "nvidia-dra-driver-gpu-kubelet-plugin-x1"},
            },
            {"id": "fff", "metadata": {"name": "app"}, "labels": {"io.kubernetes.pod.name": "web"}},
        ]
    }
)


class Host:
    """Answers commands like a host with dcgm active, nvidia_drm loaded and the DRA
    driver's kubelet plugin running; records every command."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.commands: list[list[str]] = []
        self.fail = fail

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        self.commands.append(argv)
        if argv[0] in self.fail:
            return 1, "", f"{argv[0]} failed"
        if argv[:2] == ["systemctl", "is-active"]:
            return (0, "active\n", "") if argv[2] == "nvidia-dcgm.service" else (3, "inactive", "")
        if argv[:2] == ["crictl", "ps"]:
            return 0, CRICTL_PS, ""
        return 0, "", ""


def modules(path: str) -> str:
    assert path == "/proc/modules"
    return "nvidia_drm 1 0 - Live 0x0\nnvidia 2 1 nvidia_drm, Live 0x0\n"


def test_find_clients_of_every_kind_and_folds_known_processes() -> None:
    processes = [mgs.Process(7, "/usr/bin/nv-hostengine", 10), mgs.Process(9, "python", 500)]
    found = mcl.find_clients(Host().run, modules, processes)
    assert [(c.kind, c.name, c.ref) for c in found] == [
        ("nvidia-dcgm", "nvidia-dcgm.service", ""),
        ("nvidia-drm", "nvidia_drm", ""),
        ("dra-kubelet-plugin", "nvidia-dra-driver-gpu-kubelet-plugin-x1/gpus", "0123456789abcdef"),
        ("process", "python", "9"),
    ]


def test_a_host_without_systemctl_crictl_or_proc_modules_has_only_its_processes() -> None:
    def run(argv: list[str]) -> tuple[int, str, str]:
        raise FileNotFoundError(2, argv[0])

    def read_file(path: str) -> str:
        raise OSError(2, path)

    found = mcl.find_clients(run, read_file, [mgs.Process(9, "python", None)])
    assert [(c.kind, c.ref) for c in found] == [("process", "9")]


@pytest.mark.parametrize(
    ("name", "pod", "kind"),
    [
        ("gpus", "nvidia-dra-driver-gpu-kubelet-plugin-abc", "dra-kubelet-plugin"),
        ("nvidia-device-plugin", "nvidia-device-plugin-xyz", "k8s-device-plugin"),
        ("app", "web-1", None),
    ],
)
def test_classify_container(name: str, pod: str, kind: str | None) -> None:
    assert mcl.classify_container(name, pod) == kind


def test_refuse_message_names_each_client_and_the_option_that_allows_it() -> None:
    blocking = [
        mcl.Client("nvidia-dcgm", "nvidia-dcgm.service"),
        mcl.Client("process", "python", "9"),
    ]
    message = mcl.refuse_message(blocking, lambda o: f"mig_{o}", 0, "MIG mode must change")
    assert message.startswith("GPU 0: MIG mode must change; held by ")
    assert "add 'nvidia-dcgm' to mig_allow_stop" in message
    assert "process python (pid 9): stop it, or set mig_allow_reboot=true" in message


def test_stop_and_restart_run_the_right_programs() -> None:
    host = Host()
    unit = mcl.Client("nvidia-dcgm", "nvidia-dcgm.service")
    module = mcl.Client("nvidia-drm", "nvidia_drm")
    container = mcl.Client("dra-kubelet-plugin", "pod/gpus", "0123456789abcdef")
    assert mcl.stop_client(host.run, unit) == "stopped nvidia-dcgm.service"
    assert mcl.stop_client(host.run, module) == "unloaded nvidia_drm"
    assert mcl.stop_client(host.run, container) == "stopped container pod/gpus"
    assert mcl.restart_client(host.run, unit) == "started nvidia-dcgm.service"
    assert mcl.restart_client(host.run, container) == "pod/gpus: restarted by the kubelet"
    assert host.commands == [
        ["systemctl", "stop", "nvidia-dcgm.service"],
        ["modprobe", "-r", "nvidia_drm"],
        ["crictl", "stop", "0123456789abcdef"],
        ["systemctl", "start", "nvidia-dcgm.service"],
    ]


def test_a_failed_stop_raises_and_a_process_cannot_be_stopped() -> None:
    with pytest.raises(mgs.MigApplyError, match=r"systemctl stop nvidia-dcgm\.service' exited 1"):
        mcl.stop_client(
            Host(fail=("systemctl",)).run, mcl.Client("nvidia-dcgm", "nvidia-dcgm.service")
        )
    with pytest.raises(mgs.MigApplyError, match=r"cannot stop process python \(pid 9\)"):
        mcl.stop_client(Host().run, mcl.Client("process", "python", "9"))
