"""The metric series table (``dra/metric_series.py``) against the source of each pinned
release: the files the table cites are read with ``gpufleet.build.metric_source`` (options
literals and descriptors, constants of the same file resolved) and, per release and file,

* each row is defined, with its labels and kind, in exactly the minors it names, and
* no DRA series those files define is missing from the table (subsystems ``dra``,
  ``dynamic_resource_allocation``, ``resourceclaim_controller``; names with ``dra_`` or
  ``resourceclaim``), and
* no other Go file of k8s.io/kubernetes (``pkg/``, ``cmd/``) or of
  k8s.io/dynamic-resource-allocation defines a DRA series.

The k8s.io/kubernetes module of a release is the one its featuredump was built from
(``release_facts.module_dir``); the staging modules (``k8s.io/dynamic-resource-allocation``,
``k8s.io/apiserver``, ``k8s.io/component-base``) lie beside it in the Go module cache at
``v0.<minor>.<patch>``. A release whose source is not unpacked is skipped with the command
that unpacks it; scripts/setup builds the releases marked ``ci: true``, which never skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import metric_series as ms

from gpufleet.build import metric_source
from gpufleet.build import release_facts as rf

pytestmark = pytest.mark.integration

RELEASES = [r for r in rf.load_fact_releases() if r.minor in ms.known_minors()]
SOURCES = sorted({(s.module, s.path) for s in ms.SERIES})
DRA_SUBSYSTEM_PREFIXES = ("dra_", "dynamic_resource_allocation_", "resourceclaim_controller_")


def is_dra(name: str) -> bool:
    """A series the DRA monitoring must know of (by its subsystem or its name)."""
    return name.startswith(DRA_SUBSYSTEM_PREFIXES) or "dra_" in name or "resourceclaim" in name


def module_root(release: rf.FactRelease, module: str) -> Path:
    """The unpacked ``module`` of ``release``: k8s.io/kubernetes at ``v1.X.Y``, a staging
    module beside it at ``v0.X.Y``; skips when it is not there."""
    kubernetes = rf.module_dir(release.version)
    if not (kubernetes / "pkg" / "kubelet").is_dir():
        pytest.skip(
            f"the source of {release.version} is not unpacked: build its featuredump with "
            f"`python -m gpufleet.build.release_facts build --kubernetes {release.version}`"
        )
    if module == ms.KUBERNETES:
        return kubernetes
    staging = f"{module}@v0.{release.version.split('.', 1)[1]}"
    root = kubernetes.parent / staging.split("/", 1)[1]
    if not root.is_dir():
        pytest.skip(f"{staging} is not unpacked: `go mod download {staging}`")
    return root


def defined(release: rf.FactRelease, module: str, path: str) -> metric_source.Extraction:
    """What ``path`` of ``module`` defines in ``release``: nothing when the file is not
    there (a library file added or removed by a release)."""
    file = module_root(release, module) / path
    if not file.is_file():
        return metric_source.Extraction((), ())
    found = metric_source.extract_file(file)
    assert not found.unresolved, f"{file}: names the extractor cannot read: {found.unresolved}"
    return found


def test_the_table_knows_every_pinned_release_from_its_oldest() -> None:
    minors = [r.minor for r in rf.load_fact_releases()]
    assert (min(minors), max(minors)) == (ms.OLDEST_MINOR, ms.NEWEST_MINOR)
    assert len(RELEASES) == len(minors)


@pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])
@pytest.mark.parametrize("source", SOURCES, ids=["/".join(s).split("/", 1)[1] for s in SOURCES])
def test_the_cited_file_defines_exactly_the_rows_of_the_release(
    release: rf.FactRelease, source: tuple[str, str]
) -> None:
    module, path = source
    rows = [s for s in ms.SERIES if (s.module, s.path) == source]
    named = {s.name for s in rows}
    found = defined(release, module, path)
    actual = {(d.name, d.labels): d.kind for d in found.series if d.name in named or is_dra(d.name)}
    expected = {(s.name, s.labels): s.kind for s in rows if s.served_in(release.minor)}
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    assert not missing and not extra, (
        f"{module} {path} of {release.version}: rows the release does not define: "
        f"{missing}; series it defines that the table lacks for 1.{release.minor}: {extra}"
    )
    kinds = {k: (expected[k], v) for k, v in actual.items() if v is not None and v != expected[k]}
    assert not kinds, f"{release.version}: kind (table, source) differs: {kinds}"


def test_the_extractor_reads_a_release_it_has_not_been_tuned_on() -> None:
    """The extractor finds the series of a cited file in the newest unpacked release (the
    guard against a table and an extractor that agree on nothing)."""
    newest = max(RELEASES, key=lambda r: r.minor)
    names = defined(newest, ms.KUBERNETES, "pkg/kubelet/metrics/metrics.go").names()
    assert len(names) > 50, sorted(names)
    assert {"kubelet_pod_start_duration_seconds", "dra_operations_duration_seconds"} <= names


@pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])
def test_no_other_file_defines_a_dra_series(release: rf.FactRelease) -> None:
    """Every non-test Go file of k8s.io/kubernetes (``pkg/``, ``cmd/``) and of
    k8s.io/dynamic-resource-allocation: a DRA series defined outside the cited files (a new
    metrics file) fails, naming the file."""
    cited = set(SOURCES)
    outside = []
    for module in (ms.KUBERNETES, ms.DRA_LIBRARY):
        root = module_root(release, module)
        tops = ("pkg", "cmd") if module == ms.KUBERNETES else (".",)
        for file in sorted(f for top in tops for f in (root / top).rglob("*.go")):
            if file.name.endswith("_test.go"):
                continue
            text = file.read_text(encoding="utf-8", errors="replace")
            if "Opts{" not in text and "NewDesc(" not in text:
                continue
            path = file.relative_to(root).as_posix()
            names = {d.name for d in metric_source.extract(text).series if is_dra(d.name)}
            if names and (module, path) not in cited:
                outside.append(f"{module} {path}: {sorted(names)}")
    assert outside == [], f"{release.version}: DRA series outside the table's files: {outside}"
