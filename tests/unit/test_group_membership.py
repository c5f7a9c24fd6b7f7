"""No task of the collection tells a host's group by looking for the host in the group's
list (``inventory_hostname in groups[...]``): with ansible-core 2.19 a look walks every
host of the group (each item rendered by the lazy templating), for every task of every
host that reads it, so a play over 10,000 hosts spent about 0.2 s a task a host on it.
The host's own groups say it at once (``'gpu_nodes' in group_names``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
#: ``inventory_hostname in groups['x']``, ``inventory_hostname not in (groups[x] | ...)``,
#: ``inventory_hostname in groups.get(x, [])``
LOOKUP = re.compile(r"inventory_hostname\s+(?:not\s+)?in\s+\(?\s*groups\s*[\[.]")


def _yaml_files() -> list[Path]:
    return sorted(
        p
        for top in ("roles", "playbooks")
        for p in (ROOT / top).rglob("*.yml")
        if "molecule" not in p.parts
    )


def test_no_task_looks_a_host_up_in_a_whole_group() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in _yaml_files()
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if LOOKUP.search(line)
    ]
    assert found == [], "use the host's group_names instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("when: inventory_hostname in groups['gpu_nodes']", True),
        (
            "x: \"{{ inventory_hostname not in (groups['kube_control_plane'] | default([])) }}\"",
            True,
        ),
        ("- inventory_hostname in groups.get(kueue_image_hosts, [])", True),
        ("when: 'gpu_nodes' in group_names", False),
        ("- inventory_hostname in dra_driver_pools.dra", False),
    ],
)
def test_the_pattern_finds_each_way_of_writing_it(line: str, found: bool) -> None:
    assert bool(LOOKUP.search(line)) is found
