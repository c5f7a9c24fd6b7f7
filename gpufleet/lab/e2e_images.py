"""The images Kubernetes' DRA e2e suite runs, made locally for the air-gapped lab.

The suite (``gpufleet.build.dra_e2e``) names its images through the release's
``test/utils/image`` and prints them with ``--list-images``; with ``KUBE_TEST_REPO_LIST``
unset these are the registry.k8s.io names, which the images here carry so that nothing
in the suite is redirected:

- ``registry.k8s.io/e2e-test-images/busybox:<v>``: the test pods' shell (``sh -c`` with
  ``sleep``, ``env``, ``cat``, ``grep``): Debian's static busybox with a symbolic link per
  applet under ``/bin``, as the lab's own busybox image has the binary;
- ``registry.k8s.io/sig-storage/hostpathplugin:<v>`` (the highest listed version, which
  ``test/e2e/dra/utils/deploy.go`` picks): the proxy pods of the test driver, which run
  ``/bin/sh -c 'while true; do sleep 10000; done'`` and get ``/hostpathplugin
  --endpoint=SOCKET --proxy-endpoint=tcp://:PORT`` exec'd into them. csi-driver-host-path
  is not served by the Go module proxy, so ``/hostpathplugin`` is ``lab/go/plugin-proxy``,
  which implements that proxy mode and nothing else;
- ``registry.k8s.io/pause:<v>``: the lab's pause (:func:`gpufleet.lab.images.pause_image`);
- ``registry.k8s.io/e2e-test-images/sample-device-plugin:<v>`` (the name in the release's
  ``test/e2e/testing-manifests/sample-device-plugin/`` manifests, which ``--list-images``
  does not print): the release's ``test/images/sample-device-plugin``, which the
  DRAExtendedResource specs deploy, built beside the suite.

agnhost is listed too but no DRA spec runs it on Linux nodes (``e2epod`` picks busybox
unless the node OS is Windows), so it is not made.

Archives are cached like the lab's other images and imported into every node's
containerd (namespace ``k8s.io``) from the node's read-only cache mount, as the
``kubeadm`` role imports the lab's worker images.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from gpufleet.build import binaries, dra_e2e
from gpufleet.lab import cluster, images

PROXY_SOURCE = binaries.REPO_ROOT / "lab" / "go" / "plugin-proxy"


class E2EImageError(RuntimeError):
    """The suite's image list cannot be read, an image cannot be made or imported."""


def list_images(test_binary: Path) -> dra_e2e.SuiteImages:
    """The images of ``TEST_BINARY --list-images`` (the release's own image table) sorted
    by role (:func:`gpufleet.build.dra_e2e.suite_images`)."""
    try:
        return dra_e2e.suite_images(test_binary)
    except dra_e2e.DraE2EError as exc:
        raise E2EImageError(str(exc)) from None


def busybox_applets(busybox: Path = cluster.BUSYBOX) -> list[str]:
    """The applet names of the host's static busybox (``busybox --list``)."""
    proc = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise E2EImageError(f"{busybox} --list exited {proc.returncode}")
    return sorted(a for a in proc.stdout.split() if a and "/" not in a and a != "busybox")


def _busybox_files(applets: Sequence[str]) -> tuple[images.ImageFile, ...]:
    if not cluster.BUSYBOX.is_file():
        raise E2EImageError(f"{cluster.BUSYBOX} is missing: install Debian's busybox-static")
    links = tuple(images.ImageFile(path=f"bin/{a}", symlink="busybox") for a in applets)
    return (images.ImageFile(path="bin/busybox", source=cluster.BUSYBOX), *links)


def image_specs(
    suite: dra_e2e.SuiteImages, proxy: Path, applets: Sequence[str]
) -> list[images.ImageSpec]:
    """The image specs to make: each busybox name, the hostpathplugin stand-in (the proxy
    at ``/hostpathplugin`` beside busybox) and each pause name."""
    shell = _busybox_files(applets)
    specs = [images.ImageSpec(ref=ref, files=shell, cmd=("sh",)) for ref in suite.busybox]
    specs.append(
        images.ImageSpec(
            ref=suite.hostpath,
            files=(*shell, images.ImageFile(path="hostpathplugin", source=proxy)),
            entrypoint=("/hostpathplugin",),
        )
    )
    specs += [images.pause_image(ref) for ref in suite.pause]
    return specs


def device_plugin_spec(ref: str, binary: Path) -> images.ImageSpec:
    """The sample device plugin's image as its Dockerfile makes it
    (``/sampledeviceplugin -alsologtostderr``), with the ``/tmp`` its base image has: the
    plugin creates its fake device files there (``/tmp/Dev-1``)."""
    return images.ImageSpec(
        ref=ref,
        files=(
            images.ImageFile(path="sampledeviceplugin", source=binary),
            images.ImageFile(path="tmp/.keep", data=b"", mode=0o644),
        ),
        entrypoint=("/sampledeviceplugin", "-alsologtostderr"),
    )


def build_archives(
    built: dra_e2e.Built, log: Callable[[str], None] = print
) -> list[dict[str, str]]:
    """Make (or reuse) every archive the suite built as ``built`` needs; ``[{ref, path}]``."""
    suite = list_images(built.path)
    proxy = binaries.build_local_program("plugin-proxy", PROXY_SOURCE)
    specs = image_specs(suite, proxy, busybox_applets())
    specs.append(device_plugin_spec(built.device_plugin_ref(), built.device_plugin))
    out = []
    for spec in specs:
        out.append({"ref": spec.ref, "path": str(images.build_archive(spec))})
        log(f"image {spec.ref}: {out[-1]['path']}")
    if suite.others:
        log(f"{len(suite.others)} more images listed by the suite's image table, not made")
    return out


def import_into_nodes(
    archives: Sequence[dict[str, str]], log: Callable[[str], None] = print
) -> list[str]:
    """Import each archive into the containerd of every node of the lab
    (``$GPUFLEET_LAB_NAME``) from the node's cache mount; returns the node names.
    Raises E2EImageError when the lab has no nodes or an import fails."""
    state = cluster.load_state()
    if not state or not state.get("nodes"):
        raise E2EImageError(f"lab {cluster.lab_name()!r} does not exist; `gpufleet lab up` first")
    host = str(binaries.cache_root())
    nodes = [n["name"] for n in state["nodes"]]
    for node in nodes:
        for archive in archives:
            path = archive["path"]
            if not path.startswith(host):
                raise E2EImageError(f"{path} is outside the cache {host} the nodes mount")
            inside = cluster.NODE_CACHE + path[len(host) :]
            argv = ["podman", "exec", node, "ctr", "--namespace", "k8s.io", "images", "import"]
            argv.append(inside)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise E2EImageError(f"`{' '.join(argv)}` exited {proc.returncode}: {proc.stderr}")
        log(f"{node}: imported {len(archives)} images")
    return nodes
