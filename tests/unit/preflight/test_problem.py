"""Preflight problems and the typed reading of inventory variables
(``plugins/module_utils/preflight/problem.py``).
"""

from __future__ import annotations

import pytest

from tests.unit.preflight.hosts import _host, _rules

pytestmark = pytest.mark.unit


def test_a_non_boolean_switch_names_the_variable() -> None:
    p = _rules(_host({"kubeadm_allow_cgroup_v1": "sometimes"}))["value-type"]
    assert (p.variable, p.value) == ("kubeadm_allow_cgroup_v1", "sometimes")
