"""The upgrade report as ``gpufleet upgrade`` handles it around the role's runs: read it,
claim it for this cluster before a run (another cluster's is moved aside), name the hosts
a run left unfinished, and record the hosts that went unreachable during a run (the role
cannot: rescue blocks do not run for an unreachable host). The report itself is written by
module ``upgrade_report``; the planner reads it for resume (module ``upgrade_plan``)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import cluster as uc

__all__ = ["PhaseTracker", "own_report", "read_report", "unfinished_hosts"]


def read_report(path: Path) -> dict[str, Any]:
    """The upgrade report at ``path`` (module_utils ``upgrade.cluster.read_report``), or {}
    when it is missing or not JSON."""
    return uc.read_report(str(path))


def own_report(path: Path, cluster_uid: str | None) -> str:
    """Before a run: move a report of another cluster aside (``<name>.cluster-<uid>.json``
    beside it) and stamp the report with ``cluster_uid``, under the lock file the module
    ``upgrade_report`` takes. Returns a line saying what was moved, or ""."""
    if not cluster_uid:
        return ""
    with open(str(path) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        report = read_report(path)
        note = ""
        if uc.foreign_report(report, cluster_uid):
            aside = path.with_name(f"{path.stem}.cluster-{str(report['cluster_uid'])[:8]}.json")
            path.replace(aside)
            note = (
                f"the upgrade report {path} is another cluster's; moved to {aside}, this run "
                "starts afresh"
            )
            report = {}
        if report.get("cluster_uid") != cluster_uid:
            report["cluster_uid"] = cluster_uid
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            tmp.replace(path)
    return note


def unfinished_hosts(report: Mapping[str, Any], versions: Sequence[str]) -> list[str]:
    """Hosts a run to one of ``versions`` left ``failed`` or ``in-progress``."""
    if str(report.get("target") or "") not in {str(v) for v in versions}:
        return []
    nodes = report.get("nodes") or {}
    return [
        h
        for h, e in nodes.items()
        if isinstance(e, Mapping) and e.get("state") in ("failed", "in-progress")
    ]


class PhaseTracker:
    """Follows an upgrade run's ansible-runner events: per host, the last
    ``upgrade_phase`` the role set (``set_fact`` results) and whether and why the host was
    unreachable. Rescue blocks do not run for an unreachable host, so the run cannot
    record such a failure itself; :meth:`record` does it afterwards."""

    def __init__(self) -> None:
        self.phase: dict[str, str] = {}
        self.drained: dict[str, bool] = {}
        self.unreachable: dict[str, str] = {}

    def feed(self, event: Mapping[str, Any]) -> None:
        data = event.get("event_data") or {}
        host = data.get("host")
        if not host:
            return
        res = data.get("res") or {}
        if event.get("event") == "runner_on_ok":
            facts = res.get("ansible_facts") or {}
            if "upgrade_phase" in facts:
                self.phase[host] = str(facts["upgrade_phase"])
            if "upgrade_drained" in facts:
                self.drained[host] = bool(facts["upgrade_drained"])
        elif event.get("event") == "runner_on_unreachable" and not data.get("ignore_errors"):
            msg = str(res.get("msg") or "unreachable").strip()
            self.unreachable[host] = " ".join(msg.split())[:500]

    def record(self, path: Path, target: str) -> list[str]:
        """Mark in the report at ``path`` every unreachable host whose entry is still
        ``in-progress`` as ``failed``, with its phase and Ansible's message. Returns the
        hosts marked."""
        from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import record

        report = read_report(path)
        marked = []
        for host, msg in self.unreachable.items():
            entry = (report.get("nodes") or {}).get(host)
            if not entry or entry.get("state") != "in-progress" or report.get("target") != target:
                continue
            drained = self.drained.get(host, False)
            record.merge(
                report,
                {
                    "target": target,
                    "host": host,
                    "node": entry.get("node") or host,
                    "state": "failed",
                    "phase": self.phase.get(host) or entry.get("phase") or "",
                    "cause": f"host unreachable: {msg}",
                    "cordoned": True if drained else None,
                    "cordoned_by_upgrade": True if drained else None,
                    "timings": {},
                },
                record.now(),
            )
            marked.append(host)
        if marked:
            tmp = path.with_name(f".{path.name}.cli")
            tmp.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, path)
        return marked
