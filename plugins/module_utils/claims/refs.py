# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""How a Pod's resource claims hang together with the ResourceClaimTemplates and
ResourceClaims next to it in one file.

``check_pod_claims(pod, objects)`` judges one Pod (or the pod template of a Deployment,
StatefulSet, DaemonSet, ReplicaSet, Job or CronJob) against ``objects``, the other
documents of the file:

* errors, which kube-apiserver refuses the pod for (``pkg/apis/core/validation``:
  ``validatePodResourceClaims`` and ``validateResourceClaimNames`` of k8s.io/kubernetes):
  a ``spec.resourceClaims`` entry without a name, with a name given twice or with neither
  or both of ``resourceClaimName`` and ``resourceClaimTemplateName``; a container's (or
  init container's) ``resources.claims`` entry without a name, given twice, or naming no
  entry of ``spec.resourceClaims``;
* warnings, which the API server takes but which leave the pod Pending: a
  ``resourceClaimTemplateName`` or ``resourceClaimName`` that no object of the file has
  (it must exist in the pod's namespace before the pod can be scheduled), one that the
  file holds only in another namespace (a pod's claims resolve in its own), and a
  ``resourceClaimName`` that names a template of the file (or the other way round).

An object without ``metadata.namespace`` is taken to land in the namespace the file is
applied to, which is the same for every such object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.problems import (
    WARNING,
    Problem,
)

__all__ = ["POD_SPEC_PATHS", "check_pod_claims", "pod_spec", "uses_claims"]

TEMPLATE, CLAIM = "ResourceClaimTemplate", "ResourceClaim"

#: Kind -> where its pod spec is (the core/v1 and apps/v1, batch/v1 workload kinds).
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

#: The field of a pod claim entry -> the kind of object it names.
_SOURCES = {"resourceClaimTemplateName": TEMPLATE, "resourceClaimName": CLAIM}


def pod_spec(obj: Any) -> Mapping[str, Any] | None:
    """The pod spec of a Pod or workload ``obj`` (None: not one, or no spec there)."""
    if not isinstance(obj, Mapping) or obj.get("kind") not in POD_SPEC_PATHS:
        return None
    node: Any = obj
    for key in POD_SPEC_PATHS[obj["kind"]]:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def _containers(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for field in ("initContainers", "containers"):
        items = spec.get(field)
        for i, c in enumerate(items if isinstance(items, list) else []):
            if isinstance(c, Mapping):
                out.append((f"{field}[{i}]", c))
    return out


def _container_shapes(base: str, spec: Mapping[str, Any]) -> list[Problem]:
    """Problems of ``containers``/``initContainers`` that are not lists of mappings, or a
    container's ``resources.claims`` that is not a list (the API server refuses the pod;
    their claims could not be checked)."""
    out = []
    for field in ("initContainers", "containers"):
        items = spec.get(field)
        if items is not None and not isinstance(items, list):
            out.append(
                Problem(
                    f"{base}.{field}",
                    f"is a {type(items).__name__}, not a list; write {field}: "
                    "[{name: main, image: <image>}]",
                )
            )
            continue
        for i, c in enumerate(items or []):
            if not isinstance(c, Mapping):
                out.append(
                    Problem(
                        f"{base}.{field}[{i}]",
                        f"is {str(c)[:40]!r}, not a mapping; write {{name: main, image: <image>}}",
                    )
                )
                continue
            resources = c.get("resources")
            claims = resources.get("claims") if isinstance(resources, Mapping) else None
            if claims is not None and not isinstance(claims, list):
                out.append(
                    Problem(
                        f"{base}.{field}[{i}].resources.claims",
                        f"is a {type(claims).__name__}, not a list; write claims: [{{name: gpu}}]",
                    )
                )
    return out


def _container_claims(container: Mapping[str, Any]) -> list[Any]:
    resources = container.get("resources")
    claims = resources.get("claims") if isinstance(resources, Mapping) else None
    return claims if isinstance(claims, list) else []


def uses_claims(obj: Any) -> bool:
    """True when the pod spec of ``obj`` has ``resourceClaims`` or a container that
    lists ``resources.claims``."""
    spec = pod_spec(obj)
    if spec is None:
        return False
    return bool(spec.get("resourceClaims")) or any(
        _container_claims(c) for _unused, c in _containers(spec)
    )


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _index(objects: Iterable[Any]) -> dict[tuple[str, str], set[str | None]]:
    """(kind, name) -> the namespaces (None: none written) of the file's templates and
    claims."""
    out: dict[tuple[str, str], set[str | None]] = {}
    for obj in objects:
        if isinstance(obj, Mapping) and obj.get("kind") in (TEMPLATE, CLAIM):
            name = _meta(obj).get("name")
            if isinstance(name, str) and name:
                out.setdefault((obj["kind"], name), set()).add(_meta(obj).get("namespace"))
    return out


def check_pod_claims(pod: Any, objects: Iterable[Any]) -> list[Problem]:
    """The problems of the resource claims of ``pod`` (a Pod or workload mapping) given
    ``objects`` (every document of the file). Paths are relative to the object
    (``spec.template.spec.resourceClaims[0].resourceClaimTemplateName``). Never raises."""
    spec = pod_spec(pod)
    if spec is None:
        return []
    base = ".".join(POD_SPEC_PATHS[pod["kind"]])
    meta = _meta(pod)
    who = f"{pod['kind']} {meta.get('namespace') or '-'}/{meta.get('name') or '-'}"
    index = _index(objects)
    problems: list[Problem] = []
    names: list[str] = []
    entries = spec.get("resourceClaims")
    if entries is not None and not isinstance(entries, list):
        problems.append(
            Problem(
                f"{base}.resourceClaims",
                f"is a {type(entries).__name__}, not a list; write resourceClaims: "
                "[{name: gpu, resourceClaimTemplateName: <template>}]",
            )
        )
        entries = []
    for i, entry in enumerate(entries or []):
        path = f"{base}.resourceClaims[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(
                Problem(
                    path,
                    f"is {entry!r}, not a mapping; write {{name: gpu, "
                    "resourceClaimTemplateName: <template>}",
                )
            )
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            problems.append(Problem(f"{path}.name", "is required: the name containers use"))
        elif name in names:
            problems.append(
                Problem(f"{path}.name", f"{name!r} is given twice; each entry needs its own name")
            )
        else:
            names.append(name)
        given = [f for f in _SOURCES if entry.get(f)]
        if len(given) != 1:
            problems.append(
                Problem(
                    path,
                    (
                        "names both resourceClaimName and resourceClaimTemplateName"
                        if given
                        else "names neither resourceClaimName nor resourceClaimTemplateName"
                    )
                    + "; the API server takes exactly one: resourceClaimTemplateName for a "
                    "claim made per pod, resourceClaimName for a claim shared with others",
                )
            )
            continue
        problems.extend(_check_source(path, who, meta.get("namespace"), entry, given[0], index))
    problems.extend(_container_shapes(base, spec))
    for cpath, container in _containers(spec):
        seen: set[tuple[str, Any]] = set()
        cname = container.get("name") or "-"
        for j, claim in enumerate(_container_claims(container)):
            path = f"{base}.{cpath}.resources.claims[{j}]"
            name = claim.get("name") if isinstance(claim, Mapping) else None
            if not isinstance(name, str) or not name:
                problems.append(
                    Problem(f"{path}.name", "is required: an entry of pod.spec.resourceClaims")
                )
                continue
            key = (name, claim.get("request"))
            if key in seen:
                problems.append(Problem(path, f"claim {name!r} is listed twice; keep one entry"))
            seen.add(key)
            if name not in names:
                listed = ", ".join(names) if names else "which is empty"
                fix = (f"name one of {', '.join(names)}, or add " if names else "add ") + (
                    f"{{name: {name}, resourceClaimTemplateName: <template>}} to "
                    f"{base}.resourceClaims"
                )
                problems.append(
                    Problem(
                        f"{path}.name",
                        f"container {cname} of {who} uses claim {name!r}, which is not in "
                        f"pod.spec.resourceClaims ({listed}); the API server refuses the pod; "
                        f"fix: {fix}",
                    )
                )
    return problems


def _check_source(
    path: str,
    who: str,
    namespace: str | None,
    entry: Mapping[str, Any],
    field: str,
    index: Mapping[tuple[str, str], set[str | None]],
) -> list[Problem]:
    target, kind = entry[field], _SOURCES[field]
    path = f"{path}.{field}"
    if not isinstance(target, str):
        return [Problem(path, f"is {target!r}, not a string: the name of a {kind}")]
    other_field = next(f for f in _SOURCES if f != field)
    other = _SOURCES[other_field]
    spaces = index.get((kind, target))
    ns = namespace or "the namespace it is created in"
    if spaces is None:
        if (other, target) in index:
            return [
                Problem(
                    path,
                    f"{who} names {kind} {target!r}, but this file holds a {other} of that "
                    f"name and no {kind}; the pod stays Pending; fix: write "
                    f"{other_field}: {target}",
                    WARNING,
                )
            ]
        make = (
            f"`gpufleet claims template KIND --name {target}"
            + (f" --namespace {namespace}" if namespace else "")
            + f"`, KIND one of {', '.join(ct.KINDS)}"
            if kind == TEMPLATE
            else f"a ResourceClaim named {target}"
        )
        return [
            Problem(
                path,
                f"{who} names {kind} {target!r} (claim {entry.get('name')!r}), which this file "
                f"does not hold; the pod stays Pending until it exists in {ns}; fix: add it "
                f"to this file ({make}) or create it before the pod",
                WARNING,
            )
        ]
    if namespace is None or None in spaces or namespace in spaces:
        return []
    return [
        Problem(
            path,
            f"{who} is in namespace {namespace} but this file holds {kind} {target!r} only in "
            f"{', '.join(sorted(s for s in spaces if s))}; a pod's claims resolve in its own "
            f"namespace, so the pod stays Pending; fix: put the {kind} in namespace "
            f"{namespace}",
            WARNING,
        )
    ]
