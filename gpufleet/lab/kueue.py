"""Kueue for the air-gapped lab: its controller image and its manifests, built here.

Kueue is pinned in ``gpufleet/build/releases.yaml`` (``tools.kueue``). From that one pin:

* the controller manager binary (``sigs.k8s.io/kueue/cmd/kueue``) is built by
  ``gpufleet.build.binaries`` into ``<cache>/bin/kueue/v<version>/kueue``;
* its image, ``registry.k8s.io/kueue/kueue:v<version>`` (the name Kueue's releases publish),
  is a one-layer archive holding that binary as ``/manager`` (the command of Kueue's
  Deployment, ``config/components/manager/manager.yaml``), run as UID 65532 because that
  Deployment sets ``runAsNonRoot``;
* its manifests (CRDs, RBAC, webhooks, Deployment, Services) are rendered from the
  module's own ``config/default`` kustomization with the cached ``kubectl kustomize``
  into ``<cache>/kueue/v<version>/manifests.yaml``; nothing of it is committed.

CLI (prints one JSON object: version, image, archive, manifests, module_dir)::

    python -m gpufleet.lab.kueue artefacts
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpufleet.build import binaries
from gpufleet.build.release_pins import load_releases
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_OK, exit_with
from gpufleet.lab import images

#: Tool name in releases.yaml.
TOOL = "kueue"
#: Kubernetes release whose kubectl renders the kustomization (the lab default).
KUSTOMIZE_WITH: str | None = None
#: Image repository of Kueue's published releases; the tag is ``v<version>``.
IMAGE_REPOSITORY = "registry.k8s.io/kueue/kueue"
#: Non-root user of the image (Kueue's Deployment sets runAsNonRoot).
IMAGE_USER = "65532:65532"


@dataclass(frozen=True)
class KueueArtefacts:
    """What the lab installs Kueue from: ``version`` (``0.17.0``), ``image`` (reference),
    ``archive`` (docker save tar), ``manifests`` (multi-document YAML), ``module_dir``
    (the module source in the Go module cache)."""

    version: str
    image: str
    archive: Path
    manifests: Path
    module_dir: Path

    def to_json(self) -> dict[str, str]:
        return {
            "version": self.version,
            "image": self.image,
            "archive": str(self.archive),
            "manifests": str(self.manifests),
            "module_dir": str(self.module_dir),
        }


def pinned_version() -> str:
    """The Kueue version pinned in releases.yaml (``0.17.0``)."""
    return load_releases().tool(TOOL).version


def image_ref(version: str) -> str:
    """``registry.k8s.io/kueue/kueue:v<version>``."""
    return f"{IMAGE_REPOSITORY}:v{version}"


def module_dir(version: str) -> Path:
    """Directory of ``sigs.k8s.io/kueue@v<version>`` in the Go module cache (downloaded
    from the module proxy when absent). Raises :class:`binaries.BuildError`."""
    return binaries.module_source(load_releases().tool(TOOL).binaries[0].module, f"v{version}")


def manifests_path(version: str) -> Path:
    """``<cache>/kueue/v<version>/manifests.yaml``."""
    return binaries.cache_root() / "kueue" / f"v{version}" / "manifests.yaml"


def render_manifests(version: str, source: Path, kubectl: Path) -> Path:
    """Render ``source/config/default`` with ``kubectl kustomize`` into
    :func:`manifests_path` (kept when present). Raises :class:`binaries.BuildError` when
    kustomize fails or the output lacks the CRDs or the Deployment."""
    out = manifests_path(version)
    if out.is_file():
        return out
    argv = [str(kubectl), "kustomize", str(source / "config" / "default")]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    if proc.returncode != 0:
        raise binaries.BuildError(f"`{' '.join(argv)}` exited {proc.returncode}: {proc.stderr}")
    text = proc.stdout
    for needed in ("kind: CustomResourceDefinition", "kind: Deployment"):
        if needed not in text:
            raise binaries.BuildError(f"`{' '.join(argv)}` printed no {needed}")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".manifests.{os.getpid()}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, out)
    return out


def image_spec(version: str, manager: Path) -> images.ImageSpec:
    """The controller image: ``manager`` (the built binary) as ``/manager``."""
    return images.ImageSpec(
        ref=image_ref(version),
        files=(images.ImageFile(path="manager", source=manager),),
        entrypoint=("/manager",),
        user=IMAGE_USER,
    )


def artefacts(version: str | None = None, log: Callable[[str], None] = print) -> KueueArtefacts:
    """Build (or reuse) the binary, the image archive and the manifests of ``version``
    (default: the pinned one). Raises :class:`binaries.BuildError`."""
    version = version or pinned_version()
    manager = binaries.ensure("kueue", version, log=log)["kueue"]
    kubectl = binaries.ensure("kubectl", KUSTOMIZE_WITH, log=log)["kubectl"]
    source = module_dir(version)
    archive = images.build_archive(image_spec(version, manager))
    manifests = render_manifests(version, source, kubectl)
    return KueueArtefacts(version, image_ref(version), archive, manifests, source)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpufleet.lab.kueue artefacts [--version V]``: print the JSON of
    :class:`KueueArtefacts`; exit 2 when a build fails."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m gpufleet.lab.kueue")
    sub = parser.add_subparsers(dest="command", required=True)
    art = sub.add_parser("artefacts", help="build the image archive and manifests; print JSON")
    art.add_argument("--version", default=None, help="a version pinned in releases.yaml")
    args = parser.parse_args(argv)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = artefacts(args.version, log=lambda m: print(m, file=sys.stderr))
    except (binaries.BuildError, binaries.UnknownNameError) as exc:
        print(f"kueue artefacts: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    print(json.dumps(result.to_json(), indent=2))
    return EXIT_OK


if __name__ == "__main__":
    exit_with(main())
