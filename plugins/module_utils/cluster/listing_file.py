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
header with ``error`` only. It is written to ``<path>.part`` (made new, mode 0600) and
renamed to ``path`` once whole, so that a reader never sees half of it; the lister writes
its process id to ``<path>.pid`` first (``mark_started``), so that a reader waiting for the
file knows a lister that ended without writing it (``wait_for_listing``), and the header
names that process, so that a reader takes no file of another run. The lister refuses a
``path`` (or ``.pid``, ``.part``) that exists already: it makes files, it replaces none.
A lister given time to keep its listing (``keep_until_taken``) waits for a reader to take
it (to remove it) and, when none has by then, replaces it with a record of its expiry
(or, where that cannot be written, removes it): no copy of the cluster outlives a run that
stopped before its judge. A reader that finds the record (``ListingExpired``) lists the
cluster itself.

Both sides take a directory only of this user that no one else may write, and files only
of this user, not writable by others, no link and no special file: the pages are decoded
as this process's own (``marshal``); each page's CRC-32 is in the header, so a page that
is not the one written is refused before any check reads it. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
import zlib
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
    "ListingExpired",
    "ListingFileError",
    "keep_until_taken",
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
#: Items a stored page holds at most (pages are of ``PAGE_SIZE`` items and a few more).
MAX_PAGE_ITEMS = 1_000_000
#: Seconds a reader waits for the lister's process id file before it takes the lister for
#: one that never started.
START_WAIT_S = 60.0
#: Seconds between two looks for the file.
POLL_S = 0.05
#: Seconds between two looks of the lister for a reader that took its listing.
TAKEN_POLL_S = 0.25


class ListingFileError(Exception):
    """The listing file is missing, unreadable or not one of ours."""


class ListingExpired(ListingFileError):
    """The listing was kept its time unread and removed (``keep_until_taken``): the
    reader lists the cluster itself."""


def mark_started(path: str) -> None:
    """Write this process's id to ``<path>.pid``: the lister has started. Raises
    ListingFileError for a directory others may write, or a ``path``, ``<path>.pid`` or
    ``<path>.expired`` that exists already (a listing is written to a new path)."""
    _private_dir(path)
    for existing in (path, f"{path}.pid", f"{path}.expired"):
        if os.path.lexists(existing):
            raise ListingFileError(
                f"{existing} exists already; fix: give the listing a path that does not exist "
                "(the playbook makes a new directory for each run)"
            )
    _write_private(f"{path}.pid", str(os.getpid()).encode())


def write_listing(
    path: str,
    listing: Listing | None,
    *,
    log: list[str] | None = None,
    duration_s: float = 0.0,
    error: KubeError | None = None,
    expired_s: float | None = None,
) -> None:
    """``listing`` (or, with ``error``, the failure to list; with ``expired_s``, the record
    that a listing kept that many seconds unread was removed) written to ``path`` whole."""
    if expired_s is not None:
        _write_private(path, _framed({"expired_s": round(expired_s, 3), "pid": os.getpid()}, []))
        return
    if listing is None:
        err = error or KubeError(None, "the cluster could not be listed")
        error_header = {"error": {"status": err.status, "message": err.message}}
        _write_private(path, _framed({**error_header, "pid": os.getpid()}, []))
        return
    header: dict[str, Any] = {
        "pid": os.getpid(),
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
            "crc32": [zlib.crc32(b) for b in pages],
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
    try:
        mark_started(path)
    except (ListingFileError, OSError) as err:
        return {"failed": True, "msg": f"the cluster listing cannot be written: {err}"}
    t0 = time.monotonic()
    try:
        listing = list_for_checks(kube, plugin_namespace, page_size)
    except KubeError as err:
        with contextlib.suppress(ListingFileError, OSError):  # the reader sees none: named
            write_listing(path, None, error=err)
        return {"failed": True, "msg": f"the API server could not be read: {err}"}
    seconds = time.monotonic() - t0
    try:
        write_listing(path, listing, log=list(kube.log), duration_s=seconds)
    except (ListingFileError, OSError) as err:  # its directory removed: the checks ended
        why = getattr(err, "strerror", None) or str(err)
        return {"failed": True, "msg": f"the cluster listing cannot be written: {why}"}
    return {
        "listing_file": path,
        "api_requests": kube.requests,
        "duration_s": round(seconds, 3),
        "errors": dict(listing.errors),
        "objects": {name: len(getattr(listing, name)) for name in LISTS},
    }


def keep_until_taken(
    path: str,
    keep_s: float,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Wait, from now on, until a reader took the listing just written to ``path``
    (removed it, or its directory) or ``keep_s`` seconds have passed; then the listing
    left is replaced with the record of its expiry (``read_listing`` raises
    ListingExpired), or removed where the record cannot be written (a full disk, a
    directory no longer private), so that the cluster's objects are not left behind. True
    when a reader took it."""
    started = now()
    while os.path.lexists(path):
        if now() - started >= keep_s:
            try:
                write_listing(path, None, expired_s=keep_s)
                return False
            except (ListingFileError, OSError):
                pass
            try:
                if stat.S_ISDIR(os.lstat(path).st_mode):  # not the listing written
                    return False
                os.unlink(path)
            except FileNotFoundError:  # taken meanwhile
                return True
            except OSError:
                pass
            # the mark of the expiry where its record could not be written: a rename needs
            # no space (a reader lists the cluster itself, not waiting for this process)
            with contextlib.suppress(OSError):
                os.replace(f"{path}.pid", f"{path}.expired")
            return False
        sleep(TAKEN_POLL_S)
    return True


def wait_for_listing(
    path: str, timeout_s: float, now: Callable[[], float] = time.monotonic
) -> None:
    """Return once ``path`` exists; raise ListingFileError when ``timeout_s`` pass first,
    when the lister's process (``<path>.pid``) ended without writing it, or when no lister
    started within ``START_WAIT_S``; ListingExpired when the lister removed its listing
    unread (``<path>.expired``, ``keep_until_taken``)."""
    start = now()
    while not os.path.exists(path):
        if os.path.lexists(f"{path}.expired"):
            raise ListingExpired(
                f"{path}: the cluster listing was kept its time after it was written and not "
                "read in that time, so it was removed"
            )
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
    _private_dir(path)
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
    except (ValueError, RecursionError) as err:
        raise ListingFileError(f"{path}: the listing's header is not JSON: {err}") from None
    at += size
    if not isinstance(header, dict):
        raise ListingFileError(f"{path}: the listing's header is not an object")
    lister = _pid(f"{path}.pid")
    if lister is not None and header.get("pid") != lister:
        raise ListingFileError(
            f"{path} was written by process {str(header.get('pid'))[:20]}, not by the listing "
            f"started for this run (process {lister}); fix: remove it, or give a new path"
        )
    if "expired_s" in header:
        kept = header["expired_s"]
        kept_s = f"{kept:.0f} s" if _number(kept, float) and 0 <= kept < 1e9 else "its time"
        raise ListingExpired(
            f"{path}: the cluster listing was kept {kept_s} after it was written and not read "
            "in that time, so it was removed"
        )
    if "error" in header:
        error = header["error"] if isinstance(header["error"], dict) else {}
        status = error.get("status")
        raise KubeError(
            status if isinstance(status, int) and not isinstance(status, bool) else None,
            str(error.get("message") or "the cluster could not be listed"),
        )
    try:
        listing = _listing(header, data, at, keep or {})
        log = header.get("log", [])
        seconds = header.get("duration_s", 0.0)
        if not isinstance(log, list) or not all(isinstance(line, str) for line in log):
            raise ValueError("its request log is no list of lines")
        if not _number(seconds, float) or not 0 <= seconds < 1e9:
            raise ValueError("its duration is no number of seconds")
        return listing, log, float(seconds)
    except (KeyError, TypeError, ValueError, OverflowError) as err:
        raise ListingFileError(f"{path}: the listing does not hold together: {err}") from None


_KINDS = {"slices": "resourceslices", "claims": "resourceclaims", "classes": "deviceclasses"}


def _listing(
    header: Mapping[str, Any], data: bytes, at: int, keep: Mapping[str, Callable[[Any], bool]]
) -> Listing:
    for key, kind in (("version", dict), ("resource_group", dict), ("resource_version", str)):
        if header[key] is not None and not isinstance(header[key], kind):
            raise ValueError(f"{key} is no {kind.__name__}")
    for key in ("errors", "sources"):
        texts = header[key]
        if not isinstance(texts, dict) or not all(isinstance(v, str) for v in texts.values()):
            raise ValueError(f"{key} is no map of kinds to text")
    if not _number(header["requests"], int) or header["requests"] < 0:
        raise ValueError("requests is no count")
    out = Listing(
        version=header["version"],
        resource_group=header["resource_group"],
        resource_version=header["resource_version"],
        errors=dict(header["errors"]),
        requests=header["requests"],
        sources=dict(header["sources"]),
    )
    for name in LISTS:
        entry = header["lists"][name]
        pages = []
        sizes, sums = entry["sizes"], entry["crc32"]
        if not isinstance(sizes, list) or not isinstance(sums, list):
            raise ValueError(f"the pages of {name} are not listed")
        if len(sums) != len(entry["bytes"]) or any(
            not _number(n, int) or n > MAX_PAGE_ITEMS for n in sizes
        ):
            raise ValueError(f"the pages of {name} are not counted as they are")
        for length, crc in zip(entry["bytes"], sums, strict=True):
            if not _number(length, int) or length < 0 or at + length > len(data):
                raise ValueError(f"the pages of {name} are cut")
            page = data[at : at + length]
            if zlib.crc32(page) != crc:
                raise ValueError(f"a page of {name} is not the one written (CRC-32)")
            pages.append(page)
            at += length
        refused = entry["refused"]
        if refused is not None and (not _number(refused, int) or refused < 0):
            raise ValueError(f"the items refused of {name} are no count")
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
    """``data`` in ``path`` (mode 0600), through ``<path>.part``, made new (no file of that
    name is taken over: a link, a pipe, another's file), and a rename."""
    _private_dir(path)
    part = f"{path}.part"
    if os.path.isdir(path):
        raise ListingFileError(f"{path} is a directory; fix: give the listing a file's path")
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise ListingFileError(
            f"{part} exists already; fix: remove it, or give the listing a new path"
        ) from None
    try:
        try:
            write_fd(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(OSError):  # made here (O_EXCL): no half file left
            os.unlink(part)
        raise


def _read_private(path: str) -> bytes:
    try:
        # not blocked by a named pipe put in its place: refused below as no regular file
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        why = getattr(err, "strerror", None) or str(err)
        raise ListingFileError(f"cannot read the cluster listing {path}: {why}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ListingFileError(f"{path} is not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise ListingFileError(
                f"{path} is not this user's own file (owner {st.st_uid}, mode "
                f"{stat.S_IMODE(st.st_mode):o}): a listing is read only from a private file"
            )
        try:
            return read_fd(fd, 1 << 22)
        except OSError as err:
            raise ListingFileError(f"cannot read {path}: {err.strerror}") from None
    finally:
        os.close(fd)


def _pid(path: str) -> int | None:
    """The process id in ``path`` (``mark_started``), None while there is none to read."""
    try:
        text = _read_private(path)[:32].strip()
    except ListingFileError:
        return None
    # digits only (int() takes "_", signs and blanks); a process id is at least 1
    return int(text) if text.isdigit() and 0 < int(text) < 2**22 else None


def _number(value: Any, kind: type) -> bool:
    """``value`` is a finite number of ``kind`` (an int is a float's too), never a bool."""
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        return False
    return kind is int or abs(value) < float("inf")


def _private_dir(path: str) -> None:
    """Refuse (ListingFileError) a directory of ``path`` that another user owns or may
    write: a file there could be replaced between its writing and its reading."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(folder)
    except (OSError, ValueError) as err:
        raise ListingFileError(f"cannot use the directory {folder}: {err}") from None
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise ListingFileError(
            f"the directory {folder} of the cluster listing is not this user's own (owner "
            f"{st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}); fix: give a path in a directory "
            "only this user can write"
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # another user's process of that id: alive
        return True
    return True
