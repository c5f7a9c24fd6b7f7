"""The execution environment definition (``execution-environment.yml``, ansible-builder
schema v3) and the collection's ``meta/execution-environment.yml``, checked through the
build context that ``ansible-builder create`` writes and the introspection script it puts
there (the script the image build runs over the installed collections)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from gpufleet.build import execution_environment as ee

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
#: Top-level imports of plugins/ that a distribution other than ansible-core provides, and
#: the distribution the execution environment gets it from: lark comes with cel-python
#: (which parses CEL with it), urllib3 with kubernetes, jinja2 with ansible-core; tomli and
#: toml are fallbacks for hosts older than Python 3.11 (tomllib), not needed in the image.
IMPORT_DIST = {
    "kubernetes": "kubernetes",
    "yaml": "pyyaml",
    "celpy": "cel-python",
    "lark": "cel-python",
    "urllib3": "kubernetes",
    "msgspec": "msgspec",
    "jinja2": None,
    "tomli": None,
    "toml": None,
}


def tool(name: str) -> str:
    """The tool next to this Python (the project's virtualenv), else on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    assert found, f"{name} is not installed; fix: pip install -e '.[test]' -c constraints.txt"
    return found


def pins() -> dict[str, str]:
    out = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            out[name.strip().lower()] = version.strip()
    return out


def third_party_imports() -> set[str]:
    """Top-level names imported by plugins/ that are neither the standard library nor
    Ansible's."""
    names: set[str] = set()
    for path in (REPO / "plugins").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    local = {p.stem for p in (REPO / "plugins" / "module_utils").rglob("*.py")}
    return {
        n
        for n in names
        if n not in sys.stdlib_module_names
        and n not in ("ansible", "ansible_collections")
        and n not in local
    }


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The collection archive, built as a user builds it, and the build context
    ``ansible-builder create`` writes from the repository's definition
    (``gpufleet.build.execution_environment.create``)."""
    work = tmp_path_factory.mktemp("ee")
    subprocess.run(
        [tool("ansible-galaxy"), "collection", "build", "--output-path", str(work), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        ctx = ee.create(work, work, builder=tool("ansible-builder"))
    except subprocess.CalledProcessError as err:
        pytest.fail(f"ansible-builder create failed: {err.stdout}{err.stderr}")
    (archive,) = work.glob("gpufleet-cluster-*.tar.gz")
    assert archive.name == ee.archive_name()
    return {"work": work, "ctx": ctx, "archive": archive}


def test_containerfile_installs_the_pinned_ansible_and_the_collection(context) -> None:
    containerfile = (context["ctx"] / "Containerfile").read_text()
    p = pins()
    core, run = p["ansible-core"], p["ansible-runner"]
    refs = f'ARG ANSIBLE_INSTALL_REFS="ansible-core=={core} ansible-runner=={run}"'
    assert refs in containerfile
    assert "ansible-galaxy collection install" in containerfile
    introspect = "introspect.py introspect --user-pip=requirements.txt --user-bindep=bindep.txt"
    assert introspect in containerfile
    assert "install -m 0755 linux-${arch}/helm /usr/local/bin/helm" in containerfile
    # the archive the galaxy stage installs is the one `ansible-galaxy collection build` wrote
    copied = context["ctx"] / "_build" / "collection" / context["archive"].name
    assert copied.read_bytes() == context["archive"].read_bytes()


def test_galaxy_requirements_are_the_collection_and_its_dependencies(context) -> None:
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    reqs = yaml.safe_load((context["ctx"] / "_build" / "requirements.yml").read_text())
    by_name = {c["name"]: c for c in reqs["collections"]}
    own = f"collection/{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"
    assert by_name.pop(own) == {"name": own, "type": "file"}
    assert {n: c["version"] for n, c in by_name.items()} == galaxy["dependencies"]
    listed = yaml.safe_load((REPO / "requirements.yml").read_text())["collections"]
    assert {c["name"]: c["version"] for c in listed} == galaxy["dependencies"]


def test_python_requirements_cover_the_plugins_imports_with_pyprojects_ranges(context) -> None:
    reqs = {
        r.name.lower(): r
        for r in (
            Requirement(line)
            for line in (context["ctx"] / "_build" / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        )
    }
    imports = third_party_imports()
    assert imports, "no third-party import found in plugins/"
    assert imports <= set(IMPORT_DIST), f"map these imports to a distribution: {imports}"
    assert {IMPORT_DIST[n] for n in imports} - {None} <= set(reqs), imports
    import tomllib

    declared = {
        Requirement(d).name.lower(): Requirement(d)
        for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    for name, req in reqs.items():
        assert name in declared, f"{name} is not a dependency in pyproject.toml"
        assert req.specifier == declared[name].specifier, name


def test_introspection_reads_the_installed_collections_requirements(context) -> None:
    """The builder stage's own script over the collection as ansible-galaxy installs it
    from the archive: it finds meta/execution-environment.yml and the files it names."""
    installed = context["work"] / "installed"
    subprocess.run(
        [
            tool("ansible-galaxy"),
            "collection",
            "install",
            "--offline",
            "--no-deps",
            "-p",
            str(installed),
            str(context["archive"]),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "False"},
    )
    with tarfile.open(context["archive"]) as tar:
        assert "meta/execution-environment.yml" in tar.getnames()
    proc = subprocess.run(
        [
            sys.executable,
            str(context["ctx"] / "_build" / "scripts" / "introspect.py"),
            "introspect",
            str(installed),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load(proc.stdout)
    # each line names the collection it came from; PyYAML is left out (ansible-core has it)
    ours = " # from collection gpufleet.cluster"
    python = [" ".join(x.split()) for x in doc["python"]]
    declared = [
        " ".join(line.split())
        for line in (REPO / "meta" / "ee-requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert "kubernetes>=30,<38" in declared, declared
    expected = sorted(
        f"{req}{ours}" for req in declared if Requirement(req).name.lower() != "pyyaml"
    )
    assert sorted(python) == expected
    system = [" ".join(x.split()) for x in doc["system"]]
    assert f"openssh-clients [platform:rpm]{ours}" in system
