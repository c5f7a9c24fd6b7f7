"""``playbooks/mig_mode.yml`` refuses bad input before it touches the DRA driver release or
a node: a target that is no MIG mode, and a move to static MIG of a node without a layout.

It runs for real against this machine (``ansible_connection=local``); the refusals come
before the first task that reads the cluster, so no cluster is needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.commands import mig_mode as mode_cmd
from gpufleet.exit import EXIT_OK
from tests.ansible.local_node import INVENTORY, run_local

pytestmark = pytest.mark.ansible


def _mode(tmp_path: Path, extravars: dict) -> tuple[int, list[tuple[str, str, str]]]:
    result = run_local(tmp_path, mode_cmd.MODE_PLAYBOOK, extravars)
    failures = [(h, t, " ".join(m.split())) for h, t, m in result.progress.failures]
    return result.status, failures


@pytest.mark.parametrize(
    ("extravars", "task", "words"),
    [
        ({"mig_mode_to": "partitioned"}, 0, 'mig_mode_to="partitioned" is not a MIG mode'),
        ({"mig_mode_to": "dynamic", "mig_mode_batch": 0}, 1, "mig_mode_batch=0"),
        (
            {"mig_mode_to": "static"},
            2,
            'mig_layout={} and mig_config_name="" on node1: moving it to static MIG',
        ),
    ],
)
def test_bad_input_is_refused_before_the_release_naming_variable_value_and_fix(
    tmp_path: Path, extravars: dict, task: int, words: str
) -> None:
    status, failures = _mode(tmp_path, extravars)
    assert status != EXIT_OK
    [(host, name, message)] = failures
    assert host == "node1", failures
    assert name == mode_cmd.REFUSING_TASKS[task], failures
    assert words in message and "fix:" in message, message


def test_one_node_without_a_layout_stops_every_node_before_the_release(tmp_path: Path) -> None:
    """node2 has a layout, node1 none: the move to static stops at node1's refusal, and
    node2 does not go on to the DRA driver release (its tasks would fail here, with no
    cluster to reach, and be listed)."""
    two_nodes = INVENTORY.replace(
        "node1 ansible_connection=local\n",
        "node1 ansible_connection=local\n"
        "node2 ansible_connection=local mig_layout='{\"1g.18gb\": 7}'\n",
    )
    result = run_local(tmp_path, mode_cmd.MODE_PLAYBOOK, {"mig_mode_to": "static"}, two_nodes)
    assert result.status != EXIT_OK
    failures = [(h, t) for h, t, _m in result.progress.failures]
    assert failures == [("node1", mode_cmd.REFUSING_TASKS[2])], failures
