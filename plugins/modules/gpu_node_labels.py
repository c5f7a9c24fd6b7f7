#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Label and taint the GPU nodes of a cluster with one list and only the patches needed."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_node_labels
short_description: Label and taint GPU nodes with one node list and only the patches needed
version_added: "0.1.0"
description:
  - Sets labels (default C(nvidia.com/gpu.present=true)) and optional taints on the named
    Kubernetes nodes, and with O(remove_from_others) removes them from every other node.
  - Labels of single nodes (O(node_labels)) are merged over O(labels) on their node; the
    gpu_node_labels role sets the GPU path of each node's pool this way
    (C(gpufleet.io/gpu-path=device-plugin) or C(=dra)).
  - The NVIDIA DRA driver's kubelet-plugin DaemonSet requires one of
    C(feature.node.kubernetes.io/pci-10de.present=true),
    C(feature.node.kubernetes.io/cpu-model.vendor_id=NVIDIA) or C(nvidia.com/gpu.present=true)
    on a node; without Node Feature Discovery or the GPU Operator nothing sets them and the
    DaemonSet schedules nowhere. This module sets the last one.
  - Lists the nodes once (paginated with C(limit)/C(continue), O(page_size) per page), computes
    what differs, and sends one JSON merge patch per node that differs, eight at a time;
    nodes already right cost no request. A taint change replaces C(spec.taints) with
    C(metadata.resourceVersion) as a precondition; on 409 Conflict the node is read again
    and the patch recomputed (at most 3 times).
  - 'Runs where the C(kubernetes) Python client is installed, normally the control host
    (C(delegate_to: localhost), C(run_once: true)).'
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML
  - kubernetes (the Python client) and urllib3, which it installs
  - msgspec (recommended), which decodes the listed pages faster; without it the
    standard library's json decodes them, to the same result
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.kube_auth

options:
  nodes:
    description:
      - Kubernetes node names of the GPU nodes (C(metadata.name) of the Node objects).
    type: list
    elements: str
    required: true
  labels:
    description:
      - Labels to set on every node of O(nodes), key to value. Values are strings; an
        unquoted YAML boolean becomes C("true")/C("false").
    type: dict
    default: {"nvidia.com/gpu.present": "true"}
  node_labels:
    description:
      - Labels of single nodes, node name (one of O(nodes)) to labels, merged over O(labels)
        on that node (a key here wins).
      - With O(remove_from_others), their keys are removed from the nodes not in O(nodes) too.
    type: dict
    default: {}
  taints:
    description:
      - Taints to set on every node of O(nodes). A taint with the same key and effect but
        another value is replaced; other taints are kept.
    type: list
    elements: dict
    default: []
    suboptions:
      key:
        description: Taint key, for example C(nvidia.com/gpu).
        type: str
        required: true
      value:
        description: Taint value (optional).
        type: str
      effect:
        description: Taint effect.
        type: str
        required: true
        choices: [NoSchedule, PreferNoSchedule, NoExecute]
  remove_from_others:
    description:
      - Remove the label keys of O(labels) (whatever their value) and the taints of O(taints)
        (by key and effect) from every node not in O(nodes).
      - Do not use where Node Feature Discovery or the GPU Operator also manages these labels.
    type: bool
    default: false
  missing:
    description:
      - What to do when a name of O(nodes) has no Node object. C(fail) fails listing the
        names (nothing is patched); C(warn) patches the others and warns.
    type: str
    choices: [fail, warn]
    default: fail
  page_size:
    description:
      - Nodes per list page (the C(limit) parameter of the list call).
    type: int
    default: 500
attributes:
  check_mode:
    support: full
    details: In check mode the nodes are listed but nothing is patched.
  diff_mode:
    support: full
    details: Per changed node, the labels and taints this module touches, before and after.
  platform:
    platforms: posix
notes:
  - The number of API requests is returned in RV(api_requests); a run that changes nothing
    makes only the list requests.
seealso:
  - module: kubernetes.core.k8s
"""

EXAMPLES = r"""
- name: GPU labels | Label the GPU nodes for the NVIDIA DRA driver
  gpufleet.cluster.gpu_node_labels:
    kubeconfig: /etc/kubernetes/admin.conf
    nodes: [gpu-a-01, gpu-a-02]
  delegate_to: localhost
  run_once: true

- name: GPU labels | One pool on the device plugin, one on DRA
  gpufleet.cluster.gpu_node_labels:
    nodes: [gpu-a-01, gpu-b-01]
    node_labels:
      gpu-a-01: {gpufleet.io/gpu-path: device-plugin}
      gpu-b-01: {gpufleet.io/gpu-path: dra}
  delegate_to: localhost
  run_once: true

- name: GPU labels | Label and taint, and clean nodes that are no longer GPU nodes
  gpufleet.cluster.gpu_node_labels:
    nodes: "{{ groups['gpu_nodes'] | map('extract', hostvars, 'kubernetes_node_name') | list }}"
    labels:
      nvidia.com/gpu.present: "true"
      nvidia.com/dra-kubelet-plugin: "true"
    taints:
      - {key: nvidia.com/gpu, effect: NoSchedule}
    remove_from_others: true
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
changed_nodes:
  description: Names of the nodes patched (or, in check mode, that would be).
  returned: always
  type: list
  elements: str
  sample: [gpu-a-01]
patches:
  description: One item per node patched, with the label and taint changes.
  returned: always
  type: list
  elements: dict
  sample:
    - node: gpu-a-01
      role: gpu
      labels: {nvidia.com/gpu.present: [null, "true"]}
      taints_added: [{key: nvidia.com/gpu, effect: NoSchedule}]
      taints_removed: []
missing_nodes:
  description: Names of O(nodes) with no Node object.
  returned: always
  type: list
  elements: str
unchanged_nodes:
  description: Number of nodes of O(nodes) that already had the labels and taints.
  returned: always
  type: int
nodes_listed:
  description: Number of Node objects the list returned.
  returned: always
  type: int
api_requests:
  description: API requests this run made, by verb, and their total.
  returned: always
  type: dict
  sample: {list: 1, patch: 2, get: 0, total: 3}
"""

import threading
import traceback
from typing import Any, TypedDict

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.node_labels import (
    PATCH_WORKERS,
    NodeLabelError,
    apply_patches,
    normalize_labels,
    normalize_node_labels,
    normalize_taints,
    plan_labels,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.client import (
    Kube,
    KubeError,
)

try:
    # the client vk.api_client builds
    import kubernetes  # noqa: F401  # pylint: disable=unused-import

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()

MERGE_PATCH = "application/merge-patch+json"
NODES = "/api/v1/nodes"


class NodeApi:
    """The three requests this module makes, counted (patches and gets come from
    several threads), as raw JSON through ``kube.client.Kube``."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.counts = {"list": 0, "patch": 0, "get": 0}
        self.lock = threading.Lock()

    def _count(self, verb: str) -> None:
        with self.lock:
            self.counts[verb] += 1

    def list_all(self, page_size: int) -> list[dict]:
        """Every node, ``page_size`` per request (``Kube.pages``), each cut down as its
        page arrives to what the plan reads (``trim_node_labels``)."""
        items: list[dict] = []
        for page in self.kube.pages(NODES, page_size, trim=trim_node_labels, schema=NODE_SCHEMA):
            self._count("list")
            items.extend(page)
        return items

    def get(self, name: str) -> dict:
        self._count("get")
        return self.kube.get(f"{NODES}/{name}")

    def patch(self, name: str, body: dict) -> None:
        self._count("patch")
        self.kube.request(
            "PATCH", f"{NODES}/{name}", body=body, content_type=MERGE_PATCH, decode=_ignore
        )

    def summary(self) -> dict:
        with self.lock:
            return dict(self.counts, total=sum(self.counts.values()))


def trim_node_labels(node: dict) -> dict:
    """A Node with only what ``node_labels.plan_labels`` reads: ``metadata.name``,
    ``metadata.labels``, ``metadata.resourceVersion`` and ``spec.taints``."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "labels", "resourceVersion") if k in meta},
        "spec": {"taints": spec["taints"]} if "taints" in spec else {},
    }


#: What ``trim_node_labels`` reads of a Node: the fast decoder skips the rest (its status,
#: images and conditions) unread (``kube.client.fast_page``). Written as calls: the class
#: form's annotations are text under ``from __future__ import annotations``, which the
#: decoder would resolve in the module's namespace, and AnsiballZ runs modules under
#: another one.
NODE_SCHEMA = TypedDict(  # noqa: UP013
    "Node",
    {
        "metadata": TypedDict(
            "NodeMetadata", dict.fromkeys(("name", "labels", "resourceVersion"), Any), total=False
        )
        | None,
        "spec": TypedDict("NodeSpec", {"taints": Any}, total=False) | None,
    },
    total=False,
)


def _ignore(data: bytes | str) -> None:
    """The patched node is not needed: not decoding it saves a JSON parse per patch."""
    return None


#: The module's options (DOCUMENTATION describes each).
ARGUMENT_SPEC = dict(
    **vk.kube_auth_argspec(),
    nodes=dict(type="list", elements="str", required=True),
    labels=dict(type="dict", default={"nvidia.com/gpu.present": "true"}),
    node_labels=dict(type="dict", default={}),
    taints=dict(
        type="list",
        elements="dict",
        default=[],
        options=dict(
            key=dict(type="str", required=True, no_log=False),
            value=dict(type="str"),
            effect=dict(
                type="str",
                required=True,
                choices=["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ),
        ),
    ),
    remove_from_others=dict(type="bool", default=False),
    missing=dict(type="str", choices=["fail", "warn"], default="fail"),
    page_size=dict(type="int", default=500),
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    params = module.params
    if params["page_size"] < 1:
        module.fail_json(
            msg=f"page_size={params['page_size']} must be at least 1; fix: use e.g. 500"
        )
    try:
        labels = normalize_labels(params["labels"], "labels")
        node_labels = normalize_node_labels(params["node_labels"], params["nodes"])
        taints = normalize_taints(
            [{k: v for k, v in t.items() if v is not None} for t in params["taints"]], "taints"
        )
    except NodeLabelError as exc:
        module.fail_json(msg=str(exc))
    try:
        # one connection per patch in flight
        api_client = vk.api_client(params["kubeconfig"], params["context"], PATCH_WORKERS)
    except KubeError as exc:  # kubeconfig missing, unreadable, or its context absent
        module.fail_json(
            msg=f"cannot load kubeconfig={params['kubeconfig']!r} "
            f"context={params['context']!r}: {exc.message}; fix: point kubeconfig at a "
            "readable kubeconfig file"
        )
    api = NodeApi(Kube.from_client(api_client))
    result: dict = {"changed": False, "api_requests": api.summary()}
    try:
        nodes = api.list_all(params["page_size"])
        plan = plan_labels(
            nodes, params["nodes"], labels, taints, params["remove_from_others"], node_labels
        )
    except NodeLabelError as exc:
        module.fail_json(msg=str(exc), api_requests=api.summary())
    except KubeError as exc:
        module.fail_json(
            msg=f"listing nodes failed: {exc}; fix: check that the kubeconfig's user may "
            "list nodes",
            api_requests=api.summary(),
        )
    result.update(
        missing_nodes=plan.missing,
        unchanged_nodes=len(plan.unchanged),
        nodes_listed=plan.nodes_seen,
    )
    if plan.missing and params["missing"] == "fail":
        module.fail_json(
            msg=f"{len(plan.missing)} of {len(params['nodes'])} nodes have no Node object: "
            f"{', '.join(plan.missing)}; fix: use the Kubernetes node names (set "
            "kubernetes_node_name per host when it differs from the inventory name), join the "
            "nodes first, or set missing: warn",
            changed_nodes=[],
            patches=[],
            api_requests=api.summary(),
            **{k: result[k] for k in ("missing_nodes", "unchanged_nodes", "nodes_listed")},
        )
    if plan.missing:
        module.warn(f"nodes without a Node object, skipped: {', '.join(plan.missing)}")
    if module.check_mode:
        done = list(plan.patches)
    else:
        done, failure = apply_patches(
            plan.patches,
            api.patch,
            api.get,
            labels,
            taints,
            is_conflict=lambda err: isinstance(err, KubeError) and err.status == 409,
            node_labels=node_labels,
        )
        if failure is not None:
            module.fail_json(
                msg=f"patching node {failure.patch.name} failed: {failure.error}; "
                "fix: check that the kubeconfig's user may patch nodes",
                changed=bool(done),
                changed_nodes=[p.name for p in done],
                patches=[p.to_dict() for p in done],
                api_requests=api.summary(),
            )
    result.update(
        changed=bool(done),
        changed_nodes=[p.name for p in done],
        patches=[p.to_dict() for p in done],
        api_requests=api.summary(),
    )
    if module._diff and done:
        result["diff"] = plan.diff()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
