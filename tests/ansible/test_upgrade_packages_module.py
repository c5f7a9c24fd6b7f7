"""Modules upgrade_packages and upgrade_node_state.

upgrade_packages: what dpkg reports read into versions and holds, which packages are to
install, the apt commands in their order, and the module run for real by
ansible-playbook on localhost in check mode (the real dpkg-query of this machine; the
source file is judged, not written). The install itself runs on the lab's nodes
(tests/integration/test_upgrade_lab.py), as does upgrade_node_state against a real
kube-apiserver; here its reading of the answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ansible.test_config_gate_modules import play

DPKG = "kubeadm 1.36.3-1.1 hi \nkubelet 1.37.2-1.1 ii \nkubectl 1.37.2-1.1 hi \ncri-tools  un \n"


@pytest.mark.ansible
def test_check_mode_names_what_it_would_do_and_touches_nothing(tmp_path: Path) -> None:
    source = tmp_path / "kubernetes.list"
    source.write_text("deb https://pkgs.k8s.io/core:/stable:/v1.36/deb/ /\n")
    line = "deb https://pkgs.k8s.io/core:/stable:/v1.37/deb/ /"
    (res,) = play(
        tmp_path,
        "packages-check",
        [
            {
                "gpufleet.cluster.upgrade_packages": {
                    "packages": {"gpufleet-no-such-package": "1.0-1"},
                    "source_line": line,
                    "source_list": str(source),
                    "backup_dir": str(tmp_path / "backups"),
                }
            }
        ],
        check=True,
    )
    assert not res["_failed"], res
    assert res["changed"] and res["source_changed"]
    assert res["todo"] == ["gpufleet-no-such-package"]
    assert res["installed"] == {}
    assert res["diff"]["after"] == line + "\n"
    assert source.read_text().startswith("deb https://pkgs.k8s.io/core:/stable:/v1.36/")
    assert not (tmp_path / "backups").exists()


@pytest.mark.ansible
@pytest.mark.parametrize(
    "packages, source_line, says",
    [
        ({"kubeadm": ""}, "", "exact version"),
        ({"kubeadm": "1.37.2 -1.1"}, "", "without spaces"),
        ({"kubeadm": "1.37.2-1.1"}, "deb a /\ndeb b /", "more than one line"),
    ],
    ids=["no-version", "space", "two-lines"],
)
def test_bad_input_is_refused_before_anything_runs(
    tmp_path: Path, packages: dict, source_line: str, says: str
) -> None:
    source = tmp_path / "kubernetes.list"
    (res,) = play(
        tmp_path,
        "packages-bad",
        [
            {
                "gpufleet.cluster.upgrade_packages": {
                    "packages": packages,
                    "source_line": source_line,
                    "source_list": str(source),
                }
            }
        ],
    )
    assert res["_failed"] and says in res["msg"], res
    assert not source.exists()


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
