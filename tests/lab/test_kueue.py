"""Kueue quotas over DRA MIG slices on a running lab, with the real Kueue controller.

The kueue role (playbooks/kueue.yml) installs Kueue from the pinned module's manifests and
the locally built image (``gpufleet.lab.kueue``), maps ``mig.nvidia.com``, and creates two
teams of one cohort, each with a nominal quota of 2 MIG slices (team-a may borrow 2,
team-b reclaims lent quota from lower-priority workloads). The first GPU worker is carved
into seven 1g.18gb MIG devices. Jobs come from ``gpufleet claims template mig-slice
--kueue-queue``. The scenario, each step asserted on Kueue's own objects:

1. team-b runs 2 jobs (its quota), team-a 2 (its quota): all admitted, pods run on MIG
   slices allocated by the scheduler;
2. a third team-a job waits, with Kueue's own message (insufficient unused quota);
3. team-b's jobs end: the waiting job and a fourth are admitted by borrowing team-b's
   idle quota (team-a's ClusterQueue reports 2 borrowed);
4. a high-priority team-b job arrives: Kueue preempts a borrowing team-a workload
   (InCohortReclamation) and admits it.

``gpufleet validate`` then reports the kueue checks. Everything is removed afterwards
(Jobs, queues, Kueue, its CRDs, the MIG layout), leaving the lab as it was. The events
with their times are written to ``$TMPDIR/kueue-lab-events.json`` for docs/kueue.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gpufleet import runner
from gpufleet.cli import main as gpufleet_main
from gpufleet.lab import kueue as lab_kueue

from .kueue_scenario import Scenario, play, play_failures, remove_kueue
from .running import Lab

pytestmark = [pytest.mark.slow, pytest.mark.lab]

SMI = "nvidia-smi"
TEAMS = [
    {
        "name": "team-a",
        "cohort": "gpu-pool",
        "quotas": {"mig.nvidia.com": {"nominal": 2, "borrowing_limit": 2}},
        "preemption": {"within_cluster_queue": "LowerPriority"},
    },
    {
        "name": "team-b",
        "cohort": "gpu-pool",
        "quotas": {"mig.nvidia.com": {"nominal": 2}},
        "preemption": {"reclaim_within_cohort": "LowerPriority"},
    },
]
PRIORITIES = [
    {"name": "low", "value": 100, "description": "batch"},
    {"name": "high", "value": 1000, "description": "production"},
]
EVENTS: list[dict[str, Any]] = []
SECOND_RUN: dict[str, int] = {}
T0 = {"start": time.monotonic()}


def record(event: str, workload: str, detail: str) -> None:
    EVENTS.append(
        {"t_s": round(time.monotonic() - T0["start"], 1), "event": event, "workload": workload,
         "detail": detail}
    )  # fmt: skip
    print(f"[{EVENTS[-1]['t_s']:7.1f}s] {event:10} {workload:24} {detail}", file=sys.stderr)


def _mig_devices(lab: Lab, node: str) -> list[str]:
    slices = lab.kubectl_json("get", "resourceslices", "--field-selector", f"spec.nodeName={node}")
    return sorted(d["name"] for s in slices["items"] for d in s["spec"].get("devices", []))


def _play(lab: Lab, tmp: Path, art: lab_kueue.KueueArtefacts) -> runner.RunResult:
    return play(lab, tmp, art, teams=TEAMS, priority_classes=PRIORITIES)


@pytest.fixture(scope="module")
def kueue_lab(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    art = lab_kueue.artefacts(log=lambda m: print(m, file=sys.stderr))
    T0["start"] = time.monotonic()
    node = lab.workers()[0]
    lab.node_exec(node, SMI, "-i", "0", "-mig", "1")
    try:
        out = lab.node_exec(node, SMI, "mig", "-cgi", ",".join(["19"] * 7), "-C")
        assert out.count("Successfully created compute instance") == 7, out
        lab.wait_for(f"7 MIG devices on {node}", lambda: len(_mig_devices(lab, node)) == 7)
        tmp = tmp_path_factory.mktemp("kueue")
        t = time.monotonic()
        result = _play(lab, tmp, art)
        assert result.status == 0, play_failures(result)
        record("installed", "kueue-controller-manager",
               f"playbook kueue {time.monotonic() - t:.0f}s, {art.image}")  # fmt: skip
        t = time.monotonic()
        again = _play(lab, tmp, art)
        assert again.status == 0
        changed = sum((again.progress.stats or {}).get("changed", {}).values())
        record("reapplied", "playbook kueue", f"{time.monotonic() - t:.0f}s, changed={changed}")
        SECOND_RUN["changed"] = changed
        yield Scenario(lab, art)
    finally:
        remove_kueue(lab, art, [t["name"] for t in TEAMS])
        lab.node_exec(node, SMI, "mig", "-dci", check=False)
        lab.node_exec(node, SMI, "mig", "-dgi", check=False)
        lab.node_exec(node, SMI, "-i", "0", "-mig", "0", check=False)
        lab.wait_for(f"{node} back to one whole GPU", lambda: _mig_devices(lab, node) == ["gpu-0"])
        out = Path(os.environ.get("TMPDIR", "/tmp")) / "kueue-lab-events.json"
        out.write_text(json.dumps(EVENTS, indent=2))


def test_role_set_the_gate_the_mappings_and_the_queues(kueue_lab: Scenario) -> None:
    assert SECOND_RUN["changed"] == 0, "the second run of playbooks/kueue.yml changed things"
    lab = kueue_lab.lab
    dep = lab.kubectl_json("get", "deploy", "-n", "kueue-system", "kueue-controller-manager")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--feature-gates=DynamicResourceAllocation=true" in args
    assert dep["status"].get("readyReplicas") == 1
    cm = lab.kubectl_json("get", "configmap", "-n", "kueue-system", "kueue-manager-config")
    config = yaml.safe_load(cm["data"]["controller_manager_config.yaml"])
    assert config["resources"]["deviceClassMappings"] == [
        {"name": "gpu.nvidia.com", "deviceClassNames": ["gpu.nvidia.com"]},
        {"name": "mig.nvidia.com", "deviceClassNames": ["mig.nvidia.com"]},
    ]
    for team in ("team-a", "team-b"):
        cq = kueue_lab.cq_status(team)
        active = next(c for c in cq["conditions"] if c["type"] == "Active")
        assert active["status"] == "True", (team, active)
        lq = lab.kubectl_json("get", "localqueues.kueue.x-k8s.io", "-n", team, team)
        assert lq["spec"]["clusterQueue"] == team


def test_quota_admission_borrowing_and_preemption(kueue_lab: Scenario) -> None:
    s = kueue_lab
    for team, job in (("team-b", "b1"), ("team-b", "b2"), ("team-a", "a1"), ("team-a", "a2")):
        s.submit(team, job)
        s.wait_admitted(team, job)
        pod = s.wait_running(team, job)
        record("admitted", f"{team}/{job}", f"pod on {pod['spec']['nodeName']}")
    # 2. the cohort is full: a3 waits with Kueue's own message
    s.submit("team-a", "a3")
    reserved = s.wait_pending_on_quota("team-a", "a3")
    assert "insufficient unused quota for mig.nvidia.com" in reserved["message"], reserved
    assert s.condition("team-a", "a3", "Admitted") is None or (
        s.condition("team-a", "a3", "Admitted")["status"] == "False"
    )
    record("waiting", "team-a/a3", f"{reserved['reason']}: {reserved['message']}")
    # 3. team-b goes idle: team-a borrows its quota
    s.lab.kubectl_run("delete", "job", "-n", "team-b", "b1", "b2", "--wait=true", "--timeout=120s")
    record("finished", "team-b/b1,b2", "deleted: team-b idle")
    s.wait_admitted("team-a", "a3")
    s.submit("team-a", "a4")
    s.wait_admitted("team-a", "a4")
    s.wait_running("team-a", "a4")
    usage = s.lab.wait_for(
        "team-a borrowing 2",
        lambda: (
            (
                u := [
                    r for f in s.cq_status("team-a").get("flavorsUsage", []) for r in f["resources"]
                ]
            )
            and str(u[0].get("borrowed")) == "2"
            and u
        ),
    )
    assert str(usage[0]["total"]) == "4"
    record("borrowed", "team-a/a3,a4", f"team-a usage {usage[0]['total']}, borrowed 2")
    # 4. a high-priority team-b job reclaims: a borrower is preempted
    s.submit("team-b", "b3", priority="high")
    s.wait_admitted("team-b", "b3")

    def preempted() -> tuple[str, dict[str, Any]] | None:
        for job in ("a3", "a4"):
            c = s.condition("team-a", job, "Preempted")
            if c and c["status"] == "True":
                return job, c
        return None

    job, cond = s.lab.wait_for("a borrower preempted", preempted)
    assert cond["reason"] == "InCohortReclamation", cond
    record("preempted", f"team-a/{job}", f"{cond['reason']}: {cond['message']}")
    pod = s.wait_running("team-b", "b3")
    record("admitted", "team-b/b3", f"priority high, pod on {pod['spec']['nodeName']}")
    # the preempted job waits again, on quota, with Kueue's message
    again = s.wait_pending_on_quota("team-a", job)
    record("waiting", f"team-a/{job}", again["message"])


def test_validate_reports_the_kueue_checks(kueue_lab: Scenario, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    res = CliRunner().invoke(
        gpufleet_main,
        ["validate", "--kubeconfig", str(kueue_lab.lab.kubeconfig), "--kueue",
         "--json", str(report)],
    )  # fmt: skip
    data = json.loads(report.read_text())
    checks = {c["id"]: c for c in data["checks"] if c["area"] == "kueue"}
    assert checks["kueue.controller"]["status"] == "pass", checks
    assert checks["kueue.mappings"]["status"] == "pass", checks["kueue.mappings"]
    assert checks["kueue.local-queues"]["status"] == "pass"
    assert checks["kueue.quota-vs-devices"]["data"]["published"]["mig.nvidia.com"] == 7
    pending = checks["kueue.pending"]
    assert pending["status"] == "pass", pending
    assert len(pending["data"]["pending_on_quota"]) == 1, pending
    record("validated", "gpufleet validate", f"exit {res.exit_code}, kueue.* pass")
