"""Container images for the air-gapped lab, built from the cached binaries.

No container registry is reachable here, so every image a lab node runs is made on
this machine: one layer holding static binaries (Go builds with ``CGO_ENABLED=0``),
written in the ``docker save`` archive format that ``ctr images import`` reads
(``manifest.json`` + image config with ``rootfs.diff_ids`` + ``<diff_id>/layer.tar``;
the format is described in moby's ``image/spec/v1.2.md``). Archives are cached under
``${GPUFLEET_CACHE:-~/.cache/gpufleet}/images/`` by a hash of their content, so a warm
``gpufleet lab up`` builds nothing.

The control-plane images carry the names kubeadm pulls
(``kubeadm config images list --kubernetes-version vX.Y.Z``:
``registry.k8s.io/kube-apiserver:vX.Y.Z`` and so on; kubeadm's list is the source,
``cmd/kubeadm/app/images/images.go``). etcd is the exception: its tag is the real
version of the etcd binary built for that release, and the ``kubeadm`` role writes
that tag into ``ClusterConfiguration.etcd.local.imageTag`` instead of pretending to be
kubeadm's default etcd build.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.build import binaries, release_pins
from gpufleet.exit import EXIT_OK, exit_with

BIN_DIR = "usr/local/bin"
#: Reference of the probe image (``lab/go/cdiprobe``); never pulled, always imported.
CDIPROBE_REF = "localhost/gpufleet/cdiprobe:latest"


@dataclass(frozen=True)
class ImageFile:
    """One file in an image layer: ``path`` inside the image (no leading ``/``), its
    content from ``source`` (a host file) or ``data`` (bytes), and its mode; or, with
    ``symlink``, a symbolic link to that target (``busybox`` for ``bin/sh``)."""

    path: str
    source: Path | None = None
    data: bytes | None = None
    mode: int = 0o755
    symlink: str | None = None

    def digest(self) -> str:
        h = hashlib.sha256(self.path.encode() + b"\0" + oct(self.mode).encode() + b"\0")
        if self.symlink is not None:
            h.update(b"symlink=" + self.symlink.encode())
        elif self.data is not None:
            h.update(self.data)
        else:
            assert self.source is not None
            st = self.source.stat()
            # Binaries in the cache are immutable once built; size + mtime identify them.
            h.update(f"{self.source}:{st.st_size}:{st.st_mtime_ns}".encode())
        return h.hexdigest()


@dataclass(frozen=True)
class ImageSpec:
    """An image to build: its reference (``registry.k8s.io/kube-apiserver:v1.37.2``),
    its files, and its default command."""

    ref: str
    files: tuple[ImageFile, ...]
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    #: ``uid:gid`` the image runs as (the config's ``User``); empty: root.
    user: str = ""

    def digest(self) -> str:
        h = hashlib.sha256(self.ref.encode())
        for f in sorted(self.files, key=lambda f: f.path):
            h.update(f.digest().encode())
        h.update(json.dumps([self.entrypoint, self.cmd, dict(self.env)]).encode())
        if self.user:  # only when set, so that the digests of the other images stay
            h.update(b"user=" + self.user.encode())
        return h.hexdigest()[:16]


def images_dir() -> Path:
    """``${GPUFLEET_CACHE:-~/.cache/gpufleet}/images``."""
    return binaries.cache_root() / "images"


def archive_path(spec: ImageSpec) -> Path:
    """Where the archive of ``spec`` is cached (the name carries the content hash)."""
    safe = spec.ref.replace("/", "_").replace(":", "_")
    return images_dir() / f"{safe}-{spec.digest()}.tar"


def _add_dirs(layer: tarfile.TarFile, path: str, made: set[str]) -> None:
    parts = path.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        d = "/".join(parts[:i])
        if d not in made:
            made.add(d)
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            layer.addfile(info)


def write_layer(files: Sequence[ImageFile], out: Path) -> str:
    """Write the layer tar of ``files`` to ``out``; returns its sha256 (the diff_id)."""
    with tarfile.open(out, mode="w", format=tarfile.PAX_FORMAT) as layer:
        made: set[str] = set()
        for f in sorted(files, key=lambda f: f.path):
            _add_dirs(layer, f.path, made)
            info = tarfile.TarInfo(f.path)
            info.mode = f.mode
            if f.symlink is not None:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, f.symlink, 0o777
                layer.addfile(info)
            elif f.data is not None:
                info.size = len(f.data)
                layer.addfile(info, io.BytesIO(f.data))
            else:
                assert f.source is not None
                info.size = f.source.stat().st_size
                with f.source.open("rb") as fh:
                    layer.addfile(info, fh)
    h = hashlib.sha256()
    with out.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_archive(spec: ImageSpec, out: Path | None = None) -> Path:
    """Build ``spec`` as a ``docker save`` archive (cached); returns its path.

    Raises ``FileNotFoundError`` naming the missing binary when a source file is absent
    (build it with ``lab/build-binaries``).
    """
    for f in spec.files:
        if f.source is not None and not f.source.is_file():
            raise FileNotFoundError(
                f"image {spec.ref}: {f.source} is missing; build it with lab/build-binaries"
            )
    out = out or archive_path(spec)
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        layer_path = Path(tmp) / "layer.tar"
        diff_id = write_layer(spec.files, layer_path)
        cfg: dict[str, object] = {
            "Env": [
                f"{k}={v}" for k, v in {"PATH": "/usr/local/bin:/usr/bin:/bin", **spec.env}.items()
            ]
        }
        if spec.entrypoint:
            cfg["Entrypoint"] = list(spec.entrypoint)
        if spec.cmd:
            cfg["Cmd"] = list(spec.cmd)
        if spec.user:
            cfg["User"] = spec.user
        config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": cfg,
                "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
            },
            sort_keys=True,
        ).encode()
        config_name = hashlib.sha256(config).hexdigest() + ".json"
        manifest = json.dumps(
            [{"Config": config_name, "RepoTags": [spec.ref], "Layers": [f"{diff_id}/layer.tar"]}]
        ).encode()
        partial = Path(tmp) / "image.tar"
        with tarfile.open(partial, mode="w") as archive:
            for name, data in ((config_name, config), ("manifest.json", manifest)):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            archive.add(layer_path, arcname=f"{diff_id}/layer.tar")
        os.replace(partial, out)
    return out


def kubeadm_image_list(version: str, image_repository: str | None = None) -> list[str]:
    """The image references ``kubeadm config images list`` prints for ``version``, asked of
    that release's own kubeadm binary (the source of the names and tags)."""
    argv = [
        str(binaries.binary_path("kubeadm", version)),
        "config",
        "images",
        "list",
        "--kubernetes-version",
        f"v{version}",
    ]
    if image_repository:
        argv += ["--image-repository", image_repository]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()}")
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def _component(ref: str) -> str:
    """``registry.k8s.io/kube-apiserver:v1.37.2`` -> ``kube-apiserver``."""
    return ref.rsplit("/", 1)[-1].split(":", 1)[0]


def _binary_file(name: str, path: Path) -> ImageFile:
    return ImageFile(path=f"{BIN_DIR}/{name}", source=path)


def etcd_version(version: str) -> str:
    """The etcd version pinned for Kubernetes ``version`` in ``releases.yaml``."""
    return release_pins.load_releases().etcd_for(version)


def pause_binary() -> Path:
    """The lab's pause binary (``lab/go/pause``), built into the cache when missing."""
    return binaries.build_local_program("pause", binaries.REPO_ROOT / "lab" / "go" / "pause")


def control_plane_images(
    version: str, *, image_repository: str | None = None, etcd: str | None = None
) -> list[ImageSpec]:
    """Images a kubeadm control-plane node needs for ``version``: kube-apiserver,
    kube-controller-manager, kube-scheduler, etcd and pause, named as kubeadm pulls
    them (etcd tagged with its real version, see the module docstring).

    kube-proxy and CoreDNS are not built: the lab skips kubeadm's ``addon/kube-proxy``
    and ``addon/coredns`` phases (nothing in the lab resolves Service names, and the
    pods that reach the API server use host networking)."""
    etcd = etcd or etcd_version(version)
    specs = []
    for ref in kubeadm_image_list(version, image_repository):
        name = _component(ref)
        if name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            specs.append(
                ImageSpec(ref=ref, files=(_binary_file(name, binaries.binary_path(name, version)),))
            )
        elif name == "etcd":
            repo = ref.rsplit(":", 1)[0]
            etcd_bin = binaries.binary_path("etcd", etcd)
            etcdctl = binaries.binary_path("etcdctl", etcd)
            specs.append(
                ImageSpec(
                    ref=f"{repo}:{etcd}",
                    files=(_binary_file("etcd", etcd_bin), _binary_file("etcdctl", etcdctl)),
                )
            )
        elif name == "pause":
            specs.append(pause_image(ref))
    return specs


def pause_image(ref: str) -> ImageSpec:
    """The pod sandbox image under ``ref`` (``registry.k8s.io/pause:3.10.2``)."""
    return ImageSpec(
        ref=ref,
        files=(ImageFile(path="pause", source=pause_binary()),),
        entrypoint=("/pause",),
    )


def cdiprobe_binary() -> Path:
    """The toolkit scenario's probe (``lab/go/cdiprobe``), built into the cache when
    missing."""
    return binaries.build_local_program("cdiprobe", binaries.REPO_ROOT / "lab" / "go" / "cdiprobe")


def cdiprobe_image(ref: str = CDIPROBE_REF) -> ImageSpec:
    """The image of ``lab/go/cdiprobe`` under ``ref``: a container that prints the NVIDIA
    device nodes, variables and hook links it was given (the toolkit scenario's probe)."""
    probe = cdiprobe_binary()
    return ImageSpec(
        ref=ref, files=(_binary_file("cdiprobe", probe),), entrypoint=(f"/{BIN_DIR}/cdiprobe",)
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpufleet.lab.images archive {pause,cdiprobe} REF``: build the image
    archive (cached) and print its path, for playbooks that import it into containerd."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m gpufleet.lab.images")
    sub = parser.add_subparsers(dest="command", required=True)
    archive = sub.add_parser("archive", help="build an image archive and print its path")
    archive.add_argument("image", choices=("pause", "cdiprobe"))
    archive.add_argument("ref", help="the image reference, e.g. registry.k8s.io/pause:3.10")
    args = parser.parse_args(argv)
    # Build progress (a wait on the build lock, say) goes to stderr: stdout is the path.
    with contextlib.redirect_stdout(sys.stderr):
        spec = pause_image(args.ref) if args.image == "pause" else cdiprobe_image(args.ref)
        archive = build_archive(spec)
    print(archive)
    return EXIT_OK


def pause_ref(version: str, image_repository: str | None = None) -> str:
    """The pause image kubeadm names for ``version``."""
    for ref in kubeadm_image_list(version, image_repository):
        if _component(ref) == "pause":
            return ref
    raise RuntimeError(f"kubeadm {version} lists no pause image")


if __name__ == "__main__":
    exit_with(main())
