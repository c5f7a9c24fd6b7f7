"""gpufleet doctor's verdicts without running a check that starts a process: a checkout or
an installed package, development checks skipped for a package, a check that raises, the
fix for missing collections, and the table's rendering of fixes with brackets."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet import doctor
from gpufleet.cli import main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def _site_packages(tmp_path: Path) -> Path:
    """What the wheel leaves in site-packages: the package and the collection."""
    root = tmp_path / "site-packages"
    (root / "gpufleet").mkdir(parents=True)
    (root / "ansible_collections" / "gpufleet" / "cluster").mkdir(parents=True)
    return root


def test_this_repository_is_a_checkout_and_site_packages_is_not(tmp_path: Path) -> None:
    assert doctor.checkout_root() == ROOT
    assert doctor.checkout_root(_site_packages(tmp_path)) is None
    half = tmp_path / "half"
    (half / "lab").mkdir(parents=True)  # a "lab" package beside gpufleet, no pyproject.toml
    assert doctor.checkout_root(half) is None


def _passes() -> doctor.Check:
    return doctor.Check("python", True, "Python 3.11")


def check_go() -> doctor.Check:
    raise FileNotFoundError("lab/image")


def test_an_installed_package_skips_the_development_checks_without_running_them(
    tmp_path: Path,
) -> None:
    results = doctor.run_checks(_site_packages(tmp_path), [_passes], [check_go])
    assert [(c.name, c.result) for c in results] == [("python", "pass"), ("go", "skip")]
    skip = results[1]
    assert skip.ok and not skip.fix
    assert skip.detail.startswith("for lab and development use: needs a checkout")
    assert skip.as_dict()["result"] == "skip"


def test_a_check_that_raises_is_a_failure_naming_the_exception() -> None:
    (result,) = doctor.run_checks(ROOT, [], [check_go])
    assert (result.name, result.result) == ("go", "fail")
    assert result.detail == "check raised FileNotFoundError: lab/image"
    assert result.fix


def test_the_collections_fix_names_the_shipped_requirements_or_the_bundle_extra(
    tmp_path: Path,
) -> None:
    requirements = tmp_path / "a dir" / "requirements.yml"
    galaxy, pip = doctor.collections_fix(requirements).split(doctor.FIX_OR)
    argv = shlex.split(galaxy)
    assert Path(argv[0]).name == "ansible-galaxy"
    assert argv[1:] == ["collection", "install", "-r", str(requirements)]
    assert shlex.split(pip)[-2:] == ["install", "gpufleet[bundle]"]
    assert doctor.collections_fix(None) == pip


def test_the_declared_ansible_core_requirement_is_read_from_the_metadata() -> None:
    declared = doctor.package_requirement("ansible-core")
    assert declared.startswith("ansible-core") and ">=2.17" in declared
    assert doctor.package_requirement("no-such-dependency") == "no-such-dependency"


def test_the_table_prints_brackets_and_counts_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        doctor.Check("python", True, "Python 3.11"),
        doctor.Check("collection kubernetes.core", False, "not found", "pip install 'g[bundle]'"),
        doctor.Check("go", True, "for lab and development use", skipped=True),
    ]
    monkeypatch.setattr(doctor, "run_checks", lambda: rows)
    result = CliRunner().invoke(main, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "pip install 'g[bundle]'" in result.output
    assert "1 passed, 1 failed, 1 skipped" in result.output
