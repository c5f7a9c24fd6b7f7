"""File writing shared by the modules that edit files on a node: the diff Ansible shows,
the backup (beside the file, or outside the static pod directory), the atomic write."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time

#: The one special file an output may be: its writes go nowhere.
DEV_NULL = "/dev/null"


def not_a_regular_file(mode: int) -> str | None:
    """What a file of ``mode`` is when it is no regular file (``a directory``, ``a named
    pipe``...), else None."""
    for test, name in (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def read_fd(fd: int, chunk: int = 1 << 20) -> bytes:
    """Every byte left to read from the file descriptor ``fd`` (a file, a pipe)."""
    chunks = []
    while True:
        data = os.read(fd, chunk)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def write_fd(fd: int, data: bytes) -> None:
    """All of ``data`` to the file descriptor ``fd``, however many writes it takes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_output(module, option: str, path: str, text: str) -> None:
    """Write a report the run produced (``text``) to ``path``, the value of ``option``:
    through a temporary file of its own directory (a reader never sees half a report; the
    name is the system's, so nothing set up beforehand is followed), then one rename.
    Fails the module naming ``option``, the path and a fix when the path is a directory,
    pipe, socket or device (``/dev/null`` aside: nothing is written), or when it cannot be
    written."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or err
        module.fail_json(
            msg=f"{option}={path!r}: {reason}; fix: give a file path in a directory that "
            "exists or can be made"
        )
    kind = not_a_regular_file(mode) if mode is not None else None
    if kind and os.path.realpath(path) == DEV_NULL:
        return
    if kind:
        module.fail_json(
            msg=f"{option}={path!r} is {kind}; a report is written to a regular file; fix: "
            "give a file path (e.g. /var/log/gpufleet/validate.json)"
        )
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".gpufleet-")
    except OSError as err:
        module.fail_json(
            msg=f"{option}={path!r}: its directory cannot be written ({err.strerror}); "
            "fix: give a path in a writable directory"
        )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        module.fail_json(
            msg=f"{option}={path!r} cannot be written ({err.strerror}); fix: give a path in "
            "a writable directory"
        )


def write_atomic(module, path: str, text: str) -> None:
    """Replace ``path`` by ``text`` (UTF-8) in one rename, keeping its owner and mode.

    ``module`` is the running AnsibleModule: the temporary file goes to its tmpdir and
    ``module.atomic_move`` does the rename (it keeps ownership, mode and SELinux context).
    """
    fd, tmp = tempfile.mkstemp(dir=module.tmpdir)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    module.atomic_move(tmp, path)


def backup_outside(module, path: str, backup_dir: str) -> str:
    """Copy ``path`` into ``backup_dir`` under Ansible's backup name; return the copy's path.

    Static pod manifests are backed up outside their directory: the kubelet runs every
    file in it, so a backup left there would start a second static pod. Fails the module
    (naming ``backup_dir`` and the fix) when ``backup_dir`` is that directory.
    """
    refuse_static_pod_backup_dir(module, backup_dir, os.path.dirname(path))
    os.makedirs(backup_dir, mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S~", time.localtime())
    dest = os.path.join(backup_dir, f"{os.path.basename(path)}.{os.getpid()}.{stamp}")
    module.preserved_copy(path, dest)
    return dest


def refuse_static_pod_backup_dir(module, backup_dir: str, static_pod_dir: str, **result) -> None:
    """Fail the module (with ``result``) when ``backup_dir`` is the static pod directory:
    the kubelet runs every file in it, so a backup there would start a second static pod."""
    if os.path.realpath(backup_dir) == os.path.realpath(static_pod_dir):
        module.fail_json(
            msg=f"backup_dir={backup_dir} is the static pod directory; the kubelet would run "
            "the backup as a second static pod; fix: choose another directory "
            "(default /etc/kubernetes/tmp)",
            **result,
        )


def file_diff(path: str, before: str | None, after: str) -> dict:
    """Ansible's diff of one file (``--diff`` shows it): before ("" for a new file), after."""
    return {"before": before or "", "after": after, "before_header": path, "after_header": path}


def backup_and_write(
    module,
    path: str,
    after: str,
    *,
    backup: bool,
    backup_dir: str | None = None,
    new_file_mode: int | None = None,
) -> str | None:
    """Write ``after`` to ``path`` (atomically, :func:`write_atomic`), first backing up the
    file as it is when ``backup`` and it exists: into ``backup_dir`` when given
    (:func:`backup_outside`, for static pod manifests), else beside it
    (``module.backup_local``). With ``new_file_mode``, a missing directory is made (0755)
    and a new file gets that mode (else the rename's own). Returns the backup's path, or
    None when none was made. Nothing happens in check mode."""
    if module.check_mode:
        return None
    made = None
    if backup and os.path.exists(path):
        made = backup_outside(module, path, backup_dir) if backup_dir else module.backup_local(path)
    if new_file_mode is not None and not os.path.exists(path):
        directory = os.path.dirname(path)
        if directory and not os.path.isdir(directory):
            os.makedirs(directory, mode=0o755)
        with open(path, "w", encoding="utf-8"):
            pass
        os.chmod(path, new_file_mode)
    write_atomic(module, path, after)
    return made
