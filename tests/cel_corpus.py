"""The CEL selector corpus of the differential tests, and Kubernetes' recorded verdicts.

``corpus()`` is every expression of ``tests/data/cel_corpus.yaml`` plus every expression
the project's builders write (``claims template`` of every kind, the MIG profile of every
known GPU model, memory minimums, the selectors ``suggest_cel`` proposes), deduplicated
in order. ``devices()`` are the devices of ``tests/data/cel_devices.yaml``.

``python -m tests.cel_corpus record`` runs ``gpufleet-celcheck`` of every release under
``celcheck`` in gpufleet/build/releases.yaml on the corpus and writes what it gave to
``tests/data/cel_verdicts.json``: the expectations of the unit test that holds the Python
environment to Kubernetes without Go binaries. The default release (``kubernetes.default``
in the releases file) is written in full (``{expression: {"compile": verdict, "results":
[result or error kind per device]}}``), each other one only where it differs from its
neighbour nearer the default (``"base"``: the next newer one for an older release, the next
older one for a newer one, such as a pre-release); ``recorded_verdicts()`` gives every
release in full.
``compare()`` lists the disagreements of the Python environment with such verdicts.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import verdicts as dra_cel
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import cel as claim_cel
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp

from gpufleet.build import celcheck, release_pins

DATA = Path(__file__).resolve().parent / "data"
CORPUS_FILE = DATA / "cel_corpus.yaml"
DEVICES_FILE = DATA / "cel_devices.yaml"
VERDICTS_FILE = DATA / "cel_verdicts.json"
RECORD_COMMAND = "python -m tests.cel_corpus record"


def _selectors(obj: Any) -> list[str]:
    """Every ``cel.expression`` inside a built object."""
    out: list[str] = []
    if isinstance(obj, Mapping):
        cel = obj.get("cel")
        if isinstance(cel, Mapping) and isinstance(cel.get("expression"), str):
            out.append(cel["expression"])
        for value in obj.values():
            out.extend(_selectors(value))
    elif isinstance(obj, list):
        for value in obj:
            out.extend(_selectors(value))
    return out


def template_expressions() -> list[str]:
    """The selectors the project's builders write."""
    out: list[str] = []
    profiles = sorted({p.name for m in mp.MODELS.values() for p in m.profiles})
    for profile in profiles:
        out.extend(_selectors(ct.build("mig-slice", {"profile": profile})))
    for gib in (1, 10, 16, 40, 40.5, 80, 141, 143):
        out.extend(_selectors(ct.build("gpu-with-memory", {"min_memory_gib": gib})))
    for params in ({}, {"strategy": "MPS"}, {"strategy": "TimeSlicing", "interval": "Long"}):
        out.extend(_selectors(ct.build("shared-gpu", params)))
    out.extend(_selectors(ct.build("gpu-pair-same-product", {"count": 2})))
    out.append(claim_cel.MEMORY_EXAMPLE)
    for made_up in (
        {"memoryGB": ">=40"},
        {"memory": {"min": 80}},
        {"productName": "NVIDIA H200"},
        {"multiprocessors": ">=16"},
        {"profile": ["1g.18gb", "2g.35gb"]},
        {"mig": True},
        {"cores": 4},
        {"memoryMiB": "<=20480"},
    ):
        out.append(claim_cel.suggest_cel(made_up))
    return out


def corpus() -> list[str]:
    groups = yaml.safe_load(CORPUS_FILE.read_text(encoding="utf-8"))
    written = [e for g in groups for e in g["expressions"]]
    return list(dict.fromkeys([*written, *template_expressions()]))


def devices() -> list[dict[str, Any]]:
    return yaml.safe_load(DEVICES_FILE.read_text(encoding="utf-8"))


def _cell(result: Mapping[str, Any]) -> Any:
    """One device's outcome as recorded: true/false, or the error kind."""
    return result["result"] if result.get("error") is None else result["error"]


def go_verdicts(output: Mapping[str, Any]) -> dict[str, Any]:
    """celcheck's output as ``{expression: {"compile": verdict, "results": [...]}}``."""
    return {
        e["expression"]: {
            "compile": e["compile"]["verdict"],
            "results": [_cell(r) for r in e["results"]],
        }
        for e in output["expressions"]
    }


def run_release(release: celcheck.CelRelease, *, functions: bool = False) -> dict[str, Any]:
    """celcheck of ``release`` on the corpus (its binary must be cached)."""
    return celcheck.run(
        celcheck.binary_path(release.version),
        corpus(),
        devices(),
        celcheck.features_for(release.version),
        functions=functions,
    )


def compare(release: str, verdicts: Mapping[str, Any]) -> tuple[list[str], dict[str, int]]:
    """The disagreements of ``cel.verdicts`` with ``verdicts`` of ``release`` (one line each:
    expression, device, Kubernetes' answer, Python's) and counts: ``judged``,
    ``cannot_judge`` (expressions), ``cases`` (judged expression x device)."""
    features = celcheck.features_for(release)
    lists = tuple(int(x) for x in release.split(".")[:2]) >= (1, 37) or features.get(
        "listTypeAttributes", False
    )
    devs = devices()
    lines: list[str] = []
    counts = {"judged": 0, "cannot_judge": 0, "cases": 0}
    for expression, want in verdicts.items():
        verdict = dra_cel.judge(expression, features, release)
        if not verdict.judged:
            counts["cannot_judge"] += 1
            continue
        counts["judged"] += 1
        if verdict.verdict != want["compile"]:
            lines.append(
                f"{expression!r}: Kubernetes {release} compiles it {want['compile']}, "
                f"Python {verdict.verdict} ({verdict.message})"
            )
            continue
        if verdict.verdict != dra_cel.OK:
            continue  # refused at compile time: no device is evaluated
        for device, cell in zip(devs, want["results"], strict=True):
            counts["cases"] += 1
            got = dra_cel.evaluate(expression, device["driver"], device, features, lists, release)
            mine = got.result if got.error is None else got.error
            if not got.judged or mine != cell:
                lines.append(
                    f"{expression!r} on {device['name']}: Kubernetes {release} {cell!r}, "
                    f"Python {mine!r} ({got.message})"
                )
    return lines, counts


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("-")[0].split("."))


def record() -> None:
    recorded = {}
    for release in celcheck.load_celcheck_releases():
        path = celcheck.binary_path(release.version)
        if not path.is_file():
            sys.exit(
                f"no celcheck for {release.version} at {path}: "
                + celcheck.BUILD_COMMAND.format(version=release.version)
            )
        recorded[release.version] = go_verdicts(run_release(release))
    order = sorted(recorded, key=_version_key, reverse=True)
    default = release_pins.load_releases().default
    full = default if default in recorded else order[0]
    document: dict[str, Any] = {full: {"base": None, "verdicts": recorded[full]}}
    at = order.index(full)
    # older releases chain down from the full one, newer ones up from it
    pairs = [*itertools.pairwise(order[at:]), *itertools.pairwise(order[at::-1])]
    for base, version in pairs:
        differ = {e: v for e, v in recorded[version].items() if recorded[base].get(e) != v}
        document[version] = {"base": base, "verdicts": differ}
        print(f"{version}: {len(differ)} verdict(s) differ from {base}")
    VERDICTS_FILE.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"{VERDICTS_FILE}: {', '.join(order)}; {len(corpus())} expressions")


def recorded_verdicts() -> dict[str, Any]:
    """``{release: {expression: {"compile": ..., "results": [...]}}}`` for every recorded
    release, in full (an older release's entries laid over its base release's)."""
    document = json.loads(VERDICTS_FILE.read_text(encoding="utf-8"))
    out: dict[str, Any] = {}

    def full(version: str) -> dict[str, Any]:
        if version not in out:
            entry = document[version]
            base = full(entry["base"]) if entry["base"] else {}
            out[version] = {**base, **entry["verdicts"]}
        return out[version]

    for version in document:
        full(version)
    return out


if __name__ == "__main__" and sys.argv[1:] == ["record"]:
    record()
elif __name__ == "__main__":
    sys.exit(f"usage: {RECORD_COMMAND}")


__all__: Sequence[str] = (
    "compare",
    "corpus",
    "devices",
    "go_verdicts",
    "record",
    "recorded_verdicts",
    "run_release",
    "template_expressions",
)
