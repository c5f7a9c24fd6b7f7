"""Templates inside data stay text in real ansible-playbook runs: a ``mig apply --proposal``
layout (role ``mig`` through gpufleet.runner), a mig-parted config file the role reads with
``lookup('file') | from_yaml``, and the lab inventory's variables (inventory/lab/lab_nodes.py
on a state file); and a value preflight refuses stops ``gpufleet up`` with exit 2. Each
template would ``touch`` a marker on the control host if it were templated."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from rich.console import Console

from gpufleet import runner
from gpufleet.cli import main
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED
from tests.ansible.test_mig_apply import Sim
from tests.ansible.test_mig_proposal_role import LOCAL, PROPOSED
from tests.unit.ansible_cli import ROOT, ansible
from tests.unit.ansible_vars import pipe_template

pytestmark = pytest.mark.ansible

CARVE = "MIG | Carve the GPU instances"


def _mig_run(tmp_path: Path, extravars: dict[str, Any]) -> runner.RunResult:
    sim = Sim(tmp_path, count=2)
    host = {**LOCAL, "kubernetes_node_name": "node-a", "mig_nvidia_smi_path": str(sim.smi)}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"local-a": host}}}}})
    )
    return runner.run_playbook(
        "mig",
        [str(inventory)],
        extravars=extravars,
        check=True,
        console=Console(file=io.StringIO(), width=300),
        artifact_root=tmp_path / "runs",
    )


def test_a_template_in_a_proposal_layout_reaches_the_module_as_text(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    template = pipe_template(marker)
    proposal = {"node-a": {**PROPOSED, "mig_layout": {"3g.71gb": template}}}
    result = _mig_run(tmp_path, {"mig_proposal": proposal})
    assert not marker.exists()
    # the module judges the literal text: a count that is not an integer
    (failure,) = [m for _, t, m in result.progress.failures if t == CARVE]
    assert "mig_layout['3g.71gb'] is {{ lookup('pipe', 'touch " in failure
    assert result.status == EXIT_FAILED


def test_a_template_in_a_mig_config_file_is_read_as_text(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    config = tmp_path / "mig.yaml"
    entry = {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.71gb": pipe_template(marker)}}
    config.write_text(yaml.safe_dump({"version": "v1", "mig-configs": {"evil": [entry]}}))
    result = _mig_run(
        tmp_path,
        {"mig_config_file": str(config), "mig_config_name": "evil", "mig_layout": {}},
    )
    assert not marker.exists()
    text = " ".join(m for _, _, m in result.progress.failures)
    assert "{{ lookup('pipe', 'touch " in text, result.progress.failures


def _lab(tmp_path: Path, state: dict[str, Any], name: str = "l") -> Any:
    labs = tmp_path / "labs" / name
    labs.mkdir(parents=True, exist_ok=True)
    (labs / "state.json").write_text(json.dumps(state))
    play = tmp_path / "show.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {"ansible.builtin.copy": {
                            "content": "{{ {'kubeconfig': hostvars['l-gpu-1'].gpufleet_kubeconfig,"
                                       " 'model': hostvars['l-gpu-1'].lab_node_gpu_model,"
                                       " 'nested': hostvars['l-gpu-1'].lab_nested} | to_json }}",
                            "dest": str(tmp_path / "seen.json"),
                        }},
                    ],
                }
            ]
        )
    )  # fmt: skip
    return ansible(
        "ansible-playbook",
        "-i",
        str(ROOT / "inventory" / "lab"),
        str(play),
        env_extra={"GPUFLEET_CACHE": str(tmp_path), "GPUFLEET_LAB_NAME": name},
    )


def test_templates_in_the_lab_state_reach_plays_as_text(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    template = pipe_template(marker)
    state = {
        "nodes": [
            {"name": "l-control-plane", "role": "control-plane", "ip": "10.0.0.10"},
            {"name": "l-gpu-1", "role": "gpu-worker", "ip": "10.0.0.11", "gpu_model": template},
        ],
        "vars": {"lab_kubeconfig": template, "lab_nested": {"a": [template, 1]}},
    }
    out = _lab(tmp_path, state)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not marker.exists()
    seen = json.loads((tmp_path / "seen.json").read_text())
    # gpufleet_kubeconfig is "{{ lab_kubeconfig }}" in inventory/lab/group_vars/all.yml
    assert seen == {"kubeconfig": template, "model": template, "nested": {"a": [template, 1]}}


def test_a_lab_node_name_with_a_template_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    state = {
        "nodes": [{"name": pipe_template(marker), "role": "gpu-worker", "ip": "10.0.0.11"}],
        "vars": {},
    }
    out = _lab(tmp_path, state)
    assert out.returncode != 0
    assert "is not a Kubernetes node name" in " ".join((out.stdout + out.stderr).split())
    assert not marker.exists()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("monitoring_prometheus_listen", "0.0.0.0:9090\nExecStartPre=/bin/sh -c id"),
        ("monitoring_scrape_interval", "30s\nremote_write: [{url: 'http://203.0.113.9/'}]"),
    ],
    ids=["unit-line", "remote-write"],
)
def test_preflight_refuses_a_config_injection_with_exit_2(
    tmp_path: Path, variable: str, value: str
) -> None:
    (tmp_path / "vars.yml").write_text(yaml.safe_dump({variable: value}))
    result = CliRunner().invoke(
        main,
        [
            "up",
            "-i",
            str(ROOT / "inventory" / "sample"),
            "--playbook",
            "preflight",
            "-e",
            f"@{tmp_path / 'vars.yml'}",
            "-e",
            f"validate_report_file={tmp_path / 'report.json'}",
        ],
        env={
            "GPUFLEET_CACHE": str(tmp_path),
            "COLUMNS": "400",
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        },
    )
    assert result.exit_code == EXIT_CANNOT_RUN, result.output
    flat = " ".join(result.output.split())
    assert f"[config-value] {variable}=" in flat and "fix: write" in flat, result.output


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("nvidia_container_toolkit_repo_url", "https://r.example/stable\ngpgcheck=0"),
        ("nvidia_container_toolkit_repo_key_url", "https://r.example/key [trusted=yes]"),
    ],
    ids=["repo-gpgcheck", "key-url-space"],
)
def test_the_toolkit_role_refuses_a_repository_injection_first(
    tmp_path: Path, variable: str, value: str
) -> None:
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[gpu_nodes]\nnode1 ansible_connection=local\n")
    play = tmp_path / "play.yml"
    play.write_text(
        yaml.safe_dump(
            [{"hosts": "gpu_nodes", "gather_facts": False,
              "roles": [{"role": "gpufleet.cluster.nvidia_container_toolkit"}]}]
        )
    )  # fmt: skip
    ran: list[str] = []
    result = runner.run_playbook(
        str(play),
        [str(inventory)],
        extravars={variable: value, "ansible_python_interpreter": sys.executable},
        check=True,
        console=Console(file=io.StringIO(), width=300),
        on_event=lambda e: ran.append(str((e.get("event_data") or {}).get("task") or "")),
        artifact_root=tmp_path / "runs",
    )
    assert result.status == EXIT_CANNOT_RUN
    ((_, task, msg),) = result.progress.failures
    assert task == "Toolkit | Refuse values the files it writes cannot hold"
    assert msg.startswith(f"{variable}=") and "fix: write" in msg
    # nothing ran on the node before the refusal (the role's argument check aside)
    assert not any(t.startswith("Toolkit | Read") for t in ran)
