"""The smoke test's claim templates and pods (``plugins/module_utils/validate/smoke.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli

from tests.unit.validate.listed_cluster import UUID1, UUID2, healthy
from tests.unit.validate_objects import (
    gpu_device,
    mig_device,
    resource_slice,
)

pytestmark = pytest.mark.unit


def test_smoke_builds_one_template_and_pod_per_profile() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    opts = {"smoke_profiles": ["1g.18gb"], "smoke_image": "img:1", "smoke_command": ["x"]}
    templates = vs.smoke_templates(opts, "ns-1", "1.37.2")
    assert [t["metadata"]["name"] for t in templates] == ["smoke-gpu", "mig-1g-18gb"]
    assert {t["apiVersion"] for t in templates} == {"resource.k8s.io/v1"}
    pod = vs.smoke_pod(templates[1], opts)
    assert pod["metadata"]["namespace"] == "ns-1"
    assert pod["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "mig-1g-18gb"}
    ]
    (container,) = pod["spec"]["containers"]
    assert (container["image"], container["command"]) == ("img:1", ["x"])
    assert container["resources"] == {"claims": [{"name": "gpu"}]}
    assert pod["spec"]["restartPolicy"] == "Never"


def smoke_names(listing: vli.Listing, settings: vli.Settings, **opts: object) -> list[str]:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    published = vs.published_kinds(listing, settings)
    return [t["metadata"]["name"] for t in vs.smoke_templates(opts, "ns", "1.37.2", published)]


def test_smoke_asks_for_what_the_gpu_nodes_publish() -> None:
    listing, settings = healthy()
    assert smoke_names(listing, settings) == ["smoke-gpu"]
    # every GPU carved: no whole GPU is left, so the whole-GPU pod could never run
    listing.slices = [
        resource_slice("gpu-1", [mig_device(0, UUID1, "MIG-a", "1g.18gb")]),
        resource_slice("gpu-2", [mig_device(0, UUID2, "MIG-b", "2g.35gb")]),
    ]
    assert smoke_names(listing, settings) == ["mig-1g-18gb", "mig-2g-35gb"]
    # one node still has a whole GPU
    listing.slices[1] = resource_slice("gpu-2", [gpu_device(0, UUID2)])
    assert smoke_names(listing, settings) == ["smoke-gpu", "mig-1g-18gb"]


def test_smoke_adds_configured_profiles_and_ignores_other_drivers_and_nodes() -> None:
    listing, settings = healthy()
    listing.slices.append(resource_slice("cpu-node", [mig_device(0, "X", "MIG-x", "7g.141gb")]))
    listing.slices.append(
        resource_slice("gpu-1", [mig_device(1, "Y", "MIG-y", "4g.71gb")], driver="other.example")
    )
    settings.mig_layout = {"gpu-1": {"0": {"3g.71gb": 2}, "1": {"1g.18gb": 0}}}
    assert smoke_names(listing, settings) == ["smoke-gpu", "mig-3g-71gb"]
    assert smoke_names(listing, settings, smoke_profiles=["1g.35gb"]) == [
        "smoke-gpu",
        "mig-1g-35gb",
        "mig-3g-71gb",
    ]


def test_smoke_with_nothing_published_still_tries_a_whole_gpu() -> None:
    listing, settings = healthy()
    listing.slices = []
    assert smoke_names(listing, settings) == ["smoke-gpu"]


def test_explicit_smoke_templates_win() -> None:
    listing, settings = healthy()
    listing.slices = [resource_slice("gpu-1", [mig_device(0, UUID1, "MIG-a")])]
    wanted = [{"kind": "mig-slice", "profile": "1g.18gb", "name": "mine"}]
    assert smoke_names(listing, settings, smoke_templates=wanted) == ["mine"]
