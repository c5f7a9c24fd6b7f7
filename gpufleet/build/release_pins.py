"""The pinned releases of the lab and the test suite: ``gpufleet/build/releases.yaml`` as
data (Kubernetes releases with their etcd, the components and extras built from each, the
tools at their versions, the build profiles), validated with errors that name the key, the
value and the fix. ``gpufleet.build.binaries`` builds what this file pins.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

RELEASES_FILE = Path(__file__).with_name("releases.yaml")
KUBERNETES = "kubernetes"

VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-(?:alpha|beta|rc)\.\d+)?$")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


# --------------------------------------------------------------------------- errors


class ReleaseFileError(ValueError):
    """The releases file is malformed; the message names the key, the value and the fix."""


class UnknownNameError(KeyError):
    """A release, component, tool or binary name that the releases file does not pin."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the sentence readable
        return str(self.args[0]) if self.args else ""


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


class ReleaseVersion:
    """What a Kubernetes release's plain ``version`` (``1.37.2``) gives: its Go module tag,
    its minor and the version of its staging modules."""

    version: str

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
class GoBuild:
    """How Go code is built against one Kubernetes release (``go_builds`` in the releases
    file): the Go toolchain its modules need (``go1.27.3``, fetched by Go from the module
    proxy; None: the local Go) and the module versions the proxy does not serve, each with
    what stands in for it, restated as ``replace`` directives in every build module: a
    served version (``("example.com/m v1.0.1", "v1.0.0")``) or a module of this repository,
    named by its directory (``("sigs.k8s.io/iptables-wrappers v1.0.0",
    "lab/go/substitute/iptables-wrappers")``), which the builders copy into the build
    module."""

    toolchain: str | None = None
    substitute: tuple[tuple[str, str], ...] = ()

    @property
    def local_substitutes(self) -> tuple[tuple[str, str], ...]:
        """The substitutions by a module of this repository: (``"module version"``,
        directory relative to the repository root)."""
        return tuple((old, new) for old, new in self.substitute if not is_module_version(new))


def is_module_version(value: str) -> bool:
    """True for a Go module version (``v7.0.0``), False for a directory of this repository
    (``lab/go/substitute/iptables-wrappers``)."""
    return bool(re.match(r"^v\d", value))


def _is_repository_dir(value: str) -> bool:
    """A relative path inside the repository that starts with a name (``lab/...``; no
    ``..``, no empty or ``.`` part)."""
    parts = value.split("/")
    return (
        bool(re.match(r"^[A-Za-z_]", value))
        and "\\" not in value
        and all(p not in ("", ".", "..") for p in parts)
    )


LOCAL_GO_BUILD = GoBuild()


class BuiltAgainst(ReleaseVersion):
    """A release that Go code is built against; ``go_build`` comes from ``go_builds``."""

    go_build: GoBuild

    @property
    def go_toolchain(self) -> str | None:
        return self.go_build.toolchain

    @property
    def substitute(self) -> tuple[tuple[str, str], ...]:
        return self.go_build.substitute

    @property
    def local_substitutes(self) -> tuple[tuple[str, str], ...]:
        return self.go_build.local_substitutes


@dataclass(frozen=True)
class KubernetesRelease(BuiltAgainst):
    """A pinned Kubernetes release, e.g. ``version="1.37.2"``, ``etcd="3.7.3"``."""

    version: str
    etcd: str
    optional: bool = False
    note: str = ""
    commit: str | None = None
    go_build: GoBuild = LOCAL_GO_BUILD


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
    #: Built with cgo (``CGO_ENABLED=1``, the host's C compiler, linked to its libc).
    cgo: bool = False
    #: Other releases of the tool that are built too (plain version -> its Go module):
    #: ``containerd`` 1.7.35 lives in ``github.com/containerd/containerd``, not ``.../v2``.
    matrix: tuple[tuple[str, str], ...] = ()

    @property
    def tag(self) -> str:
        return "v" + self.version

    @property
    def versions(self) -> tuple[str, ...]:
        """The pinned version first, then the matrix versions."""
        return (self.version, *(v for v, _ in self.matrix))

    def at(self, version: str) -> Tool:
        """The tool at ``version``. A matrix version whose module is another path (its
        major version moved) has that path in place of the pinned module's in every
        package path and ldflags variable and value; any other version is built from the same
        module as the pinned one (etcd at the version a Kubernetes release names).
        """
        wanted = plain_version(version)
        old = self.binaries[0].module
        module = dict(self.matrix).get(wanted, old)
        if wanted == self.version:
            return self

        def moved(path: str) -> str:
            return module + path[len(old) :] if path == old or path.startswith(old + "/") else path

        binaries = tuple(
            BinarySpec(b.name, moved(b.package), moved(b.module), b.tags, b.source)
            for b in self.binaries
        )
        ldflags = tuple((moved(k), moved(v)) for k, v in self.ldflags)
        return Tool(self.name, wanted, binaries, ldflags, self.cgo)


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
        wanted = plain_version(version) if version else self.default
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


def plain_version(version: str) -> str:
    return version[1:] if version.startswith("v") else version


def _require_version(value: Any, where: str, source: str) -> str:
    text = str(value) if isinstance(value, (str, int, float)) else None
    if text is None or not VERSION_RE.match(text):
        raise ReleaseFileError(
            f"{where} = {value!r} in {source} is not a version: write MAJOR.MINOR.PATCH "
            f'(or a pre-release such as 1.38.0-rc.1) as a quoted string, e.g. "1.37.2"'
        )
    return plain_version(text)


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
    components, extras = _kubernetes_binaries(kube, module, source)
    releases = _kubernetes_releases(kube, parse_go_builds(root, source), source)
    known = _Known(source, releases, {s.name for s in (*components, *extras)})
    default = known.release(kube.get("default"), "kubernetes.default")
    full_set = known.components(kube.get("full_set"), "kubernetes.full_set")
    tools = _tools(root["tools"], source)
    _check_unique_binaries((*components, *extras), tools, source)
    _check_default_etcd(tools, releases, default, source)
    profiles = _profiles(root["profiles"], known, tools, full_set)
    return Releases(
        module=module,
        default=default,
        components=components,
        extras=extras,
        full_set=full_set,
        releases=releases,
        tools=tools,
        profiles=profiles,
        source=source,
    )


def _kubernetes_binaries(
    kube: Mapping[str, Any], module: str, source: str
) -> tuple[tuple[BinarySpec, ...], tuple[BinarySpec, ...]]:
    """``kubernetes.components`` (packages of the module) and ``kubernetes.extras``
    (programs of this project built inside the release's module)."""
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
    return components, extras


_TOOLCHAIN_RE = re.compile(r"^go\d+\.\d+(\.\d+)?$")


def parse_go_builds(data: Any, source: str = str(RELEASES_FILE)) -> dict[str, GoBuild]:
    """The ``go_builds`` section of a parsed releases file: plain release version ->
    :class:`GoBuild`; a release not listed builds with the local Go, nothing substituted.
    Raises :class:`ReleaseFileError` naming the entry, the value and the fix."""
    root = data if isinstance(data, Mapping) else {}
    entries = root.get("go_builds") or []
    if not isinstance(entries, list):
        raise ReleaseFileError(
            f"go_builds in {source} must be a list of {{version, go_toolchain, substitute}} "
            f"entries, got {entries!r}"
        )
    out: dict[str, GoBuild] = {}
    for i, entry in enumerate(entries):
        where = f"go_builds[{i}]"
        entry = _require_mapping(entry, where, source)
        version = _require_version(entry.get("version"), f"{where}.version", source)
        if version in out:
            raise ReleaseFileError(
                f"{where}.version = {version!r} in {source} is listed twice; keep one entry"
            )
        toolchain = entry.get("go_toolchain")
        if toolchain is not None and not _TOOLCHAIN_RE.match(str(toolchain)):
            raise ReleaseFileError(
                f"{where}.go_toolchain = {toolchain!r} in {source} is not a Go toolchain "
                "name; write one such as go1.27.3"
            )
        subs = _require_mapping(entry.get("substitute") or {}, f"{where}.substitute", source)
        pairs = []
        for old, new in subs.items():
            module, _, old_version = str(old).partition(" ")
            stand_in = str(new)
            if (
                not module
                or not old_version.startswith("v")
                or not (is_module_version(stand_in) or _is_repository_dir(stand_in))
            ):
                raise ReleaseFileError(
                    f"{where}.substitute: {old!r}: {new!r} in {source} is not "
                    "'module vX.Y.Z': vX.Y.W nor 'module vX.Y.Z': a directory of the "
                    "repository; write e.g. "
                    "'sigs.k8s.io/structured-merge-diff/v7 v7.0.1': v7.0.0 or "
                    "'sigs.k8s.io/iptables-wrappers v1.0.0': lab/go/substitute/iptables-wrappers"
                )
            pairs.append((str(old), str(new)))
        out[version] = GoBuild(str(toolchain) if toolchain else None, tuple(pairs))
    return out


def _kubernetes_releases(
    kube: Mapping[str, Any], go_builds: Mapping[str, GoBuild], source: str
) -> tuple[KubernetesRelease, ...]:
    """``kubernetes.releases``, each pinned once, each with its ``go_builds`` entry."""
    releases: list[KubernetesRelease] = []
    for i, entry in enumerate(_require_list(kube.get("releases"), "kubernetes.releases", source)):
        where = f"kubernetes.releases[{i}]"
        entry = _require_mapping(entry, where, source)
        version = _require_version(entry.get("version"), f"{where}.version", source)
        if "go_toolchain" in entry:
            raise ReleaseFileError(
                f"{where}.go_toolchain in {source}: how Go code is built against a release "
                f"is written under go_builds; move it to a go_builds entry for {version!r}"
            )
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
                go_build=go_builds.get(version, LOCAL_GO_BUILD),
            )
        )
    return tuple(releases)


@dataclass(frozen=True)
class _Known:
    """What the file pins, to judge the names other sections use."""

    source: str
    releases: tuple[KubernetesRelease, ...]
    component_names: set[str]

    def release(self, value: Any, where: str) -> str:
        version = _require_version(value, where, self.source)
        if all(r.version != version for r in self.releases):
            pinned = ", ".join(r.version for r in self.releases)
            raise ReleaseFileError(
                f"{where} = {value!r} in {self.source} is an unknown Kubernetes release: pinned "
                f"releases are {pinned}; pin it under kubernetes.releases or name one of them"
            )
        return version

    def components(self, value: Any, where: str) -> tuple[str, ...]:
        names = tuple(_require_list(value, where, self.source))
        for name in names:
            if name not in self.component_names:
                raise ReleaseFileError(
                    f"{where} names unknown component {name!r} in {self.source}: known "
                    f"components are {', '.join(sorted(self.component_names))}"
                )
        return names


def _tools(section: Any, source: str) -> tuple[Tool, ...]:
    """``tools``: each tool's version, binaries (package inside its module, build tags)
    and ldflags."""
    tools: list[Tool] = []
    for name, entry in _require_mapping(section, "tools", source).items():
        where = f"tools.{name}"
        if not _NAME_RE.match(str(name)) or name == KUBERNETES:
            raise ReleaseFileError(f"{where} in {source}: {name!r} is not a usable tool name")
        entry = _require_mapping(entry, where, source)
        ldflags = _require_mapping(entry.get("ldflags") or {}, f"{where}.ldflags", source)
        binaries = _tool_binaries(entry, where, source)
        tools.append(
            Tool(
                name=name,
                version=_require_version(entry.get("version"), f"{where}.version", source),
                binaries=binaries,
                ldflags=tuple((str(k), str(v)) for k, v in ldflags.items()),
                cgo=_require_bool(entry.get("cgo", False), f"{where}.cgo", source),
                matrix=_tool_matrix(entry, where, binaries[0].module, source),
            )
        )
    return tuple(tools)


def _require_bool(value: Any, where: str, source: str) -> bool:
    if not isinstance(value, bool):
        raise ReleaseFileError(f"{where} = {value!r} in {source} must be true or false")
    return value


def _tool_matrix(
    entry: Mapping[str, Any], where: str, module: str, source: str
) -> tuple[tuple[str, str], ...]:
    """``tools.<name>.matrix``: ``[{version: "1.7.35", module: ...}, ...]``; module
    defaults to the tool's."""
    out: list[tuple[str, str]] = []
    for i, raw in enumerate(entry.get("matrix") or []):
        mwhere = f"{where}.matrix[{i}]"
        raw = _require_mapping(raw, mwhere, source)
        version = _require_version(raw.get("version"), f"{mwhere}.version", source)
        if version == entry.get("version") or any(v == version for v, _ in out):
            raise ReleaseFileError(
                f"{mwhere}.version = {version!r} in {source} is pinned twice; keep one entry"
            )
        out.append((version, _require_str(raw.get("module", module), f"{mwhere}.module", source)))
    return tuple(out)


def _tool_binaries(entry: Mapping[str, Any], where: str, source: str) -> tuple[BinarySpec, ...]:
    out = []
    for bin_name, spec in _require_mapping(
        entry.get("binaries"), f"{where}.binaries", source
    ).items():
        bwhere = f"{where}.binaries.{bin_name}"
        spec = _require_mapping(spec, bwhere, source)
        package = _require_str(spec.get("package"), f"{bwhere}.package", source)
        bin_module = _require_str(
            spec.get("module", entry.get("module")), f"{bwhere}.module", source
        )
        if package != bin_module and not package.startswith(bin_module + "/"):
            raise ReleaseFileError(
                f"{bwhere}.package = {package!r} in {source} is not inside module "
                f"{bin_module!r}; set {bwhere}.module to the module that provides it"
            )
        tags = spec.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise ReleaseFileError(f"{bwhere}.tags in {source} must be a list of build tags")
        out.append(BinarySpec(bin_name, package, bin_module, tuple(tags)))
    return tuple(out)


def _check_unique_binaries(
    kubernetes: Sequence[BinarySpec], tools: Sequence[Tool], source: str
) -> None:
    names = [s.name for s in kubernetes] + [b.name for t in tools for b in t.binaries]
    duplicates = sorted({b for b in names if names.count(b) > 1})
    if duplicates:
        raise ReleaseFileError(
            f"binary names {duplicates} in {source} are built by more than one group; "
            f"binary names must be unique"
        )


def _check_default_etcd(
    tools: Sequence[Tool], releases: Sequence[KubernetesRelease], default: str, source: str
) -> None:
    etcd = next((t for t in tools if t.name == "etcd"), None)
    default_release = next(r for r in releases if r.version == default)
    if etcd is not None and etcd.version != default_release.etcd:
        raise ReleaseFileError(
            f"tools.etcd.version = {etcd.version!r} in {source} differs from the etcd of the "
            f"default release {default} ({default_release.etcd!r}); make them equal"
        )


def _profiles(
    section: Any, known: _Known, tools: Sequence[Tool], full_set: tuple[str, ...]
) -> tuple[Profile, ...]:
    """``profiles``: named lists of steps, each a pinned release's components or a tool."""
    source = known.source
    profiles: list[Profile] = []
    for name, entry in _require_mapping(section, "profiles", source).items():
        where = f"profiles.{name}"
        entry = _require_mapping(entry, where, source)
        steps = tuple(
            step
            for i, raw in enumerate(_require_list(entry.get("steps"), f"{where}.steps", source))
            for step in _step(
                _require_mapping(raw, f"{where}.steps[{i}]", source),
                f"{where}.steps[{i}]",
                known,
                tools,
                full_set,
            )
        )
        profiles.append(Profile(name, str(entry.get("description", "")).strip(), steps))
    return tuple(profiles)


def _step(
    raw: Mapping[str, Any],
    swhere: str,
    known: _Known,
    tools: Sequence[Tool],
    full_set: tuple[str, ...],
) -> tuple[Step, ...]:
    """One step, or with ``matrix: true`` one per matrix version of the tool (its
    ``binaries``, default all)."""
    source = known.source
    if "kubernetes" in raw:
        version = known.release(raw["kubernetes"], f"{swhere}.kubernetes")
        comps = known.components(raw.get("components", list(full_set)), f"{swhere}.components")
        return (Step(KUBERNETES, version, comps),)
    if "tool" not in raw:
        raise ReleaseFileError(
            f"{swhere} in {source} names neither 'kubernetes' nor 'tool': {dict(raw)!r}"
        )
    tool_name = raw["tool"]
    tool = next((t for t in tools if t.name == tool_name), None)
    if tool is None:
        raise ReleaseFileError(
            f"{swhere}.tool = {tool_name!r} in {source} is an unknown tool: pinned "
            f"tools are {', '.join(sorted(t.name for t in tools))}"
        )
    if raw.get("matrix"):
        names = tuple(raw.get("binaries") or (b.name for b in tool.binaries))
        unknown = sorted(set(names) - {b.name for b in tool.binaries})
        if unknown or not tool.matrix:
            raise ReleaseFileError(
                f"{swhere} in {source}: tool {tool_name!r} has "
                + (f"no binaries {unknown}" if unknown else "no matrix")
                + f"; name binaries of tools.{tool_name}.binaries or add tools.{tool_name}.matrix"
            )
        return tuple(Step(tool_name, version, names) for version, _ in tool.matrix)
    version = tool.version
    if "for_kubernetes" in raw:
        if tool_name != "etcd":
            raise ReleaseFileError(
                f"{swhere}.for_kubernetes in {source} applies to etcd only, not {tool_name!r}"
            )
        release_version = known.release(raw["for_kubernetes"], f"{swhere}.for_kubernetes")
        version = next(r.etcd for r in known.releases if r.version == release_version)
    return (Step(tool_name, version, tuple(b.name for b in tool.binaries)),)


@functools.cache
def _load_cached(path: str, mtime_ns: int) -> Releases:
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return parse_releases(data, path)


def load_go_builds(path: str | os.PathLike[str] | None = None) -> dict[str, GoBuild]:
    """The ``go_builds`` section of the releases file (see :func:`parse_go_builds`).

    Raises :class:`ReleaseFileError` or ``OSError``.
    """
    file = Path(path) if path is not None else RELEASES_FILE
    return parse_go_builds(yaml.safe_load(file.read_text(encoding="utf-8")), str(file))


def load_releases(path: str | os.PathLike[str] | None = None) -> Releases:
    """Read and validate the releases file (default: ``gpufleet/build/releases.yaml``).

    Raises :class:`ReleaseFileError` (see :func:`parse_releases`) or ``OSError``.
    """
    file = Path(path) if path is not None else RELEASES_FILE
    return _load_cached(str(file), file.stat().st_mtime_ns)
