"""The lab node image on real podman: systemd boots as PID 1, containerd serves its
socket, and runc inside the node runs a container from an image imported into containerd.

Needs podman and ``localhost/gpufleet-node:<tag>`` (both from ``lab/prepare-podman``).
One node container is started for the module and removed afterwards, also on failure.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from gpufleet.lab import podman

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PREPARE = REPO / "lab" / "prepare-podman"
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
# Files of a minimal image: a shell and the two libraries it links, read from the node.
MINIMAL_IMAGE_FILES = (
    ("bin/sh", "/usr/bin/dash"),
    ("lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
    ("lib64/ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2"),
)


def _exec(node: str, *cmd: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["podman", "exec", *(["--interactive"] if stdin is not None else []), node, *cmd],
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )


def _ok(node: str, *cmd: str, stdin: bytes | None = None) -> str:
    proc = _exec(node, *cmd, stdin=stdin)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} exited {proc.returncode} in {node}: "
        f"{proc.stderr.decode(errors='replace')}"
    )
    return proc.stdout.decode()


def _remove_node(name: str) -> None:
    volumes = subprocess.run(
        [
            "podman",
            "container",
            "inspect",
            "--format",
            "{{range .Mounts}}{{if .Name}}{{.Name}} {{end}}{{end}}",
            name,
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    subprocess.run(
        ["podman", "rm", "--force", "--volumes", "--time", "10", name],
        capture_output=True,
        check=False,
        timeout=120,
    )
    for v in volumes:
        subprocess.run(["podman", "volume", "rm", "--force", v], capture_output=True, check=False)


@pytest.fixture(scope="module")
def node() -> Iterator[str]:
    """A running node container from the current image (removed after the module)."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: run lab/prepare-podman as root")
    ref = podman.node_image_ref()
    if not podman.image_present(ref):
        pytest.skip(f"node image {ref} is not built: run lab/prepare-podman as root")
    name = f"gpufleet-test-node-{os.urandom(4).hex()}"
    try:
        proc = subprocess.run(
            ["podman", *podman.node_run_args(name, image=ref)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert proc.returncode == 0, f"podman run failed: {proc.stderr}"
        yield name
    finally:
        _remove_node(name)


def _docker_archive(files: Mapping[str, bytes], ref: str) -> bytes:
    """A one-layer image in the ``docker save`` archive format that ``ctr image import``
    reads: manifest.json, the image config (``rootfs.diff_ids``) and the layer tar."""
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        made: set[str] = set()
        for path in sorted(files):
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in made:
                    made.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    layer.addfile(info)
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(files[path]), 0o755
            layer.addfile(info, io.BytesIO(files[path]))
    layer_bytes = layer_buf.getvalue()
    diff_id = hashlib.sha256(layer_bytes).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": ["/bin/sh"]},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        }
    ).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps(
        [{"Config": config_name, "RepoTags": [ref], "Layers": [f"{diff_id}/layer.tar"]}]
    ).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, data in (
            (config_name, config),
            (f"{diff_id}/layer.tar", layer_bytes),
            ("manifest.json", manifest),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_systemd_boots_as_pid1_without_failed_runtime_units(node: str) -> None:
    state = podman.wait_for_boot(node, timeout_s=120)
    assert state in ("running", "degraded")
    failed = _ok(node, "systemctl", "list-units", "--failed", "--plain", "--no-legend")
    failed_units = {line.split()[0] for line in failed.splitlines() if line.strip()}
    assert not failed_units & {"containerd.service", "gpufleet-node-init.service"}, failed
    assert _ok(node, "cat", "/proc/1/comm").strip() == "systemd"
    assert _ok(node, "systemctl", "is-active", "containerd.service").strip() == "active"
    # / is shared so that kubelet's mounts reach the containers that use them
    assert _ok(node, "findmnt", "--noheadings", "--output", "PROPAGATION", "/").strip() == "shared"


def test_node_sees_its_own_cgroup_tree_like_a_host(node: str) -> None:
    podman.wait_for_boot(node, timeout_s=120)
    pid1 = dict(line.split(":", 2)[1:] for line in _ok(node, "cat", "/proc/1/cgroup").split())
    assert pid1["name=systemd"] == "/init.scope"
    assert pid1["memory"] == "/init.scope"
    pid = _ok(node, "systemctl", "show", "--property", "MainPID", "--value", "containerd").strip()
    svc = dict(line.split(":", 2)[1:] for line in _ok(node, "cat", f"/proc/{pid}/cgroup").split())
    assert svc["memory"] == "/system.slice/containerd.service"
    assert svc["pids"] == "/system.slice/containerd.service"


def test_containerd_answers_on_its_socket(node: str) -> None:
    podman.wait_for_boot(node, timeout_s=120)
    version = _ok(node, "ctr", "--address", CONTAINERD_SOCKET, "version")
    server = version.split("Server:", 1)
    assert len(server) == 2 and "Version:" in server[1], version
    plugins = {}
    for line in _ok(node, "ctr", "--address", CONTAINERD_SOCKET, "plugins", "ls").splitlines()[1:]:
        fields = line.split()
        plugins[(fields[0], fields[1])] = fields[-1]
    assert plugins[("io.containerd.runtime.v2", "task")] == "ok"
    assert plugins[("io.containerd.grpc.v1", "cri")] == "ok"
    assert plugins[("io.containerd.snapshotter.v1", "overlayfs")] == "ok"
    dump = _ok(node, "containerd", "config", "dump")
    assert "SystemdCgroup = true" in dump


def test_runc_runs_an_imported_image_inside_the_node(node: str) -> None:
    podman.wait_for_boot(node, timeout_s=120)
    files = {}
    for image_path, node_path in MINIMAL_IMAGE_FILES:
        proc = _exec(node, "cat", node_path)
        assert proc.returncode == 0, proc.stderr
        files[image_path] = proc.stdout
    ref = "localhost/gpufleet-node-test:1"
    ctr = ("ctr", "--address", CONTAINERD_SOCKET, "--namespace", "gpufleet-test")
    _ok(node, *ctr, "images", "import", "-", stdin=_docker_archive(files, ref))
    assert ref in _ok(node, *ctr, "images", "list", "--quiet").split()
    # default snapshotter (overlayfs on the /var/lib/containerd volume), cgroupfs driver
    out = _ok(
        node,
        *ctr,
        "run",
        "--rm",
        ref,
        "t-cgroupfs",
        "/bin/sh",
        "-c",
        "echo ran-by-runc; read l < /proc/self/cgroup; echo $l",
    )
    assert out.splitlines()[0] == "ran-by-runc"
    # systemd cgroup driver, as the CRI plugin runs pods (SystemdCgroup = true)
    out = _ok(
        node,
        *ctr,
        "run",
        "--rm",
        "--runc-systemd-cgroup",
        "--cgroup",
        "system.slice:gpufleet-test:t-systemd",
        ref,
        "t-systemd",
        "/bin/sh",
        "-c",
        "while read l; do echo $l; done < /proc/self/cgroup",
    )
    cgroups = dict(line.split(":", 2)[1:] for line in out.split())
    assert cgroups["memory"] == "/system.slice/gpufleet-test-t-systemd.scope"
    assert cgroups["name=systemd"] == "/system.slice/gpufleet-test-t-systemd.scope"


def test_prepare_script_and_python_compute_the_same_tag(tmp_path: Path) -> None:
    # The script hashes lab/image next to it: run a copy beside a recipe of our own too.
    out = subprocess.run(
        [str(PREPARE), "--print-tag"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert out == podman.recipe_tag()
    (tmp_path / "lab" / "image" / "sub").mkdir(parents=True)
    shutil.copy2(PREPARE, tmp_path / "lab" / "prepare-podman")
    (tmp_path / "lab" / "image" / "b file.txt").write_text("spaces\n")
    (tmp_path / "lab" / "image" / "sub" / "run").write_text("#!/bin/sh\n")
    (tmp_path / "lab" / "image" / "sub" / "run").chmod(0o750)
    (tmp_path / "lab" / "image" / "A").write_text("upper\n")
    out = subprocess.run(
        [str(tmp_path / "lab" / "prepare-podman"), "--print-tag"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert out == podman.recipe_tag(tmp_path / "lab" / "image")
