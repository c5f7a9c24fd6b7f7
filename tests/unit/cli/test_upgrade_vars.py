"""``gpufleet upgrade``'s parts that need no run: the options as the role's variables
(gpufleet/commands/upgrade.py) and the planner module's refusal of a cluster it cannot
read (plugins/modules/upgrade_plan.py, run in this process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.commands import upgrade as cmd

pytestmark = pytest.mark.unit


def test_the_options_reach_the_run_as_the_variables_the_role_plans_with(tmp_path):
    planned = cmd.plan_vars(
        {"x": 1, "upgrade_batch_size": 3}, "1.37.2", batch_size="50%",
        min_gpu_available_percent="40", kubeconfig="/k", snapshot=str(tmp_path / "s.json"),
    )  # fmt: skip
    assert planned["upgrade_batch_size"] == "50%"  # the option over -e
    assert planned["upgrade_min_gpu_available_percent"] == "40"
    assert planned["upgrade_kubeconfig"] == "/k"
    assert planned["upgrade_input_names"] == {
        "target": "--to", "batch_size": "--batch-size",
        "min_gpu_available_percent": "--min-gpu-available-percent",
        "kubeconfig": "--kubeconfig", "snapshot": "--snapshot",
    }  # fmt: skip
    extra = cmd.run_extra_vars(planned, tmp_path / "r.json")
    assert extra["upgrade_report_path"] == str(tmp_path / "r.json")
    assert "upgrade_snapshot" not in extra and extra["x"] == 1
    assert "upgrade_batch_size" not in cmd.plan_vars({}, "1.37.2")


def test_an_unreachable_api_server_gets_a_fix(tmp_path):
    from ansible_collections.gpufleet.cluster.plugins.modules import upgrade_plan as module

    from tests.integration.test_hostile_input_servers import run_module

    kc = tmp_path / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: "
        "[{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    res = run_module(
        module,
        {"kubeconfig": str(kc), "target": "1.37.2", "hosts": [],
         "input_names": {"kubeconfig": "--kubeconfig"}},
    )  # fmt: skip
    assert res["failed"] is True
    assert res["reason"].startswith(f"--kubeconfig '{kc}': ")
    assert "https://127.0.0.1:1 cannot be reached" in res["reason"]
    assert "--snapshot FILE" in res["fix"]
    assert Path(kc).exists()
