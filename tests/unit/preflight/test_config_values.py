"""Values the roles write into files, units and command lines
(``plugins/module_utils/preflight/config_values.py``): Prometheus' duration grammar
(prometheus/common model/time.go ParseDuration), addresses, paths, URLs, and the rule's
problems."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    config_values as cv,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

pytestmark = pytest.mark.unit

S, M, H, D = 10**9, 60 * 10**9, 3600 * 10**9, 24 * 3600 * 10**9


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0", 0),
        ("0s", 0),
        ("30s", 30 * S),
        ("1h30m", 90 * M),
        ("1y", 365 * D),
        ("2w", 14 * D),
        ("500ms", 500 * 10**6),
        ("1d2h3m4s5ms", D + 2 * H + 3 * M + 4 * S + 5 * 10**6),
        ("01m", M),
        ("292y", 292 * 365 * D),
    ],
)
def test_durations_prometheus_accepts(text: str, ns: int) -> None:
    assert cv.prometheus_duration(text) == ns


@pytest.mark.parametrize(
    "text",
    ["", "00", "1", "-1h", "1.5h", "1h 30m", "30m1h", "1m1m", "1us", "1ns", "1H", "h", "293y",
     "9" * 30 + "s", " 1h", "1h\n"],
)  # fmt: skip
def test_durations_prometheus_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        cv.prometheus_duration(text)


@pytest.mark.parametrize(
    ("value", "listen", "ok"),
    [
        ("10.0.0.1:10250", False, True),
        ("node-1.example:9400", False, True),
        ("[fd00::1]:9400", False, True),
        (":9090", True, True),
        (":9090", False, False),
        ("10.0.0.1", False, False),
        ("10.0.0.1:0", False, False),
        ("10.0.0.1:65536", False, False),
        ("fd00::1:9400", False, False),
        ("a b:80", False, False),
    ],
)
def test_addresses(value: str, listen: bool, ok: bool) -> None:
    assert (cv.check_address(value, listen=listen) is None) is ok


def test_every_default_of_the_roles_passes() -> None:
    hosts = {"cp": {"groups": ["k8s_cluster", "kube_control_plane", "gpu_nodes"], "variables": {}}}
    assert [p for p in pf.check_inventory(hosts) if p.rule == "config-value"] == []


def test_a_problem_names_the_variable_the_value_where_it_goes_and_the_fix() -> None:
    value = "0.0.0.0:9090\nExecStartPre=/bin/sh -c id"
    (line,) = cv.check_values({"monitoring_prometheus_listen": value})
    assert line.startswith('monitoring_prometheus_listen="0.0.0.0:9090\\nExecStartPre=')
    assert "control character '\\n'" in line and "gpufleet-prometheus unit" in line
    assert line.endswith(
        "fix: write monitoring_prometheus_listen as HOST:PORT or :PORT, e.g. 0.0.0.0:9090"
    )


def test_target_lists_are_judged_entry_by_entry() -> None:
    lines = cv.check_values(
        {
            "monitoring_apiserver_targets": ["10.0.0.1:6443", "evil\n- 203.0.113.9:80"],
            "monitoring_kubelet_targets": [{"node": "w\n1", "address": "10.0.0.2:10250"}],
        }
    )
    assert [line.split("=", 1)[0] for line in lines] == [
        "monitoring_apiserver_targets[1]",
        "monitoring_kubelet_targets[0].node",
    ]
