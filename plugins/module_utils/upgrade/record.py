"""The upgrade report (one JSON file on the control host) and the one way it is written,
for the modules that record a node's state in it: ``upgrade_report`` (any state),
``upgrade_node_state`` (a node starting, in progress) and ``upgrade_uncordon`` (a node
done). ``gpufleet upgrade`` and a rerun read it.

Shape: ``{target, previous_target?, updated, nodes: {<host>: {node, state, phase,
version, cause, cordoned, cordoned_by_upgrade, timings_s, updated, devices_before?}},
events: [{time, host, state, phase}]}``; timestamps are UTC ISO 8601
(``%Y-%m-%dT%H:%M:%SZ``), timings seconds rounded to 0.1. ``devices_before`` (``{target,
devices}``) is what :func:`devices_before` keeps for a node not yet at the target.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

#: Where a node stands (``state``).
STATES = ("upgraded", "skipped", "in-progress", "failed")


def now() -> str:
    """The current UTC time as the report writes it."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge(report: dict[str, Any], params: Mapping[str, Any], stamp: str) -> dict[str, Any]:
    """Merge the node entry described by ``params`` (``target, host, node, state, phase,
    cause, cordoned, cordoned_by_upgrade, timings``; ``cordoned`` and
    ``cordoned_by_upgrade`` None keep the entry's value) into ``report``; return the
    entry. A node starting again (``in-progress``) starts its timings afresh."""
    if report.get("target") != params["target"]:
        report["previous_target"] = report.get("target")
        report["target"] = params["target"]
    nodes = report.setdefault("nodes", {})
    entry = nodes.setdefault(params["host"], {})
    timings = {} if params["state"] == "in-progress" else dict(entry.get("timings_s") or {})
    timings.update({k: round(float(v), 1) for k, v in (params.get("timings") or {}).items()})
    entry.update(
        {
            "node": params.get("node") or entry.get("node") or params["host"],
            "state": params["state"],
            "phase": params.get("phase") or "",
            "version": params["target"]
            if params["state"] in ("upgraded", "skipped")
            else entry.get("version"),
            "cause": (params.get("cause") or "") if params["state"] == "failed" else "",
            "timings_s": timings,
            "updated": stamp,
        }
    )
    if params["state"] in ("upgraded", "skipped"):
        entry.pop("devices_before", None)  # kept only while the node is not at the target
    if params.get("cordoned") is not None:
        entry["cordoned"] = params["cordoned"]
    if params.get("cordoned_by_upgrade") is not None:
        entry["cordoned_by_upgrade"] = params["cordoned_by_upgrade"]
    entry.setdefault("cordoned_by_upgrade", False)
    report.setdefault("events", []).append(
        {"time": stamp, "host": params["host"], "state": params["state"], "phase": entry["phase"]}
    )
    report["updated"] = stamp
    return entry


def write(path: str, records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge ``records`` (as :func:`merge` takes them) into the report at ``path`` under an
    exclusive lock (``path + '.lock'``; the hosts of one batch write at once), replacing
    the file atomically; its directory is created. A file that is not JSON starts afresh.
    A record's ``started`` (epoch seconds the node's step began) sets its timing
    ``node_total_s`` to the time up to this write, so that what the writing module run did
    before (an uncordon) counts in it. Returns the last entry written. Raises OSError as
    the file system does."""
    entry: dict[str, Any] = {}
    with _locked(path) as report:
        stamp = now()
        for record in records:
            if record.get("started") is not None:
                total = time.time() - float(record["started"])
                record = {**record, "timings": {**(record.get("timings") or {}),
                                                "node_total_s": total}}  # fmt: skip
            entry = merge(report, record, stamp)
    return entry


def devices_before(path: str, host: str, target: str, devices: int) -> int:
    """The devices ``host``'s node published before the upgrade to ``target`` began on it:
    the most that any read of a run of this target found (``devices`` now), kept in its
    entry of the report at ``path`` as ``devices_before`` until the node is at the target.
    A run that resumes a node whose kubelet was down (its ResourceSlices withdrawn) so
    waits for the devices the node had, not for none. Raises OSError as :func:`write`."""
    with _locked(path) as report:
        entry = report.setdefault("nodes", {}).setdefault(host, {})
        kept = entry.get("devices_before")
        before = 0
        if isinstance(kept, dict) and kept.get("target") == target:
            with contextlib.suppress(TypeError, ValueError, OverflowError):
                before = max(0, int(kept.get("devices") or 0))
        most = max(before, int(devices))
        entry["devices_before"] = {"target": target, "devices": most}
    return most


@contextlib.contextmanager
def _locked(path: str) -> Iterator[dict[str, Any]]:
    """The report at ``path``, read under an exclusive lock (``path + '.lock'``) and
    written back atomically when the block ends without an error; its directory is
    created. A file that is not JSON, or parts of it of the wrong type (a hand-edited or
    foreign file), start afresh."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        report: dict[str, Any] = {}
        if os.path.exists(path):
            try:
                with open(path) as fh:
                    report = json.load(fh)
            except ValueError:
                report = {}
        if not isinstance(report, dict):
            report = {}
        for key, kind in (("nodes", dict), ("events", list)):
            if not isinstance(report.get(key, kind()), kind):
                report[key] = kind()
        for host in [h for h, e in report.get("nodes", {}).items() if not isinstance(e, dict)]:
            report["nodes"][host] = {}
        yield report
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".upgrade-report-")
        with os.fdopen(fd, "w") as fh:
            json.dump(report, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)


def record_argspec() -> dict[str, Any]:
    """The ``record`` option of ``upgrade_node_state`` and ``upgrade_uncordon``: the node's
    entry to write (the fields :func:`merge` takes; ``path`` the report file), a new copy
    per call."""
    return {
        "type": "dict",
        "options": {
            "path": {"type": "path", "required": True},
            "target": {"type": "str", "required": True},
            "host": {"type": "str", "required": True},
            "node": {"type": "str", "default": ""},
            "state": {"type": "str", "required": True, "choices": list(STATES)},
            "phase": {"type": "str", "default": ""},
            "cordoned": {"type": "bool"},
            "cordoned_by_upgrade": {"type": "bool"},
            "timings": {"type": "dict", "default": {}},
            "started": {"type": "float"},
        },
    }
