"""What the upgrade plan reads from a cluster: one reader for the ``upgrade_plan`` module
and ``gpufleet upgrade`` (its ``--plan`` and the snapshot it keeps).

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

from typing import Any

import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_kube as vk

#: Version of the snapshot document (``schema``).
SNAPSHOT_SCHEMA = 1

#: kube-system ConfigMaps the plan reads: ConfigMap -> (data key, answer key).
KUBEADM_CONFIGMAPS = {
    "kubeadm-config": ("ClusterConfiguration", "cluster_configuration"),
    "kubelet-config": ("kubelet", "kubelet_configuration"),
}


def read_cluster(kubeconfig: str | None) -> dict[str, Any]:
    """Nodes, kube-apiserver Pods, ResourceSlices (the most stable ``resource.k8s.io``
    version served), the kubeadm ConfigMaps (None when absent) and kube-system's UID (the
    cluster's identity; None when unreadable). Raises KubeError (kubeconfig unusable, no
    answer, or a refused request)."""
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException

    api = vk.api_client(kubeconfig)
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
    for version in vk.RESOURCE_VERSIONS:
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
    for name, (key, dest) in KUBEADM_CONFIGMAPS.items():
        try:
            cm = ask(
                f"reading ConfigMap kube-system/{name}",
                core.read_namespaced_config_map,
                name,
                "kube-system",
            )
        except ApiException:
            out[dest] = None
            continue
        try:
            out[dest] = yaml.safe_load((cm.data or {}).get(key) or "") or {}
        except yaml.YAMLError as err:
            raise vk.KubeError(
                None, f"ConfigMap kube-system/{name} key {key} is not YAML: {err}"
            ) from None
    try:  # the cluster's identity: the upgrade report of another cluster is not resumed
        out["cluster_uid"] = ask(
            "reading Namespace kube-system", core.read_namespace, "kube-system"
        ).metadata.uid
    except (ApiException, vk.KubeError):
        out["cluster_uid"] = None
    return out
