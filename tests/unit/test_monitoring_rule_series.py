"""The monitoring role's alerting rules read only series of the metric series table
(``dra/metric_series.py``), and each alert reads, for every minor the table knows and every
component, a name of each series family it uses that the release serves there: an alert
never goes blind on one release because that release renamed its series.

The rules are rendered from the role's template with its defaults (Jinja, as Ansible does
with the template's own delimiters); promtool checks the same rules in
tests/integration/test_monitoring_rules.py."""

from __future__ import annotations

import json
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
    env.filters["to_json"] = json.dumps  # Ansible's to_json, for the strings the rules quote
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


# ------------------------------------------------------------------ docs/monitoring.md

DOC = ROOT / "docs" / "monitoring.md"
DOC_TABLE_TITLE = "Metric names, checked in the Kubernetes source of each pinned release"


def release_groups() -> list[tuple[int, int]]:
    """Runs of consecutive minors that serve the same series (name and labels)."""
    groups: list[tuple[int, int]] = []
    for minor in ms.known_minors():
        same = groups and {(s.name, s.labels) for s in ms.served(minor)} == {
            (s.name, s.labels) for s in ms.served(groups[-1][0])
        }
        groups[-1:] = [(groups[-1][0], minor)] if same else [*groups[-1:], (minor, minor)]
    return groups


def _group(first: int, last: int) -> str:
    return f"1.{first}" if first == last else f"1.{first}–1.{last}"  # noqa: RUF001 (the docs table's dash)


def doc_table() -> list[str]:
    """The table docs/monitoring.md shows, one line per row of the metric series table."""
    groups = release_groups()
    head = ["component", "series", "type", *(_group(*g) for g in groups), "defined in"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in ms.SERIES:
        who = "every component" if s.components == ms.EVERY_COMPONENT else ", ".join(s.components)
        if s.gate:
            who += f" (with `{s.gate}`)"
        labels = "{" + ",".join(s.labels) + "}" if s.labels else ""
        served = ["yes" if s.served_in(g[0]) else "–" for g in groups]  # noqa: RUF001
        cells = [who, f"`{s.name}{labels}`", s.kind, *served, f"`{s.module}` `{s.path}`"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def test_the_docs_show_the_table_as_it_is() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert DOC_TABLE_TITLE in text
    after = text.split(DOC_TABLE_TITLE, 1)[1].split("\n\n", 2)[1]
    assert after.splitlines() == doc_table(), "\n".join(
        ["docs/monitoring.md should show:", *doc_table()]
    )


def test_the_release_groups_split_where_a_name_or_label_changes() -> None:
    assert release_groups() == [(31, 31), (32, 33), (34, 34), (35, 35), (36, 36), (37, 38)]
