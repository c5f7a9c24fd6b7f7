"""GPU activity of allocated devices, from the DCGM exporter's metrics in Prometheus.

The DCGM exporter with its Kubernetes DRA mapping on (chart value
``kubernetesDRA.enabled``) labels each GPU or MIG device that a claim holds with
``dra_driver_name``, ``dra_pool_name`` and ``dra_device_name`` (and the claim's
``dra_claim_namespace``/``dra_claim_name``); the GPU simulator exposes the same names
(``lab/gpu-simulator/kubelet-plugin/internal/metrics``). A device's activity is the
profiling metric ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio 0-1, also reported for MIG
devices) times 100, else ``DCGM_FI_DEV_GPU_UTIL`` (percent), averaged over a window: the
definition the ``monitoring`` role's ``DRAAllocatedDeviceIdle`` alert uses
(``roles/monitoring/templates/gpufleet-dra.rules.yml.j2``; a unit test holds them equal).

``utilization_expr(window)`` is that PromQL; ``fetch(url, window, timeout_s)`` asks one
instant query of Prometheus' HTTP API (``/api/v1/query``) and returns
``{"driver/pool/device": percent}``; ``parse_vector`` reads its answer. Errors raise
``ActivityError`` with the reason and a fix.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import http_exchange as web
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig

#: Prometheus durations the window may take (one unit: 30m, 2h, 1d).
_WINDOW = re.compile(r"[1-9][0-9]{0,5}[smhdw]")
#: The most bytes of an answer read (a vector of 100,000 devices is about 40 MB).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
DEFAULT_WINDOW = "1h"
DEFAULT_IDLE_PERCENT = 5.0


class ActivityError(Exception):
    """Prometheus could not be asked or its answer not read; ``str()`` has the fix."""


def check_window(window: str) -> str:
    """``window`` when it is a Prometheus duration of one unit (``30m``, ``2h``, ``1d``);
    raises ActivityError otherwise."""
    if not isinstance(window, str) or not _WINDOW.fullmatch(window):
        raise ActivityError(
            f"{str(window)[:40]!r} is not a Prometheus duration; fix: give e.g. 30m, 2h or 1d"
        )
    return window


def utilization_expr(window: str) -> str:
    """PromQL for the mean activity (percent) of every device a claim holds over
    ``window``: graphics engine activity where the exporter reports it, else GPU
    utilization."""
    w = check_window(window)
    return (
        f'avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{dra_claim_name!=""}}[{w}]) * 100'
        f' or avg_over_time(DCGM_FI_DEV_GPU_UTIL{{dra_claim_name!=""}}[{w}])'
    )


def parse_vector(doc: Any) -> dict[str, float]:
    """``{"driver/pool/device": percent}`` from an ``/api/v1/query`` answer whose result
    is a vector; series without the three DRA labels or with a value that is not a number
    are left out; a device seen twice keeps its highest value. Raises ActivityError for an
    answer of another shape or an error status."""
    if not isinstance(doc, Mapping):
        raise ActivityError("the answer is not a JSON object; fix: give Prometheus' base URL")
    if doc.get("status") != "success":
        reason = str(doc.get("error") or doc.get("status"))[:200]
        raise ActivityError(f"the query failed: {reason}; fix: check the Prometheus URL")
    data = doc.get("data")
    if not isinstance(data, Mapping):
        data = {}
    result = data.get("result")
    if data.get("resultType") != "vector" or not isinstance(result, list):
        raise ActivityError("the answer holds no vector; fix: give Prometheus' base URL")
    out: dict[str, float] = {}
    for item in result:
        if not isinstance(item, Mapping):
            continue
        labels = item.get("metric")
        value = item.get("value")
        if not isinstance(labels, Mapping) or not isinstance(value, list) or len(value) != 2:
            continue
        names = [labels.get(k) for k in ("dra_driver_name", "dra_pool_name", "dra_device_name")]
        if not all(isinstance(n, str) and n for n in names):
            continue
        try:
            percent = float(value[1])
        except (TypeError, ValueError):
            continue
        if math.isnan(percent):  # no samples to average
            continue
        key = "/".join(names)
        out[key] = max(percent, out.get(key, percent))
    return out


def check_url(url: str) -> str:
    """``url`` as it may be shown (the password replaced by ``***``, no query) when it is
    an http(s) URL with a host; raises ActivityError otherwise. A user and password in it
    (``http://user:password@host:9090``) are sent as basic authentication
    (``common.http_exchange``)."""
    try:
        return web.parse_url(url).shown
    except web.HttpError as exc:
        raise ActivityError(str(exc)) from None


def fetch(url: str, window: str, timeout_s: float = 30.0) -> dict[str, float]:
    """Ask Prometheus at ``url`` (``http(s)://[user:password@]host:port[/prefix]``) for
    ``utilization_expr(window)``; returns ``parse_vector`` of the answer. One exchange
    (connect, headers and body) within ``timeout_s`` seconds in all (``common.http_exchange``);
    raises ActivityError naming the URL (without its password) when it cannot be reached,
    runs past the deadline, answers with an HTTP error, more than ``MAX_ANSWER_BYTES`` or
    anything that is not the API's JSON."""
    shown = check_url(url)
    query = urllib.parse.urlencode({"query": utilization_expr(window)})
    try:
        answer = web.exchange(
            url,
            "/api/v1/query?" + query,
            deadline_s=timeout_s,
            max_bytes=MAX_ANSWER_BYTES,
            headers={"Accept": "application/json"},
            what="Prometheus",
        )
    except web.HttpError as exc:
        raise ActivityError(str(exc)) from None
    fix = "fix: give Prometheus' base URL (e.g. http://prometheus:9090, no /api/v1 path)"
    if not 200 <= answer.status < 300:
        doc = _json_or_none(answer.body, shown)
        error = doc.get("error") if isinstance(doc, Mapping) else None
        said = f" ({' '.join(str(error).split())[:200]})" if error else ""
        raise ActivityError(f"{shown} answered HTTP {answer.status}{said}; {fix}")
    if answer.content_type and not answer.content_type.endswith("json"):
        raise ActivityError(
            f"{shown} answered {answer.content_type[:60]}, not Prometheus' JSON "
            f"(application/json); {fix}"
        )
    doc = _json_or_none(answer.body, shown)
    if doc is None:
        raise ActivityError(f"{shown} did not answer JSON; {fix}")
    try:
        return parse_vector(doc)
    except ActivityError as exc:
        raise ActivityError(f"{shown}: {exc}") from None


def _json_or_none(body: bytes, shown: str) -> Any:
    try:
        return ig.load_json(body.decode("utf-8", "replace"), shown)
    except ig.InputError:
        return None


def idle_devices(
    allocated: list[tuple[str, str, str, str, str]],
    activity: Mapping[str, float],
    idle_below: float,
) -> tuple[list[dict[str, Any]], int]:
    """The allocated devices whose activity is below ``idle_below`` percent, as
    ``{"device", "claim", "node", "model", "profile", "percent"}`` sorted by claim and
    device, and how many allocated devices have no activity series. ``allocated`` holds
    ``(device id, claim, node, model, profile)``."""
    idle, unknown = [], 0
    for device, claim, node, model, profile in allocated:
        if device not in activity:
            unknown += 1
            continue
        if activity[device] < idle_below:
            idle.append(
                {
                    "device": device,
                    "claim": claim,
                    "node": node,
                    "model": model,
                    "profile": profile,
                    "percent": round(activity[device], 2),
                }
            )
    idle.sort(key=lambda d: (d["claim"], d["device"]))
    return idle, unknown
