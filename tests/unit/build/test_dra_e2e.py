"""The DRA e2e suite's binary without building it: which images its table asks for, the
suite's command line, the binary of a release found or refused with the command that
builds it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import conformance as vc

from gpufleet.build import dra_e2e, release_pins

pytestmark = pytest.mark.unit

# `dra-e2e.test --list-images` of 1.37.2, the lines these rules look at (and one other)
LISTED_1_37_2 = [
    "registry.k8s.io/e2e-test-images/busybox:1.37.0-2",
    "registry.k8s.io/pause:3.10.2",
    "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1",
    "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
    "registry.k8s.io/e2e-test-images/agnhost:2.66.1",
]


def test_classify_names_every_busybox_the_highest_hostpathplugin_and_pause():
    suite = dra_e2e.classify(LISTED_1_37_2)
    assert suite.busybox == (
        "registry.k8s.io/e2e-test-images/busybox:1.37.0-2",
        "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
    )
    assert suite.hostpath == "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1"
    assert suite.pause == ("registry.k8s.io/pause:3.10.2",)
    assert suite.others == ("registry.k8s.io/e2e-test-images/agnhost:2.66.1",)


def test_classify_picks_the_highest_hostpathplugin_as_deploy_go_does():
    listed = [*LISTED_1_37_2, "registry.k8s.io/sig-storage/hostpathplugin:v1.9.0"]
    assert dra_e2e.classify(listed).hostpath.endswith(":v1.17.1")
    assert "registry.k8s.io/sig-storage/hostpathplugin:v1.9.0" in dra_e2e.classify(listed).others


def test_classify_refuses_a_list_without_the_proxy_image():
    with pytest.raises(dra_e2e.DraE2EError, match="hostpathplugin"):
        dra_e2e.classify(["registry.k8s.io/e2e-test-images/busybox:1.37.0-2"])


def test_suite_args_carry_the_filter_and_both_reports(tmp_path: Path):
    args = dra_e2e.suite_args(
        kubeconfig=Path("/k"),
        report_dir=tmp_path,
        label_filter=vc.DEFAULT_LABEL_FILTER,
        focus="Conformance",
        skip=vc.DEFAULT_SKIP,
        timeout="1h",
    )
    assert "-ginkgo.label-filter=DRA && !Feature:OffByDefault && !Flaky" in args
    assert f"-ginkgo.junit-report={tmp_path / 'junit.xml'}" in args
    assert f"-ginkgo.json-report={tmp_path / 'ginkgo.json'}" in args
    assert "-ginkgo.focus=Conformance" in args
    assert "--kubeconfig=/k" in args
    assert "-ginkgo.skip=with v1beta1 API|with v1beta2 API" in args


def test_suite_args_on_several_processes_are_ginkgo_run_arguments(tmp_path: Path):
    args = dra_e2e.suite_args(
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


def test_suite_argv_fills_in_the_binary_for_ginkgo_and_runs_the_binary_alone(tmp_path: Path):
    binary = tmp_path / "v1.37.2" / "dra-e2e.test"
    several = dra_e2e.suite_args(
        kubeconfig=Path("/k"), report_dir=tmp_path, label_filter="DRA", focus=None,
        skip=None, timeout="1h", procs=2,
    )  # fmt: skip
    argv = dra_e2e.suite_argv(binary, several)
    assert argv[0] == str(binary.with_name("ginkgo"))
    assert argv[argv.index("--") - 1] == str(binary)
    one = dra_e2e.suite_args(
        kubeconfig=Path("/k"), report_dir=tmp_path, label_filter="DRA", focus=None,
        skip=None, timeout="1h",
    )  # fmt: skip
    assert dra_e2e.suite_argv(binary, one)[:2] == [str(binary), "--kubeconfig=/k"]


def test_a_release_not_built_is_refused_with_the_command_that_builds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    with pytest.raises(dra_e2e.DraE2EError) as refused:
        dra_e2e.built_binary("1.37.2")
    message = str(refused.value)
    command = "python -m gpufleet.build.dra_e2e build --kubernetes 1.37.2"
    assert f"fix: {command} " in message
    assert str(tmp_path / "bin" / "dra-e2e" / "v1.37.2" / "dra-e2e.test") in message
    # the command is this module's own: its words parse as its CLI's build command
    words = shlex.split(command)[3:]
    assert words[0] == "build"
    sub = dra_e2e.cli.get_command(dra_e2e.cli.make_context("dra_e2e", ["build"]), "build")
    assert sub.make_context("build", words[1:]).params == {"version": "1.37.2"}


def test_a_built_release_is_found_without_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    binary = dra_e2e.binary_path("1.37.2")
    binary.parent.mkdir(parents=True)
    for name in ("dra-e2e.test", "ginkgo"):
        binary.with_name(name).write_bytes(b"\x7fELF")
    assert dra_e2e.built_binary("1.37.2") == binary


def test_a_release_that_is_not_pinned_is_refused_naming_the_pinned_ones():
    pinned = [r.version for r in release_pins.load_releases().releases]
    with pytest.raises(dra_e2e.DraE2EError) as refused:
        dra_e2e.built_binary("1.20.0")
    assert "unknown Kubernetes release '1.20.0'" in str(refused.value)
    assert f"pinned releases are {', '.join(pinned)}" in str(refused.value)
