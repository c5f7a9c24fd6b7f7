"""Filters that build ResourceClaimTemplates for NVIDIA GPUs (module_utils claim_templates)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: claim_templates
short_description: ResourceClaimTemplates for NVIDIA GPUs from a list of small descriptions
version_added: 0.1.0
description:
  - Builds one ResourceClaimTemplate per item with the collection's claim template builders,
    in the C(resource.k8s.io) version the DRA version model says the Kubernetes release serves
    (C(v1) from 1.34, C(v1beta2) on 1.33, C(v1beta1) on 1.32), and checks each result.
  - 'Item kinds: C(mig-slice) (C(profile), C(gpu_model)), C(mig-with-memory) (C(min_memory),
    C(gpu_model), C(prefer_smallest)), C(gpu-with-memory) (C(min_memory_gib)),
    C(shared-gpu) (C(strategy) TimeSlicing or MPS, C(interval), C(mps_active_thread_percentage),
    C(mps_pinned_memory_limit)), C(gpu-pair-same-product) (C(count)); every kind takes C(name),
    C(namespace), C(labels), C(request_name), C(count) where it applies.'
  - Fails naming the item (by index and name) and the bad key, value and fix.
options:
  _input:
    description: List of items, each a dict with at least C(kind).
    type: list
    elements: dict
    required: true
  kubernetes_version:
    description: Kubernetes release, for example C(1.37.2).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Claims | Build the templates
  ansible.builtin.set_fact:
    claim_templates_objects: >-
      {{ [{'kind': 'mig-slice', 'profile': '1g.18gb', 'namespace': 'ml'}]
         | gpufleet.cluster.claim_templates('1.37.2') }}
"""

RETURN = r"""
_value:
  description: ResourceClaimTemplate objects, one per item, in item order.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError


def claim_templates(items, kubernetes_version):
    """Return the list of ResourceClaimTemplate dicts described in RETURN.

    Raises AnsibleFilterError naming the item for a bad item, and for a built template the
    checker finds an error in (which would be a defect of the builders).
    """
    from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import check as cchk
    from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
        metadata as claims_metadata,
    )
    from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import problems as cprob
    from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core

    if not isinstance(items, list):
        raise AnsibleFilterError(
            f"claim_templates_items={items!r} is not a list; fix: give a list of "
            "{kind: mig-slice|mig-with-memory|gpu-with-memory|shared-gpu|gpu-pair-same-product, "
            "...}"
        )
    out = []
    for index, item in enumerate(items):
        where = f"claim_templates_items[{index}]"
        if not isinstance(item, dict) or not item.get("kind"):
            raise AnsibleFilterError(
                f"{where}={item!r} has no kind; fix: set kind to one of {', '.join(ct.KINDS)}"
            )
        if item.get("name"):
            where += f" (name {item['name']})"
        params = {k: v for k, v in item.items() if k != "kind" and v is not None}
        try:
            obj = ct.build(item["kind"], params, kubernetes_version=str(kubernetes_version))
        except (claims_metadata.ClaimTemplateError, dra_core.VersionModelError) as exc:
            raise AnsibleFilterError(f"{where}: {exc}") from exc
        errors = [p for p in cchk.check_claim_spec(obj) if p.severity == cprob.ERROR]
        if errors:
            raise AnsibleFilterError(f"{where}: built template fails its check: {errors[0]}")
        out.append(obj)
    return out


def claim_api_version(kubernetes_version):
    """The resource.k8s.io group-version for ResourceClaimTemplates at a release, and the
    --runtime-config entry it needs (empty when on by default): {api_version, runtime_config}."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import api as capi
    from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
        metadata as claims_metadata,
    )
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core

    try:
        choice = capi.api_choice_for(str(kubernetes_version))
    except (claims_metadata.ClaimTemplateError, dra_core.VersionModelError) as exc:
        raise AnsibleFilterError(f"claim_templates_kubernetes_version: {exc}") from exc
    return {"api_version": choice.api_version, "runtime_config": choice.runtime_config or ""}


class FilterModule:
    """ResourceClaimTemplate filters."""

    def filters(self):
        return {"claim_templates": claim_templates, "claim_api_version": claim_api_version}
