"""The DRA e2e run's pure parts: which images the suite's table asks for, the Ginkgo
report summary, the suite's arguments and symbolic links in image layers."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from gpufleet.lab import dra_e2e_run, e2e_images, images

pytestmark = pytest.mark.unit

# `dra-e2e.test --list-images` of 1.37.2, the lines these rules look at (and one other)
LISTED_1_37_2 = [
    "registry.k8s.io/e2e-test-images/busybox:1.37.0-2",
    "registry.k8s.io/pause:3.10.2",
    "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1",
    "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
    "registry.k8s.io/e2e-test-images/agnhost:2.66.1",
]


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


def test_classify_names_every_busybox_the_highest_hostpathplugin_and_pause():
    suite = e2e_images.classify(LISTED_1_37_2)
    assert suite.busybox == (
        "registry.k8s.io/e2e-test-images/busybox:1.37.0-2",
        "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
    )
    assert suite.hostpath == "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1"
    assert suite.pause == ("registry.k8s.io/pause:3.10.2",)
    assert suite.others == ("registry.k8s.io/e2e-test-images/agnhost:2.66.1",)


def test_classify_picks_the_highest_hostpathplugin_as_deploy_go_does():
    listed = [*LISTED_1_37_2, "registry.k8s.io/sig-storage/hostpathplugin:v1.9.0"]
    assert e2e_images.classify(listed).hostpath.endswith(":v1.17.1")
    assert "registry.k8s.io/sig-storage/hostpathplugin:v1.9.0" in e2e_images.classify(listed).others


def test_classify_refuses_a_list_without_the_proxy_image():
    with pytest.raises(e2e_images.E2EImageError, match="hostpathplugin"):
        e2e_images.classify(["registry.k8s.io/e2e-test-images/busybox:1.37.0-2"])


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
    got = dra_e2e_run.summarise(report)
    assert (got.total, got.run, got.passed, got.failed, got.skipped) == (4, 3, 1, 3, 1)
    assert got.failures[0]["name"] == (
        "[sig-node] [DRA] kubelet [Feature:DynamicResourceAllocation] "
        "supports claim and class parameters"
    )
    assert got.failures[0]["location"] == "dra.go:42"
    assert got.failures[1]["state"] == "timedout"
    assert got.failures[2]["message"] == "no nodes"


def test_suite_args_carry_the_filter_and_both_reports(tmp_path: Path):
    args = dra_e2e_run.suite_args(
        kubeconfig=Path("/k"),
        report_dir=tmp_path,
        label_filter=dra_e2e_run.DEFAULT_LABEL_FILTER,
        focus="Conformance",
        skip=dra_e2e_run.DEFAULT_SKIP,
        timeout="1h",
    )
    assert "-ginkgo.label-filter=DRA && !Feature:OffByDefault && !Flaky" in args
    assert f"-ginkgo.junit-report={tmp_path / 'junit.xml'}" in args
    assert f"-ginkgo.json-report={tmp_path / 'ginkgo.json'}" in args
    assert "-ginkgo.focus=Conformance" in args
    assert "--kubeconfig=/k" in args
    assert "-ginkgo.skip=with v1beta1 API|with v1beta2 API" in args


def test_a_symlink_in_a_layer_points_at_its_target(tmp_path: Path):
    out = tmp_path / "layer.tar"
    images.write_layer(
        [
            images.ImageFile(path="bin/busybox", data=b"\x7fELF"),
            images.ImageFile(path="bin/sh", symlink="busybox"),
        ],
        out,
    )
    with tarfile.open(out) as layer:
        sh = layer.getmember("bin/sh")
        assert sh.issym() and sh.linkname == "busybox"
        assert layer.getmember("bin/busybox").isfile()


def test_a_symlink_changes_the_file_digest_and_a_plain_file_keeps_it():
    plain = images.ImageFile(path="bin/sh", data=b"x")
    assert plain.digest() == images.ImageFile(path="bin/sh", data=b"x", symlink=None).digest()
    assert images.ImageFile(path="bin/sh", symlink="busybox").digest() != plain.digest()


def test_suite_args_on_several_processes_are_ginkgo_run_arguments(tmp_path: Path):
    args = dra_e2e_run.suite_args(
        kubeconfig=Path("/k"),
        report_dir=tmp_path,
        label_filter="DRA",
        focus=None,
        skip=None,
        timeout="1h",
        procs=3,
    )
    assert args[:2] == ["run", "--procs=3"]
    assert "--label-filter=DRA" in args
    # Ginkgo's flags before the binary, the suite's own after "--"
    assert args.index("{binary}") + 1 == args.index("--")
    assert args[args.index("--") + 1 :] == ["--kubeconfig=/k", "--provider=local"]
    assert not any(a.startswith("-ginkgo.") for a in args)
