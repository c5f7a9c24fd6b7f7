"""Debian packages and the pkgs.k8s.io-shaped repository (gpufleet/lab/packages.py),
built with the real dpkg-deb and checked with dpkg-deb and dpkg-scanpackages."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess

import pytest

from gpufleet.lab import packages as pk

# The tests that build or read packages run dpkg-deb and dpkg-scanpackages; the pure ones
# are tests/unit/lab/test_packages.py.
needs_dpkg = pytest.mark.skipif(
    shutil.which("dpkg-deb") is None, reason="dpkg-deb is not installed (package dpkg)"
)


@pytest.fixture
def fake_bins(tmp_path):
    """Small executables standing in for the cached release binaries (the packaging does
    not look inside them)."""

    def make(version):
        d = tmp_path / "bin" / version
        d.mkdir(parents=True)
        out = {}
        for name in pk.PACKAGES:
            p = d / name
            p.write_bytes(b"#!/bin/sh\necho " + f"{name} v{version}".encode() + b"\n" * 3000)
            p.chmod(0o755)
            out[name] = p
        return out

    return make


@pytest.mark.integration
@needs_dpkg
def test_built_debs_carry_the_control_fields_and_files(tmp_path, fake_bins):
    bins = fake_bins("1.37.2")
    specs = {p.name: p for p in pk.package_specs("1.37.2", bins)}
    out = tmp_path / "out"
    debs = {name: pk.build_deb(spec, out) for name, spec in specs.items()}
    for name, deb in debs.items():
        assert deb.name == f"{name}_1.37.2-1.1_amd64.deb"
        info = subprocess.run(
            ["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True
        ).stdout
        fields = pk.parse_stanzas(info)[0]
        assert fields["Package"] == name
        assert fields["Version"] == "1.37.2-1.1"
        assert fields["Architecture"] == "amd64"
        assert "Depends" not in fields
        assert int(fields["Installed-Size"]) == specs[name].installed_size_kib()
    listing = {
        name: subprocess.run(
            ["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True
        ).stdout
        for name, deb in debs.items()
    }
    assert "./usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf" in listing["kubeadm"]
    assert "./usr/lib/systemd/system/kubelet.service\n" in listing["kubelet"]
    for name in pk.PACKAGES:
        line = next(ln for ln in listing[name].splitlines() if ln.endswith(f"./usr/bin/{name}"))
        assert line.startswith("-rwxr-xr-x root/root")
    unit = subprocess.run(
        ["dpkg-deb", "--fsys-tarfile", str(debs["kubeadm"])], capture_output=True, check=True
    ).stdout
    assert b"ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS" in unit


@pytest.mark.integration
@needs_dpkg
def test_repository_index_matches_dpkg_scanpackages(tmp_path, fake_bins):
    made = {v: fake_bins(v) for v in ("1.36.3", "1.37.1", "1.37.2")}
    logs: list[str] = []
    repos = pk.build_repository(
        list(made), tmp_path / "pkgs", bins_for=made.__getitem__, log=logs.append
    )
    assert sorted(repos) == ["1.36", "1.37"]
    assert len(logs) == 9
    r37 = repos["1.37"]
    ours = pk.parse_stanzas((r37 / "Packages").read_text())
    assert [(s["Package"], s["Version"]) for s in ours] == [
        ("kubeadm", "1.37.1-1.1"),
        ("kubelet", "1.37.1-1.1"),
        ("kubectl", "1.37.1-1.1"),
        ("kubeadm", "1.37.2-1.1"),
        ("kubelet", "1.37.2-1.1"),
        ("kubectl", "1.37.2-1.1"),
    ]
    assert gzip.decompress((r37 / "Packages.gz").read_bytes()) == (r37 / "Packages").read_bytes()
    if shutil.which("dpkg-scanpackages"):
        scanned = subprocess.run(
            ["dpkg-scanpackages", "--multiversion", "amd64", "/dev/null"],
            cwd=r37,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        theirs = {(s["Package"], s["Version"]): s for s in pk.parse_stanzas(scanned)}
        for s in ours:
            t = theirs[(s["Package"], s["Version"])]
            for key in ("Filename", "Size", "SHA256", "MD5sum", "Installed-Size", "Architecture"):
                assert s[key] == t[key], key
    release = pk.parse_stanzas((r37 / "Release").read_text())[0]
    sha = hashlib.sha256((r37 / "Packages").read_bytes()).hexdigest()
    assert f"{sha}" in release["SHA256"]
    # a second build with the same inputs rebuilds nothing
    logs.clear()
    pk.build_repository(list(made), tmp_path / "pkgs", bins_for=made.__getitem__, log=logs.append)
    assert logs == []


@pytest.mark.integration
@needs_dpkg
def test_a_pre_release_is_indexed_below_its_release(tmp_path, fake_bins):
    made = {v: fake_bins(v) for v in ("1.38.0", "1.38.0-beta.0", "1.38.0-rc.1")}
    repos = pk.build_repository(
        list(made), tmp_path / "pkgs", bins_for=made.__getitem__, log=lambda _: None
    )
    stanzas = pk.parse_stanzas((repos["1.38"] / "Packages").read_text())
    assert [s["Version"] for s in stanzas if s["Package"] == "kubelet"] == [
        "1.38.0~beta.0-1.1",
        "1.38.0~rc.1-1.1",
        "1.38.0-1.1",
    ]
    assert (repos["1.38"] / "amd64" / "kubelet_1.38.0~beta.0-1.1_amd64.deb").is_file()


@pytest.mark.integration
@needs_dpkg
def test_changed_binary_rebuilds_its_package(tmp_path, fake_bins):
    made = {"1.37.2": fake_bins("1.37.2")}
    pk.build_repository(["1.37.2"], tmp_path, bins_for=made.__getitem__, log=lambda _: None)
    made["1.37.2"]["kubelet"].write_bytes(b"#!/bin/sh\necho changed\n")
    logs: list[str] = []
    pk.build_repository(["1.37.2"], tmp_path, bins_for=made.__getitem__, log=logs.append)
    assert [line.split(":")[0] for line in logs] == ["kubelet_1.37.2-1.1_amd64.deb"]
