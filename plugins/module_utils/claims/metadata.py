# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The bounds and the object metadata of ResourceClaimTemplates: names, labels, device
counts, memory sizes and MIG profile names, for the builders and the checker of
``claims.templates``.

Name and label rules are Kubernetes' own (``k8s.io/apimachinery/pkg/util/validation``:
``IsDNS1123Label``, ``IsDNS1123Subdomain``, ``IsQualifiedName``, ``IsValidLabelValue``;
``node_labels`` implements the last two). The device count bound is
``AllocationResultsMaxSize`` (``staging/src/k8s.io/api/resource/v1/types.go``): one
allocation holds at most 32 devices, so a request for more can never be allocated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import node_labels as nl
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import Refused
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr

#: Devices one allocation holds (``AllocationResultsMaxSize``).
ALLOCATION_RESULTS_MAX = 32
#: GiB: no GPU of 2026 has more memory than 288 GB (B300); a larger ask matches nothing.
MAX_MEMORY_GIB = 288
#: Compute slices a MIG GPU instance can have (``<n>g``: 1, 2, 3, 4 or 7 on every
#: MIG-capable GPU, NVIDIA MIG user guide, "Supported MIG Profiles").
MIG_COMPUTE_SLICES = (1, 2, 3, 4, 7)

DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
#: The top-level fields of a ResourceClaimTemplate and a ResourceClaim.
TOP_LEVEL_FIELDS = {
    "ResourceClaimTemplate": ("apiVersion", "kind", "metadata", "spec"),
    "ResourceClaim": ("apiVersion", "kind", "metadata", "spec", "status"),
    "DeviceClass": ("apiVersion", "kind", "metadata", "spec"),
}


class ClaimTemplateError(Refused):
    """A builder argument that cannot make a valid template: ``reason`` names the
    parameter and value, ``fix`` says what to give instead (``messages.with_fix``)."""


def check_name(value: Any, what: str, subdomain: bool = True) -> str:
    """``value`` when it is a DNS subdomain (``subdomain``) or a DNS label; else
    ClaimTemplateError naming ``what``."""
    pattern = DNS_SUBDOMAIN_RE if subdomain else DNS_LABEL_RE
    if not isinstance(value, str) or not pattern.match(value) or len(value) > 253:
        kind = "DNS subdomain" if subdomain else "DNS label (at most 63 characters)"
        raise ClaimTemplateError(
            f"{what}={value!r} is not a valid {kind}.",
            "use lower-case letters, digits and '-'" + (" and '.'" if subdomain else "") + ".",
        )
    return value


def check_labels(labels: Mapping[str, Any] | None, what: str = "labels") -> dict[str, str]:
    """Labels as Kubernetes accepts them (qualified-name keys, values of at most 63
    characters); YAML ``true`` and numbers become strings. Raises ClaimTemplateError
    naming the key, the value and the rule."""
    try:
        return nl.normalize_labels(labels, what)
    except nl.NodeLabelError as err:
        reason, fix = msg.split_fix(str(err))
        raise ClaimTemplateError(reason + ".", fix) from None


def check_count(count: Any, minimum: int = 1, name: str = "count") -> int:
    """``count`` when it is an integer from ``minimum`` to ``ALLOCATION_RESULTS_MAX``;
    else ClaimTemplateError naming ``name``."""
    if (
        isinstance(count, bool)
        or not isinstance(count, int)
        or not minimum <= count <= ALLOCATION_RESULTS_MAX
    ):
        raise ClaimTemplateError(
            f"{name}={str(count)[:40]} is not a whole number from {minimum} to "
            f"{ALLOCATION_RESULTS_MAX} (one allocation holds at most {ALLOCATION_RESULTS_MAX} "
            "devices, AllocationResultsMaxSize).",
            f"give {name} as an integer from {minimum} to {ALLOCATION_RESULTS_MAX}.",
        )
    return count


_QUANTITY_RE = re.compile(r"^\+?(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?\Z")
_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_SUFFIX.update({s + "i": 1024 ** (n + 1) for n, s in enumerate("KMGTPE")})


def check_memory_quantity(value: Any, name: str) -> str:
    """``value`` as a memory quantity (``10Gi``, ``512Mi``) of more than 0 and at most
    ``MAX_MEMORY_GIB`` GiB; else ClaimTemplateError naming ``name``."""
    text = str(value)
    m = _QUANTITY_RE.match(text)
    size = float(m.group(1)) * _SUFFIX[m.group(2) or ""] if m else 0.0
    if not 0 < size <= MAX_MEMORY_GIB * 1024**3:
        raise ClaimTemplateError(
            f"{name}={text[:40]!r} is not a memory size from 1 byte to {MAX_MEMORY_GIB}Gi.",
            "give a size such as 10Gi.",
        )
    return text


def known_mig_profiles() -> list[str]:
    """Every GPU-instance profile name of the GPU models in ``mig.profiles``, sorted."""
    return sorted({p.name for m in mpr.MODELS.values() for p in m.profiles})


def mig_profile_note(profile: Any) -> str | None:
    """Check a MIG profile name for a claim (``1g.18gb``, ``1c.3g.40gb``, ``1g.10gb+me``).

    Returns None for a profile of a GPU model in ``mig.profiles``, a note for one that
    no model there has but a GPU could (``1g.23gb`` of a B200). Raises
    ClaimTemplateError for a name no GPU can have: compute slices other than
    ``MIG_COMPUTE_SLICES``, more memory than ``MAX_MEMORY_GIB``, a compute-instance
    prefix larger than its GPU instance."""
    known = known_mig_profiles()
    text = profile if isinstance(profile, str) else ""
    parts = mpr.parse_profile(text)
    ci, gi, mem = (parts.ci_slices or 0, parts.gi_slices, parts.memory_gb) if parts else (0, 0, 0)
    if parts is None or gi not in MIG_COMPUTE_SLICES or not 1 <= mem <= MAX_MEMORY_GIB or ci > gi:
        raise ClaimTemplateError(
            f"profile={profile!r} is not a MIG profile any GPU has (<n>g.<m>gb with n one of "
            f"{', '.join(map(str, MIG_COMPUTE_SLICES))} and at most {MAX_MEMORY_GIB} GB).",
            f"give one nvidia-smi mig -lgip prints, e.g. {', '.join(known[:6])}.",
        )
    gi_name = parts.gi_profile
    if gi_name in known or gi_name.replace("+me.all", "+me") in known:
        return None
    return (
        f"MIG profile {profile} is in none of the MIG tables known here ("
        + ", ".join(sorted(mpr.MODELS))
        + "); check that your GPUs offer it (nvidia-smi mig -lgip)"
    )


def check_metadata(obj: Mapping[str, Any], kind: str, error: Callable[[str, str], None]) -> None:
    """Report through ``error(path, message)`` the top-level fields ``kind`` does not
    have (the API server's strict field validation refuses them) and a ``metadata``
    whose name, namespace, labels or annotations the API server would refuse."""
    allowed = TOP_LEVEL_FIELDS.get(kind)
    for key in obj if allowed else ():
        if key not in allowed:
            error(str(key), f"unknown field {key!r}; a {kind} has {', '.join(allowed)}")
    meta = obj.get("metadata")
    if meta is None:
        return
    if not isinstance(meta, Mapping):
        error("metadata", "metadata must be a mapping with name, namespace, labels")
        return
    for field, subdomain in (("name", True), ("generateName", True), ("namespace", False)):
        if field in meta:
            try:
                check_name(meta[field], f"metadata.{field}", subdomain)
            except ClaimTemplateError as err:
                error(f"metadata.{field}", f"{err.reason} Fix: {err.fix}")
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            error(f"metadata.{field}", f"{field} must be a mapping of strings to strings")
            continue
        for key, item in value.items():
            if not isinstance(item, str):
                error(
                    f"metadata.{field}.{key}",
                    f"{field} values are strings, {key!r} has a {type(item).__name__}; quote "
                    'it (e.g. "true") or move the structure out of metadata',
                )
        if field == "labels" and all(isinstance(v, str) for v in value.values()):
            try:
                check_labels(value, "metadata.labels")
            except ClaimTemplateError as err:
                error("metadata.labels", f"{err.reason} Fix: {err.fix}")
