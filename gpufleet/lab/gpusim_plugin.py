"""Build of the GPU simulator's DRA kubelet plugin (``gpusim-kubelet-plugin``).

The plugin is the Go module in ``lab/gpu-simulator/kubelet-plugin/`` (driver
``gpu.nvidia.com``; see ``lab/gpu-simulator/README.md``). It is built as one static
binary (``CGO_ENABLED=0``, ``-trimpath -ldflags "-s -w"``) into::

    ${GPUFLEET_CACHE:-~/.cache/gpufleet}/bin/gpusim-kubelet-plugin/<digest>/gpusim-kubelet-plugin

where ``<digest>`` is :func:`source_digest` of the module (its non-test ``.go`` files,
``go.mod`` and ``go.sum``), so a changed source names a new binary and an unchanged one
is reused without running Go. Builds use the Go module proxy (``GOFLAGS=-mod=mod``,
``GOPROXY`` as the environment sets it), run niced with ``go build -p 2``, and hold the
same lock file as ``gpufleet.build.binaries`` (``<cache>/build/.lock``) so that two Go
builds never run at once on a small machine.

Running the plugin outside a node (tests, the scale benchmark): :func:`local_command`,
:func:`start_local` and :func:`stop`; :func:`device_classes` are the DeviceClasses the
simulator's chart creates.

CLI::

    python -m gpufleet.lab.gpusim_plugin build   # builds when missing, prints the path
    python -m gpufleet.lab.gpusim_plugin path    # prints the path, builds nothing
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    GPU_CLASS,
    MIG_CLASS,
    NVIDIA_DRIVER,
)

from gpufleet.build import binaries
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK, exit_with

__all__ = [
    "BINARY_NAME",
    "BuildError",
    "BuildInfo",
    "binary_path",
    "build_command",
    "build_env",
    "device_classes",
    "ensure_binary",
    "local_command",
    "source_digest",
    "source_dir",
    "source_files",
    "start_local",
    "stop",
]

BINARY_NAME = "gpusim-kubelet-plugin"
#: Repository root when the package runs from a checkout.
REPO_ROOT = Path(__file__).resolve().parents[2]
#: Bump when the way the binary is built changes (flags), so that the digest changes.
BUILD_SCHEMA = 1
#: Link flags: strip the symbol table and DWARF (the image carries only the binary).
LDFLAGS = "-s -w"
#: Length of the digest in the cache path (hex characters of a SHA-256).
DIGEST_CHARS = 16


class BuildError(RuntimeError):
    """Go is missing, the sources are missing, or ``go build`` failed (message has the
    command, the directory and the tail of Go's output)."""


@dataclass(frozen=True)
class BuildInfo:
    """What one :func:`ensure_binary` call did: ``path`` of the binary, whether it was
    ``built`` (False: found in the cache), ``seconds`` spent building, ``size_bytes``."""

    path: Path
    built: bool
    seconds: float
    size_bytes: int


def cache_root() -> Path:
    """``$GPUFLEET_CACHE`` or ``~/.cache/gpufleet`` (the layout ``gpufleet.build.binaries``
    uses)."""
    env = os.environ.get("GPUFLEET_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gpufleet"


def source_dir() -> Path:
    """``lab/gpu-simulator/kubelet-plugin`` of the checkout.

    Raises :class:`BuildError` when it is absent (an installed wheel has no Go sources).
    """
    src = REPO_ROOT / "lab" / "gpu-simulator" / "kubelet-plugin"
    if not (src / "go.mod").is_file():
        raise BuildError(
            f"the kubelet plugin sources are not at {src} (no go.mod); run from a checkout "
            "of the gpufleet repository"
        )
    return src


def source_files(src: Path) -> list[Path]:
    """The files whose content decides the binary, sorted: every ``*.go`` file except
    ``*_test.go``, every ``*.json`` file (embedded with ``go:embed``: the MIG profile
    tables), plus ``go.mod`` and ``go.sum``. Paths are relative to ``src``."""
    files = [
        p.relative_to(src)
        for p in src.rglob("*.go")
        if not p.name.endswith("_test.go") and p.is_file()
    ]
    files += [p.relative_to(src) for p in src.rglob("*.json") if p.is_file()]
    files += [Path(name) for name in ("go.mod", "go.sum") if (src / name).is_file()]
    return sorted(files, key=lambda p: p.as_posix())


def source_digest(src: Path) -> str:
    """SHA-256 over :data:`BUILD_SCHEMA`, :data:`LDFLAGS` and each of
    :func:`source_files` (relative path and content), first :data:`DIGEST_CHARS` hex
    characters."""
    h = hashlib.sha256(f"schema={BUILD_SCHEMA}\nldflags={LDFLAGS}\n".encode())
    for rel in source_files(src):
        h.update(rel.as_posix().encode() + b"\0")
        h.update((src / rel).read_bytes() + b"\0")
    return h.hexdigest()[:DIGEST_CHARS]


def binary_path(src: Path | None = None) -> Path:
    """Where the binary of the current sources lives (it may not exist yet)."""
    src = src or source_dir()
    return cache_root() / "bin" / BINARY_NAME / source_digest(src) / BINARY_NAME


def build_command(go: str, output: Path, *, nice: bool = True) -> list[str]:
    """The ``go build`` command line that writes ``output`` (run in the module dir)."""
    cmd = [go, "build", "-p", "2", "-trimpath", "-ldflags", LDFLAGS, "-o", str(output), "."]
    return ["nice", "-n", "10", *cmd] if nice and shutil.which("nice") else cmd


def build_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the build: ``base`` (default ``os.environ``) with a static,
    module-proxy build forced (``CGO_ENABLED=0``, ``GOFLAGS=-mod=mod -buildvcs=false``,
    ``GOTOOLCHAIN=local``, ``GOWORK=off``); ``GOPROXY`` is left as ``base`` has it."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "CGO_ENABLED": "0",
            "GOFLAGS": "-mod=mod -buildvcs=false",
            "GOTOOLCHAIN": "local",
            "GOWORK": "off",
        }
    )
    return env


def find_go() -> str:
    """``go`` on PATH or ``/usr/local/go/bin/go``; :class:`BuildError` when neither."""
    go = shutil.which("go") or (
        "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None
    )
    if go is None:
        raise BuildError(
            "go: no Go toolchain on PATH or at /usr/local/go/bin/go; install Go 1.26 or newer "
            "(k8s.io/dynamic-resource-allocation v0.37 declares go 1.26.0)"
        )
    return go


def ensure_binary(
    src: Path | None = None, *, log: Callable[[str], None] | None = None
) -> BuildInfo:
    """Build the plugin unless the binary of the current sources is cached.

    Writes the binary atomically (temporary name, then rename) and a
    ``.gpusim-kubelet-plugin.stamp.json`` next to it (digest, Go version, seconds).
    Raises :class:`BuildError` when Go is missing or the build fails.
    """
    say = log or (lambda msg: print(msg, file=sys.stderr))
    src = src or source_dir()
    target = binary_path(src)
    if target.is_file():
        return BuildInfo(target, False, 0.0, target.stat().st_size)
    go = find_go()
    with binaries.build_lock(say):
        if target.is_file():  # built by another process while we waited
            return BuildInfo(target, False, 0.0, target.stat().st_size)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        cmd = build_command(go, tmp)
        say(f"building {BINARY_NAME} from {src}: {' '.join(cmd)}")
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=src, env=build_env(), capture_output=True, text=True)
        seconds = time.monotonic() - start
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-25:])
            raise BuildError(f"`{' '.join(cmd)}` failed in {src}:\n{tail}")
        go_version = subprocess.run(
            [go, "env", "GOVERSION"], capture_output=True, text=True, env=build_env()
        ).stdout.strip()
        tmp.replace(target)
        stamp = {
            "digest": target.parent.name,
            "go": go_version,
            "seconds": round(seconds, 1),
            "files": [p.as_posix() for p in source_files(src)],
        }
        target.with_name(f".{BINARY_NAME}.stamp.json").write_text(json.dumps(stamp, indent=2))
        size = target.stat().st_size
        say(f"built {target} ({size / 2**20:.1f} MiB) in {seconds:.0f}s")
        return BuildInfo(target, True, seconds, size)


# --------------------------------------------------------------------------- running


def device_classes(api_version: str = "resource.k8s.io/v1") -> list[dict[str, Any]]:
    """``gpu.nvidia.com`` and ``mig.nvidia.com``, as the simulator's chart creates them
    (``lab/gpu-simulator/chart/templates/deviceclass-*.yaml``): a CEL selector on the
    driver and the device's ``type`` attribute."""
    return [
        {
            "apiVersion": api_version,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f"device.driver == '{NVIDIA_DRIVER}' && "
                            f"device.attributes['{NVIDIA_DRIVER}'].type == '{kind}'"
                        }
                    }
                ]
            },
        }
        for name, kind in ((GPU_CLASS, "gpu"), (MIG_CLASS, "mig"))
    ]


def local_command(
    binary: Path, node: str, state_file: Path, kubeconfig: Path, root: Path, *extra: str
) -> list[str]:
    """The plugin's command line for ``node`` run on this machine: the simulator state
    ``state_file``, the API server of ``kubeconfig``, and its sockets, CDI specs and
    checkpoint under ``root`` (keep it short: unix socket paths are limited to 107 bytes).
    ``extra``: more flags (``--poll-interval=200ms``). The plugin does not start without
    an executable nvidia-cdi-hook; off a node no container is created, so a stand-in
    that does nothing is written to ``root/nvidia-cdi-hook`` and named to it."""
    hook = root / "nvidia-cdi-hook"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\n# stand-in: no container is created off a node\nexit 0\n")
    hook.chmod(0o755)
    return [
        str(binary),
        f"--node-name={node}",
        f"--state-file={state_file}",
        f"--kubeconfig={kubeconfig}",
        f"--plugin-data-dir={root / 'plugins' / NVIDIA_DRIVER}",
        f"--registrar-dir={root / 'registry'}",
        f"--cdi-root={root / 'cdi'}",
        f"--claims-dir={root / 'claims'}",
        f"--nvidia-cdi-hook-path={hook}",
        *extra,
    ]


def start_local(cmd: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` (:func:`local_command`) with its output in ``log``; ``NODE_NAME`` and
    ``KUBECONFIG`` of this environment are not passed (the flags name both)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG")}
    with open(log, "wb") as fh:
        return subprocess.Popen(list(cmd), stdout=fh, stderr=subprocess.STDOUT, env=env)


def stop(proc: subprocess.Popen[bytes], grace_s: float = 30) -> int:
    """SIGTERM, then SIGKILL after ``grace_s`` seconds; returns the exit status (the
    plugin exits 0 on SIGTERM)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in (["build"], ["path"], []):
        print(
            f"usage: python -m gpufleet.lab.gpusim_plugin [build|path] (got {args})",
            file=sys.stderr,
        )
        return EXIT_CANNOT_RUN
    try:
        if args == ["path"]:
            print(binary_path())
        else:
            print(ensure_binary().path)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    exit_with(main())
