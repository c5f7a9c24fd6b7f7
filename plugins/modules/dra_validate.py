#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Validate a DRA GPU cluster: versions, gates, API, nodes, hosts, claims (and a smoke test)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: dra_validate
short_description: Validate a Kubernetes cluster that allocates NVIDIA GPUs with DRA
version_added: "0.1.0"
description:
  - Runs on the control host. Lists each kind once (nodes, pods, ResourceSlices,
    ResourceClaims, DeviceClasses, DaemonSets, plus C(/version), C(/apis/resource.k8s.io)
    and the two kubeadm ConfigMaps), one request per page of O(page_size) (ResourceSlices
    at most 500 and Nodes at most 1000 a page), so a cluster of 1,000 GPU nodes costs
    about 20 API requests. Each page is cut down to the fields the checks read and
    stored compressed as it arrives; the checks walk the pages again one at a time, so
    memory holds a few pages and small per-pod records, not the objects.
  - Judges what it listed, the gate facts of every node (M(gpufleet.cluster.dra_gate_audit_facts))
    and the host facts the playbook C(validate.yml) gathered, and returns a report of
    checks, each with a stable id (C(versions.*), C(gates.*), C(api.*), C(nodes.*),
    C(hosts.*), C(claims.*), C(smoke.*)), a status (C(pass), C(warn), C(fail), C(skip) with
    a reason), the evidence read and the fix.
  - Read-only, except with O(smoke=true), which creates a namespace with ResourceClaimTemplates
    and pods, waits for them and deletes it again (kept on failure when
    O(smoke_keep_on_failure=true)).
  - The module does not fail when checks fail; it fails only when the cluster cannot be
    read at all. C(gpufleet validate) turns the report into exit codes.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML
  - kubernetes (the Python client) and urllib3, which it installs
  - msgspec (recommended), which decodes the listed pages faster; without it the
    standard library's json decodes them, to the same result
  - cel-python (C(celpy)) and lark, which it installs, to explain pending claims
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.kube_auth

options:
  gpu_nodes:
    description: Kubernetes node names of the GPU nodes (the inventory group C(gpu_nodes)).
    type: list
    elements: str
    default: []
  node_groups:
    description:
      - Inventory groups that hold a GPU node, group name to the Kubernetes node names of
        all its hosts, the GPU group itself left out (unless O(gpu_path_moves) names it).
        The C(gpu_path_*) groups declare the GPU path of their nodes
        (C(gpu_path_device_plugin), C(gpu_path_dra); a GPU node in neither is on DRA); the
        groups whose hosts are all GPU nodes make the pools, each node in its innermost
        ones.
      - The DRA checks C(nodes.plugin-running) and C(nodes.resourceslices) leave out the
        nodes of device-plugin pools, which C(nodes.device-plugin-gpus) judges;
        C(nodes.gpu-paths) reports per pool the path declared against the path its nodes
        advertise. Empty, every GPU node is on DRA in one pool.
    type: dict
    default: {}
  gpu_path_moves:
    description:
      - Pools moved by C(gpufleet migrate) whose inventory group is not yet in its new
        C(gpu_path_*) group; their nodes are judged on the new path. Pool group name (a
        group of O(node_groups)) to path, C(device-plugin) or C(dra).
      - Every check that reads a pool's declared path (C(nodes.gpu-paths),
        C(nodes.device-plugin-gpus), C(nodes.gpu-path-dual) and the DRA checks leaving the
        device-plugin pools out) reads the moved-to path; C(nodes.gpu-paths) names each
        move in its evidence.
      - A path that is neither, a pool that is no group of O(node_groups), or two pools
        moved to different paths that share a node, fail the module before the cluster is
        read (role variable C(validate_gpu_path_moves)).
    type: dict
    default: {}
  hosts:
    description:
      - "Per host what the playbook read: C(host), C(node), C(gpu_node), C(simulator),
        C(gpu) (the M(gpufleet.cluster.gpu_facts) result), C(commands) (the looped command
        results: toolkit, containerd_version, containerd, packages, holds, kubeadm_version),
        C(cdi) (slurp results), C(gates), C(scheduler), C(mig_layout)."
      - See C(plugins/module_utils/validate/hosts.py). Empty, the host checks are left out.
    type: list
    elements: dict
    default: []
  gate_facts:
    description:
      - What M(gpufleet.cluster.dra_gate_audit_facts) returned per node (its C(facts)); when
        omitted, taken from the C(gates) entry of each O(hosts) record.
    type: raw
  gate_hosts:
    description: Hosts that must have gate facts.
    type: list
    elements: str
    default: []
  scheduler:
    description:
      - Per control-plane host the check-mode result of
        M(gpufleet.cluster.scheduler_dynamic_resources) with C(host) added; when empty, taken from
        the C(scheduler) entry of each O(hosts) record.
    type: list
    elements: dict
    default: []
  kubernetes_version:
    description: Version to judge against; the kube-apiserver's C(/version) when omitted.
    type: str
  features:
    description: DRA features wanted (as for C(gpufleet gates plan)).
    type: list
    elements: str
    default: []
  gates:
    description: Explicit feature-gate wishes, gate name to boolean.
    type: dict
    default: {}
  gpu_labels:
    description: Labels every GPU node must carry.
    type: dict
    default: {nvidia.com/gpu.present: "true"}
  driver:
    description: DRA driver name of the GPU driver.
    type: str
    default: gpu.nvidia.com
  plugin_namespace:
    description: Namespace of the driver's kubelet plugin pods; empty for any.
    type: str
    default: ""
  plugin_selector:
    description: Label selector of the driver's kubelet plugin pods.
    type: str
    default: app.kubernetes.io/component=kubelet-plugin
  device_classes:
    description: DeviceClasses that must exist.
    type: list
    elements: str
    default: [gpu.nvidia.com, mig.nvidia.com]
  kueue:
    description:
      - Kueue checks (area C(kueue)); omit to skip them. Keys C(namespace) (default
        C(kueue-system)), C(version) (a row of the Kueue version table), C(device_classes)
        (the driver's classes that must be mapped) and C(profiles) (MIG profiles with a
        class of their own).
    type: dict
  pending_threshold:
    description: Seconds a ResourceClaim may stay unallocated before C(claims.pending) reports it.
    type: int
    default: 300
  min_driver_version:
    description: Lowest NVIDIA driver version accepted on GPU nodes.
    type: str
    default: "565.0.0"
  page_size:
    description:
      - Items per list request (ResourceSlices at most 500, Nodes at most 1000).
    type: int
    default: 2000
  listing_file:
    description:
      - Judge the listing M(gpufleet.cluster.dra_validate_listing) writes to this file on
        the control host instead of listing the cluster here. The playbook C(validate.yml)
        starts that module in the background before it reads the nodes, so that the
        cluster is listed while the nodes are read; this module waits for the file (up to
        O(listing_timeout) seconds), and fails at once when the listing process ended
        without writing it.
      - The file must be this user's own and not writable by others.
    type: path
  listing_timeout:
    description: Seconds to wait at most for O(listing_file).
    type: int
    default: 1800
  smoke:
    description: Run the smoke test (creates and deletes objects).
    type: bool
    default: false
  smoke_image:
    description: Image of the smoke pods.
    type: str
    default: busybox:1
  smoke_image_pull_policy:
    description: imagePullPolicy of the smoke pods.
    type: str
    default: IfNotPresent
  smoke_command:
    description: Command of the smoke pods; it should print the GPU the container sees.
    type: list
    elements: str
  smoke_templates:
    description: Templates to try, as for C(claims.templates.build) (C(kind) plus its parameters).
    type: list
    elements: dict
    default: []
  smoke_profiles:
    description: MIG profiles to try, one C(mig-slice) template each.
    type: list
    elements: str
    default: []
  smoke_timeout:
    description: Seconds each smoke pod may take.
    type: int
    default: 180
  smoke_keep_on_failure:
    description: Keep the smoke namespace when a smoke check fails.
    type: bool
    default: true
  smoke_only:
    description:
      - Run the smoke test alone (implies O(smoke=true)), on a listing of the ResourceSlices
        only, and return its checks as the report. C(playbooks/validate.yml) runs it before
        it reads the nodes and passes its checks as O(smoke_results), so that the GPU
        instances of a dynamic-MIG node are read after the smoke claim was unprepared.
    type: bool
    default: false
  smoke_results:
    description:
      - The checks of an earlier O(smoke_only) run (its C(report.checks)), taken into this
        report instead of running the smoke test again. Each dynamic-MIG smoke check (its
        C(data.dynamic_mig_node)) fails when C(nodes.dynamic-mig-leftover-gi) finds a GPU
        instance owned by no claim on its node, judged on the O(hosts) facts read after it.
    type: list
    elements: dict
  report_file:
    description: Write the report (JSON) to this file on the control host.
    type: path
  junit_file:
    description:
      - Write the report as JUnit XML to this file on the control host (one test suite per
        area, one test case per check), as C(gpufleet validate --junit) writes it.
    type: path
  return_junit:
    description: Also return the JUnit XML in the result (key C(junit)), for C(set_stats).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: Read-only except the smoke test, which does not run in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: gpufleet.cluster.dra_gate_audit
  - module: gpufleet.cluster.gpu_facts
"""

EXAMPLES = r"""
- name: Validate | Judge the cluster
  gpufleet.cluster.dra_validate:
    kubeconfig: /etc/kubernetes/admin.conf
    gpu_nodes: [gpu-1, gpu-2]
    report_file: /tmp/validate.json
  register: validate

- name: Validate | With a smoke test
  gpufleet.cluster.dra_validate:
    gpu_nodes: [gpu-1]
    smoke: true
    smoke_image: registry.example.com/cuda:12-base
    smoke_command: [nvidia-smi, -L]
"""

RETURN = r"""
report:
  description:
    - The report. C(status) (C(pass) or C(fail)), C(counts) per status, C(meta)
      (C(kubernetes_version), C(api_requests), C(api_request_log), C(objects),
      C(timings_s), C(duration_s)) and C(checks), failures first, each with C(id),
      C(area), C(title), C(status), C(summary), C(problems) (C(subject), C(status),
      C(message)), C(evidence) (C(source), C(detail)), C(fix), C(reason), C(data) and
      C(details) (lines of what the check found, such as the GPU path per pool).
  returned: success
  type: dict
exit_code:
  description: 0 when no check failed, 1 when one did.
  returned: success
  type: int
junit:
  description: The report as JUnit XML (the text written to C(junit_file)).
  returned: when return_junit is true
  type: str
"""

import json
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing_file
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import files
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import RefusedValue
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    GPU_DEVICE_CLASSES,
    NVIDIA_DRIVER,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import run as validate_run


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            **vk.kube_auth_argspec(),
            gpu_nodes=dict(type="list", elements="str", default=[]),
            node_groups=dict(type="dict", default={}),
            gpu_path_moves=dict(type="dict", default={}),
            hosts=dict(type="list", elements="dict", default=[]),
            gate_facts=dict(type="raw"),
            gate_hosts=dict(type="list", elements="str", default=[]),
            scheduler=dict(type="list", elements="dict", default=[]),
            kubernetes_version=dict(type="str"),
            features=dict(type="list", elements="str", default=[]),
            gates=dict(type="dict", default={}),
            gpu_labels=dict(type="dict", default={"nvidia.com/gpu.present": "true"}),
            driver=dict(type="str", default=NVIDIA_DRIVER),
            plugin_namespace=dict(type="str", default=""),
            plugin_selector=dict(type="str", default="app.kubernetes.io/component=kubelet-plugin"),
            device_classes=dict(type="list", elements="str", default=list(GPU_DEVICE_CLASSES)),
            pending_threshold=dict(type="int", default=300),
            min_driver_version=dict(type="str", default="565.0.0"),
            page_size=dict(type="int", default=2000),
            listing_file=dict(type="path"),
            listing_timeout=dict(type="int", default=1800),
            smoke=dict(type="bool", default=False),
            smoke_image=dict(type="str", default="busybox:1"),
            smoke_image_pull_policy=dict(type="str", default="IfNotPresent"),
            smoke_command=dict(type="list", elements="str"),
            smoke_templates=dict(type="list", elements="dict", default=[]),
            smoke_profiles=dict(type="list", elements="str", default=[]),
            smoke_timeout=dict(type="int", default=180),
            smoke_keep_on_failure=dict(type="bool", default=True),
            smoke_only=dict(type="bool", default=False),
            smoke_results=dict(type="list", elements="dict"),
            kueue=dict(type="dict"),
            report_file=dict(type="path"),
            junit_file=dict(type="path"),
            return_junit=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params)
    params["smoke"] = params["smoke"] or params["smoke_only"]
    if module.check_mode and params["smoke"]:
        module.warn("smoke=true is ignored in check mode: the smoke test creates objects")
        params["smoke"] = False
    if params["page_size"] < 1:
        module.fail_json(
            msg=f"page_size={params['page_size']}: give a number of items >= 1 (validate_page_size)"
        )
    if params["listing_timeout"] < 1:
        module.fail_json(
            msg=f"listing_timeout={params['listing_timeout']}: give the seconds to wait for "
            "the cluster listing, 1 or more (validate_listing_timeout)"
        )
    try:
        validate_run.gpu_path_moves(params)
    except RefusedValue as err:
        module.fail_json(msg=str(err))
    try:
        kube = vk.Kube(params["kubeconfig"], params["context"])
        if params["smoke_only"]:
            report = validate_run.run_smoke_only(kube, params) if params["smoke"] else vr.merge()
        else:
            report = validate_run.run(kube, params)
    except vk.KubeError as err:
        module.fail_json(msg=f"cannot validate: the API server could not be read: {err}")
    except listing_file.ListingFileError as err:
        module.fail_json(msg=f"cannot validate: {err}")
    except Exception as err:  # a defect: report it with the trace instead of a bare crash
        module.fail_json(msg=f"validation crashed: {err}", exception=traceback.format_exc())
    for key, text in (
        ("report_file", lambda: json.dumps(report, indent=2)),
        ("junit_file", lambda: vr.render_junit(report)),
    ):
        if params[key]:
            files.write_output(module, f"{key} (validate_{key})", params[key], text())
    code = vr.exit_code(report)
    extra = {"junit": vr.render_junit(report)} if params["return_junit"] else {}
    module.exit_json(
        changed=bool(params["smoke"]),
        report=report,
        **extra,
        exit_code=code,
        msg=f"{report['counts']['fail']} failed, {report['counts']['warn']} warnings, "
        f"{report['counts']['skip']} skipped, {report['counts']['pass']} passed",
    )


if __name__ == "__main__":
    main()
