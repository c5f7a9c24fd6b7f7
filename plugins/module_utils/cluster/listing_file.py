# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""A ``Listing`` in a file, for a process that lists the cluster while another does other
work and judges it after: the playbook ``validate.yml`` lists the cluster in the
background (module ``dra_validate_listing``) while the nodes are read, and ``dra_validate``
reads the file (``read_listing``) instead of listing the cluster again.

The file: the line ``FORMAT``, an 8-byte big-endian length, a JSON header of that length
(the listing's version, errors, sources, requests, request log and, per object list, the
byte length and item count of each stored page), then the pages: each the compressed
bytes a ``kube.client.PagedList`` stores, as it stored them. A listing that failed is a
header with ``error`` only. It is written to ``<path>.part`` (mode 0600) and renamed to
``path`` once whole, so that a reader never sees half of it; the lister writes its process
id to ``<path>.pid`` first (``mark_started``), so that a reader waiting for the file knows
a lister that ended without writing it (``wait_for_listing``).

``read_listing`` takes a file only of this user, not writable by others and no link: it
decodes the stored pages as its own (``marshal``), so the file must be as trusted as this
process's memory. Standard library only.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import (
    Listing,
    list_for_checks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.files import (
    read_fd,
    write_fd,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.client import (
    PAGE_SIZE,
    Kube,
    KubeError,
    PagedList,
)

__all__ = [
    "FORMAT",
    "ListingFileError",
    "list_to_file",
    "mark_started",
    "read_listing",
    "wait_for_listing",
    "write_listing",
]

#: The first line of a listing file.
FORMAT = b"gpufleet-listing/1\n"
#: The object lists of a ``Listing`` (its fields made as lists), in the file's order.
LISTS = tuple(f.name for f in fields(Listing) if f.default_factory is list)
#: Bytes of the header at most (its request log is one line per request).
MAX_HEADER_BYTES = 64 * 2**20
#: Seconds a reader waits for the lister's process id file before it takes the lister for
#: one that never started.
START_WAIT_S = 60.0
#: Seconds between two looks for the file.
POLL_S = 0.05


class ListingFileError(Exception):
    """The listing file is missing, unreadable or not one of ours."""


def mark_started(path: str) -> None:
    """Write this process's id to ``<path>.pid``: the lister has started."""
    _write_private(f"{path}.pid", str(os.getpid()).encode())


def write_listing(
    path: str,
    listing: Listing | None,
    *,
    log: list[str] | None = None,
    duration_s: float = 0.0,
    error: KubeError | None = None,
) -> None:
    """``listing`` (or, with ``error``, the failure to list) written to ``path`` whole."""
    if listing is None:
        err = error or KubeError(None, "the cluster could not be listed")
        _write_private(path, _framed({"error": {"status": err.status, "message": err.message}}, []))
        return
    header: dict[str, Any] = {
        "version": listing.version,
        "resource_group": listing.resource_group,
        "resource_version": listing.resource_version,
        "errors": listing.errors,
        "requests": listing.requests,
        "sources": listing.sources,
        "log": list(log or []),
        "duration_s": round(duration_s, 3),
        "lists": {},
    }
    blobs: list[bytes] = []
    for name in LISTS:
        objects = getattr(listing, name)
        paged = objects if isinstance(objects, PagedList) else PagedList(objects)
        pages, sizes, refused = paged.stored()
        header["lists"][name] = {
            "bytes": [len(b) for b in pages],
            "sizes": sizes,
            "refused": refused,
        }
        blobs += pages
    _write_private(path, _framed(header, blobs))


def list_to_file(
    kube: Kube, path: str, plugin_namespace: str = "", page_size: int = PAGE_SIZE
) -> dict[str, Any]:
    """List the cluster as validate's checks read it (``listing.list_for_checks``) and
    write it to ``path``, for a reader in another process; a listing that fails is written
    as its error, which ``read_listing`` raises. Returns what the module
    ``dra_validate_listing`` returns (``failed`` and ``msg`` when the listing failed)."""
    mark_started(path)
    t0 = time.monotonic()
    try:
        listing = list_for_checks(kube, plugin_namespace, page_size)
    except KubeError as err:
        write_listing(path, None, error=err)
        return {"failed": True, "msg": f"the API server could not be read: {err}"}
    seconds = time.monotonic() - t0
    write_listing(path, listing, log=list(kube.log), duration_s=seconds)
    return {
        "listing_file": path,
        "api_requests": kube.requests,
        "duration_s": round(seconds, 3),
        "errors": dict(listing.errors),
        "objects": {name: len(getattr(listing, name)) for name in LISTS},
    }


def wait_for_listing(
    path: str, timeout_s: float, now: Callable[[], float] = time.monotonic
) -> None:
    """Return once ``path`` exists; raise ListingFileError when ``timeout_s`` pass first,
    when the lister's process (``<path>.pid``) ended without writing it, or when no lister
    started within ``START_WAIT_S``."""
    start = now()
    while not os.path.exists(path):
        waited = now() - start
        pid = _pid(f"{path}.pid")
        if pid is None and waited > min(START_WAIT_S, timeout_s):
            raise ListingFileError(
                f"no cluster listing was started for {path} (no {path}.pid after {waited:.0f} s)"
            )
        if pid is not None and not _alive(pid):
            if os.path.exists(path):  # written just before it ended
                return
            raise ListingFileError(
                f"the cluster listing (process {pid}) ended without writing {path}: it was "
                "stopped or ran out of memory"
            )
        if waited > timeout_s:
            raise ListingFileError(
                f"the cluster listing did not finish within {timeout_s:.0f} s ({path})"
            )
        time.sleep(POLL_S)


def read_listing(
    path: str, keep: Mapping[str, Callable[[Any], bool]] | None = None
) -> tuple[Listing, list[str], float]:
    """The Listing of ``path``, the lister's request log and the seconds it took; each
    object list built with ``keep``'s predicate of its kind (``DEFAULT_KINDS`` names) when
    its lister judged it so. Raises ListingFileError for a file that is not such a
    listing, and the lister's KubeError for a listing that failed."""
    data = _read_private(path)
    if not data.startswith(FORMAT) or len(data) < len(FORMAT) + 8:
        raise ListingFileError(f"{path} is not a cluster listing of this version")
    at = len(FORMAT)
    size = int.from_bytes(data[at : at + 8], "big")
    at += 8
    if size > MAX_HEADER_BYTES or at + size > len(data):
        raise ListingFileError(f"{path}: the listing's header is cut or too large")
    try:
        header = json.loads(data[at : at + size])
    except ValueError as err:
        raise ListingFileError(f"{path}: the listing's header is not JSON: {err}") from None
    at += size
    if not isinstance(header, dict):
        raise ListingFileError(f"{path}: the listing's header is not an object")
    if "error" in header:
        error = header["error"] if isinstance(header["error"], dict) else {}
        status = error.get("status")
        raise KubeError(
            status if isinstance(status, int) and not isinstance(status, bool) else None,
            str(error.get("message") or "the cluster could not be listed"),
        )
    try:
        listing = _listing(header, data, at, keep or {})
        log = [str(line) for line in header.get("log") or []]
        return listing, log, float(header.get("duration_s") or 0.0)
    except (KeyError, TypeError, ValueError) as err:
        raise ListingFileError(f"{path}: the listing does not hold together: {err}") from None


_KINDS = {"slices": "resourceslices", "claims": "resourceclaims", "classes": "deviceclasses"}


def _listing(
    header: Mapping[str, Any], data: bytes, at: int, keep: Mapping[str, Callable[[Any], bool]]
) -> Listing:
    out = Listing(
        version=header["version"],
        resource_group=header["resource_group"],
        resource_version=header["resource_version"],
        errors=dict(header["errors"]),
        requests=int(header["requests"]),
        sources=dict(header["sources"]),
    )
    for name in LISTS:
        entry = header["lists"][name]
        pages = []
        for length in entry["bytes"]:
            if not isinstance(length, int) or length < 0 or at + length > len(data):
                raise ValueError(f"the pages of {name} are cut")
            pages.append(data[at : at + length])
            at += length
        refused = entry["refused"]
        setattr(
            out,
            name,
            PagedList.restored(pages, entry["sizes"], keep.get(_KINDS.get(name, name)), refused),
        )
    if at != len(data):
        raise ValueError("bytes follow the last page")
    return out


def _framed(header: Mapping[str, Any], blobs: list[bytes]) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([FORMAT, len(text).to_bytes(8, "big"), text, *blobs])


def _write_private(path: str, data: bytes) -> None:
    """``data`` in ``path`` (mode 0600), through ``<path>.part`` and a rename."""
    part = f"{path}.part"
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        write_fd(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(part, path)


def _read_private(path: str) -> bytes:
    try:
        # not blocked by a named pipe put in its place: refused below as no regular file
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise ListingFileError(f"cannot read the cluster listing {path}: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ListingFileError(f"{path} is not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise ListingFileError(
                f"{path} is not this user's own file (owner {st.st_uid}, mode "
                f"{stat.S_IMODE(st.st_mode):o}): a listing is read only from a private file"
            )
        return read_fd(fd, 1 << 22)
    finally:
        os.close(fd)


def _pid(path: str) -> int | None:
    """The process id in ``path`` (``mark_started``), None while there is none to read."""
    try:
        text = _read_private(path)[:32]
        return int(text.strip() or b"0") or None
    except (ListingFileError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process of that id: alive
        return True
    return True
