"""Pure parts of the binaries cache: go.mod handling, ldflags, stamps, the releases file."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.build import binaries as b
from gpufleet.build import gomod, release_pins

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "gomod"
KUBERNETES_GOMOD = (DATA / "kubernetes-v1.37.2.go.mod").read_text()
ETCDCTL_GOMOD = (DATA / "etcdctl-v3.5.35.go.mod").read_text()


def _raw_releases() -> dict[str, Any]:
    return yaml.safe_load(release_pins.RELEASES_FILE.read_text())


# --------------------------------------------------------------------------- go.mod


def test_parse_gomod_reads_kubernetes_module_go_and_godebug() -> None:
    mod = gomod.parse_gomod(KUBERNETES_GOMOD)
    assert mod.module == "k8s.io/kubernetes"
    assert mod.go == "1.26.0"
    assert mod.godebug == ("default=go1.26",)
    assert mod.required("k8s.io/api") == "v0.0.0"
    assert mod.required("go.etcd.io/etcd/client/v3") == "v3.7.0"
    # "// indirect" comments do not leak into versions
    assert mod.required("k8s.io/gengo/v2") == "v2.0.0-20260408192533-25e2208e0dc3"


def test_parse_gomod_reads_every_staging_replace() -> None:
    staging = re.findall(r"^\t(k8s\.io/\S+) => \./staging/src/\1$", KUBERNETES_GOMOD, re.M)
    mod = gomod.parse_gomod(KUBERNETES_GOMOD)
    assert len(staging) == 33
    assert [r.old for r in mod.replace] == staging
    assert all(r.is_local and r.new_version is None for r in mod.replace)


def test_parse_gomod_single_line_directives_and_versions_on_both_sides() -> None:
    text = (
        "module example.com/m // the module\n"
        "go 1.22\n"
        "require example.com/a v1.2.3\n"
        'replace "example.com/b" v1.0.0 => example.com/fork v1.0.1\n'
        "exclude example.com/c v0.1.0\n"
    )
    mod = gomod.parse_gomod(text)
    assert mod.module == "example.com/m"
    assert mod.require == (("example.com/a", "v1.2.3"),)
    assert mod.replace == (gomod.Replace("example.com/b", "example.com/fork", "v1.0.0", "v1.0.1"),)
    assert mod.exclude == (("example.com/c", "v0.1.0"),)


def test_parse_gomod_without_module_line_is_an_error() -> None:
    with pytest.raises(ValueError, match="no module directive"):
        gomod.parse_gomod("go 1.22\n")


def test_staging_replaces_point_at_the_published_staging_version() -> None:
    mod = gomod.parse_gomod(KUBERNETES_GOMOD)
    reps = gomod.pinned_replaces(mod, main_version="v1.37.2", staging_version="v0.37.2")
    assert len(reps) == 33
    for rep in reps:
        assert rep.new == rep.old
        assert rep.new_version == "v0.37.2"
    rendered = {r.render() for r in reps}
    assert "k8s.io/client-go => k8s.io/client-go v0.37.2" in rendered
    # not required by kubernetes, still a staging module: replaced too
    assert "k8s.io/sample-controller => k8s.io/sample-controller v0.37.2" in rendered


def test_local_replaces_of_a_tool_take_the_required_version_and_drop_guards() -> None:
    mod = gomod.parse_gomod(ETCDCTL_GOMOD)
    reps = {r.old: r for r in gomod.pinned_replaces(mod, main_version="v3.5.35")}
    assert reps["go.etcd.io/etcd/api/v3"].new_version == "v3.5.35"
    # client/v2 is tagged v2.305.x; the required version wins over the main version
    assert reps["go.etcd.io/etcd/client/v2"].new_version == "v2.305.35"
    # "=> ./FORBIDDEN_DEPENDENCY" guards name modules nobody requires: dropped
    assert "go.etcd.io/etcd" not in reps
    assert "go.etcd.io/etcd/v3" not in reps
    assert "go.etcd.io/tests/v3" not in reps
    assert all(not r.is_local for r in reps.values())


def test_local_replace_of_placeholder_requirement_takes_main_version() -> None:
    mod = gomod.parse_gomod(
        "module example.com/tool\n\nrequire example.com/tool/api v0.0.0\n\n"
        "replace example.com/tool/api => ./api\n"
    )
    (rep,) = gomod.pinned_replaces(mod, main_version="v2.4.2")
    assert rep.render() == "example.com/tool/api => example.com/tool/api v2.4.2"


def test_non_local_replaces_are_restated_unchanged() -> None:
    mod = gomod.parse_gomod("module m\n\nreplace example.com/x => example.com/y v1.0.0\n")
    assert gomod.pinned_replaces(mod, main_version="v1.0.0") == mod.replace


def test_build_gomod_round_trips_through_the_parser() -> None:
    upstream = gomod.parse_gomod(KUBERNETES_GOMOD)
    reps = gomod.pinned_replaces(upstream, main_version="v1.37.2", staging_version="v0.37.2")
    text = gomod.render_build_gomod(
        "gpufleet.local/build/kubernetes", [("k8s.io/kubernetes", "v1.37.2")], [upstream], reps
    )
    built = gomod.parse_gomod(text)
    assert built.module == "gpufleet.local/build/kubernetes"
    assert built.go == "1.26.0"
    assert built.godebug == ("default=go1.26",)
    assert built.require == (("k8s.io/kubernetes", "v1.37.2"),)
    assert built.replace == reps
    assert not any(r.is_local for r in built.replace)


def test_build_gomod_takes_the_highest_go_line_and_each_replace_once() -> None:
    a = gomod.parse_gomod("module a\n\ngo 1.24.0\n")
    c = gomod.parse_gomod("module c\n\ngo 1.26.6\n")
    rep = gomod.Replace("x", "x", new_version="v1.0.0")
    text = gomod.render_build_gomod("m", [("a", "v1.0.0"), ("c", "v1.0.0")], [a, c], [rep, rep])
    assert "\ngo 1.26.6\n" in text
    assert text.count("x => x v1.0.0") == 1


def test_tools_go_imports_each_package_once_behind_the_tools_tag() -> None:
    text = gomod.render_tools_go(["k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kubelet"])
    assert text.startswith("//go:build tools\n")
    assert text.count('_ "k8s.io/kubernetes/cmd/kubelet"') == 1


# --------------------------------------------------------------------------- ldflags


def test_kubernetes_version_variables_cover_both_version_packages() -> None:
    got = gomod.kubernetes_version_variables("1.37.2", "2026-10-27T12:01:04Z")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert got[f"{pkg}.gitVersion"] == "v1.37.2"
        assert got[f"{pkg}.gitMajor"] == "1"
        assert got[f"{pkg}.gitMinor"] == "37"
        assert got[f"{pkg}.gitTreeState"] == "clean"
        assert got[f"{pkg}.buildDate"] == "2026-10-27T12:01:04Z"
        assert f"{pkg}.gitCommit" not in got
    assert len(got) == 10


def test_kubernetes_version_variables_with_commit_and_v_prefix() -> None:
    got = gomod.kubernetes_version_variables("v1.33.13", "2026-01-01T00:00:00Z", commit="abc123")
    assert got["k8s.io/component-base/version.gitVersion"] == "v1.33.13"
    assert got["k8s.io/client-go/pkg/version.gitCommit"] == "abc123"


def test_kubernetes_version_variables_reject_a_minor_only_version() -> None:
    with pytest.raises(ValueError, match=r"'1\.37'"):
        gomod.kubernetes_version_variables("1.37", "2026-01-01T00:00:00Z")


def test_compose_ldflags_strips_and_sorts_variables() -> None:
    flags = gomod.compose_ldflags({"b.y": "2", "a.x": "1"})
    assert flags == "-s -w -X a.x=1 -X b.y=2"
    assert gomod.compose_ldflags({"a.x": "1"}, strip=False) == "-X a.x=1"


def test_compose_ldflags_quotes_values_go_would_split() -> None:
    assert gomod.compose_ldflags({"p.v": "two words"}, strip=False) == "-X 'p.v=two words'"
    assert gomod.compose_ldflags({"p.v": "it's"}, strip=False) == '-X "p.v=it\'s"'
    with pytest.raises(ValueError, match="both quote"):
        gomod.compose_ldflags({"p.v": "'\""})


def test_compose_ldflags_of_a_release_sets_ten_variables() -> None:
    flags = gomod.compose_ldflags(
        gomod.kubernetes_version_variables("1.36.3", "2026-09-01T00:00:00Z")
    )
    assert flags.count("-X ") == 10
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in flags


def test_tool_ldflags_fill_templates_from_the_release_file() -> None:
    helm = release_pins.load_releases().tool("helm")
    got = gomod.render_tool_ldflags(helm, helm.version, {"client_go_minor": "37"})
    assert got["helm.sh/helm/v3/internal/version.version"] == "v" + helm.version
    assert got["helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor"] == "37"


def test_tool_ldflags_name_an_unknown_placeholder() -> None:
    tool = release_pins.Tool("t", "1.0.0", (), (("p.v", "{nope}"),))
    with pytest.raises(release_pins.ReleaseFileError, match=r"tools\.t\.ldflags\.p\.v.*'nope'"):
        gomod.render_tool_ldflags(tool, "1.0.0", {})


# --------------------------------------------------------------------------- stamps


def _target() -> release_pins.Target:
    spec = release_pins.BinarySpec(
        "kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes"
    )
    return release_pins.Target("kubernetes", "1.37.2", spec)


def _inputs(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"go_version": "go1.26.8", "platform": "linux/amd64"}
    args.update(overrides)
    return b.stamp_inputs(_target(), **args)


def test_stamp_matches_the_inputs_it_records() -> None:
    stamp = b.render_stamp(_inputs(), seconds=12.34, size=1000)
    assert b.stamp_matches(stamp, _inputs())
    data = json.loads(stamp)
    assert data["size_bytes"] == 1000
    assert data["build_seconds"] == 12.3


@pytest.mark.parametrize(
    "changed",
    [
        {"go_version": "go1.26.9"},
        {"platform": "linux/arm64"},
        {"source_digest": "0" * 64},
        {"commit": "abc"},
        {"ldflags_templates": (("p.v", "{tag}"),)},
    ],
)
def test_stamp_does_not_match_other_inputs(changed: dict[str, Any]) -> None:
    stamp = b.render_stamp(_inputs(), seconds=1, size=1)
    assert not b.stamp_matches(stamp, _inputs(**changed))


def test_stamp_does_not_match_another_binary_or_version() -> None:
    stamp = b.render_stamp(_inputs(), seconds=1, size=1)
    other = release_pins.Target("kubernetes", "1.36.3", _target().binary)
    assert not b.stamp_matches(
        stamp, b.stamp_inputs(other, go_version="go1.26.8", platform="linux/amd64")
    )


@pytest.mark.parametrize("text", [None, "", "not json", "[]", '{"inputs": 3}'])
def test_missing_or_foreign_stamps_never_match(text: str | None) -> None:
    assert not b.stamp_matches(text, _inputs())


def test_stamp_without_a_go_toolchain_ignores_the_go_version_only() -> None:
    stamp = b.render_stamp(_inputs(), seconds=1, size=1)
    assert b.stamp_matches(stamp, _inputs(go_version=None))
    assert not b.stamp_matches(stamp, _inputs(go_version=None, platform="linux/arm64"))


def test_source_digest_follows_go_sources_but_not_tests(tmp_path: Path) -> None:
    assert b.source_digest(tmp_path) is None
    (tmp_path / "main.go").write_text("package main\n")
    first = b.source_digest(tmp_path)
    (tmp_path / "main_test.go").write_text("package main\n")
    assert b.source_digest(tmp_path) == first
    (tmp_path / "main.go").write_text("package main\n\nfunc main() {}\n")
    assert b.source_digest(tmp_path) != first


# --------------------------------------------------------------------------- releases file


def test_pinned_releases_and_their_etcd() -> None:
    rel = release_pins.load_releases()
    assert rel.default == "1.37.2"
    versions = [r.version for r in rel.releases]
    assert {"1.37.2", "1.36.3", "1.33.13"} <= set(versions)
    assert rel.release().tag == "v1.37.2"
    assert rel.release("v1.36.3").staging_version == "v0.36.3"
    assert rel.etcd_for("1.37.2") == rel.tool("etcd").version
    assert rel.etcd_for("1.33.13").startswith("3.5.")


def test_ci_profile_builds_the_default_release_in_full_and_tools_tests_need() -> None:
    rel = release_pins.load_releases()
    steps = rel.profile("ci").steps
    kube = {s.version: set(s.binaries) for s in steps if s.group == "kubernetes"}
    assert kube[rel.default] == set(rel.full_set)
    assert {"kubectl", "kubeadm", "kubelet"} <= set(rel.full_set)
    # every pinned release: what the integration tests' control planes start
    # (tests/harness/controlplane.py); a kubelet where a test starts one
    # (tests/integration/test_dra_settings_boot.py), and nothing else that no test runs
    from tests.harness.controlplane import REQUIRED_KUBERNETES_BINARIES
    from tests.integration.test_dra_settings_boot import VERSIONS as KUBELET_VERSIONS

    assert set(kube) == {r.version for r in rel.releases if not r.optional}
    for version, names in kube.items():
        assert set(REQUIRED_KUBERNETES_BINARIES) <= names, version
        if version in KUBELET_VERSIONS:
            assert "kubelet" in names, version
        if names != set(rel.full_set):
            assert names == set(REQUIRED_KUBERNETES_BINARIES) | (
                {"kubelet"} if version in KUBELET_VERSIONS else set()
            ), version
    # the lab upgrade's pair (tests/integration/test_upgrade_lab.py) in full: packages of
    # kubeadm, kubelet and kubectl, control-plane images
    from tests.integration.test_upgrade_lab import default_pair

    for version in default_pair():
        assert kube[version] == set(rel.full_set), version
    assert {s.group for s in steps if s.group != "kubernetes"} == {
        "etcd",
        "kwok",
        "helm",
        "containerd",
        "nvidia-container-toolkit",
        "cri-tools",
        "prometheus",
        "kueue",
    }
    # every containerd release of the matrix: the daemon and its runc shim
    matrix = {s.version: s.binaries for s in steps if s.group == "containerd"}
    tool = rel.tool("containerd")
    assert set(matrix) == set(tool.versions)
    assert all(matrix[v] == ("containerd", "containerd-shim-runc-v2") for v, _ in tool.matrix)
    # the small tools others wait for come first
    assert [s.group for s in steps[:2]] == ["etcd", "kwok"]


def test_unknown_release_in_a_profile_is_named() -> None:
    data = _raw_releases()
    data["profiles"]["ci"]["steps"][2]["kubernetes"] = "1.99.0"
    with pytest.raises(release_pins.ReleaseFileError) as err:
        release_pins.parse_releases(data, "releases.yaml")
    msg = str(err.value)
    assert "'1.99.0'" in msg
    assert "profiles.ci.steps[2].kubernetes" in msg
    assert "1.37.2" in msg  # the pinned releases are listed as the fix


def test_unknown_default_release_is_named() -> None:
    data = _raw_releases()
    data["kubernetes"]["default"] = "1.38.0"
    with pytest.raises(release_pins.ReleaseFileError, match=r"kubernetes\.default = '1\.38\.0'"):
        release_pins.parse_releases(data)


def test_unknown_component_and_tool_in_a_profile_are_named() -> None:
    data = _raw_releases()
    data["profiles"]["ci"]["steps"][3]["components"] = ["kube-apiserver", "kube-dns"]
    with pytest.raises(release_pins.ReleaseFileError, match="'kube-dns'"):
        release_pins.parse_releases(data)
    data = _raw_releases()
    data["profiles"]["ci"]["steps"][0] = {"tool": "crio"}
    with pytest.raises(release_pins.ReleaseFileError, match=r"steps\[0\]\.tool = 'crio'"):
        release_pins.parse_releases(data)


def test_a_version_that_is_not_major_minor_patch_is_rejected() -> None:
    data = _raw_releases()
    data["kubernetes"]["releases"][0]["version"] = 1.37  # unquoted YAML float
    with pytest.raises(release_pins.ReleaseFileError, match=r"releases\[0\]\.version = 1\.37"):
        release_pins.parse_releases(data)


def test_a_release_pinned_twice_is_rejected() -> None:
    data = _raw_releases()
    data["kubernetes"]["releases"].append(copy.deepcopy(data["kubernetes"]["releases"][0]))
    with pytest.raises(release_pins.ReleaseFileError, match="pinned twice"):
        release_pins.parse_releases(data)


def test_default_etcd_must_be_the_default_releases_etcd() -> None:
    data = _raw_releases()
    data["tools"]["etcd"]["version"] = "3.5.35"
    with pytest.raises(release_pins.ReleaseFileError, match=r"tools\.etcd\.version = '3\.5\.35'"):
        release_pins.parse_releases(data)


def test_a_package_outside_its_module_is_rejected() -> None:
    data = _raw_releases()
    data["tools"]["kwok"]["binaries"]["kwok"]["package"] = "sigs.k8s.io/kind/cmd/kind"
    with pytest.raises(
        release_pins.ReleaseFileError, match=r"tools\.kwok\.binaries\.kwok\.package"
    ):
        release_pins.parse_releases(data)


def test_missing_section_is_named() -> None:
    data = _raw_releases()
    del data["tools"]
    with pytest.raises(release_pins.ReleaseFileError, match="'tools'"):
        release_pins.parse_releases(data)


def test_lookups_of_unknown_names_name_them() -> None:
    rel = release_pins.load_releases()
    with pytest.raises(release_pins.UnknownNameError, match=r"'1\.99\.0'.*1\.37\.2"):
        rel.release("1.99.0")
    with pytest.raises(release_pins.UnknownNameError, match="'kube-dns'"):
        rel.group_of("kube-dns")
    with pytest.raises(release_pins.UnknownNameError, match="'ci-fast'"):
        rel.profile("ci-fast")


# --------------------------------------------------------------------------- selection, paths


def test_default_selection_is_the_ci_profile() -> None:
    rel = release_pins.load_releases()
    assert b.select_steps(rel) == list(rel.profile("ci").steps)


def test_etcd_for_named_releases_comes_first() -> None:
    rel = release_pins.load_releases()
    steps = b.select_steps(
        rel, kubernetes=["1.33.13"], components=["kubeadm"], tools=["helm", "etcd"]
    )
    assert [(s.group, s.version, s.binaries) for s in steps] == [
        ("etcd", rel.etcd_for("1.33.13"), ("etcd", "etcdctl")),
        ("kubernetes", "1.33.13", ("kubeadm",)),
        ("helm", rel.tool("helm").version, ("helm",)),
    ]


def test_components_alone_select_the_default_release() -> None:
    rel = release_pins.load_releases()
    (step,) = b.select_steps(rel, components=["kubectl"])
    assert (step.group, step.version, step.binaries) == ("kubernetes", rel.default, ("kubectl",))


def test_selection_of_an_unknown_release_names_it() -> None:
    with pytest.raises(release_pins.UnknownNameError, match=r"'1\.40\.0'"):
        b.select_steps(release_pins.load_releases(), kubernetes=["1.40.0"])


def test_plan_lists_each_binary_once_in_step_order() -> None:
    rel = release_pins.load_releases()
    steps = [
        release_pins.Step("etcd", "3.7.3", ("etcd", "etcdctl")),
        release_pins.Step("kubernetes", "1.37.2", ("kubectl",)),
        release_pins.Step("etcd", "3.7.3", ("etcd",)),
    ]
    assert [t.label for t in b.plan_steps(steps, rel)] == [
        "etcd v3.7.3",
        "etcdctl v3.7.3",
        "kubectl v1.37.2",
    ]


def test_binary_paths_follow_the_cache_layout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    rel = release_pins.load_releases()
    assert b.cache_root() == tmp_path
    assert b.binary_path("kube-apiserver") == tmp_path / "bin/kubernetes/v1.37.2/kube-apiserver"
    assert b.binary_path("kubelet", "v1.36.3") == tmp_path / "bin/kubernetes/v1.36.3/kubelet"
    etcd = rel.tool("etcd").version
    assert b.binary_path("etcdctl") == tmp_path / f"bin/etcd/v{etcd}/etcdctl"
    assert b.binary_path("kwok") == tmp_path / f"bin/kwok/v{rel.tool('kwok').version}/kwok"
    assert not b.is_cached("kwok")


def test_cache_root_defaults_to_the_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("GPUFLEET_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert b.cache_root() == tmp_path / ".cache" / "gpufleet"


def test_binary_path_of_an_unpinned_release_names_it() -> None:
    with pytest.raises(release_pins.UnknownNameError, match=r"'1\.30\.0'"):
        b.binary_path("kubelet", "1.30.0")


def test_a_prerelease_with_its_go_toolchain_can_be_pinned() -> None:
    data = _raw_releases()
    data["kubernetes"]["releases"].append(
        {"version": "1.38.0-rc.1", "etcd": "3.7.3", "optional": True}
    )
    data["go_builds"] = [{"version": "1.38.0-rc.1", "go_toolchain": "go1.27.3"}]
    rel = release_pins.parse_releases(data).release("1.38.0-rc.1")
    assert rel.minor == 38 and rel.staging_version == "v0.38.0-rc.1"
    assert rel.go_toolchain == "go1.27.3"
    assert gomod.go_process_env(rel.go_toolchain)["GOTOOLCHAIN"] == "go1.27.3"
    assert gomod.go_process_env()["GOTOOLCHAIN"] == "local"
    variables = gomod.kubernetes_version_variables(rel.version, "2026-12-01T00:00:00Z")
    assert variables["k8s.io/component-base/version.gitVersion"] == "v1.38.0-rc.1"
    assert variables["k8s.io/component-base/version.gitMinor"] == "38"
    for bad in ("1.38.0-gamma.1", "1.38.0-rc", "1.38"):
        data["kubernetes"]["releases"][-1]["version"] = bad
        with pytest.raises(
            release_pins.ReleaseFileError, match=r"pre-release such as 1\.38\.0-rc\.1"
        ):
            release_pins.parse_releases(data)


def test_a_toolchain_under_kubernetes_releases_is_sent_to_go_builds() -> None:
    data = _raw_releases()
    data["kubernetes"]["releases"][0]["go_toolchain"] = "go1.27.3"
    with pytest.raises(
        release_pins.ReleaseFileError, match=r"releases\[0\]\.go_toolchain.*go_builds"
    ):
        release_pins.parse_releases(data)


def test_substitutions_come_first_in_the_build_module() -> None:
    subs = gomod.substitution_replaces([("sigs.k8s.io/structured-merge-diff/v7 v7.0.1", "v7.0.0")])
    text = gomod.render_build_gomod(
        "gpufleet.local/build/x",
        [("k8s.io/kubernetes", "v1.38.0-beta.0")],
        [gomod.parse_gomod(KUBERNETES_GOMOD)],
        [*subs, gomod.Replace("sigs.k8s.io/structured-merge-diff/v7", "example.com/other")],
    )
    lines = [line.strip() for line in text.splitlines()]
    assert (
        "sigs.k8s.io/structured-merge-diff/v7 v7.0.1 => sigs.k8s.io/structured-merge-diff/v7 v7.0.0"
        in lines
    )
    assert not any("example.com/other" in line for line in lines)
    assert gomod.parse_gomod(text).replace[0].new_version == "v7.0.0"


def test_a_stand_in_module_of_the_repository_is_copied_and_replaced_locally(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    src = root / "lab" / "go" / "substitute" / "wrappers"
    (src / "pkg" / "w").mkdir(parents=True)
    (src / "go.mod").write_text("module example.com/wrappers\n\ngo 1.24.0\n")
    (src / "pkg" / "w" / "w.go").write_text("package w\n")
    (src / "pkg" / "w" / "w_test.go").write_text("package w\n")
    (src / "README.md").write_text("what it leaves out\n")
    subs = (
        ("example.com/served v1.0.1", "v1.0.0"),
        ("example.com/wrappers v1.0.0", "lab/go/substitute/wrappers"),
    )
    rendered = [r.render() for r in gomod.substitution_replaces(subs)]
    assert rendered == [
        "example.com/served v1.0.1 => example.com/served v1.0.0",
        "example.com/wrappers v1.0.0 => ./substitute/wrappers",
    ]
    build = tmp_path / "build"
    (build / "substitute" / "wrappers" / "stale.go").parent.mkdir(parents=True)
    (build / "substitute" / "wrappers" / "stale.go").write_text("package stale\n")
    gomod.write_substitutes(build, subs, root, b.BuildError)
    copied = sorted(
        p.relative_to(build).as_posix() for p in (build / "substitute").rglob("*") if p.is_file()
    )
    assert copied == ["substitute/wrappers/go.mod", "substitute/wrappers/pkg/w/w.go"]

    first = gomod.substitutes_digest(subs, root, b.BuildError)
    assert first is not None
    assert gomod.substitutes_digest(subs[:1], root, b.BuildError) is None
    (src / "pkg" / "w" / "w_test.go").write_text("package w // changed\n")
    (src / "README.md").write_text("changed\n")
    assert gomod.substitutes_digest(subs, root, b.BuildError) == first
    (src / "pkg" / "w" / "w.go").write_text("package w // changed\n")
    assert gomod.substitutes_digest(subs, root, b.BuildError) != first

    with pytest.raises(b.BuildError, match=r"lab/go/substitute/gone/go\.mod is missing"):
        gomod.write_substitutes(
            build, [("example.com/gone v1.0.0", "lab/go/substitute/gone")], root, b.BuildError
        )


def test_the_1_38_kubelet_builds_against_the_repository_stand_in() -> None:
    (rel,) = [r for r in release_pins.load_releases().releases if r.version.startswith("1.38.")]
    assert rel.go_toolchain == "go1.27.3"
    assert rel.local_substitutes == (
        ("sigs.k8s.io/iptables-wrappers v1.0.0", "lab/go/substitute/iptables-wrappers"),
    )
    stand_in = b.REPO_ROOT / rel.local_substitutes[0][1]
    assert "module sigs.k8s.io/iptables-wrappers\n" in (stand_in / "go.mod").read_text()
    target = b.resolve_target("kubelet", rel.version)
    inputs = b._target_inputs(target, release_pins.load_releases())
    assert inputs["substitutes"] == gomod.substitutes_digest(
        rel.substitute, b.REPO_ROOT, b.BuildError
    )
    # releases without a stand-in keep the stamps they were built with
    assert "substitutes" not in b._target_inputs(b.resolve_target("kubelet", "1.37.2"), _rel())


def _rel() -> release_pins.Releases:
    return release_pins.load_releases()


@pytest.mark.parametrize(
    "stand_in", ["../outside", "/abs/path", "lab//go", "./lab/go", "1.0.0", "lab\\go"]
)
def test_a_substitute_is_a_version_or_a_directory_inside_the_repository(stand_in: str) -> None:
    data = {"go_builds": [{"version": "1.38.0", "substitute": {"example.com/m v1.0.0": stand_in}}]}
    with pytest.raises(release_pins.ReleaseFileError, match=r"a directory of the\s+repository"):
        release_pins.parse_go_builds(data)


def test_a_matrix_release_in_another_module_moves_package_and_ldflags() -> None:
    rel = release_pins.load_releases()
    old = b.resolve_target("containerd", "1.7.35", rel)
    assert old.binary.module == "github.com/containerd/containerd"
    assert old.binary.package == "github.com/containerd/containerd/cmd/containerd"
    keys = [k for k, _ in rel.tool("containerd").at("1.7.35").ldflags]
    assert keys and all(k.startswith("github.com/containerd/containerd/version.") for k in keys)
    # containerd --version prints the package: the module of that release
    assert (
        dict(rel.tool("containerd").at("1.7.35").ldflags)[
            "github.com/containerd/containerd/version.Package"
        ]
        == "github.com/containerd/containerd"
    )
    same = b.resolve_target("containerd", "2.1.9", rel)
    assert same.binary.package == "github.com/containerd/containerd/v2/cmd/containerd"
    # a version outside the matrix keeps the pinned module (etcd at a release's version)
    assert b.resolve_target("etcd", "3.6.16", rel).binary.module == "go.etcd.io/etcd/server/v3"


def test_matrix_entries_are_judged() -> None:
    base = {
        "kubernetes": {
            "module": "k8s.io/kubernetes",
            "default": "1.37.2",
            "components": {"kubelet": "cmd/kubelet"},
            "full_set": ["kubelet"],
            "releases": [{"version": "1.37.2", "etcd": "3.7.3"}],
        },
        "tools": {
            "ctd": {
                "version": "2.4.2",
                "module": "example.com/ctd/v2",
                "binaries": {"ctd": {"package": "example.com/ctd/v2/cmd/ctd"}},
                "matrix": [{"version": "2.4.2"}],
            }
        },
        "profiles": {"ci": {"steps": [{"tool": "ctd", "matrix": True}]}},
    }
    with pytest.raises(
        release_pins.ReleaseFileError, match=r"tools.ctd.matrix\[0\].version.*twice"
    ):
        release_pins.parse_releases(base)
    base["tools"]["ctd"]["matrix"] = [{"version": "2.1.9"}]
    base["tools"]["ctd"]["cgo"] = "yes"
    with pytest.raises(release_pins.ReleaseFileError, match=r"tools.ctd.cgo.*true or false"):
        release_pins.parse_releases(base)
    base["tools"]["ctd"]["cgo"] = True
    parsed = release_pins.parse_releases(base)
    assert [(s.group, s.version) for s in parsed.profile("ci").steps] == [("ctd", "2.1.9")]
    assert parsed.tool("ctd").cgo
    assert (
        b.stamp_inputs(
            b.resolve_target("ctd", "2.1.9", parsed),
            go_version=None,
            platform="x",
            cgo=True,
        )["cgo"]
        is True
    )


# --------------------------------------------------------------------------- link groups


@pytest.mark.parametrize(
    ("package", "name"),
    [
        ("k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),
        ("helm.sh/helm/v3/cmd/helm", "helm"),
        ("example.com/tool/cmd/tool/v2", "tool"),
        ("./cmd/gpufleet-featuredump", "gpufleet-featuredump"),
        ("example.com/v3", "example.com"),
    ],
)
def test_go_output_name_is_the_last_element_before_a_major_version(package: str, name: str) -> None:
    assert b.go_output_name(package) == name


def _spec_target(name: str, package: str, tags: tuple[str, ...] = ()) -> release_pins.Target:
    spec = release_pins.BinarySpec(name=name, package=package, module="example.com", tags=tags)
    return release_pins.Target("example", "1.0.0", spec)


def test_a_release_builds_its_binaries_in_one_group() -> None:
    rel = release_pins.load_releases()
    steps = [s for s in rel.profile("main").steps if s.group == "kubernetes"]
    targets = b.plan_steps(steps, rel)
    groups = b.link_groups(targets, lambda t: "same")
    assert [[t.binary.name for t in g] for g in groups] == [[t.binary.name for t in targets]]
    assert len(targets) >= 6


def test_other_tags_ldflags_or_output_names_build_apart() -> None:
    apiserver = _spec_target("kube-apiserver", "example.com/cmd/kube-apiserver")
    tagged = _spec_target("kubelet", "example.com/cmd/kubelet", tags=("providerless",))
    renamed = _spec_target("ctk", "example.com/cmd/nvidia-ctk")
    clash = _spec_target("kube-apiserver", "example.com/other/kube-apiserver")
    other_flags = _spec_target("kubeadm", "example.com/cmd/kubeadm")
    groups = b.link_groups(
        [apiserver, tagged, renamed, clash, other_flags],
        lambda t: "-X b" if t is other_flags else "-X a",
    )
    assert groups == [[apiserver], [tagged], [other_flags], [renamed], [clash]]


# --------------------------------------------------------------------------- module source


def test_module_source_is_the_directory_go_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def run_go(args: list[str], cwd: Path | None = None, **_: Any) -> str:
        calls.append(list(args))
        assert cwd == tmp_path / "build" and cwd.is_dir()
        return json.dumps({"Path": "example.com/m", "Version": "v1.2.3", "Dir": "/mod/m@v1.2.3"})

    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    monkeypatch.setattr(b, "_run_go", run_go)
    assert b.module_source("example.com/m", "v1.2.3") == Path("/mod/m@v1.2.3")
    assert calls == [["mod", "download", "-json", "example.com/m@v1.2.3"]]


def test_module_source_names_what_the_proxy_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = json.dumps({"Path": "example.com/m", "Error": "example.com/m@v9.9.9: not found"})
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    monkeypatch.setattr(b, "_run_go", lambda *a, **k: refused)
    with pytest.raises(b.BuildError, match=r"go mod download example.com/m@v9.9.9: .*not found"):
        b.module_source("example.com/m", "v9.9.9")


def test_go_commands_get_the_build_gc_target_unless_the_caller_set_one(monkeypatch) -> None:
    monkeypatch.delenv("GOGC", raising=False)
    env = gomod.go_process_env(cgo=True)
    assert env["GOGC"] == gomod.GOGC == "400"
    assert env["CGO_ENABLED"] == "1" and env["GOWORK"] == "off"
    assert gomod.go_process_env()["CGO_ENABLED"] == "0"
    monkeypatch.setenv("GOGC", "150")
    assert gomod.go_process_env()["GOGC"] == "150"


def test_build_holds_the_lock_one_go_step_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two Go steps (a module's preparation, one go build) the build lock is free,
    so another process's small build waits for one step only; a target that another
    process built while this one waited is not built again."""
    import fcntl

    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    rel = release_pins.load_releases()
    steps = [s for s in rel.profile("ci").steps if s.group == "kubernetes"][:2]
    targets = [b.resolve_target(n, s.version, rel) for s in steps for n in s.binaries[:1]]
    assert len({t.version for t in targets}) == 2
    lock = tmp_path / "build" / ".lock"
    events: list[str] = []
    built_elsewhere = {targets[1].label}

    def held_by_us() -> bool:
        with open(lock, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
            return False

    def prepare(group: str, version: str, *_: Any) -> Any:
        events.append(f"prepare {version} locked={held_by_us()}")
        return object()

    def build_group(group: list[Any], *_: Any) -> list[Any]:
        events.append(f"build {[t.version for t in group]} locked={held_by_us()}")
        return [b.BuildResult(t, tmp_path / t.binary.name, "built") for t in group]

    def cached(target: Any, _rel: Any) -> bool:
        # not cached when the build starts; the second release's binary appears (another
        # process built it) once the first go build is done
        return target.label in built_elsewhere and any(e.startswith("build") for e in events)

    monkeypatch.setattr(b, "_require_go", lambda: None)
    monkeypatch.setattr(b, "_prepare_module", prepare)
    monkeypatch.setattr(b, "_build_group", build_group)
    monkeypatch.setattr(b, "target_is_cached", cached)
    monkeypatch.setattr(b, "_ldflags", lambda *_a, **_k: "")
    grouped = b.link_groups

    def link_groups(*args: Any) -> Any:
        events.append(f"between steps locked={held_by_us()}")
        return grouped(*args)

    monkeypatch.setattr(b, "link_groups", link_groups)
    (tmp_path / targets[1].binary.name).write_bytes(b"x")
    monkeypatch.setattr(b, "_bin_dir", lambda *_a: tmp_path)

    results = b.build(targets, rel, log=lambda _m: None)
    assert events == [
        f"prepare {targets[0].version} locked=True",
        f"prepare {targets[1].version} locked=True",
        "between steps locked=False",
        f"build {[targets[0].version]} locked=True",
        "between steps locked=False",
    ]
    assert not held_by_us()
    assert [(r.target.label, r.status) for r in results] == [
        (targets[0].label, "built"),
        (targets[1].label, "cached"),
    ]
