"""The monitoring role's Grafana dashboard: the committed JSON is what
``gpufleet.build.grafana_dashboard`` generates with grafana-foundation-sdk, and every
expression it holds reads only series that exist: those ``gpufleet report --serve`` exports
(report/metrics.py), the Kubernetes series of the metric series table
(dra/metric_series.py), and the DCGM exporter series and ``up`` the role's alerting rules
read. promtool parses each expression in tests/integration/test_grafana_dashboard_promql.py.
"""

from __future__ import annotations

import json
import re

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import metric_series as ms
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import metrics

from gpufleet.build import grafana_dashboard as gd
from tests.unit.test_monitoring_rule_series import rendered_rules, series_names

pytestmark = pytest.mark.unit

COMMITTED = json.loads(gd.DASHBOARD.read_text(encoding="utf-8"))


def exported() -> set[str]:
    """The families ``gpufleet report --serve`` exports, read from its own rendering."""
    text = metrics.render({}, [])
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def from_the_rules() -> set[str]:
    """The series outside Kubernetes and gpufleet the alerting rules read (DCGM, ``up``)."""
    read = {n for expr in rendered_rules().values() for n in series_names(expr)}
    return {n for n in read if n == "up" or n.startswith("DCGM_")}


def unknown(expr: str) -> list[str]:
    """Names ``expr`` reads that no exporter of the list produces."""
    known = exported() | from_the_rules()
    return sorted(n for n in series_names(expr) if n not in known and ms.base_name(n) is None)


def test_the_committed_dashboard_is_the_generated_one() -> None:
    text = gd.DASHBOARD.read_text(encoding="utf-8")
    assert text == gd.render(), "run python -m gpufleet.build.grafana_dashboard"


def test_the_check_mode_tells_a_stale_file(tmp_path, monkeypatch, capsys) -> None:
    stale = tmp_path / "dashboard.json"
    stale.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(gd, "DASHBOARD", stale)
    assert gd.main(["x", "--check"]) == 1
    assert "differs" in capsys.readouterr().out
    assert gd.main(["x"]) == 0
    assert gd.main(["x", "--check"]) == 0


def test_the_list_of_series_is_read_from_the_exporters() -> None:
    assert {"gpufleet_dra_devices", "gpufleet_team_idle_gpu_memory_bytes"} <= exported()
    assert "gpufleet_namespace_idle_devices" in exported()
    assert {"up", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"} <= from_the_rules()


def test_every_expression_reads_only_series_that_exist() -> None:
    found = list(gd.expressions(COMMITTED))
    assert len(found) >= 30
    problems = {where: names for where, expr in found if (names := unknown(expr))}
    assert problems == {}


def test_the_check_catches_a_series_nothing_exports() -> None:
    assert unknown('sum(DCGM_FI_DEV_FB_USED{node=~"$node"}) / gpufleet_dra_device') == [
        "DCGM_FI_DEV_FB_USED",
        "gpufleet_dra_device",
    ]
    assert unknown("rate(dra_operations_duration_seconds_bucket[5m])") == []


def test_variables_and_datasources() -> None:
    variables = {v["name"]: v for v in COMMITTED["templating"]["list"]}
    assert set(variables) == {"datasource", "node", "team", "driver", "window"}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["node"]["query"] == (
        "label_values(gpufleet_gpu_node_resourceslice_devices, node)"
    )
    panels = [p for p in COMMITTED["panels"] if p["type"] != "row"]
    refs = {json.dumps(p["datasource"], sort_keys=True) for p in panels} | {
        json.dumps(t["datasource"], sort_keys=True) for p in panels for t in p["targets"]
    }
    assert refs == {'{"type": "prometheus", "uid": "${datasource}"}'}
    assert COMMITTED["uid"] == gd.UID


def test_every_variable_an_expression_uses_has_a_sample_value() -> None:
    for _where, expr in gd.expressions(COMMITTED):
        assert "$" not in gd.substituted(expr)
    assert gd.substituted('x{node=~"$node"}[${__range}]') == 'x{node=~".*"}[1h]'
    with pytest.raises(KeyError):
        gd.substituted("x[$nope]")


def test_given_values_replace_the_sample_ones() -> None:
    nodes = gd.multi_value(["gpu-2", "gpu-1"])
    expr = 'x{node=~"$node", team=~"$team"}[$window]'
    assert gd.substituted(expr, {"node": nodes}) == 'x{node=~"(gpu-1|gpu-2)", team=~".*"}[10m]'
    assert gd.substituted("x[$window]") == "x[10m]"  # the sample values are left as they were


def test_multi_value_escapes_regex_characters_for_a_promql_string() -> None:
    # PromQL unescapes the string once, the regex engine once more: a.b matches only "a.b"
    assert gd.multi_value(["a.b"]) == "a\\\\.b"
    assert gd.multi_value(["(no team)", "nlp"]) == "(\\\\(no team\\\\)|nlp)"


def test_panel_targets_gives_title_ref_and_expression_of_every_panel() -> None:
    found = list(gd.panel_targets(COMMITTED))
    assert ("Devices by state", "A", "sum by (state) (gpufleet_dra_devices)") in found
    titles = {p["title"] for p in COMMITTED["panels"] if p["type"] != "row"}
    assert {title for title, _ref, _expr in found} == titles


def test_expressions_reads_targets_and_query_variables() -> None:
    doc = {
        "panels": [{"title": "t", "targets": [{"refId": "A", "expr": "up"}]}],
        "templating": {
            "list": [
                {"name": "n", "type": "query", "query": 'label_values(x{a="b"}, node)'},
                {"name": "d", "type": "datasource", "query": "prometheus"},
            ]
        },
    }
    assert list(gd.expressions(doc)) == [("panel 't' A", "up"), ("variable n", 'x{a="b"}')]


DOC = gd.ROOT / "docs" / "monitoring.md"
DOC_TABLE_TITLE = "Panels and the series they read, checked against the dashboard:"


def doc_table() -> list[str]:
    """The table of docs/monitoring.md: each panel of ``ROWS`` with the series it reads."""
    lines = ["| row | panel | series |", "|---|---|---|"]
    for row, panels in gd.ROWS:
        for panel in panels:
            names = sorted({n for q in panel.queries for n in series_names(q.expr)})
            lines.append(f"| {row} | {panel.title} | " + ", ".join(f"`{n}`" for n in names) + " |")
    return lines


def test_the_docs_show_the_panels_as_they_are() -> None:
    text = DOC.read_text(encoding="utf-8")
    after = text.split(DOC_TABLE_TITLE, 1)[1].split("\n\n", 2)[1]
    assert after.splitlines() == doc_table(), "\n".join(
        ["docs/monitoring.md should show:", *doc_table()]
    )
