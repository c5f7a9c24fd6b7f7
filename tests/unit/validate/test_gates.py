"""Gate audit findings as validate checks (``plugins/module_utils/validate/gates.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import gates as vga

from tests.unit.validate.listed_cluster import by_id

pytestmark = pytest.mark.unit


def test_gate_findings_are_grouped_with_their_own_ids() -> None:
    audit = {
        "version": "1.37.2",
        "findings": [
            {
                "id": "gates.node-drift",
                "severity": "fail",
                "host": "gpu-2",
                "component": "kubelet",
                "message": "m1",
                "fix": "f1",
            },
            {
                "id": "gates.model-advice",
                "severity": "warn",
                "host": "cp",
                "component": "kube-apiserver",
                "message": "m2",
                "fix": "f2",
            },
            {
                "id": "gates.facts-missing",
                "severity": "fail",
                "host": "gpu-3",
                "component": None,
                "message": "m3",
                "fix": "f3",
            },
        ],
    }
    c = by_id(vga.gates_checks(audit))
    assert c["gates.component-drift"].status == "fail"
    assert c["gates.component-drift"].problems[0].message == "[gates.node-drift] m1"
    assert c["gates.component-drift"].problems[0].subject == "gpu-2 kubelet"
    assert c["gates.model"].status == "warn"
    assert c["gates.coverage"].status == "fail"
    assert all(x.status == "skip" for x in vga.gates_checks(None, "no facts"))
