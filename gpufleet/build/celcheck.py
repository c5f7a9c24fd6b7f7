"""Kubernetes' own verdicts on DRA CEL selectors, per pinned release.

``lab/go/celcheck`` is built against ``k8s.io/dynamic-resource-allocation`` at the staging
version of each release listed under ``celcheck`` in ``gpufleet/build/releases.yaml``
(``1.37.2`` -> ``v0.37.2``: the module that kube-apiserver validates selectors with and
kube-scheduler evaluates them with, ``cel/compile.go``), with that module's own
``go.mod`` pinning cel-go, ``k8s.io/apiserver`` and ``k8s.io/api``. The program reads
expressions and devices as JSON and prints, per expression, the compile verdict and, per
device, the result or the runtime error (see ``lab/go/celcheck/main.go``). The DRA CEL
API of the module changed in 1.34, 1.36 and 1.38; one shape file per API (``api_v133.go``,
``api_v134.go`` for 1.34 and 1.35, ``api_v136.go`` for 1.36 and 1.37, ``api_v138.go`` from
1.38) adapts it: the builder copies the release's own next to ``main.go`` and passes its
build tag (``API_SHAPES``).

Commands (``python -m gpufleet.build.celcheck``)::

    build [--kubernetes V ...] [--ci]   build the binaries (scripts/setup: --ci)
    path [--kubernetes V]               print where a release's binary lives

The build module of a release lives in ``<cache>/build/celcheck/v<version>/``, the binary
in ``<cache>/bin/celcheck/v<version>/gpufleet-celcheck`` (``<cache>``: ``$GPUFLEET_CACHE``
or ``~/.cache/gpufleet``), rebuilt only when the program or the module pins change. How Go
code is built against a release (the Go toolchain, module substitutions) is read from its
``go_builds`` entry in the releases file, as every other build against it does.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from gpufleet.build import binaries, gomod, release_pins
from gpufleet.exit import EXIT_FAILED, exit_with

REPO_ROOT = Path(__file__).resolve().parents[2]
RELEASES_FILE = REPO_ROOT / "gpufleet" / "build" / "releases.yaml"
SOURCE_DIR = REPO_ROOT / "lab" / "go" / "celcheck"
BINARY = "gpufleet-celcheck"
MODULE = "k8s.io/dynamic-resource-allocation"
#: Modules the program imports besides MODULE, required at the same staging version.
STAGING_IMPORTS = ("k8s.io/api", "k8s.io/apiserver")
#: The oldest minor whose DRA CEL API the program has a shape file for.
MIN_MINOR = 33
#: Minor -> (build tag, shape file) of ``lab/go/celcheck`` for the DRA CEL API of
#: ``k8s.io/dynamic-resource-allocation/cel`` that minor has (``compile.go``): 1.33
#: ``GetCompiler()`` and resource/v1beta1; 1.34 and 1.35 ``Features{EnableConsumableCapacity}``
#: and resource/v1; 1.36 and 1.37 also ``EnableListTypeAttributes``; from 1.38 cel-go as
#: ``cel.dev/cel-go`` and ``Device`` in the allocator's form of
#: ``k8s.io/dynamic-resource-allocation/api`` (no tag: the newest).
API_SHAPES = {
    33: ("dracel_v133", "api_v133.go"),
    34: ("dracel_v134", "api_v134.go"),
    36: ("dracel_v136", "api_v136.go"),
}
API_SHAPES[35] = API_SHAPES[34]
API_SHAPES[37] = API_SHAPES[36]
NEWEST_SHAPE = ("", "api_v138.go")
BUILD_COMMAND = "python -m gpufleet.build.celcheck build --kubernetes {version}"


class CelCheckError(RuntimeError):
    """A release entry is malformed, a build failed or the program's output is not JSON."""


@dataclass(frozen=True)
class CelRelease(release_pins.BuiltAgainst):
    """A release whose CEL verdicts are checked: ``version`` (``1.37.2``), how Go code is
    built against it (its ``go_builds`` entry: toolchain, module substitutions) and whether
    scripts/setup builds it (``ci``)."""

    version: str
    go_build: release_pins.GoBuild = release_pins.LOCAL_GO_BUILD
    ci: bool = False


def parse_celcheck_releases(data: Any, source: str = str(RELEASES_FILE)) -> tuple[CelRelease, ...]:
    """The ``celcheck.releases`` entries of a parsed releases file, each a release
    (``1.37.2``, ``1.38.0-beta.0``) of 1.33 or newer, built as its ``go_builds`` entry says.
    Raises CelCheckError naming the entry, the value and the fix."""
    section = data.get("celcheck") if isinstance(data, Mapping) else None
    entries = section.get("releases") if isinstance(section, Mapping) else None
    if not isinstance(entries, list) or not entries:
        raise CelCheckError(f"{source}: no celcheck.releases list; add one (see releases.yaml)")
    try:
        go_builds = release_pins.parse_go_builds(data, source)
    except release_pins.ReleaseFileError as exc:
        raise CelCheckError(str(exc)) from None
    out: list[CelRelease] = []
    for i, entry in enumerate(entries):
        where = f"celcheck.releases[{i}]"
        if not isinstance(entry, Mapping) or "version" not in entry:
            raise CelCheckError(f"{where} in {source} is {entry!r}; write {{version: '1.37.2'}}")
        version = str(entry["version"]).removeprefix("v")
        if not release_pins.VERSION_RE.match(version):
            raise CelCheckError(
                f"{where}.version = {entry['version']!r} in {source} is not a release; "
                "write one such as '1.37.2' or '1.38.0-beta.0'"
            )
        if any(r.version == version for r in out):
            raise CelCheckError(f"{where}.version = {version!r} in {source} is listed twice")
        release = CelRelease(
            version,
            go_builds.get(version, release_pins.LOCAL_GO_BUILD),
            ci=bool(entry.get("ci", False)),
        )
        if release.minor < MIN_MINOR:
            raise CelCheckError(
                f"{where}.version = {version!r} in {source}: lab/go/celcheck has no shape "
                f"file for the DRA CEL API before 1.{MIN_MINOR}; name 1.{MIN_MINOR} or newer"
            )
        out.append(release)
    return tuple(out)


def load_celcheck_releases(path: Path = RELEASES_FILE) -> tuple[CelRelease, ...]:
    return parse_celcheck_releases(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))


def api_shape(release: CelRelease) -> str:
    """The DRA CEL API shape celcheck is built with for ``release`` (``1.33``, ``1.34``,
    ``1.36``, ``1.38``: the ``api`` its output names)."""
    _, shape = API_SHAPES.get(release.minor, NEWEST_SHAPE)
    return f"1.{shape.removeprefix('api_v1').removesuffix('.go')}"


def sources_for(release: CelRelease) -> tuple[str, dict[str, str]]:
    """The build tag (``""``: none) and the Go files (name -> text) of ``lab/go/celcheck``
    that build against ``release``: every file but the API shape files, and the one shape
    file of the release's DRA CEL API (``API_SHAPES``)."""
    tag, shape = API_SHAPES.get(release.minor, NEWEST_SHAPE)
    chosen = [p for p in sorted(SOURCE_DIR.glob("*.go")) if not p.name.startswith("api_")]
    return tag, {p.name: p.read_text(encoding="utf-8") for p in (*chosen, SOURCE_DIR / shape)}


def binary_path(version: str) -> Path:
    """Where the celcheck binary of ``version`` (``1.37.2``) is cached (may not exist)."""
    return binaries.cache_root() / "bin" / "celcheck" / f"v{version}" / BINARY


def _go(release: CelRelease, args: Sequence[str], cwd: Path) -> str:
    return gomod.run_go(args, cwd, release.go_toolchain, CelCheckError)


def build(release: CelRelease, log=print) -> Path:
    """Build celcheck against ``release`` with the toolchain and module substitutions of its
    ``go_builds`` entry; returns the binary's path (cached by inputs: the program's source,
    the build go.mod and the toolchain). Raises CelCheckError."""
    work = binaries.cache_root() / "build" / "celcheck" / release.tag
    work.mkdir(parents=True, exist_ok=True)
    staging = release.staging_version
    info = json.loads(_go(release, ["mod", "download", "-json", f"{MODULE}@{staging}"], work))
    if info.get("Error"):
        raise CelCheckError(f"go mod download {MODULE}@{staging}: {info['Error']}")
    upstream = gomod.parse_gomod(Path(info["GoMod"]).read_text(encoding="utf-8"))
    requires = [(MODULE, staging), *((m, staging) for m in STAGING_IMPORTS)]
    build_gomod = gomod.render_build_gomod(
        "gpufleet.local/build/celcheck",
        requires,
        [upstream],
        [
            *gomod.substitution_replaces(release.substitute),
            *(r for r in upstream.replace if not r.is_local),
        ],
    )
    tag, sources = sources_for(release)
    shape = next(name for name in sources if name.startswith("api_"))
    digest = hashlib.sha256()
    for part in (build_gomod, release.go_toolchain or "local", tag, *sources.values()):
        digest.update(part.encode() + b"\0")
    stamp = digest.hexdigest()
    out = binary_path(release.version)
    stamp_file = out.with_name(BINARY + ".stamp")
    if out.is_file() and stamp_file.is_file() and stamp_file.read_text().strip() == stamp:
        return out
    pkg = work / "celcheck"
    if pkg.exists():
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    for name, text in sources.items():
        (pkg / name).write_text(text, encoding="utf-8")
    (work / "go.mod").write_text(build_gomod, encoding="utf-8")
    (work / "go.sum").unlink(missing_ok=True)
    gomod.write_substitutes(work, release.substitute, binaries.REPO_ROOT, CelCheckError)
    started = time.monotonic()
    log(
        f"celcheck {release.tag}: go mod tidy (toolchain {release.go_toolchain or 'local'}, "
        f"DRA CEL API {shape})"
    )
    _go(release, ["mod", "tidy"], work)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{BINARY}.partial")
    _go(
        release,
        [
            "build",
            "-mod=mod",
            "-trimpath",
            *([f"-tags={tag}"] if tag else []),
            "-ldflags=-s -w",
            "-o",
            str(partial),
            "./celcheck",
        ],
        work,
    )
    os.replace(partial, out)
    stamp_file.write_text(stamp + "\n")
    log(f"celcheck {release.tag}: built in {time.monotonic() - started:.1f} s")
    return out


def run(
    path: Path,
    expressions: Sequence[str],
    devices: Sequence[Mapping[str, Any]],
    features: Mapping[str, bool],
    *,
    functions: bool = False,
    timeout: float = 300,
) -> dict[str, Any]:
    """Run a celcheck binary on ``expressions`` and ``devices`` (``{name, driver,
    allowMultipleAllocations?, attributes, capacity}`` as in a v1 ResourceSlice) with the
    DRA ``features`` (``{"consumableCapacity": bool, "listTypeAttributes": bool}``);
    returns its parsed output (``expressions[i].compile.verdict``, ``.results[j]``).
    Raises CelCheckError when it fails or prints no JSON."""
    document = {
        "features": dict(features),
        "expressions": list(expressions),
        "devices": [dict(d) for d in devices],
    }
    proc = subprocess.run(
        [str(path), *(["-functions"] if functions else [])],
        input=json.dumps(document),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise CelCheckError(f"{path} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise CelCheckError(f"{path} printed no JSON: {exc}") from None


def features_for(version: str) -> dict[str, bool]:
    """The DRA CEL features of ``version`` with its default feature gates
    (DRAConsumableCapacity, DRAListTypeAttributes), from the version model."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates

    def on(gate: str) -> bool:
        try:
            return bool(dra_gates.gate_state(gate, version).default)
        except Exception:  # a gate the release does not register is off
            return False

    return {
        "consumableCapacity": on("DRAConsumableCapacity"),
        "listTypeAttributes": on("DRAListTypeAttributes"),
    }


def judge_for(
    expressions: Sequence[str], kubernetes_version: str | None = None
) -> tuple[Callable[[str], Any], str]:
    """A CEL judge for ``claims.cel.check_cel`` and what it is: the verdicts of Kubernetes'
    own DRA CEL environment when the celcheck binary of a listed release of the same minor
    as ``kubernetes_version`` (default: the default pinned release) is cached, run once on
    ``expressions``; otherwise (or when it fails) the Python environment ``cel.verdicts`` with
    that release's default DRA features. Never raises."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import verdicts as dra_cel

    try:
        version = kubernetes_version or release_pins.load_releases().default
        releases = load_celcheck_releases()
    except (CelCheckError, OSError, release_pins.ReleaseFileError) as exc:
        return dra_cel.judge, f"Python environment (releases file: {exc})"
    minor = version.removeprefix("v").split(".")[:2]
    features = features_for(version)

    def python(expression: str) -> Any:
        return dra_cel.judge(expression, features, version)

    chosen = next((r for r in releases if r.version.split(".")[:2] == minor), None)
    hint = (
        f"build Kubernetes' own with `{BUILD_COMMAND.format(version=chosen.version)}`"
        if (chosen)
        else "no release of this minor is listed under celcheck"
    )
    if chosen is None or not binary_path(chosen.version).is_file():
        return python, f"Python environment ({hint})"
    try:
        out = run(binary_path(chosen.version), list(dict.fromkeys(expressions)), [], features)
    except (CelCheckError, OSError, subprocess.SubprocessError) as exc:
        return python, f"Python environment (gpufleet-celcheck {chosen.version} failed: {exc})"
    table: dict[str, Any] = {}
    for entry in out.get("expressions", []):
        compiled = entry["compile"]
        verdict, message = compiled["verdict"], compiled.get("message", "")
        if verdict == "ok":
            table[entry["expression"]] = dra_cel.Verdict(dra_cel.OK)
        elif verdict == "too_long":
            table[entry["expression"]] = dra_cel.Verdict(dra_cel.TOO_LONG, message)
        else:
            if verdict == "too_expensive":
                message = (
                    f"too complex, exceeds cost limit (estimated cost {compiled.get('maxCost')} "
                    f"> {out.get('maxCost')})"
                )
            table[entry["expression"]] = dra_cel.Verdict(dra_cel.INVALID, message)

    def kubernetes(expression: str) -> Any:
        return table.get(expression) or python(expression)

    return kubernetes, f"Kubernetes {chosen.version} (gpufleet-celcheck)"


def _select(releases: Sequence[CelRelease], wanted: Sequence[str]) -> list[CelRelease]:
    if not wanted:
        return list(releases)
    chosen = []
    for w in wanted:
        match = [r for r in releases if r.version == w.removeprefix("v")]
        if not match:
            known = ", ".join(r.version for r in releases)
            raise click.UsageError(
                f"--kubernetes {w}: not listed under celcheck in {RELEASES_FILE} "
                f"(listed: {known}); add it there first"
            )
        chosen.extend(match)
    return chosen


@click.group()
def cli() -> None:
    """Kubernetes' DRA CEL verdicts, per release."""


@cli.command("build")
@click.option("--kubernetes", "versions", multiple=True, help="release to build (repeat)")
@click.option("--ci", "ci_only", is_flag=True, help="only the releases marked ci: true")
def build_command(versions: tuple[str, ...], ci_only: bool) -> None:
    """Build the celcheck binary of each release."""
    try:
        for release in _select(load_celcheck_releases(), versions):
            if ci_only and not release.ci:
                continue
            click.echo(f"{release.version}: {build(release)}")
    except CelCheckError as exc:
        click.echo(f"celcheck: {exc}", err=True)
        exit_with(EXIT_FAILED)


@cli.command("path")
@click.option("--kubernetes", "version", default=None, help="release (default: the first)")
def path_command(version: str | None) -> None:
    """Print where a release's celcheck binary lives."""
    releases = _select(load_celcheck_releases(), [version] if version else [])
    click.echo(str(binary_path(releases[0].version)))


if __name__ == "__main__":
    cli()
