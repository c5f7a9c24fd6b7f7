"""``gpufleet migrate`` and the validation around a move (gpufleet/commands/migrate.py,
gpufleet/commands/_validate.py): the validation after the move judges the pool on its new
path (``validate_gpu_path_moves``), the one before on the path the inventory declares, or
on the one path every node advertises now when that differs (a pool moved back before its
inventory group was moved); the variable reaches the playbook as data and the validate role
hands it to the module."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import run as vrun
from click.testing import CliRunner
from rich.console import Console

from gpufleet import runner
from gpufleet.cli import main
from gpufleet.commands import _validate as validate_cmd
from gpufleet.commands import migrate as migrate_cmd
from tests.unit.ansible_vars import flat_tasks, load_extra_vars, trust_as_template

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
PLAN = {
    "pool": "gpu_a100",
    "from": "device-plugin",
    "to": "dra",
    "nodes": [{"batch": 1, "host": "gpu-1", "node": "gpu-1", "advertises": "device-plugin",
               "pods": []}],
    "batches": [["gpu-1"]],
    "evicted_pods": 0,
    "served_by": {},
    "blocked": False,
}  # fmt: skip


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """In place of the runs of playbooks/migrate.yml a plan and a move that pass; in place
    of playbooks/validate.yml a pass. Keeps ``(when, extravars)`` of each validation."""
    seen: list[tuple[str, Any]] = []

    def run(inventory: Any, extravars: Any, console: Any) -> tuple[int, Any]:
        return 0, migrate_cmd.MigrateRun(plan=dict(PLAN))

    def validate(inventory: Any, job: str, when: str, console: Any, **kwargs: Any) -> int:
        assert job == "migrate"
        seen.append((when, kwargs.get("extravars")))
        return 0

    monkeypatch.setattr(migrate_cmd, "_run", run)
    monkeypatch.setattr(migrate_cmd, "run_validate", validate)
    return seen


def test_validate_after_the_move_judges_the_pool_on_its_new_path(
    validations: list[tuple[str, Any]],
) -> None:
    argv = ["migrate", "-i", "hosts.yml", "--pool", "gpu_a100", "--to", "dra"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    assert validations == [
        ("before", None),
        ("after", {"validate_gpu_path_moves": {"gpu_a100": "dra"}}),
    ]
    said = " ".join(result.output.split())
    assert "Next: make group gpu_a100 a child of gpu_path_dra in the inventory" in said


@pytest.mark.parametrize(
    "advertised, before",
    [
        (["dra", "dra"], {"validate_gpu_path_moves": {"gpu_a100": "dra"}}),
        (["dra", "device-plugin"], None),  # no one path: judged against the inventory
        (["none", "none"], None),
        (["device-plugin", "device-plugin"], None),  # what the inventory declares
    ],
)
def test_validate_before_a_move_back_judges_the_pool_on_the_path_it_advertises(
    monkeypatch: pytest.MonkeyPatch,
    validations: list[tuple[str, Any]],
    advertised: list[str],
    before: Any,
) -> None:
    nodes = [
        {**PLAN["nodes"][0], "node": f"gpu-{i}", "advertises": a} for i, a in enumerate(advertised)
    ]
    plan = {**PLAN, "to": "device-plugin", "nodes": nodes}
    monkeypatch.setattr(migrate_cmd, "_run", lambda *a: (0, migrate_cmd.MigrateRun(plan=plan)))
    argv = ["migrate", "-i", "hosts.yml", "--pool", "gpu_a100", "--to", "device-plugin"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    assert validations == [
        ("before", before),
        ("after", {"validate_gpu_path_moves": {"gpu_a100": "device-plugin"}}),
    ]
    said = " ".join(result.output.split())
    assert ("validate before the move judges the pool on dra" in said) == bool(before), said
    assert "pool gpu_a100 moved to device-plugin, the path the inventory declares." in said


def test_a_move_to_the_path_the_inventory_declares_asks_no_inventory_change(
    monkeypatch: pytest.MonkeyPatch, validations: list[tuple[str, Any]]
) -> None:
    plan = {**PLAN, "from": "dra", "nodes": [{**PLAN["nodes"][0], "advertises": "device-plugin"}]}
    monkeypatch.setattr(migrate_cmd, "_run", lambda *a: (0, migrate_cmd.MigrateRun(plan=plan)))
    argv = ["migrate", "-i", "hosts.yml", "--pool", "gpu_a100", "--to", "dra"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "pool gpu_a100 moved to dra, the path the inventory declares." in said
    assert "Next:" not in said
    assert validations[0] == (
        "before",
        {"validate_gpu_path_moves": {"gpu_a100": "device-plugin"}},
    )


def test_without_validate_no_move_is_passed_anywhere(validations: list[tuple[str, Any]]) -> None:
    argv = ["migrate", "-i", "hosts.yml", "--pool", "gpu_a100", "--to", "dra", "--no-validate"]
    assert CliRunner().invoke(main, argv).exit_code == 0
    assert validations == []


def test_the_moves_reach_the_playbook_as_data_beside_the_report_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path / "cache"))
    written: list[Path] = []

    class Result:
        status = 0

    def run_playbook(name: str, inventory: Any, *, extravars: Any, console: Any) -> Result:
        assert name == "validate"
        written.append(runner.write_extravars(tmp_path / "private", extravars))
        return Result()

    monkeypatch.setattr(runner, "run_playbook", run_playbook)
    moves = {"validate_gpu_path_moves": {"gpu_a100": "{{ lookup('env', 'HOME') }}"}}
    with open(tmp_path / "out", "w") as sink:
        validate_cmd.run_validate(
            ["hosts.yml"], "migrate", "after", Console(file=sink), extravars=moves
        )
    doc = json.loads(written[0].read_text())
    assert doc["validate_gpu_path_moves"] == {
        "gpu_a100": {"__ansible_unsafe": "{{ lookup('env', 'HOME') }}"}
    }
    assert doc["validate_report_file"]["__ansible_unsafe"].endswith("validate-migrate-after.json")


def test_the_role_hands_the_moves_and_the_moved_gpu_group_to_the_module(tmp_path: Path) -> None:
    """The GPU group itself (``gpu_nodes``, left out of node_groups otherwise) is a group
    the module knows once a move names it, so ``gpufleet migrate --pool gpu_nodes`` is
    judged too."""
    tasks = flat_tasks(
        yaml.safe_load((ROOT / "roles" / "validate" / "tasks" / "main.yml").read_text())
    )
    names = next(
        t["ansible.builtin.set_fact"]["validate__node_names"]
        for t in tasks
        if "validate__node_names" in t.get("ansible.builtin.set_fact", {})
    )
    args = next(t for t in tasks if "gpufleet.cluster.dra_validate" in t)[
        "gpufleet.cluster.dra_validate"
    ]
    groups = {
        "all": ["cp-1", "gpu-1", "gpu-2"],
        "ungrouped": [],
        "gpu_nodes": ["gpu-1", "gpu-2"],
        "gpu_a100": ["gpu-1"],
        "gpu_path_device_plugin": ["gpu-1", "gpu-2"],
    }
    hostvars = {h: {"kubernetes_node_name": f"node-{h}"} for h in groups["all"]}

    def module_args(moves: dict[str, str]) -> dict[str, Any]:
        runner.write_extravars(tmp_path, {"validate_gpu_path_moves": moves})
        loaded = load_extra_vars(tmp_path / "env" / "extravars")
        variables = {**loaded, "groups": groups, "hostvars": hostvars}
        variables["validate__node_names"] = Templar(
            loader=DataLoader(), variables=variables
        ).template(trust_as_template(names))
        templar = Templar(loader=DataLoader(), variables=variables)
        return {
            key: templar.template(trust_as_template(args[key]))
            for key in ("gpu_nodes", "node_groups", "gpu_path_moves")
        }

    plain = module_args({})
    assert sorted(plain["node_groups"]) == ["gpu_a100", "gpu_path_device_plugin"]
    moved = module_args({"gpu_nodes": "dra"})
    assert moved["node_groups"]["gpu_nodes"] == ["node-gpu-1", "node-gpu-2"]
    assert vrun.gpu_path_moves(moved) == {"gpu_nodes": "dra"}
    assert vrun.gpu_path_moves(module_args({"gpu_a100": "dra"})) == {"gpu_a100": "dra"}
