"""playbooks/validate.yml hands module ``dra_validate`` the node name of each GPU host:
``kubernetes_node_name`` where the host has one (a host variable, or a group variable that
is a template), else the inventory name; in the order of group ``gpu_nodes``, and per
group that holds GPU hosts. The API server named refuses connections: the module fails at
once, with the arguments it was given in its result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.ansible_cli import ROOT, ansible

pytestmark = pytest.mark.ansible

INVENTORY = """\
[gpu_nodes]
gpu-b kubernetes_node_name=node-b.example
gpu-a
gpu-c

[gpu_h200]
gpu-c
gpu-b

[gpu_h200:vars]
kubernetes_node_name="{{ inventory_hostname }}.h200"

[all:vars]
ansible_connection=local
"""

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: refusing
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: not-a-secret}
contexts:
- name: refusing
  context: {cluster: refusing, user: u}
current-context: refusing
"""


def validate(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """playbooks/validate.yml on ``INVENTORY`` against the refusing server, ``argv`` more
    for ansible-playbook: its JSON output (it exits 2: the checks cannot read the cluster)."""
    (tmp_path / "hosts.ini").write_text(INVENTORY)
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    out = ansible(
        "ansible-playbook",
        "-i",
        str(tmp_path / "hosts.ini"),
        "-e",
        f"validate_kubeconfig={tmp_path / 'kubeconfig'}",
        *argv,
        str(ROOT / "playbooks" / "validate.yml"),
        env_extra={"ANSIBLE_STDOUT_CALLBACK": "json", **(env or {})},
    )
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(out.stdout)


def module_args(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The arguments the judge's task gave the module; ``argv`` more for ansible-playbook."""
    run = validate(tmp_path, *argv, env=env)
    (result,) = [
        t["hosts"]["localhost"]
        for play in run["plays"]
        for t in play["tasks"]
        if t["task"]["name"].endswith("Validate | Run the checks")
    ]
    assert result["failed"] and "cannot be reached" in result["msg"], result["msg"]
    return result["invocation"]["module_args"]


def test_each_gpu_host_is_named_as_its_node(tmp_path: Path) -> None:
    args = module_args(tmp_path)
    # host variable over group variable; a group variable's template of the host; none
    assert args["gpu_nodes"] == ["node-b.example", "gpu-a", "gpu-c.h200"]
    assert args["node_groups"] == {"gpu_h200": ["gpu-c.h200", "node-b.example"]}


def test_check_mode_judges_the_background_listing_and_removes_its_directory(
    tmp_path: Path,
) -> None:
    # validate is read-only, so --check runs it whole: the listing's private directory is
    # made (and removed) in check mode too, or the listing's task has no path to write to
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    args = module_args(tmp_path, "--check", env={"TMPDIR": str(scratch)})
    listing = Path(args["listing_file"])
    assert listing.name == "listing" and listing.parent.parent == scratch, listing
    assert args["gpu_nodes"] == ["node-b.example", "gpu-a", "gpu-c.h200"]
    assert list(scratch.iterdir()) == []


def test_a_bad_variable_of_the_checks_stops_the_run_before_the_listing(tmp_path: Path) -> None:
    # judged by the list entry point, before the listing starts and any node is read: no
    # listing to remove, no background process left
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = validate(tmp_path, "-e", "validate_pending_threshold=abc", env={"TMPDIR": str(scratch)})
    failed = [
        (t["task"]["name"], res.get("msg", ""))
        for play in run["plays"]
        for t in play["tasks"]
        for res in t["hosts"].values()
        if res.get("failed")
    ]
    ((task, msg),) = failed
    assert "Validating arguments against arg spec 'list'" in task, failed
    assert "validate_pending_threshold" in str(msg), msg
    ran = [t["task"]["name"] for play in run["plays"] for t in play["tasks"]]
    assert not any("Validate | List the cluster in the background" in name for name in ran), ran
    assert list(scratch.iterdir()) == []
