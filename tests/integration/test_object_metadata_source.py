"""The ObjectMeta fields the listing keeps of an object kept whole
(``cluster.listing.OBJECT_METADATA``) against apimachinery's ``ObjectMeta`` of each pinned
release (``pkg/apis/meta/v1/types.go`` of k8s.io/apimachinery, which lies beside the
release's k8s.io/kubernetes module in the Go module cache at ``v0.<minor>.<patch>``): they
are its JSON fields but ``managedFields``, which the listing drops. A field added to
ObjectMeta upstream fails this test until the listing keeps it (or names it dropped).
The releases are those the test command builds (``ci: true``); one whose module is missing
fails, naming the command that unpacks it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing

from gpufleet.build import release_facts as rf

pytestmark = pytest.mark.integration

RELEASES = [r for r in rf.load_fact_releases() if r.ci]
DROPPED = {"managedFields"}
_FIELD = re.compile(r'^\s*[A-Z]\w*\s+[^/`]+`json:"([A-Za-z]+)')


def object_meta_fields(types_go: str) -> set[str]:
    """The JSON names of the fields of ``type ObjectMeta struct`` (commented-out
    fields, such as a tombstone, are not fields)."""
    body = types_go.split("type ObjectMeta struct {", 1)[1].split("\n}", 1)[0]
    return {m.group(1) for line in body.splitlines() if (m := _FIELD.match(line))}


def test_the_reader_takes_fields_and_not_comments() -> None:
    text = (
        "type ObjectMeta struct {\n"
        '\tName string `json:"name,omitempty" protobuf:"bytes,1,opt,name=name"`\n'
        '\t// ClusterName string `json:"clusterName,omitempty"`\n'
        '\tLabels map[string]string `json:"labels,omitempty"`\n'
        "}\n"
        'type Other struct {\n\tX string `json:"x"`\n}\n'
    )
    assert object_meta_fields(text) == {"name", "labels"}


@pytest.mark.parametrize("release", RELEASES, ids=[r.version for r in RELEASES])
def test_the_listing_keeps_every_object_meta_field_but_managed_fields(
    release: rf.FactRelease,
) -> None:
    kubernetes = rf.module_dir(release.version)
    apimachinery = kubernetes.parent / f"apimachinery@v0.{release.version.split('.', 1)[1]}"
    types_go = Path(apimachinery, "pkg", "apis", "meta", "v1", "types.go")
    assert types_go.is_file(), (
        f"k8s.io/apimachinery of {release.version} is not unpacked: build its featuredump "
        f"with `python -m gpufleet.build.release_facts build --kubernetes {release.version}`"
    )
    upstream = object_meta_fields(types_go.read_text(encoding="utf-8"))
    assert upstream >= DROPPED
    assert set(listing.OBJECT_METADATA) == upstream - DROPPED
