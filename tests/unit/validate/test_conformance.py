"""Kubernetes' DRA e2e specs as checks: the label filter and its reasons, a real Ginkgo
report of 1.37.2 (tests/unit/data/conformance, trimmed from the lab's runs) turned into
checks, the counts, and which of the suite's namespaces a run created."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import conformance as vc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "conformance"
#: Five specs of 1.37.2: two that passed and two the default filter and skip left out,
#: from a run of the default selection on three processes; one that failed, from a run of
#: the v1beta contexts alone (the lab serves resource.k8s.io/v1 only).
REPORT = json.loads((DATA / "ginkgo-report-1.37.2.json").read_text())


def by_state(state: str) -> list[vr.Check]:
    checks = vc.spec_checks(REPORT, output="/r/output.log")
    return [c for c in checks if c.data["state"] == state]


def _spec(state: str, text: str, leaf: str = "It", **failure: object) -> dict:
    spec = {
        "ContainerHierarchyTexts": [
            "[sig-node] [DRA]",
            "kubelet [Feature:DynamicResourceAllocation]",
        ],
        "LeafNodeType": leaf,
        "LeafNodeText": text,
        "State": state,
    }
    if failure:
        spec["Failure"] = failure
    return spec


def test_the_filter_is_its_terms_and_matches_the_run_it_came_from() -> None:
    assert vc.DEFAULT_LABEL_FILTER == "DRA && !Feature:OffByDefault && !Flaky"
    config = REPORT[0]["SuiteConfig"]
    assert config["LabelFilter"] == vc.DEFAULT_LABEL_FILTER
    assert config["SkipStrings"] == [vc.DEFAULT_SKIP]


def test_each_spec_of_a_real_report_becomes_one_check_of_its_status() -> None:
    checks = vc.spec_checks(REPORT, output="/r/output.log")
    assert [c.status for c in checks].count(vr.PASS) == 2
    assert [c.status for c in checks].count(vr.SKIP) == 2
    assert [c.status for c in checks].count(vr.FAIL) == 1
    assert all(c.area == "conformance" for c in checks)
    ids = [c.id for c in checks]
    assert len(set(ids)) == len(ids)
    assert "conformance.crud-tests-resource-k8s-io-v1-resourceslice" in ids
    assert "conformance.kubelet-on-single-node-supports-simple-pod-referencing-ed1aff" in ids


def test_a_long_slug_is_cut_at_a_word_and_stays_distinct() -> None:
    text = "[sig-node] [DRA] control plane views partitionable pool without a partition type "
    one = vc.slug(text + "should report no partition summary")
    two = vc.slug(text + "should report no partition summary at all")
    assert len(one) <= vc.SLUG_CHARS and len(two) <= vc.SLUG_CHARS
    assert one.startswith("control-plane-views-partitionable-pool-without-a-")
    assert one != two
    assert vc.slug("[sig-node] [DRA] CRUD Tests resource.k8s.io/v1 DeviceClass [Conformance]") == (
        "crud-tests-resource-k8s-io-v1-deviceclass"
    )


def test_a_passed_spec_says_its_time_and_keeps_its_labels() -> None:
    crud = next(c for c in by_state("passed") if "ResourceSlice" in c.title)
    assert (
        crud.title == "[sig-node] [DRA] CRUD Tests resource.k8s.io/v1 ResourceSlice [Conformance]"
    )
    assert re.fullmatch(r"passed in \d+(\.\d)? s", crud.summary)
    assert "Conformance" in crud.data["labels"]


def test_a_failed_spec_carries_the_suite_message_location_and_where_the_log_is() -> None:
    (failed,) = by_state("failed")
    assert failed.id == "conformance.kubelet-with-v1beta1-api-supports-simple-resourceclaim"
    assert failed.summary == "failed at dra.go:2317"
    assert failed.problems[0].message == (
        "FATAL ERROR:\n\tcreate *v1beta1.ResourceClaimTemplate: the server could not find "
        "the requested resource"
    )
    assert failed.fix == "read /r/output.log"


def test_a_spec_the_label_filter_left_out_says_which_term_and_which_gates() -> None:
    alpha = next(c for c in by_state("skipped") if "control plane" in c.title)
    assert alpha.reason.startswith(
        "needs a feature gate that is off by default in the release (label Feature:OffByDefault)"
    )
    assert "FeatureGate:DRAResourcePoolStatus" in alpha.reason
    assert "Alpha" in alpha.reason


def test_a_spec_left_out_by_name_says_the_skip_and_why() -> None:
    beta = next(c for c in by_state("skipped") if "v1beta2" in c.title)
    assert beta.reason == (
        f"left out by name (skip {vc.DEFAULT_SKIP!r}): creates objects through a deprecated "
        "beta version of resource.k8s.io, which the collection does not serve (the release's "
        "default API versions only)"
    )


def test_a_spec_outside_the_focus_says_so_and_the_filter_comes_first() -> None:
    passed = [s for s in REPORT[0]["SpecReports"] if s["State"] == "passed"]
    spec = {**passed[0], "State": "skipped"}
    assert (
        vc.skip_reason(spec, focus="ResourceSlice") == "not selected by the focus 'ResourceSlice'"
    )
    assert vc.skip_reason(spec, focus="inline resource claim").startswith("selected but not run")
    alpha = next(s for s in REPORT[0]["SpecReports"] if "control plane" in vc.spec_name(s))
    assert vc.skip_reason(alpha, focus="nothing matches").startswith("needs a feature gate")


def test_a_skip_at_run_time_gives_the_spec_own_message() -> None:
    passed = next(s for s in REPORT[0]["SpecReports"] if s["State"] == "passed")
    message = "Requires at least 2 nodes (not 1)\nmore"
    spec = {**passed, "State": "skipped", "Failure": {"Message": message}}
    assert (
        vc.skip_reason(spec) == "skipped by the spec at run time: Requires at least 2 nodes (not 1)"
    )


def test_specs_of_one_slug_get_distinct_ids() -> None:
    spec = REPORT[0]["SpecReports"][0]
    twin = {**spec, "LeafNodeText": spec["LeafNodeText"] + " [Serial]"}
    ids = [c.id for c in vc.spec_checks([{"SpecReports": [spec, twin]}])]
    assert ids[1] == ids[0] + "-2"


def test_a_failed_suite_node_is_a_failed_check() -> None:
    node = {
        "LeafNodeType": "SynchronizedBeforeSuite",
        "LeafNodeText": "",
        "State": "failed",
        "Failure": {"Message": "no nodes are ready"},
    }
    (check,) = vc.spec_checks([{"SpecReports": [node]}])
    assert check.status == vr.FAIL
    assert check.id == "conformance.synchronizedbeforesuite"
    assert check.problems[0].message == "no nodes are ready"


def test_summarise_counts_specs_and_names_failures():
    report = [
        {
            "SpecReports": [
                _spec("passed", "runs a pod"),
                _spec("skipped", "needs an alpha gate"),
                _spec(
                    "failed",
                    "supports claim and class parameters",
                    Message="Timed out after 300s",
                    Location={
                        "FileName": "k8s.io/kubernetes@v1.37.2/test/e2e/dra/dra.go",
                        "LineNumber": 42,
                    },
                ),
                _spec("timedout", "deletes claims"),
                _spec("failed", "", leaf="SynchronizedBeforeSuite", Message="no nodes"),
            ]
        }
    ]
    got = vc.summarise(report)
    assert (got.total, got.run, got.passed, got.failed, got.skipped) == (4, 3, 1, 3, 1)
    assert got.failures[0]["name"] == (
        "[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] "
        "supports claim and class parameters"
    )
    assert got.failures[0]["location"] == "dra.go:42"
    assert got.failures[1]["state"] == "timedout"
    assert got.failures[2]["message"] == "no nodes"


def test_the_real_report_counts() -> None:
    got = vc.summarise(REPORT)
    assert (got.total, got.run, got.passed, got.failed, got.skipped) == (5, 3, 2, 1, 2)


@pytest.mark.parametrize(
    ("text", "seconds"), [("1h", 3600), ("90m", 5400), ("1h30m", 5400), ("600s", 600)]
)
def test_a_go_duration_is_read_in_seconds(text: str, seconds: int) -> None:
    assert vc.duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1 hour", "1.5h", "0s", "25h", "-1h", "h"])
def test_a_value_that_is_no_usable_duration_is_refused_with_a_fix(text: str) -> None:
    with pytest.raises(ValueError, match="fix: give"):
        vc.duration_seconds(text)


@pytest.mark.parametrize(
    ("git", "release"),
    [("v1.37.2", "1.37.2"), ("v1.36.3+k3s1", "1.36.3"), ("v1.33.13-eks-4f1d2c", "1.33.13")],
)
def test_the_release_comes_from_the_server_git_version(git: str, release: str) -> None:
    assert vc.server_release({"gitVersion": git, "major": "1"}) == release


def test_a_server_version_without_a_release_is_refused() -> None:
    with pytest.raises(ValueError, match="'weird'"):
        vc.server_release({"gitVersion": "weird"})


def namespace(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}, "status": {"phase": "Active"}}


def test_the_run_deletes_only_suite_namespaces_it_created() -> None:
    run = "3c3f5e4a-8a51-4f0e-9b07-2f8d3c6a1d10"
    before = vc.suite_namespaces(
        [namespace("dra-1111", **{"e2e-run": "earlier", "e2e-framework": "dra"})]
    )
    after = [
        namespace("dra-1111", **{"e2e-run": "earlier", "e2e-framework": "dra"}),
        namespace("dra-8410", **{"e2e-run": run, "e2e-framework": "dra"}),
        namespace("dra-compat-groups-77", **{"e2e-run": run, "e2e-framework": "dra-compat-groups"}),
        namespace("team-a", **{"e2e-framework": "dra"}),
        namespace("kube-system"),
    ]
    assert before == {"dra-1111"}
    assert vc.created_by_run(before, after) == ["dra-8410", "dra-compat-groups-77"]
