"""``gpufleet claims template --kueue-queue``: a ResourceClaimTemplate in the form Kueue
counts and a Job for a LocalQueue (plugins/module_utils/kueue/jobs.py)."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import jobs as kj
from click.testing import CliRunner

from gpufleet.cli import main

pytestmark = pytest.mark.unit


def _run(*args: str):
    return CliRunner().invoke(main, ["claims", "template", *args])


def test_mig_slice_job_for_a_local_queue() -> None:
    res = _run(
        "mig-slice",
        "--kueue-queue",
        "team-a",
        "--namespace",
        "team-a",
        "--job-name",
        "train-1",
        "--kueue-priority-class",
        "high",
        "--count",
        "2",
        "--kubernetes-version",
        "1.37.2",
    )
    assert res.exit_code == 0, res.output
    tmpl, job = list(yaml.safe_load_all(res.stdout))
    request = tmpl["spec"]["spec"]["devices"]["requests"][0]
    assert request["exactly"] == {
        "deviceClassName": "mig.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 2,
    }
    assert "selectors" not in request["exactly"]
    assert job["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "team-a",
        "kueue.x-k8s.io/priority-class": "high",
    }
    assert job["metadata"]["name"] == "train-1"
    assert job["spec"]["suspend"] is True
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": tmpl["metadata"]["name"]}
    ]
    assert pod["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}


def test_a_profile_uses_its_own_device_class() -> None:
    res = _run("mig-slice", "--profile", "1g.18gb", "--kueue-queue", "team-a")
    assert res.exit_code == 0, res.output
    tmpl, _ = list(yaml.safe_load_all(res.stdout))
    exactly = tmpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "mig-1g.18gb.gpufleet.io"
    assert tmpl["metadata"]["name"] == "mig-1g-18gb"
    assert "kueue_profile_classes: [1g.18gb]" in res.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["gpu-with-memory", "--min-memory-gib", "40"], "which Kueue does not count"),
        (["mig-slice", "--kubernetes-version", "1.33.13"], "Kubernetes 1.34 or newer"),
        (["mig-slice", "--namespace", "Team_A"], "--namespace='Team_A'"),
    ],
)
def test_forms_kueue_cannot_count_are_refused(args: list[str], words: str) -> None:
    res = _run(*args, "--kueue-queue", "team-a")
    assert res.exit_code == 2
    assert words in res.output
    assert "Traceback" not in res.output


def test_bad_queue_name_is_refused() -> None:
    with pytest.raises(kj.KueueJobError, match="--kueue-queue='Team A'"):
        kj.kueue_job(name="j", namespace="n", queue="Team A", template="t")
