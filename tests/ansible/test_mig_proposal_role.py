"""Role ``mig`` with ``mig_proposal`` (what ``gpufleet mig apply --proposal`` passes): the
role maps the proposal's node names to the inventory's hosts, plans and carves those only,
and refuses a node that no host stands for. playbooks/mig.yml in check mode on this host,
a GPU simulator standing in for the node's GPUs."""

from __future__ import annotations

import io
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from gpufleet import runner
from gpufleet.commands.mig_apply import PROPOSAL_REFUSED_TASK
from gpufleet.exit import EXIT_FAILED, EXIT_OK
from tests.ansible.test_mig_apply import Sim

pytestmark = pytest.mark.ansible

LOCAL = {
    "ansible_connection": "local",
    "ansible_python_interpreter": sys.executable,
    "ansible_become_method": "su",
    "mig_persist": False,
    "mig_dra_driver": False,
    "mig_restart_dra_plugin": False,
    "mig_wait_resourceslices": False,
}
#: What report.mig_advice.host_vars gives a node whose two GPUs get one layout.
PROPOSED = {
    "mig_enabled": True,
    "mig_devices": [0, 1],
    "mig_layout": {"3g.71gb": 2},
    "mig_config": {},
    "mig_config_name": "",
    "mig_config_file": "",
}


def _run(tmp_path: Path, proposal: Mapping[str, Any]) -> tuple[runner.RunResult, list]:
    sim = Sim(tmp_path, count=2)
    hosts = {
        # the host of node node-a (its name differs from the node's)
        "local-a": {**LOCAL, "kubernetes_node_name": "node-a", "mig_nvidia_smi_path": str(sim.smi)},
        # a node the proposal does not name: it would fail at its first read
        "node-b": {**LOCAL, "mig_nvidia_smi_path": str(tmp_path / "no-nvidia-smi")},
    }
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}, sort_keys=False)
    )
    ran: list[tuple[str, str, str]] = []

    def on_event(event: Mapping[str, Any]) -> None:
        data = event.get("event_data") or {}
        if event.get("event", "").startswith("runner_on_") and data.get("host"):
            ran.append((str(event["event"]), str(data["host"]), str(data.get("task"))))

    result = runner.run_playbook(
        "mig",
        [str(inventory)],
        extravars={"mig_proposal": dict(proposal)},
        check=True,
        console=Console(file=io.StringIO()),
        on_event=on_event,
        artifact_root=tmp_path / "runs",
    )
    return result, ran


def test_the_proposal_plans_and_carves_the_nodes_it_names_only(tmp_path: Path) -> None:
    result, ran = _run(tmp_path, {"node-a": PROPOSED})
    assert result.status == EXIT_OK, result.progress.failures
    carve = "MIG | Carve the GPU instances"
    # planned (read-only) and carved (check mode): node-a, with the proposal's layout
    assert [(e, h) for e, h, t in ran if t == carve and e != "runner_on_start"] == [
        ("runner_on_ok", "local-a"),
        ("runner_on_ok", "local-a"),
    ]
    # node-b ended before anything was read from it: the role's entry and the proposal only
    assert {t for _, h, t in ran if h == "node-b"} == {
        "MIG | What each node's layout would change",
        "Validating arguments against arg spec 'plan' - Plan every GPU node at once, "
        "read-only, and group the nodes whose layout must change",
        "MIG | Proposal | Refuse nodes no host of the play stands for",
    }
    log = (result.artifact_dir / "stdout").read_text()
    assert "2 GPU(s), 4 MIG device(s); created 4, destroyed 0" in log


def test_a_node_no_host_stands_for_refuses_the_run(tmp_path: Path) -> None:
    result, _ = _run(tmp_path, {"node-a": PROPOSED, "node-z": PROPOSED})
    assert result.status == EXIT_FAILED
    refusals = [(h, m) for h, t, m in result.progress.failures if t == PROPOSAL_REFUSED_TASK]
    assert sorted(h for h, _ in refusals) == ["local-a", "node-b"]
    assert "mig_proposal names node(s) node-z that no host of group gpu_nodes" in refusals[0][1]
