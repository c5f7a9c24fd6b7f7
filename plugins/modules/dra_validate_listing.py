#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""List the cluster for dra_validate ahead of it, into a file."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: dra_validate_listing
short_description: List the cluster for dra_validate ahead of it, into a file
version_added: "0.1.0"
description:
  - Runs on the control host. Lists the cluster as M(gpufleet.cluster.dra_validate) does
    (each kind once, paged, each page cut down to the fields the checks read and stored
    compressed) and writes the listing to O(listing_file) (mode 0600), which
    M(gpufleet.cluster.dra_validate) then judges (its option
    O(gpufleet.cluster.dra_validate#module:listing_file)).
  - The playbook C(validate.yml) runs it in the background (C(async)) before it reads the
    nodes, so that the API server hands over the cluster while the nodes are read. At
    10,000 GPU nodes the listing takes about as long as reading the control host and
    preparing the checks' input.
  - A listing that fails (the API server cannot be read) is written as its error, which
    M(gpufleet.cluster.dra_validate) reports as its own; this module fails too.
  - Read-only on the cluster.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML
  - kubernetes (the Python client) and urllib3, which it installs
  - msgspec (recommended), which decodes the listed pages faster
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.kube_auth

options:
  listing_file:
    description:
      - File on the control host to write the listing to, in a directory only this user
        can write (the playbook makes one with M(ansible.builtin.tempfile)). Its process id
        goes to C(<listing_file>.pid) first, and the listing to C(<listing_file>.part),
        renamed to O(listing_file) once whole.
    type: path
    required: true
  plugin_namespace:
    description: Namespace of the DRA driver's kubelet plugin DaemonSets; empty for any.
    type: str
    default: ""
  page_size:
    description:
      - Items per list request (ResourceSlices at most 500, Nodes at most 1000).
    type: int
    default: 2000
  keep_for:
    description:
      - Seconds that the listing, once written, waits for its reader to take it (to
        remove O(listing_file) or its directory); the module ends when it is taken. A
        listing not taken by then is replaced with the record of its expiry (removed where
        that cannot be written), so that no copy of the cluster's objects outlives a run
        stopped before its checks; M(gpufleet.cluster.dra_validate) then lists the cluster
        itself. Give C(async) the seconds of the listing and these.
      - C(0) ends the module as soon as the listing is written; its caller removes it.
    type: int
    default: 0

attributes:
  check_mode:
    support: full
    details: It only reads the cluster and writes its own file.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Validate | List the cluster in the background
  gpufleet.cluster.dra_validate_listing:
    listing_file: "{{ listing_dir.path }}/listing"
    keep_for: 1800  # ends once the directory below is removed
  async: 3660  # the listing's time and keep_for
  poll: 0
  register: listing_job

- name: Validate | Judge it
  gpufleet.cluster.dra_validate:
    listing_file: "{{ listing_dir.path }}/listing"
    gpu_nodes: [gpu-1]

- name: Validate | Remove the listing (the listing's job ends)
  ansible.builtin.file:
    path: "{{ listing_dir.path }}"
    state: absent
"""

RETURN = r"""
listing_file:
  description: Where the listing was written.
  returned: success
  type: str
api_requests:
  description: API requests made.
  returned: success
  type: int
duration_s:
  description: Seconds the listing took.
  returned: success
  type: float
errors:
  description: Kind to error text, for each kind that could not be listed.
  returned: success
  type: dict
objects:
  description: Objects listed per list (nodes, pods, slices, claims, classes, ...).
  returned: success
  type: dict
taken:
  description:
    - Whether a reader took the listing within O(keep_for); false when it was replaced
      with the record of its expiry or removed.
  returned: success and O(keep_for) above 0
  type: bool
"""

import contextlib
import os
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing_file
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk


def _write_error(path: str, error: vk.KubeError) -> None:
    """The failure in the listing file, for the judge to report; where the file cannot be
    written, the judge finds this process ended without it. A file that is there already is
    not replaced (the lister makes files, it replaces none)."""
    if os.path.lexists(path):
        return
    with contextlib.suppress(OSError, listing_file.ListingFileError):
        listing_file.write_listing(path, None, error=error)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            **vk.kube_auth_argspec(),
            listing_file=dict(type="path", required=True),
            plugin_namespace=dict(type="str", default=""),
            page_size=dict(type="int", default=2000),
            keep_for=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params)
    path = params["listing_file"]
    for name, least, variable in (
        ("page_size", 1, "validate_page_size"),
        ("keep_for", 0, "validate_listing_timeout"),
    ):
        if params[name] < least:
            error = vk.KubeError(None, f"{name}={params[name]}: give a number >= {least}")
            _write_error(path, error)
            module.fail_json(msg=f"{error.message} ({variable})")
    try:
        kube = vk.Kube(params["kubeconfig"], params["context"])
        result = listing_file.list_to_file(
            kube, path, params["plugin_namespace"], params["page_size"]
        )
    except vk.KubeError as err:  # the kubeconfig: the judge reports it as its own
        _write_error(path, err)
        module.fail_json(msg=f"the API server could not be read: {err}")
    except Exception as err:  # a defect: report it with the trace instead of a bare crash
        _write_error(path, vk.KubeError(None, f"the cluster listing crashed: {err}"))
        module.fail_json(msg=f"listing crashed: {err}", exception=traceback.format_exc())
    if result.pop("failed", False):
        module.fail_json(**result)
    if params["keep_for"] > 0:
        result["taken"] = listing_file.keep_until_taken(path, params["keep_for"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
