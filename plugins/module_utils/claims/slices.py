# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The devices ResourceSlices publish and the devices claims hold.

Pure functions over listed objects (JSON dicts as the API returns them: ResourceSlices,
ResourceClaims); no I/O. A device is named ``driver/pool/device``, as allocation results
name it (``status.allocation.devices.results``); only the newest generation of a pool
counts, as in the scheduler (``pool.generation``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import as_map
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk


def allocated_devices(claim: Mapping[str, Any]) -> list[str]:
    """``driver/pool/device`` of every allocation result of a claim."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [
        f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"
        for r in (alloc.get("devices") or {}).get("results") or []
    ]


def _generation(pool: Mapping[str, Any]) -> int:
    """``pool.generation`` as the API server holds it (an int64, not negative); anything
    else, which no API server serves, counts as generation 0 rather than stopping the reader."""
    value = pool.get("generation")
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return 0


def _pool_key(s: Any) -> tuple[Mapping[str, Any], tuple[str, str], Mapping[str, Any]]:
    """``(spec, (driver, pool name), pool)`` of a ResourceSlice; a driver or pool name that
    is not text reads as ""."""
    spec = as_map(as_map(s).get("spec"))
    pool = as_map(spec.get("pool"))
    driver, name = spec.get("driver", ""), pool.get("name", "")
    return (
        spec,
        (driver if isinstance(driver, str) else "", name if isinstance(name, str) else ""),
        pool,
    )


def _newest_generations(slices: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """``(driver, pool)`` -> the newest ``pool.generation`` of its slices."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        _spec, k, pool = _pool_key(s)
        newest[k] = max(newest.get(k, 0), _generation(pool))
    return newest


def iter_latest_slices(slices: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """ResourceSlices of the newest generation of each ``(driver, pool)``: the scheduler
    ignores older generations (``pool.generation``). ``slices`` is walked twice when it
    can be (a list or a ``PagedList``), so that no list of all slices is held; a
    ``PagedList`` keeps the newest generations it was walked for once
    (``PagedList.derived``), so that each later reader walks it once."""
    if isinstance(slices, vk.PagedList):
        newest = slices.derived("newest-generations", _newest_generations)
    else:
        if isinstance(slices, Iterator):
            slices = list(slices)
        newest = _newest_generations(slices)
    for s in slices:
        _spec, k, pool = _pool_key(s)
        if isinstance(s, Mapping) and _generation(pool) == newest.get(k, 0):
            yield s


class _Newest:
    """A fold given only the slices :func:`iter_latest_slices` yields (``newest``: the
    newest generation of each pool)."""

    def __init__(self, fold: Any, newest: Mapping[tuple[str, str], int]) -> None:
        self.fold = fold
        self.newest = newest

    def add(self, s: Any) -> None:
        _spec, k, pool = _pool_key(s)
        if isinstance(s, Mapping) and _generation(pool) == self.newest.get(k, 0):
            self.fold.add(s)

    def result(self) -> Any:
        return self.fold.result()


def latest_folds(
    slices: Iterable[Mapping[str, Any]], folds: Mapping[str, Callable[[], Any]]
) -> dict[str, Callable[[], Any]]:
    """``folds`` (key -> a function making a fresh fold, ``kube.client.PagedList.derive``)
    made to read only the slices of the newest generation of each pool, under keys of
    their own: for ``kube.client.folded`` of ``slices``, alone or in one walk with folds
    of every slice. ``slices`` must be a list or a ``PagedList`` (walked once more for the
    newest generations unless a ``PagedList`` keeps them)."""
    if isinstance(slices, vk.PagedList):
        newest = slices.derived("newest-generations", _newest_generations)
    else:
        newest = _newest_generations(slices)
    return {
        f"newest generation: {key}": functools.partial(_newest_fold, make, newest)
        for key, make in folds.items()
    }


def _newest_fold(make: Callable[[], Any], newest: Mapping[tuple[str, str], int]) -> _Newest:
    return _Newest(make(), newest)


def latest_slices(slices: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """:func:`iter_latest_slices` as a list."""
    return list(iter_latest_slices(slices))


@dataclass(frozen=True)
class Published:
    """One published device: ``driver``, ``pool``, ``name``, ``node`` (``spec.nodeName``,
    or ``(all nodes)``/``(node selector)``) and the device object."""

    driver: str
    pool: str
    name: str
    node: str
    device: Mapping[str, Any]

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"


def node_of(spec: Mapping[str, Any]) -> str:
    """The node of a ResourceSlice's ``spec``: ``nodeName``, or ``(all nodes)``/``(node
    selector)``."""
    name = spec.get("nodeName")
    if name and isinstance(name, str):
        return name
    return "(all nodes)" if spec.get("allNodes") is True else "(node selector)"


def slice_devices(s: Mapping[str, Any]) -> Iterator[Published]:
    """Every device of one ResourceSlice."""
    spec, (driver, pool), _pool = _pool_key(s)
    node = node_of(spec)
    devices = spec.get("devices")
    for d in devices if isinstance(devices, list) else []:
        if isinstance(d, Mapping) and isinstance(d.get("name", ""), str):
            yield Published(driver, pool, d.get("name", ""), node, d)


def iter_published_devices(slices: Iterable[Mapping[str, Any]]) -> Iterator[Published]:
    """Every device of the newest generation of every pool, one slice at a time."""
    for s in iter_latest_slices(slices):
        yield from slice_devices(s)


class PublishedDevices:
    """Every device of the newest generation of every pool of ``slices``, read again on
    each walk (:func:`iter_published_devices`), for a reader that walks the devices several
    times: no device is held between walks, and a walk of a ``PagedList`` holds one decoded
    page. At 10,000 nodes of 16 devices a list of them all held about 180 MiB. ``slices``
    that can be walked once only (an iterator) are kept as a list."""

    def __init__(self, slices: Iterable[Mapping[str, Any]]) -> None:
        self.slices = list(slices) if isinstance(slices, Iterator) else slices

    def __iter__(self) -> Iterator[Published]:
        return iter_published_devices(self.slices)
