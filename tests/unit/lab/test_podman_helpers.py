"""Pure parts of gpufleet.lab.podman: recipe tag, podman info parsing, settings checks,
node run arguments."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from gpufleet.lab import podman
from gpufleet.lab.podman import (
    PodmanHost,
    RecipeFile,
    check_settings,
    containers_conf_paths,
    effective_default_ulimits,
    node_run_args,
    parse_podman_info,
    parse_ulimit,
    recipe_files,
    recipe_tag,
    tag_from_files,
)

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "podman"
REPO = Path(__file__).resolve().parents[3]
PODMAN_INFO = DATA / "podman-info-4.3.1-debian12.json"
DEBIAN_CONTAINERS_CONF = DATA / "containers.conf-debian12"


def _write_recipe(root: Path) -> Path:
    recipe = root / "image"
    (recipe / "rootfs" / "etc").mkdir(parents=True)
    (recipe / "packages.txt").write_text("systemd\n")
    (recipe / "build-rootfs").write_text("#!/bin/sh\n")
    (recipe / "build-rootfs").chmod(0o755)
    (recipe / "rootfs" / "etc" / "x.conf").write_text("a=1\n")
    return recipe


def _prepare_script_conf() -> str:
    """The containers.conf drop-in that lab/prepare-podman writes (its heredoc)."""
    script = (REPO / "lab" / "prepare-podman").read_text()
    m = re.search(r"<<'CONF'\n(.*?)\nCONF\n", script, re.S)
    assert m, "lab/prepare-podman no longer writes its drop-in from a <<'CONF' heredoc"
    return m.group(1)


# --------------------------------------------------------------------------- recipe tag


def test_recipe_tag_matches_the_listing_computed_with_sha256sum(tmp_path: Path) -> None:
    # Value from lab/prepare-podman --print-tag (find | sort | sha256sum) on this recipe.
    assert recipe_tag(_write_recipe(tmp_path)) == "541ec0d05038"


def test_recipe_tag_changes_when_a_file_changes(tmp_path: Path) -> None:
    recipe = _write_recipe(tmp_path)
    before = recipe_tag(recipe)
    (recipe / "packages.txt").write_text("systemd\ncontainerd\n")
    after = recipe_tag(recipe)
    assert after != before
    (recipe / "packages.txt").write_text("systemd\n")
    assert recipe_tag(recipe) == before


def test_recipe_tag_changes_when_a_file_is_added_renamed_or_made_executable(
    tmp_path: Path,
) -> None:
    recipe = _write_recipe(tmp_path)
    seen = {recipe_tag(recipe)}
    (recipe / "rootfs" / "etc" / "y.conf").write_text("b=2\n")
    seen.add(recipe_tag(recipe))
    (recipe / "rootfs" / "etc" / "y.conf").rename(recipe / "rootfs" / "etc" / "z.conf")
    seen.add(recipe_tag(recipe))
    (recipe / "rootfs" / "etc" / "z.conf").chmod(0o755)
    seen.add(recipe_tag(recipe))
    assert len(seen) == 4


def test_recipe_tag_ignores_symlinks_and_file_order(tmp_path: Path) -> None:
    recipe = _write_recipe(tmp_path)
    before = recipe_tag(recipe)
    (recipe / "link").symlink_to(recipe / "packages.txt")
    assert recipe_tag(recipe) == before
    files = recipe_files(recipe)
    assert tag_from_files(reversed(files)) == tag_from_files(files) == before


def test_recipe_files_report_relative_paths_and_modes(tmp_path: Path) -> None:
    files = {f.path: f for f in recipe_files(_write_recipe(tmp_path))}
    assert set(files) == {"packages.txt", "build-rootfs", "rootfs/etc/x.conf"}
    assert files["build-rootfs"].executable is True
    assert files["packages.txt"].executable is False
    # `printf 'systemd\n' | sha256sum`
    assert files["packages.txt"].sha256 == (
        "12e6ff4feb1b552a431b41d3935d33f08f9d75ddb8a88f645f4cf231bc05e820"
    )


def test_tag_from_files_is_twelve_hex_digits() -> None:
    tag = tag_from_files([RecipeFile("a", False, "0" * 64)])
    assert re.fullmatch(r"[0-9a-f]{12}", tag)
    assert tag != tag_from_files([RecipeFile("a", True, "0" * 64)])


def test_missing_recipe_directory_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nope")):
        recipe_tag(tmp_path / "nope")


def test_node_image_ref_names_the_checked_in_recipe() -> None:
    ref = podman.node_image_ref()
    assert ref == f"localhost/gpufleet-node:{recipe_tag(REPO / 'lab' / 'image')}"


# --------------------------------------------------------------------------- podman info


def test_parse_podman_info_reads_the_captured_debian12_host() -> None:
    host = parse_podman_info(json.loads(PODMAN_INFO.read_text()))
    assert host == PodmanHost(
        version="4.3.1",
        runtime="runc",
        runtime_path="/usr/bin/runc",
        cgroup_version="v1",
        cgroup_manager="cgroupfs",
        event_logger="file",
        network_backend="netavark",
        storage_driver="overlay",
        rootless=False,
    )


def test_parse_podman_info_names_the_missing_key() -> None:
    data = json.loads(PODMAN_INFO.read_text())
    del data["host"]["ociRuntime"]
    with pytest.raises(ValueError, match=r"host\.ociRuntime"):
        parse_podman_info(data)


# --------------------------------------------------------------------------- ulimits


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("nofile=20000:20000", ("nofile", 20000, 20000)),
        ("nproc=1024:32768", ("nproc", 1024, 32768)),
        ("nofile=4096", ("nofile", 4096, 4096)),
        (" core = -1:-1 ", ("core", -1, -1)),
    ],
)
def test_parse_ulimit(entry: str, expected: tuple[str, int, int]) -> None:
    u = parse_ulimit(entry)
    assert (u.name, u.soft, u.hard) == expected


def test_parse_ulimit_rejects_garbage_with_the_expected_form() -> None:
    with pytest.raises(ValueError, match=r"'nofile:20000'.*name=soft:hard"):
        parse_ulimit("nofile:20000")


def test_debian_default_containers_conf_sets_no_ulimits() -> None:
    # Without our drop-in podman falls back to its built-in root defaults, which fail here.
    debian = tomllib.loads(DEBIAN_CONTAINERS_CONF.read_text())
    assert effective_default_ulimits([debian]) is None


def test_last_containers_conf_layer_that_sets_ulimits_wins() -> None:
    debian = tomllib.loads(DEBIAN_CONTAINERS_CONF.read_text())
    ours = tomllib.loads(_prepare_script_conf())
    later = {"containers": {"default_ulimits": ["nofile=1048576:1048576"]}}
    unrelated = {"engine": {"runtime": "runc"}}
    assert effective_default_ulimits([debian, ours, unrelated]) == [
        "nofile=20000:20000",
        "nproc=32768:32768",
    ]
    assert effective_default_ulimits([debian, ours, later]) == ["nofile=1048576:1048576"]


# --------------------------------------------------------------------------- settings check


def _host(runtime: str = "runc") -> PodmanHost:
    return PodmanHost(
        "4.3.1",
        runtime,
        f"/usr/bin/{runtime}",
        "v1",
        "cgroupfs",
        "file",
        "netavark",
        "overlay",
        False,
    )


def test_prepare_script_settings_pass_the_check() -> None:
    conf = tomllib.loads(_prepare_script_conf())
    assert conf["engine"]["runtime"] == "runc"
    assert check_settings(_host(conf["engine"]["runtime"]), effective_default_ulimits([conf])) == []


def test_crun_runtime_is_a_problem_with_the_fix() -> None:
    problems = check_settings(_host("crun"), ["nofile=20000:20000", "nproc=32768:32768"])
    assert len(problems) == 1
    assert "'crun'" in problems[0] and 'runtime = "runc"' in problems[0]


def test_unset_ulimits_are_problems() -> None:
    problems = check_settings(_host(), None)
    assert len(problems) == 2
    assert any('"nofile=20000:20000"' in p for p in problems)
    assert any('"nproc=32768:32768"' in p for p in problems)


@pytest.mark.parametrize(
    "ulimits",
    [
        ["nofile=1048576:1048576", "nproc=32768:32768"],
        ["nofile=20000:20000", "nproc=65536:65536"],
        ["nofile=20000:20000", "nproc=-1:-1"],
        ["nofile=20000:10000", "nproc=32768:32768"],
    ],
)
def test_ulimits_beyond_what_the_machine_grants_are_problems(ulimits: list[str]) -> None:
    problems = check_settings(_host(), ulimits)
    assert len(problems) == 1
    assert "exceeds" in problems[0]


def test_lower_ulimits_pass() -> None:
    assert check_settings(_host(), ["nofile=4096:8192", "nproc=4096:4096"]) == []


# --------------------------------------------------------------------------- config paths


def test_containers_conf_env_overrides_every_other_file(tmp_path: Path) -> None:
    only = tmp_path / "only.conf"
    assert containers_conf_paths({"CONTAINERS_CONF": str(only)}) == [only]


def test_containers_conf_paths_follow_podman_order(tmp_path: Path) -> None:
    default = tmp_path / "usr" / "containers.conf"
    override = tmp_path / "etc" / "containers.conf"
    dropins = tmp_path / "etc" / "containers.conf.d"
    dropins.mkdir(parents=True)
    default.parent.mkdir()
    for p in (default, override, dropins / "90-b.conf", dropins / "10-a.conf", dropins / "README"):
        p.write_text("")
    (dropins / "sub.conf").mkdir()
    home = tmp_path / "home"
    user = home / ".config" / "containers" / "containers.conf"
    user.parent.mkdir(parents=True)
    user.write_text("")
    paths = containers_conf_paths({}, default=default, override=override)
    assert paths == [default, override, dropins / "10-a.conf", dropins / "90-b.conf"]
    rootless = containers_conf_paths({}, default=default, override=override, rootless_home=home)
    assert rootless == [*paths, user]


def test_missing_config_files_are_skipped(tmp_path: Path) -> None:
    assert (
        containers_conf_paths({}, default=tmp_path / "a.conf", override=tmp_path / "b.conf") == []
    )


# --------------------------------------------------------------------------- node run args


def _flag_values(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def test_node_run_args_boot_systemd_in_a_private_cgroup_namespace() -> None:
    args = node_run_args("gpu-worker-1", image="localhost/gpufleet-node:abc")
    assert args[0] == "run" and "--detach" in args
    assert args[-1] == "localhost/gpufleet-node:abc"
    assert _flag_values(args, "--name") == ["gpu-worker-1"]
    assert _flag_values(args, "--hostname") == ["gpu-worker-1"]
    assert {"--privileged", "--systemd=false", "--cgroupns=private"} <= set(args)
    assert _flag_values(args, "--tmpfs") == ["/run", "/run/lock", "/tmp"]
    assert _flag_values(args, "--stop-signal") == ["SIGRTMIN+3"]
    assert _flag_values(args, "--env") == ["container=podman"]
    assert _flag_values(args, "--volume") == ["/var/lib/containerd"]
    assert _flag_values(args, "--label") == ["io.gpufleet.lab-node=gpu-worker-1"]


def test_node_run_args_options() -> None:
    args = node_run_args(
        "cp0",
        image="img",
        hostname="control-plane-0",
        network="gpufleet-lab",
        containerd_volume="cp0-containerd",
        volumes=["/srv/bin:/opt/bin:ro"],
        labels={"role": "control-plane"},
        extra_args=["--memory", "4g"],
    )
    assert _flag_values(args, "--hostname") == ["control-plane-0"]
    assert _flag_values(args, "--network") == ["gpufleet-lab"]
    assert _flag_values(args, "--volume") == [
        "cp0-containerd:/var/lib/containerd",
        "/srv/bin:/opt/bin:ro",
    ]
    assert "role=control-plane" in _flag_values(args, "--label")
    assert args[-3:] == ["--memory", "4g", "img"]


def test_node_run_args_default_to_the_current_image() -> None:
    assert node_run_args("n1")[-1] == podman.node_image_ref()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "-bad"}, r"node name '-bad'"),
        ({"name": "ok", "hostname": "Worker_1"}, r"node hostname 'Worker_1'.*RFC 1123"),
        ({"name": "Upper"}, r"node hostname 'Upper'"),
        ({"name": "ok", "containerd_volume": "a/b"}, r"containerd_volume 'a/b'"),
    ],
)
def test_node_run_args_reject_bad_names(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        node_run_args(**kwargs, image="img")


def test_node_image_tarball_lives_in_the_cache_images_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # lab/prepare-podman writes $GPUFLEET_CACHE/images/gpufleet-node-<tag>.tar.zst
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    assert podman.node_image_tarball("0123456789ab") == (
        tmp_path / "images" / "gpufleet-node-0123456789ab.tar.zst"
    )
    script = (REPO / "lab" / "prepare-podman").read_text()
    assert "tarball=$cache/images/gpufleet-node-$tag.tar.zst" in script
