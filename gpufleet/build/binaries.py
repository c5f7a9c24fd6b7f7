"""Kubernetes and tool binaries built from the Go module proxy, cached by version.

The pinned releases live in ``gpufleet/build/releases.yaml`` (read by
``gpufleet.build.release_pins.load_releases``; go.mod files and ldflags: ``gpufleet.build.gomod``).
Binaries land in ``${GPUFLEET_CACHE:-~/.cache/gpufleet}/bin/<name>/v<version>/<binary>``::

    bin/kubernetes/v1.37.2/kube-apiserver
    bin/kubernetes/v1.37.2/gpufleet-featuredump
    bin/etcd/v3.7.3/etcd
    bin/kwok/v0.7.0/kwok

Each group (a Kubernetes release, or a tool at a version) is built from a small generated
Go module of ours under ``<cache>/build/<name>/v<version>/``. For Kubernetes it requires
``k8s.io/kubernetes vX.Y.Z`` and replaces every staging module (the ``=> ./staging/...``
lines of the kubernetes go.mod) with ``k8s.io/<staging> v0.Y.Z``; for tools the local
replaces of the upstream go.mod (``=> ../api``) become the versions that go.mod requires.
The version variables are set with ``-X`` as ``hack/lib/version.sh`` of the kubernetes
module does, so ``kubectl version --client`` and ``kubeadm version`` print the release.

A binary is rebuilt only when it is missing or its stamp file (``.<binary>.stamp.json``
next to it) records other inputs (Go version, package, tags, ldflags, sources).
Go's module and build caches are reused, never cleaned. Builds run one at a time
(a lock file under ``<cache>/build``), niced, with ``go build -p 2`` at most; the binaries
of one release go through one ``go build`` (its second process links one binary while
the first compiles the next: a link alone leaves one of two cores idle).

CLI::

    python -m gpufleet.build.binaries build [--profile ci|all] [--kubernetes 1.37.2 ...]
        [--components kube-apiserver,kubelet] [--tools etcd,kwok,helm,containerd]
    python -m gpufleet.build.binaries list
    python -m gpufleet.build.binaries path kube-apiserver [--kubernetes 1.36.3]
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from gpufleet.build.gomod import (
    BUILD_MODULE_PREFIX,
    GoMod,
    compose_ldflags,
    go_process_env,
    kubernetes_version_variables,
    parse_gomod,
    pinned_replaces,
    render_build_gomod,
    render_tool_ldflags,
    render_tools_go,
    substitutes_digest,
    substitution_replaces,
    write_substitutes,
)
from gpufleet.build.release_pins import (
    KUBERNETES,
    VERSION_RE,
    ReleaseFileError,
    Releases,
    Step,
    Target,
    UnknownNameError,
    load_releases,
    plain_version,
)
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, exit_with

__all__ = [
    "BuildError",
    "BuildResult",
    "binary_path",
    "build",
    "cache_root",
    "check_reported_version",
    "ensure",
    "is_cached",
    "plan_steps",
    "resolve_target",
    "select_steps",
    "stamp_inputs",
    "stamp_matches",
    "target_is_cached",
]

#: Bump when the way binaries are built changes, so that stamps no longer match.
BUILDER_SCHEMA = 1

#: Repository root when the package runs from a checkout (extras' sources live there).
REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- errors


class BuildError(RuntimeError):
    """A go command failed, or a source that a binary needs is missing."""


# --------------------------------------------------------------------------- cache layout


def cache_root() -> Path:
    """``$GPUFLEET_CACHE`` or ``~/.cache/gpufleet`` (not created here)."""
    env = os.environ.get("GPUFLEET_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gpufleet"


def _bin_dir(group: str, version: str) -> Path:
    return cache_root() / "bin" / group / ("v" + plain_version(version))


def _build_dir(group: str, version: str) -> Path:
    return cache_root() / "build" / group / ("v" + plain_version(version))


def _stamp_path(binary: Path) -> Path:
    return binary.with_name(f".{binary.name}.stamp.json")


def resolve_target(
    name: str, version: str | None = None, releases: Releases | None = None
) -> Target:
    """The build target for binary ``name`` at ``version``.

    ``version`` is the version of the binary itself: a Kubernetes release for Kubernetes
    binaries (default: the default release), the tool version otherwise (default: the
    pinned one). Raises :class:`UnknownNameError` for a binary or release not pinned.
    """
    rel = releases or load_releases()
    group = rel.group_of(name)
    if group == KUBERNETES:
        release = rel.release(version)
        return Target(KUBERNETES, release.version, rel.kubernetes_binary(name))
    tool = rel.tool(group)
    if version is not None and not VERSION_RE.match(version):
        raise UnknownNameError(f"{name}: version {version!r} is not MAJOR.MINOR.PATCH")
    tool = tool.at(version or tool.version)
    spec = next(b for b in tool.binaries if b.name == name)
    return Target(group, tool.version, spec)


def binary_path(name: str, version: str | None = None) -> Path:
    """Where binary ``name`` (``kube-apiserver``, ``etcd``, ``kwok``...) lives in the cache.

    ``version``: the Kubernetes release for Kubernetes binaries (default: the default
    release), the tool's version otherwise (default: the pinned one). The file may not
    exist yet; see :func:`is_cached` and :func:`ensure`.
    Raises :class:`UnknownNameError` for a name or release that is not pinned.
    """
    target = resolve_target(name, version)
    return _bin_dir(target.group, target.version) / target.binary.name


# --------------------------------------------------------------------------- stamps


def stamp_inputs(
    target: Target,
    *,
    go_version: str | None,
    platform: str,
    ldflags_templates: Sequence[tuple[str, str]] = (),
    source_digest: str | None = None,
    commit: str | None = None,
    cgo: bool = False,
    substitutes: str | None = None,
) -> dict[str, Any]:
    """Everything a binary's content depends on, as a JSON-able dict.

    The resolved ldflags follow from these (build date and dependency versions are fixed
    by the module version), so the templates are recorded rather than their values.
    ``substitutes``: the digest of the repository's stand-in modules the release builds
    with (``go_builds``), recorded only when there are some.
    """
    inputs: dict[str, Any] = {
        "schema": BUILDER_SCHEMA,
        "group": target.group,
        "version": target.version,
        "binary": target.binary.name,
        "package": target.binary.package,
        "module": target.binary.module,
        "tags": list(target.binary.tags),
        "ldflags": [list(pair) for pair in ldflags_templates],
        "commit": commit,
        "source_digest": source_digest,
        "go": go_version,
        "platform": platform,
        "cgo": cgo,
        "flags": ["-trimpath", "-ldflags=-s -w"],
    }
    if substitutes:
        inputs["substitutes"] = substitutes
    return inputs


def stamp_matches(stamp_text: str | None, inputs: Mapping[str, Any]) -> bool:
    """True when a stamp file's text records exactly ``inputs``.

    A missing, unreadable or foreign stamp never matches. When ``inputs["go"]`` is None
    (no Go toolchain to ask), the recorded Go version is not compared.
    """
    if not stamp_text:
        return False
    try:
        recorded = json.loads(stamp_text).get("inputs")
    except (ValueError, AttributeError):
        return False
    if not isinstance(recorded, dict):
        return False
    if inputs.get("go") is None:
        recorded = {**recorded, "go": None}
    return recorded == dict(inputs)


def render_stamp(inputs: Mapping[str, Any], *, seconds: float, size: int) -> str:
    return (
        json.dumps(
            {
                "inputs": dict(inputs),
                "built_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "build_seconds": round(seconds, 1),
                "size_bytes": size,
            },
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )


def source_digest(directory: Path) -> str | None:
    """sha256 over the ``*.go`` files (not tests) of ``directory``; None if it has none."""
    files = sorted(p for p in directory.glob("*.go") if not p.name.endswith("_test.go"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


# --------------------------------------------------------------------------- go toolchain


@dataclass(frozen=True)
class GoEnv:
    go: str
    version: str  # go1.26.8
    platform: str  # linux/amd64


def _find_go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    return str(fallback) if fallback.exists() else None


@functools.cache
def _go_env() -> GoEnv | None:
    go = _find_go()
    if go is None:
        return None
    out = subprocess.run(
        [go, "env", "-json", "GOVERSION", "GOOS", "GOARCH"],
        check=True,
        capture_output=True,
        text=True,
        env=go_process_env(),
    ).stdout
    data = json.loads(out)
    return GoEnv(go, data["GOVERSION"], f"{data['GOOS']}/{data['GOARCH']}")


def _require_go() -> GoEnv:
    env = _go_env()
    if env is None:
        raise BuildError(
            "go: no Go toolchain on PATH or at /usr/local/go/bin/go; install Go 1.26 or "
            "newer (the Kubernetes 1.36/1.37 modules declare go 1.26.0)"
        )
    return env


def _run_go(
    args: Sequence[str],
    cwd: Path | None = None,
    *,
    nice: bool = False,
    toolchain: str | None = None,
    cgo: bool = False,
) -> str:
    go = _require_go().go
    cmd = [go, *args]
    if nice and shutil.which("nice"):
        cmd = ["nice", "-n", "10", *cmd]
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env=go_process_env(toolchain, cgo)
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-25:])
        raise BuildError(f"`go {' '.join(args)}` failed in {cwd or os.getcwd()}:\n{tail}")
    return proc.stdout


@dataclass(frozen=True)
class ModuleInfo:
    path: str
    version: str
    time: str  # release time, ISO 8601 UTC
    gomod: GoMod


def _download(module: str, version: str, toolchain: str | None = None) -> ModuleInfo:
    workdir = cache_root() / "build"
    workdir.mkdir(parents=True, exist_ok=True)
    data = json.loads(
        _run_go(
            ["mod", "download", "-json", f"{module}@{version}"], cwd=workdir, toolchain=toolchain
        )
    )
    if data.get("Error"):
        raise BuildError(f"go mod download {module}@{version}: {data['Error']}")
    info = json.loads(Path(data["Info"]).read_text(encoding="utf-8"))
    stamp = dt.datetime.fromisoformat(info["Time"].replace("Z", "+00:00")).astimezone(dt.UTC)
    gomod = parse_gomod(Path(data["GoMod"]).read_text(encoding="utf-8"))
    return ModuleInfo(module, version, stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), gomod)


def module_source(module: str, version: str) -> Path:
    """The unpacked source of Go module ``module`` at ``version`` (``v0.17.4``) in the Go
    module cache (``$GOMODCACHE``), downloaded from the module proxy the first time.
    Raises :class:`BuildError` when Go is missing or the proxy refuses the module."""
    workdir = cache_root() / "build"
    workdir.mkdir(parents=True, exist_ok=True)
    data = json.loads(_run_go(["mod", "download", "-json", f"{module}@{version}"], cwd=workdir))
    if data.get("Error") or not data.get("Dir"):
        raise BuildError(f"go mod download {module}@{version}: {data.get('Error')}")
    return Path(data["Dir"])


# --------------------------------------------------------------------------- planning


def _target_inputs(target: Target, releases: Releases) -> dict[str, Any]:
    goenv = _go_env()
    templates: Sequence[tuple[str, str]] = ()
    commit = None
    digest = None
    cgo = False
    substitutes = None
    if target.group == KUBERNETES:
        release = releases.release(target.version)
        commit = release.commit
        substitutes = substitutes_digest(release.substitute, REPO_ROOT, BuildError)
        if target.binary.source:
            digest = source_digest(REPO_ROOT / target.binary.source)
    else:
        tool = releases.tool(target.group).at(target.version)
        templates = tool.ldflags
        cgo = tool.cgo
    return stamp_inputs(
        target,
        go_version=goenv.version if goenv else None,
        platform=goenv.platform if goenv else f"{sys.platform}",
        ldflags_templates=templates,
        source_digest=digest,
        commit=commit,
        cgo=cgo,
        substitutes=substitutes,
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def target_is_cached(target: Target, releases: Releases) -> bool:
    """True when ``target``'s binary exists and its stamp records the current inputs."""
    path = _bin_dir(target.group, target.version) / target.binary.name
    if not path.is_file():
        return False
    return stamp_matches(_read(_stamp_path(path)), _target_inputs(target, releases))


def is_cached(name: str, version: str | None = None) -> bool:
    """True when binary ``name`` at ``version`` (see :func:`binary_path`) is built and its
    stamp records the current inputs. Raises :class:`UnknownNameError` for unknown names."""
    releases = load_releases()
    return target_is_cached(resolve_target(name, version, releases), releases)


def plan_steps(steps: Iterable[Step], releases: Releases) -> list[Target]:
    """Targets of ``steps`` in order, each binary once."""
    out: list[Target] = []
    seen: set[tuple[str, str, str]] = set()
    for step in steps:
        for name in step.binaries:
            if step.group == KUBERNETES:
                spec = releases.kubernetes_binary(name)
            else:
                tool = releases.tool(step.group).at(step.version)
                spec = next(b for b in tool.binaries if b.name == name)
            key = (step.group, step.version, name)
            if key not in seen:
                seen.add(key)
                out.append(Target(step.group, step.version, spec))
    return out


def select_steps(
    releases: Releases,
    *,
    profile: str | None = None,
    kubernetes: Sequence[str] = (),
    components: Sequence[str] = (),
    tools: Sequence[str] = (),
) -> list[Step]:
    """The build steps the CLI options ask for.

    - ``profile``: its steps; with nothing else given, the ``ci`` profile.
    - ``kubernetes``: those releases (``components`` of each, default the full set).
    - ``components`` alone: those components of the default release.
    - ``tools``: the pinned version of each; for ``etcd`` with ``kubernetes`` given, the
      etcd each named release pins instead.

    Steps for small tools come first (etcd, kwok), then releases, then the other tools.
    Raises :class:`UnknownNameError` naming an unknown release, component, tool or profile.
    """
    steps: list[Step] = []
    if profile is None and not (kubernetes or components or tools):
        profile = "ci"
    if profile is not None:
        steps.extend(releases.profile(profile).steps)
    for name in components:
        releases.kubernetes_binary(name)
    versions = [releases.release(v).version for v in kubernetes]
    if components and not versions:
        versions = [releases.default]
    tool_steps: list[Step] = []
    for tool_name in tools:
        tool = releases.tool(tool_name)
        names = tuple(b.name for b in tool.binaries)
        if tool_name == "etcd" and versions:
            for etcd in dict.fromkeys(releases.release(v).etcd for v in versions):
                tool_steps.append(Step("etcd", etcd, names))
        else:
            tool_steps.append(Step(tool_name, tool.version, names))
    early = [s for s in tool_steps if s.group in ("etcd", "kwok")]
    late = [s for s in tool_steps if s.group not in ("etcd", "kwok")]
    kube_steps = [Step(KUBERNETES, v, tuple(components) or releases.full_set) for v in versions]
    return early + steps + kube_steps + late


# --------------------------------------------------------------------------- building


@contextlib.contextmanager
def build_lock(log: Callable[[str], None]) -> Iterator[None]:
    """Hold the cache's build lock (``<cache>/build/.lock``) while one Go build runs, so
    that two builds never share the two cores; ``log`` says when it has to wait."""
    lock_dir = cache_root() / "build"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / ".lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another build to finish (lock {lock_dir / '.lock'})")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class _BuildModule:
    directory: Path
    facts: dict[str, str]


def _prepare_module(
    group: str, version: str, releases: Releases, log: Callable[[str], None]
) -> _BuildModule:
    """Generate (or reuse) the build module of ``group`` at ``version`` and tidy it."""
    directory = _build_dir(group, version)
    directory.mkdir(parents=True, exist_ok=True)
    tag = "v" + version
    toolchain = None
    substitutes = None
    if group == KUBERNETES:
        release = releases.release(version)
        toolchain = release.go_toolchain
        info = _download(releases.module, tag, toolchain)
        replaces = (
            *substitution_replaces(release.substitute),
            *pinned_replaces(info.gomod, main_version=tag, staging_version=release.staging_version),
        )
        upstreams = [info.gomod]
        requires = [(releases.module, tag)]
        packages = [s.package for s in releases.components]
        facts = {"build_date": info.time}
        write_substitutes(directory, release.substitute, REPO_ROOT, BuildError)
        substitutes = substitutes_digest(release.substitute, REPO_ROOT, BuildError)
    else:
        tool = releases.tool(group).at(version)
        modules = list(dict.fromkeys(b.module for b in tool.binaries))
        infos = [_download(m, tag) for m in modules]
        upstreams = [i.gomod for i in infos]
        replaces = tuple(r for i in infos for r in pinned_replaces(i.gomod, main_version=tag))
        requires = [(m, tag) for m in modules]
        packages = [b.package for b in tool.binaries]
        facts = {"build_date": infos[0].time}
        client_go = next((i.gomod.required("k8s.io/client-go") for i in infos), None)
        if client_go and VERSION_RE.match(client_go):
            facts["client_go_minor"] = str(int(client_go.lstrip("v").split(".")[1]))
    gomod_in = render_build_gomod(f"{BUILD_MODULE_PREFIX}/{group}", requires, upstreams, replaces)
    tools_go = render_tools_go(packages)
    record = directory / "go.mod.in"
    # a stand-in module's own requirements are resolved by the tidy: a change re-tidies
    recorded = gomod_in + (f"// substitutes {substitutes}\n" if substitutes else "")
    if _read(record) == recorded and (directory / "go.sum").is_file():
        return _BuildModule(directory, facts)
    log(f"{group} {tag}: generating build module {directory}")
    (directory / "go.mod").write_text(gomod_in, encoding="utf-8")
    (directory / "tools.go").write_text(tools_go, encoding="utf-8")
    started = time.monotonic()
    # -e with a stand-in module: tests of the release's packages import what it leaves
    # out (kube-proxy's tests: .../pkg/iptables/testing, which the proxy does not serve);
    # a package a binary needs and cannot have still fails its go build
    tidy = ["mod", "tidy", "-e"] if substitutes else ["mod", "tidy"]
    _run_go(tidy, cwd=directory, toolchain=toolchain)
    _write_atomic(record, recorded)
    log(f"{group} {tag}: go mod tidy took {time.monotonic() - started:.1f} s")
    return _BuildModule(directory, facts)


def _copy_extra_source(target: Target, module: _BuildModule) -> Path:
    src = REPO_ROOT / (target.binary.source or "")
    files = sorted(p for p in src.glob("*.go") if not p.name.endswith("_test.go"))
    if not files:
        raise BuildError(
            f"{target.binary.name}: no Go source at {src / 'main.go'}; it is written in "
            f"{target.binary.source}/ of the repository"
        )
    dest = module.directory / target.binary.package.removeprefix("./")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for path in files:
        shutil.copy2(path, dest / path.name)
    return dest


def _ldflags(target: Target, module: _BuildModule, releases: Releases) -> str:
    if target.group == KUBERNETES:
        release = releases.release(target.version)
        variables = kubernetes_version_variables(
            release.version, module.facts["build_date"], release.commit
        )
    else:
        variables = render_tool_ldflags(
            releases.tool(target.group).at(target.version), target.version, module.facts
        )
    return compose_ldflags(variables)


def go_output_name(package: str) -> str:
    """The file ``go build -o DIR/`` writes for a main package: the last element of its
    import path, or the one before a major-version suffix (``.../cmd/tool/v2`` -> tool)."""
    parts = package.rstrip("/").split("/")
    if len(parts) > 1 and parts[-1][:1] == "v" and parts[-1][1:].isdigit():
        return parts[-2]
    return parts[-1]


def link_groups(targets: Sequence[Target], ldflags: Callable[[Target], str]) -> list[list[Target]]:
    """Targets of one build module that one ``go build`` can build together: the same
    tags and ldflags, and no two writing the same file name (see :func:`go_output_name`)
    or a file other than their binary's name. Order is kept; the rest go alone."""
    groups: dict[tuple[tuple[str, ...], str], list[Target]] = {}
    alone: list[list[Target]] = []
    for target in targets:
        name = go_output_name(target.binary.package)
        group = groups.setdefault((target.binary.tags, ldflags(target)), [])
        if name != target.binary.name or any(
            go_output_name(t.binary.package) == name for t in group
        ):
            alone.append([target])
        else:
            group.append(target)
    return [g for g in groups.values() if g] + alone


def _go_build(
    targets: Sequence[Target], module: _BuildModule, releases: Releases
) -> tuple[list[Path], float]:
    """Build targets of one module, tags and ldflags with one ``go build`` (the go command
    compiles one binary's packages while it links another's) into the cache atomically;
    returns their paths and the seconds the build took."""
    first = targets[0]
    out_dir = _bin_dir(first.group, first.version)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=out_dir))
    args = ["build", f"-p={min(2, os.cpu_count() or 1)}", "-trimpath", "-mod=mod"]
    if first.binary.tags:
        args.append("-tags=" + ",".join(first.binary.tags))
    # one package: the file is named here (etcd's main package is .../server/v3)
    out = f"{tmp}/" if len(targets) > 1 else str(tmp / first.binary.name)
    args += ["-ldflags=" + _ldflags(first, module, releases), "-o", out]
    args += [t.binary.package for t in targets]
    started = time.monotonic()
    try:
        kubernetes = first.group == KUBERNETES
        toolchain = releases.release(first.version).go_toolchain if kubernetes else None
        cgo = not kubernetes and releases.tool(first.group).cgo
        if cgo and not shutil.which(os.environ.get("CC", "gcc")):
            raise BuildError(
                f"{first.label} is built with cgo (tools.{first.group}.cgo in "
                f"{releases.source}) but there is no C compiler ({os.environ.get('CC', 'gcc')}); "
                "install gcc and libc6-dev (lab/prepare-podman does)"
            )
        _run_go(args, cwd=module.directory, nice=True, toolchain=toolchain, cgo=cgo)
        seconds = time.monotonic() - started
        built = []
        for target in targets:
            path = tmp / target.binary.name
            if not path.is_file():
                raise BuildError(
                    f"{target.label}: `go {' '.join(args)}` wrote no {path.name} in {tmp}"
                )
            path.chmod(0o755)
            check_reported_version(path, target)
            built.append(path)
        finals = []
        for target, path in zip(targets, built, strict=True):
            final = out_dir / target.binary.name
            os.replace(path, final)
            finals.append(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finals, seconds


#: How each binary is asked for its version after a build; the output must contain the
#: version it was built as (``v1.37.2``, ``3.7.3``). Binaries not listed are not asked.
VERSION_ARGS: dict[str, tuple[str, ...]] = {
    "kube-apiserver": ("--version",),
    "kube-controller-manager": ("--version",),
    "kube-scheduler": ("--version",),
    "kube-proxy": ("--version",),
    "kubelet": ("--version",),
    "kubeadm": ("version", "-o", "short"),
    "kubectl": ("version", "--client"),
    "etcd": ("--version",),
    "etcdctl": ("version",),
    "kwok": ("--version",),
    "helm": ("version", "--short"),
    "containerd": ("--version",),
    "ctr": ("--version",),
    "containerd-shim-runc-v2": ("-v",),
    "nvidia-ctk": ("--version",),
    "nvidia-cdi-hook": ("--version",),
    "nvidia-container-runtime": ("--version",),
    "prometheus": ("--version",),
    "promtool": ("--version",),
}


def check_reported_version(path: Path, target: Target) -> str:
    """Run a freshly built binary and check it reports ``target``'s version.

    Returns the first output line. Raises :class:`BuildError` when the output lacks the
    version (``v0.0.0`` binaries make kubeadm and the kubelet misbehave).
    """
    args = VERSION_ARGS.get(target.binary.name)
    if args is None:
        return ""
    proc = subprocess.run(
        [str(path), *args], capture_output=True, text=True, timeout=60, env={"HOME": "/tmp"}
    )
    output = (proc.stdout + proc.stderr).strip()
    wanted = target.tag if target.group == KUBERNETES else target.version
    if wanted not in output:
        raise BuildError(
            f"{target.label}: `{path.name} {' '.join(args)}` printed {output[:300]!r}, "
            f"which lacks {wanted}; the -X version variables did not take"
        )
    return output.splitlines()[0] if output else ""


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


@dataclass
class BuildResult:
    target: Target
    path: Path
    status: str  # "built", "cached", "skipped", "failed"
    seconds: float = 0.0
    size: int = 0
    message: str = ""


def _build_group(
    group: Sequence[Target], module: _BuildModule, rel: Releases, log: Callable[[str], None]
) -> list[BuildResult]:
    """One ``go build`` for ``group``; when it fails and holds more than one target, each is
    built alone so that the result names the binary that does not build."""
    names = ", ".join(t.binary.name for t in group)
    log(f"{group[0].group} {group[0].tag}: building {names} ...")
    try:
        finals, seconds = _go_build(group, module, rel)
    except (BuildError, ReleaseFileError) as exc:
        if len(group) > 1:
            log(f"{group[0].group} {group[0].tag}: the build of {names} failed; each alone")
            return [r for t in group for r in _build_group([t], module, rel, log)]
        target = group[0]
        log(f"{target.label}: FAILED\n{exc}")
        path = _bin_dir(target.group, target.version) / target.binary.name
        return [BuildResult(target, path, "failed", message=str(exc))]
    results = []
    share = f" (built together with {len(group) - 1} more)" if len(group) > 1 else ""
    for target, final in zip(group, finals, strict=True):
        size = final.stat().st_size
        inputs = _target_inputs(target, rel)
        _write_atomic(_stamp_path(final), render_stamp(inputs, seconds=seconds, size=size))
        log(f"{target.label}: built in {seconds:.1f} s{share}, {_mib(size)}")
        results.append(BuildResult(target, final, "built", seconds, size))
    return results


def build(
    targets: Sequence[Target],
    releases: Releases | None = None,
    log: Callable[[str], None] = print,
) -> list[BuildResult]:
    """Build every target that is missing or stale: one ``go build`` per build module for
    the targets that share tags and ldflags (:func:`link_groups`), one build at a time.

    A program of this project whose source is absent is skipped with a message; a failed
    build is reported and the others still run. Returns one :class:`BuildResult` each.
    """
    rel = releases or load_releases()
    results: list[BuildResult] = []
    todo: list[Target] = []
    for target in targets:
        path = _bin_dir(target.group, target.version) / target.binary.name
        if target.binary.source and source_digest(REPO_ROOT / target.binary.source) is None:
            msg = f"no source at {target.binary.source}/main.go yet"
            log(f"{target.label}: skipped, {msg}")
            results.append(BuildResult(target, path, "skipped", message=msg))
        elif (cached := _cached(target, rel, log, "stamp matches, not rebuilt")) is not None:
            results.append(cached)
        else:
            todo.append(target)
    if not todo:
        return results
    _require_go()
    # The lock is held for one Go step at a time (a build module's preparation, one go
    # build), not for the whole list: a small build that another process needs (the lab's
    # pause program for a `gpufleet lab up` while a profile builds) waits for one step,
    # not for every release.
    modules: dict[tuple[str, str], _BuildModule | BuildError] = {}
    by_module: dict[tuple[str, str], tuple[_BuildModule, list[Target]]] = {}
    for target in todo:
        path = _bin_dir(target.group, target.version) / target.binary.name
        key = (target.group, target.version)
        if key not in modules:
            try:
                with build_lock(log):
                    modules[key] = _prepare_module(target.group, target.version, rel, log)
            except BuildError as exc:
                modules[key] = exc
        module = modules[key]
        if isinstance(module, BuildError):
            log(f"{target.label}: FAILED, build module not ready: {module}")
            results.append(BuildResult(target, path, "failed", message=str(module)))
            continue
        try:
            if target.binary.source:
                _copy_extra_source(target, module)
        except BuildError as exc:
            log(f"{target.label}: FAILED\n{exc}")
            results.append(BuildResult(target, path, "failed", message=str(exc)))
            continue
        by_module.setdefault(key, (module, []))[1].append(target)
    for module, targets in by_module.values():
        groups = link_groups(targets, functools.partial(_ldflags, module=module, releases=rel))
        for group in groups:
            with build_lock(log):
                fresh = []
                for target in group:  # built by another process while this one waited?
                    cached = _cached(target, rel, log, "built meanwhile")
                    if cached is None:
                        fresh.append(target)
                    else:
                        results.append(cached)
                if fresh:
                    results += _build_group(fresh, module, rel, log)
    return results


def _cached(
    target: Target, rel: Releases, log: Callable[[str], None], why: str
) -> BuildResult | None:
    """The result for ``target`` when its cached binary's stamp matches (logged with
    ``why``), else None."""
    if not target_is_cached(target, rel):
        return None
    path = _bin_dir(target.group, target.version) / target.binary.name
    size = path.stat().st_size
    log(f"{target.label}: up to date, {_mib(size)} ({why})")
    return BuildResult(target, path, "cached", size=size)


def ensure(
    names: str | Iterable[str],
    version: str | None = None,
    *,
    log: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Build the binaries ``names`` at ``version`` (see :func:`binary_path`) if missing.

    Returns ``{name: path}``. Raises :class:`UnknownNameError` for names or versions not
    pinned, :class:`BuildError` when a build fails or a project program has no source.
    """
    releases = load_releases()
    wanted = [names] if isinstance(names, str) else list(names)
    targets = [resolve_target(n, version, releases) for n in wanted]
    results = build(targets, releases, log)
    bad = [r for r in results if r.status in ("failed", "skipped")]
    if bad:
        raise BuildError("; ".join(f"{r.target.label}: {r.status}: {r.message}" for r in bad))
    return {r.target.binary.name: r.path for r in results}


# --------------------------------------------------------------------------- CLI


def _split_csv(values: Sequence[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Build and find the pinned Kubernetes and tool binaries (gpufleet/build/releases.yaml)."""


@cli.command("build")
@click.option("--profile", type=str, default=None, help="A profile of releases.yaml (ci, all).")
@click.option(
    "--kubernetes", "kubernetes", multiple=True, help="A pinned release, e.g. 1.37.2 (repeat)."
)
@click.option("--components", multiple=True, help="Comma-separated Kubernetes components.")
@click.option("--tools", multiple=True, help="Comma-separated tools: etcd,kwok,helm,containerd.")
def build_command(
    profile: str | None,
    kubernetes: tuple[str, ...],
    components: tuple[str, ...],
    tools: tuple[str, ...],
) -> None:
    """Build what is missing; with no option, the ci profile."""
    try:
        releases = load_releases()
        steps = select_steps(
            releases,
            profile=profile,
            kubernetes=_split_csv(kubernetes),
            components=_split_csv(components),
            tools=_split_csv(tools),
        )
        targets = plan_steps(steps, releases)
    except (UnknownNameError, ReleaseFileError) as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"cache: {cache_root()}; {len(targets)} binaries")
    started = time.monotonic()
    try:
        results = build(targets, releases, log=lambda m: click.echo(m, nl=True))
    except BuildError as exc:
        click.echo(str(exc), err=True)
        exit_with(EXIT_CANNOT_RUN)
    elapsed = time.monotonic() - started
    counts = {
        s: sum(1 for r in results if r.status == s)
        for s in ("built", "cached", "skipped", "failed")
    }
    total = sum(r.size for r in results)
    click.echo(
        f"done in {elapsed:.1f} s: {counts['built']} built, {counts['cached']} up to date, "
        f"{counts['skipped']} skipped, {counts['failed']} failed; {_mib(total)} of binaries"
    )
    if counts["built"] == 0 and counts["failed"] == 0:
        click.echo("nothing rebuilt: every binary's stamp matches its inputs")
    if counts["failed"]:
        exit_with(EXIT_FAILED)


@cli.command("list")
def list_command() -> None:
    """What is cached, with sizes."""
    root = cache_root() / "bin"
    total = 0
    if root.is_dir():
        for group in sorted(p for p in root.iterdir() if p.is_dir()):
            for version in sorted(p for p in group.iterdir() if p.is_dir()):
                for binary in sorted(version.iterdir()):
                    if binary.name.startswith(".") or not binary.is_file():
                        continue
                    size = binary.stat().st_size
                    total += size
                    state = "" if _stamp_path(binary).exists() else "  (no stamp)"
                    click.echo(
                        f"{group.name:<12} {version.name:<10} {binary.name:<26} "
                        f"{_mib(size):>10}{state}"
                    )
    click.echo(f"binaries: {_mib(total)} under {root}")
    build_dir = cache_root() / "build"
    if build_dir.is_dir():
        click.echo(f"build modules: {_mib(_dir_size(build_dir))} under {build_dir}")
    click.echo(f"cache total: {_mib(_dir_size(cache_root()) if cache_root().exists() else 0)}")


@cli.command("path")
@click.argument("name")
@click.option("--kubernetes", "kubernetes", default=None, help="Release (for etcd: its etcd).")
@click.option("--version", "version", default=None, help="Tool version (default: pinned).")
def path_command(name: str, kubernetes: str | None, version: str | None) -> None:
    """Print the cache path of binary NAME; exit 1 if it is not built yet."""
    try:
        releases = load_releases()
        group = releases.group_of(name)
        if group == KUBERNETES:
            wanted = kubernetes or version
        elif group == "etcd" and kubernetes and not version:
            wanted = releases.etcd_for(kubernetes)
        else:
            wanted = version
        path = binary_path(name, wanted)
    except (UnknownNameError, ReleaseFileError) as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(str(path))
    if not path.is_file():
        click.echo(f"{name}: not built yet; run lab/build-binaries", err=True)
        exit_with(EXIT_FAILED)


if __name__ == "__main__":
    cli()


# --------------------------------------------------------------------------- local programs


def build_local_program(name: str, source_dir: Path) -> Path:
    """Build the standard-library-only Go program in ``source_dir`` (e.g. ``lab/go/pause``)
    into ``<cache>/bin/local/<name>/<digest>/<name>``; returns the binary's path.

    The directory holds ``*.go`` files of package main and no go.mod: a module file is
    written beside a copy of them, so nothing is fetched. The digest covers the sources,
    so an edit rebuilds and a warm call is a stat. Raises :class:`BuildError` when Go is
    missing or the build fails.
    """
    digest = source_digest(source_dir)
    if digest is None:
        raise BuildError(f"{source_dir}: no Go sources for {name}")
    out = cache_root() / "bin" / "local" / name / digest[:16] / name
    if out.is_file():
        return out
    with tempfile.TemporaryDirectory(prefix=f"gpufleet-{name}-") as tmp:
        work = Path(tmp)
        for src in source_dir.glob("*.go"):
            shutil.copy2(src, work / src.name)
        (work / "go.mod").write_text(f"module gpufleet.local/{name}\n\ngo 1.22\n")
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{name}.partial")
        with build_lock(print):
            _run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial), "."], cwd=work)
        os.replace(partial, out)
    return out
