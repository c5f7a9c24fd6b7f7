"""Every expression of the monitoring role's Grafana dashboard
(roles/monitoring/files/gpufleet-dra-dashboard.json) parses: each one, its variables
replaced by sample values (``grafana_dashboard.SAMPLE_VALUES``), becomes a recording rule
that ``promtool check rules`` judges, promtool built as tests/integration/test_monitoring_rules.py
uses it. The series they read are checked in tests/unit/build/test_grafana_dashboard.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from gpufleet.build import binaries
from gpufleet.build import grafana_dashboard as gd

pytestmark = pytest.mark.integration


def promtool() -> Path:
    path = binaries.binary_path("promtool")
    if not path.is_file():
        pytest.fail(
            f"promtool is not built ({path}); run lab/build-binaries --tools prometheus "
            "(scripts/setup does, in the ci profile)"
        )
    return path


def check(tmp_path: Path, exprs: list[str]) -> subprocess.CompletedProcess[str]:
    rules = [
        {"record": f"gpufleet:dashboard_expr_{i}:check", "expr": gd.substituted(e)}
        for i, e in enumerate(exprs)
    ]
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    return subprocess.run(
        [str(promtool()), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_every_expression_of_the_dashboard_parses(tmp_path: Path) -> None:
    doc = json.loads(gd.DASHBOARD.read_text(encoding="utf-8"))
    exprs = [expr for _where, expr in gd.expressions(doc)]
    out = check(tmp_path, exprs)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in out.stdout + out.stderr


def test_promtool_refuses_an_expression_that_does_not_parse(tmp_path: Path) -> None:
    out = check(tmp_path, ["sum by (node) (rate(x[$__rate_interval])"])
    assert out.returncode != 0
    assert "parse error" in out.stdout + out.stderr
