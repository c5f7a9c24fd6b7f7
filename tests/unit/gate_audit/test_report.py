"""The gate audit's table (``plugins/module_utils/gate_audit/report.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import report as gr

from tests.unit.gate_audit.hosts import configmaps, control_plane_host, run

pytestmark = pytest.mark.unit


def test_table_marks_failed_and_warned_entries() -> None:
    result = run(control_plane_host("cp-1", "dra"), cms=configmaps("dra"))
    lines = gr.format_table(result.to_dict())
    assert lines[0].startswith("DRA gate audit against Kubernetes 1.37.2: ")
    row = next(ln for ln in lines if ln.startswith("cp-1") and "kube-apiserver" in ln)
    assert "DRAControlPlaneController=true!" in row
    assert "DRAAdminAccess=true~" in row
    assert any(ln.startswith("(configmap)") and "kubelet" in ln for ln in lines)
    assert any(ln.startswith("FAIL gates.model-forbidden cp-1 kube-apiserver") for ln in lines)
