"""Local prerequisite checks behind ``gpufleet doctor``.

Each check returns a :class:`Check`: a name, pass/fail, what was found, and the command
that fixes it. Checks never change the machine.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Check:
    """One prerequisite: ``ok`` is the verdict, ``detail`` what was found, ``fix`` the remedy."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


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
    try:
        from ansible.release import __version__ as found
    except ImportError:
        return Check("ansible-core", False, "not importable", PIP_FIX)
    ok = _version_tuple(found)[:2] >= MIN_ANSIBLE_CORE
    return Check("ansible-core", ok, f"ansible-core {found}", "" if ok else PIP_FIX)


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
    checks = []
    for name in REQUIRED_COLLECTIONS:
        ok = name in found
        fix = (
            PIP_FIX
            if ok or name != "gpufleet.cluster"
            else (
                "pip install -e . puts .collections/ on sys.path; a wheel install puts it in "
                "site-packages/ansible_collections"
            )
        )
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
    present = podman.image_present(ref)
    checks.append(
        Check(
            "node image",
            present,
            ref if present else f"{ref} not built",
            "" if present else "lab/prepare-podman",
        )
    )
    return checks


def check_binaries(profile: str = "ci") -> list[Check]:
    """The binaries of a build profile of ``gpufleet/build/releases.yaml``, one check per
    release or tool: built, and built from the inputs pinned now (its stamp matches)."""
    from gpufleet.build import binaries, release_pins

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
    check_go,
    check_podman,
    check_binaries,
    check_lab,
)


def run_checks() -> list[Check]:
    """Run every check; a check that raises becomes a failed check naming the exception."""
    results: list[Check] = []
    for fn in CHECKS:
        name = fn.__name__.removeprefix("check_")
        try:
            out = fn()
        except Exception as exc:  # a broken check must not hide the others
            results.append(
                Check(
                    name,
                    False,
                    f"check raised {type(exc).__name__}: {exc}",
                    f"the check itself broke; reinstall: {PIP_FIX}",
                )
            )
            continue
        results.extend(out if isinstance(out, list) else [out])
    return results
