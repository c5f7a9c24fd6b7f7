"""The version model against every committed release's facts, and the generator itself.

The expected values are read from the committed data (``plugins/module_utils/
dra/releases/v1_*.py``, generated from each release's source) with a small reading of
their own here, independent of the model's code: the spec in force at a minor, the
served API versions, kubeadm's versions. The model must agree on every gate of every
release, not only DRA's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    release_data as k8s_releases,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import sanitize as dra_sanitize
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from click.testing import CliRunner

from gpufleet.build import release_facts as rf
from gpufleet.cli import main

pytestmark = pytest.mark.unit

#: The pinned release the 1.38 facts come from (a pre-release until 1.38.0 is pinned).
R38 = next(r.version for r in rf.load_fact_releases() if r.minor == 38)

RELEASES = rf.load_fact_releases()
IDS = [r.version for r in RELEASES]


def _data(release: rf.FactRelease) -> dict:
    return rf.read_data_module(rf.data_module_path(release.minor))


def _in_force(specs: list, minor: int) -> list | None:
    """The spec Kubernetes applies at ``minor`` with the default minimum compatibility
    version (one below the binary): the last one not newer than ``minor`` whose own (or an
    earlier entry's) minCompatibilityVersion the default satisfies."""
    chosen, carried = None, None
    for since, stage, default, locked, min_compat in specs:
        carried = min_compat if min_compat is not None else carried
        if int(since.split(".")[1]) > minor:
            continue
        if carried is not None and minor - 1 < int(carried.split(".")[1]):
            continue
        chosen = [stage, default, locked]
    return chosen


def _all_gates(data: dict) -> dict:
    out = dict(data["gates"])
    for table in data["componentGates"].values():
        out.update(table)
    return out


def test_one_committed_release_per_listed_release_and_the_registry_loads_them_all() -> None:
    assert sorted(k8s_releases.releases()) == sorted(r.minor for r in RELEASES)
    for release in RELEASES:
        assert k8s_releases.release(release.minor).release == release.version
    assert dra_core.MAX_MINOR == k8s_releases.newest_minor() == 38


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_committed_file_is_exactly_what_the_generator_writes(release: rf.FactRelease) -> None:
    path = rf.data_module_path(release.minor)
    assert rf.render_data_module(rf.read_data_module(path)) == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_model_holds_as_many_gates_as_the_release_registers(release: rf.FactRelease) -> None:
    data = _data(release)
    held = dra_gates.release_gates_at(release.version)
    assert len(held) == len(_all_gates(data))
    assert set(held) == set(_all_gates(data))


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_every_gate_state_agrees_with_the_release(release: rf.FactRelease) -> None:
    data = _data(release)
    problems = []
    for name, (specs, _deps) in sorted(_all_gates(data).items()):
        want = _in_force(specs, release.minor)
        st = dra_gates.gate_state(name, release.version)
        got = [st.stage, st.default, st.locked] if st.known else None
        if want != got:
            problems.append(f"{name}: release {want}, model {got}")
    # Gates of other releases that this one does not register are never "known" here.
    others = k8s_releases.all_gate_names() - set(_all_gates(data))
    problems += [
        f"{n}: not registered by {release.version}, model says known"
        for n in sorted(others)
        if dra_gates.gate_state(n, release.version).known
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_every_dra_gate_of_the_release_is_in_the_model(release: rf.FactRelease) -> None:
    data = _data(release)
    dra = {n for n in data["gates"] if n.startswith("DRA") or n == dra_core.DRA_GATE}
    assert dra <= set(dra_gates.GATES), sorted(dra - set(dra_gates.GATES))


DECLARING = [r for r in RELEASES if r.minor >= dra_core.DEPENDENCIES_DECLARED_SINCE]


@pytest.mark.parametrize("release", DECLARING, ids=[r.version for r in DECLARING])
def test_declared_dependencies_are_the_models(release: rf.FactRelease) -> None:
    data = _data(release)
    assert data["dependenciesDeclared"]
    for name, (_specs, deps) in data["gates"].items():
        if name in dra_gates.GATES:
            assert set(deps) <= set(dra_gates.GATES[name].depends_on), name


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_served_api_versions_agree_with_the_release(release: rf.FactRelease) -> None:
    data = _data(release)
    want = {
        ver: (api["enabledByDefault"], tuple(api["kinds"]))
        for ver, api in data["resource"].items()
        if api["served"]
        and api["kinds"]
        and (api["removed"] is None or release.minor < int(api["removed"].split(".")[1]))
    }
    got = {
        s.version: (s.enabled_by_default, s.kinds)
        for s in dra_api.served_api_versions(release.version)
    }
    assert got == want
    for ver in dra_api.ALL_RESOURCE_VERSIONS:
        rc = (
            dra_plan.plan_components(release.version)
            .components[dra_core.APISERVER]
            .runtime_config_absent
        )
        assert (f"resource.k8s.io/{ver}" in rc) == (ver not in want)


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_runtime_config_policy_names_only_served_versions(release: rf.FactRelease) -> None:
    plan = dra_plan.plan_components(release.version)
    served = {s.version for s in dra_api.served_api_versions(release.version)}
    for entry in plan.runtime_config:
        assert entry.split("/")[1].split("=")[0] in served, entry


@pytest.mark.parametrize("release", RELEASES, ids=IDS)
def test_kubeadm_config_api_agrees_with_the_release(release: rf.FactRelease) -> None:
    k = _data(release)["kubeadm"]
    api = dra_api.kubeadm_config_api(release.version)
    assert set(api.accepted) == set(k["registered"]) - set(k["experimental"])
    assert set(api.experimental) == set(k["experimental"])
    assert api.preferred in k["registered"] and api.preferred not in k["deprecated"]
    for old in k["old"]:
        assert old not in api.accepted


def test_138_plans_say_when_the_facts_come_from_a_pre_release() -> None:
    prerelease = "-" in R38
    assert dra_gates.prerelease_source(38) == (R38 if prerelease else None)
    said = any("a pre-release" in w for w in dra_plan.plan_components("1.38.0").warnings)
    assert said == prerelease
    assert not any(
        dra_core.DRA_GATE in g for g in dra_plan.plan_components("1.38.0").emitted().values()
    )
    assert (
        "resource.k8s.io/v1beta1"
        in dra_plan.plan_components("1.38.0").components[dra_core.APISERVER].runtime_config_absent
    )


@pytest.mark.parametrize("gate", ["DRAPartitionableDevices", "DRADeviceBindingConditions"])
def test_gates_138_locks_are_refused_at_false(gate: str) -> None:
    result = CliRunner().invoke(main, ["gates", "plan", "--to", R38, "--gate", f"{gate}=false"])
    assert result.exit_code == 1
    assert f"{gate}=false is impossible" in result.output and "locked to true" in result.output


def test_gates_plan_json_for_138_agrees_with_the_138_dump() -> None:
    result = CliRunner().invoke(main, ["gates", "plan", "--to", R38, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)["release"]
    data = rf.read_data_module(rf.data_module_path(38))
    assert doc["source"] == R38
    want_gates = {
        name: dict(zip(("stage", "default", "locked"), _in_force(specs, 38), strict=False))
        for name, (specs, _deps) in _all_gates(data).items()
    }
    assert {
        n: {k: g[k] for k in ("stage", "default", "locked")} for n, g in doc["gates"].items()
    } == want_gates
    assert doc["gates"]["ControllerManagerReleaseLeaderElectionLockOnExit"]["components"] == [
        "kube-controller-manager"
    ]
    want_api = {
        ver: {"enabled_by_default": a["enabledByDefault"], "kinds": a["kinds"]}
        for ver, a in data["resource"].items()
        if a["served"]
        and a["kinds"]
        and (a["removed"] is None or int(a["removed"].split(".")[1]) > 38)
    }
    assert doc["api_versions"] == want_api
    assert "v1beta1" in doc["not_served"] and "1.38" in doc["not_served"]["v1beta1"]
    assert doc["kubeadm"]["registered"] == data["kubeadm"]["registered"]
    # The removed DRA gate is named with the release that removed it.
    assert doc["removed_gates"][dra_core.DRA_GATE] == "1.38"


def test_known_bad_134_patches_warn_naming_the_fault_and_the_fix() -> None:
    for version in ("1.34.0", "1.34.1"):
        result = CliRunner().invoke(main, ["gates", "plan", "--to", version])
        assert result.exit_code == 0
        text = " ".join(result.output.split())
        assert f"{version} is a known-bad release" in text
        assert "fail to register" in text and "1.34.2" in text
    assert not dra_skew.known_bad_releases("1.34.2")


# ----------------------------------------------------------------------------- generator


def _dump(**over) -> dict:
    base = {
        "format": 2,
        "kubernetesModuleVersion": "v1.38.0-beta.0",
        "binaryVersion": "1.38",
        "dependenciesDeclared": True,
        "gates": {
            "B": {
                "specs": [
                    {
                        "version": "1.30",
                        "default": False,
                        "lockToDefault": False,
                        "preRelease": "ALPHA",
                        "minCompatibilityVersion": None,
                    }
                ],
                "dependencies": ["A"],
            },
            "A": {
                "specs": [
                    {
                        "version": "1.20",
                        "default": True,
                        "lockToDefault": True,
                        "preRelease": "",
                        "minCompatibilityVersion": None,
                    }
                ],
                "dependencies": [],
            },
        },
        "componentGates": {"kube-controller-manager": {}},
        "apiGroups": {
            "resource.k8s.io": [
                {
                    "version": "v1beta1",
                    "served": True,
                    "enabledByDefault": False,
                    "registered": True,
                    "kinds": ["DeviceClass"],
                    "lifecycle": {"DeviceClass": {"removed": "1.38"}},
                    "resourceDefaults": {},
                },
            ]
        },
        "kubeadm": {
            "registered": ["kubeadm.k8s.io/v1beta4"],
            "old": {},
            "deprecated": [],
            "experimental": [],
        },
        "groupVersions": ["v1", "apps/v1"],
    }
    base.update(over)
    return base


def test_normalise_sorts_gates_names_stages_and_lifecycle() -> None:
    facts = rf.normalise(_dump(), "1.38.0-beta.0")
    assert list(facts["gates"]) == ["A", "B"]
    assert facts["gates"]["A"] == [[["1.20", "ga", True, True, None]], []]
    assert facts["gates"]["B"][1] == ["A"]
    assert facts["componentGates"] == {}
    assert facts["resource"]["v1beta1"]["removed"] == "1.38"
    text = rf.render_data_module(facts)
    path = Path(__file__).parent / "_tmp_release.py"
    try:
        path.write_text(text, encoding="utf-8")
        assert rf.read_data_module(path) == json.loads(json.dumps(facts))
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"format": 1}, "format 1"),
        ({"kubernetesModuleVersion": "v1.37.2"}, "v1.37.2"),
    ],
)
def test_normalise_refuses_a_dump_of_another_release_or_format(over: dict, words: str) -> None:
    with pytest.raises(rf.FactsError, match=words):
        rf.normalise(_dump(**over), "1.38.0-beta.0")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({}, "no release_facts.releases"),
        ({"release_facts": {"releases": [{"version": "1.38"}]}}, "not a release"),
        ({"release_facts": {"releases": ["1.38.0"]}}, "write {version"),
        (
            {"release_facts": {"releases": [{"version": "1.37.1"}, {"version": "1.37.2"}]}},
            "a second release of minor 1.37",
        ),
        (
            {"release_facts": {"releases": [{"version": "1.38.0", "go_toolchain": "go1.27.3"}]}},
            r"releases\[0\]\.go_toolchain.*move it to a go_builds entry for '1\.38\.0'",
        ),
    ],
)
def test_release_list_errors_name_the_entry(data: dict, words: str) -> None:
    with pytest.raises(rf.FactsError, match=words):
        rf.parse_fact_releases(data, "releases.yaml")


def test_prerelease_staging_version_and_toolchain() -> None:
    (rel,) = rf.parse_fact_releases(
        {
            "release_facts": {"releases": [{"version": "1.38.0-beta.0"}]},
            "go_builds": [{"version": "1.38.0-beta.0", "go_toolchain": "go1.27.3"}],
        }
    )
    assert rel.version == "1.38.0-beta.0" and rel.staging_version == "v0.38.0-beta.0"
    assert rel.go_toolchain == "go1.27.3"
    rel = next(r for r in RELEASES if r.minor == 38)
    assert rel.go_toolchain == "go1.27.3"
    # the kubelet's stand-in, which featuredump does not link; every other module is served
    assert rel.substitute == (
        ("sigs.k8s.io/iptables-wrappers v1.0.0", "lab/go/substitute/iptables-wrappers"),
    )


def test_diff_names_each_changed_gate() -> None:
    a = rf.normalise(_dump(), "1.38.0-beta.0")
    b = json.loads(json.dumps(a))
    b["gates"]["B"][0][0][2] = True
    del b["gates"]["A"]
    lines = rf.diff_facts(a, b)
    assert [line.split(":")[0] for line in lines] == ["gate A", "gate B"]


def test_kubeadm_api_versions_are_judged_from_the_release() -> None:
    assert dra_api.kubeadm_api_problem("kubeadm.k8s.io/v1beta4", "1.38.0") is None
    old = dra_api.kubeadm_api_problem("kubeadm.k8s.io/v1beta3", "1.38.0")
    assert old and "old API spec" in old and "kubeadm 1.36" in old
    assert dra_api.kubeadm_api_problem("kubeadm.k8s.io/v1beta3", "1.36.3") is None
    assert "--allow-experimental-api" in dra_api.kubeadm_api_problem("kubeadm.k8s.io/v1", "1.38.0")
    assert "does not know" in dra_api.kubeadm_api_problem("kubeadm.k8s.io/v9", "1.37.2")


def test_runtime_config_of_any_group_is_judged_against_the_release_scheme() -> None:
    report = dra_sanitize.sanitize(
        {}, ["batch/v2alpha1=true", "apps/v1=true", "api/all=true", "api/v1=true"], "1.37.2"
    )
    assert [f.entry for f in report.must_remove] == ["batch/v2alpha1=true"]
    assert "group version batch/v2alpha1 that has not been registered" in (
        report.must_remove[0].reason
    )
    assert report.runtime_config == ["apps/v1=true", "api/all=true", "api/v1=true"]
    # The data holds the scheme's group versions of every release.
    for release in RELEASES:
        assert "apps/v1" in _data(release)["groupVersions"]
