"""Kueue quota objects (``plugins/module_utils/kueue/queues.py``) and the filter that plans
the install; manifests and quota checks are in ``test_install.py`` and ``test_checks.py``."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import install as ki
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq

from tests.unit.kueue.kueue_manifests import RELEASE, _module_manifests

pytestmark = pytest.mark.unit

TEAMS = [
    {
        "name": "team-a",
        "cohort": "gpu-pool",
        "quotas": {"mig.nvidia.com": {"nominal": 2, "borrowing_limit": 2, "lending_limit": 2}},
        "preemption": {"reclaim_within_cohort": "Any", "within_cluster_queue": "LowerPriority"},
    },
    {"name": "team-b", "namespace": "ml", "cohort": "gpu-pool", "quotas": {"mig.nvidia.com": 2}},
]


def test_teams_become_cluster_queues_local_queues_and_a_cohort() -> None:
    objs = kq.queue_objects(
        RELEASE,
        kq.parse_teams(TEAMS),
        priority_classes=[{"name": "high", "value": 1000}],
    )
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert kinds == [
        ("WorkloadPriorityClass", "high"),
        ("ResourceFlavor", "gpu"),
        ("Cohort", "gpu-pool"),
        ("ClusterQueue", "team-a"),
        ("LocalQueue", "team-a"),
        ("ClusterQueue", "team-b"),
        ("LocalQueue", "team-b"),
    ]
    assert {o["apiVersion"] for o in objs} == {"kueue.x-k8s.io/v1beta2"}
    cq_a = objs[3]["spec"]
    assert cq_a["cohortName"] == "gpu-pool"
    assert cq_a["resourceGroups"] == [
        {
            "coveredResources": ["mig.nvidia.com"],
            "flavors": [
                {
                    "name": "gpu",
                    "resources": [
                        {
                            "name": "mig.nvidia.com",
                            "nominalQuota": "2",
                            "borrowingLimit": "2",
                            "lendingLimit": "2",
                        }
                    ],
                }
            ],
        }
    ]
    assert cq_a["preemption"] == {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
    }
    assert objs[6]["metadata"]["namespace"] == "ml"
    assert objs[6]["spec"] == {"clusterQueue": "team-b"}
    assert objs[5]["spec"]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "ml"
    }


@pytest.mark.parametrize(
    ("teams", "variable", "fix"),
    [
        ([{"name": "Team A", "quotas": {"x": 1}}], "kueue_teams[0].name", "DNS label"),
        ([{"name": "a", "quotas": {}}], "kueue_teams[0].quotas", "map of resource"),
        ([{"name": "a", "quotas": {"mig.nvidia.com": "two"}}], "quotas.mig.nvidia.com.nominal", ""),
        (
            [{"name": "a", "quotas": {"mig.nvidia.com": {"nominal": 1, "lending_limit": 3}}}],
            "lending_limit",
            "lend at most 1",
        ),
        (
            [{"name": "a", "quotas": {"g": 1}, "preemption": {"reclaim_within_cohort": "All"}}],
            "preemption.reclaim_within_cohort",
            "LowerPriority",
        ),
        ([{"name": "a", "quotas": {"g": 1}}, {"name": "a", "quotas": {"g": 1}}], "[1].name", ""),
    ],
)
def test_bad_teams_are_refused_naming_the_variable(teams, variable: str, fix: str) -> None:
    with pytest.raises(kq.KueueInputError) as err:
        kq.parse_teams(teams)
    assert variable in err.value.variable
    assert fix in str(err.value)


def test_mappings_one_resource_per_class_and_per_profile() -> None:
    got = kq.device_class_mappings(["gpu.nvidia.com", "mig.nvidia.com"], ["1g.18gb"])
    assert got == [
        {"name": "gpu.nvidia.com", "deviceClassNames": ["gpu.nvidia.com"]},
        {"name": "mig.nvidia.com", "deviceClassNames": ["mig.nvidia.com"]},
        {"name": "mig-1g.18gb.gpufleet.io", "deviceClassNames": ["mig-1g.18gb.gpufleet.io"]},
    ]
    dc = kq.profile_device_class_object("1g.18gb", "resource.k8s.io/v1")
    assert dc["metadata"]["name"] == "mig-1g.18gb.gpufleet.io"
    assert "profile == '1g.18gb'" in dc["spec"]["selectors"][0]["cel"]["expression"]
    with pytest.raises(kq.KueueInputError, match="16"):
        kq.device_class_mappings([f"c{i}.example.com" for i in range(17)])
    with pytest.raises(kq.KueueInputError, match="not a MIG profile"):
        kq.profile_device_class("1g.18")


# ------------------------------------------------------------------ preflight


def test_the_filter_plans_install_classes_and_queues_from_manifest_text() -> None:
    from ansible_collections.gpufleet.cluster.plugins.filter.kueue import kueue_plan

    docs, _ = _module_manifests()
    text = yaml.safe_dump_all(docs)  # the ConfigMap holds the Configuration as YAML text
    planned = kueue_plan(
        text,
        {
            "version": "0.17.0",
            "image": "registry.k8s.io/kueue/kueue:v0.17.0",
            "device_classes": ["gpu.nvidia.com", "mig.nvidia.com"],
            "profile_classes": ["1g.18gb"],
            "teams": TEAMS,
        },
    )
    assert planned["feature_gates"] == "DynamicResourceAllocation=true"
    assert [d["metadata"]["name"] for d in planned["device_classes"]] == ["mig-1g.18gb.gpufleet.io"]
    assert planned["device_classes"][0]["apiVersion"] == "resource.k8s.io/v1"
    deployment = next(d for d in planned["install"] if d["kind"] == "Deployment")
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert len(annotations[ki.CONFIG_HASH_ANNOTATION]) == 16
    assert [o["kind"] for o in planned["queues"]].count("ClusterQueue") == 2


def test_the_filter_names_a_version_outside_the_table() -> None:
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.cluster.plugins.filter.kueue import kueue_plan

    docs, _ = _module_manifests()
    with pytest.raises(AnsibleFilterError, match=r"kueue_version='0\.12\.0'"):
        kueue_plan(yaml.safe_dump_all(docs), {"version": "0.12.0", "teams": []})
