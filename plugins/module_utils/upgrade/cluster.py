"""What the upgrade plan reads from a cluster, for module ``upgrade_plan`` (the one place
the upgrade is planned; ``gpufleet upgrade`` runs it through playbooks/upgrade.yml): the
cluster itself, a saved snapshot of it (``load_snapshot``, ``save_snapshot``), and the
upgrade report of an earlier run (``read_report``, ``foreign_report``, ``resume_hosts``).

Shape of :func:`read_cluster`'s answer (plain dicts, as ``kubectl get -o json`` gives)::

    {"schema": 1, "nodes": [Node], "pods": [kube-apiserver Pod],
     "resourceslices": [ResourceSlice], "cluster_configuration": dict | None,
     "kubelet_configuration": dict | None, "cluster_uid": str | None}

Every call has the connect and read timeouts of
:data:`validate_kube.REQUEST_TIMEOUT` and no retried read, so a server that accepts and
never answers ends the read within about 20 s per call; the first call that gets no answer
raises :class:`validate_kube.KubeError` naming the server and the fix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import Refused
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import resource_versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kubeadm import configmaps as kcm

#: Version of the snapshot document (``schema``).
SNAPSHOT_SCHEMA = 1


def read_cluster(kubeconfig: str | None, context: str | None = None) -> dict[str, Any]:
    """Nodes, kube-apiserver Pods, ResourceSlices (the most stable ``resource.k8s.io``
    version served), the kubeadm ConfigMaps (None when absent) and kube-system's UID (the
    cluster's identity; None when unreadable). Raises KubeError (kubeconfig unusable, no
    answer, or a refused request). ``kubeconfig``/``context``: as the ``kube_auth`` options
    (the admin kubeconfig on the control host)."""
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException

    api = vk.api_client(kubeconfig, context)
    core = k8s_client.CoreV1Api(api)
    custom = k8s_client.CustomObjectsApi(api)
    plain = api.sanitize_for_serialization
    server = api.configuration.host
    timeout = vk.REQUEST_TIMEOUT

    def ask(what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, _request_timeout=timeout, **kwargs)
        except ApiException:
            raise
        except Exception as err:  # urllib3: no answer, refused, TLS
            raise vk.KubeError(None, f"{what}: {vk.unreachable(server, err, timeout)}") from None

    out: dict[str, Any] = {"schema": SNAPSHOT_SCHEMA}
    try:
        out["nodes"] = plain(ask("listing Nodes", core.list_node))["items"]
        out["pods"] = plain(
            ask(
                "listing kube-apiserver Pods",
                core.list_namespaced_pod,
                "kube-system",
                label_selector="component=kube-apiserver",
            )
        )["items"]
    except ApiException as exc:
        raise vk.KubeError(exc.status, f"listing Nodes and Pods: {exc.reason}") from None
    out["resourceslices"] = []
    for version in resource_versions.OBJECT_RESOURCE_VERSIONS:
        try:
            out["resourceslices"] = ask(
                "listing ResourceSlices",
                custom.list_cluster_custom_object,
                "resource.k8s.io",
                version,
                "resourceslices",
            )["items"]
            break
        except ApiException as exc:
            if exc.status != 404:
                raise vk.KubeError(exc.status, f"listing ResourceSlices: {exc.reason}") from None
    try:  # kubeadm-config and kubelet-config (kubelet-config-1.X on old clusters)
        found = kcm.read_kubeadm_configmaps(vk.Kube.from_client(api))
    except vk.KubeError as err:
        if err.status is None:  # no answer
            raise
        found = kcm.KubeadmConfigMaps(None, None)  # not readable: judged as absent
    for dest, cm, where, text in (
        (
            "cluster_configuration",
            found.kubeadm,
            f"{kcm.NAMESPACE}/{kcm.KUBEADM_CONFIG}",
            found.cluster_configuration,
        ),
        ("kubelet_configuration", found.kubelet, found.kubelet_ref, found.kubelet_configuration),
    ):
        if cm is None:  # absent: None; present without its key: {}
            out[dest] = None
            continue
        try:
            out[dest] = ig.load_yaml(text or "", f"ConfigMap {where}") or {}
        except ig.InputError as err:
            raise vk.KubeError(None, str(err)) from None
    try:  # the cluster's identity: the upgrade report of another cluster is not resumed
        out["cluster_uid"] = ask(
            "reading Namespace kube-system", core.read_namespace, "kube-system"
        ).metadata.uid
    except (ApiException, vk.KubeError):
        out["cluster_uid"] = None
    return out


#: Bytes and values (mapping entries and list items) of one snapshot file: the trimmed
#: listing of 1,000 GPU nodes with their pods, slices and claims is about 70 MB of JSON.
SNAPSHOT_MAX_BYTES = 256 * 1024 * 1024
SNAPSHOT_MAX_VALUES = 100_000_000
SNAPSHOT_FIX = (
    "give a file written by gpufleet upgrade --save-snapshot FILE (or upgrade_save_snapshot)."
)


class SnapshotError(Refused):
    """A snapshot file that cannot be read or is not of the snapshot's shape: ``reason``
    names the file (as ``what``) and what is wrong, ``fix`` says what to do."""

    def __init__(self, reason: str, fix: str = SNAPSHOT_FIX) -> None:
        super().__init__(reason, fix)


def load_snapshot(path: str, what: str | None = None) -> dict[str, Any]:
    """A snapshot written by :func:`save_snapshot` (``{schema, hosts, nodes, pods,
    resourceslices, kubeadm_versions, cluster_configuration, kubelet_configuration,
    cluster_uid}``, and ``gate_audit.facts``: host -> the facts of ``dra_gate_audit_facts`` or
    null, absent in older snapshots). ``hosts`` may be absent (the inventory's are used);
    each present one gets ``name`` = ``host`` when it has none. Reads at most
    :data:`SNAPSHOT_MAX_BYTES` (a named pipe or /dev/zero does not hang it). Raises
    SnapshotError naming ``what`` (default ``snapshot 'PATH'``)."""
    what = what or f"snapshot {path!r}"
    try:
        text = ig.read_text(path, what, limit=SNAPSHOT_MAX_BYTES) or ""
    except ig.InputError as exc:
        raise SnapshotError(msg.split_fix(str(exc))[0] + ".") from None
    try:
        data = ig.check_shape(json.loads(text), what, max_nodes=SNAPSHOT_MAX_VALUES)
    except RecursionError:
        raise SnapshotError(f"{what} nests too deep to be a snapshot.") from None
    except ig.InputError as exc:
        raise SnapshotError(msg.split_fix(str(exc))[0] + ".") from None
    except ValueError as exc:
        raise SnapshotError(f"{what} is not JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise SnapshotError(
            f"{what} holds a JSON {type(data).__name__}, not the object of a cluster snapshot."
        )
    if data.get("schema", SNAPSHOT_SCHEMA) != SNAPSHOT_SCHEMA:
        raise SnapshotError(
            f"{what} has schema {data.get('schema')!r}; this version reads schema "
            f"{SNAPSHOT_SCHEMA}.",
            "save the snapshot again with this version.",
        )
    for key in ("hosts", "nodes", "pods", "resourceslices"):
        value = data.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, dict) for v in value)
        ):
            raise SnapshotError(f"{what}: {key!r} is not a list of objects.")
    for key in ("kubeadm_versions", "cluster_configuration", "kubelet_configuration", "gate_facts"):
        value = data.get(key)
        if value is not None and not isinstance(value, dict):
            raise SnapshotError(f"{what}: {key!r} is not an object.")
    for host, facts in (data.get("gate_facts") or {}).items():
        if facts is not None and not isinstance(facts, dict):
            raise SnapshotError(f"{what}: gate_facts[{host!r}] is not an object.")
    if any(not isinstance(h.get("host"), str) for h in data.get("hosts") or []):
        raise SnapshotError(f"{what}: an entry of 'hosts' has no 'host' name.")
    for h in data.get("hosts") or []:
        h.setdefault("name", h["host"])
    return data


def check_save_path(path: str, what: str | None = None) -> str:
    """``path`` (user-expanded) when a file can be written there: its directory exists and
    is writable, the path is not a directory nor a read-only file. Raises SnapshotError
    naming ``what`` (default ``save_snapshot 'PATH'``)."""
    what = what or f"save_snapshot {path!r}"
    fix = "give a file in an existing, writable directory, e.g. ./snapshot.json."
    target = os.path.expanduser(path)
    parent = os.path.dirname(os.path.abspath(target))
    if os.path.isdir(target):
        raise SnapshotError(f"{what} is a directory.", fix)
    if not os.path.isdir(parent):
        raise SnapshotError(f"{what}: directory {parent!r} does not exist.", fix)
    exists = os.path.exists(target)
    if not os.access(parent, os.W_OK) or (exists and not os.access(target, os.W_OK)):
        raise SnapshotError(f"{what}: no permission to write it.", fix)
    return target


def save_snapshot(path: str, data: Mapping[str, Any], what: str | None = None) -> None:
    """Write ``data`` (the shape :func:`load_snapshot` reads) to ``path`` as JSON, through a
    temporary file beside it. Raises SnapshotError naming ``what`` (see
    :func:`check_save_path`)."""
    target = check_save_path(path, what)
    tmp = os.path.join(os.path.dirname(os.path.abspath(target)), f".{os.path.basename(target)}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(data, indent=1, default=str) + "\n")
        os.replace(tmp, target)
    except OSError as exc:
        raise SnapshotError(
            f"{what or f'save_snapshot {path!r}'} cannot be written: {exc.strerror}.",
            "give a file in an existing, writable directory.",
        ) from None


def read_report(path: str) -> dict[str, Any]:
    """The upgrade report at ``path`` (module ``upgrade_report``: ``{target, cluster_uid,
    nodes: {host: {node, state, phase, cause, cordoned, cordoned_by_upgrade,
    timings_s}}}``), or {} when it is missing or not a JSON object."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def foreign_report(report: Mapping[str, Any], cluster_uid: str | None) -> bool:
    """True when ``report`` was written for another cluster: its ``cluster_uid`` (the UID of
    that cluster's kube-system Namespace) differs from ``cluster_uid``. A report without
    one, or a cluster whose UID is unknown, counts as this cluster's. The default report
    path is shared by every cluster upgraded from one machine, and host names (cp-1,
    gpu-1) repeat between a staging and a production inventory."""
    theirs = report.get("cluster_uid")
    return bool(theirs and cluster_uid and theirs != cluster_uid)


def resume_hosts(report: Mapping[str, Any], versions: Sequence[str]) -> list[str]:
    """Hosts that a run to one of ``versions`` (the report's ``target``) drained and left
    cordoned: ``cordoned_by_upgrade`` set in their entry."""
    if str(report.get("target") or "") not in {str(v) for v in versions}:
        return []
    nodes = report.get("nodes") or {}
    return [h for h, e in nodes.items() if isinstance(e, Mapping) and e.get("cordoned_by_upgrade")]
