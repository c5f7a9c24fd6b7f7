"""The smoke test's claim templates and pods (``plugins/module_utils/validate/smoke.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    Check,
    finish,
)

from tests.unit import dynamic_mig_slices as dms
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


# ------------------------------------------------------------------ dynamic MIG


def dynamic_settings() -> vli.Settings:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc

    return vli.Settings(
        driver=ddc.NVIDIA_DRIVER, device_classes=[], gpu_nodes=[dms.H200_NODE, dms.B200_NODE]
    )


def dynamic_templates(slices: list) -> list[dict]:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    listing, settings = vli.Listing(slices=slices), dynamic_settings()
    return vs.smoke_templates(
        {},
        "ns",
        "1.37.2",
        vs.published_kinds(listing, settings),
        vs.dynamic_profiles(listing, settings),
    )


def test_a_dynamic_mig_node_gets_a_claim_for_its_models_smallest_profile_not_a_whole_gpu() -> None:
    (t,) = dynamic_templates(dms.slices(dms.H200_NODE))
    assert t["metadata"]["name"] == "dynamic-mig-1g-18gb"
    (request,) = t["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert request["exactly"]["selectors"] == [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"}}
    ]
    # one per model: the B200's smallest profile is 1g.23gb
    names = [t["metadata"]["name"] for t in dynamic_templates(dms.slices())]
    assert names == ["dynamic-mig-1g-18gb", "dynamic-mig-1g-23gb"]


def test_a_static_node_beside_a_dynamic_one_keeps_its_whole_gpu_smoke() -> None:
    slices = [*dms.slices(dms.H200_NODE), resource_slice(dms.B200_NODE, [gpu_device(0, UUID2)])]
    names = [t["metadata"]["name"] for t in dynamic_templates(slices)]
    assert names == ["smoke-gpu", "dynamic-mig-1g-18gb"]


def test_the_smallest_profile_prefers_the_one_without_extra_engines() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    assert vs.smallest_profile(mprof.model("NVIDIA H200")) == "1g.18gb"
    assert vs.smallest_profile(mprof.model("NVIDIA A100-SXM4-40GB")) == "1g.5gb"


def smoke_check(status: str = "pass") -> Check:
    c = Check("smoke.dynamic-mig-1g-18gb", "a pod gets a device", data={})
    c.data["dynamic_mig_node"] = dms.H200_NODE
    if status == "fail":
        c.problem("pod", "fail", "pod phase Failed")
    return finish(c, "claim allocated and reserved, pod Succeeded on h200-node")


def test_a_gpu_instance_left_after_the_smoke_fails_the_dynamic_smoke_check() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    leftover = Check("nodes.dynamic-mig-leftover-gi", "no leftover GPU instance")
    leftover.problem(dms.H200_NODE, "fail", "GPU 0: GPU instance 7 is owned by no claim")
    leftover.problem("other-node", "fail", "GPU 0: GPU instance 3 is owned by no claim")
    finish(leftover, "")
    leftover.fix = "destroy it"
    c, static = smoke_check(), Check("smoke.smoke-gpu", "a pod gets a device", "pass")
    vs.fold_leftover([c, static], leftover, read_after=True)
    assert c.status == "fail"
    assert [(p.subject, p.message) for p in c.problems] == [
        (dms.H200_NODE, "after the smoke pod ended: GPU 0: GPU instance 7 is owned by no claim")
    ]
    assert c.summary.startswith("h200-node: after the smoke pod ended: GPU 0: GPU instance 7")
    assert "destroy it" in c.fix
    assert (static.status, static.problems) == ("pass", [])


def test_no_gpu_instance_left_after_the_smoke_keeps_it_passing_with_the_evidence() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    leftover = finish(Check("nodes.dynamic-mig-leftover-gi", "no leftover GPU instance"), "ok")
    c = smoke_check()
    vs.fold_leftover([c], leftover, read_after=True)
    assert (c.status, c.summary) == (
        "pass",
        "claim allocated and reserved, pod Succeeded on h200-node",
    )
    assert c.evidence[-1].detail == "every GPU instance is owned by a claim; the smoke's is gone"
    assert "read after the smoke" in c.evidence[-1].source


@pytest.mark.parametrize(
    ("leftover", "read_after", "why"),
    [
        (None, True, "check nodes.dynamic-mig-leftover-gi did not run"),
        (
            Check("nodes.dynamic-mig-leftover-gi", "t", "skip", reason="no GPU facts"),
            True,
            "check nodes.dynamic-mig-leftover-gi skipped: no GPU facts",
        ),
        (
            Check("nodes.dynamic-mig-leftover-gi", "t", "pass"),
            False,
            "the GPU facts were read before the smoke (run playbooks/validate.yml)",
        ),
    ],
)
def test_gpu_instances_not_compared_after_the_smoke_fail_saying_why(
    leftover: Check | None, read_after: bool, why: str
) -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import smoke as vs

    c = smoke_check()
    vs.fold_leftover([c], leftover, read_after=read_after)
    assert c.status == "fail"
    assert (
        c.problems[-1].message == f"GPU instances on h200-node not compared after the smoke: {why}"
    )
