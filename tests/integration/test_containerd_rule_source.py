"""The containerd rule for new kubelets (``dra/skew.py``: ``MIN_CONTAINERD_FOR_KUBELET``,
``CONTAINERD_RULE_SOURCE``) against the source of each release it covers.

gpufleet refuses containerd 1.7 for kubelets of 1.38 and says that upstream only warns:
the kubelet falls back to its own cgroup driver setting for a runtime without the CRI
RuntimeConfig call and counts ``kubelet_cri_losing_support``
(``cmd/kubelet/app/server.go``), and kubeadm's preflight returns a warning, not an error
(``cmd/kubeadm/app/preflight/checks.go``). When a release removes the fallback, or makes
kubeadm refuse, these tests fail: the rule's text must then say that upstream refuses.
Each pinned release of ``release_facts`` whose module source was unpacked by its
featuredump build is read; one that was not is skipped with the command that builds it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew

from gpufleet.build import release_facts as rf

pytestmark = pytest.mark.integration

COVERED = [
    r
    for r in rf.load_fact_releases()
    if any(r.minor >= minor for minor in dra_skew.MIN_CONTAINERD_FOR_KUBELET)
]


def _source(release: rf.FactRelease) -> Path:
    root = rf.module_dir(release.version)
    if not (root / "cmd" / "kubelet" / "app" / "server.go").is_file():
        pytest.skip(
            f"the source of {release.version} is not unpacked: build its featuredump with "
            f"`python -m gpufleet.build.release_facts build --kubernetes {release.version}`"
        )
    return root


def test_some_release_is_covered() -> None:
    assert COVERED, "no pinned release is covered by MIN_CONTAINERD_FOR_KUBELET"


@pytest.mark.parametrize("release", COVERED, ids=[r.version for r in COVERED])
def test_the_kubelet_still_falls_back_as_the_rule_says(release: rf.FactRelease) -> None:
    server = (_source(release) / "cmd" / "kubelet" / "app" / "server.go").read_text()
    fallback = re.search(r'CRILosingSupport\.WithLabelValues\("([0-9.]+)"\)', server)
    assert fallback, (
        f"the kubelet of {release.version} no longer falls back for runtimes without "
        "RuntimeConfig: CONTAINERD_RULE_SOURCE must say that upstream refuses them now"
    )
    assert "Falling back to using cgroupDriver from kubelet config" in server
    assert f'kubelet_cri_losing_support{{version="{fallback.group(1)}"}}' in (
        dra_skew.CONTAINERD_RULE_SOURCE
    )


@pytest.mark.parametrize("release", COVERED, ids=[r.version for r in COVERED])
def test_kubeadm_only_warns_as_the_rule_says(release: rf.FactRelease) -> None:
    checks = (_source(release) / "cmd" / "kubeadm" / "app" / "preflight" / "checks.go").read_text()
    start = checks.index("IsRuntimeConfigImplemented()")
    block = checks[start : checks.index("return warnings, errorList", start)]
    assert "warnings = append(warnings, err)" in block, (
        f"kubeadm {release.version} no longer only warns about a runtime without "
        "RuntimeConfig: CONTAINERD_RULE_SOURCE must say so"
    )
    assert "errorList = append" not in block
    assert "kubeadm's preflight warns" in dra_skew.CONTAINERD_RULE_SOURCE


def test_the_refusal_names_the_sources() -> None:
    problem = dra_skew.container_runtime_problem("containerd://1.7.35", "1.38.0-beta.0")
    assert problem is not None
    assert "cmd/kubelet/app/server.go" in problem and "containerd RELEASES.md" in problem
    assert dra_skew.container_runtime_problem("containerd://2.0.7", "1.38.0-beta.0") is None
    assert dra_skew.container_runtime_problem("containerd://1.7.35", "1.37.2") is None
