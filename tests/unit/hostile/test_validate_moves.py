"""Hostile ``gpu_path_moves`` (role variable ``validate_gpu_path_moves``): the module
``dra_validate`` refuses a value that is no mapping of an inventory group to a GPU path,
naming the variable, before the kubeconfig is read, in a message of bounded length; a
template is data, never run. ``gpufleet validate -e validate_gpu_path_moves=...`` passes the
value as data to the play and ends with exit 2 naming the variable when the play refuses it
(the play here: Ansible's own loading of the extra variables, the role's argument spec and
the module's task arguments templated as the role writes them)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.modules import dra_validate

from tests.harness.ansible_module import run_module
from tests.unit.ansible_vars import flat_tasks, load_extra_vars, trust_as_template
from tests.unit.hostile.inputs import assert_refused, invoke

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "validate"
NAMED = ("gpu_path_moves", "validate_gpu_path_moves")


def _marker_template(marker: Path) -> str:
    return "{{ lookup('pipe', 'touch " + str(marker) + "') }}"


# ------------------------------------------------------------------ the module

#: Option value -> what the refusal names; none reaches the kubeconfig.
MODULE_REFUSALS: dict[str, Any] = {
    "list": ["gpu_a"],
    "list-of-maps": [{"gpu_a": "dra"}],
    "int": 5,
    "zero": 0,
    "float": 1.5,
    "true": True,
    "false": False,
    "none": None,
    "empty-text": "",
    "text-not-a-mapping": "dra",
    "huge-text": "x" * 1_000_000,
    "template-text": "{{ lookup('pipe','id') }}",
    "key-value-bad-path": "gpu_a=gpu",
    "nested-map": {"gpu_a": {"path": "dra"}},
    "list-path": {"gpu_a": ["dra"]},
    "int-path": {"gpu_a": 1},
    "none-path": {"gpu_a": None},
    "path-case": {"gpu_a": "DRA"},
    "path-space": {"gpu_a": "dra "},
    "path-newline": {"gpu_a": "dra\n"},
    "huge-path": {"gpu_a": "d" * 1_000_000},
    "template-path": {"gpu_a": "{{ lookup('pipe','id') }}"},
    "template-key": {"{{ lookup('pipe','id') }}": "dra"},
    "key-newline": {"gpu_a\ndra": "dra"},
    "huge-key": {"k" * 1_000_000: "dra"},
    "int-key": {1: "dra"},
    "unknown-group": {"gpu_b": "dra"},
    "group-all": {"all": "dra"},
    "group-gpu-nodes-unlisted": {"gpu_nodes": "dra"},
}
#: Values Ansible converts to the mapping the module takes: they reach the kubeconfig.
MODULE_ACCEPTED: dict[str, Any] = {
    "mapping": {"gpu_a": "dra"},
    "key-value-text": "gpu_a=dra",
    "json-text": '{"gpu_a": "device-plugin"}',
    "empty-mapping": {},
}
BASE = {
    "kubeconfig": "/nonexistent/kubeconfig",
    "gpu_nodes": ["a"],
    "node_groups": {"gpu_a": ["a"], "gpu_path_dra": ["a"]},
}


@pytest.mark.parametrize("value", MODULE_REFUSALS.values(), ids=MODULE_REFUSALS.keys())
def test_the_module_refuses_a_hostile_value_before_the_kubeconfig(value: Any) -> None:
    result = run_module(dra_validate, {**BASE, "gpu_path_moves": value})
    msg = result["msg"]
    assert result["failed"] and any(n in msg for n in NAMED), msg
    assert "kubeconfig" not in msg and "Traceback" not in msg, msg
    assert len(msg) < 1000, len(msg)


@pytest.mark.parametrize("value", MODULE_ACCEPTED.values(), ids=MODULE_ACCEPTED.keys())
def test_the_module_takes_a_mapping_of_a_group_to_a_path(value: Any) -> None:
    result = run_module(dra_validate, {**BASE, "gpu_path_moves": value})
    assert "the kubeconfig /nonexistent/kubeconfig" in result["msg"], result["msg"]


def test_a_template_in_the_moves_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for value in (
        {"gpu_a": _marker_template(marker)},
        {_marker_template(marker): "dra"},
        _marker_template(marker),
    ):
        result = run_module(dra_validate, {**BASE, "gpu_path_moves": value})
        assert result["failed"], result
    assert not marker.exists()


# ------------------------------------------------------------------ gpufleet validate -e


def _role_yaml(name: str) -> Any:
    return yaml.safe_load((ROLE / name).read_text(encoding="utf-8"))


ROLE_SPEC = _role_yaml("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
TASKS = flat_tasks(_role_yaml("tasks/main.yml"))
#: The set_fact that reads each GPU host's node name once, then the module's task.
NAMES = next(t for t in TASKS if "validate__node_names" in t.get("ansible.builtin.set_fact", {}))
TASK = next(t for t in TASKS if "gpufleet.cluster.dra_validate" in t)
MODULE_TASK = TASK["name"]
#: The groups of the hostile inventory (conftest ``hostile``).
GROUPS = {
    "all": ["cp-1", "gpu-1"],
    "ungrouped": [],
    "gpu_nodes": ["gpu-1"],
    "kube_node": ["gpu-1"],
    "kube_control_plane": ["cp-1"],
    "k8s_cluster": ["cp-1", "gpu-1"],
}


def _play(variables: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(task, result) of the first task of the validate role that fails on
    ``variables`` (loaded as ansible-playbook loads ``-e``): the role's argument spec,
    then the module on the arguments the role templates (the kubeconfig left unread)."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    given = {k: v for k, v in variables.items() if k in ROLE_SPEC}
    checked = ArgumentSpecValidator(ROLE_SPEC).validate(given, validate_role_argument_spec=True)
    if checked.error_messages:
        msg = "Validation of arguments failed:\n" + "\n".join(checked.error_messages)
        return "Validating arguments against arg spec 'main'", {"failed": True, "msg": msg}
    defaults = _role_yaml("defaults/main.yml")
    hostvars = {h: {} for h in GROUPS["all"]}
    known = {
        "validate_gpu_path_moves": defaults["validate_gpu_path_moves"],
        **variables,
        "groups": GROUPS,
        "hostvars": hostvars,
    }
    names = NAMES["ansible.builtin.set_fact"]["validate__node_names"]
    known["validate__node_names"] = Templar(loader=DataLoader(), variables=known).template(
        trust_as_template(names)
    )
    templar = Templar(loader=DataLoader(), variables=known)
    args = TASK["gpufleet.cluster.dra_validate"]
    module_args = {
        key: templar.template(trust_as_template(args[key]))
        for key in ("gpu_nodes", "node_groups", "gpu_path_moves")
    }
    module_args["kubeconfig"] = "/nonexistent/kubeconfig"
    result = run_module(dra_validate, module_args)
    return (MODULE_TASK, result) if result.get("failed") else None


@pytest.fixture
def play(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """In place of ansible-runner: ``_play`` on the run's extra variables, its failure sent
    as the event ansible-playbook sends; keeps the variables of each run."""
    import ansible_runner

    seen: list[dict[str, Any]] = []

    def run(**kwargs: Any) -> Any:
        loaded = load_extra_vars(Path(kwargs["private_data_dir"]) / "env" / "extravars")
        seen.append(loaded)
        failed = _play(loaded)
        if failed is None:  # pragma: no cover - every case here is refused
            raise AssertionError("the play took the value")
        task, res = failed
        data = {"host": "localhost", "task": task, "res": res}
        kwargs["event_handler"]({"event": "runner_on_failed", "event_data": data})
        return SimpleNamespace(rc=2, status="failed", config=SimpleNamespace(ident="t"))

    monkeypatch.setattr(ansible_runner, "run", run)
    return seen


#: -e value -> the value as the play loads it.
CLI_VALUES: dict[str, tuple[str, Any]] = {
    "list": ("[gpu_nodes]", ["gpu_nodes"]),
    "int": ("5", 5),
    "null": ("null", None),
    "text": ("gpu_nodes", "gpu_nodes"),
    "nested": ("{gpu_nodes: {path: dra}}", {"gpu_nodes": {"path": "dra"}}),
    "bad-path": ("{gpu_nodes: gpu}", {"gpu_nodes": "gpu"}),
    "unknown-pool": ("{gpu_b: dra}", {"gpu_b": "dra"}),
    "template-text": ("{{ lookup('pipe','id') }}", "{{ lookup('pipe','id') }}"),
    "template-path": (
        "{gpu_nodes: \"{{ lookup('pipe','id') }}\"}",
        {"gpu_nodes": "{{ lookup('pipe','id') }}"},
    ),
    "key-newline": ('{"gpu_nodes\\ndra": dra}', {"gpu_nodes\ndra": "dra"}),
    "huge": ("x" * 100_000, "x" * 100_000),
}


@pytest.mark.parametrize("case", CLI_VALUES)
def test_validate_e_moves_is_data_and_a_refusal_exits_2_naming_it(
    hostile: dict[str, str], play: list[dict[str, Any]], case: str
) -> None:
    text, loaded = CLI_VALUES[case]
    argv = ["validate", "-i", hostile["inventory"], "-e", f"validate_gpu_path_moves={text}"]
    result = invoke(hostile, argv)
    assert_refused(result, NAMED)
    assert [run["validate_gpu_path_moves"] for run in play] == [loaded]
    assert len(result.output) < 5000, len(result.output)


def test_a_template_passed_with_e_is_never_run(
    hostile: dict[str, str], play: list[dict[str, Any]], tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    for text in (f'{{gpu_nodes: "{_marker_template(marker)}"}}', _marker_template(marker)):
        argv = ["validate", "-i", hostile["inventory"], "-e", f"validate_gpu_path_moves={text}"]
        assert_refused(invoke(hostile, argv), NAMED)
    assert len(play) == 2 and not marker.exists()


@pytest.mark.parametrize("text", ["[gpu_nodes", "{gpu_nodes: dra"])
def test_a_moves_value_left_open_is_refused_before_the_run(
    hostile: dict[str, str], text: str
) -> None:
    argv = ["validate", "-i", hostile["inventory"], "-e", f"validate_gpu_path_moves={text}"]
    assert_refused(invoke(hostile, argv), ("validate_gpu_path_moves",))
