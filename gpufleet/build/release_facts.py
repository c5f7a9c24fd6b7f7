"""Per-release Kubernetes facts, generated from each release's own source.

For every release listed under ``release_facts`` in ``gpufleet/build/releases.yaml`` this
builds ``lab/go/featuredump`` against ``k8s.io/kubernetes`` at that release, runs it and
writes what it printed, normalised, to ``plugins/module_utils/dra/releases/v1_<minor>.py``:
every registered feature gate (versioned specs, dependencies), the ``resource.k8s.io``
versions kube-apiserver serves and enables by default, and the kubeadm configuration API
versions. The version model (``plugins/module_utils/dra/``) reads those files
through ``plugins/module_utils/dra/release_data.py``.

Commands (``python -m gpufleet.build.release_facts``)::

    build [--kubernetes V ...] [--ci]
                                    build the dump binaries (scripts/setup: --ci)
    generate [--kubernetes V ...]   build, dump and write the data files (all listed releases
                                    when none is named)
    check [--kubernetes V ...]      rebuild nothing: run each cached dump binary and compare
                                    with the committed file; exit 1 on a difference

A build module per release lives in ``<cache>/build/featuredump/v<version>/``; the binary in
``<cache>/bin/featuredump/v<version>/gpufleet-featuredump``. A release that needs a newer Go
names it under ``go_builds`` (``go_toolchain: go1.27.3``), and Go fetches that toolchain
from the module proxy; ``substitute`` there replaces a module version the proxy does not
serve with one it does or with a stand-in module of this repository (copied into the build
module; the dump's facts, feature-gate registrations, the API config source and kubeadm's
version tables, do not depend on a substituted module).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from gpufleet.build import binaries, gomod, release_pins
from gpufleet.exit import EXIT_FAILED, exit_with, status_of

REPO_ROOT = Path(__file__).resolve().parents[2]
RELEASES_FILE = REPO_ROOT / "gpufleet" / "build" / "releases.yaml"
SOURCE_DIR = REPO_ROOT / "lab" / "go" / "featuredump"
DATA_DIR = REPO_ROOT / "plugins" / "module_utils" / "dra" / "releases"
DUMP_BINARY = "gpufleet-featuredump"
MODULE = "k8s.io/kubernetes"
#: Files of the release's module that featuredump parses (embedded at build time).
EMBEDDED_SOURCES = {
    "instance.go.txt": "pkg/controlplane/instance.go",
    "common.go.txt": "cmd/kubeadm/app/util/config/common.go",
}
REFERENCE_LIST = "test/compatibility_lifecycle/reference/versioned_feature_list.yaml"
#: The API groups kube-apiserver registers: the release's own list of install packages.
KNOWN_VERSIONS_SOURCE = "pkg/controlplane/import_known_versions.go"
KNOWN_VERSIONS_GO = "known_versions.go"
#: Format of the committed data (bump when the shape changes).
DATA_FORMAT = 1
GENERATE_COMMAND = "python -m gpufleet.build.release_facts generate --kubernetes {version}"

_RELEASE_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(-(alpha|beta|rc)\.\d+)?$")
_STAGES = {"ALPHA": "alpha", "BETA": "beta", "": "ga", "DEPRECATED": "deprecated"}


class FactsError(RuntimeError):
    """A release entry is malformed, a build failed or a dump is not what was expected."""


@dataclass(frozen=True)
class FactRelease(release_pins.BuiltAgainst):
    """One release whose facts are generated: ``version`` (``1.38.0-beta.0``), how Go code
    is built against it (its ``go_builds`` entry: toolchain, module substitutions) and
    whether scripts/setup builds its dump (``ci``)."""

    version: str
    go_build: release_pins.GoBuild = release_pins.LOCAL_GO_BUILD
    ci: bool = False


def parse_fact_releases(data: Any, source: str = str(RELEASES_FILE)) -> tuple[FactRelease, ...]:
    """The ``release_facts.releases`` entries of a parsed releases file.

    Raises FactsError naming the entry, the value and the fix.
    """
    section = (data or {}).get("release_facts") if isinstance(data, Mapping) else None
    entries = section.get("releases") if isinstance(section, Mapping) else None
    if not isinstance(entries, list) or not entries:
        raise FactsError(f"{source}: no release_facts.releases list; add one (see releases.yaml)")
    try:
        go_builds = release_pins.parse_go_builds(data, source)
    except release_pins.ReleaseFileError as exc:
        raise FactsError(str(exc)) from None
    out: list[FactRelease] = []
    for i, entry in enumerate(entries):
        where = f"release_facts.releases[{i}]"
        if not isinstance(entry, Mapping):
            raise FactsError(f"{where} in {source} is {entry!r}; write {{version: '1.38.0'}}")
        version = str(entry.get("version", "")).removeprefix("v")
        if not _RELEASE_RE.match(version):
            raise FactsError(
                f"{where}.version = {entry.get('version')!r} in {source} is not a release "
                "such as 1.37.2 or 1.38.0-beta.0"
            )
        if any(r.minor == int(version.split(".")[1]) for r in out):
            raise FactsError(f"{where}: a second release of minor 1.{version.split('.')[1]}")
        for key in ("go_toolchain", "substitute"):
            if key in entry:
                raise FactsError(
                    f"{where}.{key} in {source}: how Go code is built against a release is "
                    f"written under go_builds; move it to a go_builds entry for {version!r}"
                )
        out.append(
            FactRelease(
                version,
                go_builds.get(version, release_pins.LOCAL_GO_BUILD),
                ci=bool(entry.get("ci", False)),
            )
        )
    return tuple(out)


def load_fact_releases(path: Path = RELEASES_FILE) -> tuple[FactRelease, ...]:
    return parse_fact_releases(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))


def data_module_path(minor: int, directory: Path = DATA_DIR) -> Path:
    return directory / f"v1_{minor}.py"


def dump_binary_path(version: str) -> Path:
    return binaries.cache_root() / "bin" / "featuredump" / f"v{version}" / DUMP_BINARY


def module_dir(version: str) -> Path:
    """The unpacked k8s.io/kubernetes module of ``version`` its dump was built from."""
    record = dump_binary_path(version).with_name("module-dir")
    return Path(record.read_text().strip()) if record.is_file() else Path("/nonexistent")


# --------------------------------------------------------------------------- normalising


def normalise(dump: Mapping[str, Any], release: str) -> dict[str, Any]:
    """The committed form of a featuredump output (format 2).

    ``gates``: name -> ``[[[version, stage, default, locked, min_compat], ...], [deps]]``
    with stage one of alpha/beta/ga/deprecated; ``resource``: version ->
    ``{enabledByDefault, served, registered, kinds, removed, deprecated, resourceDefaults}``
    (``removed``/``deprecated``: the earliest minor any kind's lifecycle names, or None);
    ``kubeadm``: ``{registered, old, deprecated, experimental}``. ``run_dump`` adds
    ``announced`` (``announced_lifecycle``) from the release's source.
    Raises FactsError when the dump is of another release or another format.
    """
    if dump.get("format") != 2:
        raise FactsError(f"featuredump output has format {dump.get('format')!r}, expected 2")
    if dump.get("kubernetesModuleVersion") != "v" + release:
        raise FactsError(
            f"featuredump reports {dump.get('kubernetesModuleVersion')!r}, expected v{release}"
        )
    gates = _normal_gates(dump["gates"])
    component_gates = {
        component: _normal_gates(table)
        for component, table in sorted((dump.get("componentGates") or {}).items())
        if table
    }
    resource: dict[str, Any] = {}
    for gv in dump["apiGroups"].get("resource.k8s.io", []):
        lifecycles = gv.get("lifecycle") or {}

        def earliest(key: str, lc: Mapping[str, Any] = lifecycles) -> str | None:
            found = [v[key] for v in lc.values() if v.get(key)]
            return min(found, key=lambda x: tuple(int(p) for p in x.split("."))) if found else None

        resource[gv["version"]] = {
            "served": bool(gv["served"]),
            "enabledByDefault": bool(gv["enabledByDefault"]),
            "registered": bool(gv["registered"]),
            "kinds": sorted(gv.get("kinds") or []),
            "removed": earliest("removed"),
            "deprecated": earliest("deprecated"),
            "resourceDefaults": dict(sorted((gv.get("resourceDefaults") or {}).items())),
        }
    kubeadm = dump["kubeadm"]
    return {
        "format": DATA_FORMAT,
        "release": release,
        "binaryVersion": dump["binaryVersion"],
        "dependenciesDeclared": bool(dump["dependenciesDeclared"]),
        "gates": gates,
        "componentGates": component_gates,
        "resource": resource,
        "groupVersions": sorted(dump["groupVersions"]),
        "kubeadm": {
            "registered": sorted(kubeadm["registered"]),
            "old": dict(sorted(kubeadm["old"].items())),
            "deprecated": sorted(kubeadm["deprecated"]),
            "experimental": sorted(kubeadm["experimental"]),
        },
    }


#: Where a release declares the next steps of its gates: the comment on a versioned spec
#: (``// GA in 1.36; remove in 1.39``, ``// LockToDefault: true in 1.39; remove in 1.42``).
#: 1.31 and 1.32 keep the versioned specs in a file of their own beside the constants.
FEATURES_SOURCE = "pkg/features/kube_features.go"
VERSIONED_FEATURES_SOURCE = "pkg/features/versioned_kube_features.go"
_GATE_CONSTANT = re.compile(r"^\t(\w+)\s+featuregate\.Feature\s*=\s*\"([^\"]+)\"", re.M)
_GATE_BLOCK = re.compile(r"^\t(\w+): \{\n(.*?)^\t\},?$", re.M | re.S)
#: 1.31's unversioned specs: one line each (``\tName: {Default: ...}, // remove in 1.33``).
_GATE_LINE = re.compile(r"^\t(\w+): (\{[^\n]*\},?[ \t]*//[^\n]*)$", re.M)
_ANNOUNCED = {
    "remove": re.compile(r"\bremov(?:e|ed|al)\s+in\s+v?1\.(\d+)", re.I),
    "lock": re.compile(
        r"\b(?:LockToDefault(?::\s*true)?|lock(?:ed)?(?:\s+to\s+default)?)\s+in\s+v?1\.(\d+)",
        re.I,
    ),
}


def announced_lifecycle(source: str, minor: int) -> dict[str, dict[str, str]]:
    """Gate -> ``{"lock": "1.N", "remove": "1.M"}``: the later minors the comments of the
    gate's versioned specs in ``FEATURES_SOURCE`` (its text, ``source``) announce for it,
    beyond ``minor``. Comments are the release's own words and the only place a release
    says what the next one will do; an announcement of a past minor is left out."""
    names = dict(_GATE_CONSTANT.findall(source))
    out: dict[str, dict[str, str]] = {}
    for constant, body in _GATE_BLOCK.findall(source) + _GATE_LINE.findall(source):
        comments = " ".join(line.split("//", 1)[1] for line in body.splitlines() if "//" in line)
        found = {}
        for step, pattern in _ANNOUNCED.items():
            later = [int(m) for m in pattern.findall(comments) if int(m) > minor]
            if later:
                found[step] = f"1.{min(later)}"
        if found:
            out[names.get(constant, constant)] = dict(sorted(found.items()))
    return dict(sorted(out.items()))


def module_announcements(module: Path, minor: int) -> dict[str, dict[str, str]]:
    """``announced_lifecycle`` of the unpacked release module; raises FactsError when the
    module has no ``FEATURES_SOURCE``."""
    path = module / FEATURES_SOURCE
    if not path.is_file():
        raise FactsError(f"{path}: missing; the release's module is not unpacked")
    texts = [path.read_text(encoding="utf-8")]
    versioned = module / VERSIONED_FEATURES_SOURCE
    if versioned.is_file():
        texts.append(versioned.read_text(encoding="utf-8"))
    return announced_lifecycle("\n".join(texts), minor)


def _normal_gates(table: Mapping[str, Any]) -> dict[str, Any]:
    gates: dict[str, Any] = {}
    for name in sorted(table):
        g = table[name]
        specs = []
        for s in g["specs"]:
            if s["preRelease"] not in _STAGES:
                raise FactsError(f"gate {name}: unknown prerelease {s['preRelease']!r}")
            specs.append(
                [
                    s["version"],
                    _STAGES[s["preRelease"]],
                    bool(s["default"]),
                    bool(s["lockToDefault"]),
                    s.get("minCompatibilityVersion"),
                ]
            )
        gates[name] = [specs, sorted(g.get("dependencies") or [])]
    return gates


def reference_list_names(module_dir: Path) -> set[str] | None:
    """Gate names of the release's own generated reference list
    (``test/compatibility_lifecycle/reference/versioned_feature_list.yaml``, from 1.33),
    or None when the release has none."""
    path = module_dir / REFERENCE_LIST
    if not path.is_file():
        return None
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    return {str(entry["name"]) for entry in data if isinstance(entry, Mapping) and "name" in entry}


def reference_list_gaps(facts: Mapping[str, Any], names: set[str] | None) -> list[str]:
    """Gates the release's reference list names that the dump does not register anywhere."""
    if names is None:
        return []
    dumped = set(facts["gates"]) | {n for t in facts["componentGates"].values() for n in t}
    return sorted(names - dumped)


def render_data_module(facts: Mapping[str, Any]) -> str:
    """The text of a data module: a docstring and ``FACTS_JSON``, one gate per line."""
    release = facts["release"]
    head = {k: v for k, v in facts.items() if k not in ("gates", "componentGates")}
    lines = ["{"]
    for key, value in head.items():
        lines.append(f"{json.dumps(key)}: {json.dumps(value, sort_keys=False)},")
    lines.append(f'"componentGates": {json.dumps(facts["componentGates"])},')
    lines.append('"gates": {')
    names = list(facts["gates"])
    for i, name in enumerate(names):
        comma = "," if i < len(names) - 1 else ""
        lines.append(f"{json.dumps(name)}: {json.dumps(facts['gates'][name])}{comma}")
    lines.append("}")
    lines.append("}")
    body = "\n".join(lines)
    if '"""' in body or "\\" in body:
        raise FactsError(f"{release}: the dump holds text a Python raw string cannot carry")
    return (
        "# Copyright: gpufleet contributors\n"
        "# Apache License 2.0 (see LICENSE)\n"
        f'"""Kubernetes v{release}: feature gates, resource.k8s.io versions and kubeadm\n'
        "configuration API versions, as the release's own source registers them.\n\n"
        f"Generated by ``{GENERATE_COMMAND.format(version=release)}``\n"
        "(lab/go/featuredump built against k8s.io/kubernetes at this release); do not edit.\n"
        "Read through ``dra/release_data.py``.\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        f'RELEASE = "{release}"\n\n'
        f'FACTS_JSON = r"""\n{body}\n"""\n'
    )


def read_data_module(path: Path) -> dict[str, Any]:
    """Parse a committed data module without importing it."""
    text = path.read_text(encoding="utf-8")
    match = re.search(r'FACTS_JSON = r"""\n(.*)\n"""', text, re.S)
    if not match:
        raise FactsError(f"{path}: no FACTS_JSON block")
    return json.loads(match.group(1))


# --------------------------------------------------------------------------- building


def _go(release: FactRelease, args: Sequence[str], cwd: Path) -> str:
    return gomod.run_go(args, cwd, release.go_toolchain, FactsError)


def known_versions_go(source: str) -> str:
    """A ``package main`` file with the blank imports of ``import_known_versions.go`` (the
    API group install packages kube-apiserver links), so featuredump's legacyscheme holds
    every group-version the release registers. Raises FactsError when there is none."""
    imports = re.findall(
        r'^\s*_\s+"(k8s\.io/kubernetes/pkg/apis/[a-z0-9/]+/install)"', source, re.M
    )
    if not imports:
        raise FactsError(f"{KNOWN_VERSIONS_SOURCE}: no API group install imports found")
    lines = "\n".join(f'\t_ "{path}"' for path in imports)
    return (
        f"// Generated from {KNOWN_VERSIONS_SOURCE} of the release; do not edit.\n\n"
        f"package main\n\nimport (\n{lines}\n)\n"
    )


def _digest(parts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def build_dump(release: FactRelease, log=print) -> Path:
    """Build featuredump against ``release``; returns the binary's path (cached by inputs)."""
    work = binaries.cache_root() / "build" / "featuredump" / release.tag
    work.mkdir(parents=True, exist_ok=True)
    info = json.loads(_go(release, ["mod", "download", "-json", f"{MODULE}@{release.tag}"], work))
    if info.get("Error"):
        raise FactsError(f"go mod download {MODULE}@{release.tag}: {info['Error']}")
    upstream = gomod.parse_gomod(Path(info["GoMod"]).read_text(encoding="utf-8"))
    replaces = list(
        gomod.pinned_replaces(
            upstream, main_version=release.tag, staging_version=release.staging_version
        )
    )
    build_gomod = gomod.render_build_gomod(
        "gpufleet.local/build/featuredump",
        [(MODULE, release.tag)],
        [upstream],
        [*gomod.substitution_replaces(release.substitute), *replaces],
    )
    sources = {p.name: p.read_text(encoding="utf-8") for p in sorted(SOURCE_DIR.glob("*.go"))}
    sources[KNOWN_VERSIONS_GO] = known_versions_go(
        (Path(info["Dir"]) / KNOWN_VERSIONS_SOURCE).read_text(encoding="utf-8")
    )
    embedded = {
        name: (Path(info["Dir"]) / rel).read_text(encoding="utf-8")
        for name, rel in EMBEDDED_SOURCES.items()
    }
    stamp = _digest(
        [build_gomod, release.go_toolchain or "local", *sources.values(), *embedded.values()]
    )
    out = dump_binary_path(release.version)
    stamp_file = out.with_name(DUMP_BINARY + ".stamp")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_name("module-dir").write_text(info["Dir"] + "\n")
    if out.is_file() and stamp_file.is_file() and stamp_file.read_text().strip() == stamp:
        return out
    pkg = work / "featuredump"
    if pkg.exists():
        shutil.rmtree(pkg)
    (pkg / "src").mkdir(parents=True)
    for name, text in sources.items():
        (pkg / name).write_text(text, encoding="utf-8")
    for name, text in embedded.items():
        (pkg / "src" / name).write_text(text, encoding="utf-8")
    (work / "go.mod").write_text(build_gomod, encoding="utf-8")
    (work / "go.sum").unlink(missing_ok=True)
    gomod.write_substitutes(work, release.substitute, binaries.REPO_ROOT, FactsError)
    started = time.monotonic()
    log(f"featuredump {release.tag}: go mod tidy (toolchain {release.go_toolchain or 'local'})")
    # -e: test-only dependencies of the release's packages may be missing from the proxy
    # for a pre-release; the build below needs only what the program imports.
    _go(release, ["mod", "tidy", "-e"], work)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{DUMP_BINARY}.partial")
    _go(
        release,
        ["build", "-mod=mod", "-trimpath", "-ldflags=-s -w", "-o", str(partial), "./featuredump"],
        work,
    )
    os.replace(partial, out)
    stamp_file.write_text(stamp + "\n")
    out.with_name("module-dir").write_text(info["Dir"] + "\n")
    log(f"featuredump {release.tag}: built in {time.monotonic() - started:.1f} s")
    return out


def run_dump(path: Path, release: str) -> dict[str, Any]:
    """Run a featuredump binary; returns its normalised output."""
    proc = subprocess.run([str(path)], capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise FactsError(f"{path} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    facts = normalise(json.loads(proc.stdout), release)
    record = path.with_name("module-dir")
    if not record.is_file():
        raise FactsError(f"{record}: missing; rebuild the dump to record its module directory")
    minor = int(release.split(".")[1])
    facts["announced"] = module_announcements(Path(record.read_text().strip()), minor)
    return facts


def diff_facts(committed: Mapping[str, Any], fresh: Mapping[str, Any]) -> list[str]:
    """Human lines for every difference between two normalised dumps (empty: same)."""
    out: list[str] = []
    for key in sorted(set(committed) | set(fresh)):
        if key == "gates":
            continue
        if committed.get(key) != fresh.get(key):
            out.append(f"{key}: committed {committed.get(key)!r}, source {fresh.get(key)!r}")
    cg, fg = committed.get("gates", {}), fresh.get("gates", {})
    for name in sorted(set(cg) | set(fg)):
        if cg.get(name) != fg.get(name):
            out.append(f"gate {name}: committed {cg.get(name)!r}, source {fg.get(name)!r}")
    return out


def _select(releases: Sequence[FactRelease], wanted: Sequence[str]) -> list[FactRelease]:
    if not wanted:
        return list(releases)
    chosen = []
    for w in wanted:
        w = w.removeprefix("v")
        match = [r for r in releases if r.version == w]
        if not match:
            known = ", ".join(r.version for r in releases)
            raise click.UsageError(
                f"--kubernetes {w}: not listed under release_facts in {RELEASES_FILE} "
                f"(listed: {known}); add it there first"
            )
        chosen.extend(match)
    return chosen


@click.group()
def cli() -> None:
    """Per-release Kubernetes facts for the version model."""


@cli.command()
@click.option("--kubernetes", "versions", multiple=True, help="release to build (repeat)")
@click.option("--ci", "ci_only", is_flag=True, help="only the releases marked ci: true")
def build(versions: tuple[str, ...], ci_only: bool) -> None:
    """Build the dump binary of each release (no data is written)."""
    try:
        for release in _select(load_fact_releases(), versions):
            if ci_only and not release.ci:
                continue
            click.echo(f"{release.version}: {build_dump(release)}")
    except FactsError as exc:
        click.echo(f"release_facts: {exc}", err=True)
        exit_with(EXIT_FAILED)


@cli.command()
@click.option("--kubernetes", "versions", multiple=True, help="release to generate (repeat)")
def generate(versions: tuple[str, ...]) -> None:
    """Build featuredump per release, run it and write the data modules."""
    try:
        for release in _select(load_fact_releases(), versions):
            binary = build_dump(release)
            facts = run_dump(binary, release.version)
            gaps = reference_list_gaps(facts, reference_list_names(module_dir(release.version)))
            if gaps:
                click.echo(
                    f"{release.version}: the release's {REFERENCE_LIST} names gates the dump "
                    f"does not register: {', '.join(gaps)}",
                    err=True,
                )
            path = data_module_path(release.minor)
            path.write_text(render_data_module(facts), encoding="utf-8")
            click.echo(f"{release.version}: {len(facts['gates'])} feature gates -> {path}")
    except FactsError as exc:
        click.echo(f"release_facts: {exc}", err=True)
        exit_with(EXIT_FAILED)


@cli.command()
@click.option("--kubernetes", "versions", multiple=True, help="release to check (repeat)")
def check(versions: tuple[str, ...]) -> None:
    """Compare each cached dump binary's output with the committed data module."""
    failed = False
    for release in _select(load_fact_releases(), versions):
        binary = dump_binary_path(release.version)
        if not binary.is_file():
            click.echo(f"{release.version}: no cached dump ({binary}); skipped")
            continue
        lines = diff_facts(
            read_data_module(data_module_path(release.minor)), run_dump(binary, release.version)
        )
        failed = failed or bool(lines)
        click.echo(f"{release.version}: {'differs' if lines else 'same as committed'}")
        for line in lines:
            click.echo(f"  {line}")
    exit_with(status_of(bool(failed)))


if __name__ == "__main__":
    cli()
