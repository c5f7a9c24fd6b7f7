"""Go module files for the builds of ``gpufleet.build.binaries``: reading an upstream
``go.mod`` (requires, replaces), the generated build module's ``go.mod`` and ``tools.go``
(Kubernetes' staging modules and a tool's local replaces pinned to versions), and the
``-X`` link-time version variables (``hack/lib/version.sh`` of ``k8s.io/kubernetes``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gpufleet.build.release_pins import (
    VERSION_RE,
    ReleaseFileError,
    Tool,
    is_module_version,
    plain_version,
)

BUILD_MODULE_PREFIX = "gpufleet.local/build"
#: The packages whose version variables kubernetes sets at link time
#: (hack/lib/version.sh, kube::version::ldflags).
KUBERNETES_VERSION_PACKAGES = ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")


# --------------------------------------------------------------------------- running go


#: The Go garbage collector's target for the go command and the compiler it runs, unless
#: the caller's environment sets GOGC: compiling kube-scheduler 1.37.2 from an empty build
#: cache took 423 CPU seconds at 400 against 449 at Go's default of 100 (2 cores, 23 GiB;
#: the compiler's heap grows further between collections, the binaries are the same).
GOGC = "400"


def go_process_env(toolchain: str | None = None, cgo: bool = False) -> dict[str, str]:
    """The environment every go command of the builds runs with: this process's, with
    ``GOWORK=off`` (the k8s.io/kubernetes module ships a go.work of its own),
    ``GOTOOLCHAIN`` = ``toolchain`` (the Go a release's go.mod needs, which Go fetches from
    the module proxy) or ``local``, no VCS stamping, cgo only when asked, and
    :data:`GOGC` unless already set."""
    env = dict(os.environ)
    env.update(
        {
            "GOWORK": "off",
            "GOTOOLCHAIN": toolchain or "local",
            "GOFLAGS": "-buildvcs=false",
            "CGO_ENABLED": "1" if cgo else "0",
        }
    )
    env.setdefault("GOGC", GOGC)
    return env


def run_go(args: Sequence[str], cwd: Path, toolchain: str | None, error: type[Exception]) -> str:
    """``go ARGS`` in ``cwd`` with :func:`go_process_env` (no cgo), at most an hour; its standard
    output. Raises ``error`` with the command, the directory and the last 25 lines of its
    output when go is missing or fails."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists():
        raise error("go: no Go toolchain on PATH or at /usr/local/go/bin/go")
    proc = subprocess.run(
        [go, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=go_process_env(toolchain),
        timeout=3600,
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-25:])
        raise error(f"`go {' '.join(args)}` failed in {cwd}:\n{tail}")
    return proc.stdout


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


#: Where a build module holds the copies of the repository's stand-in modules.
SUBSTITUTE_DIR = "substitute"


def substitution_replaces(substitute: Sequence[tuple[str, str]]) -> tuple[Replace, ...]:
    """The ``replace`` directives of a release's module substitutions (``go_builds`` in
    the releases file): ``("example.com/m v1.0.1", "v1.0.0")`` -> ``example.com/m v1.0.1
    => example.com/m v1.0.0``; a directory of the repository (``("sigs.k8s.io/iptables-
    wrappers v1.0.0", "lab/go/substitute/iptables-wrappers")``) -> ``... v1.0.0 =>
    ./substitute/iptables-wrappers``, the copy :func:`write_substitutes` makes. Put them
    before the upstream replaces: the first replace of a module wins."""
    out = []
    for old, new in substitute:
        module, _, version = old.partition(" ")
        if is_module_version(new):
            out.append(Replace(module, module, old_version=version, new_version=new))
        else:
            local = f"./{SUBSTITUTE_DIR}/{PurePosixPath(new).name}"
            out.append(Replace(module, local, old_version=version))
    return tuple(out)


def _substitute_files(source: Path) -> list[Path]:
    """The files of a stand-in module a build needs: all but tests, sorted."""
    return sorted(
        p
        for p in source.rglob("*")
        if p.is_file() and not p.name.endswith("_test.go") and p.name != "README.md"
    )


def substitutes_digest(
    substitute: Sequence[tuple[str, str]], root: Path, error: type[Exception]
) -> str | None:
    """sha256 over the files of the repository modules among ``substitute`` (see
    :func:`write_substitutes`); None when there is none. Raises ``error`` naming a
    directory that is missing or holds no go.mod."""
    local = [(old, new) for old, new in substitute if not is_module_version(new)]
    if not local:
        return None
    digest = hashlib.sha256()
    for old, new in local:
        source = _substitute_source(old, new, root, error)
        digest.update(f"{old} => {new}".encode() + b"\0")
        for path in _substitute_files(source):
            digest.update(path.relative_to(source).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _substitute_source(old: str, new: str, root: Path, error: type[Exception]) -> Path:
    source = root / new
    if not (source / "go.mod").is_file():
        raise error(
            f"substitute {old!r}: {new}/go.mod is missing under {root}; the stand-in module "
            "is part of the repository (gpufleet/build/releases.yaml, go_builds)"
        )
    return source


def write_substitutes(
    directory: Path, substitute: Sequence[tuple[str, str]], root: Path, error: type[Exception]
) -> None:
    """Copy each repository module among ``substitute`` (its directory relative to
    ``root``) to ``directory/substitute/<name>``, where :func:`substitution_replaces` points,
    replacing an older copy; a version substitution needs nothing. Raises ``error`` when a
    directory is missing or holds no go.mod."""
    for old, new in substitute:
        if is_module_version(new):
            continue
        source = _substitute_source(old, new, root, error)
        dest = directory / SUBSTITUTE_DIR / PurePosixPath(new).name
        if dest.exists():
            shutil.rmtree(dest)
        for path in _substitute_files(source):
            target = dest / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


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
    match = VERSION_RE.match(version)
    if not match:
        raise ValueError(f"Kubernetes version {version!r} is not MAJOR.MINOR.PATCH")
    values = {
        "gitVersion": "v" + plain_version(version),
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
    values = {"tag": "v" + plain_version(version), "version": plain_version(version), **facts}
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
