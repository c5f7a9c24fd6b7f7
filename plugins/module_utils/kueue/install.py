# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Kueue's install manifests made ready for a site: image, feature gates, device-class
mappings, placement.

Standard library only; pure. Input: the documents of Kueue's release manifests (the
``manifests.yaml`` Kueue publishes with each release, or the lab's rendering of the
module's ``config/default``: ``gpufleet.lab.kueue``), parsed. Output: the same documents
with

* the manager container's image set to ``kueue_image`` (pull policy ``IfNotPresent``: an
  air-gapped site pre-loads it), and ``--feature-gates`` carrying the release's quota gate
  (``kueue.versions.KueueRelease.feature_gates_arg``);
* the ``Configuration`` in the manager's ConfigMap (``controller_manager_config.yaml``)
  given ``resources.deviceClassMappings`` (the version table's ``mapping_field``), written
  as JSON text (a YAML document Kueue's decoder reads);
* optionally host networking, the API server address (``KUBERNETES_SERVICE_HOST`` /
  ``_PORT``), a node selector and tolerations: for clusters where pods cannot reach
  Services (no kube-proxy), as the lab;
* the visibility ``APIService`` objects dropped unless asked for: an aggregated API whose
  Service is unreachable makes API discovery fail for every client.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import versions as kv

__all__ = [
    "CONFIG_KEY",
    "MANAGER_DEPLOYMENT",
    "KueueManifestError",
    "plan",
    "prepare_manifests",
]

#: Name of Kueue's Deployment and ConfigMap in its release manifests
#: (config/default: namePrefix ``kueue-``).
MANAGER_DEPLOYMENT = "kueue-controller-manager"
MANAGER_CONFIG = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
#: Pod-template annotation carrying a hash of the written Configuration.
CONFIG_HASH_ANNOTATION = "gpufleet.io/kueue-config-sha256"


class KueueManifestError(ValueError):
    """The manifests lack what Kueue's release manifests always hold."""


def _find(docs: Sequence[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for doc in docs:
        if doc.get("kind") == kind and doc.get("metadata", {}).get("name") == name:
            return doc
    raise KueueManifestError(
        f"the Kueue manifests have no {kind} {name}; give kueue_manifests the "
        "manifests.yaml of a Kueue release"
    )


def prepare_manifests(
    docs: Sequence[Mapping[str, Any]],
    release: kv.KueueRelease,
    *,
    image: str,
    config: Mapping[str, Any],
    mappings: list[dict[str, Any]],
    extra_gates: Mapping[str, bool] | None = None,
    host_network: bool = False,
    api_server: str = "",
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    visibility_api: bool = False,
) -> list[dict[str, Any]]:
    """The documents to apply (see the module docstring); ``config`` is the Configuration
    read from the manifests' ConfigMap (parsed YAML), ``api_server`` ``host:port`` or
    empty. Raises KueueManifestError for manifests without the Deployment or ConfigMap,
    KueueVersionError for a gate the release lacks."""
    out = [copy.deepcopy(dict(d)) for d in docs if d]
    if not visibility_api:
        out = [d for d in out if d.get("kind") != "APIService"]
    deployment = _find(out, "Deployment", MANAGER_DEPLOYMENT)
    config_map = _find(out, "ConfigMap", MANAGER_CONFIG)
    if config.get("apiVersion") != release.config_api:
        raise KueueManifestError(
            f"the Kueue Configuration is {config.get('apiVersion')!r}, Kueue {release.version} "
            f"reads {release.config_api}; give kueue_manifests of Kueue {release.version}"
        )
    new_config = copy.deepcopy(dict(config))
    parent, leaf = release.mapping_field.split(".", 1)
    section = dict(new_config.get(parent) or {})
    section[leaf] = mappings
    new_config[parent] = section
    # JSON is YAML: Kueue reads the file with a YAML decoder.
    text = json.dumps(new_config, indent=2, sort_keys=True) + "\n"
    config_map["data"] = {**(config_map.get("data") or {}), CONFIG_KEY: text}
    pod = deployment["spec"]["template"]["spec"]
    containers = pod["containers"]
    manager = next((c for c in containers if c.get("name") == "manager"), containers[0])
    manager["image"] = image
    manager["imagePullPolicy"] = "IfNotPresent"
    gates = release.feature_gates_arg(dict(extra_gates or {}))
    args = [a for a in manager.get("args", []) if not str(a).startswith("--feature-gates=")]
    manager["args"] = [*args, f"--feature-gates={gates}"]
    if host_network:
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
    if api_server:
        host, _sep, port = api_server.rpartition(":")
        env = [
            e
            for e in manager.get("env", [])
            if e.get("name") not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
        ]
        env += [
            {"name": "KUBERNETES_SERVICE_HOST", "value": host},
            {"name": "KUBERNETES_SERVICE_PORT", "value": port},
        ]
        manager["env"] = env
    if node_selector:
        pod["nodeSelector"] = dict(node_selector)
    if tolerations:
        pod["tolerations"] = [dict(t) for t in tolerations]
    return out


def plan(
    docs: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything the ``kueue`` role applies, from Kueue's manifests ``docs`` and the role's
    ``settings`` (the ``kueue_*`` variables without the prefix: version, image,
    device_classes, profile_classes, teams, cohorts, flavor, flavor_node_labels,
    priority_classes, extra_gates, host_network, api_server, node_selector, tolerations,
    visibility_api). Returns ``{"install": [...], "device_classes": [...],
    "queues": [...], "feature_gates": str, "mappings": [...]}``, in apply order.
    ``config``: the manifests' Configuration parsed (it is YAML text in the ConfigMap;
    the caller parses it); None reads it as JSON. Raises KueueVersionError,
    KueueInputError or KueueManifestError, each naming the variable."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq

    release = kv.kueue_release(str(settings.get("version") or ""))
    profiles = list(settings.get("profile_classes") or [])
    mappings = kq.device_class_mappings(list(settings.get("device_classes") or []), profiles)
    teams = kq.parse_teams(settings.get("teams") or [])
    config_map = _find([dict(d) for d in docs if d], "ConfigMap", MANAGER_CONFIG)
    if config is None:
        try:
            text = (config_map.get("data") or {}).get(CONFIG_KEY) or ""
            config = ig.load_json(str(text), f"ConfigMap {MANAGER_CONFIG} {CONFIG_KEY}")
        except ig.InputError:
            config = None
    if not isinstance(config, Mapping):
        raise KueueManifestError(
            f"the ConfigMap {MANAGER_CONFIG} holds no Configuration under {CONFIG_KEY}"
        )
    install = prepare_manifests(
        docs,
        release,
        image=str(settings.get("image") or ""),
        config=config,
        mappings=mappings,
        extra_gates=settings.get("extra_gates") or {},
        host_network=bool(settings.get("host_network")),
        api_server=str(settings.get("api_server") or ""),
        node_selector=settings.get("node_selector") or {},
        tolerations=settings.get("tolerations") or [],
        visibility_api=bool(settings.get("visibility_api")),
    )
    # A changed Configuration rolls the manager: Kueue reads its file at start only.
    written = _find(install, "ConfigMap", MANAGER_CONFIG)["data"][CONFIG_KEY]
    template = _find(install, "Deployment", MANAGER_DEPLOYMENT)["spec"]["template"]
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[CONFIG_HASH_ANNOTATION] = hashlib.sha256(written.encode()).hexdigest()[:16]
    return {
        "install": install,
        "device_classes": [
            kq.profile_device_class_object(p, release.resource_api) for p in profiles
        ],
        "queues": kq.queue_objects(
            release,
            teams,
            flavor=str(settings.get("flavor") or "gpu"),
            flavor_node_labels=settings.get("flavor_node_labels") or {},
            cohorts=settings.get("cohorts") or [],
            priority_classes=settings.get("priority_classes") or [],
        ),
        "feature_gates": release.feature_gates_arg(dict(settings.get("extra_gates") or {})),
        "mappings": mappings,
    }
