"""Hostile input for every ``gpufleet`` command (upgrade aside) and for the input parsing
the modules share. A CLI case must be refused before anything runs (ansible-runner, podman
and the API server are replaced by tripwires): exit 2, no traceback, and the message names
the option, the variable or the file. A module_utils case must raise the module's own error
(never RecursionError, UnicodeDecodeError, MemoryError, TypeError ...) naming its input.

The fixtures of these tests: the hostile files on disk (``hostile``) and the tripwires that
fail a test whose input reached ansible-runner, podman or the lab. (``__init__.py`` stays
empty: ansible-test's ``empty-init``.)"""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.lab import cluster
from tests.unit.hostile.inputs import (
    CONTENTS,
    DEEP,
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Kind -> path of a hostile input file, plus ``inventory`` and ``kubeconfig`` (valid
    ones, to reach the option under test)."""
    root = tmp_path_factory.mktemp("hostile")
    paths = {}
    for name, data in CONTENTS.items():
        path = root / f"{name}.yaml"
        path.write_bytes(data)
        paths[name] = str(path)
    (root / "a-directory").mkdir()
    paths["directory"] = str(root / "a-directory")
    paths["missing"] = str(root / "no-such-file.yaml")
    paths["dev-zero"] = "/dev/zero"
    inv = root / "inventory.ini"
    inv.write_text(
        "[kube_control_plane]\ncp-1 ansible_host=192.0.2.1\n"
        "[kube_node]\ngpu-1 ansible_host=192.0.2.2\n"
        "[gpu_nodes]\ngpu-1\n"
        "[k8s_cluster:children]\nkube_control_plane\nkube_node\n"
    )
    paths["inventory"] = str(inv)
    kc = root / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://192.0.2.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    paths["kubeconfig"] = str(kc)
    # inventories
    inv_dir = root / "inventories"
    inv_dir.mkdir()
    for name, text in {
        "broken.yml": "all:\n  hosts: [\n",
        "empty.ini": "",
        "groupless.ini": "node-1\nnode-2\n",
        "deep.yml": "all: " + "[" * DEEP + "]" * DEEP + "\n",
        "toml.toml": "[all\n",
    }.items():
        (inv_dir / name).write_text(text)
    (inv_dir / "binary.ini").write_bytes(CONTENTS["binary"])
    (inv_dir / "latin1.ini").write_bytes(b"[gpu_nodes]\nn\xe9ud-1\n")
    (inv_dir / "empty-dir").mkdir()
    (inv_dir / "dir-with-broken").mkdir()
    (inv_dir / "dir-with-broken" / "hosts.yml").write_text("all:\n  children: {a: [\n")
    paths["inventories"] = str(inv_dir)
    (root / "cache").mkdir()
    paths["cache"] = str(root / "cache")
    return paths


@pytest.fixture(autouse=True)
def tripwires(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever reaches ansible-runner, podman or the lab's build has slipped through."""
    import ansible_runner

    def tripped(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"hostile input reached a run: {args} {kwargs}")

    monkeypatch.setattr(ansible_runner, "run", tripped)
    monkeypatch.setattr(cluster.subprocess, "run", tripped)  # the lab check: podman inspect
    monkeypatch.setattr(cluster, "up", tripped)
    monkeypatch.setattr(cluster, "down", tripped)
    monkeypatch.setattr(cluster, "_container_state", tripped)
    monkeypatch.setattr(cluster, "_kubernetes_nodes", tripped)
