"""``gpufleet mig apply --proposal`` and ``gpufleet mig advise``: input refused before
anything runs (exit 2, naming the option, the value and a fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet import runner
from gpufleet.cli import main
from gpufleet.commands import mig_apply

pytestmark = pytest.mark.unit


def run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, env={"COLUMNS": "200"})
    return result.exit_code, result.output


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  children:\n    gpu_nodes:\n      hosts:\n        gpu-a: {}\n")
    return path


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{", "--proposal"),
        ('{"kind": "something-else"}', "is not a MIG proposal"),
        ('{"kind": "gpufleet-mig-proposal", "changes": [{"node": "a"}]}', "'changes' must be"),
    ],
)
def test_a_bad_proposal_exits_2(
    inventory: Path, tmp_path: Path, content: str, fragment: str
) -> None:
    proposal = tmp_path / "p.json"
    proposal.write_text(content)
    code, out = run(["mig", "apply", "-i", str(inventory), "--proposal", str(proposal)])
    assert code == 2 and fragment in out, out
    assert "Traceback" not in out


@pytest.mark.parametrize(
    ("window", "fragment"),
    [
        ("tomorrow", "is not START/END"),
        ("2026-12-03T22:00/2026-12-04T02:00", "with a time zone"),
        ("2026-12-04T02:00Z/2026-12-03T22:00Z", "END after"),
    ],
)
def test_a_bad_window_exits_2(inventory: Path, tmp_path: Path, window: str, fragment: str) -> None:
    proposal = tmp_path / "p.json"
    proposal.write_text(json.dumps({"kind": "gpufleet-mig-proposal", "changes": []}))
    args = ["mig", "apply", "-i", str(inventory), "--proposal", str(proposal)]
    code, out = run([*args, "--maintenance-window", window])
    assert code == 2 and "--maintenance-window" in out and fragment in out, out


def test_an_empty_proposal_changes_nothing(inventory: Path, tmp_path: Path) -> None:
    proposal = tmp_path / "p.json"
    proposal.write_text(json.dumps({"kind": "gpufleet-mig-proposal", "changes": []}))
    code, out = run(["mig", "apply", "-i", str(inventory), "--proposal", str(proposal)])
    assert code == 0 and "nothing to apply" in out


@pytest.mark.parametrize(
    "extra",
    [["--layout", '{"1g.18gb": 7}'], ["--limit", "gpu-a"], ["--config-name", "x"]],
)
def test_proposal_excludes_layout_and_limit(
    inventory: Path, tmp_path: Path, extra: list[str]
) -> None:
    proposal = tmp_path / "p.json"
    proposal.write_text(json.dumps({"kind": "gpufleet-mig-proposal", "changes": []}))
    code, out = run(["mig", "apply", "-i", str(inventory), "--proposal", str(proposal), *extra])
    assert code == 2 and "drop --layout, --config-name and --limit" in out, out


@pytest.mark.parametrize("flag", [["--allow-disturb"], ["--maintenance-window", "x/y"]])
def test_proposal_flags_need_a_proposal(inventory: Path, flag: list[str]) -> None:
    code, out = run(["mig", "apply", "-i", str(inventory), "--layout", '{"1g.18gb": 7}', *flag])
    assert code == 2 and "goes with --proposal FILE" in out, out


def test_advise_refuses_an_output_in_a_missing_directory(tmp_path: Path) -> None:
    code, out = run(["mig", "advise", "--json", str(tmp_path / "no" / "p.json")])
    assert code == 2 and "does not exist" in out, out


def test_advise_refuses_a_missing_kubeconfig(tmp_path: Path) -> None:
    code, out = run(["mig", "advise", "--kubeconfig", str(tmp_path / "none")])
    assert code == 2 and "--kubeconfig" in out, out


PROPOSED = {"mig_enabled": True, "mig_devices": [0], "mig_layout": {"1g.18gb": 7},
            "mig_config": {}, "mig_config_name": "", "mig_config_file": ""}  # fmt: skip


@pytest.mark.parametrize(
    ("failures", "code", "fragment"),
    [
        # role mig finds no host for a node of the proposal: input that cannot run
        ([("gpu-a", mig_apply.PROPOSAL_REFUSED_TASK, "mig_proposal names node(s) n9 that no")],
         2, "Error: --proposal p.json: mig_proposal names node(s) n9 that no"),
        # a node failed while carving: a failed run
        ([("gpu-a", "MIG | Carve the GPU instances", "nvidia-smi exited 1")], 1, "n1: GPUs [0]"),
        ([], 0, 'n1: GPUs [0] -> {"1g.18gb": 7}'),
    ],
)  # fmt: skip
def test_the_proposal_reaches_role_mig_by_node_name(
    inventory: Path, monkeypatch: pytest.MonkeyPatch, failures: list, code: int, fragment: str
) -> None:
    passed: dict = {}

    def run_playbook(book: str, inventories: list, **kwargs: object) -> runner.RunResult:
        passed.update(kwargs, book=book)
        progress = runner.RunProgress(failures=list(failures))
        return runner.RunResult(1 if failures else 0, progress, Path("."), 0)

    monkeypatch.setattr(mig_apply, "proposal_run", lambda *a: {"mig_proposal": {"n1": PROPOSED}})
    monkeypatch.setattr(runner, "run_playbook", run_playbook)
    got, out = run(["mig", "apply", "-i", str(inventory), "--proposal", "p.json"])
    assert (got, fragment in out) == (code, True), out
    # the role maps the node to its host: no --limit, the proposal by node name
    assert passed["book"] == "mig" and passed["limit"] is None
    assert passed["extravars"] == {"mig_proposal": {"n1": PROPOSED}}


def test_dynamic_advice_is_rendered_per_gpu_and_per_node() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.report import mig_advice
    from rich.console import Console

    from gpufleet.commands import mig_advise
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, slices

    held = [
        allocated_claim("left", H200_NODE, "gpu-0-mig-1g18gb-19-0", namespace="ml"),
        allocated_claim("right", H200_NODE, "gpu-0-mig-1g18gb-19-4", namespace="ml"),
    ]
    doc = mig_advice.advise(slices(H200_NODE), held, [], []).to_dict()
    console = Console(width=300, record=True)
    mig_advise.render(console, doc)
    text = console.export_text()
    assert "largest profile that fits now 2g.35gb" in text
    assert "4g.71gb: at 0: move ml/left (memory slices 0)" in text
    assert (
        "for 7g.141gb (largest profile): move ml/left (memory slices 0), ml/right "
        "(memory slices 4) -> gpu-0-mig-7g141gb-0-0" in text
    )
    assert f"{H200_NODE}: 1. gpu-0: move ml/left (memory slices 0), ml/right" in text


def test_the_advice_is_computed_with_the_garbage_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc
    from types import SimpleNamespace

    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as cl

    from gpufleet.commands import mig_advise
    from tests.unit.report.test_fleet import CLAIMS, NODES, PODS, SLICES

    listing = cl.Listing(resource_version="v1", nodes=NODES, pods=PODS)
    listing.slices, listing.claims = SLICES, CLAIMS
    kube = SimpleNamespace(server="https://10.0.0.1:6443", requests=5)
    monkeypatch.setattr(mig_advise, "read_cluster", lambda *_a, **_k: (kube, listing))
    collecting = []
    advise = mig_advise.ma.advise

    def spy(*args: object, **kwargs: object) -> object:
        collecting.append(gc.isenabled())
        return advise(*args, **kwargs)

    monkeypatch.setattr(mig_advise.ma, "advise", spy)
    result = CliRunner().invoke(main, ["mig", "advise"])
    assert result.exit_code == 0, result.output
    assert collecting == [False] and gc.isenabled()
