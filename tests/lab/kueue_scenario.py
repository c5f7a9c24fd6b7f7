"""Kueue on a running lab, as the lab tests drive it: the kueue role (playbooks/kueue.yml)
run from the lab's own artefacts (``gpufleet.lab.kueue``), Jobs made by ``gpufleet claims
template mig-slice --kueue-queue``, Kueue's Workloads and ClusterQueues read back, and
everything the role made removed again.

Used by ``tests/lab/test_kueue.py`` (static MIG, two teams of one cohort) and by
``tests/integration/test_dynamic_mig_lab.py`` (dynamic MIG, a quota per MIG profile)."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from click.testing import CliRunner
from rich.console import Console

from gpufleet import runner
from gpufleet.cli import main as gpufleet_main
from gpufleet.lab import cluster
from gpufleet.lab import kueue as lab_kueue

from .running import Lab

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventory" / "lab"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def job_manifest(
    team: str,
    job: str,
    *,
    profile: str | None = None,
    priority: str | None = None,
    template: str = "mig-slice",
) -> list[dict[str, Any]]:
    """``gpufleet claims template mig-slice --kueue-queue TEAM`` (in namespace ``team``;
    ``--profile`` when given: the claim names the profile's DeviceClass): the
    ResourceClaimTemplate ``template`` and the suspended Job ``job``, its container the
    lab's busybox image sleeping (no registry here, and no /bin/sh link in that image)."""
    args = ["claims", "template", "mig-slice", "--kueue-queue", team, "--namespace", team,
            "--name", template, "--job-name", job]  # fmt: skip
    if profile:
        args += ["--profile", profile]
    if priority:
        args += ["--kueue-priority-class", priority]
    res = CliRunner().invoke(gpufleet_main, args)
    assert res.exit_code == 0, res.output
    tmpl, manifest = list(yaml.safe_load_all(res.stdout))
    pod = manifest["spec"]["template"]["spec"]
    pod["terminationGracePeriodSeconds"] = 1  # busybox sleep ignores SIGTERM
    container = pod["containers"][0]
    container.update(image=cluster.SMOKE_IMAGE, imagePullPolicy="Never")
    container["command"] = ["/bin/busybox", "sleep", "3600"]
    return [tmpl, manifest]


def play(
    lab: Lab,
    tmp: Path,
    art: lab_kueue.KueueArtefacts,
    *,
    teams: Sequence[Mapping[str, Any]],
    profile_classes: Sequence[str] = (),
    priority_classes: Sequence[Mapping[str, Any]] = (),
) -> runner.RunResult:
    """playbooks/kueue.yml on ``lab`` (inventory/lab, which reads the lab's name from the
    environment) with ``kueue_teams``, ``kueue_profile_classes`` and
    ``kueue_priority_classes``; Kueue from ``art``."""
    with mock.patch.dict(os.environ, lab.lab_env):
        return runner.run_playbook(
            "kueue",
            str(INVENTORY),
            extravars={
                "kueue_manifests": str(art.manifests),
                "kueue_image": art.image,
                "kueue_image_archive": {"ref": art.image, "path": str(art.archive)},
                "kueue_version": art.version,
                "kueue_device_classes": ["gpu.nvidia.com", "mig.nvidia.com"],
                "kueue_profile_classes": list(profile_classes),
                "kueue_teams": [dict(t) for t in teams],
                "kueue_priority_classes": [dict(p) for p in priority_classes],
                "kueue_kubeconfig": str(lab.kubeconfig),
            },
            console=Console(file=io.StringIO(), width=400),
            artifact_root=tmp / "artifacts",
        )


def play_failures(result: runner.RunResult) -> list[str]:
    """The failed tasks of a run, one line each."""
    return [" ".join(m.split()) for _, _, m in result.progress.failures]


def remove_kueue(lab: Lab, art: lab_kueue.KueueArtefacts, namespaces: Sequence[str]) -> None:
    """Remove what the role made: the teams' ``namespaces`` (their Jobs with them), the
    queue objects and per-profile DeviceClasses it labelled, Kueue's webhooks, manifests,
    CRDs and namespace."""
    for ns in namespaces:
        lab.kubectl_run("delete", "namespace", ns, "--wait=true", "--timeout=120s", check=False)
    for kind in ("localqueues", "clusterqueues", "cohorts", "resourceflavors",
                 "workloadpriorityclasses"):  # fmt: skip
        lab.kubectl_run(
            "delete", f"{kind}.kueue.x-k8s.io", "-A", "-l", "gpufleet.io/managed-by=kueue",
            "--timeout=60s", check=False,
        )  # fmt: skip
    lab.kubectl_run(
        "delete", "deviceclasses", "-l", "gpufleet.io/managed-by=kueue", "--timeout=60s",
        check=False,
    )  # fmt: skip
    # Kueue's webhooks first, so that nothing in the cluster calls a controller that is gone
    lab.kubectl_run(
        "delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
        "-l", "app.kubernetes.io/name=kueue", check=False,
    )  # fmt: skip
    lab.kubectl_run("delete", "-f", str(art.manifests), "--ignore-not-found", "--timeout=120s",
                    "--wait=false", check=False)  # fmt: skip
    for crd in lab.kubectl_run("get", "crd", "-o", "name", check=False).split():
        if crd.endswith(".kueue.x-k8s.io"):
            lab.kubectl_run("delete", crd, "--timeout=60s", check=False)
    lab.kubectl_run("delete", "namespace", "kueue-system", "--timeout=120s", check=False)


def kueue_left(lab: Lab) -> list[str]:
    """What of Kueue is still in the cluster: its CRDs, webhook configurations, namespace
    and the DeviceClasses the role made ([] once removed)."""
    left = [c for c in lab.kubectl_run("get", "crd", "-o", "name").split() if "kueue" in c]
    left += lab.kubectl_run(
        "get", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "-o", "name",
        "-l", "app.kubernetes.io/name=kueue",
    ).split()  # fmt: skip
    left += lab.kubectl_run(
        "get", "deviceclasses", "-o", "name", "-l", "gpufleet.io/managed-by=kueue"
    ).split()
    left += lab.kubectl_run(
        "get", "namespace", "kueue-system", "-o", "name", "--ignore-not-found"
    ).split()
    return left


class Scenario:
    """Jobs submitted to Kueue on ``lab`` and what Kueue says of them."""

    def __init__(self, lab: Lab, art: lab_kueue.KueueArtefacts) -> None:
        self.lab = lab
        self.art = art

    def apply(self, docs: list[dict[str, Any]]) -> None:
        self.lab.kubectl_run("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def submit(
        self, team: str, job: str, priority: str | None = "low", profile: str | None = None
    ) -> None:
        self.apply(job_manifest(team, job, profile=profile, priority=priority))

    def workload(self, team: str, job: str) -> dict[str, Any] | None:
        """Kueue's Workload of Job ``team/job`` (None: not made yet)."""
        items = self.lab.kubectl_json("get", "workloads.kueue.x-k8s.io", "-n", team)["items"]
        for wl in items:
            owners = wl["metadata"].get("ownerReferences") or []
            if any(o.get("kind") == "Job" and o.get("name") == job for o in owners):
                return wl
        return None

    def condition(self, team: str, job: str, kind: str) -> dict[str, Any] | None:
        wl = self.workload(team, job)
        for c in ((wl or {}).get("status") or {}).get("conditions") or []:
            if c["type"] == kind:
                return c
        return None

    def wait_admitted(self, team: str, job: str, timeout_s: float = 180) -> dict[str, Any]:
        cond = self.lab.wait_for(
            f"{team}/{job} admitted",
            lambda: (c := self.condition(team, job, "Admitted")) and c["status"] == "True" and c,
            timeout_s,
        )
        return cond

    def wait_pending_on_quota(self, team: str, job: str, timeout_s: float = 120) -> dict[str, Any]:
        """Kueue's ``QuotaReserved`` condition of ``team/job`` once it is False (the Job
        waits on quota): its reason and Kueue's message."""
        return self.lab.wait_for(
            f"{team}/{job} pending on quota",
            lambda: (
                (c := self.condition(team, job, "QuotaReserved")) and c["status"] == "False" and c
            ),
            timeout_s,
        )

    def pods(self, team: str, job: str) -> list[dict[str, Any]]:
        return self.lab.kubectl_json("get", "pods", "-n", team, "-l", f"{JOB_NAME_LABEL}={job}")[
            "items"
        ]

    def wait_running(self, team: str, job: str, timeout_s: float = 180) -> dict[str, Any]:
        def running() -> dict[str, Any] | None:
            return next((p for p in self.pods(team, job) if p["status"].get("phase") == "Running"),
                        None)  # fmt: skip

        return self.lab.wait_for(f"{team}/{job} pod running", running, timeout_s)

    def cq_status(self, name: str) -> dict[str, Any]:
        return self.lab.kubectl_json("get", "clusterqueues.kueue.x-k8s.io", name)["status"]
