"""Hostile durations for the monitoring role: every duration variable is checked on entry
(roles/monitoring/tasks/main.yml, ``Monitoring | Refuse values the files it writes cannot
hold``) and by preflight with one rule (``preflight.config_values``, Prometheus' own
duration grammar), because the value lands in the rendered rules YAML. Each case is one
test id; the refusal through a real ansible-playbook run (message, no file written) is
tests/integration/test_monitoring_rules.py.

Cases: 14 refused (clear refusal), 6 accepted (correct handling)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    config_values as cv,
)

pytestmark = pytest.mark.unit

ROLE = Path(__file__).resolve().parents[3] / "roles" / "monitoring"


def _check_task() -> dict:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text(encoding="utf-8"))
    name = "Monitoring | Refuse values the files it writes cannot hold"
    return next(t for t in tasks if t["name"] == name)


TASK = _check_task()


def accepted(value: str) -> bool:
    """What the role's entry check (and preflight) say of ``value`` as a duration."""
    return cv.check_values({"monitoring_claim_leaked_for": value}) == []


REFUSED = {
    "words": "ten minutes",
    "yaml-injection-labels": "5m\n        labels:\n          severity: none",
    "trailing-newline": "5m\n",
    "yaml-flow": "{a: 1}",
    "jinja-braces": "{{ lookup('env', 'HOME') }}",
    "empty": "",
    "space-inside": "5 m",
    "leading-space": " 5m",
    "negative": "-5m",
    "float": "1.5h",
    "exponent": "1e3s",
    "wrong-order": "1m1h",
    "fullwidth-digits": "\uff15m",
    "unit-only": "m",
}
ACCEPTED = {"minutes": "5m", "seconds": "90s", "compound": "1h30m", "zero": "0", "days": "7d",
            "milliseconds": "500ms"}  # fmt: skip


@pytest.mark.parametrize("value", REFUSED.values(), ids=REFUSED.keys())
def test_a_hostile_duration_is_refused(value: str) -> None:
    assert not accepted(value)


@pytest.mark.parametrize("value", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_a_prometheus_duration_is_accepted(value: str) -> None:
    assert accepted(value)


def test_every_duration_variable_of_the_role_is_checked() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
    durations = {n for n in defaults if n.endswith(("_for", "_window", "_interval"))}
    assert len(durations) >= 10
    checked = {n for n, (kind, _) in cv.CONFIG_VARIABLES.items() if kind == "duration"}
    assert durations <= checked, durations - checked
    # the role's entry check hands every monitoring_ variable to the rule
    assert "^monitoring_[a-z]" in TASK["vars"]["monitoring__names"]
    assert "gpufleet.cluster.config_value_problems" in TASK["vars"]["monitoring__problems"]
