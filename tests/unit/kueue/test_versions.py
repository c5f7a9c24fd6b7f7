"""The Kueue version table (plugins/module_utils/kueue/versions.py) against the source of
each release it lists, read from the Go module cache (gpufleet/build/kueue_facts.py), and
the table's own lookups."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import versions as kv

from gpufleet.build import kueue_facts
from gpufleet.build.release_pins import load_releases

pytestmark = pytest.mark.unit


def _module_dir(version: str) -> Path:
    cache = os.environ.get("GOMODCACHE") or str(
        Path(os.environ.get("GOPATH") or Path.home() / "go") / "pkg" / "mod"
    )
    return Path(cache) / "sigs.k8s.io" / f"kueue@v{version}"


def _source(version: str) -> Path:
    path = _module_dir(version)
    if not (path / "pkg" / "features" / "kube_features.go").is_file():
        pytest.skip(
            f"sigs.k8s.io/kueue@v{version} is not in the Go module cache "
            "(lab/build-binaries --tools kueue fetches it)"
        )
    return path


@pytest.mark.parametrize("version", kv.supported_versions())
def test_dra_gates_match_the_release_source(version: str) -> None:
    row = kv.kueue_release(version)
    facts = kueue_facts.dra_gates(_source(version), version)
    assert [(g.name, g.stage, g.default, g.since) for g in facts] == sorted(
        (g.name, g.stage, g.default, g.since) for g in row.dra_gates
    )
    assert row.quota_gate in {g.name for g in facts}


@pytest.mark.parametrize("version", kv.supported_versions())
def test_mapping_field_and_apis_match_the_release_source(version: str) -> None:
    row = kv.kueue_release(version)
    source = _source(version)
    assert kueue_facts.mapping_field(source, row.config_api) == (
        row.mapping_field,
        row.mapping_keys,
    )
    storage = kueue_facts.crd_storage_versions(source)
    for kind in ("ClusterQueue", "LocalQueue", "ResourceFlavor", "Cohort", "WorkloadPriorityClass"):
        assert storage[kind] == row.kueue_api, kind
    assert kueue_facts.resource_api(source) == row.resource_api


def test_the_pinned_lab_version_is_in_the_table() -> None:
    pinned = load_releases().tool("kueue").version
    assert kv.kueue_release(pinned).version == pinned


def test_unknown_version_names_the_known_ones() -> None:
    with pytest.raises(kv.KueueVersionError) as err:
        kv.kueue_release("0.9.0")
    assert "kueue_version='0.9.0'" in str(err.value)
    assert "0.17.0" in str(err.value)


def test_feature_gates_arg_turns_the_quota_gate_on_and_refuses_unknown_gates() -> None:
    row = kv.kueue_release("v0.17.0")
    assert row.feature_gates_arg() == "DynamicResourceAllocation=true"
    assert (
        row.feature_gates_arg({"DRAExtendedResources": True})
        == "DRAExtendedResources=true,DynamicResourceAllocation=true"
    )
    with pytest.raises(kv.KueueVersionError, match="no DRA feature gate DRAFooBar"):
        row.feature_gates_arg({"DRAFooBar": True})


def test_facts_reader_finds_no_mapping_in_an_api_without_the_field(tmp_path: Path) -> None:
    api = tmp_path / "apis" / "config" / "v1beta1"
    api.mkdir(parents=True)
    (api / "configuration_types.go").write_text(
        'type Configuration struct {\n\tResources *Resources `json:"resources,omitempty"`\n}\n'
        "type Resources struct {\n\tExcludeResourcePrefixes []string "
        '`json:"excludeResourcePrefixes,omitempty"`\n}\n'
    )
    assert kueue_facts.mapping_field(tmp_path, "config.kueue.x-k8s.io/v1beta1") == ("", ())
