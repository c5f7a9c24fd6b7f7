"""Kueue quota objects, install manifests and checks (plugins/module_utils/kueue_*.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import checks as kc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import install as ki
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import versions as kv

pytestmark = pytest.mark.unit

RELEASE = kv.kueue_release("0.17.0")
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


def _module_manifests() -> tuple[list[dict], dict]:
    """Kueue's own manager Deployment and Configuration from the module source, named
    as its config/default kustomization names them (prefix kueue-)."""
    cache = os.environ.get("GOMODCACHE") or str(
        Path(os.environ.get("GOPATH") or Path.home() / "go") / "pkg" / "mod"
    )
    manager = Path(cache) / "sigs.k8s.io" / "kueue@v0.17.0" / "config" / "components" / "manager"
    if not manager.is_dir():
        pytest.skip("sigs.k8s.io/kueue@v0.17.0 is not in the Go module cache")
    docs = [d for d in yaml.safe_load_all((manager / "manager.yaml").read_text()) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    deployment["metadata"]["name"] = "kueue-controller-manager"
    config_text = (manager / "controller_manager_config.yaml").read_text()
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": config_text},
    }
    api = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {}}
    return [deployment, cm, api], yaml.safe_load(config_text)


def test_manifests_get_image_gate_mappings_and_placement() -> None:
    docs, config = _module_manifests()
    mappings = kq.device_class_mappings(["gpu.nvidia.com", "mig.nvidia.com"])
    out = ki.prepare_manifests(
        docs,
        RELEASE,
        image="registry.example:5000/kueue/kueue:v0.17.0",
        config=config,
        mappings=mappings,
        host_network=True,
        api_server="10.89.72.10:6443",
        node_selector={"node-role.kubernetes.io/control-plane": ""},
    )
    assert [d["kind"] for d in out] == ["Deployment", "ConfigMap"]  # APIService dropped
    pod = out[0]["spec"]["template"]["spec"]
    manager = pod["containers"][0]
    assert manager["image"] == "registry.example:5000/kueue/kueue:v0.17.0"
    assert manager["args"][-1] == "--feature-gates=DynamicResourceAllocation=true"
    assert {"name": "KUBERNETES_SERVICE_HOST", "value": "10.89.72.10"} in manager["env"]
    assert pod["hostNetwork"] is True
    written = json.loads(out[1]["data"]["controller_manager_config.yaml"])
    assert written["resources"]["deviceClassMappings"] == mappings
    assert written["integrations"] == config["integrations"]  # the rest kept
    assert docs[0]["spec"]["template"]["spec"]["containers"][0]["image"] != manager["image"]


def test_manifests_of_another_config_api_are_refused() -> None:
    docs, config = _module_manifests()
    config["apiVersion"] = "config.kueue.x-k8s.io/v1beta1"
    with pytest.raises(ki.KueueManifestError, match=r"reads config\.kueue\.x-k8s\.io/v1beta2"):
        ki.prepare_manifests(docs, RELEASE, image="i", config=config, mappings=[])


# ------------------------------------------------------------------ preflight


def _fleet() -> kc.FleetDevices:
    # two H200 nodes of one GPU: one carved 1g.18gb x7, one 3g.71gb + 2g.35gb x2
    return kc.fleet_devices(
        [
            kc.host_devices(1, {0: {"1g.18gb": 7}}),
            kc.host_devices(1, {0: {"3g.71gb": 1, "2g.35gb": 2}}),
            kc.host_devices(2, {}),
        ]
    )


def test_fleet_counts_whole_gpus_and_mig_devices() -> None:
    fleet = _fleet()
    assert (fleet.whole, fleet.mig, fleet.hosts) == (2, 10, 3)
    assert fleet.profiles["2g.35gb"] == 2


def test_quota_on_a_class_or_profile_never_published_is_an_error() -> None:
    teams = kq.parse_teams(
        [
            {"name": "a", "quotas": {"mig.nvidia.co": 2, "cpu": 8}},
            {"name": "b", "quotas": {"mig-4g.71gb.gpufleet.io": 1}},
        ]
    )
    found = kc.check_quotas(teams, _fleet(), ["gpu.nvidia.com", "mig.nvidia.com"], ["4g.71gb"])
    errors = {(f[1], f[0]) for f in found}
    assert ("kueue_profile_classes[0]", "error") in errors
    assert ("kueue_teams[0].quotas.mig.nvidia.co", "error") in errors
    assert ("kueue_teams[1].quotas.mig-4g.71gb.gpufleet.io", "error") in errors
    assert not any("cpu" in f[1] for f in found)
    bad_class = next(f for f in found if f[1] == "kueue_teams[0].quotas.mig.nvidia.co")
    assert "team a" in bad_class[3]


def test_whole_gpu_quota_on_an_all_mig_fleet_is_an_error() -> None:
    fleet = kc.fleet_devices([kc.host_devices(1, {0: {"1g.18gb": 7}})])
    teams = kq.parse_teams([{"name": "a", "quotas": {"gpu.nvidia.com": 1}}])
    (found,) = kc.check_quotas(teams, fleet, ["gpu.nvidia.com", "mig.nvidia.com"], [])
    assert found[0] == "error" and "publish no device of gpu.nvidia.com" in found[3]


def test_quota_above_the_fleet_warns_naming_team_and_resource() -> None:
    teams = kq.parse_teams(
        [
            {"name": "a", "quotas": {"mig.nvidia.com": 11}},
            {"name": "b", "quotas": {"mig.nvidia.com": 4, "mig-1g.18gb.gpufleet.io": 7}},
        ]
    )
    found = kc.check_quotas(teams, _fleet(), ["gpu.nvidia.com", "mig.nvidia.com"], ["1g.18gb"])
    assert [f[0] for f in found] == ["warning", "warning"]
    assert "team a: nominal quota 11 of mig.nvidia.com is more than the 10" in found[0][3]
    assert found[1][2] == {"a": 11, "b": 4}
    assert "add up to 15" in found[1][3]


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
