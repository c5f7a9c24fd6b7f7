"""Build inputs of the GPU simulator's kubelet plugin (``gpufleet.lab.gpusim_plugin``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpufleet.lab import gpusim_plugin as gp

pytestmark = pytest.mark.unit


@pytest.fixture
def module_copy(tmp_path: Path) -> Path:
    """A copy of the plugin's Go module (sources only)."""
    dst = tmp_path / "kubelet-plugin"
    shutil.copytree(gp.source_dir(), dst)
    return dst


def test_source_files_are_go_sources_and_module_files(module_copy: Path) -> None:
    files = [p.as_posix() for p in gp.source_files(module_copy)]
    assert "main.go" in files
    assert "internal/devices/devices.go" in files
    assert "go.mod" in files and "go.sum" in files
    assert not [f for f in files if f.endswith("_test.go")]
    assert files == sorted(files)


def test_digest_changes_with_sources_not_with_tests(module_copy: Path) -> None:
    before = gp.source_digest(module_copy)
    assert len(before) == gp.DIGEST_CHARS
    (module_copy / "internal" / "devices" / "devices_test.go").write_text("package devices\n")
    assert gp.source_digest(module_copy) == before
    main = module_copy / "main.go"
    main.write_text(main.read_text() + "\n// changed\n")
    assert gp.source_digest(module_copy) != before


def test_digest_changes_with_the_embedded_mig_tables(module_copy: Path) -> None:
    before = gp.source_digest(module_copy)
    assert "internal/devices/migprofiles.json" in [
        p.as_posix() for p in gp.source_files(module_copy)
    ]
    tables = module_copy / "internal" / "devices" / "migprofiles.json"
    tables.write_text(tables.read_text().replace('"7g.141gb"', '"7g.140gb"'))
    assert gp.source_digest(module_copy) != before


def test_digest_changes_with_go_sum(module_copy: Path) -> None:
    before = gp.source_digest(module_copy)
    go_sum = module_copy / "go.sum"
    go_sum.write_text(go_sum.read_text() + "example.invalid/x v1.0.0 h1:AAAA=\n")
    assert gp.source_digest(module_copy) != before


def test_binary_path_is_under_the_cache_by_digest(
    module_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path / "cache"))
    path = gp.binary_path(module_copy)
    assert path == (
        tmp_path
        / "cache"
        / "bin"
        / "gpusim-kubelet-plugin"
        / gp.source_digest(module_copy)
        / "gpusim-kubelet-plugin"
    )


def test_build_command_is_static_stripped_and_limited_to_two_jobs() -> None:
    cmd = gp.build_command("go", Path("/out/bin"), nice=False)
    assert cmd == [
        "go",
        "build",
        "-p",
        "2",
        "-trimpath",
        "-ldflags",
        "-s -w",
        "-o",
        "/out/bin",
        ".",
    ]
    env = gp.build_env({"PATH": "/usr/bin", "GOPROXY": "https://proxy.golang.org", "GOFLAGS": "-x"})
    assert env["CGO_ENABLED"] == "0"
    assert env["GOFLAGS"] == "-mod=mod -buildvcs=false"
    assert env["GOPROXY"] == "https://proxy.golang.org"
    assert env["GOTOOLCHAIN"] == "local"


def test_cached_binary_is_not_rebuilt(
    module_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path / "cache"))
    target = gp.binary_path(module_copy)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"\x7fELF cached")
    monkeypatch.setenv("PATH", "")  # no Go: a rebuild attempt would raise BuildError
    info = gp.ensure_binary(module_copy, log=lambda _msg: None)
    assert info == gp.BuildInfo(target, False, 0.0, len(b"\x7fELF cached"))


def test_local_command_names_an_executable_cdi_hook(tmp_path: Path) -> None:
    # The plugin refuses to start without an executable nvidia-cdi-hook.
    root = tmp_path / "run"
    cmd = gp.local_command(Path("/bin/plugin"), "n1", tmp_path / "s.json", tmp_path / "kc", root)
    hook = root / "nvidia-cdi-hook"
    assert f"--nvidia-cdi-hook-path={hook}" in cmd
    assert hook.is_file() and hook.stat().st_mode & 0o111
