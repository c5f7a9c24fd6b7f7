"""The restarted-kubelet check of the upgrade (plugins/modules/upgrade_kubelet_health.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.modules import upgrade_kubelet_health as kh

pytestmark = pytest.mark.unit

# What kubelet v1.37.2 (built here) writes when a gate it does not know is set; the
# deprecation notice is not an error.
UNKNOWN_GATE = (
    'E1130 01:43:03.929621   29334 run.go:72] "command failed" err="failed to set feature '
    'gates from initial flags-based config: unrecognized feature gate: GpufleetUpgradeProbe"'
)
JOURNAL = "\n".join(
    [
        "Started kubelet.service - kubelet: The Kubernetes Node Agent.",
        "Flag --feature-gates has been deprecated, This parameter should be set via the "
        "config file specified by the Kubelet's --config flag.",
        UNKNOWN_GATE,
        "kubelet.service: Main process exited, code=exited, status=1/FAILURE",
        "Started kubelet.service - kubelet: The Kubernetes Node Agent.",
        UNKNOWN_GATE.replace("01:43:03.929621   29334", "01:43:06.101010   29401"),
    ]
)


# An error the kubelet before the restart logged (from a lab run), then the new one's.
OLD_KUBELET = (
    'E1130 02:09:37.737340    2748 manager.go:1038] "Error receiving from WatchResources '
    'stream" err="rpc error: code = Unimplemented desc = unknown service '
    'v1alpha1.DRAResourceHealth" logger="DRA registration handler.dra-manager"'
)


def test_the_fatal_line_is_the_cause_once_and_newest():
    lines = kh.error_lines(OLD_KUBELET + "\n" + JOURNAL, keep=3)
    # the same failure of two starts counts once (the newest); the old kubelet's error
    # and the deprecation notice are not the cause
    assert lines == [UNKNOWN_GATE.replace("01:43:03.929621   29334", "01:43:06.101010   29401")]


def test_without_a_fatal_line_the_last_distinct_errors_count():
    journal = "\n".join(["E0101 a.go:1] first", "E0101 b.go:2] second", "E0101 a.go:1] first"])
    assert kh.error_lines(journal, keep=3) == ["E0101 b.go:2] second", "E0101 a.go:1] first"]
    assert kh.error_lines(journal, keep=1) == ["E0101 a.go:1] first"]
    assert kh.error_lines("I0101 fine\nW0101 warning only", keep=3) == []


@pytest.mark.parametrize(
    ("first", "now", "expected"),
    [
        (("active", "100"), ("active", "100"), False),
        (("active", "100"), ("activating", "0"), True),  # systemd's auto-restart wait
        (("active", "100"), ("active", "142"), True),  # exited and restarted between polls
        (("activating", "0"), ("activating", "0"), True),  # already exited before the first poll
        (("active", "100"), ("failed", "0"), True),
    ],
)
def test_exited_when_the_unit_leaves_active_or_changes_main_pid(first, now, expected):
    assert kh.exited(first, now) is expected
