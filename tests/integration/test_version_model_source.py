"""The DRA version model checked against Kubernetes itself.

For every pinned Kubernetes release (``gpufleet/lab/releases.yaml``) whose
``gpufleet-featuredump`` binary is cached, run it and compare with
``plugins/module_utils/dra_versions.py``:

* every model gate's stage/default/locked at the release's minor, and whether the release
  registers it at all (removed / not yet introduced);
* every DRA gate the release registers is in the model;
* the versioned spec history up to the release's minor;
* the declared gate dependencies (from 1.35);
* the resource.k8s.io group-versions kube-apiserver serves, which are on by default, the
  kinds each serves, and the lifecycle removal of the beta versions;
* the kubeadm configuration API versions kubeadm registers.

Each test fails listing every disagreement. The dump binary is built from
``lab/go/featuredump`` inside the release's build module by ``lab/build-binaries``.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RELEASES_FILE = REPO / "gpufleet" / "lab" / "releases.yaml"
DUMP = "gpufleet-featuredump"
BUILD_HINT = "lab/build-binaries --kubernetes {version} --components gpufleet-featuredump"

# Kubernetes' featuregate prerelease strings (component-base/featuregate): GA is "".
STAGES = {"ALPHA": dv.ALPHA, "BETA": dv.BETA, "": dv.GA, "DEPRECATED": dv.DEPRECATED}


def _pinned_versions() -> list[str]:
    try:
        from gpufleet.lab.binaries import load_releases

        return [r.version for r in load_releases().releases]
    except ImportError:
        data = yaml.safe_load(RELEASES_FILE.read_text(encoding="utf-8"))
        return [str(r["version"]) for r in data["kubernetes"]["releases"]]


def _dump_path(version: str) -> Path:
    try:
        from gpufleet.lab.binaries import binary_path

        return Path(binary_path(DUMP, version))
    except ImportError:
        return Path.home() / ".cache" / "gpufleet" / "bin" / "kubernetes" / f"v{version}" / DUMP


@cache
def _dump(version: str) -> dict[str, Any]:
    path = _dump_path(version)
    extra = ",".join(sorted(dv.GATES))
    proc = subprocess.run(
        [str(path), f"-gates={extra}"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, f"{path} exited {proc.returncode}: {proc.stderr[-2000:]}"
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def dumps() -> dict[str, dict[str, Any]]:
    """version -> dump, for every pinned release whose dump binary is cached."""
    versions = _pinned_versions()
    cached = [v for v in versions if _dump_path(v).is_file()]
    if not cached:
        pytest.skip(
            f"no {DUMP} binary is cached for any pinned release ({', '.join(versions)}); "
            f"build one with: {BUILD_HINT.format(version=versions[0] if versions else '1.37.2')}"
        )
    return {v: _dump(v) for v in cached}


def _minor(dump: dict[str, Any]) -> int:
    return int(dump["binaryVersion"].split(".")[1])


def _spec_at(specs: list[dict[str, Any]], minor: int) -> dict[str, Any] | None:
    """Kubernetes' featureSpecAtEmulationAndMinCompatVersion with the default minimum
    compatibility version (one minor below the binary)."""
    chosen = None
    for spec in specs:
        if int(spec["version"].split(".")[1]) > minor:
            continue
        mcv = spec.get("minCompatibilityVersion")
        if mcv and minor - 1 < int(mcv.split(".")[1]):
            continue
        chosen = spec
    return chosen


def _report(problems: list[str]) -> None:
    if problems:
        pytest.fail(
            f"{len(problems)} disagreement(s) between the version model and Kubernetes:\n  "
            + "\n  ".join(problems)
        )


def test_dump_is_the_pinned_release(dumps: dict[str, dict[str, Any]]) -> None:
    problems = []
    for version, dump in dumps.items():
        if dump["kubernetesModuleVersion"] != "v" + version:
            problems.append(f"{version}: dump built against {dump['kubernetesModuleVersion']}")
        if dump["binaryVersion"] != ".".join(version.split(".")[:2]):
            problems.append(f"{version}: binary version {dump['binaryVersion']}")
    _report(problems)


def test_gate_states_match_source(dumps: dict[str, dict[str, Any]]) -> None:
    problems = []
    for version, dump in dumps.items():
        minor = _minor(dump)
        registered = dump["gates"]
        for name in sorted(dv.GATES):
            state = dv.gate_state(name, version)
            if not state.known:
                if name in registered:
                    problems.append(
                        f"{version} {name}: model says {state.describe()}, but the release "
                        "registers it"
                    )
                continue
            if name not in registered:
                problems.append(
                    f"{version} {name}: model says {state.describe()}, but the release does not "
                    "register it"
                )
                continue
            spec = _spec_at(registered[name]["specs"], minor)
            if spec is None:
                problems.append(f"{version} {name}: no spec in force at 1.{minor} in the release")
                continue
            source = (STAGES.get(spec["preRelease"], spec["preRelease"]), spec["default"])
            source += (spec["lockToDefault"],)
            model = (state.stage, state.default, state.locked)
            if source != model:
                problems.append(
                    f"{version} {name}: model (stage, default, locked)={model}, source={source}"
                )
        for name in sorted(registered):
            if name not in dv.GATES:
                problems.append(
                    f"{version} {name}: registered by the release, unknown to the model"
                )
        for name in dump["unregisteredRequested"]:
            if dv.gate_state(name, version).known:
                problems.append(
                    f"{version} {name}: model says present, release does not register it"
                )
    _report(problems)


def test_spec_history_matches_source(dumps: dict[str, dict[str, Any]]) -> None:
    problems = []
    for version, dump in dumps.items():
        minor = _minor(dump)
        for name, gate in sorted(dump["gates"].items()):
            if name not in dv.GATES:
                continue
            source = [
                (
                    int(s["version"].split(".")[1]),
                    STAGES.get(s["preRelease"], s["preRelease"]),
                    s["default"],
                    s["lockToDefault"],
                    int(s["minCompatibilityVersion"].split(".")[1])
                    if s.get("minCompatibilityVersion")
                    else None,
                )
                for s in gate["specs"]
            ]
            model = []
            carried = None
            for spec in dv.GATES[name].specs:
                # Kubernetes carries MinCompatibilityVersion forward (featuregate.AddVersioned).
                carried = spec.min_compat if spec.min_compat is not None else carried
                if spec.since <= minor:
                    model.append((spec.since, spec.stage, spec.default, spec.locked, carried))
            if source != model:
                problems.append(f"{version} {name}: model specs {model} != source specs {source}")
    _report(problems)


def test_gate_dependencies_match_source(dumps: dict[str, dict[str, Any]]) -> None:
    problems = []
    for version, dump in dumps.items():
        minor = _minor(dump)
        declared = minor >= dv.DEPENDENCIES_DECLARED_SINCE
        if dump["dependenciesDeclared"] != declared:
            problems.append(
                f"{version}: model says dependencies declared={declared}, source says "
                f"{dump['dependenciesDeclared']}"
            )
        if not dump["dependenciesDeclared"]:
            continue
        for name, gate in sorted(dump["gates"].items()):
            if name not in dv.GATES:
                continue
            model = sorted(dv.GATES[name].depends_on)
            if model != gate["dependencies"]:
                problems.append(
                    f"{version} {name}: model depends_on {model}, source {gate['dependencies']}"
                )
    _report(problems)


def test_resource_api_versions_match_source(dumps: dict[str, dict[str, Any]]) -> None:
    problems = []
    for version, dump in dumps.items():
        source = {gv["version"]: gv for gv in dump["apiGroups"]["resource.k8s.io"] if gv["served"]}
        model = {a.version: a for a in dv.served_api_versions(version)}
        if sorted(source) != sorted(model):
            problems.append(
                f"{version}: served resource.k8s.io versions model {sorted(model)}, "
                f"source {sorted(source)}"
            )
        for ver in sorted(set(source) & set(model)):
            if source[ver]["enabledByDefault"] != model[ver].enabled_by_default:
                problems.append(
                    f"{version} resource.k8s.io/{ver}: model enabled_by_default="
                    f"{model[ver].enabled_by_default}, source {source[ver]['enabledByDefault']}"
                )
            if source[ver]["kinds"] != list(model[ver].kinds):
                problems.append(
                    f"{version} resource.k8s.io/{ver}: model kinds {list(model[ver].kinds)}, "
                    f"source {source[ver]['kinds']}"
                )
            if not source[ver]["registered"]:
                problems.append(
                    f"{version} resource.k8s.io/{ver}: served but not registered, "
                    "--runtime-config would reject it"
                )
            if source[ver]["resourceDefaults"]:
                problems.append(
                    f"{version} resource.k8s.io/{ver}: per-resource defaults "
                    f"{source[ver]['resourceDefaults']} are not modelled"
                )
        for gv in dump["apiGroups"]["resource.k8s.io"]:
            if gv["registered"] and not gv["served"]:
                problems.append(
                    f"{version} resource.k8s.io/{gv['version']}: registered, not served"
                )
    _report(problems)


def test_api_lifecycle_removals_match_source(dumps: dict[str, dict[str, Any]]) -> None:
    problems = []
    for version, dump in dumps.items():
        by_version = {gv["version"]: gv for gv in dump["apiGroups"]["resource.k8s.io"]}
        for ver, removal in sorted(dv.API_LIFECYCLE_REMOVED.items()):
            gv = by_version.get(ver)
            if gv is None or "DeviceClass" not in gv["lifecycle"]:
                continue
            removed = gv["lifecycle"]["DeviceClass"].get("removed")
            if removed != f"1.{removal}":
                problems.append(
                    f"{version} resource.k8s.io/{ver}: model removal 1.{removal}, "
                    f"lifecycle says {removed}"
                )
            served_after = [
                m
                for m in range(removal, dv.MAX_MINOR + 1)
                if ver in {a.version for a in dv.served_api_versions(f"1.{m}")}
            ]
            if served_after:
                problems.append(
                    f"resource.k8s.io/{ver}: model still serves it in "
                    f"{', '.join(f'1.{m}' for m in served_after)} after its removal"
                )
    _report(problems)


def test_kubeadm_api_versions_match_source(dumps: dict[str, dict[str, Any]]) -> None:
    problems = []
    for version, dump in dumps.items():
        model = sorted(v.rsplit("/", 1)[1] for v in dv.kubeadm_config_api(version).registered)
        if model != sorted(dump["kubeadmAPIVersions"]):
            problems.append(
                f"{version}: kubeadm API versions model {model}, "
                f"source {dump['kubeadmAPIVersions']}"
            )
    _report(problems)
