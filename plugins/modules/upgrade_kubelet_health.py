#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Wait for a restarted kubelet to answer healthz; fail fast when it keeps exiting."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: upgrade_kubelet_health
short_description: Wait for a just restarted kubelet to be healthy, or fail fast with its error
version_added: "0.1.0"
description:
  - Runs on the node right after its kubelet was restarted (the C(upgrade) role, phase
    C(kubelet-restart)). Polls the systemd unit (C(systemctl show -p ActiveState -p MainPID))
    and the kubelet's healthz endpoint until healthz answers C(ok).
  - A kubelet that cannot start (an unknown or removed feature gate, a configuration field
    the new release refuses) exits within a second and systemd restarts it
    (C(Restart=always)). The module notices the exit (the unit leaves C(active) or its
    main PID changes) and fails at once with the kubelet's own error lines from the
    journal, instead of letting the caller wait for a Ready node until its timeout.
  - Changes nothing.
author:
  - gpufleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  unit:
    description: The kubelet's systemd unit.
    type: str
    default: kubelet
  healthz_url:
    description:
      - The kubelet's healthz endpoint (KubeletConfiguration C(healthzBindAddress) and
        C(healthzPort), 127.0.0.1:10248 by default). Empty - healthz is not read and the
        kubelet counts as started once it stayed up for O(settle) seconds.
    type: str
    default: http://127.0.0.1:10248/healthz
  settle:
    description: Seconds the unit must stay up when O(healthz_url) is empty.
    type: int
    default: 10
  timeout:
    description: Seconds to wait for healthz before failing.
    type: int
    default: 120
  interval:
    description: Seconds between two polls.
    type: float
    default: 0.5
  journal_lines:
    description: How many of the kubelet's error lines to return on failure (newest last).
    type: int
    default: 3
attributes:
  check_mode:
    support: partial
    details: In check mode the unit and its health endpoint are not watched; the module
      returns at once with C(changed=false).
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Upgrade | Kubelet | The new kubelet starts and answers healthz
  gpufleet.cluster.upgrade_kubelet_health:
    timeout: 120
"""

RETURN = r"""
elapsed:
  description: Seconds from the first poll to healthz C(ok) (or to the failure).
  returned: always
  type: float
exits:
  description: Times the kubelet was seen exiting (0 when it started cleanly).
  returned: always
  type: int
journal:
  description: The kubelet's error lines from the journal (on failure).
  returned: failure
  type: list
  elements: str
"""

import re
import subprocess
import time
import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import ConnectionError as UrlConnectionError
from ansible.module_utils.urls import open_url

#: klog error lines (``E0102 15:04:05.000000 ...``) and the kubelet's fatal messages
#: (``command failed``, ``failed to run Kubelet``, flag and gate errors).
ERROR_RE = re.compile(
    r"^E\d{4} |command failed|failed to run Kubelet|unrecognized feature gate|"
    r"cannot set feature gate|failed to load|failed to validate|invalid configuration",
)
#: What the kubelet logs when it gives up at start (cmd/kubelet/app/server.go, run.go).
FATAL_RE = re.compile(r'"command failed"|failed to run Kubelet')
#: The klog header (severity, date, time, thread id) that differs between two starts.
KLOG_HEADER_RE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ ")


def error_lines(journal: str, keep: int = 3) -> list[str]:
    """The last ``keep`` distinct error lines of a kubelet journal (``journalctl -o cat``
    text), oldest first; [] when none matches ERROR_RE. When the kubelet logged why it
    gave up (FATAL_RE), only those lines count: the errors an earlier kubelet logged
    before the restart are not the cause. Lines that differ only in their klog header
    (each start has its own time and thread id) count once, as the newest."""
    lines = [x.strip() for x in journal.splitlines() if x.strip() and ERROR_RE.search(x)]
    fatal = [x for x in lines if FATAL_RE.search(x)]
    seen: dict[str, str] = {}
    for line in fatal or lines:
        key = KLOG_HEADER_RE.sub("", line)
        seen.pop(key, None)
        seen[key] = line
    out = list(seen.values())
    return out[-keep:] if keep > 0 else []


def exited(first: tuple[str, str], now: tuple[str, str]) -> bool:
    """Whether the unit, seen ``(ActiveState, MainPID)`` as ``first`` at the start, has
    exited since: it left ``active`` or runs under another main PID."""
    state, pid = now
    return state != "active" or pid in ("", "0") or (first[1] not in ("", "0") and pid != first[1])


def _unit(unit: str) -> tuple[str, str]:
    out = subprocess.run(
        ["systemctl", "show", unit, "-p", "ActiveState", "-p", "MainPID"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    fields = dict(line.partition("=")[::2] for line in out.splitlines() if "=" in line)
    return fields.get("ActiveState", ""), fields.get("MainPID", "")


def _healthz(url: str) -> bool:
    try:
        with open_url(url, timeout=2) as resp:
            return resp.status == 200 and resp.read(16).strip() == b"ok"
    except (urllib.error.URLError, OSError, ValueError, UrlConnectionError):
        return False


def _journal(unit: str) -> str:
    return subprocess.run(
        ["journalctl", "-u", unit, "--no-pager", "-n", "300", "-o", "cat"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", default="kubelet"),
            healthz_url=dict(type="str", default="http://127.0.0.1:10248/healthz"),
            settle=dict(type="int", default=10),
            timeout=dict(type="int", default=120),
            interval=dict(type="float", default=0.5),
            journal_lines=dict(type="int", default=3),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, elapsed=0.0, exits=0)
    start = time.monotonic()
    first = _unit(p["unit"])
    stable_since = start
    while True:
        elapsed = round(time.monotonic() - start, 1)
        now = _unit(p["unit"])
        if exited(first, now):
            lines = error_lines(_journal(p["unit"]), p["journal_lines"])
            module.fail_json(
                msg=f"{p['unit']} exited after the restart and systemd restarts it "
                f"(ActiveState {now[0] or '?'}): "
                + (" | ".join(lines) if lines else "no error line in its journal"),
                elapsed=elapsed,
                exits=1,
                journal=lines,
            )
        if p["healthz_url"]:
            if _healthz(p["healthz_url"]):
                module.exit_json(changed=False, elapsed=elapsed, exits=0)
        elif time.monotonic() - stable_since >= p["settle"]:
            module.exit_json(changed=False, elapsed=elapsed, exits=0)
        if elapsed >= p["timeout"]:
            lines = error_lines(_journal(p["unit"]), p["journal_lines"])
            module.fail_json(
                msg=f"{p['unit']} runs but {p['healthz_url']} did not answer ok within "
                f"{p['timeout']}s: " + (" | ".join(lines) if lines else "no error line"),
                elapsed=elapsed,
                exits=0,
                journal=lines,
            )
        time.sleep(p["interval"])


if __name__ == "__main__":
    main()
