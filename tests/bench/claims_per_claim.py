"""Leaked-claim detection the per-claim way, the comparison point of the scale benchmark
for ``gpufleet claims gc``: list the ResourceClaims (500 per page, kubectl's chunk size),
then look up every pod a claim is reserved for, and the owner pod of a generated claim,
one GET each, with the ``kubernetes`` client.

A claim leaked when every pod it is reserved for is gone or was replaced (another UID),
or when it was generated for a pod that is gone.

Usage: ``python -m tests.bench.claims_per_claim KUBECONFIG [LIMIT]``; LIMIT looks up only
the first LIMIT claims (the list is still read whole). Prints JSON: ``claims`` (looked
up), ``leaked`` (``namespace/name``, sorted), ``requests`` (by kind).
"""

from __future__ import annotations

import json
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException


def main(argv: list[str]) -> int:
    kubeconfig = argv[0]
    limit = int(argv[1]) if len(argv) > 1 else None
    api = config.new_client_from_config(config_file=kubeconfig)
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    requests = {"list resourceclaims": 0, "get pod": 0}
    claims: list[dict] = []
    token = None
    while True:
        requests["list resourceclaims"] += 1
        page = custom.list_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceclaims", limit=500, _continue=token
        )
        claims += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            break
    if limit is not None:
        claims = claims[:limit]

    def pod_uid(namespace: str, name: str) -> str | None:
        requests["get pod"] += 1
        try:
            return core.read_namespaced_pod(name, namespace).metadata.uid
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    leaked = []
    for c in claims:
        meta = c["metadata"]
        ns = meta["namespace"]
        reserved = (c.get("status") or {}).get("reservedFor") or []
        pods = [r for r in reserved if r.get("resource") == "pods"]
        dead = [r for r in pods if pod_uid(ns, r["name"]) != r.get("uid")]
        owner = next(
            (
                o
                for o in meta.get("ownerReferences") or []
                if o.get("controller") and o.get("kind") == "Pod"
            ),
            None,
        )
        owner_gone = owner is not None and pod_uid(ns, owner["name"]) != owner.get("uid")
        if (pods and len(dead) == len(pods)) or (owner_gone and not pods):
            leaked.append(f"{ns}/{meta['name']}")
    print(json.dumps({"claims": len(claims), "leaked": sorted(leaked), "requests": requests}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
