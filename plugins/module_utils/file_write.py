"""File writing shared by the modules that edit files on a node."""

from __future__ import annotations

import os
import tempfile
import time


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
    if os.path.realpath(backup_dir) == os.path.realpath(os.path.dirname(path)):
        module.fail_json(
            msg=f"backup_dir={backup_dir} is the static pod directory; the kubelet would run "
            "the backup as a second static pod; fix: choose another directory "
            "(default /etc/kubernetes/tmp)"
        )
    os.makedirs(backup_dir, mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S~", time.localtime())
    dest = os.path.join(backup_dir, f"{os.path.basename(path)}.{os.getpid()}.{stamp}")
    module.preserved_copy(path, dest)
    return dest
