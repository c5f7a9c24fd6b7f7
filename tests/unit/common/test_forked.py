"""``common.forked.Forked``: a value computed in a child process is the value computed here,
and where a child cannot give it, it is computed here
(``plugins/module_utils/common/forked.py``)."""

from __future__ import annotations

import os
import threading
import time
from fractions import Fraction
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import forked

pytestmark = pytest.mark.unit

#: Forking needs a second CPU; CI's machines have two.
needs_two_cpus = pytest.mark.skipif(
    forked.spare_cpus() < 1, reason="one CPU: Forked computes in this process, no child"
)


def _pid_and(value: Any) -> dict[str, Any]:
    return {"pid": os.getpid(), "value": value}


@needs_two_cpus
def test_the_value_comes_from_a_child_process() -> None:
    job = forked.Forked(_pid_and, {"a": [1, 2.5, None, "x"]})
    assert job.forked
    got = job.result()
    assert got["value"] == {"a": [1, 2.5, None, "x"]}
    assert got["pid"] != os.getpid()
    with pytest.raises(ProcessLookupError):  # the child was waited for: no zombie left
        os.kill(got["pid"], 0)


def _fails(message: str) -> None:
    raise ValueError(message)


@needs_two_cpus
def test_a_child_that_raises_leaves_the_exception_to_the_parent() -> None:
    job = forked.Forked(_fails, "bad input")
    assert job.forked
    with pytest.raises(ValueError, match="bad input"):
        job.result()


@needs_two_cpus
def test_a_value_that_is_not_json_is_computed_here() -> None:
    job = forked.Forked(_pid_and, Fraction(1, 3))
    assert job.forked
    got = job.result()
    assert got == {"pid": os.getpid(), "value": Fraction(1, 3)}


def _dies() -> None:
    os._exit(9)


@needs_two_cpus
def test_a_child_that_dies_is_computed_again_here() -> None:
    def dies_in_child_only() -> str:
        if os.getpid() != parent:
            _dies()
        return "here"

    parent = os.getpid()
    assert forked.Forked(dies_in_child_only).result() == "here"


def test_no_child_beside_a_running_thread() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        job = forked.Forked(_pid_and, 1)
        assert not job.forked
        assert job.result() == {"pid": os.getpid(), "value": 1}
    finally:
        stop.set()
        thread.join()


def test_no_child_with_one_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "spare_cpus", lambda: 0)
    job = forked.Forked(_pid_and, 2)
    assert not job.forked
    assert job.result() == {"pid": os.getpid(), "value": 2}


def _sleeps() -> int:
    time.sleep(60)
    return 1


@needs_two_cpus
def test_a_value_not_taken_ends_its_child() -> None:
    job = forked.Forked(_sleeps)
    assert job.forked
    pid = job._pid
    started = time.monotonic()
    job.close()
    assert time.monotonic() - started < 5
    with pytest.raises(ProcessLookupError):  # killed and waited for
        os.kill(pid, 0)
    job.close()  # once is enough; again does nothing


def _prints() -> str:
    print("from the child " * 1000)  # more than a buffer: flushed to fd 1 in the child
    os.write(1, b"raw from the child\n")
    return "value"


@needs_two_cpus
def test_the_child_writes_nothing_to_the_output(capfd: pytest.CaptureFixture[str]) -> None:
    job = forked.Forked(_prints)
    assert job.forked and job.result() == "value"
    out, err = capfd.readouterr()
    assert "child" not in out and "child" not in err
