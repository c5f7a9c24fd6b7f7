"""gpufleet installed as a package, not from a checkout: the wheel, built from this
repository, is installed into an empty virtualenv as the README documents (``pip install``
of the wheel, then the collections the roles call), and used there.

- ``gpufleet doctor`` of the bare install: no check crashes, the lab and development
  checks are skipped, and every failure's fix is a command of that install (a path it
  names exists); its pip fix is then run as printed, and doctor passes.
- ``ansible-doc`` lists and reads every module and filter of the installed collection.
- ``ansible-playbook --syntax-check`` of every playbook by its FQCN.

The collection build for Galaxy (``ansible-galaxy collection build``) is checked by
scripts/test's collection phase. pip reads constraints.txt (``PIP_CONSTRAINT``), so that
the versions are the tested ones and come from the pip cache when it has them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gpufleet.doctor import FIX_OR

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
#: The checks that need a checkout: skipped for a package.
DEVELOPMENT_CHECKS = {"go", "podman", "binaries", "lab"}
#: The collections galaxy.yml declares (requirements.yml names the same).
DEPENDENCIES = sorted(yaml.safe_load((ROOT / "galaxy.yml").read_text())["dependencies"])


@dataclass(frozen=True)
class Install:
    """A virtualenv holding the wheel: ``bin`` its scripts, ``collection`` the installed
    ``ansible_collections/gpufleet/cluster``, ``env`` and ``cwd`` for every command."""

    bin: Path
    collection: Path
    env: dict[str, str]
    cwd: Path

    def run(self, argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.cwd,
            timeout=timeout,
            check=False,
        )

    def doctor(self) -> tuple[int, list[dict]]:
        proc = self.run([str(self.bin / "gpufleet"), "doctor", "--json"])
        return proc.returncode, json.loads(proc.stdout)["checks"]


def _must(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"{proc.args} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc.stdout


def _clean_env(work: Path) -> dict[str, str]:
    """This process's environment without the checkout's Python or collection settings:
    only what the install brings is found (an empty collections path, no ansible.cfg)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANSIBLE_", "PYTHON", "VIRTUAL_ENV", "PIP_"))
    }
    empty = work / "collections"
    empty.mkdir()
    env["ANSIBLE_COLLECTIONS_PATH"] = str(empty)
    env["PIP_CONSTRAINT"] = str(ROOT / "constraints.txt")
    return env


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    work = tmp_path_factory.mktemp("wheel")
    env = _clean_env(work)
    dist = work / "dist"
    _must(
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
    )
    (wheel,) = dist.glob("gpufleet-*.whl")
    venv.create(work / "venv", with_pip=True)
    bin_dir = work / "venv" / "bin"
    _must(
        subprocess.run(
            [str(bin_dir / "pip"), "install", "-q", str(wheel)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
    )
    (collection,) = (work / "venv").glob("lib/python3*/site-packages/ansible_collections")
    yield Install(bin_dir, collection / "gpufleet" / "cluster", env, work)
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def bare_doctor(install: Install) -> tuple[int, list[dict]]:
    """doctor of the wheel alone (before the collections the roles call)."""
    return install.doctor()


@pytest.fixture(scope="module")
def bundled(install: Install, bare_doctor: tuple[int, list[dict]]) -> Install:
    """The install after running, as printed, the pip fix doctor gave for the missing
    collections (Galaxy is not needed)."""
    fixes = {c["fix"] for c in bare_doctor[1] if c["result"] == "fail"}
    pip_fixes = {f.split(FIX_OR)[-1] for f in fixes if FIX_OR in f}
    assert len(pip_fixes) == 1, f"expected one pip fix for the collections, got {fixes}"
    (fix,) = pip_fixes
    _must(install.run(["bash", "-c", fix]))
    return install


def _table(title: str, rows: list[dict]) -> str:
    lines = [title, f"  {'check':<29} {'result':<6} found / fix"]
    for c in rows:
        lines.append(f"  {c['name']:<29} {c['result']:<6} {c['detail']}")
        if c["fix"]:
            lines.append(f"  {'':<29} {'':<6} fix: {c['fix']}")
    return "\n".join(lines)


def _assert_real_command(command: str, install: Install) -> None:
    """The command runs in this install: its program is the install's own (or on PATH), every
    absolute path it names exists, and it needs no checkout."""
    argv = shlex.split(command)
    program = argv[0]
    assert Path(program).is_file() or shutil.which(program, path=install.env["PATH"]), command
    if Path(program).is_absolute():
        assert Path(program).parent == install.bin, f"{command}: not this install's {program}"
    assert "-e" not in argv and "checkout" not in command, f"{command}: needs a checkout"
    for arg in argv[1:]:
        if arg.startswith("/"):
            assert Path(arg).exists(), f"{command}: {arg} does not exist"


def test_doctor_of_the_bare_install_skips_the_lab_and_names_real_fixes(
    install: Install, bare_doctor: tuple[int, list[dict]]
) -> None:
    rc, checks = bare_doctor
    print("\n" + _table("gpufleet doctor (wheel only)", checks))
    by_name = {c["name"]: c for c in checks}
    assert not [c for c in checks if "check raised" in c["detail"]]
    assert {c["name"] for c in checks if c["result"] == "skip"} == DEVELOPMENT_CHECKS
    assert all("lab and development" in by_name[n]["detail"] for n in DEVELOPMENT_CHECKS)
    assert by_name["collection gpufleet.cluster"]["result"] == "pass"
    failed = {c["name"] for c in checks if c["result"] == "fail"}
    assert failed == {f"collection {n}" for n in DEPENDENCIES}
    assert rc == 1
    for c in checks:
        if c["result"] != "fail":
            continue
        galaxy, pip = c["fix"].split(FIX_OR)
        _assert_real_command(galaxy, install)
        _assert_real_command(pip, install)
        requirements = Path(shlex.split(galaxy)[-1])
        assert requirements == install.collection / "requirements.yml"
        listed = yaml.safe_load(requirements.read_text())["collections"]
        assert sorted(r["name"] for r in listed) == DEPENDENCIES


def test_the_printed_pip_fix_brings_every_collection(bundled: Install) -> None:
    rc, checks = bundled.doctor()
    print("\n" + _table("gpufleet doctor (after the printed pip fix)", checks))
    assert [c for c in checks if c["result"] == "fail"] == []
    assert {c["name"] for c in checks if c["result"] == "pass"} == {
        "python",
        "ansible-core",
        *(f"collection {n}" for n in [*DEPENDENCIES, "gpufleet.cluster"]),
    }
    assert rc == 0


def _doc(install: Install, kind: str, names: list[str]) -> dict:
    return json.loads(
        _must(install.run([str(install.bin / "ansible-doc"), "-t", kind, "--json", *names]))
    )


def test_ansible_doc_reads_every_module_and_filter(install: Install) -> None:
    listing = _must(
        install.run([str(install.bin / "ansible-doc"), "-t", "module", "-l", "gpufleet.cluster"])
    )
    modules = sorted(line.split()[0] for line in listing.splitlines() if line.strip())
    shipped = sorted(
        f"gpufleet.cluster.{p.stem}"
        for p in (install.collection / "plugins" / "modules").glob("*.py")
    )
    assert modules == shipped
    listing = _must(
        install.run([str(install.bin / "ansible-doc"), "-t", "filter", "-l", "gpufleet.cluster"])
    )
    filters = sorted(line.split()[0] for line in listing.splitlines() if line.strip())
    assert len(filters) >= 9
    for kind, names in (("module", modules), ("filter", filters)):
        docs = _doc(install, kind, names)
        assert sorted(docs) == names
        empty = [n for n, d in docs.items() if not (d.get("doc") or {}).get("short_description")]
        assert not empty, f"{kind}s without a short_description: {empty}"
    print(f"\nansible-doc: {len(modules)} modules, {len(filters)} filters documented")


def test_every_playbook_passes_syntax_check_by_its_fqcn(bundled: Install) -> None:
    playbooks = sorted(p.stem for p in (bundled.collection / "playbooks").glob("*.yml"))
    assert "site" in playbooks
    results = {}
    for name in playbooks:
        proc = bundled.run(
            [
                str(bundled.bin / "ansible-playbook"),
                "--syntax-check",
                "-i",
                "localhost,",
                f"gpufleet.cluster.{name}",
            ]
        )
        results[name] = (proc.returncode, (proc.stdout + proc.stderr).strip()[-600:])
    print("\nansible-playbook --syntax-check (with gpufleet[bundle])")
    for name, (rc, _) in results.items():
        print(f"  gpufleet.cluster.{name:<26} {'ok' if rc == 0 else f'FAIL rc={rc}'}")
    failed = {n: out for n, (rc, out) in results.items() if rc != 0}
    assert not failed, failed
