"""Local prerequisite checks behind ``gpufleet doctor``.

Each check returns a :class:`Check`: a name, pass/fail/skip, what was found, and the
command that fixes it. Checks never change the machine.

Two kinds of install: a checkout (``pip install -e .`` of the repository, which holds
``lab/`` and ``pyproject.toml`` beside ``gpufleet/``) and a package (the wheel in
site-packages). The lab and development checks (Go, podman, the node image, the build
caches) need the checkout's sources; for a package they are skipped, and every fix printed
is a command that works for that install.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from gpufleet.runner import RunError, collection_root

MIN_PYTHON = (3, 11)
# ansible-core 2.17 is the oldest release whose collection loader and ansible-runner
# event stream the collection is tested with (meta/runtime.yml: requires_ansible).
MIN_ANSIBLE_CORE = (2, 17)
MIN_GO = (1, 24)
REQUIRED_COLLECTIONS = (
    "kubernetes.core",
    "containers.podman",
    "ansible.posix",
    "community.general",
    "gpufleet.cluster",
)
PIP_FIX = "pip install -e '.[dev]'   (from the gpufleet checkout)"
#: Joins two commands of one fix that are alternatives (Galaxy, or pip where Galaxy is not
#: reachable).
FIX_OR = "   or, without Galaxy: "
#: Why a lab or development check does not apply to an installed package.
DEVELOPMENT_ONLY = (
    "for lab and development use: needs a checkout of the gpufleet repository; "
    "this gpufleet is installed as a package ({where})"
)


@dataclass(frozen=True)
class Check:
    """One prerequisite: ``ok`` is False only for a failure, ``detail`` what was found (for
    a skip: why it does not apply), ``fix`` the command that remedies a failure."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    skipped: bool = False

    @property
    def result(self) -> str:
        """``pass``, ``fail`` or ``skip``."""
        if self.skipped:
            return "skip"
        return "pass" if self.ok else "fail"

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "result": self.result}


#: Repository root when the package runs from a checkout (``gpufleet/doctor.py`` sits in
#: it); the site-packages directory for an installed package.
REPO_ROOT = Path(__file__).resolve().parents[1]


def checkout_root(root: Path = REPO_ROOT) -> Path | None:
    """The checkout this package runs from, or None for an installed package.

    A checkout holds ``pyproject.toml`` and ``lab/`` beside the ``gpufleet`` package; a
    site-packages directory holds neither.
    """
    if (root / "pyproject.toml").is_file() and (root / "lab").is_dir():
        return root
    return None


def command_name(tool: str) -> str:
    """How to call ``tool`` of this Python's environment: its bare name when PATH finds
    that same file (or the environment has none), else its full path (a virtualenv that
    is not activated)."""
    own = Path(sys.executable).with_name(tool)
    if not own.is_file():
        return tool
    found = shutil.which(tool)
    if found and Path(found).resolve() == own.resolve():
        return tool
    return str(own)


def pip_command() -> str:
    """``pip`` of this Python's environment; ``<python> -m pip`` when it has no pip script."""
    if Path(sys.executable).with_name("pip").is_file():
        return command_name("pip")
    return f"{shlex.quote(sys.executable)} -m pip"


def requirements_file() -> Path | None:
    """``requirements.yml`` of the installed collection (the wheel ships it in
    ``site-packages/ansible_collections/gpufleet/cluster``; a checkout has it at its
    root), or None when the collection is not importable."""
    try:
        path = collection_root() / "requirements.yml"
    except RunError:
        return None
    return path if path.is_file() else None


def collections_fix(requirements: Path | None) -> str:
    """The command that installs the collections the roles call: from Galaxy with the
    shipped ``requirements.yml``, or the ``bundle`` extra (the ``ansible`` package)."""
    bundle = f"{pip_command()} install 'gpufleet[bundle]'"
    if requirements is None:
        return bundle
    galaxy = command_name("ansible-galaxy")
    return f"{galaxy} collection install -r {shlex.quote(str(requirements))}{FIX_OR}{bundle}"


def package_requirement(name: str) -> str:
    """The requirement gpufleet's metadata declares for ``name`` (``ansible-core<2.20,
    >=2.17``); the bare name when the metadata does not name it."""
    try:
        declared = metadata.requires("gpufleet") or []
    except metadata.PackageNotFoundError:
        declared = []
    for req in declared:
        if re.match(rf"{re.escape(name)}\b(?!-)", req) and "extra ==" not in req:
            return req.split(";")[0].strip()
    return name


def _version_tuple(text: str) -> tuple[int, ...]:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return ()
    return tuple(int(x) for x in match.groups() if x is not None)


def _run(argv: list[str], timeout: float = 60) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def check_python() -> Check:
    found = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info[:2] >= MIN_PYTHON
    return Check(
        "python",
        ok,
        f"Python {found} at {sys.executable}",
        "" if ok else "install Python >= 3.11 and recreate the virtualenv",
    )


def check_ansible_core() -> Check:
    fix = (
        PIP_FIX
        if checkout_root()
        else f"{pip_command()} install {shlex.quote(package_requirement('ansible-core'))}"
    )
    try:
        from ansible.release import __version__ as found
    except ImportError:
        return Check("ansible-core", False, "not importable", fix)
    ok = _version_tuple(found)[:2] >= MIN_ANSIBLE_CORE
    return Check("ansible-core", ok, f"ansible-core {found}", "" if ok else fix)


def installed_collections(galaxy: str | None = None) -> dict[str, str]:
    """Map collection FQCN to version as ``ansible-galaxy collection list`` sees it.

    The first path that holds a collection wins, as for ansible-core's loader.
    """
    exe = galaxy or str(Path(sys.executable).with_name("ansible-galaxy"))
    if not Path(exe).exists():
        exe = shutil.which("ansible-galaxy") or exe
    rc, out = _run([exe, "collection", "list", "--format", "json"], timeout=120)
    if rc != 0:
        return {}
    start = out.find("{")
    try:
        data = json.loads(out[start:]) if start >= 0 else {}
    except json.JSONDecodeError:
        return {}
    found: dict[str, str] = {}
    for per_path in data.values():
        for name, info in per_path.items():
            found.setdefault(name, str(info.get("version", "?")))
    return found


def check_collections() -> list[Check]:
    found = installed_collections()
    dependencies_fix = collections_fix(requirements_file())
    if checkout_root():
        own_fix = PIP_FIX  # puts .collections/ on sys.path
    else:  # the wheel carries it in site-packages/ansible_collections
        own_fix = f"{pip_command()} install --force-reinstall --no-deps gpufleet"
    checks = []
    for name in REQUIRED_COLLECTIONS:
        ok = name in found
        fix = own_fix if name == "gpufleet.cluster" else dependencies_fix
        checks.append(
            Check(
                f"collection {name}",
                ok,
                f"{name} {found[name]}" if ok else "not found by ansible-galaxy",
                "" if ok else fix,
            )
        )
    return checks


def check_go() -> Check:
    go = shutil.which("go")
    if not go:
        return Check(
            "go",
            False,
            "go not on PATH",
            f"apt-get install -y golang (>= {MIN_GO[0]}.{MIN_GO[1]}) or put go on PATH",
        )
    _, out = _run([go, "version"])
    ok = _version_tuple(out)[:2] >= MIN_GO
    return Check("go", ok, out, "" if ok else f"install Go >= {MIN_GO[0]}.{MIN_GO[1]}")


def check_podman() -> list[Check]:
    """podman present, and its effective settings the ones this kind of machine needs."""
    if not shutil.which("podman"):
        return [Check("podman", False, "podman not on PATH", "lab/prepare-podman")]
    _, out = _run(["podman", "--version"])
    checks = [Check("podman", True, out)]
    from gpufleet.lab import podman

    ok, detail = podman.containers_conf_ok()
    checks.append(Check("podman settings", ok, detail, "" if ok else "lab/prepare-podman"))
    ref = podman.node_image_ref()
    try:
        present, found = podman.image_present(ref), ""
    except podman.PodmanError as exc:  # broken storage: a verdict, not a crash
        present, found = False, f"{ref}: {exc}"
    checks.append(
        Check(
            "node image",
            present,
            ref if present else found or f"{ref} not built",
            "" if present else "lab/prepare-podman",
        )
    )
    return checks


#: The build profile scripts/setup builds and doctor checks, unless
#: ``GPUFLEET_BUILD_PROFILE`` names another (the test run sets ``ci``).
DEFAULT_PROFILE = "main"


def check_binaries(profile: str | None = None) -> list[Check]:
    """The binaries of a build profile of ``gpufleet/build/releases.yaml``, one check per
    release or tool: built, and built from the inputs pinned now (its stamp matches).
    ``profile``: by default ``GPUFLEET_BUILD_PROFILE``, else :data:`DEFAULT_PROFILE`."""
    from gpufleet.build import binaries, release_pins

    profile = profile or os.environ.get("GPUFLEET_BUILD_PROFILE") or DEFAULT_PROFILE
    releases = release_pins.load_releases()
    groups: dict[tuple[str, str], list[str]] = {}
    for target in binaries.plan_steps(releases.profile(profile).steps, releases):
        missing = groups.setdefault((target.group, target.version), [])
        if not binaries.target_is_cached(target, releases):
            missing.append(target.binary.name)
    checks = []
    for (group, version), missing in groups.items():
        where = binaries.cache_root() / "bin" / group / f"v{version}"
        name = f"binaries {group} {version}"
        if missing:
            if group == "kubernetes":
                fix = f"lab/build-binaries --kubernetes {version}"
            elif version == releases.tool(group).version:
                fix = f"lab/build-binaries --tools {group}"
            else:  # a matrix release: only the profile names those
                fix = f"lab/build-binaries --profile {profile}"
            checks.append(Check(name, False, f"missing or stale: {', '.join(missing)}", fix))
        else:
            checks.append(Check(name, True, str(where)))
    return checks


MIN_INOTIFY_INSTANCES = 1024


def check_lab() -> list[Check]:
    """What ``gpufleet lab up`` needs beyond podman: inotify instances for several systemd
    nodes, Debian's static busybox for the test pod image, and the GPU simulator's kubelet
    plugin binary."""
    from gpufleet.lab import cluster, gpusim_plugin

    checks = []
    path = Path("/proc/sys/fs/inotify/max_user_instances")
    value = int(path.read_text()) if path.is_file() else 0
    ok = value >= MIN_INOTIFY_INSTANCES
    checks.append(
        Check(
            "inotify instances",
            ok,
            f"fs.inotify.max_user_instances = {value}",
            "" if ok else "lab/prepare-podman (raises it to 8192; the default 128 boots ~4 nodes)",
        )
    )
    ok = cluster.BUSYBOX.is_file()
    checks.append(
        Check("busybox-static", ok, str(cluster.BUSYBOX), "" if ok else "lab/prepare-podman")
    )
    plugin = gpusim_plugin.binary_path()
    ok = plugin.is_file()
    checks.append(
        Check(
            "GPU simulator kubelet plugin",
            ok,
            str(plugin) if ok else "not built for the current sources",
            "" if ok else ".venv/bin/python -m gpufleet.lab.gpusim_plugin build",
        )
    )
    return checks


CHECKS: tuple[Callable[[], Check | list[Check]], ...] = (
    check_python,
    check_ansible_core,
    check_collections,
)
#: What the lab and the development of gpufleet.cluster need: run from a checkout only.
DEVELOPMENT_CHECKS: tuple[Callable[[], Check | list[Check]], ...] = (
    check_go,
    check_podman,
    check_binaries,
    check_lab,
)


def development_skip(fn: Callable[[], Check | list[Check]]) -> Check:
    """The row of a development check that does not apply to an installed package."""
    where = Path(__file__).resolve().parent
    return Check(
        fn.__name__.removeprefix("check_"),
        True,
        DEVELOPMENT_ONLY.format(where=where),
        skipped=True,
    )


def run_checks(
    root: Path = REPO_ROOT,
    checks: Sequence[Callable[[], Check | list[Check]]] = CHECKS,
    development_checks: Sequence[Callable[[], Check | list[Check]]] = DEVELOPMENT_CHECKS,
) -> list[Check]:
    """Run ``checks``, then ``development_checks`` when ``root`` is a checkout
    (:func:`checkout_root`); without one each development check is one skipped row. A
    check that raises becomes a failed check naming the exception."""
    from_checkout = checkout_root(root) is not None
    results: list[Check] = []
    for fn in [*checks, *development_checks]:
        if fn in development_checks and not from_checkout:
            results.append(development_skip(fn))
            continue
        try:
            out = fn()
        except Exception as exc:  # a broken check must not hide the others
            results.append(
                Check(
                    fn.__name__.removeprefix("check_"),
                    False,
                    f"check raised {type(exc).__name__}: {exc}",
                    "none on this machine: the check itself failed; "
                    "report its detail (gpufleet doctor --json) to the gpufleet maintainers",
                )
            )
            continue
        results.extend(out if isinstance(out, list) else [out])
    return results
