"""Exit codes of refusals: input that cannot run exits 2 with a clear message and no
traceback; a failed check exits 1. Covers ``report --prometheus`` against a Prometheus
that answers garbage, ``mig apply --proposal`` with members of the wrong type, outputs
that cannot be written (``/dev/full``), the Kueue preflight's ``kueue_node_gpu_count``, and
a playbook run that ends on an input refusal (preflight, a role's argument spec)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import kueue as pk
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import ERROR
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import activity as fa
from click.testing import CliRunner, Result

from gpufleet import runner
from gpufleet.cli import main
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK
from tests.integration.test_hostile_input_servers import write_kubeconfig
from tests.unit.hostile import api_server
from tests.unit.hostile.inputs import assert_refused
from tests.unit.hostile.raw_server import Script, http_answer, serve

pytestmark = pytest.mark.unit

# ------------------------------------------------------------------ report --prometheus

VECTOR = {"status": "success", "data": {"resultType": "vector", "result": []}}


def _json(doc: Any, status: int = 200) -> bytes:
    return http_answer(json.dumps(doc).encode(), status=status)


#: name -> raw answer of a Prometheus that answers something else than its API.
BAD_PROMETHEUS = {
    "not-json": http_answer(b"this is not json"),
    "json-a-list": _json([1, 2, 3]),
    "json-a-string": _json("success"),
    "status-error": _json({"status": "error", "errorType": "bad_data", "error": "parse error"}),
    "status-missing": _json({"data": VECTOR["data"]}),
    "data-a-list": _json({"status": "success", "data": []}),
    "result-a-number": _json({"status": "success", "data": {"resultType": "vector", "result": 7}}),
    "result-a-mapping": _json(
        {"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}}
    ),
    "matrix-not-vector": _json({"status": "success", "data": {"resultType": "matrix"}}),
    "html-login-page": http_answer(b"<html><body>login</body></html>", "text/html"),
    "text-plain": http_answer(json.dumps(VECTOR).encode(), "text/plain"),
    "truncated": http_answer(json.dumps(VECTOR).encode())[:-20],
    "http-500-with-error": _json({"status": "error", "error": "overloaded"}, status=500),
    "http-401": http_answer(b"Unauthorized", "text/plain", 401),
    "redirect": b"HTTP/1.1 302 Found\r\nLocation: http://elsewhere/\r\nContent-Length: 0\r\n\r\n",
    "not-http": b"SSH-2.0-OpenSSH_9.6\r\n",
    "closes-at-once": b"",
    "deep-json": http_answer(b"[" * 50_000 + b"]" * 50_000),
    "duplicate-names": http_answer(b'{"status": "success", "status": "error"}'),
    "bad-utf8": http_answer(b'{"status": "\xff\xfe"}'),
}


def _report(kubeconfig: Path, *extra: str) -> Result:
    argv = ["report", "--kubeconfig", str(kubeconfig), *extra]
    return CliRunner().invoke(main, argv, env={"COLUMNS": "2000", "KUBECONFIG": ""})


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    with api_server.serve(api_server.answers()) as (url, _):
        yield write_kubeconfig(tmp_path / "kubeconfig", url)


@pytest.mark.parametrize("name", list(BAD_PROMETHEUS))
def test_report_refuses_a_prometheus_answer_that_is_not_the_api(
    cluster: Path, tmp_path: Path, name: str
) -> None:
    out = tmp_path / "report.json"
    with serve(Script(BAD_PROMETHEUS[name])) as prometheus:
        result = _report(cluster, "--prometheus", prometheus, "--json", str(out))
    assert_refused(result, ("--prometheus",))
    assert "fix:" in result.output or "fix" in result.output.lower()
    assert not out.exists()


def test_report_refuses_a_prometheus_answer_above_its_cap(
    cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fa, "MAX_ANSWER_BYTES", 1000)
    with serve(Script(_json({**VECTOR, "pad": "x" * 5000}))) as prometheus:
        result = _report(cluster, "--prometheus", prometheus)
    assert_refused(result, ("--prometheus",))
    assert "more than 1,000 bytes" in result.output


def test_report_reads_a_well_formed_prometheus_answer(cluster: Path) -> None:
    with serve(Script(_json(VECTOR))) as prometheus:
        result = _report(cluster, "--prometheus", prometheus)
    assert result.exit_code == EXIT_OK, result.output


# ------------------------------------------------------------------ mig apply --proposal

CHANGE: dict[str, Any] = {
    "node": "gpu-1",
    "gpu": 0,
    "uuid": "GPU-1",
    "current": {"mig_enabled": True, "layout": {"7g.141gb": 1}, "placements": [
        {"profile": "7g.141gb", "start": 0, "size": 8}], "claim": None},
    "proposed": {"layout": {"1g.18gb": 7}, "placements": [
        {"profile": "1g.18gb", "start": i, "size": 1} for i in range(7)]},
}  # fmt: skip


def _with(path: str, value: Any) -> dict[str, Any]:
    change = copy.deepcopy(CHANGE)
    *parents, last = path.split(".")
    node: Any = change
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return change


#: name -> (the change, what the refusal names).
BAD_CHANGES = {
    "gpu-a-string": (_with("gpu", "0"), "changes[0].gpu="),
    "gpu-a-float": (_with("gpu", 0.0), "changes[0].gpu="),
    "gpu-a-bool": (_with("gpu", True), "changes[0].gpu="),
    "gpu-null": (_with("gpu", None), "changes[0].gpu="),
    "gpu-negative": (_with("gpu", -1), "changes[0].gpu="),
    "gpu-huge": (_with("gpu", 10**12), "changes[0].gpu="),
    "node-a-list": (_with("node", ["gpu-1"]), "changes[0].node="),
    "node-a-number": (_with("node", 1), "changes[0].node="),
    "node-trailing-newline": (_with("node", "gpu-1\n"), "changes[0].node="),
    "node-upper-case": (_with("node", "GPU-1"), "changes[0].node="),
    "uuid-a-mapping": (_with("uuid", {"a": 1}), "changes[0].uuid"),
    "current-a-list": (_with("current", []), "changes[0].current"),
    "current-null": (_with("current", None), "changes[0].current"),
    "mig-enabled-a-string": (_with("current.mig_enabled", "yes"), "current.mig_enabled"),
    "placements-a-mapping": (_with("current.placements", {"a": 1}), "current.placements"),
    "placement-a-string": (_with("current.placements.0", "7g"), "current.placements[0]"),
    "start-a-string": (_with("current.placements.0.start", "0"), "placements[0].start"),
    "size-a-list": (_with("current.placements.0.size", [8]), "placements[0].size"),
    "proposed-a-string": (_with("proposed", "1g.18gb"), "changes[0].proposed"),
    "layout-a-list": (_with("proposed.layout", [["1g.18gb", 7]]), "proposed.layout"),
    "layout-count-a-string": (_with("proposed.layout", {"1g.18gb": "7"}), "proposed.layout"),
    "layout-count-huge": (_with("proposed.layout", {"1g.18gb": 10**9}), "proposed.layout"),
    "proposed-placement-null": (_with("proposed.placements.0", None), "proposed.placements[0]"),
    "profile-a-number": (_with("proposed.placements.0.profile", 1), "placements[0].profile"),
}


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.ini"
    path.write_text("[gpu_nodes]\ngpu-1 ansible_host=192.0.2.2\n")
    return path


def _apply(inventory: Path, proposal: Path) -> Result:
    argv = ["mig", "apply", "-i", str(inventory), "--proposal", str(proposal)]
    return CliRunner().invoke(main, argv, env={"KUBECONFIG": ""})


@pytest.mark.parametrize("name", list(BAD_CHANGES))
def test_mig_apply_refuses_a_proposal_member_of_the_wrong_type(
    tmp_path: Path, inventory: Path, name: str
) -> None:
    change, named = BAD_CHANGES[name]
    proposal = tmp_path / "proposal.json"
    proposal.write_text(json.dumps({"kind": "gpufleet-mig-proposal", "changes": [change]}))
    result = _apply(inventory, proposal)
    assert_refused(result, (named,))
    assert "stale" not in result.output


def test_mig_apply_refuses_a_gpu_changed_twice(tmp_path: Path, inventory: Path) -> None:
    proposal = tmp_path / "proposal.json"
    doc = {"kind": "gpufleet-mig-proposal", "changes": [CHANGE, CHANGE]}
    proposal.write_text(json.dumps(doc))
    assert_refused(_apply(inventory, proposal), ("changes[1]", "changed twice"))


# ------------------------------------------------------------------ outputs: /dev/full

FULL_OUTPUTS = [
    ("validate", "--json"),
    ("validate", "--junit"),
    ("validate", "--markdown"),
    ("report", "--metrics"),
    ("report", "--html"),
    ("mig advise", "--json"),
]


@pytest.mark.parametrize(("command", "option"), FULL_OUTPUTS)
def test_an_output_on_dev_full_is_refused_before_anything_runs(command: str, option: str) -> None:
    result = CliRunner().invoke(
        main, [*command.split(), option, "/dev/full"], env={"KUBECONFIG": ""}
    )
    assert_refused(result, (option,))
    assert "character device" in result.output


def test_two_outputs_on_standard_output_are_refused() -> None:
    result = CliRunner().invoke(main, ["validate", "--json", "-", "--junit", "-"])
    assert_refused(result, ("--json and --junit",))


# ------------------------------------------------------------------ kueue_node_gpu_count


def _hosts(count: Any) -> dict[str, Any]:
    variables = {"site_kueue": True, "kueue_node_gpu_count": count}
    return {"gpu-1": {"variables": variables, "groups": ["gpu_nodes"]}}


@pytest.mark.parametrize(
    "count",
    [1e9, 10**9, 33, 0, -1, "eight", True, [8], {"a": 8}, None, 8.5, "9" * 40],
    ids=lambda c: f"{type(c).__name__}-{str(c)[:12]}",
)
def test_kueue_node_gpu_count_out_of_the_domain_is_an_error_naming_the_limit(count: Any) -> None:
    problems = pk.kueue_problems(_hosts(count))
    assert [p.variable for p in problems] == ["kueue_node_gpu_count"]
    assert problems[0].severity == ERROR
    assert str(pk.MAX_NODE_GPUS) in problems[0].message + problems[0].fix


@pytest.mark.parametrize("count", [1, 8, 32, "16"])
def test_kueue_node_gpu_count_within_the_domain_is_read(count: Any) -> None:
    assert pk.node_gpu_count({"kueue_node_gpu_count": count}) == (int(count), None)


# ------------------------------------------------------------------ runs ending on a refusal


def _failed(task: str) -> dict[str, Any]:
    data = {"host": "cp-1", "task": task, "res": {"msg": "kueue_teams: bad"}}
    return {"event": "runner_on_failed", "event_data": data}


@pytest.mark.parametrize(
    ("task", "status"),
    [
        ("Preflight | Stop before any host is changed, listing every problem", EXIT_CANNOT_RUN),
        ("Validating arguments against arg spec 'main' - Kueue", EXIT_CANNOT_RUN),
        ("Kueue | Refuse the variables, naming them", EXIT_CANNOT_RUN),
        ("DRA gates | Refuse the request, naming the variables", EXIT_CANNOT_RUN),
        ("Kubeadm | Refuse the settings, naming the variable", EXIT_CANNOT_RUN),
        ("Upgrade | Input | Refuse a missing target", EXIT_CANNOT_RUN),
        ("Kubeadm | Join the node", EXIT_FAILED),
        ("Claims | Refuse a template that exists with another spec", EXIT_FAILED),
        ("Toolkit | Refuse a node without nvidia-cdi-hook", EXIT_FAILED),
    ],
    ids=[
        "preflight-stop",
        "argument-spec",
        "kueue-variables",
        "dra-gates-request",
        "kubeadm-settings",
        "upgrade-input",
        "a-host-failed",
        "cluster-state-claims",
        "node-state-toolkit",
    ],
)
def test_a_run_that_ends_on_an_input_refusal_exits_2(task: str, status: int) -> None:
    progress = runner.RunProgress()
    progress.feed(_failed(task))
    assert progress.exit_status(2) == status


# ------------------------------------------------------------------ no space left on device


@pytest.mark.parametrize("option", ["--json", "--junit", "--markdown"])
def test_a_validate_output_that_runs_out_of_space_is_exit_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    import errno

    from gpufleet.commands import _output
    from gpufleet.commands import validate as validate_command

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_output.os, "write", full)
    target = str(tmp_path / "out")
    paths = {"--json": None, "--junit": None, "--markdown": None, option: target}
    report = {"checks": [], "summary": {"failed": 0}, "meta": {}}
    with pytest.raises(_output.OutputError) as info:
        validate_command.write_outputs(
            report, paths["--json"], paths["--junit"], paths["--markdown"]
        )
    assert info.value.exit_code == EXIT_CANNOT_RUN
    assert f"{option} {target}" in info.value.message
    assert "No space left on device" in info.value.message
