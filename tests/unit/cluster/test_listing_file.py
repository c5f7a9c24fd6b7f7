"""A ``Listing`` through a file and back (``plugins/module_utils/cluster/listing_file.py``):
the checks judge the listing read back as the one listed, a failed listing reads back as
its error, and a file that is not a private listing of ours is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as vli
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing_file as lf
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import Listing
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.client import (
    KubeError,
    PagedList,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import cluster as vc

from tests.unit.cluster.test_listing import fleet

pytestmark = pytest.mark.unit

#: The kind of each object list of a Listing whose name is not its kind.
KINDS = {"slices": "resourceslices", "claims": "resourceclaims", "classes": "deviceclasses"}


def _paged(listing: Listing) -> Listing:
    """The listing as list_cluster stores it: PagedLists, each judged by validate's keep."""
    for name in lf.LISTS:
        keep = vli.READABLE.get(KINDS.get(name, name))
        objects = list(getattr(listing, name))
        setattr(listing, name, PagedList.of_pages([objects[:2], objects[2:]], keep))
    return listing


def test_the_checks_judge_the_listing_read_back_as_the_one_listed(tmp_path: Path) -> None:
    listing, settings = fleet()
    listing = _paged(listing)
    listing.requests, listing.sources = 7, {"pods": "GET /api/v1/pods"}
    listing.errors = {"events": "403: forbidden"}
    path = str(tmp_path / "listing")
    lf.write_listing(path, listing, log=["GET /version 200"], duration_s=1.25)
    assert os.stat(path).st_mode & 0o777 == 0o600
    back, log, seconds = lf.read_listing(path, vli.READABLE)
    assert (log, seconds) == (["GET /version 200"], 1.25)
    assert (back.requests, back.sources, back.errors) == (7, listing.sources, listing.errors)
    assert back.version == listing.version and back.resource_version == listing.resource_version
    for name in lf.LISTS:
        assert list(getattr(back, name)) == list(getattr(listing, name)), name
    # each list is known as judged by validate's predicate, as it was listed
    assert back.pods.vetted(vli.READABLE["pods"]) == listing.pods.vetted(vli.READABLE["pods"]) == 0
    assert [c.to_dict() for c in vc.all_checks(back, settings)] == [
        c.to_dict() for c in vc.all_checks(listing, settings)
    ]


def test_a_failed_listing_reads_back_as_its_error(tmp_path: Path) -> None:
    path = str(tmp_path / "listing")
    lf.write_listing(path, None, error=KubeError(401, "Unauthorized"))
    with pytest.raises(KubeError) as err:
        lf.read_listing(path)
    assert (err.value.status, err.value.message) == (401, "Unauthorized")


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a listing at all",
        lf.FORMAT + (10**9).to_bytes(8, "big") + b"{}",
        lf.FORMAT + (2).to_bytes(8, "big") + b"[]",
        lf.FORMAT + (3).to_bytes(8, "big") + b"{x}",
        lf.FORMAT + (2).to_bytes(8, "big") + b"{}",
    ],
)
def test_a_file_that_is_not_a_listing_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "listing"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(lf.ListingFileError):
        lf.read_listing(str(path))


def test_pages_that_do_not_add_up_are_refused(tmp_path: Path) -> None:
    listing, _ = fleet()
    path = str(tmp_path / "listing")
    lf.write_listing(path, _paged(listing))
    data = Path(path).read_bytes()
    for bad in (data[:-5], data + b"tail"):
        Path(path).write_bytes(bad)
        with pytest.raises(lf.ListingFileError, match="does not hold together"):
            lf.read_listing(path)


def test_a_file_others_may_write_or_a_link_is_refused(tmp_path: Path) -> None:
    listing, _ = fleet()
    path = tmp_path / "listing"
    lf.write_listing(str(path), listing)
    path.chmod(0o622)
    with pytest.raises(lf.ListingFileError, match="not this user's own file"):
        lf.read_listing(str(path))
    path.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(lf.ListingFileError, match="cannot read"):
        lf.read_listing(str(link))
    with pytest.raises(lf.ListingFileError, match="cannot read"):
        lf.read_listing(str(tmp_path / "missing"))


def test_the_wait_ends_with_the_file(tmp_path: Path) -> None:
    path = str(tmp_path / "listing")
    lf.mark_started(path)  # this process lists
    lf.write_listing(path, None, error=KubeError(None, "x"))
    lf.wait_for_listing(path, 5)


def test_the_wait_ends_when_the_lister_ended_without_the_file(tmp_path: Path) -> None:
    path = str(tmp_path / "listing")
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                           capture_output=True, text=True)  # fmt: skip
    Path(f"{path}.pid").write_text(ended.stdout.strip())
    with pytest.raises(lf.ListingFileError, match="ended without writing"):
        lf.wait_for_listing(path, 60)


def test_the_wait_ends_when_no_lister_started_or_the_time_is_up(tmp_path: Path) -> None:
    path = str(tmp_path / "listing")
    clock = iter(range(0, 10_000, 10))
    with pytest.raises(lf.ListingFileError, match="no cluster listing was started"):
        lf.wait_for_listing(path, 600, now=lambda: float(next(clock)))
    lf.mark_started(path)  # alive: this process
    clock = iter(range(0, 10_000, 10))
    with pytest.raises(lf.ListingFileError, match="did not finish within 30 s"):
        lf.wait_for_listing(path, 30, now=lambda: float(next(clock)))


def test_the_module_result_of_a_listing_names_what_it_wrote(tmp_path: Path) -> None:
    """``list_to_file`` with a Kube whose listing fails: the error in the file, and a
    failed result naming it."""

    class Refusing:
        requests, log, server = 0, [], "https://192.0.2.1"

        def get(self, path: str) -> None:
            raise KubeError(None, "the API server https://192.0.2.1 cannot be reached")

    path = str(tmp_path / "listing")
    result = lf.list_to_file(Refusing(), path)  # type: ignore[arg-type]
    assert result["failed"] and "cannot be reached" in result["msg"]
    assert Path(f"{path}.pid").read_text() == str(os.getpid())
    with pytest.raises(KubeError, match="cannot be reached"):
        lf.read_listing(path)
    assert json.loads(Path(path).read_bytes()[len(lf.FORMAT) + 8 :])["error"]["status"] is None


def test_a_named_pipe_in_place_of_the_file_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "listing"
    os.mkfifo(path, 0o600)
    with pytest.raises(lf.ListingFileError, match="not a regular file"):
        lf.read_listing(str(path))
    other = tmp_path / "other"
    os.mkfifo(f"{other}.pid", 0o600)  # no lister's id to read: taken for none started
    clock = iter(range(0, 10_000, 10))
    with pytest.raises(lf.ListingFileError, match="no cluster listing was started"):
        lf.wait_for_listing(str(other), 600, now=lambda: float(next(clock)))


def _header(path: Path) -> tuple[dict[str, Any], bytes]:
    data = path.read_bytes()
    size = int.from_bytes(data[len(lf.FORMAT) : len(lf.FORMAT) + 8], "big")
    start = len(lf.FORMAT) + 8
    return json.loads(data[start : start + size]), data[start + size :]


def _framed(path: Path, header: dict[str, Any], pages: bytes) -> None:
    text = json.dumps(header).encode()
    path.write_bytes(lf.FORMAT + len(text).to_bytes(8, "big") + text + pages)
    path.chmod(0o600)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda h: h.update(requests="12"), "requests is no count"),
        (lambda h: h.update(requests=True), "requests is no count"),
        (lambda h: h.update(requests=-5), "requests is no count"),
        (lambda h: h.update(errors=[["pods", 5]]), "errors is no map"),
        (lambda h: h.update(errors={"pods": {"x": 1}}), "errors is no map"),
        (lambda h: h.update(sources=["ab"]), "sources is no map"),
        (lambda h: h.update(version="v1.37"), "version is no dict"),
        (lambda h: h.update(resource_version=7), "resource_version is no str"),
        (lambda h: h.update(log="abc"), "request log"),
        (lambda h: h.update(duration_s=10**400), "duration"),
        (lambda h: h.update(duration_s="nan"), "duration"),
        (lambda h: h["lists"]["pods"].update(sizes=[10**30]), "not counted as they are"),
        (lambda h: h["lists"]["pods"].update(refused="lots"), "no count"),
        (lambda h: h["lists"]["pods"].update(refused=-7), "no count"),
        (lambda h: h["lists"]["pods"].update(crc32=[]), "not counted as they are"),
    ],
)
def test_a_header_field_of_another_type_is_refused(tmp_path: Path, edit: Any, why: str) -> None:
    listing, _ = fleet()
    path = tmp_path / "listing"
    lf.write_listing(str(path), _paged(listing))
    header, pages = _header(path)
    edit(header)
    path.unlink()
    _framed(path, header, pages)
    with pytest.raises(lf.ListingFileError, match=why):
        lf.read_listing(str(path))


def test_a_page_that_is_not_the_one_written_is_refused(tmp_path: Path) -> None:
    listing, _ = fleet()
    path = tmp_path / "listing"
    lf.write_listing(str(path), _paged(listing))
    header, pages = _header(path)
    path.unlink()
    _framed(path, header, bytes(len(pages)))  # as long, other bytes
    with pytest.raises(lf.ListingFileError, match="CRC-32"):
        lf.read_listing(str(path))


def test_a_header_nested_beyond_reason_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "listing"
    text = b"[" * 200_000 + b"]" * 200_000
    path.write_bytes(lf.FORMAT + len(text).to_bytes(8, "big") + text)
    path.chmod(0o600)
    with pytest.raises(lf.ListingFileError, match="not JSON"):
        lf.read_listing(str(path))


def test_the_lister_makes_files_and_replaces_none(tmp_path: Path) -> None:
    for existing in ("listing", "listing.pid"):
        folder = tmp_path / existing.replace(".", "-")
        folder.mkdir(mode=0o700)
        (folder / existing).write_text("precious\n")
        with pytest.raises(lf.ListingFileError, match="exists already"):
            lf.mark_started(str(folder / "listing"))
        assert (folder / existing).read_text() == "precious\n"
    folder = tmp_path / "part"
    folder.mkdir(mode=0o700)
    os.mkfifo(folder / "listing.part", 0o600)  # taken over, it would block the writer
    with pytest.raises(lf.ListingFileError, match="exists already"):
        lf.write_listing(str(folder / "listing"), None, error=KubeError(None, "x"))
    (tmp_path / "adir").mkdir(mode=0o700)
    with pytest.raises(lf.ListingFileError, match="is a directory"):
        lf.write_listing(str(tmp_path / "adir"), None, error=KubeError(None, "x"))


def test_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    for call in (
        lambda: lf.mark_started(str(shared / "listing")),
        lambda: lf.write_listing(str(shared / "listing"), None, error=KubeError(None, "x")),
        lambda: lf.read_listing(str(shared / "listing")),
    ):
        with pytest.raises(lf.ListingFileError, match="not this user's own"):
            call()
    assert list(shared.iterdir()) == []


def test_a_listing_of_another_run_is_refused(tmp_path: Path) -> None:
    listing, _ = fleet()
    path = tmp_path / "listing"
    lf.write_listing(str(path), listing)  # an earlier run's, this process's id in it
    Path(f"{path}.pid").write_text(str(os.getpid() + 1))  # the lister of this run
    with pytest.raises(lf.ListingFileError, match="not by the listing started for this run"):
        lf.read_listing(str(path))


@pytest.mark.parametrize("text", ["9" * 40, str(2**63), "-1", "-99999", "4_194_303", "12.5", "x"])
def test_a_process_id_that_is_none_is_taken_for_none(tmp_path: Path, text: str) -> None:
    path = tmp_path / "listing"
    Path(f"{path}.pid").write_text(text)
    clock = iter(range(0, 10_000, 10))
    with pytest.raises(lf.ListingFileError, match="no cluster listing was started"):
        lf.wait_for_listing(str(path), 600, now=lambda: float(next(clock)))


def test_a_listing_taken_ends_the_lister_s_wait(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = str(folder / "listing")
    lf.mark_started(path)
    lf.write_listing(path, _paged(fleet()[0]))
    looks: list[float] = []

    def sleep(seconds: float) -> None:  # the reader takes it while the lister waits
        looks.append(seconds)
        if len(looks) == 3:
            lf.read_listing(path)
            for name in os.listdir(folder):
                os.unlink(folder / name)
            folder.rmdir()

    assert lf.keep_until_taken(path, 600, now=lambda: 1.0, sleep=sleep) is True
    assert len(looks) == 3 and not folder.exists()


def _clock(step: int = 10) -> Any:
    ticks = iter(range(0, 10_000, step))
    return lambda: float(next(ticks))


def test_a_listing_not_taken_in_time_leaves_no_object_behind(tmp_path: Path) -> None:
    path = str(tmp_path / "listing")
    lf.mark_started(path)
    listing = _paged(fleet()[0])
    lf.write_listing(path, listing)
    assert list(lf.read_listing(path)[0].nodes) == list(listing.nodes)
    taken = lf.keep_until_taken(path, 30, now=_clock(), sleep=lambda s: None)
    assert taken is False
    header, pages = _header(Path(path))
    assert header == {"expired_s": 30, "pid": os.getpid()} and pages == b""  # no object left
    # a reader that comes after is told, and lists the cluster itself (validate.run)
    with pytest.raises(lf.ListingExpired, match="kept 30 s after it was written and not read"):
        lf.read_listing(path)
    assert sorted(os.listdir(tmp_path)) == ["listing", "listing.pid"]


def test_the_keep_is_counted_from_the_listing_written(tmp_path: Path) -> None:
    # a listing that took longer than the time it is kept is kept that time all the same
    path = str(tmp_path / "listing")
    lf.write_listing(path, _paged(fleet()[0]))
    clock = iter([100.0, 100.0, 120.0, 131.0])
    naps: list[float] = []
    taken = lf.keep_until_taken(path, 30, now=lambda: next(clock), sleep=naps.append)
    assert taken is False and len(naps) == 2


@pytest.mark.parametrize("why", ["no space", "stale part", "directory others may write"])
def test_a_listing_whose_expiry_cannot_be_written_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = str(folder / "listing")
    lf.mark_started(path)
    lf.write_listing(path, _paged(fleet()[0]))
    if why == "no space":

        def full(fd: int, data: bytes) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(lf, "write_fd", full)
    elif why == "stale part":
        Path(f"{path}.part").write_bytes(b"")
    else:
        folder.chmod(0o770)
    assert lf.keep_until_taken(path, 30, now=_clock(), sleep=lambda s: None) is False
    assert not os.path.lexists(path)
    # no half record: a part this process made is removed with its failure
    assert os.path.lexists(f"{path}.part") == (why == "stale part")
    # the process id file renamed marks the expiry: a reader lists the cluster itself
    assert os.path.lexists(f"{path}.expired") and not os.path.lexists(f"{path}.pid")
    if why != "directory others may write":  # refused as such first
        with pytest.raises(lf.ListingExpired, match="kept its time"):
            lf.wait_for_listing(path, 60)


@pytest.mark.parametrize("kept", ["10" + "0" * 400, "-5", "1e308", '"x"', "NaN"])
def test_an_expiry_record_of_an_odd_time_is_still_an_expiry(tmp_path: Path, kept: str) -> None:
    path = tmp_path / "listing"
    text = f'{{"expired_s":{kept},"pid":{os.getpid()}}}'.encode()
    path.write_bytes(lf.FORMAT + len(text).to_bytes(8, "big") + text)
    path.chmod(0o600)
    with pytest.raises(lf.ListingExpired, match="kept its time after"):
        lf.read_listing(str(path))


def test_a_directory_removed_while_the_time_ran_out_is_taken(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = str(folder / "listing")
    lf.write_listing(path, None, error=KubeError(None, "x"))
    ticks = iter([0.0, 0.0, 60.0])

    def now() -> float:  # the directory goes between the look and the replacing
        value = next(ticks)
        if value == 60.0:
            os.unlink(path)
            folder.rmdir()
        return value

    assert lf.keep_until_taken(path, 30, now=now, sleep=lambda s: None) is True
    assert not folder.exists()


def test_a_directory_removed_while_listing_fails_the_lister_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = str(folder / "listing")

    def listed(kube: Any, namespace: str, page_size: int) -> Listing:  # the checks ended
        os.unlink(f"{path}.pid")
        folder.rmdir()
        return fleet()[0]

    class Kube:
        requests, log = 7, ["GET /version 200"]

    monkeypatch.setattr(lf, "list_for_checks", listed)
    result = lf.list_to_file(Kube(), path)  # type: ignore[arg-type]
    assert result == {
        "failed": True,
        "msg": "the cluster listing cannot be written: cannot use the directory "
        f"{folder}: [Errno 2] No such file or directory: '{folder}'",
    }
    assert not folder.exists()
