"""Kubernetes and tool binaries built from the Go module proxy, cached by version.

The pinned releases live in ``gpufleet/lab/releases.yaml`` (read by :func:`load_releases`).
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
(a lock file under ``<cache>/build``), niced, with ``go build -p 2`` at most.

CLI::

    python -m gpufleet.lab.binaries build [--profile ci|all] [--kubernetes 1.37.2 ...]
        [--components kube-apiserver,kubelet] [--tools etcd,kwok,helm,containerd]
    python -m gpufleet.lab.binaries list
    python -m gpufleet.lab.binaries path kube-apiserver [--kubernetes 1.36.3]
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml

__all__ = [
    "BinarySpec",
    "BuildError",
    "BuildResult",
    "GoMod",
    "KubernetesRelease",
    "Profile",
    "ReleaseFileError",
    "Releases",
    "Replace",
    "Step",
    "Target",
    "Tool",
    "UnknownNameError",
    "binary_path",
    "build",
    "cache_root",
    "check_reported_version",
    "compose_ldflags",
    "ensure",
    "is_cached",
    "kubernetes_version_variables",
    "load_releases",
    "parse_gomod",
    "parse_releases",
    "pinned_replaces",
    "plan_steps",
    "render_build_gomod",
    "resolve_target",
    "select_steps",
    "stamp_inputs",
    "stamp_matches",
    "target_is_cached",
]

#: Bump when the way binaries are built changes, so that stamps no longer match.
BUILDER_SCHEMA = 1

RELEASES_FILE = Path(__file__).with_name("releases.yaml")
#: Repository root when the package runs from a checkout (extras' sources live there).
REPO_ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = "kubernetes"
BUILD_MODULE_PREFIX = "gpufleet.local/build"
#: The packages whose version variables kubernetes sets at link time
#: (hack/lib/version.sh, kube::version::ldflags).
KUBERNETES_VERSION_PACKAGES = ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-(?:alpha|beta|rc)\.\d+)?$")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


# --------------------------------------------------------------------------- errors


class ReleaseFileError(ValueError):
    """The releases file is malformed; the message names the key, the value and the fix."""


class UnknownNameError(KeyError):
    """A release, component, tool or binary name that the releases file does not pin."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the sentence readable
        return str(self.args[0]) if self.args else ""


class BuildError(RuntimeError):
    """A go command failed, or a source that a binary needs is missing."""


# --------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class BinarySpec:
    """One binary: its name, the Go package of its ``main`` and the module providing it.

    ``package`` is a full import path, or ``./<dir>`` for a program of this project that
    is copied into the build module (``source`` is then its directory in the checkout).
    """

    name: str
    package: str
    module: str
    tags: tuple[str, ...] = ()
    source: str | None = None


def staging_version(version: str) -> str:
    """The version of the staging modules (k8s.io/api, ...) published with a Kubernetes
    release: 1.37.2 -> ``v0.37.2``, 1.38.0-rc.1 -> ``v0.38.0-rc.1``."""
    return "v0." + version.removeprefix("v").split(".", 1)[1]


@dataclass(frozen=True)
class KubernetesRelease:
    """A pinned Kubernetes release, e.g. ``version="1.37.2"``, ``etcd="3.7.3"``."""

    version: str
    etcd: str
    optional: bool = False
    note: str = ""
    commit: str | None = None
    go_toolchain: str | None = None

    @property
    def tag(self) -> str:
        """The Go module version, ``v1.37.2``."""
        return "v" + self.version

    @property
    def minor(self) -> int:
        return int(self.version.split(".")[1])

    @property
    def staging_version(self) -> str:
        return staging_version(self.version)


@dataclass(frozen=True)
class Tool:
    """A pinned tool: ``name``, plain ``version`` (``3.7.3``), its binaries and ldflags.

    ``ldflags`` maps a Go variable (``pkg/path.name``) to a value template; templates may
    use ``{tag}`` (v3.7.3), ``{version}`` (3.7.3), ``{build_date}`` (the module's release
    time from the proxy, ISO 8601 UTC) and ``{client_go_minor}`` (minor of the
    ``k8s.io/client-go`` that the tool's go.mod requires).
    """

    name: str
    version: str
    binaries: tuple[BinarySpec, ...]
    ldflags: tuple[tuple[str, str], ...] = ()

    @property
    def tag(self) -> str:
        return "v" + self.version


@dataclass(frozen=True)
class Step:
    """One step of a profile: a Kubernetes release's components, or a tool at a version."""

    group: str  # "kubernetes" or a tool name
    version: str  # plain version of the release or of the tool
    binaries: tuple[str, ...]


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Releases:
    """The parsed releases file (see ``releases.yaml`` for the meaning of each field)."""

    module: str
    default: str
    components: tuple[BinarySpec, ...]
    extras: tuple[BinarySpec, ...]
    full_set: tuple[str, ...]
    releases: tuple[KubernetesRelease, ...]
    tools: tuple[Tool, ...]
    profiles: tuple[Profile, ...]
    source: str = field(default=str(RELEASES_FILE), compare=False)

    # ---- lookups; each raises UnknownNameError naming the value and what is known

    def release(self, version: str | None = None) -> KubernetesRelease:
        """The pinned release ``version`` (``1.37.2`` or ``v1.37.2``); None: the default."""
        wanted = _plain(version) if version else self.default
        for release in self.releases:
            if release.version == wanted:
                return release
        known = ", ".join(r.version for r in self.releases)
        raise UnknownNameError(
            f"unknown Kubernetes release {version!r}: pinned releases are {known}; "
            f"pin it under kubernetes.releases in {self.source}"
        )

    def tool(self, name: str) -> Tool:
        for tool in self.tools:
            if tool.name == name:
                return tool
        known = ", ".join(t.name for t in self.tools)
        raise UnknownNameError(
            f"unknown tool {name!r}: pinned tools are {known}; add it under tools in {self.source}"
        )

    def profile(self, name: str) -> Profile:
        for profile in self.profiles:
            if profile.name == name:
                return profile
        known = ", ".join(p.name for p in self.profiles)
        raise UnknownNameError(
            f"unknown profile {name!r}: profiles are {known}; add it under profiles in "
            f"{self.source}"
        )

    def kubernetes_binary(self, name: str) -> BinarySpec:
        for spec in (*self.components, *self.extras):
            if spec.name == name:
                return spec
        known = ", ".join(s.name for s in (*self.components, *self.extras))
        raise UnknownNameError(
            f"unknown Kubernetes component {name!r}: known components are {known}"
        )

    def group_of(self, binary: str) -> str:
        """``"kubernetes"`` or the tool name that builds ``binary`` (e.g. etcdctl -> etcd)."""
        if any(s.name == binary for s in (*self.components, *self.extras)):
            return KUBERNETES
        for tool in self.tools:
            if any(b.name == binary for b in tool.binaries):
                return tool.name
        known = sorted(
            [s.name for s in (*self.components, *self.extras)]
            + [b.name for t in self.tools for b in t.binaries]
        )
        raise UnknownNameError(f"unknown binary {binary!r}: known binaries are {', '.join(known)}")

    def etcd_for(self, kubernetes: str | None = None) -> str:
        """The etcd version (plain) that a Kubernetes release is pinned to."""
        return self.release(kubernetes).etcd


@dataclass(frozen=True)
class Target:
    """One binary to build: ``group`` (kubernetes or a tool) at plain ``version``."""

    group: str
    version: str
    binary: BinarySpec

    @property
    def tag(self) -> str:
        return "v" + self.version

    @property
    def label(self) -> str:
        return f"{self.binary.name} {self.tag}"


# --------------------------------------------------------------------------- releases file


def _plain(version: str) -> str:
    return version[1:] if version.startswith("v") else version


def _require_version(value: Any, where: str, source: str) -> str:
    text = str(value) if isinstance(value, (str, int, float)) else None
    if text is None or not _VERSION_RE.match(text):
        raise ReleaseFileError(
            f"{where} = {value!r} in {source} is not a version: write MAJOR.MINOR.PATCH "
            f'(or a pre-release such as 1.38.0-rc.1) as a quoted string, e.g. "1.37.2"'
        )
    return _plain(text)


def _require_mapping(value: Any, where: str, source: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ReleaseFileError(
            f"{where} in {source} must be a mapping, got {type(value).__name__}: {value!r}"
        )
    return value


def _require_str(value: Any, where: str, source: str) -> str:
    if not isinstance(value, str) or not value:
        raise ReleaseFileError(f"{where} in {source} must be a non-empty string, got {value!r}")
    return value


def _require_list(value: Any, where: str, source: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise ReleaseFileError(f"{where} in {source} must be a non-empty list, got {value!r}")
    return value


def parse_releases(data: Any, source: str = str(RELEASES_FILE)) -> Releases:
    """Validate the parsed YAML of a releases file and return :class:`Releases`.

    Raises :class:`ReleaseFileError` naming the offending key, its value and the fix, e.g.
    a profile naming a release that is not pinned, or a default that is not a release.
    """
    root = _require_mapping(data, "the top level", source)
    for key in ("kubernetes", "tools", "profiles"):
        if key not in root:
            raise ReleaseFileError(f"{source} has no {key!r} section; add one (see releases.yaml)")
    kube = _require_mapping(root["kubernetes"], "kubernetes", source)
    module = _require_str(kube.get("module"), "kubernetes.module", source)

    components = tuple(
        BinarySpec(
            name=name,
            package=f"{module}/{_require_str(pkg, f'kubernetes.components.{name}', source)}",
            module=module,
        )
        for name, pkg in _require_mapping(
            kube.get("components"), "kubernetes.components", source
        ).items()
    )
    extras = tuple(
        BinarySpec(
            name=name,
            package="./" + Path(_require_str(src, f"kubernetes.extras.{name}", source)).name,
            module=module,
            source=src,
        )
        for name, src in _require_mapping(
            kube.get("extras") or {}, "kubernetes.extras", source
        ).items()
    )
    known_components = {s.name for s in (*components, *extras)}

    releases: list[KubernetesRelease] = []
    for i, entry in enumerate(_require_list(kube.get("releases"), "kubernetes.releases", source)):
        where = f"kubernetes.releases[{i}]"
        entry = _require_mapping(entry, where, source)
        version = _require_version(entry.get("version"), f"{where}.version", source)
        if any(r.version == version for r in releases):
            raise ReleaseFileError(
                f"{where}.version = {version!r} in {source} is pinned twice; keep one entry"
            )
        releases.append(
            KubernetesRelease(
                version=version,
                etcd=_require_version(entry.get("etcd"), f"{where}.etcd", source),
                optional=bool(entry.get("optional", False)),
                note=str(entry.get("note", "")),
                commit=entry.get("commit"),
                go_toolchain=str(entry["go_toolchain"]) if entry.get("go_toolchain") else None,
            )
        )
    pinned = {r.version for r in releases}
    pinned_list = ", ".join(r.version for r in releases)

    def known_release(value: Any, where: str) -> str:
        version = _require_version(value, where, source)
        if version not in pinned:
            raise ReleaseFileError(
                f"{where} = {value!r} in {source} is an unknown Kubernetes release: pinned "
                f"releases are {pinned_list}; pin it under kubernetes.releases or name one of them"
            )
        return version

    def known_components_list(value: Any, where: str) -> tuple[str, ...]:
        names = tuple(_require_list(value, where, source))
        for name in names:
            if name not in known_components:
                raise ReleaseFileError(
                    f"{where} names unknown component {name!r} in {source}: known components "
                    f"are {', '.join(sorted(known_components))}"
                )
        return names

    default = known_release(kube.get("default"), "kubernetes.default")
    full_set = known_components_list(kube.get("full_set"), "kubernetes.full_set")

    tools: list[Tool] = []
    for name, entry in _require_mapping(root["tools"], "tools", source).items():
        where = f"tools.{name}"
        if not _NAME_RE.match(str(name)) or name == KUBERNETES:
            raise ReleaseFileError(f"{where} in {source}: {name!r} is not a usable tool name")
        entry = _require_mapping(entry, where, source)
        tool_module = entry.get("module")
        binaries = []
        for bin_name, spec in _require_mapping(
            entry.get("binaries"), f"{where}.binaries", source
        ).items():
            bwhere = f"{where}.binaries.{bin_name}"
            spec = _require_mapping(spec, bwhere, source)
            package = _require_str(spec.get("package"), f"{bwhere}.package", source)
            bin_module = _require_str(spec.get("module", tool_module), f"{bwhere}.module", source)
            if package != bin_module and not package.startswith(bin_module + "/"):
                raise ReleaseFileError(
                    f"{bwhere}.package = {package!r} in {source} is not inside module "
                    f"{bin_module!r}; set {bwhere}.module to the module that provides it"
                )
            tags = spec.get("tags") or []
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                raise ReleaseFileError(f"{bwhere}.tags in {source} must be a list of build tags")
            binaries.append(BinarySpec(bin_name, package, bin_module, tuple(tags)))
        ldflags = _require_mapping(entry.get("ldflags") or {}, f"{where}.ldflags", source)
        tools.append(
            Tool(
                name=name,
                version=_require_version(entry.get("version"), f"{where}.version", source),
                binaries=tuple(binaries),
                ldflags=tuple((str(k), str(v)) for k, v in ldflags.items()),
            )
        )
    tool_names = {t.name for t in tools}
    all_binaries = [s.name for s in (*components, *extras)] + [
        b.name for t in tools for b in t.binaries
    ]
    duplicates = sorted({b for b in all_binaries if all_binaries.count(b) > 1})
    if duplicates:
        raise ReleaseFileError(
            f"binary names {duplicates} in {source} are built by more than one group; "
            f"binary names must be unique"
        )
    etcd = next((t for t in tools if t.name == "etcd"), None)
    default_release = next(r for r in releases if r.version == default)
    if etcd is not None and etcd.version != default_release.etcd:
        raise ReleaseFileError(
            f"tools.etcd.version = {etcd.version!r} in {source} differs from the etcd of the "
            f"default release {default} ({default_release.etcd!r}); make them equal"
        )

    profiles: list[Profile] = []
    for name, entry in _require_mapping(root["profiles"], "profiles", source).items():
        where = f"profiles.{name}"
        entry = _require_mapping(entry, where, source)
        steps: list[Step] = []
        for i, raw in enumerate(_require_list(entry.get("steps"), f"{where}.steps", source)):
            swhere = f"{where}.steps[{i}]"
            raw = _require_mapping(raw, swhere, source)
            if "kubernetes" in raw:
                version = known_release(raw["kubernetes"], f"{swhere}.kubernetes")
                comps = known_components_list(
                    raw.get("components", list(full_set)), f"{swhere}.components"
                )
                steps.append(Step(KUBERNETES, version, comps))
            elif "tool" in raw:
                tool_name = raw["tool"]
                if tool_name not in tool_names:
                    raise ReleaseFileError(
                        f"{swhere}.tool = {tool_name!r} in {source} is an unknown tool: pinned "
                        f"tools are {', '.join(sorted(tool_names))}"
                    )
                tool = next(t for t in tools if t.name == tool_name)
                version = tool.version
                if "for_kubernetes" in raw:
                    if tool_name != "etcd":
                        raise ReleaseFileError(
                            f"{swhere}.for_kubernetes in {source} applies to etcd only, "
                            f"not {tool_name!r}"
                        )
                    release_version = known_release(
                        raw["for_kubernetes"], f"{swhere}.for_kubernetes"
                    )
                    version = next(r.etcd for r in releases if r.version == release_version)
                steps.append(Step(tool_name, version, tuple(b.name for b in tool.binaries)))
            else:
                raise ReleaseFileError(
                    f"{swhere} in {source} names neither 'kubernetes' nor 'tool': {dict(raw)!r}"
                )
        profiles.append(Profile(name, str(entry.get("description", "")).strip(), tuple(steps)))

    return Releases(
        module=module,
        default=default,
        components=components,
        extras=extras,
        full_set=full_set,
        releases=tuple(releases),
        tools=tuple(tools),
        profiles=tuple(profiles),
        source=source,
    )


@functools.cache
def _load_cached(path: str, mtime_ns: int) -> Releases:
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return parse_releases(data, path)


def load_releases(path: str | os.PathLike[str] | None = None) -> Releases:
    """Read and validate the releases file (default: ``gpufleet/lab/releases.yaml``).

    Raises :class:`ReleaseFileError` (see :func:`parse_releases`) or ``OSError``.
    """
    file = Path(path) if path is not None else RELEASES_FILE
    return _load_cached(str(file), file.stat().st_mtime_ns)


# --------------------------------------------------------------------------- cache layout


def cache_root() -> Path:
    """``$GPUFLEET_CACHE`` or ``~/.cache/gpufleet`` (not created here)."""
    env = os.environ.get("GPUFLEET_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "gpufleet"


def _bin_dir(group: str, version: str) -> Path:
    return cache_root() / "bin" / group / ("v" + _plain(version))


def _build_dir(group: str, version: str) -> Path:
    return cache_root() / "build" / group / ("v" + _plain(version))


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
    if version is not None and not _VERSION_RE.match(version):
        raise UnknownNameError(f"{name}: version {version!r} is not MAJOR.MINOR.PATCH")
    spec = next(b for b in tool.binaries if b.name == name)
    return Target(group, _plain(version) if version else tool.version, spec)


def binary_path(name: str, version: str | None = None) -> Path:
    """Where binary ``name`` (``kube-apiserver``, ``etcd``, ``kwok``...) lives in the cache.

    ``version``: the Kubernetes release for Kubernetes binaries (default: the default
    release), the tool's version otherwise (default: the pinned one). The file may not
    exist yet; see :func:`is_cached` and :func:`ensure`.
    Raises :class:`UnknownNameError` for a name or release that is not pinned.
    """
    target = resolve_target(name, version)
    return _bin_dir(target.group, target.version) / target.binary.name


# --------------------------------------------------------------------------- go.mod handling


@dataclass(frozen=True)
class Replace:
    """A ``replace old [old_version] => new [new_version]`` directive."""

    old: str
    new: str
    old_version: str | None = None
    new_version: str | None = None

    @property
    def is_local(self) -> bool:
        """True when the target is a directory (``./staging/...``, ``../api``)."""
        return self.new.startswith(("./", "../", "/")) or self.new in (".", "..")

    def render(self) -> str:
        left = f"{self.old} {self.old_version}" if self.old_version else self.old
        right = f"{self.new} {self.new_version}" if self.new_version else self.new
        return f"{left} => {right}"


@dataclass(frozen=True)
class GoMod:
    """The directives of a go.mod file that matter for building from it."""

    module: str
    go: str | None = None
    godebug: tuple[str, ...] = ()
    require: tuple[tuple[str, str], ...] = ()
    replace: tuple[Replace, ...] = ()
    exclude: tuple[tuple[str, str], ...] = ()

    def required(self, module: str) -> str | None:
        return next((v for m, v in self.require if m == module), None)


def _strip_comment(line: str) -> str:
    out, quoted = [], False
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == '"':
            quoted = not quoted
        elif not quoted and line.startswith("//", i):
            break
        out.append(ch)
        i += 1
    return "".join(out).strip()


def _unquote(token: str) -> str:
    return token[1:-1] if len(token) >= 2 and token[0] == token[-1] == '"' else token


def parse_gomod(text: str) -> GoMod:
    """Parse go.mod ``text`` (the grammar of https://go.dev/ref/mod#go-mod-file).

    Returns :class:`GoMod`; raises ``ValueError`` when there is no ``module`` line.
    """
    module: str | None = None
    go: str | None = None
    godebug: list[str] = []
    require: list[tuple[str, str]] = []
    replace: list[Replace] = []
    exclude: list[tuple[str, str]] = []
    block: str | None = None

    def handle(verb: str, args: list[str]) -> None:
        nonlocal module, go
        args = [_unquote(a) for a in args]
        if verb == "module" and args:
            module = args[0]
        elif verb == "go" and args:
            go = args[0]
        elif verb == "godebug":
            godebug.append(" ".join(args))
        elif verb == "require" and len(args) >= 2:
            require.append((args[0], args[1]))
        elif verb == "exclude" and len(args) >= 2:
            exclude.append((args[0], args[1]))
        elif verb == "replace" and "=>" in args:
            arrow = args.index("=>")
            left, right = args[:arrow], args[arrow + 1 :]
            replace.append(
                Replace(
                    old=left[0],
                    old_version=left[1] if len(left) > 1 else None,
                    new=right[0],
                    new_version=right[1] if len(right) > 1 else None,
                )
            )

    for raw in text.splitlines():
        line = _strip_comment(raw)
        if not line:
            continue
        if block is not None:
            if line == ")":
                block = None
            else:
                handle(block, line.split())
            continue
        fields = line.split()
        if len(fields) == 2 and fields[1] == "(":
            block = fields[0]
            continue
        handle(fields[0], fields[1:])
    if module is None:
        raise ValueError("go.mod text has no module directive")
    return GoMod(
        module=module,
        go=go,
        godebug=tuple(godebug),
        require=tuple(require),
        replace=tuple(replace),
        exclude=tuple(exclude),
    )


def pinned_replaces(
    upstream: GoMod, *, main_version: str, staging_version: str | None = None
) -> tuple[Replace, ...]:
    """The replace directives a build module needs to build ``upstream`` as a dependency.

    Replace directives of a dependency are ignored by Go, so each must be restated in our
    main module. A local one (``k8s.io/api => ./staging/src/k8s.io/api``) points into the
    upstream source tree; it becomes the published module at a version:

    - ``./staging/...`` targets get ``staging_version`` (``v0.37.2`` for kubernetes 1.37.2),
    - otherwise the version upstream requires, or ``main_version`` where it requires the
      placeholder ``v0.0.0`` (etcd's ``go.etcd.io/etcd/api/v3 => ../api``),
    - local replaces of modules upstream does not require (etcd's ``=>
      ./FORBIDDEN_DEPENDENCY`` guards) are dropped.

    Non-local replaces are kept as they are. Order follows ``upstream``.
    """
    out: list[Replace] = []
    for rep in upstream.replace:
        if not rep.is_local:
            out.append(rep)
            continue
        if staging_version and rep.new.startswith("./staging/"):
            out.append(Replace(rep.old, rep.old, new_version=staging_version))
            continue
        required = upstream.required(rep.old)
        if required is None:
            continue
        version = main_version if required.startswith("v0.0.0") else required
        out.append(Replace(rep.old, rep.old, new_version=version))
    return tuple(out)


def _go_version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def render_build_gomod(
    module: str,
    requires: Sequence[tuple[str, str]],
    upstreams: Sequence[GoMod],
    replaces: Sequence[Replace],
) -> str:
    """The go.mod text of a build module (before ``go mod tidy``).

    ``go`` is the highest ``go`` line of the upstream modules; their ``godebug`` and
    ``exclude`` directives are restated, as Go applies them only from the main module.
    """
    go_lines = [u.go for u in upstreams if u.go]
    go = max(go_lines, key=_go_version_key) if go_lines else "1.22"
    lines = [f"module {module}", "", f"go {go}", ""]
    godebug = list(dict.fromkeys(d for u in upstreams for d in u.godebug))
    for directive in godebug:
        lines.append(f"godebug {directive}")
    if godebug:
        lines.append("")
    lines.append("require (")
    lines.extend(f"\t{m} {v}" for m, v in requires)
    lines.append(")")
    excludes = list(dict.fromkeys(e for u in upstreams for e in u.exclude))
    if excludes:
        lines += ["", "exclude ("]
        lines.extend(f"\t{m} {v}" for m, v in excludes)
        lines.append(")")
    seen: set[str] = set()
    unique = [r for r in replaces if not (r.old in seen or seen.add(r.old))]
    if unique:
        lines += ["", "replace ("]
        lines.extend(f"\t{r.render()}" for r in unique)
        lines.append(")")
    return "\n".join(lines) + "\n"


def render_tools_go(packages: Iterable[str]) -> str:
    """A ``tools`` file importing the main packages, so ``go mod tidy`` records their deps."""
    imports = "\n".join(f'\t_ "{p}"' for p in sorted(set(packages)))
    return f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"


# --------------------------------------------------------------------------- ldflags


def kubernetes_version_variables(
    version: str, build_date: str, commit: str | None = None
) -> dict[str, str]:
    """The ``-X`` variables that make a Kubernetes binary report ``version``.

    Mirrors ``kube::version::ldflags`` (hack/lib/version.sh): gitVersion ``v1.37.2``,
    gitMajor ``1``, gitMinor ``37``, gitTreeState ``clean``, buildDate, and gitCommit when
    known, each for k8s.io/component-base/version and k8s.io/client-go/pkg/version.
    Raises ``ValueError`` for a version that is not MAJOR.MINOR.PATCH.
    """
    match = _VERSION_RE.match(version)
    if not match:
        raise ValueError(f"Kubernetes version {version!r} is not MAJOR.MINOR.PATCH")
    values = {
        "gitVersion": "v" + _plain(version),
        "gitMajor": match.group(1),
        "gitMinor": match.group(2),
        "gitTreeState": "clean",
        "buildDate": build_date,
    }
    if commit:
        values["gitCommit"] = commit
    return {
        f"{package}.{key}": value
        for package in KUBERNETES_VERSION_PACKAGES
        for key, value in values.items()
    }


def _ldflag_quote(value: str) -> str:
    if value and not re.search(r"[\s'\"]", value):
        return value
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise ValueError(f"ldflags value {value!r} holds both quote characters; Go cannot take it")


def compose_ldflags(variables: Mapping[str, str], *, strip: bool = True) -> str:
    """The ``-ldflags`` argument: ``-s -w`` (when ``strip``) then ``-X name=value`` each.

    Variables are sorted by name so the same inputs give the same string. Values are
    quoted the way ``go build`` splits its flags (cmd/internal/quoted). Raises
    ``ValueError`` for a value that cannot be quoted.
    """
    parts = ["-s", "-w"] if strip else []
    for name in sorted(variables):
        parts.append("-X")
        parts.append(_ldflag_quote(f"{name}={variables[name]}"))
    return " ".join(parts)


def render_tool_ldflags(tool: Tool, version: str, facts: Mapping[str, str]) -> dict[str, str]:
    """Fill a tool's ldflags templates; ``facts`` holds ``build_date``, ``client_go_minor``.

    Raises :class:`ReleaseFileError` for a placeholder that no fact fills.
    """
    values = {"tag": "v" + _plain(version), "version": _plain(version), **facts}
    out = {}
    for name, template in tool.ldflags:
        try:
            out[name] = template.format(**values)
        except KeyError as exc:
            raise ReleaseFileError(
                f"tools.{tool.name}.ldflags.{name} = {template!r} uses unknown placeholder "
                f"{exc}; known: {', '.join(sorted(values))}"
            ) from None
    return out


# --------------------------------------------------------------------------- stamps


def stamp_inputs(
    target: Target,
    *,
    go_version: str | None,
    platform: str,
    ldflags_templates: Sequence[tuple[str, str]] = (),
    source_digest: str | None = None,
    commit: str | None = None,
) -> dict[str, Any]:
    """Everything a binary's content depends on, as a JSON-able dict.

    The resolved ldflags follow from these (build date and dependency versions are fixed
    by the module version), so the templates are recorded rather than their values.
    """
    return {
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
        "cgo": False,
        "flags": ["-trimpath", "-ldflags=-s -w"],
    }


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
        env=_go_process_env(),
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


def _go_process_env(toolchain: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "GOWORK": "off",  # the k8s.io/kubernetes module ships a go.work of its own
            # the local Go, unless a release names the toolchain its go.mod needs
            # (go_toolchain: go1.27.3 for 1.38), which Go fetches from the module proxy
            "GOTOOLCHAIN": toolchain or "local",
            "GOFLAGS": "-buildvcs=false",
            "CGO_ENABLED": "0",
        }
    )
    return env


def _run_go(
    args: Sequence[str],
    cwd: Path | None = None,
    *,
    nice: bool = False,
    toolchain: str | None = None,
) -> str:
    go = _require_go().go
    cmd = [go, *args]
    if nice and shutil.which("nice"):
        cmd = ["nice", "-n", "10", *cmd]
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env=_go_process_env(toolchain)
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


# --------------------------------------------------------------------------- planning


def _target_inputs(target: Target, releases: Releases) -> dict[str, Any]:
    goenv = _go_env()
    templates: Sequence[tuple[str, str]] = ()
    commit = None
    digest = None
    if target.group == KUBERNETES:
        commit = releases.release(target.version).commit
        if target.binary.source:
            digest = source_digest(REPO_ROOT / target.binary.source)
    else:
        templates = releases.tool(target.group).ldflags
    return stamp_inputs(
        target,
        go_version=goenv.version if goenv else None,
        platform=goenv.platform if goenv else f"{sys.platform}",
        ldflags_templates=templates,
        source_digest=digest,
        commit=commit,
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
                spec = next(b for b in releases.tool(step.group).binaries if b.name == name)
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
    if group == KUBERNETES:
        release = releases.release(version)
        toolchain = release.go_toolchain
        info = _download(releases.module, tag, toolchain)
        replaces = pinned_replaces(
            info.gomod, main_version=tag, staging_version=release.staging_version
        )
        upstreams = [info.gomod]
        requires = [(releases.module, tag)]
        packages = [s.package for s in releases.components]
        facts = {"build_date": info.time}
    else:
        tool = releases.tool(group)
        modules = list(dict.fromkeys(b.module for b in tool.binaries))
        infos = [_download(m, tag) for m in modules]
        upstreams = [i.gomod for i in infos]
        replaces = tuple(r for i in infos for r in pinned_replaces(i.gomod, main_version=tag))
        requires = [(m, tag) for m in modules]
        packages = [b.package for b in tool.binaries]
        facts = {"build_date": infos[0].time}
        client_go = next((i.gomod.required("k8s.io/client-go") for i in infos), None)
        if client_go and _VERSION_RE.match(client_go):
            facts["client_go_minor"] = str(int(client_go.lstrip("v").split(".")[1]))
    gomod_in = render_build_gomod(f"{BUILD_MODULE_PREFIX}/{group}", requires, upstreams, replaces)
    tools_go = render_tools_go(packages)
    record = directory / "go.mod.in"
    if _read(record) == gomod_in and (directory / "go.sum").is_file():
        return _BuildModule(directory, facts)
    log(f"{group} {tag}: generating build module {directory}")
    (directory / "go.mod").write_text(gomod_in, encoding="utf-8")
    (directory / "tools.go").write_text(tools_go, encoding="utf-8")
    started = time.monotonic()
    _run_go(["mod", "tidy"], cwd=directory, toolchain=toolchain)
    _write_atomic(record, gomod_in)
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


def _go_build(target: Target, module: _BuildModule, releases: Releases) -> tuple[Path, float]:
    """Build one target into the cache atomically; returns (path, seconds)."""
    if target.group == KUBERNETES:
        release = releases.release(target.version)
        variables = kubernetes_version_variables(
            release.version, module.facts["build_date"], release.commit
        )
    else:
        variables = render_tool_ldflags(releases.tool(target.group), target.version, module.facts)
    out_dir = _bin_dir(target.group, target.version)
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / target.binary.name
    tmp = out_dir / f".{target.binary.name}.tmp-{os.getpid()}"
    args = ["build", f"-p={min(2, os.cpu_count() or 1)}", "-trimpath", "-mod=mod"]
    if target.binary.tags:
        args.append("-tags=" + ",".join(target.binary.tags))
    args += ["-ldflags=" + compose_ldflags(variables), "-o", str(tmp), target.binary.package]
    started = time.monotonic()
    try:
        toolchain = (
            releases.release(target.version).go_toolchain if target.group == KUBERNETES else None
        )
        _run_go(args, cwd=module.directory, nice=True, toolchain=toolchain)
        seconds = time.monotonic() - started
        tmp.chmod(0o755)
        check_reported_version(tmp, target)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final, seconds


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


def build(
    targets: Sequence[Target],
    releases: Releases | None = None,
    log: Callable[[str], None] = print,
) -> list[BuildResult]:
    """Build every target that is missing or stale, one ``go build`` at a time.

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
        elif target_is_cached(target, rel):
            size = path.stat().st_size
            log(f"{target.label}: up to date, {_mib(size)} (stamp matches, not rebuilt)")
            results.append(BuildResult(target, path, "cached", size=size))
        else:
            todo.append(target)
    if not todo:
        return results
    _require_go()
    with build_lock(log):
        modules: dict[tuple[str, str], _BuildModule | BuildError] = {}
        for target in todo:
            path = _bin_dir(target.group, target.version) / target.binary.name
            if target_is_cached(target, rel):  # built by another process while we waited
                size = path.stat().st_size
                log(f"{target.label}: up to date, {_mib(size)} (built meanwhile)")
                results.append(BuildResult(target, path, "cached", size=size))
                continue
            key = (target.group, target.version)
            if key not in modules:
                try:
                    modules[key] = _prepare_module(target.group, target.version, rel, log)
                except BuildError as exc:
                    modules[key] = exc
            module = modules[key]
            if isinstance(module, BuildError):
                log(f"{target.label}: FAILED, build module not ready: {module}")
                results.append(BuildResult(target, path, "failed", message=str(module)))
                continue
            inputs = _target_inputs(target, rel)
            log(f"{target.label}: building ...")
            try:
                if target.binary.source:
                    _copy_extra_source(target, module)
                final, seconds = _go_build(target, module, rel)
            except (BuildError, ReleaseFileError) as exc:
                log(f"{target.label}: FAILED\n{exc}")
                results.append(BuildResult(target, path, "failed", message=str(exc)))
                continue
            size = final.stat().st_size
            _write_atomic(_stamp_path(final), render_stamp(inputs, seconds=seconds, size=size))
            log(f"{target.label}: built in {seconds:.1f} s, {_mib(size)}")
            results.append(BuildResult(target, final, "built", seconds, size))
    return results


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
    """Build and find the pinned Kubernetes and tool binaries (gpufleet/lab/releases.yaml)."""


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
        sys.exit(2)
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
        sys.exit(1)


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
        sys.exit(1)


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
