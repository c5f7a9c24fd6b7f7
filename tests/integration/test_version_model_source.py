"""The committed per-release facts regenerated from Kubernetes itself.

For every release under ``release_facts`` in ``gpufleet/build/releases.yaml`` whose
``gpufleet-featuredump`` binary is cached (``scripts/setup`` builds those marked
``ci: true``; ``python -m gpufleet.build.release_facts build`` builds the rest), run it and
compare its normalised output with the committed ``plugins/module_utils/dra/releases/v1_*.py``:
every gate (versioned specs, dependencies, the components that register it), every
resource.k8s.io version and the kubeadm configuration API. The release's own reference
list of feature gates (``test/compatibility_lifecycle/reference/versioned_feature_list.yaml``,
from 1.33) is checked against the dump too. Each test fails listing every difference.

A release whose dump is not cached is skipped with the command that builds it; the model's
agreement with every committed release is checked without any build in
``tests/unit/dra/test_release_data.py``.
"""

from __future__ import annotations

import pytest

from gpufleet.build import release_facts as rf

pytestmark = pytest.mark.integration

RELEASES = rf.load_fact_releases()

#: Names that the reference list spells after the Go constant while the release registers
#: another string (pkg/features/kube_features.go: ``CPUCFSQuotaPeriod featuregate.Feature =
#: "CustomCPUCFSQuotaPeriod"``, ``RuntimeClassInImageCriAPI ... = "RuntimeClassInImageCriApi"``).
REFERENCE_LIST_CONSTANT_NAMES = {
    "CPUCFSQuotaPeriod": "CustomCPUCFSQuotaPeriod",
    "RuntimeClassInImageCriAPI": "RuntimeClassInImageCriApi",
}


def _cached(release: rf.FactRelease) -> None:
    if not rf.dump_binary_path(release.version).is_file():
        pytest.skip(
            f"no featuredump cached for {release.version}: build it with "
            f"`python -m gpufleet.build.release_facts build --kubernetes {release.version}`"
        )


@pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])
def test_committed_facts_are_what_the_release_registers(release: rf.FactRelease) -> None:
    _cached(release)
    fresh = rf.run_dump(rf.dump_binary_path(release.version), release.version)
    committed = rf.read_data_module(rf.data_module_path(release.minor))
    problems = rf.diff_facts(committed, fresh)
    regenerate = rf.GENERATE_COMMAND.format(version=release.version)
    assert not problems, (
        f"{len(problems)} difference(s) between {rf.data_module_path(release.minor).name} and "
        f"Kubernetes {release.version}; regenerate with `{regenerate}`:\n  " + "\n  ".join(problems)
    )


#: Kubernetes ships its generated reference list of feature gates from 1.33.
WITH_REFERENCE_LIST = [r for r in RELEASES if r.minor >= 33]


@pytest.mark.parametrize(
    "release", WITH_REFERENCE_LIST, ids=[r.version for r in WITH_REFERENCE_LIST]
)
def test_reference_list_of_the_release_is_covered(release: rf.FactRelease) -> None:
    _cached(release)
    names = rf.reference_list_names(rf.module_dir(release.version))
    assert names is not None, f"Kubernetes {release.version} ships no {rf.REFERENCE_LIST}"
    fresh = rf.run_dump(rf.dump_binary_path(release.version), release.version)
    gaps = rf.reference_list_gaps(fresh, names)
    unexplained = [g for g in gaps if REFERENCE_LIST_CONSTANT_NAMES.get(g) not in fresh["gates"]]
    assert not unexplained, (
        f"{release.version}: its {rf.REFERENCE_LIST} names gates the dump does not register: "
        + ", ".join(unexplained)
    )
