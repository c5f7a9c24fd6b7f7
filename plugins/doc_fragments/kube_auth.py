# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The options every module that talks to the Kubernetes API shares."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Kubeconfig file. Defaults to E(KUBECONFIG) or C(~/.kube/config), as kubectl does.
      - Checked before use (a directory, an empty or oversized file, a context or user that
        is missing are refused naming the file); an exec credential plugin may run for
        60 seconds at most.
    type: path
  context:
    description:
      - Context of the kubeconfig to use; its current context when omitted.
    type: str
notes:
  - Every API request has a connect timeout of 5 seconds and a read timeout of 15 seconds,
    and a read that timed out is not retried.
"""
