# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Labels and taints of GPU nodes: which Node objects need a patch, and which patch.

Pure functions over Node objects as JSON dicts (``{"metadata": {"name", "labels",
"resourceVersion"}, "spec": {"taints": [...]}}``, the shape of ``GET /api/v1/nodes``). The
module ``gpu_node_labels`` lists the nodes once and sends only the patches ``plan_labels``
returns.

Why the labels matter: the NVIDIA DRA driver's kubelet-plugin DaemonSet has a required node
affinity on one of ``feature.node.kubernetes.io/pci-10de.present=true``,
``feature.node.kubernetes.io/cpu-model.vendor_id=NVIDIA`` or
``nvidia.com/gpu.present=true`` (chart ``dra-driver-nvidia-gpu`` values.yaml
``kubeletPlugin.affinity``); without Node Feature Discovery or the GPU Operator nothing
sets them and the DaemonSet schedules nowhere (kubernetes-sigs/dra-driver-nvidia-gpu#1084).
``DEFAULT_LABELS`` is therefore ``{"nvidia.com/gpu.present": "true"}``. Labels of one
node only (``node_labels``: the GPU path of its pool, which differs from pool to pool) are
merged over the labels every node gets.

Patches are JSON merge patches (RFC 7386, ``application/merge-patch+json``): labels are
set with ``{"metadata": {"labels": {key: value}}}`` and removed with ``{key: null}``; a
taint change replaces ``spec.taints`` as a whole list (merge patch replaces lists, and
``Node.spec.taints`` has no patch merge key in ``staging/src/k8s.io/api/core/v1/types.go``
either), so it carries ``metadata.resourceVersion`` as a precondition: a node whose taints
changed since the list answers 409 Conflict instead of losing that change.

Label syntax rules are those of ``k8s.io/apimachinery/pkg/util/validation``
(``IsQualifiedName``, ``IsValidLabelValue``); taint effects those of
``core/v1.TaintEffect``.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.scheduling import TAINT_EFFECTS

__all__ = [
    "CONFLICT_RETRIES",
    "DEFAULT_LABELS",
    "PATCH_WORKERS",
    "LabelPlan",
    "NodeLabelError",
    "NodePatch",
    "PatchFailure",
    "apply_patches",
    "normalize_labels",
    "normalize_node_labels",
    "normalize_taints",
    "plan_labels",
]

DEFAULT_LABELS: dict[str, str] = {"nvidia.com/gpu.present": "true"}
#: Patches in flight at once. Kubernetes has no bulk update, so 1,000 nodes to label are
#: 1,000 requests; sent one after the other their round trips add up (about 5 s on a
#: two-CPU control host), eight at a time they overlap. Far below kube-apiserver's
#: default --max-mutating-requests-inflight (200).
PATCH_WORKERS = 8
#: Times a node is read again and its patch recomputed after 409 Conflict.
CONFLICT_RETRIES = 3

_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_DNS_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
)


class NodeLabelError(ValueError):
    """Bad input: ``str()`` names the option, the value and the fix."""


def _check_qualified_name(key: Any, what: str) -> str:
    if not isinstance(key, str) or not key:
        raise NodeLabelError(
            f"{what} key {key!r} is not a string; fix: give e.g. nvidia.com/gpu.present"
        )
    prefix, slash, name = key.rpartition("/")
    ok = bool(_NAME_RE.match(name)) and len(name) <= 63
    if slash:
        ok = ok and bool(_DNS_SUBDOMAIN_RE.match(prefix)) and len(prefix) <= 253
    if not ok:
        raise NodeLabelError(
            f"{what} key {key!r} is not a qualified name; fix: use [prefix/]name with a DNS "
            "subdomain prefix and a name of at most 63 characters of [A-Za-z0-9-_.] that "
            "starts and ends alphanumeric, e.g. nvidia.com/gpu.present"
        )
    return key


def _label_value(key: str, value: Any, what: str) -> str:
    if isinstance(value, bool):
        # YAML `true` unquoted: Kubernetes label values are strings.
        value = "true" if value else "false"
    elif isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str):
        raise NodeLabelError(
            f'{what}[{key!r}]={value!r} is not a string; fix: quote it, e.g. "true"'
        )
    if value and (len(value) > 63 or not _NAME_RE.match(value)):
        raise NodeLabelError(
            f"{what}[{key!r}]={value!r} is not a valid label value; fix: at most 63 characters "
            "of [A-Za-z0-9-_.], starting and ending alphanumeric (or empty)"
        )
    return value


def normalize_labels(labels: Mapping[str, Any] | None, what: str = "labels") -> dict[str, str]:
    """Validated labels with string values (``True`` -> ``"true"``, ``1`` -> ``"1"``).

    Raises NodeLabelError naming ``what``, the key and the fix for a bad key or value.
    """
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise NodeLabelError(f"{what}={labels!r} is not a mapping; fix: give label keys to values")
    return {_check_qualified_name(k, what): _label_value(k, v, what) for k, v in labels.items()}


def normalize_node_labels(
    node_labels: Mapping[str, Any] | None, nodes: Sequence[str], what: str = "node_labels"
) -> dict[str, dict[str, str]]:
    """Validated labels of single nodes: node name -> labels, each node one of ``nodes``.

    Raises NodeLabelError naming ``what`` for a value that is not a mapping, a node not in
    ``nodes``, or a bad label key or value.
    """
    if not node_labels:
        return {}
    if not isinstance(node_labels, Mapping):
        raise NodeLabelError(
            f"{what}={node_labels!r} is not a mapping; fix: give node names to labels"
        )
    listed = {str(n) for n in nodes}
    unknown = sorted(str(n) for n in node_labels if str(n) not in listed)
    if unknown:
        raise NodeLabelError(
            f"{what} names node(s) {', '.join(unknown)} that are not in nodes; fix: give "
            "labels only for the nodes listed"
        )
    return {
        str(name): normalize_labels(labels, f"{what}[{str(name)!r}]")
        for name, labels in node_labels.items()
    }


def _removal_labels(
    labels: Mapping[str, str], node_labels: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """Every label key set on some node (values do not matter for a removal)."""
    out = dict(labels)
    for per_node in node_labels.values():
        out.update(per_node)
    return out


def _labels_for(
    name: str,
    role: str,
    labels: Mapping[str, str],
    node_labels: Mapping[str, Mapping[str, str]],
) -> dict[str, str]:
    """The labels a node of ``role`` gets (``gpu``: ``labels`` with its own ``node_labels``
    merged over them) or loses (``other``: every key of either)."""
    if role == "gpu":
        return {**labels, **node_labels.get(name, {})}
    return _removal_labels(labels, node_labels)


def normalize_taints(
    taints: Sequence[Mapping[str, Any]] | None, what: str = "taints"
) -> list[dict[str, str]]:
    """Validated taints ``[{key, value?, effect}]``; ``value`` is dropped when empty.

    Raises NodeLabelError for a missing key, a bad effect or two taints with the same key
    and effect.
    """
    out: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints or []):
        if not isinstance(taint, Mapping):
            raise NodeLabelError(
                f"{what}[{i}]={taint!r} is not a mapping; fix: give "
                "{key: nvidia.com/gpu, effect: NoSchedule}"
            )
        unknown = sorted(set(taint) - {"key", "value", "effect"})
        if unknown:
            raise NodeLabelError(
                f"{what}[{i}] has unknown field(s) {', '.join(unknown)}; fix: a taint has key, "
                "value, effect"
            )
        key = _check_qualified_name(taint.get("key"), f"{what}[{i}]")
        effect = taint.get("effect")
        if effect not in TAINT_EFFECTS:
            raise NodeLabelError(
                f"{what}[{i}].effect={effect!r} is not a taint effect; fix: use one of "
                f"{', '.join(TAINT_EFFECTS)}"
            )
        if (key, effect) in seen:
            raise NodeLabelError(
                f"{what}[{i}] repeats key {key!r} with effect {effect}; fix: keep one"
            )
        seen.add((key, effect))
        entry = {"key": key, "effect": effect}
        value = taint.get("value")
        if value not in (None, ""):
            entry["value"] = _label_value(key, value, f"{what}[{i}].value")
        out.append(entry)
    return out


@dataclass(frozen=True)
class NodePatch:
    """One node to patch: ``patch`` (the merge-patch body), ``labels`` (key -> ``[old,
    new]``, None for absent), ``taints_added``/``taints_removed`` (taint dicts), ``role``:
    ``"gpu"`` (a node of the list) or ``"other"`` (removal from a node not in the list)."""

    name: str
    patch: dict[str, Any]
    labels: dict[str, list[str | None]]
    taints_added: list[dict[str, str]]
    taints_removed: list[dict[str, str]]
    role: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.name,
            "role": self.role,
            "labels": dict(self.labels),
            "taints_added": list(self.taints_added),
            "taints_removed": list(self.taints_removed),
        }


@dataclass
class LabelPlan:
    """What ``plan_labels`` found: ``patches`` to send, ``missing`` (requested names with no
    Node), ``unchanged`` (requested nodes already right), ``nodes_seen`` (Nodes listed)."""

    patches: list[NodePatch] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    nodes_seen: int = 0

    def diff(self) -> dict[str, Any]:
        """``{"before": {node: {...}}, "after": {node: {...}}}`` for the patched nodes, with
        only the labels and taints this plan touches."""
        before: dict[str, Any] = {}
        after: dict[str, Any] = {}
        for p in self.patches:
            b = {k: v[0] for k, v in p.labels.items() if v[0] is not None}
            a = {k: v[1] for k, v in p.labels.items() if v[1] is not None}
            before[p.name] = {"labels": b, "taints": p.taints_removed}
            after[p.name] = {"labels": a, "taints": p.taints_added}
        return {"before": before, "after": after}


def _node_name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def _taint_id(taint: Mapping[str, Any]) -> tuple[str, str]:
    return (str(taint.get("key")), str(taint.get("effect")))


def _same_taint(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return _taint_id(a) == _taint_id(b) and (a.get("value") or "") == (b.get("value") or "")


def node_patch(
    node: Mapping[str, Any],
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, str]],
    present: bool,
) -> NodePatch | None:
    """The patch that brings one node to the wanted state, or None when it is there.

    ``present``: set ``labels`` (key and value) and ``taints`` (by key and effect; a taint
    with the same key and effect but another value is replaced); otherwise remove the label
    keys (whatever their value) and the taints with those keys and effects. Other labels and
    taints are kept.
    """
    meta = node.get("metadata") or {}
    current_labels: Mapping[str, str] = meta.get("labels") or {}
    current_taints: list[Mapping[str, Any]] = list((node.get("spec") or {}).get("taints") or [])
    label_patch: dict[str, str | None] = {}
    label_changes: dict[str, list[str | None]] = {}
    for key, value in labels.items():
        old = current_labels.get(key)
        if present and old != value:
            label_patch[key] = value
            label_changes[key] = [old, value]
        elif not present and key in current_labels:
            label_patch[key] = None
            label_changes[key] = [old, None]
    wanted_ids = {_taint_id(t) for t in taints}
    added: list[dict[str, str]] = []
    removed: list[dict[str, str]] = []
    if present:
        for taint in taints:
            if not any(_same_taint(taint, c) for c in current_taints):
                added.append(dict(taint))
        removed = [
            dict(c)
            for c in current_taints
            if _taint_id(c) in wanted_ids and not any(_same_taint(c, t) for t in taints)
        ]
    else:
        removed = [dict(c) for c in current_taints if _taint_id(c) in wanted_ids]
    if not label_patch and not added and not removed:
        return None
    patch: dict[str, Any] = {"metadata": {}}
    if label_patch:
        patch["metadata"]["labels"] = label_patch
    if added or removed:
        removed_ids = [(*_taint_id(r), r.get("value") or "") for r in removed]
        kept = [
            dict(c)
            for c in current_taints
            if (*_taint_id(c), c.get("value") or "") not in removed_ids
        ]
        patch["spec"] = {"taints": kept + added}
        if meta.get("resourceVersion"):
            patch["metadata"]["resourceVersion"] = str(meta["resourceVersion"])
    return NodePatch(
        _node_name(node),
        patch,
        label_changes,
        added,
        removed,
        "gpu" if present else "other",
    )


def plan_labels(
    nodes: Iterable[Mapping[str, Any]],
    gpu_nodes: Sequence[str],
    labels: Mapping[str, Any] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    remove_from_others: bool = False,
    node_labels: Mapping[str, Any] | None = None,
) -> LabelPlan:
    """Compare the listed ``nodes`` with the wanted state and return the patches.

    ``gpu_nodes``: Kubernetes node names that get ``labels`` (default ``DEFAULT_LABELS``) and
    ``taints``, and each its own ``node_labels`` (node name -> labels, merged over
    ``labels``); with ``remove_from_others`` every other node loses all those label keys and
    the taints (key and effect). Names in ``gpu_nodes`` with no Node go to ``missing``.

    Raises NodeLabelError for bad labels or taints, node labels of a node not in
    ``gpu_nodes``, or a node name given twice.
    """
    wanted_labels = normalize_labels(DEFAULT_LABELS if labels is None else labels)
    wanted_taints = normalize_taints(taints)
    names = [str(n) for n in gpu_nodes]
    per_node = normalize_node_labels(node_labels, names)
    dupes = sorted(n for n, count in Counter(names).items() if count > 1)
    if dupes:
        raise NodeLabelError(
            f"nodes lists {', '.join(dupes)} more than once; fix: give each node name once "
            "(two inventory hosts may map to one kubernetes_node_name)"
        )
    if not wanted_labels and not wanted_taints and not any(per_node.values()):
        raise NodeLabelError(
            "labels and taints are both empty: nothing to set; fix: give labels, e.g. "
            '{"nvidia.com/gpu.present": "true"}'
        )
    wanted = set(names)
    removal = _removal_labels(wanted_labels, per_node)
    plan = LabelPlan()
    found: set[str] = set()
    for node in nodes:
        plan.nodes_seen += 1
        name = _node_name(node)
        if name in wanted:
            found.add(name)
            mine = _labels_for(name, "gpu", wanted_labels, per_node)
            patch = node_patch(node, mine, wanted_taints, present=True)
            if patch is None:
                plan.unchanged.append(name)
            else:
                plan.patches.append(patch)
        elif remove_from_others:
            patch = node_patch(node, removal, wanted_taints, present=False)
            if patch is not None:
                plan.patches.append(patch)
    plan.missing = [n for n in names if n not in found]
    return plan


@dataclass
class PatchFailure:
    """A patch that could not be applied: the patch last tried and the error raised."""

    patch: NodePatch
    error: Exception


def apply_patches(
    patches: Sequence[NodePatch],
    send: Callable[[str, dict[str, Any]], Any],
    reread: Callable[[str], Mapping[str, Any]],
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, str]],
    is_conflict: Callable[[Exception], bool],
    workers: int = PATCH_WORKERS,
    retries: int = CONFLICT_RETRIES,
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[NodePatch], PatchFailure | None]:
    """Send every patch (``send(node name, merge-patch body)``), up to ``workers`` at once.

    On an error for which ``is_conflict`` is true (409: the node changed since the list)
    the node is read again (``reread(name)``) and its patch recomputed with ``labels``,
    its ``node_labels`` and ``taints`` (normalized), at most ``retries`` times; a node that
    no longer needs a patch is dropped. Any other error ends the run: patches not yet
    started are not sent.

    Returns the patches applied (in the order of ``patches``, each as last sent) and the
    first failure, or None. ``send`` and ``reread`` are called from worker threads.
    """
    stop = threading.Event()
    per_node = dict(node_labels or {})

    def one(item: NodePatch) -> NodePatch | PatchFailure | None:
        if stop.is_set():
            return None
        patch = item
        for attempt in range(retries + 1):
            try:
                send(patch.name, patch.patch)
                return patch
            except Exception as err:
                if is_conflict(err) and attempt < retries:
                    try:
                        fresh = reread(patch.name)
                    except Exception as read_err:
                        stop.set()
                        return PatchFailure(patch, read_err)
                    mine = _labels_for(patch.name, patch.role, labels, per_node)
                    renewed = node_patch(fresh, mine, taints, present=patch.role == "gpu")
                    if renewed is None:
                        return None
                    patch = renewed
                    continue
                stop.set()
                return PatchFailure(patch, err)
        return None  # pragma: no cover - the loop always returns

    if not patches:
        return [], None
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(patches)))) as pool:
        results = list(pool.map(one, patches))
    done = [r for r in results if isinstance(r, NodePatch)]
    failure = next((r for r in results if isinstance(r, PatchFailure)), None)
    return done, failure
