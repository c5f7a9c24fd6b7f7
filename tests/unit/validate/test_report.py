"""The report model and its renderings: JSON order, exit codes, JUnit (parsed as XML),
Markdown."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr

pytestmark = pytest.mark.unit


def sample() -> dict:
    fail = vr.Check("nodes.gpu-labels", "labels")
    fail.problem("gpu-2", vr.FAIL, "nvidia.com/gpu.present absent")
    fail.fix = "gpufleet up -i INVENTORY"
    vr.finish(fail, "ok")
    warn = vr.Check("claims.pending", "pending")
    warn.problem("default/x", vr.WARN, "no pod uses it")
    vr.finish(warn, "ok")
    ok = vr.Check(
        "versions.kubelet-skew", "skew", evidence=[vr.Evidence("GET /api/v1/nodes", "2 nodes")]
    )
    vr.finish(ok, "2 kubelets within skew")
    skip = vr.skipped("hosts.toolkit", "toolkit", "simulated GPUs")
    return vr.Report(
        [ok, skip, warn, fail], {"duration_s": 1.5, "kubernetes_version": "1.37.2"}
    ).to_dict()


def test_status_counts_and_failures_first() -> None:
    r = sample()
    assert r["status"] == "fail"
    assert r["counts"] == {"fail": 1, "warn": 1, "skip": 1, "pass": 1}
    assert [c["id"] for c in r["checks"]] == [
        "nodes.gpu-labels",
        "claims.pending",
        "hosts.toolkit",
        "versions.kubelet-skew",
    ]
    assert r["checks"][0]["summary"] == "gpu-2: nvidia.com/gpu.present absent"
    assert vr.exit_code(r) == 1


def test_only_warnings_exit_zero() -> None:
    r = sample()
    r["checks"] = [c for c in r["checks"] if c["status"] != "fail"]
    assert vr.exit_code(r) == 0


def test_skip_needs_a_reason_and_status_must_be_known() -> None:
    with pytest.raises(ValueError, match="needs a reason"):
        vr.Check("x.y", "t", vr.SKIP)
    with pytest.raises(ValueError, match="not one of"):
        vr.Check("x.y", "t", "broken")


def test_a_passing_check_has_no_fix() -> None:
    c = vr.Check("x.y", "t", fix="do something")
    assert vr.finish(c, "fine").fix is None


def test_junit_is_xml_with_one_testcase_per_check() -> None:
    root = ET.fromstring(vr.render_junit(sample()))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("4", "1", "1")
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {
        "nodes.gpu-labels",
        "claims.pending",
        "hosts.toolkit",
        "versions.kubelet-skew",
    }
    failure = cases["nodes.gpu-labels"].find("failure")
    assert failure is not None
    assert "FAIL gpu-2: nvidia.com/gpu.present absent" in failure.text
    assert "fix: gpufleet up -i INVENTORY" in failure.text
    assert cases["hosts.toolkit"].find("skipped").get("message") == "simulated GPUs"
    assert cases["claims.pending"].find("failure") is None
    assert "no pod uses it" in cases["claims.pending"].find("system-out").text
    assert (
        "evidence: GET /api/v1/nodes: 2 nodes"
        in cases["versions.kubelet-skew"].find("system-out").text
    )
    suites = [s.get("name") for s in root.iter("testsuite")]
    assert suites == [
        "gpufleet.validate.versions",
        "gpufleet.validate.nodes",
        "gpufleet.validate.hosts",
        "gpufleet.validate.claims",
    ]


def test_markdown_has_a_table_per_area_and_details_of_failures() -> None:
    md = vr.render_markdown(sample())
    assert md.startswith("# gpufleet validate: FAIL\n")
    assert "| FAIL | `nodes.gpu-labels` | gpu-2: nvidia.com/gpu.present absent |" in md
    assert "## versions" in md and "## hosts" in md
    assert "### FAIL `nodes.gpu-labels`: labels" in md
    assert "- fix: gpufleet up -i INVENTORY" in md


def test_merge_keeps_the_last_check_of_an_id() -> None:
    a = sample()
    b = vr.Report([vr.finish(vr.Check("nodes.gpu-labels", "labels"), "fixed")], {"x": 1}).to_dict()
    m = vr.merge(a, b)
    assert m["status"] == "pass"
    assert m["meta"]["x"] == 1 and m["meta"]["kubernetes_version"] == "1.37.2"


def test_text_rendering() -> None:
    lines = vr.render_text(sample())
    assert lines[0] == "validation: FAIL - 1 failed, 1 warnings, 1 skipped, 1 passed"
    assert lines[1] == "FAIL nodes.gpu-labels: gpu-2: nvidia.com/gpu.present absent"


def with_details() -> dict:
    paths = vr.Check(
        "nodes.gpu-paths",
        "paths",
        details=["gpu_h100: declares device-plugin; 2 node(s) advertise device-plugin 2"],
        evidence=[vr.Evidence("GET /api/v1/nodes", "4 nodes")],
    )
    return vr.Report([vr.finish(paths, "1 pool(s) advertise the path they declare")]).to_dict()


def test_details_are_shown_under_a_passing_check_in_every_rendering() -> None:
    report = with_details()
    line = "gpu_h100: declares device-plugin; 2 node(s) advertise device-plugin 2"
    assert report["checks"][0]["details"] == [line]
    assert vr.render_text(report)[1:] == [
        "PASS nodes.gpu-paths: 1 pool(s) advertise the path they declare",
        f"       {line}",
    ]
    md = vr.render_markdown(report)
    assert f"### PASS `nodes.gpu-paths`: paths\n\n- {line}\n" in md
    assert "evidence" not in md  # the evidence of a passing check stays in the JSON
    (case,) = ET.fromstring(vr.render_junit(report)).iter("testcase")
    assert case.find("system-out").text.splitlines() == [
        line,
        "evidence: GET /api/v1/nodes: 4 nodes",
    ]


def test_a_report_without_details_renders_as_before() -> None:
    report = with_details()
    del report["checks"][0]["details"]
    assert vr.render_text(report)[1:] == [
        "PASS nodes.gpu-paths: 1 pool(s) advertise the path they declare"
    ]
    report["checks"][0]["details"] = "not a list"
    assert vr.details_of(report["checks"][0]) == []
    assert "## details" not in vr.render_markdown(report)
