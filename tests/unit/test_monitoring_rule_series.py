"""The monitoring role's alerting rules read only series of the metric series table
(``dra/metric_series.py``), and each alert reads, for every minor the table knows and every
component, a name of each series family it uses that the release serves there: an alert
never goes blind on one release because that release renamed its series.

The rules are rendered from the role's template with its defaults (Jinja, as Ansible does
with the template's own delimiters); promtool checks the same rules in
tests/integration/test_monitoring_rules.py."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import metric_series as ms

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "monitoring"
REPORT_METRICS = ROOT / "plugins" / "module_utils" / "report" / "metrics.py"

#: Series from outside Kubernetes: Prometheus' own ``up``, NVIDIA's DCGM exporter, and
#: ``gpufleet report --serve`` (report/metrics.py, checked below).
OUTSIDE_KUBERNETES = ("DCGM_FI_", "gpufleet_")
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}


def rendered_rules() -> dict[str, str]:
    """Alert name -> expression of the rules rendered with the role's defaults."""
    template = (ROLE / "templates" / "gpufleet-dra.rules.yml.j2").read_text(encoding="utf-8")
    first, _, body = template.partition("\n")
    assert first.startswith("#jinja2:variable_start_string:'[['"), first
    env = jinja2.Environment(
        variable_start_string="[[", variable_end_string="]]", undefined=jinja2.StrictUndefined
    )
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
    doc = yaml.safe_load(env.from_string(body).render(**defaults))
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def series_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions,
    keywords, label names (matchers, ``by``/``on`` lists) or durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for m in re.finditer(r"(?<![\w:.])[A-Za-z_:][\w:]*", text):
        if m.group() in PROMQL_WORDS or text[m.end() :].lstrip().startswith("("):
            continue
        names.add(m.group())
    return names


def kubernetes_names(names: set[str]) -> set[str]:
    return {n for n in names if n != "up" and not n.startswith(OUTSIDE_KUBERNETES)}


RULES = rendered_rules()


def test_the_reader_finds_the_names_of_a_chained_rule() -> None:
    assert series_names(RULES["DRAClaimsAllocatedNotInUse"]) == {
        "dynamic_resource_allocation_resource_claims",
        "resourceclaim_controller_resource_claims",
        "resourceclaim_controller_allocated_resource_claims",
        "dra_resource_claims_in_use",
        "up",
    }
    assert series_names(
        'sum by (node) (increase(dra_operations_duration_seconds_count{is_error="true"}[10m])) > 0'
    ) == {"dra_operations_duration_seconds_count"}
    assert series_names('avg_over_time(x{a="b"}[10m]) * 100 or on() vector(0)') == {"x"}


def test_every_kubernetes_series_of_the_rules_is_in_the_table() -> None:
    unknown = {
        alert: sorted(n for n in kubernetes_names(series_names(expr)) if ms.base_name(n) is None)
        for alert, expr in RULES.items()
    }
    assert not {a: n for a, n in unknown.items() if n}, (
        "series the rules read that dra/metric_series.py does not know"
    )


def test_the_object_state_series_are_the_report_exporters() -> None:
    exported = REPORT_METRICS.read_text(encoding="utf-8")
    ours = {n for e in RULES.values() for n in series_names(e) if n.startswith("gpufleet_")}
    assert ours, "no rule reads gpufleet report --serve"
    assert [n for n in sorted(ours) if f'"{n}"' not in exported] == []


@pytest.mark.parametrize("alert", sorted(RULES))
def test_each_alert_reads_a_served_name_on_every_release_and_component(alert: str) -> None:
    read = {ms.base_name(n) for n in kubernetes_names(series_names(RULES[alert]))}
    families = {s.family for s in ms.SERIES if s.name in read}
    gaps = []
    for family in sorted(families):
        for minor in ms.known_minors():
            for component in ms.EVERY_COMPONENT:
                there = {
                    s.name
                    for s in ms.served(minor)
                    if s.family == family and component in s.components
                }
                if there and not there & read:
                    gaps.append(f"1.{minor} {component}: reads none of {sorted(there)}")
    assert gaps == [], f"{alert} goes blind on: {gaps}"


def test_the_chain_check_catches_a_missing_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without 1.31-1.33's counter, the creation-failure alert has a gap there."""
    expr = RULES["DRAClaimCreateFailures"].replace(
        "or increase(resourceclaim_controller_create_failures_total[10m])", ""
    )
    assert expr != RULES["DRAClaimCreateFailures"]
    monkeypatch.setitem(RULES, "DRAClaimCreateFailures", expr)
    with pytest.raises(AssertionError, match=r"1\.33 kube-controller-manager"):
        test_each_alert_reads_a_served_name_on_every_release_and_component("DRAClaimCreateFailures")
