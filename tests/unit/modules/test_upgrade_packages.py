"""Modules upgrade_packages and upgrade_node_state.

upgrade_packages: what dpkg reports read into versions and holds, which packages are to
install, the apt commands in their order, and the module run for real by
ansible-playbook on localhost in check mode (the real dpkg-query of this machine; the
source file is judged, not written). The install itself runs on the lab's nodes
(tests/integration/test_upgrade_lab.py), as does upgrade_node_state against a real
kube-apiserver; here its reading of the answers."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.modules import upgrade_packages as up

DPKG = "kubeadm 1.36.3-1.1 hi \nkubelet 1.37.2-1.1 ii \nkubectl 1.37.2-1.1 hi \ncri-tools  un \n"


@pytest.mark.unit
def test_dpkg_output_is_read_into_versions_and_holds() -> None:
    got = up.parse_installed(DPKG)
    assert got == {
        "kubeadm": {"version": "1.36.3-1.1", "status": "hi"},
        "kubelet": {"version": "1.37.2-1.1", "status": "ii"},
        "kubectl": {"version": "1.37.2-1.1", "status": "hi"},
    }


@pytest.mark.unit
def test_only_packages_not_installed_at_their_version_and_held_are_to_do() -> None:
    installed = up.parse_installed(DPKG)
    want = {
        "kubeadm": "1.37.2-1.1",
        "kubelet": "1.37.2-1.1",
        "kubectl": "1.37.2-1.1",
        "cri-tools": "1.37.0-1.1",
    }
    # kubeadm at the old version, kubelet not held, cri-tools not installed; kubectl is done
    assert up.todo(want, installed) == ["cri-tools", "kubeadm", "kubelet"]
    assert up.todo({"kubectl": "1.37.2-1.1"}, installed) == []


@pytest.mark.unit
def test_commands_refresh_one_source_then_unhold_install_hold() -> None:
    pkgs = {"kubelet": "1.37.2-1.1", "kubectl": "1.37.2-1.1"}
    cmds = up.commands(
        pkgs, ["kubectl", "kubelet"], "/etc/apt/sources.list.d/kubernetes.list", True
    )
    assert [c[:2] for c in cmds] == [
        ["apt-get", "update"],
        ["apt-mark", "unhold"],
        ["apt-get", "install"],
        ["apt-mark", "hold"],
    ]
    assert "Dir::Etc::sourcelist=/etc/apt/sources.list.d/kubernetes.list" in cmds[0]
    assert "Dir::Etc::sourceparts=-" in cmds[0]
    assert cmds[1][2:] == ["kubectl", "kubelet"] == cmds[3][2:]
    assert cmds[2][-2:] == ["kubectl=1.37.2-1.1", "kubelet=1.37.2-1.1"]
    assert "--allow-downgrades" not in cmds[2]
    assert "--allow-change-held-packages" in cmds[2]
    no_refresh = up.commands(pkgs, ["kubelet"], "/x.list", False)
    assert no_refresh[0][:2] == ["apt-mark", "unhold"]


# upgrade_node_state: the Node's cordon and its devices, read in one module run


def _server(objects: dict[str, object]):
    """get/list over ``objects`` (path -> object, or KubeError to raise), recording each
    request."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

    asked: list[str] = []

    def answer(path: str) -> object:
        asked.append(path)
        got = objects.get(path, vk.KubeError(404, f"{path} not found"))
        if isinstance(got, Exception):
            raise got
        return got

    return answer, (lambda path, query: answer(path)["items"]), asked


@pytest.mark.unit
def test_node_state_reads_cordon_and_devices_of_the_driver() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_state as ns

    get, lst, asked = _server(
        {
            "/api/v1/nodes/gpu-1": {
                "metadata": {"labels": {"gpufleet.io/gpu-path": "dra"}},
                "spec": {"unschedulable": True},
                "status": {"allocatable": {"nvidia.com/gpu": "0", "cpu": "8"}},
            },
            "/apis/resource.k8s.io/v1/resourceslices": {
                "items": [{"spec": {"devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}},
                          {"spec": {"devices": [{"name": "gpu-2"}]}}]
            },
        }
    )  # fmt: skip
    assert ns.node_state(get, lst, "gpu-1", "gpu.nvidia.com") == {
        "unschedulable": True,
        "allocatable": {"nvidia.com/gpu": "0", "cpu": "8"},
        "labels": {"gpufleet.io/gpu-path": "dra"},
        "devices": 3,
        "slices": 2,
    }
    assert asked == ["/api/v1/nodes/gpu-1", "/apis/resource.k8s.io/v1/resourceslices"]


@pytest.mark.unit
def test_node_state_falls_back_to_older_resource_versions_and_skips_slices_without_driver() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_state as ns

    get, lst, asked = _server(
        {
            "/api/v1/nodes/cp": {"spec": {}},
            "/apis/resource.k8s.io/v1beta1/resourceslices": {
                "items": [{"spec": {"devices": [{}]}}]
            },
        }
    )
    got = ns.node_state(get, lst, "cp", "gpu.nvidia.com", versions=("v1", "v1beta2", "v1beta1"))
    assert got == {
        "unschedulable": False,
        "allocatable": {},
        "labels": {},
        "devices": 1,
        "slices": 1,
    }
    assert asked[-1] == "/apis/resource.k8s.io/v1beta1/resourceslices"
    asked.clear()
    assert ns.node_state(get, lst, "cp", "")["slices"] == 0
    assert asked == ["/api/v1/nodes/cp"]


@pytest.mark.unit
def test_node_state_raises_for_a_missing_node_so_the_module_asks_again() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_state as ns
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

    get, lst, _ = _server({})
    with pytest.raises(vk.KubeError) as err:
        ns.node_state(get, lst, "gone/../x", "")
    assert err.value.status == 404
    assert "gone%2F..%2Fx" in err.value.message
