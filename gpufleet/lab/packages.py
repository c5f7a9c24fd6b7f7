"""A Debian package repository of kubeadm, kubelet and kubectl in the pkgs.k8s.io layout,
built from the cached binaries, for the lab and for air-gapped sites.

pkgs.k8s.io serves one flat repository per minor,
``https://pkgs.k8s.io/core:/stable:/v1.37/deb/`` (``deb [signed-by=...] URL /``), with
``Packages`` and ``Release`` at that path and package versions such as ``1.37.2-1.1``
(kubernetes/website ``docs/tasks/administer-cluster/kubeadm/change-package-repository.md``).
This module writes the same shape under a directory::

    <root>/core:/stable:/v1.37/deb/Packages
    <root>/core:/stable:/v1.37/deb/Packages.gz
    <root>/core:/stable:/v1.37/deb/Release
    <root>/core:/stable:/v1.37/deb/amd64/kubeadm_1.37.2-1.1_amd64.deb  (kubelet, kubectl)

``<root>`` defaults to ``${GPUFLEET_CACHE:-~/.cache/gpufleet}/pkgs``. The repository is
unsigned: nodes use it as ``deb [trusted=yes] file:/var/lib/gpufleet/pkgs/v1.37/ /``
after the ``upgrade`` role copied that minor's directory there (the simplest option
that needs no server: no process to start, stop or reach through the node network; the
same directory can be served read-only over HTTP for a site, with the same line).

Packages, as the upstream ones (kubernetes/release ``packages/deb``): ``kubeadm`` ships
``/usr/bin/kubeadm`` and the kubelet drop-in
``/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf`` (the same text as
``roles/kubeadm/templates/10-kubeadm.conf.j2``), ``kubelet`` ships ``/usr/bin/kubelet``
and ``/usr/lib/systemd/system/kubelet.service``, ``kubectl`` ships ``/usr/bin/kubectl``.
No ``Depends``: upstream's ``cri-tools`` and ``kubernetes-cni`` dependencies would need
packages this repository does not carry (the lab's nodes get their CNI plugins and
runtime from the ``lab_node`` role); nothing in kubeadm's upgrade path runs ``crictl``.
No maintainer scripts: the ``upgrade`` role reloads systemd and restarts the kubelet
itself, after the node is drained.

Debs are built with ``dpkg-deb --root-owner-group`` (package ``dpkg``, always present on
Debian); ``Packages`` and ``Release`` are written here in Python (the fields
``dpkg-scanpackages`` and ``apt-ftparchive`` write; Debian Policy §5.3 for control
fields, the Debian repository format wiki page for ``Release``).
"""

from __future__ import annotations

import email.utils
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.build import binaries
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_OK, exit_with

PACKAGES = ("kubeadm", "kubelet", "kubectl")
DEFAULT_REVISION = "1.1"
DEFAULT_ARCH = "amd64"
MAINTAINER = "gpufleet <gpufleet@localhost>"
HOMEPAGE = "https://kubernetes.io"
NODE_REPO_DIR = "/var/lib/gpufleet/pkgs"

KUBELET_UNIT = """\
[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target containerd.service

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=2

[Install]
WantedBy=multi-user.target
"""

KUBEADM_DROPIN = """\
# The layout kubeadm expects (kubeadm's own deb/rpm packages ship the same drop-in).
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS \
$KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""

_DESCRIPTIONS = {
    "kubeadm": "Command-line utility for administering a Kubernetes cluster",
    "kubelet": "Node agent for Kubernetes clusters",
    "kubectl": "Command-line utility for interacting with a Kubernetes cluster",
}


class PackageError(RuntimeError):
    """A package or the repository could not be built; the message says why."""


@dataclass(frozen=True)
class PackageFile:
    """A file in a package: ``path`` absolute on the target, from ``source`` or ``data``."""

    path: str
    source: Path | None = None
    data: bytes | None = None
    mode: int = 0o644

    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.source is not None
        return self.source.stat().st_size


@dataclass(frozen=True)
class DebPackage:
    """One binary package: name, Debian version (``1.37.2-1.1``), architecture, files."""

    name: str
    version: str
    architecture: str
    description: str
    files: tuple[PackageFile, ...]
    depends: tuple[str, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        """``kubeadm_1.37.2-1.1_amd64.deb``."""
        return f"{self.name}_{self.version}_{self.architecture}.deb"

    def installed_size_kib(self) -> int:
        """Installed-Size in KiB, rounded up per file (Debian Policy §5.6.20)."""
        return sum(-(-f.size() // 1024) for f in self.files)

    def control(self) -> dict[str, str]:
        """The control fields in the order dpkg writes them."""
        fields = {
            "Package": self.name,
            "Version": self.version,
            "Architecture": self.architecture,
            "Maintainer": MAINTAINER,
            "Installed-Size": str(self.installed_size_kib()),
        }
        if self.depends:
            fields["Depends"] = ", ".join(self.depends)
        fields.update(
            {
                "Section": "admin",
                "Priority": "optional",
                "Homepage": HOMEPAGE,
                **dict(self.extra),
                "Description": self.description,
            }
        )
        return fields


_DEB_VERSION_RE = re.compile(r"^v?(\d+\.\d+\.\d+)(?:-((?:alpha|beta|rc)\.\d+))?$")


def deb_version(kubernetes_version: str, revision: str = DEFAULT_REVISION) -> str:
    """``"1.37.2"`` or ``"v1.37.2"`` -> ``"1.37.2-1.1"``; a pre-release sorts below its
    release, as on pkgs.k8s.io: ``"1.38.0-beta.0"`` -> ``"1.38.0~beta.0-1.1"`` (the
    version the upgrade planner pins, ``upgrade_input.package_version``). Raises
    PackageError otherwise."""
    match = _DEB_VERSION_RE.match(kubernetes_version)
    if not match:
        raise PackageError(
            f"kubernetes version {kubernetes_version!r} is not MAJOR.MINOR.PATCH (or an alpha, "
            "beta or rc pre-release of one); give e.g. 1.37.2 or 1.38.0-beta.0"
        )
    if not revision or any(c.isspace() or c == "_" for c in revision):
        raise PackageError(f"package revision {revision!r} is not a Debian revision like 1.1")
    plain, pre = match.groups()
    return f"{plain}~{pre}-{revision}" if pre else f"{plain}-{revision}"


def _version_order(version: str) -> tuple[int, int, int, int, str]:
    """Sort key of a plain version: a pre-release (1.38.0-beta.0) before its release."""
    core, _, pre = version.partition("-")
    major, minor, patch = (int(x) for x in core.split("."))
    return major, minor, patch, 0 if pre else 1, pre


def minor_of(kubernetes_version: str) -> str:
    """``"1.37.2"`` -> ``"1.37"``."""
    return ".".join(kubernetes_version.lstrip("v").split(".")[:2])


def package_specs(
    kubernetes_version: str,
    bins: Mapping[str, Path],
    revision: str = DEFAULT_REVISION,
    architecture: str = DEFAULT_ARCH,
) -> list[DebPackage]:
    """The three packages of a release from ``bins`` (name -> binary path)."""
    version = deb_version(kubernetes_version, revision)
    for name in PACKAGES:
        if name not in bins or not Path(bins[name]).is_file():
            raise PackageError(
                f"{name} {kubernetes_version} is not built ({bins.get(name)}); run "
                f"`lab/build-binaries --kubernetes {kubernetes_version}` first"
            )
    unit_dir = "/usr/lib/systemd/system"

    def binary(name: str) -> PackageFile:
        return PackageFile(f"/usr/bin/{name}", source=Path(bins[name]), mode=0o755)

    return [
        DebPackage(
            "kubeadm",
            version,
            architecture,
            _DESCRIPTIONS["kubeadm"],
            (
                binary("kubeadm"),
                PackageFile(
                    f"{unit_dir}/kubelet.service.d/10-kubeadm.conf", data=KUBEADM_DROPIN.encode()
                ),
            ),
        ),
        DebPackage(
            "kubelet",
            version,
            architecture,
            _DESCRIPTIONS["kubelet"],
            (
                binary("kubelet"),
                PackageFile(f"{unit_dir}/kubelet.service", data=KUBELET_UNIT.encode()),
            ),
        ),
        DebPackage(
            "kubectl", version, architecture, _DESCRIPTIONS["kubectl"], (binary("kubectl"),)
        ),
    ]


def control_text(fields: Mapping[str, str]) -> str:
    """Render control fields as a deb822 stanza (no trailing blank line)."""
    lines = []
    for key, value in fields.items():
        first, *rest = str(value).split("\n")
        lines.append(f"{key}: {first}")
        lines.extend(" " + (r if r.strip() else ".") for r in rest)
    return "\n".join(lines) + "\n"


def parse_stanzas(text: str) -> list[dict[str, str]]:
    """Parse deb822 stanzas (``Packages``, ``Release``, control) into dicts."""
    out: list[dict[str, str]] = []
    cur: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if not line.strip():
            if cur:
                out.append(cur)
            cur, key = {}, ""
        elif line[0] in " \t" and key:
            cur[key] += "\n" + line[1:]
        else:
            key, _, value = line.partition(":")
            cur[key] = value.strip()
    if cur:
        out.append(cur)
    return out


def _dpkg_deb() -> str:
    exe = shutil.which("dpkg-deb")
    if not exe:
        raise PackageError("dpkg-deb is missing: apt-get install dpkg (Debian's package tool)")
    return exe


def build_deb(pkg: DebPackage, out_dir: Path) -> Path:
    """Build ``pkg`` into ``out_dir/<filename>`` with ``dpkg-deb`` (gzip). Binaries are
    hard-linked into the staging tree when possible. Returns the .deb path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / pkg.filename
    with tempfile.TemporaryDirectory(prefix="gpufleet-deb-", dir=out_dir) as tmp:
        root = Path(tmp) / "root"
        (root / "DEBIAN").mkdir(parents=True)
        (root / "DEBIAN" / "control").write_text(control_text(pkg.control()))
        for f in pkg.files:
            dest = root / f.path.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if f.data is not None:
                dest.write_bytes(f.data)
            else:
                assert f.source is not None
                try:
                    os.link(f.source, dest)
                except OSError:
                    shutil.copyfile(f.source, dest)
            os.chmod(dest, f.mode)
        for d in [p for p in root.rglob("*") if p.is_dir()]:
            os.chmod(d, 0o755)
        partial = Path(tmp) / pkg.filename
        proc = subprocess.run(
            [
                _dpkg_deb(),
                "--root-owner-group",
                "-Zgzip",
                "-z6",
                "--build",
                str(root),
                str(partial),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise PackageError(f"dpkg-deb --build {pkg.filename} failed: {proc.stderr.strip()}")
        os.replace(partial, out)
    return out


def _digests(path: Path) -> dict[str, str]:
    md5, sha1, sha256 = hashlib.md5(), hashlib.sha1(), hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            md5.update(chunk)
            sha1.update(chunk)
            sha256.update(chunk)
    return {"MD5sum": md5.hexdigest(), "SHA1": sha1.hexdigest(), "SHA256": sha256.hexdigest()}


def packages_stanza(pkg: DebPackage, deb: Path, filename: str) -> dict[str, str]:
    """The ``Packages`` index entry of a built deb: its control fields plus ``Filename``
    (relative to the repository), ``Size`` and the checksums, as dpkg-scanpackages writes."""
    fields = dict(pkg.control())
    description = fields.pop("Description")
    fields.update({"Filename": filename, "Size": str(deb.stat().st_size), **_digests(deb)})
    fields["Description"] = description
    return fields


def release_text(files: Mapping[str, bytes], *, origin: str, label: str, date: str) -> str:
    """A flat repository's ``Release``: Origin, Label, Date, Architectures and the size and
    checksums of each index file (``files``: name relative to the repository -> bytes)."""
    lines = [
        f"Origin: {origin}",
        f"Label: {label}",
        f"Date: {date}",
        f"Architectures: {DEFAULT_ARCH}",
    ]
    for title, algo in (("MD5Sum", hashlib.md5), ("SHA256", hashlib.sha256)):
        lines.append(f"{title}:")
        for name in sorted(files):
            data = files[name]
            lines.append(f" {algo(data).hexdigest()} {len(data):>16} {name}")
    return "\n".join(lines) + "\n"


def repo_dir(root: Path, minor: str) -> Path:
    """``<root>/core:/stable:/v1.37/deb`` (the pkgs.k8s.io path of that minor)."""
    return root / "core:" / "stable:" / f"v{minor}" / "deb"


def default_root() -> Path:
    return binaries.cache_root() / "pkgs"


def write_index(directory: Path, stanzas: Sequence[Mapping[str, str]], *, date: str) -> None:
    """Write ``Packages``, ``Packages.gz`` and ``Release`` into a flat repository."""
    body = "\n".join(control_text(s) for s in stanzas).encode()
    gz = gzip.compress(body, mtime=0)
    (directory / "Packages").write_bytes(body)
    (directory / "Packages.gz").write_bytes(gz)
    (directory / "Release").write_text(
        release_text(
            {"Packages": body, "Packages.gz": gz},
            origin="gpufleet",
            label=f"kubernetes {directory.parent.name}",
            date=date,
        )
    )


def build_repository(
    versions: Sequence[str],
    root: Path | None = None,
    *,
    revision: str = DEFAULT_REVISION,
    bins_for: Callable[[str], Mapping[str, Path]] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Build the packages of each release in ``versions`` and one flat repository per
    minor under ``root``. Several patch releases of one minor share its repository.
    A deb whose stamp matches its inputs is not rebuilt.

    ``bins_for``: release -> ``{kubeadm, kubelet, kubectl: path}`` (default: the binary
    cache, ``gpufleet.build.binaries.binary_path``). Returns minor -> repository directory.
    Raises PackageError when a binary is missing or dpkg-deb fails.
    """
    root = root or default_root()
    bins_for = bins_for or (lambda v: {n: binaries.binary_path(n, v) for n in PACKAGES})
    by_minor: dict[str, list[str]] = {}
    for v in versions:
        by_minor.setdefault(minor_of(v), []).append(v.lstrip("v"))
    out: dict[str, Path] = {}
    date = email.utils.formatdate(usegmt=True)
    for minor, vs in sorted(by_minor.items()):
        directory = repo_dir(root, minor)
        arch_dir = directory / DEFAULT_ARCH
        stanzas = []
        for v in sorted(set(vs), key=_version_order):
            for pkg in package_specs(v, bins_for(v), revision):
                deb = arch_dir / pkg.filename
                stamp = arch_dir / f".{pkg.filename}.stamp.json"
                inputs = json.dumps(
                    {
                        "control": pkg.control(),
                        "files": [
                            [f.path, str(f.source), f.size(), f.mode,
                             f.source.stat().st_mtime_ns if f.source else None,
                             hashlib.sha256(f.data).hexdigest() if f.data is not None else None]
                            for f in pkg.files
                        ],
                    },
                    sort_keys=True,
                )  # fmt: skip
                if not (deb.is_file() and stamp.is_file() and stamp.read_text() == inputs):
                    build_deb(pkg, arch_dir)
                    stamp.write_text(inputs)
                    log(f"{pkg.filename}: built, {deb.stat().st_size / 2**20:.1f} MiB")
                stanzas.append(packages_stanza(pkg, deb, f"{DEFAULT_ARCH}/{pkg.filename}"))
        write_index(directory, stanzas, date=date)
        out[minor] = directory
    return out


def sources_line(url: str) -> str:
    """The apt source line of a flat, unsigned repository at ``url``."""
    return f"deb [trusted=yes] {url} /"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpufleet.lab.packages [--root DIR] VERSION...``: build the repository."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m gpufleet.lab.packages")
    parser.add_argument("versions", nargs="+", metavar="VERSION")
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--revision", default=DEFAULT_REVISION)
    args = parser.parse_args(argv)
    try:
        repos = build_repository(args.versions, args.root, revision=args.revision)
    except PackageError as exc:
        print(f"error: {exc}")
        return EXIT_CANNOT_RUN
    for minor, path in repos.items():
        print(f"v{minor}: {path}")
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    exit_with(main())
