# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Work done in a forked child process while this one goes on: a computation over data
this process already holds (a listing of the cluster), on a second CPU.

``Forked(fn, *args)`` forks at once; the child computes ``fn(*args)``, whose value must
be JSON data, and sends it back through a pipe. ``result()`` gives that value. Where a
child cannot help or did not finish, ``result()`` computes ``fn(*args)`` here, so the
value (or the exception) is the same as without a child:

- no ``os.fork`` (not Linux or another Unix), one CPU for this process, or threads
  running besides this one (a child of a threaded process may hold a lock forever);
- the child raised, died, or sent what is not JSON.

The child shares this process's memory until either writes it (copy-on-write): it reads
the listing without a copy. It ends with ``os._exit``: no ``atexit`` handler, no flush of
buffers it inherited, and its standard output and error go nowhere (a module's output is
written once, by the parent). Standard library only: ``module_utils`` run on the control
host and managed hosts alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.files import (
    read_fd,
    write_fd,
)

__all__ = ["Forked", "spare_cpus"]

#: The child's first byte: the value follows; any other (or none), the child failed.
_OK = b"1"


def spare_cpus() -> int:
    """CPUs this process may run on besides the one it runs on (0 where unknown)."""
    try:
        return max(len(os.sched_getaffinity(0)) - 1, 0)
    except (AttributeError, OSError):
        return max((os.cpu_count() or 1) - 1, 0)


class Forked:
    """``fn(*args)`` computed in a child process forked now (see the module's text)."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self._fn = fn
        self._args = args
        self._pid = 0
        self._read = -1
        if not hasattr(os, "fork") or spare_cpus() < 1 or threading.active_count() > 1:
            return
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            return
        if pid == 0:  # the child: never returns
            os.close(read)
            _child(write, fn, args)
        os.close(write)
        self._pid, self._read = pid, read

    @property
    def forked(self) -> bool:
        """Whether a child computes the value."""
        return self._pid > 0

    def result(self) -> Any:
        """The value: the child's, or computed here (see the module's text)."""
        if self._pid > 0:
            data = read_fd(self._read)
            os.close(self._read)
            try:
                status = os.waitpid(self._pid, 0)[1]
            except ChildProcessError:  # SIGCHLD ignored: the system reaped it, status unknown
                status = -1
            self._pid, self._read = 0, -1
            if status == 0 and data[:1] == _OK:
                try:
                    return json.loads(data[1:])
                except ValueError:
                    pass
        return self._fn(*self._args)

    def close(self) -> None:
        """End the child if its value was not taken (``result``): killed and waited for."""
        if self._pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0)
            os.close(self._read)
            self._pid, self._read = 0, -1


def _child(write: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Compute, send and end the child (``os._exit``: 0 when the value was sent)."""
    code = 1
    try:
        # the parent's output is its own (a module's stdout holds its result alone)
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        sys.stdout = sys.stderr = os.fdopen(quiet, "w")  # and Python's, wherever they wrote
        write_fd(write, _OK + json.dumps(fn(*args), separators=(",", ":")).encode())
        code = 0
    except BaseException:  # whatever it is, the parent computes the value and meets it
        code = 1
    finally:
        os._exit(code)
