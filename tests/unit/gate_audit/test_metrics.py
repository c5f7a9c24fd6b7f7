"""Feature gate readings from a component's Prometheus metrics
(``plugins/module_utils/gate_audit/metrics.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import metrics as gm
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import terms as gt

from tests.unit.gate_audit.hosts import metric

pytestmark = pytest.mark.unit


def test_feature_readings_from_a_real_kube_apiserver() -> None:
    text = metric("kube-apiserver")
    readings = gm.feature_readings(text)
    samples = [ln for ln in text.splitlines() if ln.startswith("kubernetes_feature_enabled{")]
    assert len(readings) == len(samples) > 200
    assert readings["DynamicResourceAllocation"] == gm.FeatureReading(True, "")
    assert readings["DRAPartitionableDevices"] == gm.FeatureReading(True, "BETA")
    assert readings["DRAListTypeAttributes"] == gm.FeatureReading(False, "ALPHA")
    assert readings["DRAPartitionableDevices"].model_stage == dra_core.BETA
    assert gm.feature_metric_lines(text)[:2] == [
        ln for ln in text.splitlines() if ln.startswith("# ")
    ]


def test_prometheus_parser_escapes_timestamps_and_errors() -> None:
    text = (
        "# HELP x a metric\n"
        "# TYPE x gauge\n"
        'x{a="q\\"uote",b="back\\\\slash",c="new\\nline"} 1 1700000000000\n'
        "y 2.5\n"
        'z{a="1",} NaN\n'
    )
    samples = gm.parse_prometheus_text(text)
    assert samples[0].labels == {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}
    assert samples[0].value == 1.0
    assert (samples[1].name, samples[1].value) == ("y", 2.5)
    assert samples[2].labels == {"a": "1"} and samples[2].value != samples[2].value
    with pytest.raises(gt.GateAuditError, match="line 2"):
        gm.parse_prometheus_text('ok 1\nbad{a="1"} one\n')
    with pytest.raises(gt.GateAuditError, match="unterminated"):
        gm.parse_prometheus_text('bad{a="1} 1\n')
