"""The mig role refuses a static layout on a node whose DRA driver carves MIG per claim
(``dra_driver_dynamic_mig: true``), before it reads or changes the node's GPUs.

``playbooks/mig.yml`` runs for real against this machine (``ansible_connection=local``);
the refusal comes before the role's first ``nvidia-smi``, so no GPU is needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.exit import EXIT_OK
from tests.ansible.local_node import run_local

pytestmark = pytest.mark.ansible


def _mig(tmp_path: Path, extravars: dict) -> tuple[int, str]:
    result = run_local(tmp_path, "mig", {**extravars, "mig_persist": False})
    return result.status, " ".join(" ".join(msg.split()) for _, _, msg in result.progress.failures)


@pytest.mark.parametrize(
    ("extravars", "named"),
    [
        ({"mig_layout": {"1g.18gb": 7}}, 'mig_layout={"1g.18gb": 7} on node1'),
        (
            {"mig_config_name": "all-1g.18gb", "mig_config": {"version": "v1"}},
            'mig_config_name="all-1g.18gb" on node1',
        ),
        ({"mig_enabled": False}, "mig_enabled=false on node1"),
    ],
)
def test_a_static_layout_on_a_dynamic_mig_node_is_refused_naming_variable_value_and_fix(
    tmp_path: Path, extravars: dict, named: str
) -> None:
    status, message = _mig(tmp_path, {**extravars, "dra_driver_dynamic_mig": True})
    assert status != EXIT_OK
    assert named in message, message
    assert "creates MIG devices per claim (dra_driver_dynamic_mig: true)" in message, message
    variable = named.split("=", 1)[0]
    assert f"Fix: remove {variable} for this host or its group" in message, message
    assert "or set dra_driver_dynamic_mig: false" in message, message
