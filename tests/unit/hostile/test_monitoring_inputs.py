"""Hostile durations for the monitoring role: every duration variable is checked on entry
(roles/monitoring/tasks/main.yml, ``Monitoring | Check the durations``) with Ansible's own
``regex`` test, because the value lands in the rendered rules YAML as written. Each case is
one test id; the refusal through a real ansible-playbook run (message, no file written) is
tests/integration/test_monitoring_rules.py.

Cases: 14 refused (clear refusal), 6 accepted (correct handling)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.plugins.test.core import regex

pytestmark = pytest.mark.unit

ROLE = Path(__file__).resolve().parents[3] / "roles" / "monitoring"


def _check_task() -> dict:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text(encoding="utf-8"))
    return next(t for t in tasks if t["name"] == "Monitoring | Check the durations")


TASK = _check_task()
PATTERN = TASK["vars"]["monitoring_duration_pattern"]


def accepted(value: str) -> bool:
    """What the task's two conditions say of ``value``."""
    return len(value) > 0 and regex(value, PATTERN, match_type="fullmatch")


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
    assert set(TASK["vars"]["monitoring_duration_variables"]) == durations
    assert TASK["loop"] == "{{ monitoring_duration_variables }}"
    assert "is not a Prometheus duration" in TASK["ansible.builtin.assert"]["fail_msg"]
