"""Kubernetes' DRA end-to-end suite as a test binary of its own, per release.

``lab/go/dra-e2e`` is a Go test package that links only ``k8s.io/kubernetes/test/e2e/dra``
with the framework setup of ``test/e2e/e2e_test.go``. It is built the way
:mod:`gpufleet.build.release_facts` builds featuredump: a build module per release under
``<cache>/build/dra-e2e/v<version>/`` that requires ``k8s.io/kubernetes`` at the release
and restates its go.mod's replace directives (:func:`gpufleet.build.gomod.pinned_replaces`),
with the release's Go toolchain and substitutions from ``go_builds`` of
``gpufleet/build/releases.yaml``. ``go test -c`` writes
``<cache>/bin/dra-e2e/v<version>/dra-e2e.test``; beside it go the release's sample
device plugin (``sampledeviceplugin``) and the ``ginkgo`` command of the Ginkgo version
the release requires, which runs the suite on several processes.

Commands (``python -m gpufleet.build.dra_e2e``)::

    build [--kubernetes V]    build (or reuse) the test binary; prints its path, the build
                              seconds and its size
    path [--kubernetes V]     print where the binary is (built or not)

It also owns how the built suite is run (:func:`suite_args`, :func:`run_suite`: one
process group, a deadline, stopped with SIGINT so that Ginkgo writes its reports) and its
image table (:func:`listed_images`); which specs run and what a report means are
``plugins/module_utils/validate/conformance.py``'s.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import click

from gpufleet.build import binaries, gomod, release_pins
from gpufleet.exit import EXIT_FAILED, exit_with

SOURCE_DIR = binaries.REPO_ROOT / "lab" / "go" / "dra-e2e"
MODULE = "k8s.io/kubernetes"
PACKAGE = "drae2e"
BINARY = "dra-e2e.test"
#: The DRAExtendedResource specs deploy the release's sample device plugin
#: (test/e2e/testing-manifests/sample-device-plugin/), built from the same module.
DEVICE_PLUGIN = "sampledeviceplugin"
DEVICE_PLUGIN_PACKAGE = f"{MODULE}/test/images/sample-device-plugin"
GINKGO_PACKAGE = "github.com/onsi/ginkgo/v2/ginkgo"
DEVICE_PLUGIN_MANIFEST = "test/e2e/testing-manifests/sample-device-plugin/sample-device-plugin.yaml"
#: The command line that builds the suite of a release (this module's ``build``).
BUILD_COMMAND = "python -m gpufleet.build.dra_e2e build --kubernetes {version}"
#: Seconds the suite may run past Ginkgo's own ``--timeout`` (its grace period of 30 s,
#: the reports written) before :func:`run_suite` stops it.
PAST_TIMEOUT_S = 120
#: Seconds a stopped suite has to write its reports after SIGINT before SIGKILL.
STOP_GRACE_S = 60
LIST_IMAGES_TIMEOUT_S = 60
BUSYBOX_REPO = "registry.k8s.io/e2e-test-images/busybox"
HOSTPATH_REPO = "registry.k8s.io/sig-storage/hostpathplugin"
PAUSE_REPO = "registry.k8s.io/pause"


class DraE2EError(RuntimeError):
    """The release is not pinned, the source is missing or the build failed."""


@dataclass(frozen=True)
class Built:
    """A test binary: its ``path``, the seconds the build took (0.0 when reused), its
    size in bytes and the unpacked ``k8s.io/kubernetes`` module it was built from."""

    path: Path
    seconds: float
    size: int
    module_dir: Path

    @property
    def ginkgo(self) -> Path:
        """The ginkgo command of the Ginkgo the suite links, which runs it in parallel."""
        return self.path.with_name("ginkgo")

    @property
    def device_plugin(self) -> Path:
        """The sample device plugin built beside the test binary."""
        return self.path.with_name(DEVICE_PLUGIN)

    def device_plugin_ref(self) -> str:
        """The image the release's sample-device-plugin manifest names
        (``registry.k8s.io/e2e-test-images/sample-device-plugin:1.8.0``)."""
        text = (self.module_dir / DEVICE_PLUGIN_MANIFEST).read_text(encoding="utf-8")
        for line in text.splitlines():
            key, _, value = line.strip().removeprefix("- ").partition(":")
            if key == "image" and value.strip():
                return value.strip()
        raise DraE2EError(f"{self.module_dir / DEVICE_PLUGIN_MANIFEST} names no image")


def binary_path(version: str) -> Path:
    return binaries.cache_root() / "bin" / "dra-e2e" / ("v" + version) / BINARY


def built_binary(version: str) -> Path:
    """The test binary of the pinned release ``version``, already built with the ginkgo
    command beside it (nothing is built here). Raises DraE2EError naming the pinned
    releases when ``version`` is not one, or the command that builds it."""
    try:
        release = release_pins.load_releases().release(version)
    except (release_pins.ReleaseFileError, release_pins.UnknownNameError) as exc:
        raise DraE2EError(str(exc)) from None
    out = binary_path(release.version)
    missing = [p for p in (out, out.with_name("ginkgo")) if not p.is_file()]
    if missing:
        raise DraE2EError(
            f"the DRA e2e suite of Kubernetes {release.version} is not built ({missing[0]} is "
            f"missing); fix: {BUILD_COMMAND.format(version=release.version)} (about 20 "
            "minutes with an empty Go build cache)"
        )
    return out


def listed_images(binary: Path, env: Mapping[str, str] | None = None) -> list[str]:
    """The images the suite runs: ``BINARY --list-images`` (the release's
    ``test/utils/image`` table, redirected by ``KUBE_TEST_REPO_LIST`` in ``env`` when set).
    Raises DraE2EError when it fails or runs past ``LIST_IMAGES_TIMEOUT_S``."""
    try:
        proc = subprocess.run(
            [str(binary), "--list-images"],
            capture_output=True,
            text=True,
            timeout=LIST_IMAGES_TIMEOUT_S,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DraE2EError(f"{binary} --list-images: {exc}") from None
    if proc.returncode != 0:
        raise DraE2EError(f"{binary} --list-images exited {proc.returncode}: {proc.stderr}")
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


@dataclass(frozen=True)
class SuiteImages:
    """The references the DRA specs run, by role: every busybox (the test pods), the
    hostpathplugin ``test/e2e/dra/utils/deploy.go`` picks (the highest version: the test
    driver's proxy pods) and every pause; ``others`` what the table lists and no DRA spec
    runs on Linux nodes (agnhost and the rest of ``test/utils/image``)."""

    busybox: tuple[str, ...]
    hostpath: str
    pause: tuple[str, ...]
    others: tuple[str, ...]

    @property
    def run(self) -> tuple[str, ...]:
        return (*self.busybox, self.hostpath, *self.pause)


def _version_key(ref: str) -> tuple[int, ...]:
    tag = ref.rsplit(":", 1)[1].lstrip("v")
    return tuple(int(p) for p in tag.replace("-", ".").split(".") if p.isdigit())


def classify(listed: Iterable[str]) -> SuiteImages:
    """Sort the ``--list-images`` lines of the suite. Raises DraE2EError when the list
    names no busybox or no hostpathplugin image (the suite would not run without them)."""
    refs = [r.strip() for r in listed if r.strip()]
    repo = lambda r: r.rsplit(":", 1)[0]  # noqa: E731
    busybox = tuple(r for r in refs if repo(r) == BUSYBOX_REPO)
    hostpath = sorted((r for r in refs if repo(r) == HOSTPATH_REPO), key=_version_key)
    pause = tuple(r for r in refs if repo(r) == PAUSE_REPO)
    if not busybox or not hostpath:
        raise DraE2EError(f"the suite lists no {BUSYBOX_REPO} or no {HOSTPATH_REPO} image: {refs}")
    made = {*busybox, hostpath[-1], *pause}
    return SuiteImages(busybox, hostpath[-1], pause, tuple(r for r in refs if r not in made))


def suite_images(binary: Path, env: Mapping[str, str] | None = None) -> SuiteImages:
    """The images the DRA specs of ``binary`` run (:func:`listed_images`, :func:`classify`).
    The repositories are the registry.k8s.io names: under a ``KUBE_TEST_REPO_LIST`` that
    moves busybox or hostpathplugin elsewhere this raises DraE2EError; use
    :func:`listed_images` there."""
    return classify(listed_images(binary, env))


def suite_args(
    *,
    kubeconfig: Path,
    report_dir: Path,
    label_filter: str,
    focus: str | None,
    skip: str | None,
    timeout: str,
    procs: int = 1,
) -> list[str]:
    """The suite's arguments: kubeconfig, the filter, both Ginkgo reports, no colour.

    With ``procs`` above 1 they are the ``ginkgo run`` arguments that follow the ginkgo
    command: Ginkgo's flags, the test binary's place (``{binary}``, filled in by
    :func:`suite_argv`), ``--`` and the suite's own flags; ``Serial`` specs then run after
    the others on one process, as Ginkgo does."""
    ginkgo = {
        "label-filter": label_filter,
        "junit-report": str(report_dir / "junit.xml"),
        "json-report": str(report_dir / "ginkgo.json"),
        "timeout": timeout,
    }
    if focus:
        ginkgo["focus"] = focus
    if skip:
        ginkgo["skip"] = skip
    own = [f"--kubeconfig={kubeconfig}", "--provider=local"]
    if procs > 1:
        flags = [f"--{k}={v}" for k, v in ginkgo.items()]
        return ["run", f"--procs={procs}", *flags, "--no-color", "-v", "{binary}", "--", *own]
    return [*own, *(f"-ginkgo.{k}={v}" for k, v in ginkgo.items()), "-ginkgo.no-color", "-ginkgo.v"]


def suite_argv(binary: Path, args: list[str]) -> list[str]:
    """The command line of :func:`suite_args`: the test binary with its arguments, or the
    ginkgo command beside it with the binary's place filled in (several processes)."""
    if "{binary}" in args:
        return [
            str(binary.with_name("ginkgo")),
            *(str(binary) if a == "{binary}" else a for a in args),
        ]
    return [str(binary), *args]


@dataclass(frozen=True)
class SuiteRun:
    """How a run of the suite ended: the exit status, the seconds it ran, and whether it
    was stopped at the deadline (``timed_out``) or by an interrupt of this process."""

    returncode: int
    seconds: float
    timed_out: bool = False
    interrupted: bool = False


def _stop(proc: subprocess.Popen[bytes]) -> int:
    """SIGINT to the suite's process group (Ginkgo then writes its reports), SIGKILL after
    ``STOP_GRACE_S``; the exit status."""
    for sig, wait in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
        with contextlib.suppress(ProcessLookupError):  # the group has ended already
            os.killpg(proc.pid, sig)
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()


def run_suite(
    argv: list[str], *, report_dir: Path, kubeconfig: Path, deadline_s: float
) -> SuiteRun:
    """Run the suite's command line (``argv``, no shell) in ``report_dir`` with its output
    in ``report_dir/output.log``, in a process group of its own; stopped (:func:`_stop`)
    after ``deadline_s`` seconds or when this process is interrupted (Ctrl-C). The
    suite reads its manifests from its own binary, so it runs where it writes nothing
    else."""
    report_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    timed_out = interrupted = False
    with (report_dir / "output.log").open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=report_dir,
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
            start_new_session=True,
        )
        try:
            returncode = proc.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            returncode = _stop(proc)
        except KeyboardInterrupt:
            interrupted = True
            returncode = _stop(proc)
    seconds = round(time.monotonic() - started, 1)
    return SuiteRun(returncode, seconds, timed_out, interrupted)


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def build(version: str | None = None, log: Callable[[str], None] = print) -> Built:
    """Build the DRA e2e test binary against Kubernetes ``version`` (default: the pinned
    default release) unless one built from the same inputs (build go.mod, toolchain,
    sources) is cached. Raises DraE2EError naming the failed step."""
    try:
        release = release_pins.load_releases().release(version)
    except (release_pins.ReleaseFileError, release_pins.UnknownNameError) as exc:
        raise DraE2EError(str(exc)) from None
    sources = {p.name: p.read_text(encoding="utf-8") for p in sorted(SOURCE_DIR.glob("*.go"))}
    if not sources:
        raise DraE2EError(f"no Go source in {SOURCE_DIR}")
    work = binaries.cache_root() / "build" / "dra-e2e" / release.tag
    work.mkdir(parents=True, exist_ok=True)

    def go(args: list[str]) -> str:
        return gomod.run_go(args, work, release.go_toolchain, DraE2EError)

    info = json.loads(go(["mod", "download", "-json", f"{MODULE}@{release.tag}"]))
    if info.get("Error"):
        raise DraE2EError(f"go mod download {MODULE}@{release.tag}: {info['Error']}")
    upstream = gomod.parse_gomod(Path(info["GoMod"]).read_text(encoding="utf-8"))
    replaces = gomod.pinned_replaces(
        upstream, main_version=release.tag, staging_version=release.staging_version
    )
    build_gomod = gomod.render_build_gomod(
        "gpufleet.local/build/dra-e2e",
        [(MODULE, release.tag)],
        [upstream],
        [*gomod.substitution_replaces(release.substitute), *replaces],
    )
    released = json.loads(Path(info["Info"]).read_text(encoding="utf-8"))["Time"]
    build_date = dt.datetime.fromisoformat(released.replace("Z", "+00:00")).astimezone(dt.UTC)
    ldflags = gomod.compose_ldflags(
        gomod.kubernetes_version_variables(
            release.version, build_date.strftime("%Y-%m-%dT%H:%M:%SZ"), release.commit
        )
    )
    out = binary_path(release.version)
    stamp = _digest([build_gomod, release.go_toolchain or "local", ldflags, *sources.values()])
    stamp_file = out.with_name(BINARY + ".stamp")
    plugin = out.with_name(DEVICE_PLUGIN)
    fresh = all(p.is_file() for p in (out, plugin, out.with_name("ginkgo"), stamp_file))
    if fresh and stamp_file.read_text().strip() == stamp:
        return Built(out, 0.0, out.stat().st_size, Path(info["Dir"]))
    pkg = work / PACKAGE
    if pkg.exists():
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    for name, text in sources.items():
        (pkg / name).write_text(text, encoding="utf-8")
    (work / "go.mod").write_text(build_gomod, encoding="utf-8")
    (work / "go.sum").unlink(missing_ok=True)
    gomod.write_substitutes(work, release.substitute, binaries.REPO_ROOT, DraE2EError)
    started = time.monotonic()
    log(f"dra-e2e {release.tag}: go mod tidy (toolchain {release.go_toolchain or 'local'})")
    # -e: test-only dependencies of packages the suite does not link may be absent
    go(["mod", "tidy", "-e"])
    tidied = time.monotonic()
    log(f"dra-e2e {release.tag}: go mod tidy took {tidied - started:.1f} s; go test -c")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{BINARY}.partial")
    go(
        [
            "test",
            "-c",
            "-vet=off",
            f"-p={min(2, os.cpu_count() or 1)}",
            "-mod=mod",
            "-trimpath",
            "-ldflags=" + ldflags,
            "-o",
            str(partial),
            "./" + PACKAGE,
        ]
    )
    os.replace(partial, out)
    plugin_args = ["-mod=mod", "-trimpath", "-ldflags=-s -w", "-o", str(plugin)]
    go(["build", *plugin_args, DEVICE_PLUGIN_PACKAGE])
    # the ginkgo command at the version the release's go.mod requires (runs -p)
    ginkgo_args = ["-mod=mod", "-trimpath", "-ldflags=-s -w", "-o", str(out.with_name("ginkgo"))]
    go(["build", *ginkgo_args, GINKGO_PACKAGE])
    stamp_file.write_text(stamp + "\n")
    seconds = time.monotonic() - started
    size = out.stat().st_size
    log(f"dra-e2e {release.tag}: built in {seconds:.1f} s, {size / 2**20:.1f} MiB")
    return Built(out, seconds, size, Path(info["Dir"]))


@click.group()
def cli() -> None:
    """Kubernetes' DRA e2e suite as its own test binary."""


@cli.command("build")
@click.option("--kubernetes", "version", default=None, help="release (default: the default)")
def build_command(version: str | None) -> None:
    """Build the test binary (or reuse the cached one) and print its path."""
    try:
        built = build(version)
    except DraE2EError as exc:
        click.echo(f"dra_e2e: {exc}", err=True)
        exit_with(EXIT_FAILED)
    state = f"built in {built.seconds:.1f} s" if built.seconds else "up to date"
    click.echo(f"{built.path} ({state}, {built.size / 2**20:.1f} MiB)")


@cli.command("path")
@click.option("--kubernetes", "version", default=None, help="release (default: the default)")
def path_command(version: str | None) -> None:
    """Print where the test binary of a release is."""
    click.echo(str(binary_path(release_pins.load_releases().release(version).version)))


if __name__ == "__main__":
    cli()
