#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Record the state of one node in the JSON report of a rolling upgrade."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: upgrade_report
short_description: Record one node's upgrade state in a JSON report file
version_added: "0.1.0"
description:
  - Merges one node's entry into the upgrade report, a JSON file on the control host
    (C(upgrade_report_path)), under an exclusive lock so that the hosts of one batch can
    write at the same time.
  - "The report is data first; C(gpufleet upgrade) and a rerun read it. Shape:
    C({target, updated, nodes: {<host>: {node, state, phase, version, cause, cordoned,
    cordoned_by_upgrade, timings_s, updated}}, events: [...]}) (timestamps in UTC, ISO
    8601; timings in seconds)."
  - C(cordoned_by_upgrade) marks a node that the upgrade drained and left cordoned (a
    failure after the drain); a rerun to the same target resumes it and uncordons it. A
    node cordoned by someone else before the upgrade is never marked.
  - C(state) is one of C(upgraded), C(skipped), C(in-progress), C(failed); a failed node keeps
    its C(phase) (where it stopped) and C(cause) (the error). Timings of one attempt are
    merged into C(timings_s); an C(in-progress) entry starts them afresh.
author:
  - gpufleet maintainers
options:
  path:
    description: Report file on the control host (its directory is created).
    type: path
    required: true
  target:
    description: The release being upgraded to.
    type: str
    required: true
  host:
    description: Inventory host. One of O(host) and O(hosts) is required.
    type: str
  node:
    description: Kubernetes node name (with O(host)).
    type: str
    default: ""
  hosts:
    description:
      - Several nodes given the same state, phase and cause at once (one file write), each
        C({host, name}) as the upgrade_plan module returns them.
    type: list
    elements: dict
  state:
    description: Where the node stands.
    type: str
    required: true
    choices: [upgraded, skipped, in-progress, failed]
  phase:
    description:
      - The phase reached (drain, kubeadm-upgrade-node, packages, kubelet-restart, ready,
        dra-plugin, uncordon).
    type: str
    default: ""
  cause:
    description: Why the node failed (the task's message).
    type: str
    default: ""
  cordoned:
    description: Whether the node is left cordoned.
    type: bool
  cordoned_by_upgrade:
    description:
      - Whether the upgrade itself left the node cordoned (it drained it); a rerun
        uncordons such a node once it is upgraded. Omitted - the entry keeps its value
        (false for a new entry).
    type: bool
  timings:
    description: Seconds per phase (merged into the node's timings_s).
    type: dict
    default: {}
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Upgrade | Report the node as failed
  gpufleet.cluster.upgrade_report:
    path: /var/log/gpufleet/upgrade-report.json
    target: 1.37.2
    host: gpu-1
    node: gpu-1
    state: failed
    phase: drain
    cause: "Cannot evict pod as it would violate the pod's disruption budget."
    cordoned: false
  delegate_to: localhost
"""

RETURN = r"""
entry:
  description: The node's entry as written (the last one with O(hosts)).
  returned: success
  type: dict
"""

import datetime
import fcntl
import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge(report: dict, params: dict, stamp: str) -> dict:
    """Merge the node entry described by ``params`` into ``report``; return the entry."""
    if report.get("target") != params["target"]:
        report["previous_target"] = report.get("target")
        report["target"] = params["target"]
    nodes = report.setdefault("nodes", {})
    entry = nodes.setdefault(params["host"], {})
    # a node starting again (in-progress) starts its timings afresh
    timings = {} if params["state"] == "in-progress" else dict(entry.get("timings_s") or {})
    timings.update({k: round(float(v), 1) for k, v in (params["timings"] or {}).items()})
    entry.update(
        {
            "node": params["node"] or entry.get("node") or params["host"],
            "state": params["state"],
            "phase": params["phase"],
            "version": params["target"]
            if params["state"] in ("upgraded", "skipped")
            else entry.get("version"),
            "cause": params["cause"] if params["state"] == "failed" else "",
            "timings_s": timings,
            "updated": stamp,
        }
    )
    if params["cordoned"] is not None:
        entry["cordoned"] = params["cordoned"]
    if params.get("cordoned_by_upgrade") is not None:
        entry["cordoned_by_upgrade"] = params["cordoned_by_upgrade"]
    entry.setdefault("cordoned_by_upgrade", False)
    report.setdefault("events", []).append(
        {"time": stamp, "host": params["host"], "state": params["state"], "phase": params["phase"]}
    )
    report["updated"] = stamp
    return entry


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            target=dict(type="str", required=True),
            host=dict(type="str"),
            node=dict(type="str", default=""),
            hosts=dict(type="list", elements="dict"),
            state=dict(
                type="str", required=True, choices=["upgraded", "skipped", "in-progress", "failed"]
            ),
            phase=dict(type="str", default=""),
            cause=dict(type="str", default=""),
            cordoned=dict(type="bool"),
            cordoned_by_upgrade=dict(type="bool"),
            timings=dict(type="dict", default={}),
        ),
        required_one_of=[("host", "hosts")],
        mutually_exclusive=[("host", "hosts")],
        supports_check_mode=False,
    )
    p = module.params
    if p["host"]:
        records = [p]
    else:
        records = [
            {**p, "host": str(h["host"]), "node": str(h.get("name") or h.get("node") or "")}
            for h in p["hosts"]
        ]
    path = p["path"]
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        report = {}
        if os.path.exists(path):
            try:
                with open(path) as fh:
                    report = json.load(fh)
            except ValueError:
                report = {}
        stamp = now()
        entry: dict = {}
        for record in records:
            entry = merge(report, record, stamp)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".upgrade-report-")
        with os.fdopen(fd, "w") as fh:
            json.dump(report, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    module.exit_json(changed=True, entry=entry)


if __name__ == "__main__":
    main()
